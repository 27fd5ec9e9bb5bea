// Model loading, tokenizer and model facts over libllama.
#include "editspec/engine.h"
#include "editspec/log.h"
#include "editspec/names.h"
#include "editspec/rpc.h"

#include "ggml-backend.h"
#include "gguf.h"

#include <atomic>
#include <cerrno>
#include <pthread.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sys/stat.h>

namespace editspec {

// -1 = every layer; set once at start-up (engine_set_gpu_layers), before any model is loaded
static int32_t g_gpu_layers = -1;

void engine_set_gpu_layers(int32_t n) {
    g_gpu_layers = n < 0 ? -1 : n;
}

int32_t engine_gpu_layers() {
    return g_gpu_layers;
}

void thread_name_set(const char * name) {
#ifdef __linux__
    pthread_setname_np(pthread_self(), name);
#else
    (void) name;
#endif
}

std::string thread_name_get() {
#ifdef __linux__
    char name[16] = {};
    if (pthread_getname_np(pthread_self(), name, sizeof(name)) == 0) return name;
#endif
    return "";
}

bool engine_has_gpu() {
    engine_init();
    for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
        ggml_backend_dev_t d = ggml_backend_dev_get(i);
        const auto t = ggml_backend_dev_type(d);
        const bool rpc = std::string(ggml_backend_reg_name(ggml_backend_dev_backend_reg(d))) == "RPC";
        if ((t == GGML_BACKEND_DEVICE_TYPE_GPU || t == GGML_BACKEND_DEVICE_TYPE_IGPU) && !rpc) return true;
    }
    return false;
}

bool engine_offloads() {
    return engine_has_gpu() || !engine_rpc_servers().empty();
}

static engine_kernels g_kernels = ENGINE_KERNELS_AUTO;
static int8_t g_kernels_exact = -1; // decided at the first model load on a GPU: 1 exact, 0 stock, -1 not yet

void engine_set_kernels(engine_kernels k) {
    g_kernels = k;
}

engine_kernels engine_kernels_chosen() {
    return g_kernels;
}

static constexpr named<engine_kernels> KERNELS[] = {
    {ENGINE_KERNELS_AUTO, "auto"}, {ENGINE_KERNELS_EXACT, "exact"}, {ENGINE_KERNELS_STOCK, "stock"}};

bool engine_kernels_parse(const std::string & name, engine_kernels & out) {
    return name_parse(KERNELS, name, out);
}

const char * engine_kernels_name(engine_kernels k) {
    return name_of(KERNELS, k);
}

// the setting with EDITSPEC_CUDA_EXACT standing in for a flag not given
static engine_kernels kernels_setting() {
    if (g_kernels != ENGINE_KERNELS_AUTO) return g_kernels;
    const char * v = std::getenv("EDITSPEC_CUDA_EXACT");
    if (v && *v) return std::string(v) == "0" ? ENGINE_KERNELS_STOCK : ENGINE_KERNELS_EXACT;
    return ENGINE_KERNELS_AUTO;
}

bool engine_cuda_exact() {
    if (g_kernels_exact >= 0) return g_kernels_exact == 1;
    return !engine_has_gpu() || kernels_setting() != ENGINE_KERNELS_STOCK;
}

// float weights (F32, F16, BF16: cuBLAS, which the exact mode leaves as it is) and the layer count,
// from the file's header, before its weights load
static void gguf_weights(const std::string & path, bool & float_weights, int32_t & n_layer) {
    float_weights = false;
    n_layer = -1;
    gguf_init_params gp = {/*no_alloc =*/true, /*ctx =*/nullptr};
    gguf_context * g = gguf_init_from_file(path.c_str(), gp);
    if (!g) return;
    const int64_t ft = gguf_find_key(g, "general.file_type");
    if (ft >= 0 && gguf_get_kv_type(g, ft) == GGUF_TYPE_UINT32) {
        const uint32_t t = gguf_get_val_u32(g, ft);
        float_weights = t == 0 || t == 1 || t == 32; // LLAMA_FTYPE_ALL_F32, MOSTLY_F16, MOSTLY_BF16
    }
    const int64_t arch = gguf_find_key(g, "general.architecture");
    if (arch >= 0 && gguf_get_kv_type(g, arch) == GGUF_TYPE_STRING) {
        const int64_t bc = gguf_find_key(g, (std::string(gguf_get_val_str(g, arch)) + ".block_count").c_str());
        if (bc >= 0 && gguf_get_kv_type(g, bc) == GGUF_TYPE_UINT32) n_layer = (int32_t) gguf_get_val_u32(g, bc);
    }
    gguf_free(g);
}

