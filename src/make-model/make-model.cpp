// make-model: random-weight GGUF models with real shapes and tokenizers (see make-model.h).
//
// File layout, written in one pass:
//
//   [ header: KV metadata + tensor infos, padded ]  <- gguf_get_meta_data of a no_alloc context
//   [ token_embd.weight ][pad][ blk.0.attn_norm.weight ][pad] ... [ output.weight ][pad]
//
// Each tensor is generated in chunks of rows; a chunk's values come from its own RNG stream keyed
// by (seed, tensor name, chunk index), so threads can take chunks in any order and the bytes stay
// the same. Chunks are grouped in slabs of <= 64 MB that are written one after the other. The shapes
// and the tensor plan: shapes.cpp.
#include "plan.h"
#include "editspec/make-model.h"
#include "editspec/log.h"

#include "gguf.h"
#include "llama.h"

#include <algorithm>
#include <tuple>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace editspec {

// ----------------------------------------------------------------------------
// random numbers: splitmix64 streams, one per (seed, tensor, chunk)

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t hash_name(const std::string & s) {
    uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a
    for (unsigned char c : s) {
        h = (h ^ c) * 0x100000001b3ULL;
    }
    return h;
}

// n values ~ N(0, std^2), approximated by the sum of four 16-bit uniforms (Irwin-Hall):
// mean 2, variance 1/3 in units of 65536
static void fill_normal(float * dst, int64_t n, uint64_t state, float std) {
    const float scale = std * std::sqrt(3.0f) / 65536.0f;
    for (int64_t i = 0; i < n; i++) {
        state += 0x9e3779b97f4a7c15ULL;
        const uint64_t r = mix64(state);
        const int64_t sum = (int64_t) (r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48);
        dst[i] = (float) (sum + 2 - 2 * 65536) * scale;
    }
}

// ----------------------------------------------------------------------------
// metadata

static void kv_copy(gguf_context * dst, const gguf_context * src, int64_t i) {
    const char * key = gguf_get_key(src, i);
    const gguf_type type = gguf_get_kv_type(src, i);
    switch (type) {
        case GGUF_TYPE_UINT8:   gguf_set_val_u8  (dst, key, gguf_get_val_u8  (src, i)); break;
        case GGUF_TYPE_INT8:    gguf_set_val_i8  (dst, key, gguf_get_val_i8  (src, i)); break;
        case GGUF_TYPE_UINT16:  gguf_set_val_u16 (dst, key, gguf_get_val_u16 (src, i)); break;
        case GGUF_TYPE_INT16:   gguf_set_val_i16 (dst, key, gguf_get_val_i16 (src, i)); break;
        case GGUF_TYPE_UINT32:  gguf_set_val_u32 (dst, key, gguf_get_val_u32 (src, i)); break;
        case GGUF_TYPE_INT32:   gguf_set_val_i32 (dst, key, gguf_get_val_i32 (src, i)); break;
        case GGUF_TYPE_FLOAT32: gguf_set_val_f32 (dst, key, gguf_get_val_f32 (src, i)); break;
        case GGUF_TYPE_UINT64:  gguf_set_val_u64 (dst, key, gguf_get_val_u64 (src, i)); break;
        case GGUF_TYPE_INT64:   gguf_set_val_i64 (dst, key, gguf_get_val_i64 (src, i)); break;
        case GGUF_TYPE_FLOAT64: gguf_set_val_f64 (dst, key, gguf_get_val_f64 (src, i)); break;
        case GGUF_TYPE_BOOL:    gguf_set_val_bool(dst, key, gguf_get_val_bool(src, i)); break;
        case GGUF_TYPE_STRING:  gguf_set_val_str (dst, key, gguf_get_val_str (src, i)); break;
        case GGUF_TYPE_ARRAY: {
            const gguf_type at = gguf_get_arr_type(src, i);
            const size_t n = gguf_get_arr_n(src, i);
            if (at == GGUF_TYPE_STRING) {
                std::vector<const char *> strs(n);
                for (size_t j = 0; j < n; j++) {
                    strs[j] = gguf_get_arr_str(src, i, j);
                }
                gguf_set_arr_str(dst, key, strs.data(), n);
            } else {
                gguf_set_arr_data(dst, key, at, gguf_get_arr_data(src, i), n);
            }
        } break;
        default: break;
    }
}

