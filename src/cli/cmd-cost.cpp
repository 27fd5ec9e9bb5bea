// editspec cost: measure (or show the cached) cost of one target pass by its size.
#include "cli/commands.h"
#include "editspec/cost.h"

#include <algorithm>
#include <memory>

namespace editspec::cli {

namespace {

struct cost_opts {
    std::string model;
    int32_t threads = 0;
    int32_t n_max = 256;
    int32_t reps = 5;
    int32_t prefix = 256;
    bool flash_attn = true;
    std::string cache_type = "f16";
    int32_t rs_snapshots = CONTEXT_RS_ROLLBACK;
    bool fresh = false;
    bool save = true;
    bool last_logits = false;
    std::vector<int32_t> depths = {1024, 3072};
};

int run_cost(const cost_opts & o) {
    const char * cmd = "cost";
    if (o.n_max < 1 || o.n_max > 512) return fail_input(cmd, "--max " + std::to_string(o.n_max) + " out of range [1, 512]");
    if (o.reps < 1 || o.reps > 100) return fail_input(cmd, "--reps " + std::to_string(o.reps) + " out of range [1, 100]");
    if (o.threads < 0 || o.threads > 1024) return fail_input(cmd, "--threads " + std::to_string(o.threads) + " out of range [0, 1024]");
    const std::string path = o.model.empty() ? default_model_path() : o.model;
    model_load_result lr = model_load(path);
    if (!lr.model) return fail_input(cmd, lr.error);
    context_params cp;
    std::string error;
    if (!kv_cache_type_parse(o.cache_type, cp.type_k, &error)) return fail_input(cmd, error);
    cp.type_v = cp.type_k;
    cp.rs_snapshots = o.rs_snapshots;
    if (o.prefix < 1 || o.prefix > 8192) return fail_input(cmd, "--prefix " + std::to_string(o.prefix) + " out of range [1, 8192]");
    std::vector<int32_t> depths;
    for (int32_t d : o.depths) {
        if (d == 0) continue; // --depths 0: none
        if (d <= o.prefix || d > 32768) {
            return fail_input(cmd, "--depths " + std::to_string(d) + ": each must be past --prefix " + std::to_string(o.prefix) + " and at most 32768");
        }
        depths.push_back(d);
    }
    std::sort(depths.begin(), depths.end());
    depths.erase(std::unique(depths.begin(), depths.end()), depths.end());
    // room for the deepest curve (the cached model's depths need a context of 3,329 tokens)
    cp.n_ctx = std::max({1024, o.prefix + o.n_max + 1, (depths.empty() ? 0 : depths.back()) + o.n_max + 1});
    cp.n_threads = o.threads;
    cp.flash_attn = o.flash_attn;
    std::string err;
    auto ctx = context_create(*lr.model, cp, &err);
    if (!ctx) return fail_runtime(cmd, err);
    if (o.last_logits && !o.fresh) return fail_input(cmd, "--last-logits measures anew: add --fresh (it never replaces the cache)");
    cost_model cm;
    const bool ok = o.fresh ? cost_model_measure(*ctx, cm, o.n_max, o.reps, &err, o.prefix, !o.last_logits, depths)
                            : cost_model_get(*ctx, cm, &err);
    if (!ok) return fail_runtime(cmd, err);
    if (o.fresh && o.save && !o.last_logits) cost_model_save(*ctx, cm);
    // the curve is cached per kernels (--kernels; a CPU's are always the exact ones)
    printf("# %s, %d threads, %s KV cache, flash attention %s, %s kernels%s%s\n", path.c_str(), ctx->n_threads(),
           ggml_type_name(cp.type_k), o.flash_attn ? "on" : "off",
           engine_cuda_exact() ? "exact" : "stock", engine_has_gpu() ? " (GPU)" : " (CPU)",
           o.last_logits ? ", the last row's logits only" : "");
    // the probes a later start times again to tell whether this curve was measured on a busier machine
    if (cm.probe_ms > 0) {
        printf("# probes (passes alone, after 1 cached token): 1 token %.3f ms, %d tokens %.3f ms\n", cm.probe_ms, COST_PROBE_WIDE,
               cm.probe_wide_ms);
    }
    // the columns past the first four: the same pass after more cached tokens (a pass deep in a file)
    printf("# ms: after %d cached tokens%s\n", cm.depth0, cm.deeper.empty() ? "" : "; ms@D: after D (*: not timed, the base curve's shape)");
    printf("%8s %10s %10s %14s", "tokens", "ms", "tokens/s", "cost vs 1");
    for (const cost_depth_curve & c : cm.deeper) printf(" %11s", ("ms@" + std::to_string(c.depth)).c_str());
    printf("\n");
    for (size_t i = 0; i < cm.n.size(); i++) {
        printf("%8d %10.2f %10.1f %14.2f", cm.n[i], cm.ms[i], 1000.0 * cm.n[i] / cm.ms[i], cm.ms[i] / cm.ms[0]);
        // past a deeper curve's timed sizes (to 64), the model's figure: the base curve's shape
        for (const cost_depth_curve & c : cm.deeper) printf(" %11.2f%s", cm.t(cm.n[i], c.depth), i < c.ms.size() ? "" : "*");
        printf("\n");
    }
    return 0;
}

} // namespace

command cmd_cost_add(CLI::App & app) {
    auto o = std::make_shared<cost_opts>();
    CLI::App * sub = app.add_subcommand("cost", "measure the cost of one target pass by its size (the cost model drafts are sized by)");
    sub->add_option("-m,--model", o->model, "GGUF model file (default: $EDITSPEC_MODEL or the shipped model)");
    sub->add_option("-t,--threads", o->threads, "CPU threads (0 = all cores)")->capture_default_str();
    sub->add_option("--max", o->n_max, "largest pass measured, tokens (every size to 8, then steps of 1.5x and 4/3x up to it)")->capture_default_str();
    sub->add_option("--reps", o->reps, "timed repetitions per size, at least 10 for sizes to 8 (the fastest counts)")->capture_default_str();
    sub->add_option("--prefix", o->prefix, "with --fresh: tokens already in the KV cache when a pass is timed")->capture_default_str();
    sub->add_option("--depths", o->depths, "with --fresh: deeper caches the sizes to 64 are timed after too, twice each, comma-separated (0 = none)")
        ->delimiter(',')
        ->capture_default_str();
    sub->add_flag("--flash-attn,!--no-flash-attn", o->flash_attn, "flash attention (default on)");
    add_cache_type_option(sub, o->cache_type);
    add_rs_snapshots_option(sub, o->rs_snapshots);
    sub->add_flag("--fresh", o->fresh, "measure now instead of using the cached figures, and cache the new ones");
    sub->add_flag("!--no-save", o->save, "with --fresh: do not replace the cached figures");
    sub->add_flag("--last-logits", o->last_logits,
                  "with --fresh: compute the last row's logits only, as llama-bench's prompt passes do (the same work as "
                  "its pp figures; verification needs every row's, so these figures are never cached)");
    return {sub, [o] { return run_cost(*o); }};
}

} // namespace editspec::cli
