// make-model's shapes (make-model.h): the built-in ones, their checks and sizes, the weight types by
// name, and the tensor plan of a shape (plan.h).
#include "plan.h"

#include "gguf.h"
#include "llama.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace editspec {

// ----------------------------------------------------------------------------
// built-in shapes

static std::vector<model_shape_token> qwen25_added_tokens() {
    // Qwen2.5 tokenizer_config.json added_tokens_decoder, ids 151646..151664. The llama.cpp
    // vocabulary file is Qwen1.5's, which has [PAD<id>] there. Types as convert_hf_to_gguf.py
    // gives them: "<|...|>" looks special -> CONTROL, the rest USER_DEFINED.
    const char * names[] = {
        "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>", "<|box_end|>",
        "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
        "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>",
        "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
    };
    std::vector<model_shape_token> out;
    int32_t id = 151646;
    for (const char * n : names) {
        const bool control = n[1] == '|';
        out.push_back({id++, n, control ? LLAMA_TOKEN_TYPE_CONTROL : LLAMA_TOKEN_TYPE_USER_DEFINED});
    }
    return out;
}

model_dims model_shape_dims(const model_shape & s) {
    return {s.n_vocab, s.n_layer, s.n_embd, s.n_ff, s.n_head, s.n_head_kv, s.n_ctx_train};
}

void model_shape_set_dims(model_shape & s, const model_dims & d) {
    std::tie(s.n_vocab, s.n_layer, s.n_embd, s.n_ff, s.n_head, s.n_head_kv, s.n_ctx_train) =
        std::tie(d.n_vocab, d.n_layer, d.n_embd, d.n_ff, d.n_head, d.n_head_kv, d.n_ctx_train);
}

// a mixture of experts: n experts of ff, `used` a token, and a shared expert of shexp beside them (0 = none)
static void set_experts(model_shape & s, uint32_t n, uint32_t used, uint32_t ff, uint32_t shexp = 0) {
    s.n_expert = n;
    s.n_expert_used = used;
    s.n_ff_exp = ff;
    s.n_ff_shexp = shexp;
}

// a hybrid: every interval-th layer attention, the others a gated delta net of k_heads key and v_heads
// value heads of `state`, its convolution of conv taps
static void set_hybrid(model_shape & s, uint32_t interval, uint32_t conv, uint32_t state, uint32_t k_heads, uint32_t v_heads) {
    s.full_attn_interval = interval;
    s.ssm_conv = conv;
    s.ssm_state = state;
    s.ssm_k_heads = k_heads;
    s.ssm_v_heads = v_heads;
}

