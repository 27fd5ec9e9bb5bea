// editspec-train-bench-opt: training throughput of llama.cpp's own trainer (llama_opt_*, ggml-opt), as
// examples/training/finetune.cpp uses it, on a given F32 GGUF (untied: llama_opt leaves token_embd frozen,
// and a tied output layer is token_embd).
//
//     editspec-train-bench-opt -m model-f32.gguf [--ctx 512] [--steps 6] [--threads 1]
//
// Random tokens; one optimizer step per context of --ctx tokens (batch = ubatch = ctx, as finetune does);
// AdamW. The first step (graph allocation) is not timed. Prints one JSON line.
#include "llama.h"
#include "ggml-opt.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

static void log_quiet(ggml_log_level level, const char * text, void *) {
    if (level >= GGML_LOG_LEVEL_ERROR) {
        fputs(text, stderr);
    }
}

static int64_t g_t_first = 0;  // time at the end of the first step
static int64_t g_n_steps = 0;

static void on_step(bool train, ggml_opt_context_t, ggml_opt_dataset_t, ggml_opt_result_t, int64_t ibatch, int64_t, int64_t) {
    if (train) {
        g_n_steps++;
        if (g_n_steps == 1) {
            g_t_first = ggml_time_us();
        }
    }
}

static ggml_opt_optimizer_params opt_pars(void *) {
    ggml_opt_optimizer_params p = ggml_opt_get_default_optimizer_params(nullptr);
    p.adamw.alpha = 1e-3f;
    p.adamw.wd = 0.0f;
    return p;
}

int main(int argc, char ** argv) {
    std::string path;
    int32_t n_ctx = 512, steps = 6, threads = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string k = argv[i];
        if (k == "-m") { path = argv[i + 1]; }
        else if (k == "--ctx") { n_ctx = atoi(argv[i + 1]); }
        else if (k == "--steps") { steps = atoi(argv[i + 1]); }
        else if (k == "--threads") { threads = atoi(argv[i + 1]); }
    }
    if (path.empty()) {
        fprintf(stderr, "usage: %s -m model-f32.gguf [--ctx 512] [--steps 6] [--threads 1]\n", argv[0]);
        return 2;
    }
    llama_log_set(log_quiet, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.load_mode = LLAMA_LOAD_MODE_NONE; // writable weights (finetune.cpp does the same)
    llama_model * model = llama_model_load_from_file(path.c_str(), mp);
    if (!model) {
        fprintf(stderr, "%s: %s: cannot load\n", __func__, path.c_str());
        return 1;
    }
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_ctx;
    cp.n_ubatch = n_ctx;
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    cp.type_k = GGML_TYPE_F32;
    cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "%s: cannot create a context\n", __func__);
        return 1;
    }
    const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

    // dataset: (steps + 1) contexts of random tokens, labels = the next token
    const int64_t ndata = steps + 1;
    ggml_opt_dataset_t ds = ggml_opt_dataset_init(GGML_TYPE_I32, GGML_TYPE_I32, n_ctx, n_ctx, ndata, 1);
    std::mt19937 rng(1);
    std::vector<llama_token> toks(ndata * n_ctx + 1);
    for (auto & t : toks) {
        t = (llama_token) (rng() % n_vocab);
    }
    int32_t * data = (int32_t *) ggml_opt_dataset_data(ds)->data;
    int32_t * labels = (int32_t *) ggml_opt_dataset_labels(ds)->data;
    for (int64_t i = 0; i < ndata; ++i) {
        for (int32_t j = 0; j < n_ctx; ++j) {
            data[i * n_ctx + j] = toks[i * n_ctx + j];
            labels[i * n_ctx + j] = toks[i * n_ctx + j + 1];
        }
    }
    llama_opt_params op{
        /*n_ctx_train     =*/ 0,
        /*param_filter    =*/ llama_opt_param_filter_all,
        /*param_filter_ud =*/ nullptr,
        /*get_opt_pars    =*/ opt_pars,
        /*get_opt_pars_ud =*/ nullptr,
        /*optimizer_type  =*/ GGML_OPT_OPTIMIZER_TYPE_ADAMW,
    };
    llama_opt_init(ctx, model, op);
    ggml_opt_result_t rt = ggml_opt_result_init();
    ggml_opt_result_t re = ggml_opt_result_init();
    const int64_t t0 = ggml_time_us();
    const clock_t c0 = clock();
    llama_opt_epoch(ctx, ds, rt, re, ndata, on_step, nullptr);
    const int64_t t1 = ggml_time_us();
    const double cpu = (double) (clock() - c0) / CLOCKS_PER_SEC;
    const double secs = (t1 - g_t_first) / 1e6;
    const int64_t timed = g_n_steps - 1;
    printf("{\"trainer\": \"ggml-opt\", \"model\": \"%s\", \"n_vocab\": %d, \"ctx\": %d, \"threads\": %d, \"steps_timed\": %lld, "
           "\"step_s\": %.3f, \"tok_s\": %.1f, \"total_s\": %.2f, \"cpu_share\": %.2f}\n",
           path.c_str(), n_vocab, n_ctx, threads, (long long) timed, timed > 0 ? secs / timed : 0.0,
           secs > 0 ? timed * n_ctx / secs : 0.0, (t1 - t0) / 1e6, cpu / ((t1 - t0) / 1e6) / threads);
    ggml_opt_result_free(rt);
    ggml_opt_result_free(re);
    ggml_opt_dataset_free(ds);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