// the kernels, decided once, at the first model loaded onto a GPU; the batch-invariant mode's switches
// are read by ggml's CUDA kernels at their first run, which comes later
static void kernels_decide(const std::string & path) {
    if (g_kernels_exact >= 0 || g_gpu_layers == 0 || !engine_has_gpu()) return;
    bool float_weights = false;
    int32_t n_layer = -1;
    gguf_weights(path, float_weights, n_layer);
    const bool partial = g_gpu_layers >= 0 && (n_layer < 0 || g_gpu_layers <= n_layer);
    const engine_kernels k = kernels_setting();
    const bool exact = k == ENGINE_KERNELS_EXACT || (k == ENGINE_KERNELS_AUTO && !float_weights && !partial);
    g_kernels_exact = exact ? 1 : 0;
    if (exact) {
        setenv("GGML_CUDA_BATCH_INVARIANT", "1", 1);
        // a fused mat-mul picks mat-vec kernels for few tokens behind the mode's back; the patch's mode
        // keeps those off and the row-wise fusions (norm and multiply, rope and the cache write, adds) on,
        // but until that is measured exact on a GPU every fusion goes unless EDITSPEC_CUDA_FUSION=1
        const char * fusion = std::getenv("EDITSPEC_CUDA_FUSION");
        if (!fusion || std::strcmp(fusion, "1") != 0) setenv("GGML_CUDA_DISABLE_FUSION", "1", 1);
    }
    if (k == ENGINE_KERNELS_AUTO) {
        ES_LOG_INFO("kernels: %s (--kernels auto: %s)\n", exact ? "exact" : "stock",
                    exact ? "quantized weights, every layer on the GPU"
                    : float_weights ? "float weights go through cuBLAS, which the exact mode leaves as it is"
                                    : "only some layers on the GPU");
    }
}

static std::atomic<int8_t> g_argmax_outputs{-1}; // -1: EDITSPEC_DEVICE_ARGMAX decides at the first call

bool engine_argmax_outputs() {
    int8_t v = g_argmax_outputs.load(std::memory_order_relaxed);
    if (v < 0) {
        const char * e = std::getenv("EDITSPEC_DEVICE_ARGMAX");
        v = e && std::strcmp(e, "1") == 0 ? 1 : 0;
        g_argmax_outputs.store(v, std::memory_order_relaxed);
    }
    return v == 1;
}

void engine_set_argmax_outputs(bool on) {
    g_argmax_outputs.store(on ? 1 : 0, std::memory_order_relaxed);
}

bool engine_gpu_exact_attention() {
    return g_gpu_layers < 0 && engine_cuda_exact() && engine_has_gpu();
}

void engine_init() {
    static std::once_flag once;
    std::call_once(once, [] {
        // llama.cpp's CUDA graphs crash (an illegal instruction at cudaGraphLaunch) on speculative
        // passes of changing sizes, seen on an H200 (docs/gpu.md; llama.cpp issue 23811): off unless
        // EDITSPEC_CUDA_GRAPHS=1. CPU builds never read the variable.
        const char * graphs = std::getenv("EDITSPEC_CUDA_GRAPHS");
        if (!(graphs && std::string(graphs) == "1")) setenv("GGML_CUDA_DISABLE_GRAPHS", "1", 0);
        // with them on, one graph per pass shape (the CUDA patch's item 7): a single graph shared by passes of
        // changing sizes went back to eager passes and re-capture at each change
        else setenv("GGML_CUDA_GRAPH_KEY_SHAPE", "1", 0);
        // our batch-invariant CUDA mode (patches/ggml-cuda-batch-invariant.patch) is switched on by
        // kernels_decide, at the first model loaded onto a GPU (--kernels)
        log_install_llama_callback();
        llama_backend_init();
    });
}

// GGUF header: magic "GGUF", u32 version, u64 n_tensors, u64 n_kv
static bool gguf_precheck(const std::string & path, std::string & error) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
        error = "cannot open model file '" + path + "': " + strerror(errno);
        return false;
    }
    if (S_ISDIR(st.st_mode)) {
        error = "model path '" + path + "' is a directory, expected a GGUF file";
        return false;
    }
    FILE * f = fopen(path.c_str(), "rb");
    if (!f) {
        error = "cannot open model file '" + path + "': " + strerror(errno);
        return false;
    }
    char magic[4] = {0};
    uint32_t version = 0;
    size_t n = fread(magic, 1, 4, f);
    size_t nv = fread(&version, sizeof(version), 1, f);
    fclose(f);
    if (n < 4 || memcmp(magic, "GGUF", 4) != 0) {
        error = "'" + path + "' is not a GGUF file (bad magic";
        char hex[32];
        snprintf(hex, sizeof(hex), " 0x%02x%02x%02x%02x)", (uint8_t) magic[0], (uint8_t) magic[1],
                 (uint8_t) magic[2], (uint8_t) magic[3]);
        error += hex;
        return false;
    }
    if (nv != 1 || version < 2 || version > 3) {
        error = "'" + path + "': unsupported GGUF version " + std::to_string(version);
        return false;
    }
    return true;
}