static std::vector<model_shape> shapes_build() {
    std::vector<model_shape> v;

    model_shape ds;  // deepseek-ai/deepseek-coder-1.3b-base config.json
    ds.name = "deepseek-coder-1.3b";
    ds.arch = "llama";
    ds.vocab = "deepseek-coder";
    ds.source = "deepseek-ai/deepseek-coder-1.3b-base";
    model_shape_set_dims(ds, {32256, 24, 2048, 5504, 16, 16, 16384});
    ds.rope_freq_base = 100000.0f;
    ds.rope_scaling = LLAMA_ROPE_SCALING_TYPE_LINEAR;
    ds.rope_scaling_factor = 4.0f;
    ds.rms_eps = 1e-6f;

    // another released model of a family: base's tokenizer, rope and norms, its own name, graph and sizes
    auto released = [](model_shape s, const char * name, const char * arch, const char * source, const model_dims & d) {
        s.name = name;
        s.arch = arch;
        s.source = source;
        model_shape_set_dims(s, d);
        return s;
    };
    // a released shape at toy size: 2 layers, 4 heads, its tokenizer, rope and norms
    auto toy = [](model_shape s, const char * name, const char * source, uint32_t n_embd, uint32_t n_ff,
                  uint32_t n_head_kv) {
        s.name = name;
        s.source = source;
        model_shape_set_dims(s, {s.n_vocab, 2, n_embd, n_ff, 4, n_head_kv, s.n_ctx_train});
        return s;
    };
    // a few MB, used by every test
    v.push_back(toy(ds, "tiny", "deepseek-coder-1.3b at toy size", 64, 192, 4));
    // the smallest shape whose rows K-quants (256-value super-blocks) and the 8-row repacked
    // kernels apply to: what the exactness tests run every weight type on
    v.push_back(toy(ds, "tiny-256", "deepseek-coder-1.3b at toy size, 256 wide", 256, 768, 4));

    model_shape qw;  // Qwen/Qwen2.5-Coder-1.5B config.json
    qw.name = "qwen2.5-coder-1.5b";
    qw.arch = "qwen2";
    qw.vocab = "qwen2";
    qw.source = "Qwen/Qwen2.5-Coder-1.5B";
    model_shape_set_dims(qw, {151936, 28, 1536, 8960, 12, 2, 32768}); // vocabulary: 151665 tokens padded
    qw.rope_freq_base = 1000000.0f;
    qw.rms_eps = 1e-6f;
    qw.qkv_bias = true;
    qw.tied_output = true;
    qw.add_bos = 0;
    qw.tokens = qwen25_added_tokens();

    v.push_back(toy(qw, "tiny-qwen2", "qwen2.5-coder-1.5b at toy size", 64, 192, 2));

    // MiMo-7B's numbers (XiaomiMiMo/MiMo-7B-Base config.json: 36 layers, 4096 wide, 32 heads, 8 KV
    // heads, 11008 FFN, Qwen2's tokenizer (151680 rows; here the 151936 of llama.cpp's Qwen2 vocabulary file),
    // one MTP block) on llama.cpp's mimo2 graph,
    // the dense model with MTP layers the pin can run: its attention with a window past the context
    // is MiMo-7B's full attention (mimo2 requires sliding-window keys)
    model_shape mimo = released(qw, "mimo-7b", "mimo2", "XiaomiMiMo/MiMo-7B-Base (on llama.cpp's mimo2 graph)",
                                {151936, 36, 4096, 11008, 32, 8, 32768});
    mimo.n_nextn = 1;
    mimo.qkv_bias = false;
    mimo.tied_output = false;
    // at toy size with deepseek-coder's tokenizer (32k rows instead of 152k: a test model of a few
    // MB), 256 wide so that K-quants apply
    auto deepseek_vocab = [&ds](model_shape s) {
        s.vocab = ds.vocab;
        s.n_vocab = ds.n_vocab;
        s.add_bos = -1;
        s.tokens.clear();
        return s;
    };
    v.push_back(deepseek_vocab(toy(mimo, "tiny-mimo2", "mimo2 (one MTP block) at toy size, deepseek-coder's tokenizer", 256, 768, 2)));

    // Qwen/Qwen3-Coder-30B-A3B-Instruct config.json: 48 layers, 2048 wide, 32 heads of 128 (wider than
    // 2048 / 32), 4 KV heads, per-head Q and K norms, 128 experts of 768, 8 a token, no tied output
    model_shape q3m = released(qw, "qwen3-coder-30b-a3b", "qwen3moe", "Qwen/Qwen3-Coder-30B-A3B-Instruct",
                               {151936, 48, 2048, 6144, 32, 4, 262144});
    q3m.head_dim = 128;
    q3m.rope_freq_base = 10000000.0f;
    q3m.qkv_bias = false;
    q3m.qk_norm = true;
    q3m.tied_output = false;
    set_experts(q3m, 128, 8, 768);
    int32_t id = q3m.tokens.back().id;
    for (const char * n : {"<tool_response>", "</tool_response>", "<think>", "</think>"}) {
        q3m.tokens.push_back({++id, n, LLAMA_TOKEN_TYPE_USER_DEFINED}); // Qwen3's additions to Qwen2.5's
    }
    // at toy size with deepseek-coder's tokenizer: 8 experts of 256, 2 a token, heads of 128 as the
    // released model's (the K-quants and the repacked kernels apply to every matrix)
    model_shape tiny_q3m = deepseek_vocab(toy(q3m, "tiny-qwen3moe", "qwen3-coder-30b-a3b at toy size, deepseek-coder's tokenizer",
                                              256, 768, 2));
    tiny_q3m.n_ctx_train = ds.n_ctx_train;
    set_experts(tiny_q3m, 8, 2, 256);
    v.push_back(tiny_q3m);

    // a hybrid at toy size with deepseek-coder's tokenizer: 4 layers (three gated delta net layers, then one
    // of attention, its gated Q twice as wide), 256 wide, heads of 64, recurrent heads of 64 (2 key, 4 value)
    auto hybrid_toy = [&](const model_shape & s, const char * name, const char * source) {
        model_shape t = deepseek_vocab(toy(s, name, source, 256, 768, 2));
        t.n_layer = 4;
        t.n_ctx_train = ds.n_ctx_train;
        t.head_dim = 64;
        set_hybrid(t, 4, 4, 64, 2, 4);
        return t;
    };
    // Qwen3.5's text layout: a model whose state cannot drop a token's cells as a KV cache does
    model_shape q35 = hybrid_toy(q3m, "tiny-qwen35", "Qwen3.5's hybrid layout at toy size, deepseek-coder's tokenizer");
    q35.arch = "qwen35";
    set_experts(q35, 0, 0, 0);
    v.push_back(q35);

    // Qwen3-Coder-Next (Qwen/Qwen3-Coder-Next's model card and config: Qwen3-Next's layout): 48 layers
    // 2048 wide, three gated delta net layers (16 key heads, 32 value heads of 128, 4 conv taps) then
    // one of attention (16 heads of 256, 2 KV heads, rope on 64 of 256), every one 512 experts of 512,
    // 10 a token, and a shared expert of 512; 80B parameters, 3B a token
    model_shape q3n = released(q3m, "qwen3-coder-next", "qwen3next", "Qwen/Qwen3-Coder-Next",
                               {151936, 48, 2048, 5120, 16, 2, 262144});
    q3n.head_dim = 256;
    set_hybrid(q3n, 4, 4, 128, 16, 32);
    set_experts(q3n, 512, 10, 512, 512);
    // at toy size: 8 experts of 256 and a shared one, 2 a token; a recurrent state llama.cpp cannot roll
    // back (context::checkpoints)
    model_shape tiny_q3n = hybrid_toy(q3n, "tiny-qwen3next", "qwen3-coder-next at toy size, deepseek-coder's tokenizer");
    set_experts(tiny_q3n, 8, 2, 256, 256);
    v.push_back(tiny_q3n);

    // Mamba-2 at toy size (Codestral Mamba's layout: every layer an SSM, channels twice the width, heads
    // of 64, 8 groups of B and C; here 4 layers 256 wide, 8 heads, 2 groups of 64), deepseek-coder's
    // tokenizer: a recurrent state llama.cpp cannot roll back, and no KV cache at all
    model_shape m2 = toy(ds, "tiny-mamba2", "Codestral Mamba's Mamba-2 layout at toy size", 256, 768, 4);
    m2.arch = "mamba2";
    m2.n_layer = 4;
    set_hybrid(m2, 0, 4, 64, 2, 8);
    m2.ssm_inner = 512;
    v.push_back(m2);

    // speculative head files for tiny-256 (llama.cpp's draft-eagle3, draft-dflash, draft-dspark): one
    // block as wide as the target, the target's tokenizer, token embeddings and output layer taken from
    // the target (llama.cpp's ctx_other); the 2-layer target's layer inputs 0 and 1 are what it offers
    model_shape eagle = toy(ds, "tiny-256-eagle3", "an EAGLE-3 head file for tiny-256", 256, 768, 4);
    eagle.arch = "eagle3";
    eagle.n_layer = 1;
    eagle.target_layers = {0, 1, 1};
    eagle.target_hidden = 256;
    v.push_back(eagle);
    model_shape dflash = toy(ds, "tiny-256-dflash", "a DFlash head file for tiny-256", 256, 768, 4);
    dflash.arch = "dflash";
    dflash.n_layer = 1;
    dflash.target_layers = {0, 1};
    dflash.target_hidden = 256;
    dflash.mask_token = (int32_t) ds.n_vocab - 1; // a [PAD] row: the vocabulary file has fewer tokens
    v.push_back(dflash);
    model_shape dspark = dflash;
    dspark.name = "tiny-256-dspark";
    dspark.source = "a DSpark head file (DFlash with a Markov head) for tiny-256";
    dspark.block_size = 16;
    dspark.markov_rank = 32;
    v.push_back(dspark);

    v.push_back(ds);

    // deepseek-ai/deepseek-coder-6.7b-base config.json
    v.push_back(released(ds, "deepseek-coder-6.7b", "llama", "deepseek-ai/deepseek-coder-6.7b-base",
                         {ds.n_vocab, 32, 4096, 11008, 32, 32, ds.n_ctx_train}));

    v.push_back(qw);
    v.push_back(mimo);
    v.push_back(q3m);
    v.push_back(q3n);
    return v;
}

