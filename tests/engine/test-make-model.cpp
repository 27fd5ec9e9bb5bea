// make-model: shapes carry the released models' numbers, the files load and decode in llama.cpp
// with the real tokenizer, the bytes depend only on the seed, and failures leave no file behind.
#include "common/test-util.h"
#include "editspec/make-model.h"

#include <gtest/gtest.h>

#include "gguf.h"

#include <algorithm>
#include <cstring>
#include <dirent.h>
#include <filesystem>
#include <fstream>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

using namespace editspec;

namespace editspec {
// gtest prints a model_dims (found by argument-dependent lookup)
void PrintTo(const model_dims & d, std::ostream * os) {
    *os << "{vocab " << d.n_vocab << ", layers " << d.n_layer << ", embd " << d.n_embd << ", ff " << d.n_ff << ", heads "
        << d.n_head << "/" << d.n_head_kv << ", ctx " << d.n_ctx_train << "}";
}
} // namespace editspec

namespace {

// a fresh empty folder, removed with its files at the end of the test
struct temp_folder {
    std::string path;
    temp_folder() : path(::testing::TempDir() + "make-model-XXXXXX") {
        EXPECT_NE(mkdtemp(path.data()), nullptr) << path;
    }
    ~temp_folder() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
};

std::vector<std::string> dir_list(const std::string & dir) {
    std::vector<std::string> out;
    if (DIR * d = opendir(dir.c_str())) {
        while (dirent * e = readdir(d)) {
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
                out.push_back(e->d_name);
            }
        }
        closedir(d);
    }
    return out;
}

