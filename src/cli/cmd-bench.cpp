// editspec bench: every method on every item, A/B in one process; writes results.json,
// report.md and speedup.svg.
#include "cli/commands.h"
#include "editspec/bench.h"
#include "editspec/cost.h"
#include "editspec/methods.h"

#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>

namespace editspec::cli {

namespace {

struct bench_opts {
    bench_params p;
    std::string task = "edit";
    std::string methods = "ar,lookup,lookup-longest";
    std::string instruction = "descriptive";
    std::string layout = "auto";
    std::string prompt_layout = "auto";
    std::string apply_view = "auto";
    std::string cache_type = "f16"; // --cache-type
    bool tests_allow_network = false;
    bool oracle = false;
    std::string cost_curve = "model";
    double pass_overhead = 0.0;
    std::string out;
};

// the curve an oracle replay is costed on: the design's (docs/results/design-notes/cost-curve-and-oracle.md), or this model's measured cost model
// (cached per model file and threads; measured now when it is not)
bool oracle_curve(const bench_opts & o, oracle_results & res, std::string * error) {
    if (o.cost_curve == "design") {
        res.cost = cost_model_design();
        res.curve_label = "docs/results/design-notes/cost-curve-and-oracle.md (DeepSeek-Coder-1.3B shape, Q8_0, 2 threads, llama-bench)";
        return true;
    }
    model_load_result lr = model_load(o.p.model_path);
    if (!lr.model) {
        if (error) *error = lr.error;
        return false;
    }
    context_params cp;
    cp.n_ctx = o.p.n_ctx;
    cp.n_threads = o.p.threads;
    cp.flash_attn = o.p.flash_attn;
    cp.type_k = cp.type_v = o.p.kv_type;
    cp.rs_snapshots = o.p.rs_snapshots;
    auto ctx = context_create(*lr.model, cp, error);
    if (!ctx) return false;
    fprintf(stderr, "bench: the cost model of %s (cached per model file and threads)\n", o.p.model_path.c_str());
    cost_model cm;
    if (!cost_model_get(*ctx, cm, error)) return false;
    res.cost = cost_model_relative(cm);
    char buf[160];
    snprintf(buf, sizeof(buf), "measured on this machine: %d threads, flash attention %s, %.1f ms for one token",
             ctx->n_threads(), o.p.flash_attn ? "on" : "off", cm.ms[0]);
    res.curve_label = buf;
    return true;
}

int run_oracle(const bench_opts & o) {
    const char * cmd = "bench";
    oracle_results res;
    std::string err;
    if (!oracle_curve(o, res, &err)) return fail_input(cmd, err);
    const std::string label = res.curve_label;
    const cost_model cost = res.cost;
    if (!bench_oracle(o.p, cost, o.pass_overhead, res, &err)) return fail_input(cmd, err);
    res.curve_label = label;
    const std::string md = oracle_report_md(o.p, res);
    std::error_code ec;
    std::filesystem::create_directories(o.out, ec);
    const std::string path = o.out + "/oracle.md";
    FILE * f = fopen(path.c_str(), "wb");
    if (ec || !f || fwrite(md.data(), 1, md.size(), f) != md.size()) {
        if (f) fclose(f);
        return fail_runtime(cmd, "cannot write '" + path + "'");
    }
    fclose(f);
    fputs(md.c_str(), stdout);
    fprintf(stderr, "bench: wrote %s\n", path.c_str());
    return 0;
}

int run_bench(bench_opts & o) {
    const char * cmd = "bench";
    if (o.task == "edit") o.p.task = DATASET_TASK_EDIT;
    else if (o.task == "complete") o.p.task = DATASET_TASK_COMPLETE;
    else if (o.task == "chat") o.p.task = DATASET_TASK_CHAT;
    else if (o.task == "apply") o.p.apply = true; // edit items, merged from their diff's snippet
    else return fail_input(cmd, "--task '" + o.task + "' must be edit, complete, chat or apply");
    if (o.p.constrain && !o.p.apply) return fail_input(cmd, "--constrain goes with --task apply");
    if (o.p.constrain && o.p.replay) return fail_input(cmd, "--constrain and --replay: replay forces the reference's tokens");
    if (o.instruction == "descriptive") o.p.instruction = INSTRUCTION_KIND_DESCRIPTIVE;
    else if (o.instruction == "lazy") o.p.instruction = INSTRUCTION_KIND_LAZY;
    else return fail_input(cmd, "--instruction '" + o.instruction + "' must be descriptive or lazy");
    if (std::string why; !kv_cache_type_parse(o.cache_type, o.p.kv_type, &why)) return fail_input(cmd, why);
    if (o.layout == "auto") o.p.layout = BENCH_LAYOUT_AUTO;
    else if (o.layout == "raw") o.p.layout = BENCH_LAYOUT_RAW;
    else if (o.layout == "edit") o.p.layout = BENCH_LAYOUT_EDIT;
    else return fail_input(cmd, "--layout '" + o.layout + "' must be auto, raw or edit");
    if (const int status = parse_prompt_layout(cmd, o.prompt_layout, o.p.edit_layout); status != 0) return status;
    if (!apply_view_parse(o.apply_view, o.p.file_view)) {
        return fail_input(cmd, "--apply-view '" + o.apply_view + "' must be one of " + apply_view_names());
    }
    if (o.apply_view != "auto" && !o.p.apply) return fail_input(cmd, "--apply-view goes with --task apply");
    if (o.p.run_tests && o.p.replay) return fail_input(cmd, "--tests judges the model's own outputs and cannot run with --replay");
    if (!(o.p.tests.timeout_s > 0 && o.p.tests.timeout_s <= 3600)) return fail_input(cmd, "--tests-timeout " + std::to_string(o.p.tests.timeout_s) + " out of range (0, 3600]");
    o.p.tests.no_network = !o.tests_allow_network;
    if (const int status = check_draft_options(cmd, o.p.draft); status != 0) return status;
    if (const std::string bad = method_settings_check(o.p.settings); !bad.empty()) return fail_input(cmd, bad);
    if (o.p.limit < 0) return fail_input(cmd, "--limit " + std::to_string(o.p.limit) + " must be >= 0");
    if (o.p.threads < 0 || o.p.threads > 1024) return fail_input(cmd, "--threads " + std::to_string(o.p.threads) + " out of range [0, 1024]");
    if (o.p.n_ctx < 64 || o.p.n_ctx > (1 << 20)) return fail_input(cmd, "--ctx-size " + std::to_string(o.p.n_ctx) + " out of range [64, 1048576]");
    if (o.p.n_predict < 0 || o.p.n_predict > 100000) return fail_input(cmd, "-n " + std::to_string(o.p.n_predict) + " out of range [0, 100000]");
    o.p.methods.clear();
    bool needs_draft = false;
    std::stringstream ss(o.methods);
    std::string m;
    while (std::getline(ss, m, ',')) {
        if (m.empty()) continue;
        method_spec ms;
        std::string err;
        if (!method_parse(m, ms, &err)) return fail_input(cmd, err);
        o.p.methods.push_back(m);
        needs_draft = needs_draft || ms.uses_draft_model();
    }
    if (o.p.model_path.empty()) o.p.model_path = default_model_path();
    if (o.out.empty() && o.p.write_tasks.empty()) return fail_input(cmd, "--out FOLDER is required");
    if (!o.p.write_tasks.empty() && !o.p.apply) return fail_input(cmd, "--write-tasks writes apply tasks: add --task apply");
    if (o.oracle) {
        if (o.cost_curve != "design" && o.cost_curve != "model") {
            return fail_input(cmd, "--cost-curve '" + o.cost_curve + "' must be design or model");
        }
        return run_oracle(o);
    }
    if (needs_draft && o.p.draft_model_path.empty()) {
        o.p.draft_model_path = default_draft_model_path(o.p.model_path);
        if (o.p.draft_model_path.empty()) {
            return fail_input(cmd, "methods sd and efficientedit need a draft model: pass --draft-model FILE or set EDITSPEC_DRAFT_MODEL");
        }
    }
    bench_results res;
    std::string err;
    if (!bench_run(o.p, res, &err)) {
        return fail_input(cmd, err);
    }
    if (res.tasks_written >= 0) {
        fprintf(stderr, "bench: wrote %d apply tasks to %s\n", res.tasks_written, o.p.write_tasks.c_str());
        return 0;
    }
    if (!bench_write(res, o.out, &err)) {
        return fail_runtime(cmd, err);
    }
    for (const auto & s : res.summary) {
        fprintf(stderr, "%-28s %8.2f tok/s  %6.2fx  %6.2f tokens/pass  identical_to_ar=%s", s.method.c_str(),
                s.tokens_per_s, s.speedup_vs_ar, s.mean_accepted_per_pass, s.identical_to_ar ? "yes" : "no");
        if (s.checked > 0 && !o.p.replay) fprintf(stderr, "  exact %d/%d", s.exact, s.checked);
        if (s.tested > 0) fprintf(stderr, "  pass@1 %.3f (%d/%d)", s.pass_at_1, s.passed, s.tested);
        fprintf(stderr, "\n");
    }
    fprintf(stderr, "bench: wrote %s/results.json, report.md, speedup.svg\n", o.out.c_str());
    return 0;
}

} // namespace

command cmd_bench_add(CLI::App & app) {
    auto o = std::make_shared<bench_opts>();
    CLI::App * sub = app.add_subcommand("bench", "benchmark decoding methods A/B on a dataset (results.json, report.md, speedup.svg)");
    sub->add_option("-m,--model", o->p.model_path, "GGUF model file (default: $EDITSPEC_MODEL or the shipped model)");
    sub->add_option("--draft-model", o->p.draft_model_path, "GGUF draft model with the target's vocabulary (sd, efficientedit; default: $EDITSPEC_DRAFT_MODEL, or the shipped draft model with the shipped target)");
    add_draft_options(sub, o->p.draft);
    add_method_settings(sub, o->p.settings);
    sub->add_option("--datastore", o->p.datastore_paths, "common retrieval datastore for rest and fastcoder (built by `editspec index`; repeatable)");
    sub->add_option("--repo-datastore", o->p.repo_datastore_paths, "the repository's datastore for fastcoder (items may name their own: "
                    "\"repo_datastore\")");
    sub->add_option("--dataset", o->p.dataset_path, "dataset JSONL file or folder (CanItEdit, HumanEval, MT-Redundant, EditEval)")->required();
    sub->add_option("--task", o->task, "edit | complete | chat | apply (edit items as fast apply: the snippet is the "
                                       "reference diff's hunks with '# ... existing code ...' around them). chat: "
                                       "MT-Redundant's turns, or HumanEval as a three-turn refinement loop; reported per turn")
        ->capture_default_str();
    sub->add_option("--methods", o->methods,
                    "comma-separated methods (below)")
        ->capture_default_str();
    sub->footer(methods_footer());
    sub->add_flag("--constrain", o->p.constrain,
                  "--task apply: constrained decoding for every method (each merged line a line of the file or the snippet; "
                  "lossy against the model's free greedy output, lossless between methods)");
    sub->add_option("--prompt-layout", o->prompt_layout, prompt_layout_help())->capture_default_str();
    sub->add_option("--apply-view", o->apply_view,
                    "--task apply: how much of the file the prompt shows: auto (as `editspec apply`: none with --constrain, "
                        "else file), file (all of it), windows (its lines within " + std::to_string(APPLY_WINDOW) +
                        " lines of a line the snippet quotes) or none (the snippet alone); Reuse and the constraint have "
                        "the whole file either way; --fit-train-ctx selects by the whole file's prompt")->capture_default_str();
    sub->add_flag("--replay", o->p.replay, "the target's choice is the dataset's reference token (random-weight models); the model still runs every pass");
    sub->add_flag("--no-ar", o->p.no_ar,
                  "do not run ar (one-token passes over a long file take long; the methods' agreement with ar is what the "
                  "tests check): the first of --methods is the reference the others' speedup and identity are measured against");
    sub->add_option("--limit", o->p.limit, "first N items (0 = all)")->capture_default_str();
    sub->add_option("--write-tasks", o->p.write_tasks,
                    "--task apply: write the selected tasks to this file (JSONL: id, code, update, expected) and run "
                    "nothing; scripts/apply-check.py posts them to a server's /v1/apply");
    sub->add_flag("--fit-train-ctx", o->p.fit_train_ctx,
                  "only the items whose prompt and an answer as long as the original code fit the model's training context");
    sub->add_option("-t,--threads", o->p.threads, "CPU threads (0 = all cores)")->capture_default_str();
    sub->add_option("-c,--ctx-size", o->p.n_ctx, "KV cache size in tokens")->capture_default_str();
    sub->add_option("-n,--n-predict", o->p.n_predict, "most tokens per item (0 = 512; with --replay, the whole reference)")->capture_default_str();
    sub->add_option("--instruction", o->instruction, "CanItEdit instruction: descriptive | lazy")->capture_default_str();
    sub->add_option("--layout", o->layout,
                    "edit prompt: raw (instruction + code, as in docs/results/design-notes/cost-curve-and-oracle.md), edit (`editspec edit`'s prompt), auto (raw with --replay, else edit)")
        ->capture_default_str();
    sub->add_flag("--tests", o->p.run_tests, "run each item's tests on each output (python3, no network): pass@1 per method");
    sub->add_option("--tests-timeout", o->p.tests.timeout_s, "seconds per test run")->capture_default_str();
    sub->add_flag("--tests-allow-network", o->tests_allow_network, "run tests even where the network cannot be cut off");
    sub->add_flag("--oracle", o->oracle,
                  "no model passes: replay each method's drafters against the reference outputs under several draft sizings (oracle.md)");
    sub->add_option("--pass-overhead", o->pass_overhead,
                    "with --oracle: every pass costs this many single-token passes more than the curve says "
                    "(time outside the batch decode), default 0")
        ->check(CLI::NonNegativeNumber);
    sub->add_option("--cost-curve", o->cost_curve, "with --oracle: model (this model's measured pass costs) | design (the DeepSeek-Coder-1.3B curve of docs/results/design-notes/cost-curve-and-oracle.md)")
        ->capture_default_str();
    sub->add_option("--setting", o->p.model_setting, "label for the model setting in the report (e.g. 'shipped model')");
    sub->add_flag("--flash-attn,!--no-flash-attn", o->p.flash_attn, "flash attention (default on; exact with our ggml patch)");
    add_cache_type_option(sub, o->cache_type);
    add_rs_snapshots_option(sub, o->p.rs_snapshots);
    sub->add_option("--out", o->out, "output folder (required unless --write-tasks)");
    return {sub, [o] { return run_bench(*o); }};
}

} // namespace editspec::cli
