// editspec check-exact: is this model exact on this backend? Every row of passes of 1..N tokens
// against one-token decoding (exactness.h). Greedy speculative output equals autoregressive output
// for sure only where it is; elsewhere `identical_to_ar` in bench and responses says what happened.
#include "cli/commands.h"
#include "editspec/exactness.h"
#include "editspec/step.h"

#include <memory>

namespace editspec::cli {

namespace {

struct check_exact_opts {
    std::string model;
    std::vector<int32_t> threads = {0};
    std::vector<int32_t> prefixes = {0, 37, 300};
    std::vector<int32_t> requests = {1};
    int32_t n_max = 256;
    bool flash_attn = true;
    std::string cache_type = "f16";
    int32_t rs_snapshots = CONTEXT_RS_ROLLBACK;
};

int run_check_exact(const check_exact_opts & o) {
    const char * cmd = "check-exact";
    if (o.n_max < 1 || o.n_max > 512) return fail_input(cmd, "--max " + std::to_string(o.n_max) + " out of range [1, 512]");
    for (int32_t t : o.threads) {
        if (t < 0 || t > 1024) return fail_input(cmd, "--threads " + std::to_string(t) + " out of range [0, 1024]");
    }
    for (int32_t pf : o.prefixes) {
        if (pf < 0 || pf > 4096) return fail_input(cmd, "--prefix " + std::to_string(pf) + " out of range [0, 4096]");
    }
    for (int32_t n : o.requests) {
        if (n < 1 || n > 64) return fail_input(cmd, "--requests " + std::to_string(n) + " out of range [1, 64]");
    }
    ggml_type kv_type = GGML_TYPE_F16;
    std::string error;
    if (!kv_cache_type_parse(o.cache_type, kv_type, &error)) return fail_input(cmd, error);
    const std::string path = o.model.empty() ? default_model_path() : o.model;
    model_load_result lr = model_load(path);
    if (!lr.model) return fail_input(cmd, lr.error);
    const std::string rs = !lr.model->facts().recurrent ? ""
                           : o.rs_snapshots > 0         ? ", " + std::to_string(o.rs_snapshots) + " snapshots of the recurrent state"
                                                        : ", no snapshots of the recurrent state (checkpoints)";
    printf("# %s (%s), %s KV cache%s, flash attention %s, GPU layers %s, passes of 1..%d tokens against one-token decoding\n",
           path.c_str(), lr.model->facts().desc.c_str(), ggml_type_name(kv_type), rs.c_str(), o.flash_attn ? "on" : "off",
           !engine_offloads()            ? "none (a CPU-only build)"
           : engine_gpu_layers() < 0     ? "all"
                                         : std::to_string(engine_gpu_layers()).c_str(),
           o.n_max);
    printf("%8s %8s %18s %6s  %s\n", "threads", "prefix", "requests", "sizes", "result");
    bool all_exact = true;
    for (int32_t t : o.threads) {
        for (int32_t pf : o.prefixes) {
            for (int32_t n_req : o.requests) {
                exactness_params p;
                p.n_threads = t;
                p.n_prefix = pf;
                p.n_max = o.n_max;
                p.flash_attn = o.flash_attn;
                p.kv_type = kv_type;
                p.rs_snapshots = o.rs_snapshots;
                p.n_requests = n_req;
                std::string layout = "1";
                if (n_req > 1) { // the server's step engine's layout for n_req requests of this size
                    step_params sp;
                    sp.n_seq = n_req;
                    sp.recurrent = lr.model->facts().recurrent;
                    sp.per_seq.n_ctx = pf + 13 * (n_req - 1) + std::min(o.n_max, 64) + 16;
                    sp.per_seq.n_threads = t;
                    sp.per_seq.flash_attn = o.flash_attn;
                    sp.per_seq.type_k = sp.per_seq.type_v = kv_type;
                    sp.per_seq.rs_snapshots = o.rs_snapshots;
                    const step_layout l = step_layout_of(sp);
                    p.layout = l.cp;
                    p.regions = l.regions;
                    layout = std::to_string(n_req) + (l.regions ? " in regions" : " in streams");
                }
                const exactness_result r = exactness_check(*lr.model, p);
                if (!r.error.empty()) return fail_runtime(cmd, r.error);
                all_exact = all_exact && r.row < 0;
                char res[200];
                if (r.row < 0 && r.n_max < o.n_max) {
                    snprintf(res, sizeof(res), "exact (passes to %d tokens: a model with a recurrent state makes no "
                             "longer pass)", r.n_max);
                } else if (r.row < 0) {
                    snprintf(res, sizeof(res), "exact");
                } else if (r.request >= 0) {
                    snprintf(res, sizeof(res), "differs: step of %d tokens a request%s, request %d, row %d, relative L2 %.2e%s",
                             r.n, r.mixed ? " (mixed sizes)" : "", r.request, r.row, r.rel,
                             r.argmax_differs ? ", greedy token differs" : "");
                } else {
                    snprintf(res, sizeof(res), "differs: pass of %d tokens, row %d, relative L2 %.2e%s", r.n, r.row, r.rel,
                             r.argmax_differs ? ", greedy token differs" : "");
                }
                printf("%8d %8d %18s %6d  %s\n", t, pf, layout.c_str(), r.n_sizes, res);
                fflush(stdout);
            }
        }
    }
    // argmax outputs (EDITSPEC_DEVICE_ARGMAX=1) take each row's token where the logits are: the same as the host's
    const argmax_check_result am = exactness_check_argmax(lr.model->facts().n_vocab);
    if (!am.error.empty()) return fail_runtime(cmd, am.error);
    if (am.row < 0) {
        printf("argmax on %s: %d rows of ties, NaNs, infinities and denormals give the host's token (argmax outputs)\n", am.backend.c_str(),
               am.rows);
    } else {
        printf("argmax on %s differs from the host's: row %d gives %d, the host %d (argmax outputs would change answers)\n",
               am.backend.c_str(), am.row, am.got, am.want);
    }
    all_exact = all_exact && am.row < 0;
    printf("%s\n", all_exact ? "exact: every row of every pass matched one-token decoding bit for bit"
                             : "NOT exact: greedy speculative output may differ from ar on this backend and type");
    return all_exact ? 0 : 3;
}

} // namespace

command cmd_check_exact_add(CLI::App & app) {
    auto o = std::make_shared<check_exact_opts>();
    CLI::App * sub = app.add_subcommand(
        "check-exact", "check that every row of an n-token pass equals one-token decoding bit for bit on this backend "
                       "(what lossless speculative decoding rests on); exit status 3 when it does not");
    sub->add_option("-m,--model", o->model, "GGUF model file (default: $EDITSPEC_MODEL or the shipped model)");
    sub->add_option("-t,--threads", o->threads, "CPU threads, one check per value (0 = all cores)")->capture_default_str();
    sub->add_option("--prefix", o->prefixes, "tokens in the KV cache before the passes, one check per value")
        ->capture_default_str();
    sub->add_option("--max", o->n_max, "largest pass checked, tokens (1..512; a model with a recurrent state: at most 64, the longest pass it makes)")->capture_default_str();
    sub->add_option("--requests", o->requests,
                    "requests decoded at once, one check per value: above 1, the server's step (its context's layout: a "
                    "region of cells each on a CPU, a stream each on a GPU), every request after its own prefix, passes "
                    "of equal and mixed sizes (up to 64 tokens a request) in one decode, each row against that request "
                    "decoded alone")
        ->capture_default_str();
    sub->add_flag("--flash-attn,!--no-flash-attn", o->flash_attn, "flash attention (default on)");
    add_cache_type_option(sub, o->cache_type);
    add_rs_snapshots_option(sub, o->rs_snapshots);
    return {sub, [o] { return run_check_exact(*o); }};
}

} // namespace editspec::cli