struct gguf_deleter { void operator()(gguf_context * g) const { gguf_free(g); } };
using gguf_ptr = std::unique_ptr<gguf_context, gguf_deleter>;
struct ggml_deleter { void operator()(ggml_context * c) const { ggml_free(c); } };
using ggml_ptr = std::unique_ptr<ggml_context, ggml_deleter>;

static int32_t ftype_of(ggml_type type) {
    switch (type) {
        case GGML_TYPE_F16:  return LLAMA_FTYPE_MOSTLY_F16;
        case GGML_TYPE_Q8_0: return LLAMA_FTYPE_MOSTLY_Q8_0;
        case GGML_TYPE_Q4_0: return LLAMA_FTYPE_MOSTLY_Q4_0;
        default:             return LLAMA_FTYPE_ALL_F32;
    }
}

// general.*, <arch>.* and editspec.* from the shape and the parameters
static void metadata_model(gguf_context * c, const model_shape & s, const make_model_params & p, int64_t n_vocab) {
    const std::string a = s.arch;
    gguf_set_val_str(c, "general.architecture", a.c_str());
    gguf_set_val_str(c, "general.name", ("editspec random " + s.name).c_str());
    gguf_set_val_u32(c, "general.file_type", ftype_of(p.type));
    gguf_set_val_u32(c, "general.quantization_version", GGML_QNT_VERSION);

    gguf_set_val_u32(c, (a + ".vocab_size").c_str(), (uint32_t) n_vocab);
    gguf_set_val_u32(c, (a + ".context_length").c_str(), s.n_ctx_train);
    gguf_set_val_u32(c, (a + ".embedding_length").c_str(), s.n_embd);
    gguf_set_val_u32(c, (a + ".block_count").c_str(), s.n_layer + s.n_nextn);
    gguf_set_val_u32(c, (a + ".feed_forward_length").c_str(), s.n_ff);
    gguf_set_val_u32(c, (a + ".attention.head_count").c_str(), s.n_head);
    gguf_set_val_u32(c, (a + ".attention.head_count_kv").c_str(), s.n_head_kv);
    gguf_set_val_f32(c, (a + ".attention.layer_norm_rms_epsilon").c_str(), s.rms_eps);
    gguf_set_val_f32(c, (a + ".rope.freq_base").c_str(), s.rope_freq_base);
    // qwen35 and qwen3next rotate a quarter of each head (partial_rotary_factor); qwen35 in the sections
    // of its multimodal rope (text tokens give every section the same position)
    const bool hybrid = s.full_attn_interval > 0;
    const uint32_t n_rot = hybrid ? model_shape_head_dim(s) / 4 : model_shape_head_dim(s);
    gguf_set_val_u32(c, (a + ".rope.dimension_count").c_str(), n_rot);
    if (a == "qwen35") {
        const int32_t third = (int32_t) n_rot / 6, sections[4] = {(int32_t) n_rot / 2 - 2 * third, third, third, 0};
        gguf_set_arr_data(c, (a + ".rope.dimension_sections").c_str(), GGUF_TYPE_INT32, sections, 4);
    }
    if (hybrid) {
        gguf_set_val_u32(c, (a + ".full_attention_interval").c_str(), s.full_attn_interval);
        gguf_set_val_u32(c, (a + ".ssm.conv_kernel").c_str(), s.ssm_conv);
        gguf_set_val_u32(c, (a + ".ssm.state_size").c_str(), s.ssm_state);
        gguf_set_val_u32(c, (a + ".ssm.group_count").c_str(), s.ssm_k_heads);
        gguf_set_val_u32(c, (a + ".ssm.time_step_rank").c_str(), s.ssm_v_heads);
        gguf_set_val_u32(c, (a + ".ssm.inner_size").c_str(), s.ssm_state * s.ssm_v_heads);
    }
    if (a == "mamba2") {
        gguf_set_val_u32(c, (a + ".ssm.conv_kernel").c_str(), s.ssm_conv);
        gguf_set_val_u32(c, (a + ".ssm.state_size").c_str(), s.ssm_state);
        gguf_set_val_u32(c, (a + ".ssm.group_count").c_str(), s.ssm_k_heads);
        gguf_set_val_u32(c, (a + ".ssm.time_step_rank").c_str(), s.ssm_v_heads);
        gguf_set_val_u32(c, (a + ".ssm.inner_size").c_str(), s.ssm_inner);
    }
    if (s.head_dim != 0) {
        gguf_set_val_u32(c, (a + ".attention.key_length").c_str(), s.head_dim);
        gguf_set_val_u32(c, (a + ".attention.value_length").c_str(), s.head_dim);
    }
    if (s.n_expert > 0) {
        gguf_set_val_u32(c, (a + ".expert_count").c_str(), s.n_expert);
        gguf_set_val_u32(c, (a + ".expert_used_count").c_str(), s.n_expert_used);
        gguf_set_val_u32(c, (a + ".expert_feed_forward_length").c_str(), s.n_ff_exp);
    }
    if (s.n_ff_shexp > 0) gguf_set_val_u32(c, (a + ".expert_shared_feed_forward_length").c_str(), s.n_ff_shexp);
    if (s.rope_scaling == LLAMA_ROPE_SCALING_TYPE_LINEAR) {
        gguf_set_val_str(c, (a + ".rope.scaling.type").c_str(), "linear");
        gguf_set_val_f32(c, (a + ".rope.scaling.factor").c_str(), s.rope_scaling_factor);
    }

    if (a == "mimo2") {
        // keys its loader requires: a window past the context (full attention), a pattern with the trunk
        // alternating full and windowed layers and the MTP blocks windowed (as MiMo's converter marks them)
        const uint32_t n_all = s.n_layer + s.n_nextn;
        gguf_set_val_u32(c, (a + ".nextn_predict_layers").c_str(), s.n_nextn);
        gguf_set_val_u32(c, (a + ".expert_feed_forward_length").c_str(), s.n_ff);
        gguf_set_val_u32(c, (a + ".attention.sliding_window").c_str(), s.n_ctx_train);
        std::vector<int32_t> swa(n_all);
        for (uint32_t il = 0; il < n_all; il++) swa[il] = il >= s.n_layer ? 1 : (int32_t) (il % 2);
        gguf_set_arr_data(c, (a + ".attention.sliding_window_pattern").c_str(), GGUF_TYPE_INT32, swa.data(), n_all);
    }

    if (a == "eagle3" || a == "dflash") {
        gguf_set_arr_data(c, (a + ".target_layers").c_str(), GGUF_TYPE_INT32, s.target_layers.data(), s.target_layers.size());
        if (a == "eagle3") gguf_set_val_u32(c, (a + ".target_hidden_size").c_str(), s.target_hidden);
        if (s.block_size > 0) gguf_set_val_u32(c, (a + ".block_size").c_str(), s.block_size);
    }

    gguf_set_val_bool(c, "editspec.random_weights", true);
    gguf_set_val_str(c, "editspec.shape", s.name.c_str());
    gguf_set_val_u64(c, "editspec.seed", p.seed);
}