std::string file_read(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

bool file_exists(const std::string & path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
}

struct gguf_closer { void operator()(gguf_context * g) const { gguf_free(g); } };

std::unique_ptr<gguf_context, gguf_closer> gguf_open(const std::string & path) {
    gguf_init_params p = {/*.no_alloc =*/ true, /*.ctx =*/ nullptr};
    return std::unique_ptr<gguf_context, gguf_closer>(gguf_init_from_file(path.c_str(), p));
}

uint32_t gguf_u32(const gguf_context * g, const std::string & key) {
    const int64_t i = gguf_find_key(g, key.c_str());
    EXPECT_GE(i, 0) << key;
    return i < 0 ? 0 : gguf_get_val_u32(g, i);
}

float gguf_f32(const gguf_context * g, const std::string & key) {
    const int64_t i = gguf_find_key(g, key.c_str());
    EXPECT_GE(i, 0) << key;
    return i < 0 ? 0.0f : gguf_get_val_f32(g, i);
}

std::string gguf_str(const gguf_context * g, const std::string & key) {
    const int64_t i = gguf_find_key(g, key.c_str());
    return i < 0 ? "" : gguf_get_val_str(g, i);
}

token_vec greedy(context & ctx, const model & m, const std::string & prompt, int n) {
    ctx.kv_clear();
    const token_vec toks = m.tokenize(prompt, true, false);
    batch b(512, 1);
    EXPECT_TRUE(context_prefill(ctx, b, toks, 0, 0));
    const int32_t n_vocab = m.facts().n_vocab;
    const float * logits = ctx.logits(b.size() - 1);
    token_vec out;
    for (int i = 0; i < n; i++) {
        const llama_token best = (llama_token) (std::max_element(logits, logits + n_vocab) - logits);
        out.push_back(best);
        b.clear();
        b.add(best, (llama_pos) (toks.size() + i), {0}, true);
        if (!ctx.decode(b)) {
            ADD_FAILURE() << "decode failed at token " << i;
            break;
        }
        logits = ctx.logits(0);
    }
    return out;
}

// ----------------------------------------------------------------------------
// shapes


// numbers from the released config.json files
TEST(make_model_shape, real_hyperparameters) {
    const model_shape * ds = model_shape_find("deepseek-coder-1.3b");
    ASSERT_TRUE(ds);
    EXPECT_EQ(ds->arch, "llama");
    EXPECT_EQ(ds->vocab, "deepseek-coder");
    EXPECT_EQ(model_shape_dims(*ds), (model_dims{32256, 24, 2048, 5504, 16, 16, 16384}));
    EXPECT_EQ(ds->rope_freq_base, 100000.0f);
    EXPECT_EQ(ds->rope_scaling, LLAMA_ROPE_SCALING_TYPE_LINEAR);
    EXPECT_EQ(ds->rope_scaling_factor, 4.0f);
    EXPECT_EQ(ds->rms_eps, 1e-6f);
    EXPECT_FALSE(ds->qkv_bias);
    EXPECT_FALSE(ds->tied_output);

    const model_shape * ds7 = model_shape_find("deepseek-coder-6.7b");
    ASSERT_TRUE(ds7);
    EXPECT_EQ(model_shape_dims(*ds7), (model_dims{32256, 32, 4096, 11008, 32, 32, 16384}));
    EXPECT_EQ(ds7->rope_scaling_factor, 4.0f);

    const model_shape * qw = model_shape_find("qwen2.5-coder-1.5b");
    ASSERT_TRUE(qw);
    EXPECT_EQ(qw->arch, "qwen2");
    EXPECT_EQ(qw->vocab, "qwen2");
    EXPECT_EQ(model_shape_dims(*qw), (model_dims{151936, 28, 1536, 8960, 12, 2, 32768}));
    EXPECT_EQ(qw->rope_freq_base, 1000000.0f);
    EXPECT_EQ(qw->rope_scaling, LLAMA_ROPE_SCALING_TYPE_NONE);
    EXPECT_EQ(qw->rms_eps, 1e-6f);
    EXPECT_TRUE(qw->qkv_bias);
    EXPECT_TRUE(qw->tied_output);

    const model_shape * q3m = model_shape_find("qwen3-coder-30b-a3b");
    ASSERT_TRUE(q3m);
    EXPECT_EQ(q3m->arch, "qwen3moe");
    EXPECT_EQ(model_shape_dims(*q3m), (model_dims{151936, 48, 2048, 6144, 32, 4, 262144}));
    EXPECT_EQ(q3m->head_dim, 128u);
    EXPECT_EQ(q3m->rope_freq_base, 10000000.0f);
    EXPECT_TRUE(q3m->qk_norm);
    EXPECT_FALSE(q3m->qkv_bias);
    EXPECT_FALSE(q3m->tied_output);
    EXPECT_EQ(q3m->n_expert, 128u);
    EXPECT_EQ(q3m->n_expert_used, 8u);
    EXPECT_EQ(q3m->n_ff_exp, 768u);

    // Qwen3-Coder-Next's model card: 48 layers of 2048, 12 x (3 gated delta net + 1 attention), attention
    // 16 heads of 256 and 2 KV heads (rope on 64 of 256), linear attention 16 QK and 32 V heads of 128,
    // 512 experts of 512, 10 a token, one shared
    const model_shape * q3n = model_shape_find("qwen3-coder-next");
    ASSERT_TRUE(q3n);
    EXPECT_EQ(q3n->arch, "qwen3next");
    EXPECT_EQ(model_shape_dims(*q3n), (model_dims{151936, 48, 2048, 5120, 16, 2, 262144}));
    EXPECT_EQ(q3n->head_dim, 256u);
    EXPECT_EQ(q3n->full_attn_interval, 4u);
    EXPECT_EQ(q3n->ssm_k_heads, 16u);
    EXPECT_EQ(q3n->ssm_v_heads, 32u);
    EXPECT_EQ(q3n->ssm_state, 128u);
    EXPECT_EQ(q3n->n_expert, 512u);
    EXPECT_EQ(q3n->n_expert_used, 10u);
    EXPECT_EQ(q3n->n_ff_exp, 512u);
    EXPECT_EQ(q3n->n_ff_shexp, 512u);

    // the published sizes: 1.3B, 6.7B, 1.54B, 30.5B
    EXPECT_NEAR(model_shape_n_params(*ds) / 1e9, 1.35, 0.01);
    EXPECT_NEAR(model_shape_n_params(*ds7) / 1e9, 6.74, 0.01);
    EXPECT_NEAR(model_shape_n_params(*qw) / 1e9, 1.54, 0.01);
    EXPECT_NEAR(model_shape_n_params(*q3m) / 1e9, 30.53, 0.01);
    // "80B (79B non-embedding)": its two vocabulary matrices are 0.62B
    EXPECT_NEAR(model_shape_n_params(*q3n) / 1e9, 79.67, 0.01);
    EXPECT_NEAR((model_shape_n_params(*q3n) - 2.0 * 151936 * 2048) / 1e9, 79.05, 0.01);

    for (const model_shape & s : model_shapes()) {
        std::string err;
        EXPECT_TRUE(model_shape_validate(s, &err)) << err;
    }
    EXPECT_EQ(model_shape_find("deepseek-coder-33b"), nullptr);
}

TEST(make_model_shape, invalid_shapes_name_the_value) {
    model_shape s = *model_shape_find("tiny");
    std::string err;
    s.n_head = 5;  // 64 / 5 is not whole
    EXPECT_FALSE(model_shape_validate(s, &err));
    EXPECT_NE(err.find("5"), std::string::npos) << err;

    s = *model_shape_find("tiny");
    s.arch = "gpt2";
    EXPECT_FALSE(model_shape_validate(s, &err));
    EXPECT_NE(err.find("gpt2"), std::string::npos) << err;

    s = *model_shape_find("tiny-qwen3moe");
    s.n_expert_used = 9; // of 8
    EXPECT_FALSE(model_shape_validate(s, &err));
    EXPECT_NE(err.find("n_expert_used 9"), std::string::npos) << err;
    s.n_expert_used = 2;
    s.arch = "llama"; // experts on a dense arch
    EXPECT_FALSE(model_shape_validate(s, &err));
    EXPECT_NE(err.find("n_expert 8"), std::string::npos) << err;

    s = *model_shape_find("tiny-qwen35");
    EXPECT_TRUE(model_shape_validate(s, &err)) << err;
    s.ssm_v_heads = 3; // not a multiple of the 2 key heads
    EXPECT_FALSE(model_shape_validate(s, &err));
    EXPECT_NE(err.find(", 3)"), std::string::npos) << err;
    s = *model_shape_find("tiny-qwen35");
    s.arch = "qwen2"; // recurrent layers on an attention-only arch
    EXPECT_FALSE(model_shape_validate(s, &err));
    EXPECT_NE(err.find("full_attn_interval 4"), std::string::npos) << err;
    s = *model_shape_find("tiny-qwen3next");
    EXPECT_TRUE(model_shape_validate(s, &err)) << err;
    s.n_ff_shexp = 0; // Qwen3-Next's shared expert missing
    EXPECT_FALSE(model_shape_validate(s, &err));
    EXPECT_NE(err.find("n_ff_shexp 0"), std::string::npos) << err;
    s = *model_shape_find("tiny-mamba2");
    EXPECT_TRUE(model_shape_validate(s, &err)) << err;
    s.ssm_inner = 500; // not a multiple of its 8 heads
    EXPECT_FALSE(model_shape_validate(s, &err));
    EXPECT_NE(err.find("ssm_inner 500"), std::string::npos) << err;

    // fewer embedding rows than the tokenizer has tokens
    s = *model_shape_find("tiny");
    s.n_vocab = 1000;
    const temp_folder tmp;
    make_model_params p;
    p.out = tmp.path + "/small-vocab.gguf";
    EXPECT_FALSE(make_model_from_shape(s, p, &err));
    EXPECT_NE(err.find("1000"), std::string::npos) << err;
    EXPECT_FALSE(file_exists(p.out));
}

// ----------------------------------------------------------------------------
// the tiny models every test uses (made by the make-test-models fixture)

TEST(make_model_tiny, loads_with_the_shape) {
    for (const char * path : {test::tiny_model_path(), test::tiny_model_q8_path()}) {
        auto m = test::load_or_fail(path);
        ASSERT_TRUE(m);
        const model_shape * s = model_shape_find("tiny");
        EXPECT_EQ(m->facts().arch, "llama");
        EXPECT_EQ(m->facts().n_layer, (int32_t) s->n_layer);
        EXPECT_EQ(m->facts().n_embd, (int32_t) s->n_embd);
        EXPECT_EQ(m->facts().n_vocab, 32256);
        EXPECT_EQ(m->facts().n_ctx_train, 16384);
        EXPECT_EQ(m->facts().n_params, model_shape_n_params(*s));
    }
}

// the tokenizer is DeepSeek-Coder's, token for token
TEST(make_model_tiny, tokenizer_is_deepseek_coder) {
    auto m = test::load_or_fail(test::tiny_model_path());
    auto ref = test::load_or_fail(test::vocab_path("deepseek-coder"), true);
    ASSERT_TRUE(m && ref);
    const std::string text = "def add(a, b):\n    return a + b  # émoji 🙂\n\tx = [1, 2]\n";
    const token_vec a = m->tokenize(text, true, false);
    EXPECT_EQ(a, ref->tokenize(text, true, false));
    EXPECT_EQ(a.front(), 32013);  // <｜begin▁of▁sentence｜>
    EXPECT_EQ(m->detokenize(std::span(a).subspan(1)), text);
    std::string why;
    EXPECT_TRUE(model_vocab_compatible(*m, *ref, &why)) << why;
    EXPECT_EQ(m->facts().fim_pre, 32016);  // <｜fim▁begin｜>
    EXPECT_EQ(m->facts().eos, 32014);
}

void greedy_output_depends_on_context_of(const std::string & path);

// random weights, but greedy output follows the prompt and does not collapse into one token: the dense
// tiny model and the mixture of experts (whose router picks 2 of 8 experts a token)
TEST(make_model_tiny, greedy_output_depends_on_context) {
    for (const std::string path : {std::string(test::tiny_model_path()), test::typed_model_path("q8_0", "tiny-qwen3moe")}) {
        SCOPED_TRACE(path);
        greedy_output_depends_on_context_of(path);
    }
}

TEST(make_model_tiny, a_mixture_of_experts_and_a_hybrid_load_with_their_shapes) {
    for (const char * shape : {"tiny-qwen3moe", "tiny-qwen35", "tiny-qwen3next", "tiny-mamba2"}) {
        SCOPED_TRACE(shape);
        auto m = test::load_or_fail(test::typed_model_path("q4_k_m", shape));
        ASSERT_TRUE(m);
        const model_shape * s = model_shape_find(shape);
        EXPECT_EQ(m->facts().arch, s->arch);
        EXPECT_EQ(m->facts().n_layer, (int32_t) s->n_layer);
        EXPECT_EQ(m->facts().n_params, model_shape_n_params(*s));
        EXPECT_EQ(m->facts().recurrent, s->full_attn_interval > 0 || s->ssm_inner > 0);
    }
}

void greedy_output_depends_on_context_of(const std::string & path) {
    auto m = test::load_or_fail(path);
    ASSERT_TRUE(m);
    std::string err;
    context_params cp;
    cp.n_ctx = 512;
    auto ctx = context_create(*m, cp, &err);
    ASSERT_TRUE(ctx) << err;

    std::set<token_vec> outputs;
    for (const char * prompt : {"def hello():", "int main(void) {", "import numpy as np\n"}) {
        const token_vec out = greedy(*ctx, *m, prompt, 32);
        const std::set<llama_token> distinct(out.begin(), out.end());
        EXPECT_GE(distinct.size(), 16u) << prompt;  // no short loop
        outputs.insert(out);
    }
    EXPECT_EQ(outputs.size(), 3u);

    // same last tokens, different earlier context: the next token differs (not a bigram model)
    std::set<llama_token> nexts;
    for (const char * prompt : {"def f(a):\n    return", "class A:\n    def g(self):\n        return",
                                "while True:\n    if done:\n        return", "int f(void) { return"}) {
        nexts.insert(greedy(*ctx, *m, prompt, 1).at(0));
    }
    EXPECT_GE(nexts.size(), 3u);
}

// ----------------------------------------------------------------------------
// determinism and failures

TEST(make_model, same_seed_same_bytes_whatever_the_threads) {
    const temp_folder tmp;
    const std::string & dir = tmp.path;
    make_model_params p;
    p.shape = "tiny";
    p.type = GGML_TYPE_Q8_0;
    p.seed = 7;
    std::string err;
    p.out = dir + "/a.gguf";
    p.n_threads = 1;
    ASSERT_TRUE(make_model(p, &err)) << err;
    p.out = dir + "/b.gguf";
    p.n_threads = 2;
    ASSERT_TRUE(make_model(p, &err)) << err;
    p.out = dir + "/c.gguf";
    p.seed = 8;
    ASSERT_TRUE(make_model(p, &err)) << err;

    const std::string a = file_read(dir + "/a.gguf");
    EXPECT_GT(a.size(), 4u << 20);
    EXPECT_TRUE(a == file_read(dir + "/b.gguf"));
    const std::string c = file_read(dir + "/c.gguf");
    EXPECT_EQ(a.size(), c.size());
    EXPECT_FALSE(a == c);
    EXPECT_EQ(dir_list(dir).size(), 3u);  // no temporary files left
}

TEST(make_model, unwritable_path_leaves_nothing) {
    make_model_params p;
    p.shape = "tiny";
    p.out = "/nonexistent-editspec-dir/tiny.gguf";
    std::string err;
    EXPECT_FALSE(make_model(p, &err));
    EXPECT_NE(err.find("/nonexistent-editspec-dir/tiny.gguf"), std::string::npos) << err;

    // the output is a folder: the rename fails and the temporary file goes
    const temp_folder tmp;
    const std::string & dir = tmp.path;
    mkdir((dir + "/sub").c_str(), 0755);
    p.out = dir + "/sub";
    EXPECT_FALSE(make_model(p, &err));
    EXPECT_NE(err.find(p.out), std::string::npos) << err;
    EXPECT_EQ(dir_list(dir), std::vector<std::string>{"sub"});
    EXPECT_TRUE(dir_list(dir + "/sub").empty());
}

TEST(make_model, abort_leaves_nothing) {
    const temp_folder tmp;
    const std::string & dir = tmp.path;
    make_model_params p;
    p.shape = "tiny";
    p.out = dir + "/tiny.gguf";
    int calls = 0;
    p.on_progress = [&](float) { return ++calls < 2; };
    std::string err;
    EXPECT_FALSE(make_model(p, &err));
    EXPECT_NE(err.find("abort"), std::string::npos) << err;
    EXPECT_TRUE(dir_list(dir).empty());
}

TEST(make_model, unknown_shape_lists_the_known_ones) {
    const temp_folder tmp;
    make_model_params p;
    p.shape = "gpt-5";
    p.out = tmp.path + "/x.gguf";
    std::string err;
    EXPECT_FALSE(make_model(p, &err));
    EXPECT_NE(err.find("gpt-5"), std::string::npos) << err;
    EXPECT_NE(err.find("deepseek-coder-1.3b"), std::string::npos) << err;
    EXPECT_FALSE(file_exists(p.out));
}

// ----------------------------------------------------------------------------
// full-size shapes: header only (zero weights in a sparse file), so no gigabytes are generated,
// yet llama.cpp loads them and checks every tensor shape against the hyperparameters

TEST(make_model, full_size_shapes_load_in_llama) {
    const temp_folder tmp;
    const std::string & dir = tmp.path;
    for (const char * name : {"deepseek-coder-1.3b", "deepseek-coder-6.7b", "qwen2.5-coder-1.5b", "qwen3-coder-30b-a3b",
                              "qwen3-coder-next"}) {
        SCOPED_TRACE(name);
        const model_shape & s = *model_shape_find(name);
        make_model_params p;
        p.shape = name;
        p.out = dir + "/" + name + ".gguf";
        p.type = GGML_TYPE_Q8_0;
        p.header_only = true;
        std::string err;
        ASSERT_TRUE(make_model(p, &err)) << err;

        auto g = gguf_open(p.out);
        ASSERT_TRUE(g);
        const std::string a = s.arch;
        EXPECT_EQ(gguf_str(g.get(), "general.architecture"), a);
        EXPECT_EQ(gguf_str(g.get(), "general.name"), "editspec random " + s.name);
        EXPECT_GE(gguf_find_key(g.get(), "editspec.random_weights"), 0);
        EXPECT_EQ(gguf_u32(g.get(), "general.file_type"), (uint32_t) LLAMA_FTYPE_MOSTLY_Q8_0);
        EXPECT_EQ(gguf_u32(g.get(), a + ".block_count"), s.n_layer);
        EXPECT_EQ(gguf_u32(g.get(), a + ".embedding_length"), s.n_embd);
        EXPECT_EQ(gguf_u32(g.get(), a + ".feed_forward_length"), s.n_ff);
        EXPECT_EQ(gguf_u32(g.get(), a + ".attention.head_count"), s.n_head);
        EXPECT_EQ(gguf_u32(g.get(), a + ".attention.head_count_kv"), s.n_head_kv);
        EXPECT_EQ(gguf_u32(g.get(), a + ".context_length"), s.n_ctx_train);
        EXPECT_EQ(gguf_f32(g.get(), a + ".rope.freq_base"), s.rope_freq_base);
        EXPECT_EQ(gguf_f32(g.get(), a + ".attention.layer_norm_rms_epsilon"), s.rms_eps);
        // the vocabulary files carry the 6.7B's keys; only the shape's may be in the file
        const bool linear = s.rope_scaling == LLAMA_ROPE_SCALING_TYPE_LINEAR;
        EXPECT_EQ(gguf_str(g.get(), a + ".rope.scaling.type"), linear ? "linear" : "");
        if (linear) {
            EXPECT_EQ(gguf_f32(g.get(), a + ".rope.scaling.factor"), s.rope_scaling_factor);
        }
        const int64_t k_tokens = gguf_find_key(g.get(), "tokenizer.ggml.tokens");
        ASSERT_GE(k_tokens, 0);
        EXPECT_EQ(gguf_get_arr_n(g.get(), k_tokens), s.n_vocab);
        EXPECT_EQ(gguf_find_tensor(g.get(), "output.weight") >= 0, !s.tied_output);
        EXPECT_EQ(gguf_find_tensor(g.get(), "blk.0.attn_k.bias") >= 0, s.qkv_bias);
        const bool moe = s.n_expert > 0;
        const int64_t down = gguf_find_tensor(g.get(), moe ? "blk.0.ffn_down_exps.weight" : "blk.0.ffn_down.weight");
        ASSERT_GE(down, 0);
        EXPECT_EQ(gguf_get_tensor_type(g.get(), down), GGML_TYPE_Q8_0);
        if (moe) {
            EXPECT_EQ(gguf_u32(g.get(), a + ".expert_count"), s.n_expert);
            EXPECT_EQ(gguf_u32(g.get(), a + ".expert_used_count"), s.n_expert_used);
            EXPECT_EQ(gguf_u32(g.get(), a + ".expert_feed_forward_length"), s.n_ff_exp);
            EXPECT_EQ(gguf_u32(g.get(), a + ".attention.key_length"), s.head_dim);
            // (a hybrid rotates a quarter of each head)
            EXPECT_EQ(gguf_u32(g.get(), a + ".rope.dimension_count"), s.full_attn_interval > 0 ? s.head_dim / 4 : s.head_dim);
            EXPECT_EQ(gguf_get_tensor_type(g.get(), gguf_find_tensor(g.get(), "blk.0.ffn_gate_inp.weight")), GGML_TYPE_F32);
            const uint32_t attn = s.full_attn_interval > 0 ? s.full_attn_interval - 1 : 0; // the first attention layer
            EXPECT_GE(gguf_find_tensor(g.get(), ("blk." + std::to_string(attn) + ".attn_q_norm.weight").c_str()), 0);
            if (s.n_ff_shexp > 0) EXPECT_EQ(gguf_u32(g.get(), a + ".expert_shared_feed_forward_length"), s.n_ff_shexp);
            EXPECT_STREQ(gguf_get_arr_str(g.get(), gguf_find_key(g.get(), "tokenizer.ggml.tokens"), 151667), "<think>");
        }
        EXPECT_EQ(gguf_get_tensor_type(g.get(), gguf_find_tensor(g.get(), "blk.0.attn_norm.weight")), GGML_TYPE_F32);
        struct stat st;
        ASSERT_EQ(stat(p.out.c_str(), &st), 0);
        EXPECT_EQ((uint64_t) st.st_size, gguf_get_data_offset(g.get()) + model_shape_n_bytes(s, GGML_TYPE_Q8_0));
        if (s.arch == "qwen2") {
            // Qwen2.5's added tokens replace the padding of the Qwen1.5 vocabulary file
            EXPECT_STREQ(gguf_get_arr_str(g.get(), k_tokens, 151659), "<|fim_prefix|>");
            EXPECT_STREQ(gguf_get_arr_str(g.get(), k_tokens, 151665), "[PAD151665]");
        }

        // 6.7B, 30B and 80B: the tokenizer only (a full load maps 7, 32 or 85 GB); the others load whole
        const bool vocab_only = model_shape_n_params(s) > 5e9;
        auto m = test::load_or_fail(p.out, vocab_only);
        ASSERT_TRUE(m);
        EXPECT_EQ(m->facts().n_vocab, (int32_t) s.n_vocab);
        if (!vocab_only) {
            EXPECT_EQ(m->facts().n_layer, (int32_t) s.n_layer);
            EXPECT_EQ(m->facts().n_embd, (int32_t) s.n_embd);
            EXPECT_EQ(m->facts().n_ctx_train, (int32_t) s.n_ctx_train);
            EXPECT_EQ(m->facts().n_params, model_shape_n_params(s));
        }
        if (s.arch == "qwen2") {
            EXPECT_EQ(m->facts().fim_pre, 151659);
            EXPECT_FALSE(m->facts().add_bos);
        }
        m.reset();
        unlink(p.out.c_str());
    }
}

// a training pipeline's own shape: Qwen2 layout with more embedding rows than tokens
TEST(make_model, custom_shape_pads_the_vocabulary) {
    model_shape s = *model_shape_find("tiny-qwen2");
    s.name = "custom";
    model_shape_set_dims(s, {152000, 3, 96, 256, 6, 3, s.n_ctx_train});
    const temp_folder tmp;
    make_model_params p;
    p.out = tmp.path + "/custom.gguf";
    p.type = GGML_TYPE_F16;
    std::string err;
    ASSERT_TRUE(make_model_from_shape(s, p, &err)) << err;

    auto m = test::load_or_fail(p.out);
    ASSERT_TRUE(m);
    EXPECT_EQ(m->facts().arch, "qwen2");
    EXPECT_EQ(m->facts().n_vocab, 152000);
    EXPECT_EQ(m->facts().n_layer, 3);
    EXPECT_EQ(m->facts().n_params, model_shape_n_params(s));
    EXPECT_STREQ(llama_vocab_get_text(m->vocab(), 151999), "[PAD151999]");
    auto ref = test::load_or_fail(test::vocab_path("qwen2"), true);
    ASSERT_TRUE(ref);
    const std::string text = "fn main() {\n    println!(\"hi\");\n}\n";
    EXPECT_EQ(m->tokenize(text, true, false), ref->tokenize(text, true, false));

    context_params cp;
    cp.n_ctx = 256;
    auto ctx = context_create(*m, cp, &err);
    ASSERT_TRUE(ctx) << err;
    const token_vec out = greedy(*ctx, *m, text, 8);
    EXPECT_EQ(out.size(), 8u);
}

// ----------------------------------------------------------------------------
// the command line

TEST(make_model_cli, writes_and_lists) {
    const temp_folder tmp;
    const std::string & dir = tmp.path;
    const std::string out = dir + "/tiny-q4.gguf";
    std::string text;
    ASSERT_EQ(test::run_command(std::string(EDITSPEC_BIN) + " make-model --shape tiny --type q4_0 --seed 3 --out " + out + " 2>&1", &text), 0) << text;
    auto m = test::load_or_fail(out);
    ASSERT_TRUE(m);
    EXPECT_NE(m->facts().desc.find("Q4_0"), std::string::npos) << m->facts().desc;

    text.clear();
    ASSERT_EQ(test::run_command(std::string(EDITSPEC_BIN) + " make-model --list --type q8_0 2>&1", &text), 0) << text;
    for (const model_shape & s : model_shapes()) {
        EXPECT_NE(text.find(s.name), std::string::npos) << text;
    }
    EXPECT_NE(text.find("1.35B"), std::string::npos) << text;
}

TEST(make_model_cli, bad_input_exits_2_without_a_file) {
    const temp_folder tmp;
    const std::string & dir = tmp.path;
    const std::string bin = EDITSPEC_BIN;
    struct bad_case {
        std::string args;
        std::string named; // the message must name it
    };
    const bad_case cases[] = {
        {"--shape no-such-shape --out " + dir + "/x.gguf", "no-such-shape"},
        {"--shape tiny --type q5_k --out " + dir + "/x.gguf", "q5_k"},
        {"--shape tiny --seed -3 --out " + dir + "/x.gguf", "-3"},
        {"--shape tiny --out /nonexistent-editspec-dir/x.gguf", "/nonexistent-editspec-dir"},
        {"--shape tiny --out " + dir, dir},
        {"--shape tiny --vocab-dir /nonexistent-vocab --out " + dir + "/x.gguf", "/nonexistent-vocab"},
        {"--out " + dir + "/x.gguf", "--shape"},
    };
    for (const bad_case & c : cases) {
        std::string text;
        EXPECT_EQ(test::run_command(bin + " make-model " + c.args + " 2>&1", &text), 2) << c.args << "\n" << text;
        EXPECT_EQ(text.rfind("editspec make-model: error: ", 0), 0u) << text;
        EXPECT_NE(text.find(c.named), std::string::npos) << text;
        EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
    }
    EXPECT_TRUE(dir_list(dir).empty());
}

} // namespace
