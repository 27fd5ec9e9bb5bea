// editspec make-model: write a GGUF with random weights, a real model's hyperparameters and its
// real tokenizer (see include/editspec/make-model.h).
#include "cli/commands.h"
#include "editspec/make-model.h"

#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sys/stat.h>
#include <unistd.h>

namespace editspec::cli {

namespace {

struct make_model_opts {
    std::string shape;
    std::string out;
    std::string type = "f16";
    std::string vocab_dir = EDITSPEC_VOCAB_DIR;
    std::string seed = "1"; // parsed here: CLI11 would wrap "-3" to 2^64-3
    int32_t threads = 0;
    bool list = false;
    bool header_only = false;
    int32_t layers = 0;
};

// large shapes report progress; smaller ones are done before anyone would look
constexpr uint64_t PROGRESS_MIN_BYTES = 64u << 20;

volatile sig_atomic_t g_interrupted = 0;

void on_sigint(int) { g_interrupted = 1; }

std::string format_count(uint64_t n) {
    char buf[32];
    if (n >= 1000000000ull) {
        snprintf(buf, sizeof(buf), "%.2fB", n / 1e9);
    } else if (n >= 1000000ull) {
        snprintf(buf, sizeof(buf), "%.1fM", n / 1e6);
    } else {
        snprintf(buf, sizeof(buf), "%.1fK", n / 1e3);
    }
    return buf;
}

std::string format_bytes(uint64_t n) {
    char buf[32];
    if (n >= 1000000000ull) {
        snprintf(buf, sizeof(buf), "%.2f GB", n / 1e9);
    } else {
        snprintf(buf, sizeof(buf), "%.1f MB", n / 1e6);
    }
    return buf;
}

int run_list(ggml_type type, const std::string & type_name) {
    printf("%-20s %-9s %6s %6s %6s %5s %4s %7s %6s %8s %10s  %-15s %s\n", "shape", "arch", "layers", "n_embd", "n_ff",
           "heads", "kv", "vocab", "ctx", "params", (type_name + " size").c_str(), "tokenizer", "source");
    for (const model_shape & s : model_shapes()) {
        printf("%-20s %-9s %6u %6u %6u %5u %4u %7u %6u %8s %10s  %-15s %s\n", s.name.c_str(), s.arch.c_str(), s.n_layer,
               s.n_embd, s.n_ff, s.n_head, s.n_head_kv, s.n_vocab, s.n_ctx_train,
               format_count(model_shape_n_params(s)).c_str(), format_bytes(model_shape_n_bytes(s, type)).c_str(),
               s.vocab.c_str(), s.source.c_str());
    }
    return 0;
}

// the folder of `path` exists and is writable, and path is not a folder
bool out_path_check(const std::string & path, std::string & error) {
    struct stat st;
    if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        error = "--out '" + path + "' is a directory, expected a file name";
        return false;
    }
    const size_t slash = path.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
    if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        error = "--out '" + path + "': folder '" + dir + "' does not exist";
        return false;
    }
    if (access(dir.c_str(), W_OK) != 0) {
        error = "--out '" + path + "': folder '" + dir + "' is not writable: " + strerror(errno);
        return false;
    }
    return true;
}

// the shape and the writer's parameters from the options; 0 or the exit status of the error
int make_model_params_from(const make_model_opts & o, model_shape & shape, make_model_params & p) {
    const char * cmd = "make-model";
    if (o.shape.empty()) {
        return fail_input(cmd, "--shape is required (--list shows the shapes)");
    }
    const model_shape * found = model_shape_find(o.shape);
    if (!found) {
        std::string names;
        for (const model_shape & s : model_shapes()) {
            names += (names.empty() ? "" : ", ") + s.name;
        }
        return fail_input(cmd, "unknown shape '" + o.shape + "' (known: " + names + ")");
    }
    shape = *found;
    if (o.layers != 0) {
        // the first layers of a real shape: its per-layer costs on a machine too small for all of it
        const uint32_t n_min = std::max(1u, shape.full_attn_interval); // (a hybrid keeps an attention layer)
        if (o.layers < (int32_t) n_min || o.layers > (int32_t) shape.n_layer || shape.n_nextn > 0 || shape.n_layer == 1) {
            return fail_input(cmd, "--layers " + std::to_string(o.layers) + " out of range for '" + shape.name + "' [" +
                                       std::to_string(n_min) + ", " + std::to_string(shape.n_layer) + "]" +
                                       (shape.n_nextn > 0 ? " (a shape with MTP blocks keeps them all)" : ""));
        }
        shape.name += "-" + std::to_string(o.layers) + "-of-" + std::to_string(shape.n_layer) + "-layers";
        shape.n_layer = (uint32_t) o.layers;
    }
    if (o.out.empty()) {
        return fail_input(cmd, "--out is required");
    }
    const char * s = o.seed.c_str();
    char * end = nullptr;
    errno = 0;
    p.seed = strtoull(s, &end, 10);
    if (o.seed.empty() || !isdigit((unsigned char) s[0]) || *end != '\0' || errno == ERANGE) {
        return fail_input(cmd, "--seed '" + o.seed + "' is not an integer in [0, 2^64)");
    }
    if (o.threads < 0 || o.threads > 1024) {
        return fail_input(cmd, "--threads " + std::to_string(o.threads) + " out of range [0, 1024]");
    }
    if (o.vocab_dir.empty()) {
        return fail_input(cmd, "no vocabulary folder: this build has no default, pass --vocab-dir");
    }
    const std::string vocab_path = o.vocab_dir + "/ggml-vocab-" + shape.vocab + ".gguf";
    if (access(vocab_path.c_str(), R_OK) != 0) {
        return fail_input(cmd, "vocabulary file '" + vocab_path + "' not readable: " + strerror(errno) +
                                   " (--vocab-dir)");
    }
    std::string error;
    if (!out_path_check(o.out, error)) {
        return fail_input(cmd, error);
    }
    p.out = o.out;
    p.vocab_dir = o.vocab_dir;
    p.n_threads = o.threads;
    p.header_only = o.header_only;
    return 0;
}