// where the vocabulary file keeps its tokens, types and scores
struct vocab_keys {
    int64_t tokens = -1, types = -1, scores = -1;
    int64_t n_tok = 0; // tokens in the file
};

static bool vocab_keys_find(const gguf_context * voc, const std::string & vocab_path, vocab_keys & k, std::string * error) {
    k.tokens = gguf_find_key(voc, "tokenizer.ggml.tokens");
    k.types  = gguf_find_key(voc, "tokenizer.ggml.token_type");
    k.scores = gguf_find_key(voc, "tokenizer.ggml.scores");
    if (k.tokens < 0 || gguf_get_kv_type(voc, k.tokens) != GGUF_TYPE_ARRAY ||
        gguf_get_arr_type(voc, k.tokens) != GGUF_TYPE_STRING ||
        (k.types >= 0 && gguf_get_arr_type(voc, k.types) != GGUF_TYPE_INT32) ||
        (k.scores >= 0 && gguf_get_arr_type(voc, k.scores) != GGUF_TYPE_FLOAT32)) {
        *error = "vocabulary file '" + vocab_path + "' has no usable tokenizer.ggml.tokens/token_type/scores";
        return false;
    }
    k.n_tok = (int64_t) gguf_get_arr_n(voc, k.tokens);
    return true;
}