static std::string meta_str(const llama_model * m, const char * key) {
    char buf[256];
    int32_t n = llama_model_meta_val_str(m, key, buf, sizeof(buf));
    return n < 0 ? std::string() : std::string(buf);
}

model_load_result model_load(const std::string & path, bool vocab_only) {
    engine_init();
    model_load_result r;
    if (!gguf_precheck(path, r.error)) {
        return r;
    }
    if (!vocab_only) kernels_decide(path);
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = vocab_only;
    mp.n_gpu_layers = g_gpu_layers; // ignored by a CPU-only build
    // a model's multi-token-prediction blocks (nextn layers), for the llama-draft-mtp drafter: skipped
    // by default; a small part of such a model (1 of MiMo-7B's 37 blocks), and mapped, not read, until
    // a head drafts
    mp.load_mtp = true;
    llama_model * lm = llama_model_load_from_file(path.c_str(), mp);
    if (!lm) {
        r.error = "failed to load model '" + path + "' (truncated or unsupported GGUF; EDITSPEC_LOG=info shows libllama's reason)";
        return r;
    }
    if (!vocab_only && g_gpu_layers != 0 && engine_has_gpu()) {
        // measured on an H200 (docs/gpu.md): exact with the batch-invariant mode, every layer on the
        // GPU and quantized matrices; float matrices (cuBLAS) and the stock kernels are not
        char desc[128];
        llama_model_desc(lm, desc, sizeof(desc));
        const std::string d = desc;
        const bool float_weights = d.find(" F16") != std::string::npos || d.find(" BF16") != std::string::npos ||
                                   d.find(" F32") != std::string::npos;
        if (!engine_gpu_exact_attention() || float_weights) {
            ES_LOG_WARN("'%s' on the GPU is not batch-exact (%s), so greedy speculative output can differ from plain "
                        "decoding at near-ties (`editspec check-exact` measures it; --gpu-layers 0 keeps the exact "
                        "CPU path)\n",
                        path.c_str(),
                        float_weights ? "float weights go through cuBLAS" :
                        !engine_cuda_exact() ? "stock kernels: --kernels exact for the exact mode" : "only some layers offloaded");
        }
    }
    std::unique_ptr<model> m(new model());
    m->model_ = lm;
    m->vocab_ = llama_model_get_vocab(lm);
    m->path_ = path;

    model_facts & f = m->facts_;
    f.arch = meta_str(lm, "general.architecture");
    char desc[256];
    llama_model_desc(lm, desc, sizeof(desc));
    f.desc = desc;
    const char * tmpl = llama_model_chat_template(lm, nullptr);
    f.chat_template = tmpl ? tmpl : "";
    f.n_vocab = llama_vocab_n_tokens(m->vocab_);
    f.n_ctx_train = llama_model_n_ctx_train(lm);
    f.n_layer = llama_model_n_layer(lm);
    f.n_embd = llama_model_n_embd(lm);
    f.n_params = vocab_only ? 0 : llama_model_n_params(lm);
    // libllama names sizes it has a label for ("1.3B"); a model of another size is "?B": its count instead
    if (const size_t q = f.desc.find(" ?B"); q != std::string::npos && f.n_params > 0) {
        char size[32];
        const double n = (double) f.n_params;
        snprintf(size, sizeof(size), n >= 1e9 ? " %.1fB" : n >= 1e6 ? " %.1fM" : " %.0fK",
                 n >= 1e9 ? n / 1e9 : n >= 1e6 ? n / 1e6 : n / 1e3);
        f.desc.replace(q, 3, size);
    }
    f.bos = llama_vocab_bos(m->vocab_);
    f.eos = llama_vocab_eos(m->vocab_);
    f.eot = llama_vocab_eot(m->vocab_);
    f.fim_pre = llama_vocab_fim_pre(m->vocab_);
    f.fim_suf = llama_vocab_fim_suf(m->vocab_);
    f.fim_mid = llama_vocab_fim_mid(m->vocab_);
    f.fim_spm = meta_str(lm, "editspec.fim_order") == "spm";
    f.add_bos = llama_vocab_get_add_bos(m->vocab_);
    f.recurrent = llama_model_is_recurrent(lm) || llama_model_is_hybrid(lm);

    r.model = std::move(m);
    return r;
}

model::~model() {
    if (model_) {
        llama_model_free(model_);
    }
}