const std::vector<model_shape> & model_shapes() {
    static const std::vector<model_shape> shapes = shapes_build();
    return shapes;
}

const model_shape * model_shape_find(const std::string & name) {
    for (const model_shape & s : model_shapes()) {
        if (s.name == name) {
            return &s;
        }
    }
    return nullptr;
}

bool model_shape_validate(const model_shape & s, std::string * error) {
    auto fail = [&](const std::string & msg) {
        if (error) *error = "shape '" + s.name + "': " + msg;
        return false;
    };
    if (s.arch != "llama" && s.arch != "qwen2" && s.arch != "qwen3moe" && s.arch != "qwen35" && s.arch != "qwen3next" &&
        s.arch != "mamba2" && s.arch != "mimo2" && s.arch != "eagle3" && s.arch != "dflash") {
        return fail("arch '" + s.arch + "' not supported (llama, qwen2, qwen3moe, qwen35, qwen3next, mamba2, mimo2, eagle3, dflash)");
    }
    if ((s.arch == "mamba2") != (s.ssm_inner > 0)) {
        return fail("an SSM's channels (ssm_inner " + std::to_string(s.ssm_inner) + ") go with arch mamba2 and only there");
    }
    if (s.arch == "mamba2" && (s.ssm_conv == 0 || s.ssm_state == 0 || s.ssm_k_heads == 0 || s.ssm_v_heads == 0 ||
                               s.ssm_inner % s.ssm_v_heads != 0 || s.ssm_inner % s.ssm_k_heads != 0)) {
        return fail("mamba2 needs ssm_conv, ssm_state, ssm_k_heads (groups) and ssm_v_heads (heads) > 0 and ssm_inner " +
                    std::to_string(s.ssm_inner) + " a multiple of heads and groups");
    }
    const bool hybrid = s.arch == "qwen35" || s.arch == "qwen3next";
    if (hybrid != (s.full_attn_interval > 0)) {
        return fail("recurrent layers (full_attn_interval " + std::to_string(s.full_attn_interval) +
                    ") go with arch qwen35 or qwen3next and only there");
    }
    if (hybrid && (s.ssm_conv == 0 || s.ssm_state == 0 || s.ssm_k_heads == 0 || s.ssm_v_heads == 0 ||
                               s.ssm_v_heads % s.ssm_k_heads != 0 || model_shape_head_dim(s) % 8 != 0 || !s.qk_norm)) {
        return fail(s.arch + " needs ssm_conv, ssm_state, ssm_k_heads and ssm_v_heads > 0 (got " + std::to_string(s.ssm_conv) +
                    ", " + std::to_string(s.ssm_state) + ", " + std::to_string(s.ssm_k_heads) + ", " +
                    std::to_string(s.ssm_v_heads) + "), value heads a multiple of key heads, heads a multiple of 8 "
                    "wide and Q/K norms");
    }
    if ((s.arch == "qwen3moe" || s.arch == "qwen3next") != (s.n_expert > 0)) {
        return fail("experts (n_expert " + std::to_string(s.n_expert) + ") go with arch qwen3moe or qwen3next and only there");
    }
    if ((s.arch == "qwen3next") != (s.n_ff_shexp > 0)) {
        return fail("a shared expert (n_ff_shexp " + std::to_string(s.n_ff_shexp) + ") goes with arch qwen3next and only there");
    }
    if (s.n_expert > 0 && (s.n_expert_used == 0 || s.n_expert_used > s.n_expert || s.n_ff_exp == 0)) {
        return fail("n_expert_used " + std::to_string(s.n_expert_used) + " must be in [1, n_expert " +
                    std::to_string(s.n_expert) + "] and n_ff_exp > 0 (got " + std::to_string(s.n_ff_exp) + ")");
    }
    if (s.arch == "eagle3" && (s.target_layers.size() != 3 || s.n_layer != 1 || s.target_hidden == 0)) {
        return fail("an eagle3 head has 1 block, 3 target layers and the target's width (target_hidden)");
    }
    if (s.arch == "dflash" && (s.target_layers.empty() || s.target_hidden != s.n_embd || s.mask_token < 0 ||
                               (s.markov_rank > 0 && s.block_size == 0))) {
        return fail("a dflash head reads 1+ target layers, is as wide as its target, has a mask token, and with a "
                    "Markov head (DSpark) a block size");
    }
    if (s.n_nextn > 0 && s.arch != "mimo2") {
        return fail("MTP blocks (n_nextn " + std::to_string(s.n_nextn) + ") need arch mimo2");
    }
    if (s.arch == "mimo2" && (s.tied_output || s.qkv_bias)) {
        return fail("mimo2 has an output layer of its own and no attention biases");
    }
    if (s.vocab.empty() || s.vocab.find('/') != std::string::npos) {
        return fail("vocab '" + s.vocab + "' must name a ggml-vocab-<vocab>.gguf file");
    }
    if (s.n_layer == 0 || s.n_layer > 512) {
        return fail("n_layer " + std::to_string(s.n_layer) + " out of range [1, 512]");
    }
    if (s.n_embd == 0 || s.n_ff == 0 || s.n_ctx_train == 0) {
        return fail("n_embd, n_ff and n_ctx_train must be > 0 (got " + std::to_string(s.n_embd) + ", " +
                    std::to_string(s.n_ff) + ", " + std::to_string(s.n_ctx_train) + ")");
    }
    if (s.n_head == 0 || (s.head_dim == 0 && s.n_embd % s.n_head != 0) || model_shape_head_dim(s) % 2 != 0) {
        return fail("n_head " + std::to_string(s.n_head) + " must divide n_embd " + std::to_string(s.n_embd) +
                    " (or head_dim be given) into heads of even size (rope)");
    }
    if (s.head_dim != 0 && (s.arch == "mimo2" || s.arch == "eagle3" || s.arch == "dflash")) {
        return fail("head_dim " + std::to_string(s.head_dim) + ": only llama, qwen2 and qwen3moe shapes take one");
    }
    if (s.n_head_kv == 0 || s.n_head % s.n_head_kv != 0) {
        return fail("n_head_kv " + std::to_string(s.n_head_kv) + " must divide n_head " + std::to_string(s.n_head));
    }
    if (s.n_vocab > (uint32_t) INT32_MAX) {
        return fail("n_vocab " + std::to_string(s.n_vocab) + " too large");
    }
    if (!(s.rope_freq_base > 0.0f) || !(s.rms_eps > 0.0f)) {
        return fail("rope_freq_base and rms_eps must be > 0");
    }
    if (s.rope_scaling != LLAMA_ROPE_SCALING_TYPE_NONE && s.rope_scaling != LLAMA_ROPE_SCALING_TYPE_LINEAR) {
        return fail("rope_scaling " + std::to_string((int) s.rope_scaling) + " not supported (none, linear)");
    }
    if (s.rope_scaling == LLAMA_ROPE_SCALING_TYPE_LINEAR && !(s.rope_scaling_factor > 0.0f)) {
        return fail("rope_scaling_factor " + std::to_string(s.rope_scaling_factor) + " must be > 0");
    }
    for (const model_shape_token & t : s.tokens) {
        if (t.id < 0 || (s.n_vocab > 0 && (uint32_t) t.id >= s.n_vocab) || t.text.empty()) {
            return fail("token override " + std::to_string(t.id) + " '" + t.text + "' out of range or empty");
        }
    }
    return true;
}