// tokenizer.*: the file's tokens, types and scores padded with [PAD<id>] as convert_hf_to_gguf.py
// does (USER_DEFINED, as in the llama.cpp vocabulary files), then the shape's overrides; the file's
// other tokenizer.* keys as they are
static void metadata_tokenizer(gguf_context * c, const gguf_context * voc, const vocab_keys & k, const model_shape & s,
                               int64_t n) {
    std::vector<std::string> tokens(n);
    std::vector<int32_t> types(n, LLAMA_TOKEN_TYPE_USER_DEFINED);
    std::vector<float> scores(n, -1000.0f);
    for (int64_t i = 0; i < n; i++) {
        tokens[i] = i < k.n_tok ? gguf_get_arr_str(voc, k.tokens, i) : "[PAD" + std::to_string(i) + "]";
    }
    if (k.types >= 0) {
        const int32_t * src = (const int32_t *) gguf_get_arr_data(voc, k.types);
        std::copy(src, src + std::min<int64_t>(k.n_tok, gguf_get_arr_n(voc, k.types)), types.begin());
    }
    if (k.scores >= 0) {
        const float * src = (const float *) gguf_get_arr_data(voc, k.scores);
        std::copy(src, src + std::min<int64_t>(k.n_tok, gguf_get_arr_n(voc, k.scores)), scores.begin());
    }
    for (const model_shape_token & t : s.tokens) {
        tokens[t.id] = t.text;
        types[t.id] = t.type;
    }
    for (int64_t i = 0; i < gguf_get_n_kv(voc); i++) {
        const char * key = gguf_get_key(voc, i);
        if (strncmp(key, "tokenizer.", 10) != 0) {
            continue;  // the file's general.* and <arch>.* keys describe another model
        }
        if (i == k.tokens) {
            std::vector<const char *> ptrs(n);
            for (int64_t j = 0; j < n; j++) {
                ptrs[j] = tokens[j].c_str();
            }
            gguf_set_arr_str(c, key, ptrs.data(), n);
        } else if (i == k.types) {
            gguf_set_arr_data(c, key, GGUF_TYPE_INT32, types.data(), n);
        } else if (i == k.scores) {
            gguf_set_arr_data(c, key, GGUF_TYPE_FLOAT32, scores.data(), n);
        } else {
            kv_copy(c, voc, i);
        }
    }
    if (s.add_bos >= 0) {
        gguf_set_val_bool(c, "tokenizer.ggml.add_bos_token", s.add_bos != 0);
    }
}

// the whole metadata: the model's keys, then tokenizer.* from the vocabulary file. Sets *n_vocab to
// the rows of token_embd.
static gguf_ptr metadata_build(const model_shape & s, const make_model_params & p, const std::string & vocab_path,
                               int64_t * n_vocab, std::string * error) {
    gguf_init_params gp = {/*.no_alloc =*/ true, /*.ctx =*/ nullptr};
    gguf_ptr voc(gguf_init_from_file(vocab_path.c_str(), gp));
    if (!voc) {
        *error = "cannot read vocabulary file '" + vocab_path + "' (missing or not GGUF)";
        return nullptr;
    }
    vocab_keys k;
    if (!vocab_keys_find(voc.get(), vocab_path, k, error)) {
        return nullptr;
    }
    const int64_t n = s.n_vocab == 0 ? k.n_tok : (int64_t) s.n_vocab;
    if (n < k.n_tok) {
        *error = "shape '" + s.name + "': n_vocab " + std::to_string(n) + " is less than the " +
                 std::to_string(k.n_tok) + " tokens of '" + vocab_path + "'";
        return nullptr;
    }
    for (const model_shape_token & t : s.tokens) {
        if (t.id >= n) {
            *error = "shape '" + s.name + "': token override id " + std::to_string(t.id) + " >= n_vocab " + std::to_string(n);
            return nullptr;
        }
    }
    *n_vocab = n;
    gguf_ptr g(gguf_init_empty());
    metadata_model(g.get(), s, p, n);
    metadata_tokenizer(g.get(), voc.get(), k, s, n);
    if (s.mask_token >= 0) gguf_set_val_u32(g.get(), "tokenizer.ggml.mask_token_id", (uint32_t) s.mask_token);
    return g;
}

// ----------------------------------------------------------------------------
// writing

constexpr int64_t CHUNK_ELEMS = 1 << 16;   // values per RNG stream (whole rows)
constexpr uint64_t SLAB_BYTES = 64u << 20; // output bytes generated before each write