// writes the model with progress on stderr for large files; Ctrl-C aborts through the progress
// callback, which removes the temporary file
bool make_model_with_progress(const model_shape & shape, make_model_params & p, std::string & error) {
    const uint64_t n_bytes = model_shape_n_bytes(shape, p.type);
    const bool show = n_bytes >= PROGRESS_MIN_BYTES && !p.header_only;
    const bool tty = isatty(fileno(stderr));
    int last = -1;
    p.on_progress = [&](float f) {
        if (show) {
            // a tty gets one updating line; a log gets a line every 10%
            const int pct = (int) (f * 100.0f);
            if (tty ? pct != last : pct / 10 != last / 10) {
                fprintf(stderr, tty ? "\reditspec make-model: %3d%% of %s" : "editspec make-model: %3d%% of %s\n", pct,
                        format_bytes(n_bytes).c_str());
                last = pct;
            }
        }
        return g_interrupted == 0;
    };
    g_interrupted = 0;
    struct sigaction sa = {}, old_int = {}, old_term = {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    const bool ok = make_model_from_shape(shape, p, &error);
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    if (show && tty) {
        fprintf(stderr, "\n");
    }
    if (!ok && g_interrupted) {
        error = "interrupted; '" + p.out + "' not written";
    }
    return ok;
}

int run_make_model(const make_model_opts & o) {
    const char * cmd = "make-model";
    const int32_t ftype = make_model_ftype_from_name(o.type);
    // a llama-quantize type is written as F16 first
    const ggml_type type = ftype >= 0 ? GGML_TYPE_F16 : make_model_type_from_name(o.type);
    if (type == GGML_TYPE_COUNT) {
        return fail_input(cmd, "--type '" + o.type + "' not one of " + make_model_type_names());
    }
    if (o.list) {
        return run_list(type, o.type);
    }
    make_model_params p;
    p.type = type;
    p.ftype = ftype;
    model_shape shape;
    if (const int status = make_model_params_from(o, shape, p); status != 0) {
        return status;
    }
    std::string error;
    const auto t0 = std::chrono::steady_clock::now();
    if (!make_model_with_progress(shape, p, error)) {
        return fail_runtime(cmd, error);
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    struct stat st;
    const uint64_t n_written = stat(o.out.c_str(), &st) == 0 ? (uint64_t) st.st_size : model_shape_n_bytes(shape, type);
    printf("wrote %s: %s, %s, %s parameters, %s, seed %llu, %.1f s\n", o.out.c_str(), shape.name.c_str(),
           o.type.c_str(), format_count(model_shape_n_params(shape)).c_str(), format_bytes(n_written).c_str(),
           (unsigned long long) p.seed, secs);
    return 0;
}

} // namespace

command cmd_make_model_add(CLI::App & app) {
    auto o = std::make_shared<make_model_opts>();
    CLI::App * sub = app.add_subcommand("make-model",
                                        "write a GGUF with random weights and a real model's shape and tokenizer");
    sub->add_option("-s,--shape", o->shape, "shape name (--list shows them)");
    sub->add_option("-o,--out", o->out, "output GGUF file (replaced if it exists)");
    sub->add_option("--type", o->type, "matrix type: f32, f16, q8_0, q4_0, or a type llama-quantize makes from f16 (q4_k_m, q4_k_s, q5_k_m, q5_k_s, q6_k, q5_0, iq4_nl, bf16); 1-D tensors stay f32")->capture_default_str();
    sub->add_option("--seed", o->seed, "random seed in [0, 2^64); the same seed gives the same bytes")->capture_default_str();
    sub->add_option("--vocab-dir", o->vocab_dir, "folder of llama.cpp's ggml-vocab-*.gguf files")->capture_default_str();
    sub->add_option("-t,--threads", o->threads, "threads generating weights (0 = all cores)")->capture_default_str();
    sub->add_flag("--list", o->list, "list the shapes with parameter counts and sizes for --type");
    sub->add_option("--layers", o->layers, "keep the shape's first N layers (0 = all): a real shape's costs per layer "
                                           "where all of it does not fit (a hybrid keeps at least one attention layer); "
                                           "the file's shape name says so")->capture_default_str();
    sub->add_flag("--header-only", o->header_only,
                  "testing: write the metadata, leave all weights zero (a sparse file; loads in llama.cpp)");
    return {sub, [o] { return run_make_model(*o); }};
}

} // namespace editspec::cli