ggml_type make_model_type_from_name(const std::string & name) {
    if (name == "f32")  return GGML_TYPE_F32;
    if (name == "f16")  return GGML_TYPE_F16;
    if (name == "q8_0") return GGML_TYPE_Q8_0;
    if (name == "q4_0") return GGML_TYPE_Q4_0;
    return GGML_TYPE_COUNT;
}

static const std::vector<std::pair<std::string, llama_ftype>> & quantize_ftypes() {
    static const std::vector<std::pair<std::string, llama_ftype>> v = {
        {"q4_k_m", LLAMA_FTYPE_MOSTLY_Q4_K_M}, {"q4_k_s", LLAMA_FTYPE_MOSTLY_Q4_K_S},
        {"q5_k_m", LLAMA_FTYPE_MOSTLY_Q5_K_M}, {"q5_k_s", LLAMA_FTYPE_MOSTLY_Q5_K_S},
        {"q6_k", LLAMA_FTYPE_MOSTLY_Q6_K},     {"q5_0", LLAMA_FTYPE_MOSTLY_Q5_0},
        {"iq4_nl", LLAMA_FTYPE_MOSTLY_IQ4_NL}, {"bf16", LLAMA_FTYPE_MOSTLY_BF16},
    };
    return v;
}

int32_t make_model_ftype_from_name(const std::string & name) {
    for (const auto & [n, f] : quantize_ftypes()) {
        if (n == name) return (int32_t) f;
    }
    return -1;
}