// temporary file next to the output, removed unless committed
struct temp_file {
    std::string path;
    FILE * f = nullptr;
    bool committed = false;

    ~temp_file() {
        if (f) {
            fclose(f);
        }
        if (!path.empty() && !committed) {
            unlink(path.c_str());
        }
    }
};

// generates rows [row0, row0 + n_rows) of t into dst (n_rows * row size bytes), chunks shared by
// n_threads threads
static void slab_generate(const tensor_plan & t, uint64_t stream, int64_t row0, int64_t n_rows, uint8_t * dst,
                          int n_threads) {
    const int64_t rows_per_chunk = std::max<int64_t>(1, CHUNK_ELEMS / t.ne0);
    const size_t row_size = ggml_row_size(t.type, t.ne0);
    const int64_t c0 = row0 / rows_per_chunk;
    const int64_t c1 = (row0 + n_rows + rows_per_chunk - 1) / rows_per_chunk;
    std::atomic<int64_t> next{c0};

    auto work = [&]() {
        std::vector<float> buf(rows_per_chunk * t.ne0);  // [rows_per_chunk, ne0]
        for (int64_t ci = next++; ci < c1; ci = next++) {
            const int64_t r0 = ci * rows_per_chunk;
            const int64_t nr = std::min(rows_per_chunk, tensor_rows(t) - r0);
            float * x = t.type == GGML_TYPE_F32 ? (float *) (dst + (r0 - row0) * row_size) : buf.data();
            if (t.init == INIT_CONST) {
                std::fill(x, x + nr * t.ne0, t.scale);
            } else {
                fill_normal(x, nr * t.ne0, mix64(stream ^ mix64((uint64_t) ci + 1)), t.scale);
            }
            uint8_t * out = dst + (r0 - row0) * row_size;
            if (t.type == GGML_TYPE_F16) {
                ggml_fp32_to_fp16_row(x, (ggml_fp16_t *) out, nr * t.ne0);
            } else if (t.type != GGML_TYPE_F32) {
                ggml_quantize_chunk(t.type, x, out, 0, nr, t.ne0, nullptr);
            }
        }
    };
    const int n_workers = (int) std::min<int64_t>(n_threads, c1 - c0);
    std::vector<std::thread> workers;
    for (int i = 1; i < n_workers; i++) {
        workers.emplace_back(work);
    }
    work();
    for (auto & w : workers) {
        w.join();
    }
}

static bool make_model_written(const model_shape & s, const make_model_params & p, std::string * error);

// writes an F16 file next to p.out, then quantizes it to p.ftype with libllama (llama-quantize's
// code, so K-quant mixes put Q6_K where llama-quantize does)
static bool make_model_quantized(const model_shape & s, const make_model_params & p, std::string * error) {
    make_model_params f16 = p;
    f16.type = GGML_TYPE_F16;
    f16.ftype = -1;
    f16.out = p.out + ".f16-tmp";
    f16.on_progress = [&](float f) { return !p.on_progress || p.on_progress(0.5f * f); };
    struct remove_on_exit {
        std::string path;
        ~remove_on_exit() { unlink(path.c_str()); }
    } tmp{f16.out};
    if (!make_model_written(s, f16, error)) {
        return false;
    }
    if (p.header_only) {
        if (rename(f16.out.c_str(), p.out.c_str()) != 0) {
            if (error) *error = "cannot rename '" + f16.out + "' to '" + p.out + "': " + strerror(errno);
            return false;
        }
        return true;
    }
    llama_model_quantize_params qp = llama_model_quantize_default_params();
    qp.ftype = (llama_ftype) p.ftype;
    qp.nthread = p.n_threads > 0 ? p.n_threads : (int) std::max(1u, std::thread::hardware_concurrency());
    const std::string part = p.out + ".part";
    if (llama_model_quantize(f16.out.c_str(), part.c_str(), &qp) != 0) {
        unlink(part.c_str());
        if (error) *error = "llama_model_quantize failed on '" + f16.out + "' (EDITSPEC_LOG=info shows why)";
        return false;
    }
    if (rename(part.c_str(), p.out.c_str()) != 0) {
        if (error) *error = "cannot rename '" + part + "' to '" + p.out + "': " + strerror(errno);
        unlink(part.c_str());
        return false;
    }
    if (p.on_progress) {
        p.on_progress(1.0f);
    }
    return true;
}