std::string_view model::token_text(int32_t t) const {
    return llama_vocab_get_text(vocab_, t);
}

// at a byte F4-F7: llama.cpp's decoder (unicode_cpt_from_utf8) reads a 4-byte sequence there that decodes
// above U+10FFFF (without three continuation bytes it makes the byte U+FFFD itself)
static bool utf8_above_max_at(std::string_view s, size_t i) {
    if (i + 3 >= s.size()) return false;
    uint32_t cpt = (unsigned char) s[i] & 0x07;
    for (size_t k = 1; k <= 3; k++) {
        const unsigned char c = (unsigned char) s[i + k];
        if ((c & 0xc0) != 0x80) return false;
        cpt = cpt << 6 | (c & 0x3f);
    }
    return cpt > 0x10ffff;
}

bool tokenizer_safe_text(std::string_view text, std::string & out) {
    // llama.cpp reads such a sequence as a code point and throws, uncaught, out of llama_tokenize when it
    // writes it back ("invalid codepoint", unicode_cpt_to_utf8): a file holding those bytes aborted `editspec
    // apply` and `index` (fuzz-apply found it). A byte F4-F7 is never a continuation byte, so it starts a
    // sequence in llama.cpp's walk too: only those need reading.
    size_t done = 0; // text before it is in out
    bool any = false;
    for (size_t i = 0; i < text.size(); i++) {
        if ((unsigned char) text[i] < 0xf4 || (unsigned char) text[i] > 0xf7 || !utf8_above_max_at(text, i)) continue;
        if (!any) out.clear();
        any = true;
        out.append(text.substr(done, i - done)).append("\xEF\xBF\xBD");
        done = i + 1;
    }
    if (any) out.append(text.substr(done));
    return any;
}

token_vec model::tokenize(std::string_view text, bool add_special, bool parse_special) const {
    std::string safe;
    if (tokenizer_safe_text(text, safe)) text = safe;
    // a token is at least one byte, plus room for BOS/EOS
    token_vec out(text.size() + 4);
    int32_t n = llama_tokenize(vocab_, text.data(), (int32_t) text.size(), out.data(), (int32_t) out.size(),
                               add_special, parse_special);
    if (n < 0) {
        out.resize(-n);
        n = llama_tokenize(vocab_, text.data(), (int32_t) text.size(), out.data(), (int32_t) out.size(),
                           add_special, parse_special);
    }
    ES_ASSERT(n >= 0);
    out.resize(n);
    return out;
}

std::string model::token_to_piece(llama_token token, bool special) const {
    char buf[128];
    int32_t n = llama_token_to_piece(vocab_, token, buf, sizeof(buf), 0, special);
    if (n < 0) {
        std::string s(-n, '\0');
        n = llama_token_to_piece(vocab_, token, s.data(), (int32_t) s.size(), 0, special);
        s.resize(n < 0 ? 0 : n);
        return s;
    }
    return std::string(buf, n);
}

std::string model::detokenize(std::span<const llama_token> tokens, bool special) const {
    std::string s;
    for (llama_token t : tokens) {
        s += token_to_piece(t, special);
    }
    return s;
}

bool model::is_eog(llama_token token) const {
    return llama_vocab_is_eog(vocab_, token);
}

bool model_vocab_compatible(const model & a, const model & b, std::string * why) {
    const int32_t na = a.facts().n_vocab;
    const int32_t nb = b.facts().n_vocab;
    if (llama_vocab_type(a.vocab()) != llama_vocab_type(b.vocab())) {
        if (why) *why = "tokenizer types differ";
        return false;
    }
    if (na != nb) {
        if (why) *why = "vocabulary sizes differ: " + std::to_string(na) + " vs " + std::to_string(nb);
        return false;
    }
    for (int32_t i = 0; i < na; i++) {
        const char * ta = llama_vocab_get_text(a.vocab(), i);
        const char * tb = llama_vocab_get_text(b.vocab(), i);
        if (strcmp(ta, tb) != 0) {
            if (why) *why = "token " + std::to_string(i) + " differs: '" + ta + "' vs '" + tb + "'";
            return false;
        }
    }
    if (a.facts().bos != b.facts().bos || a.facts().eos != b.facts().eos) {
        if (why) *why = "BOS/EOS tokens differ";
        return false;
    }
    return true;
}

bool model_can_draft_for(const model & target, const model & draft, std::string * error) {
    std::string why;
    if (model_vocab_compatible(target, draft, &why)) {
        return true;
    }
    if (error) {
        *error = "draft model '" + draft.path() + "' cannot draft for target '" + target.path() +
                 "': vocabularies differ (" + why + ")";
    }
    return false;
}

} // namespace editspec