std::string make_model_type_names() {
    std::string s = "f32, f16, q8_0, q4_0";
    for (const auto & [n, f] : quantize_ftypes()) {
        s += ", " + n;
    }
    return s;
}

// ----------------------------------------------------------------------------
// tensor plan: name, shape, type and init of every tensor, in file order

// Init: approximately as trained models start, with two changes found by measuring greedy output
// on tiny to 24-layer shapes (distinct tokens in 96, next token of contexts with the same end):
// - attn_output at 0.3x: random attention is near-uniform, and at full scale its context average
//   swamps the current token, so greedy output settles into a loop of one token (also on the 1.3B)
// - output_norm scales logits to std LOGIT_STD, tied or not: top-1 probability ~0.4 with the
//   DeepSeek vocabulary instead of a flat 0.001, so sampling is not uniform noise
constexpr float LOGIT_STD = 5.0f;

// a qwen35 or qwen3next layer's mixer (qwen35.cpp, qwen3next.cpp at the pin): attention with a gated Q on
// every full_attn_interval-th layer, else the gated delta net's projections, convolution, decay (ssm_a < 0),
// step bias and norm (qwen3next: its beta and alpha projections in one matrix)
template <typename Mat, typename Vec>
static void plan_hybrid_mixer(const model_shape & s, const std::string & p, uint32_t il, std::vector<tensor_plan> & v,
                              Mat & mat, Vec & vec) {
    const int64_t n_embd = s.n_embd, head_dim = model_shape_head_dim(s);
    const float lecun_embd = 1.0f / std::sqrt((float) n_embd);
    if ((il + 1) % s.full_attn_interval == 0) {
        mat(p + "attn_q.weight", n_embd, 2 * head_dim * s.n_head, lecun_embd); // query and gate
        mat(p + "attn_k.weight", n_embd, head_dim * s.n_head_kv, lecun_embd);
        mat(p + "attn_v.weight", n_embd, head_dim * s.n_head_kv, lecun_embd);
        vec(p + "attn_q_norm.weight", head_dim, INIT_CONST, 1.0f);
        vec(p + "attn_k_norm.weight", head_dim, INIT_CONST, 1.0f);
        mat(p + "attn_output.weight", head_dim * s.n_head, n_embd, 0.3f / std::sqrt((float) (head_dim * s.n_head)));
        return;
    }
    const int64_t key_dim = (int64_t) s.ssm_state * s.ssm_k_heads, value_dim = (int64_t) s.ssm_state * s.ssm_v_heads;
    mat(p + "attn_qkv.weight", n_embd, 2 * key_dim + value_dim, lecun_embd);
    mat(p + "attn_gate.weight", n_embd, value_dim, lecun_embd);
    mat(p + "ssm_conv1d.weight", s.ssm_conv, 2 * key_dim + value_dim, 1.0f / std::sqrt((float) s.ssm_conv));
    v.back().type = GGML_TYPE_F32; // ggml's SSM_CONV takes F32 taps (converters keep them so)
    vec(p + "ssm_dt.bias", s.ssm_v_heads, INIT_CONST, 1.0f);
    vec(p + "ssm_a", s.ssm_v_heads, INIT_CONST, -1.0f);
    if (s.arch == "qwen3next") {
        mat(p + "ssm_ba.weight", n_embd, 2 * s.ssm_v_heads, lecun_embd);
    } else {
        mat(p + "ssm_beta.weight", n_embd, s.ssm_v_heads, lecun_embd);
        mat(p + "ssm_alpha.weight", n_embd, s.ssm_v_heads, lecun_embd);
    }
    vec(p + "ssm_norm.weight", s.ssm_state, INIT_CONST, 1.0f);
    mat(p + "ssm_out.weight", value_dim, n_embd, 0.3f / std::sqrt((float) value_dim));
}