bool make_model_from_shape(const model_shape & s, const make_model_params & p, std::string * error) {
    if (p.ftype >= 0) {
        return make_model_quantized(s, p, error);
    }
    return make_model_written(s, p, error);
}

// the vocabulary file for the shape, after checking what make_model_written can write
static bool make_model_check(const model_shape & s, const make_model_params & p, std::string & vocab_path, std::string & err) {
    if (!model_shape_validate(s, &err)) {
        return false;
    }
    if (p.type != GGML_TYPE_F32 && p.type != GGML_TYPE_F16 && p.type != GGML_TYPE_Q8_0 && p.type != GGML_TYPE_Q4_0) {
        err = std::string("type ") + ggml_type_name(p.type) + " not supported (f32, f16, q8_0, q4_0)";
        return false;
    }
    if (p.out.empty()) {
        err = "no output file given";
        return false;
    }
    const std::string vocab_dir = p.vocab_dir.empty() ? std::string(EDITSPEC_VOCAB_DIR) : p.vocab_dir;
    if (vocab_dir.empty()) {
        err = "no vocabulary folder: this build has no EDITSPEC_VOCAB_DIR, pass one (--vocab-dir)";
        return false;
    }
    vocab_path = vocab_dir + "/ggml-vocab-" + s.vocab + ".gguf";
    return true;
}

// adds the planned tensors' infos to the metadata; returns their padded bytes
static uint64_t tensors_add(gguf_context * meta, const std::vector<tensor_plan> & plan) {
    // tensor infos need ggml tensors; no_alloc: no data, only shapes and types
    ggml_init_params ip = {/*.mem_size =*/ ggml_tensor_overhead() * (plan.size() + 1), /*.mem_buffer =*/ nullptr,
                           /*.no_alloc =*/ true};
    ggml_ptr tctx(ggml_init(ip));
    uint64_t total = 0;
    for (const tensor_plan & t : plan) {
        ggml_tensor * x = t.n_dims == 1 ? ggml_new_tensor_1d(tctx.get(), t.type, t.ne0)
                        : t.n_dims == 2 ? ggml_new_tensor_2d(tctx.get(), t.type, t.ne0, t.ne1)
                                        : ggml_new_tensor_3d(tctx.get(), t.type, t.ne0, t.ne1, t.ne2);
        ggml_set_name(x, t.name.c_str());
        gguf_add_tensor(meta, x); // copies the info
        total += GGML_PAD(tensor_nbytes(t), gguf_get_alignment(meta));
    }
    return total;
}

// a file written under a temporary name in the target's folder and renamed when complete (atomic)
struct model_writer {
    const make_model_params & p;
    std::string & err;
    temp_file tmp;
    int fd = -1;
    uint64_t total = 0; // tensor bytes, padded

    bool open() {
        tmp.path = p.out + ".tmp-XXXXXX";
        fd = mkstemp(tmp.path.data());
        if (fd < 0) {
            err = "cannot create '" + tmp.path + "' for '" + p.out + "': " + strerror(errno);
            tmp.path.clear();
            return false;
        }
        fchmod(fd, 0644);  // mkstemp makes 0600; a model is for everyone to read
        tmp.f = fdopen(fd, "wb");
        if (!tmp.f) {
            close(fd);
            err = "cannot open '" + tmp.path + "': " + strerror(errno);
            return false;
        }
        return true;
    }

    bool write(const void * data, size_t n) {
        if (fwrite(data, 1, n, tmp.f) != n) {
            err = "cannot write '" + tmp.path + "': " + strerror(errno);
            return false;
        }
        return true;
    }

    bool progress(uint64_t done_bytes) {
        if (p.on_progress && !p.on_progress(total ? (float) ((double) done_bytes / total) : 1.0f)) {
            err = "aborted writing '" + p.out + "'";
            return false;
        }
        return true;
    }

    // zeros for every tensor without writing them: a hole on most file systems
    bool write_holes(size_t header_bytes) {
        fflush(tmp.f);
        if (ftruncate(fd, (off_t) (header_bytes + total)) != 0) {
            err = "cannot extend '" + tmp.path + "': " + strerror(errno);
            return false;
        }
        return true;
    }

    // every tensor's random values, slab by slab, each padded to the alignment
    bool write_tensors(const std::vector<tensor_plan> & plan, size_t align) {
        const int n_threads = p.n_threads > 0 ? p.n_threads : (int) std::max(1u, std::thread::hardware_concurrency());
        if (p.type != GGML_TYPE_F32 && p.type != GGML_TYPE_F16) {
            ggml_quantize_init(p.type);  // not thread-safe for every type: once, before the workers
        }
        std::vector<uint8_t> slab;
        const std::vector<uint8_t> zeros(align, 0);
        uint64_t written = 0;
        for (const tensor_plan & t : plan) {
            const size_t row_size = ggml_row_size(t.type, t.ne0);
            const int64_t rows_per_chunk = std::max<int64_t>(1, CHUNK_ELEMS / t.ne0);
            const int64_t rows_per_slab = rows_per_chunk * std::max<int64_t>(1, SLAB_BYTES / (rows_per_chunk * row_size));
            const uint64_t stream = mix64(mix64(p.seed) ^ hash_name(t.name));
            for (int64_t r0 = 0; r0 < tensor_rows(t); r0 += rows_per_slab) {
                const int64_t nr = std::min(rows_per_slab, tensor_rows(t) - r0);
                slab.resize(nr * row_size);
                slab_generate(t, stream, r0, nr, slab.data(), n_threads);
                if (!write(slab.data(), slab.size()) || !progress(written += slab.size())) {
                    return false;
                }
            }
            const size_t pad = GGML_PAD(tensor_nbytes(t), align) - tensor_nbytes(t);
            if (!write(zeros.data(), pad)) {
                return false;
            }
            written += pad;
        }
        ES_ASSERT(written == total);
        return true;
    }

    bool commit() {
        if (fflush(tmp.f) != 0 || fsync(fd) != 0) {
            err = "cannot write '" + tmp.path + "': " + strerror(errno);
            return false;
        }
        const int rc = fclose(tmp.f);
        tmp.f = nullptr;
        if (rc != 0) {
            err = "cannot close '" + tmp.path + "': " + strerror(errno);
            return false;
        }
        if (rename(tmp.path.c_str(), p.out.c_str()) != 0) {
            err = "cannot rename '" + tmp.path + "' to '" + p.out + "': " + strerror(errno);
            return false;
        }
        tmp.committed = true;
        return true;
    }
};

static bool make_model_written(const model_shape & s, const make_model_params & p, std::string * error) {
    std::string err, vocab_path;
    auto done = [&](bool r) {
        if (!r && error) *error = err;
        return r;
    };
    int64_t n_vocab = 0;
    gguf_ptr meta;
    if (!make_model_check(s, p, vocab_path, err) || !(meta = metadata_build(s, p, vocab_path, &n_vocab, &err))) {
        return done(false);
    }
    const std::vector<tensor_plan> plan = tensors_plan(s, n_vocab, p.type);
    model_writer w{p, err, {}};
    w.total = tensors_add(meta.get(), plan);
    std::vector<uint8_t> header(gguf_get_meta_size(meta.get()));
    gguf_get_meta_data(meta.get(), header.data());
    if (!w.open() || !w.progress(0) || !w.write(header.data(), header.size())) {
        return done(false);
    }
    const bool body = p.header_only ? w.write_holes(header.size()) : w.write_tensors(plan, gguf_get_alignment(meta.get()));
    if (!body || !w.commit()) {
        return done(false);
    }
    if (p.on_progress) {
        p.on_progress(1.0f);  // the file is complete: too late to abort
    }
    ES_LOG_INFO("%s: wrote %s (%s, %s, %lld tensors, %.1f MB)\n", __func__, p.out.c_str(), s.name.c_str(),
                ggml_type_name(p.type), (long long) plan.size(), (header.size() + w.total) / 1e6);
    return true;
}

bool make_model(const make_model_params & p, std::string * error) {
    const model_shape * s = model_shape_find(p.shape);
    if (!s) {
        if (error) {
            std::string names;
            for (const model_shape & x : model_shapes()) {
                names += (names.empty() ? "" : ", ") + x.name;
            }
            *error = "unknown shape '" + p.shape + "' (known: " + names + ")";
        }
        return false;
    }
    return make_model_from_shape(*s, p, error);
}

} // namespace editspec