std::vector<tensor_plan> tensors_plan(const model_shape & s, int64_t n_vocab, ggml_type type) {
    const int64_t n_embd    = s.n_embd;
    const int64_t head_dim  = model_shape_head_dim(s);
    const int64_t n_embd_q  = head_dim * s.n_head;    // n_embd unless head_dim says otherwise
    const int64_t n_embd_kv = head_dim * s.n_head_kv;
    const int64_t n_ff      = s.n_ff;

    std::vector<tensor_plan> v;
    // 1-D tensors stay F32; a row size the block size does not divide falls back to F16, as
    // llama-quantize does
    auto mat = [&](const std::string & name, int64_t ne0, int64_t ne1, float std) {
        ggml_type t = ne0 % ggml_blck_size(type) == 0 ? type : GGML_TYPE_F16;
        v.push_back({name, ne0, ne1, 2, t, INIT_NORMAL, std});
    };
    auto vec = [&](const std::string & name, int64_t ne0, init_kind init, float scale) {
        v.push_back({name, ne0, 1, 1, GGML_TYPE_F32, init, scale});
    };
    // n_expert matrices of ne1 rows each, one 3-D tensor (ffn_*_exps)
    auto experts = [&](const std::string & name, int64_t ne0, int64_t ne1, float std) {
        mat(name, ne0, ne1, std);
        v.back().n_dims = 3;
        v.back().ne2 = s.n_expert;
    };
    auto lecun = [](int64_t fan_in) { return 1.0f / std::sqrt((float) fan_in); };

    const float std_embd = 0.02f;
    const float std_out  = s.tied_output ? std_embd : lecun(n_embd);

    // a head file (eagle3.cpp, dflash.cpp at the pin): fc maps the target's layer states to its width;
    // EAGLE-3's block attends over [normed embedding; normed state] (twice as wide), DFlash's over
    // its own state with per-head Q and K norms; no token_embd or output (the target's)
    if (s.arch == "eagle3" || s.arch == "dflash") {
        const bool eagle = s.arch == "eagle3";
        const int64_t n_in = (int64_t) s.target_layers.size() * (eagle ? (int64_t) s.target_hidden : n_embd);
        mat("fc.weight", n_in, n_embd, lecun(n_in));
        if (!eagle) vec("enc.output_norm.weight", n_embd, INIT_CONST, 1.0f);
        vec("output_norm.weight", n_embd, INIT_CONST, 1.0f);
        if (s.markov_rank > 0) {
            mat("markov_w1.weight", s.markov_rank, n_vocab, lecun(s.markov_rank));
            mat("markov_w2.weight", s.markov_rank, n_vocab, lecun(s.markov_rank));
        }
        const int64_t n_attn_in = eagle ? 2 * n_embd : n_embd;
        for (uint32_t il = 0; il < s.n_layer; il++) {
            const std::string p = "blk." + std::to_string(il) + ".";
            vec(p + "attn_norm.weight", n_embd, INIT_CONST, 1.0f);
            if (eagle) vec(p + "attn_norm_2.weight", n_embd, INIT_CONST, 1.0f);
            mat(p + "attn_q.weight", n_attn_in, n_embd, lecun(n_attn_in));
            mat(p + "attn_k.weight", n_attn_in, n_embd_kv, lecun(n_attn_in));
            mat(p + "attn_v.weight", n_attn_in, n_embd_kv, lecun(n_attn_in));
            mat(p + "attn_output.weight", n_embd, n_embd, 0.3f * lecun(n_embd));
            if (!eagle) {
                vec(p + "attn_q_norm.weight", head_dim, INIT_CONST, 1.0f);
                vec(p + "attn_k_norm.weight", head_dim, INIT_CONST, 1.0f);
            }
            vec(p + "ffn_norm.weight", n_embd, INIT_CONST, 1.0f);
            mat(p + "ffn_gate.weight", n_embd, n_ff, lecun(n_embd));
            mat(p + "ffn_up.weight", n_embd, n_ff, lecun(n_embd));
            mat(p + "ffn_down.weight", n_ff, n_embd, lecun(n_ff));
        }
        return v;
    }

    // mamba2 (mamba2.cpp at the pin): per layer a norm, the input projection (z, x, B, C and dt in one
    // matrix), the convolution's F32 taps and bias, dt's bias, the decay A < 0 and skip D per head (2-D
    // [1, heads]), the grouped norm and the output projection
    if (s.arch == "mamba2") {
        const int64_t d_inner = s.ssm_inner, n_head = s.ssm_v_heads, conv_dim = d_inner + 2 * (int64_t) s.ssm_k_heads * s.ssm_state;
        mat("token_embd.weight", n_embd, n_vocab, std_embd);
        for (uint32_t il = 0; il < s.n_layer; il++) {
            const std::string p = "blk." + std::to_string(il) + ".";
            vec(p + "attn_norm.weight", n_embd, INIT_CONST, 1.0f);
            mat(p + "ssm_in.weight", n_embd, d_inner + conv_dim + n_head, lecun(n_embd));
            mat(p + "ssm_conv1d.weight", s.ssm_conv, conv_dim, 1.0f / std::sqrt((float) s.ssm_conv));
            v.back().type = GGML_TYPE_F32; // ggml's SSM_CONV takes F32 taps
            vec(p + "ssm_conv1d.bias", conv_dim, INIT_CONST, 0.0f);
            vec(p + "ssm_dt.bias", n_head, INIT_CONST, 0.0f);
            v.push_back({p + "ssm_a", 1, n_head, 2, GGML_TYPE_F32, INIT_CONST, -1.0f});
            v.push_back({p + "ssm_d", 1, n_head, 2, GGML_TYPE_F32, INIT_CONST, 1.0f});
            v.push_back({p + "ssm_norm.weight", d_inner / s.ssm_k_heads, s.ssm_k_heads, 2, GGML_TYPE_F32, INIT_CONST, 1.0f});
            mat(p + "ssm_out.weight", d_inner, n_embd, 0.3f * lecun(d_inner));
        }
        vec("output_norm.weight", n_embd, INIT_CONST, LOGIT_STD / (std_out * std::sqrt((float) n_embd)));
        if (!s.tied_output) mat("output.weight", n_embd, n_vocab, std_out);
        return v;
    }

    // mimo2: Q, K and V in one matrix (its MTP graph requires it), and after the trunk the MTP blocks:
    // a decoder block fed eh_proj(concat(enorm(embedding of the next token), hnorm(the trunk's state)))
    const bool fused_qkv = s.arch == "mimo2";
    mat("token_embd.weight", n_embd, n_vocab, std_embd);
    for (uint32_t il = 0; il < s.n_layer + s.n_nextn; il++) {
        const std::string p = "blk." + std::to_string(il) + ".";
        vec(p + "attn_norm.weight", n_embd, INIT_CONST, 1.0f);
        const bool hybrid = s.full_attn_interval > 0;
        if (hybrid) {
            plan_hybrid_mixer(s, p, il, v, mat, vec);
        } else if (fused_qkv) {
            mat(p + "attn_qkv.weight", n_embd, n_embd_q + 2 * n_embd_kv, lecun(n_embd));
        } else {
            mat(p + "attn_q.weight", n_embd, n_embd_q, lecun(n_embd));
            mat(p + "attn_k.weight", n_embd, n_embd_kv, lecun(n_embd));
            mat(p + "attn_v.weight", n_embd, n_embd_kv, lecun(n_embd));
        }
        if (s.qkv_bias) {
            vec(p + "attn_q.bias", n_embd_q, INIT_NORMAL, 0.02f);
            vec(p + "attn_k.bias", n_embd_kv, INIT_NORMAL, 0.02f);
            vec(p + "attn_v.bias", n_embd_kv, INIT_NORMAL, 0.02f);
        }
        if (s.qk_norm && !hybrid) {
            vec(p + "attn_q_norm.weight", head_dim, INIT_CONST, 1.0f);
            vec(p + "attn_k_norm.weight", head_dim, INIT_CONST, 1.0f);
        }
        if (!hybrid) mat(p + "attn_output.weight", n_embd_q, n_embd, 0.3f * lecun(n_embd_q));
        vec(p + (hybrid ? "post_attention_norm.weight" : "ffn_norm.weight"), n_embd, INIT_CONST, 1.0f);
        if (s.n_expert > 0) {
            // the router at 4x LeCun: its softmax picks a few experts clearly, as a trained router does
            mat(p + "ffn_gate_inp.weight", n_embd, s.n_expert, 4.0f * lecun(n_embd));
            v.back().type = GGML_TYPE_F32; // llama-quantize keeps the router in F32
            experts(p + "ffn_gate_exps.weight", n_embd, s.n_ff_exp, lecun(n_embd));
            experts(p + "ffn_up_exps.weight", n_embd, s.n_ff_exp, lecun(n_embd));
            experts(p + "ffn_down_exps.weight", s.n_ff_exp, n_embd, lecun(s.n_ff_exp));
            if (s.n_ff_shexp > 0) {
                // the shared expert's gate: one sigmoid a token (a vector; ggml's mul_mat reads it F32)
                vec(p + "ffn_gate_inp_shexp.weight", n_embd, INIT_NORMAL, lecun(n_embd));
                mat(p + "ffn_gate_shexp.weight", n_embd, s.n_ff_shexp, lecun(n_embd));
                mat(p + "ffn_up_shexp.weight", n_embd, s.n_ff_shexp, lecun(n_embd));
                mat(p + "ffn_down_shexp.weight", s.n_ff_shexp, n_embd, lecun(s.n_ff_shexp));
            }
        } else {
            mat(p + "ffn_gate.weight", n_embd, n_ff, lecun(n_embd));
            mat(p + "ffn_up.weight", n_embd, n_ff, lecun(n_embd));
            mat(p + "ffn_down.weight", n_ff, n_embd, lecun(n_ff));
        }
        if (il >= s.n_layer) {
            mat(p + "nextn.eh_proj.weight", 2 * n_embd, n_embd, lecun(2 * n_embd));
            vec(p + "nextn.enorm.weight", n_embd, INIT_CONST, 1.0f);
            vec(p + "nextn.hnorm.weight", n_embd, INIT_CONST, 1.0f);
        }
    }
    // the normed state has RMS 1, so logits = output . (gamma * normed) have std gamma * std_out * sqrt(n_embd)
    vec("output_norm.weight", n_embd, INIT_CONST, LOGIT_STD / (std_out * std::sqrt((float) n_embd)));
    if (!s.tied_output) {
        mat("output.weight", n_embd, n_vocab, std_out);
    }
    return v;
}

uint64_t tensor_nbytes(const tensor_plan & t) {
    return ggml_row_size(t.type, t.ne0) * (uint64_t) tensor_rows(t);
}

uint32_t model_shape_head_dim(const model_shape & s) {
    return s.head_dim != 0 ? s.head_dim : s.n_head != 0 ? s.n_embd / s.n_head : 0;
}

uint64_t model_shape_n_params(const model_shape & s) {
    uint64_t n = 0;
    for (const tensor_plan & t : tensors_plan(s, s.n_vocab, GGML_TYPE_F32)) {
        n += (uint64_t) t.ne0 * tensor_rows(t);
    }
    return n;
}

uint64_t model_shape_n_bytes(const model_shape & s, ggml_type type) {
    uint64_t n = 0;
    for (const tensor_plan & t : tensors_plan(s, s.n_vocab, type)) {
        n += GGML_PAD(tensor_nbytes(t), GGUF_DEFAULT_ALIGNMENT);
    }
    return n;
}

} // namespace editspec
