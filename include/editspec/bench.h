// editspec bench: every method on every item, A/B in one process, same model, same threads.
//
//     editspec::bench_params bp;
//     bp.model_path = "model.gguf"; bp.dataset_path = ".../canitedit/normalized.jsonl";
//     bp.methods = {"ar", "lookup", "lookup-longest@48"}; bp.replay = true; bp.limit = 10;
//     editspec::bench_results res;
//     if (!editspec::bench_run(bp, res, &err)) ...;
//     editspec::bench_write(res, "out/", &err);     // results.json, report.md, speedup.svg
//
// Autoregressive decoding runs first on every item: it is the reference for identical_to_ar and
// the denominator of every speedup. Speedups are ratios of summed generation times over the same
// items in the same run (this machine is shared and noisy: never compare across runs).
#pragma once

#include "editspec/apply.h"
#include "editspec/dataset.h"
#include "editspec/draft-model.h"
#include "editspec/drafters.h"
#include "editspec/edit.h"
#include "editspec/replay.h"
#include "editspec/generate.h"
#include "editspec/quality.h"

#include <string>
#include <vector>

namespace editspec {

// How an edit item becomes a prompt.
enum bench_layout {
    BENCH_LAYOUT_AUTO = 0, // raw with --replay (docs/results/design-notes/cost-curve-and-oracle.md), else edit
    BENCH_LAYOUT_RAW  = 1, // instruction + "\n" + code before (dataset_raw_layout)
    BENCH_LAYOUT_EDIT = 2, // `editspec edit`'s prompt: the model's chat template or the plain edit template
};

struct bench_params {
    std::string model_path;
    std::string draft_model_path; // the "sd" drafter's model (--draft-model), "" = none
    std::vector<std::string> datastore_paths; // the common datastores of "rest" and "fastcoder" (--datastore)
    std::vector<std::string> repo_datastore_paths; // the repository's, "fastcoder" (--repo-datastore)
    draft_model_params draft;     // gamma, p_min (n_ctx and threads follow the target's)
    method_settings settings;     // the papers' settings (drafters.h)
    std::string dataset_path;
    dataset_task task = DATASET_TASK_EDIT;
    bool apply = false;           // edit items as fast apply: the reference diff's hunks as the snippet (apply.h)
    bool constrain = false;       // apply: constrained decoding, every method (apply_constraint; lossy vs free greedy)
    prompt_layout edit_layout = PROMPT_LAYOUT_AUTO; // edit and apply prompts (edit.h, --prompt-layout)
    apply_view file_view = APPLY_VIEW_AUTO;         // apply: how much of the file the prompt shows (--apply-view)
    std::vector<std::string> methods = {"ar", "lookup", "lookup-longest"}; // "ar" is always run first
    bool replay = false;          // target's choice = the reference token (real-shape random models)
    bool no_ar = false;           // the first of `methods` is the reference in ar's place (--no-ar)
    bool fit_train_ctx = false;   // only items whose prompt and an answer as long as the original code fit the
                                  // model's training context
    std::string write_tasks;      // --task apply: write the selected tasks here (JSONL: id, code, update,
                                  // expected) and run nothing, to test an apply endpoint with them
    int32_t limit = 0;            // first N items, 0 = all
    int32_t threads = 0;          // 0 = all cores
    int32_t n_ctx = 4096;         // KV cache per item
    int32_t n_predict = 0;        // most tokens per item; 0 = 512, or the whole reference with replay
    bool flash_attn = true;
    ggml_type kv_type = GGML_TYPE_F16; // the target's KV cache (--cache-type)
    int32_t rs_snapshots = CONTEXT_RS_ROLLBACK; // a recurrent target's snapshots, 0 = checkpoints (--rs-snapshots)
    instruction_kind instruction = INSTRUCTION_KIND_DESCRIPTIVE;
    bench_layout layout = BENCH_LAYOUT_AUTO;
    bool run_tests = false;       // run each item's tests on each method's output (not with replay)
    test_options tests;
    std::string model_setting;    // label: "shipped model", "real-shape replay", "user model"; "" = derived
    bool progress = true;         // item i/N and running speedups on stderr
};

struct bench_row {
    std::string item;             // chat: "ID#TURN"
    std::string method;
    int32_t turn = 0;             // chat: 1, 2, ...; 0 otherwise
    std::string category;         // chat: the MT-Redundant category, or "refine" (HumanEval's loop)
    int32_t prompt_cached = 0;    // prompt tokens an earlier turn (or method) left in the KV cache
    double  prompt_ms = 0.0;
    int32_t prompt_tokens = 0;
    int32_t tokens = 0;           // generated (EOS excluded)
    int32_t target_passes = 0;
    int64_t draft_tokens = 0;
    int64_t accepted = 0;
    double  gen_ms = 0.0;
    double  draft_ms = 0.0;
    double  decode_ms = 0.0;       // target decodes; decode_model_ms: what the cost model said they cost
    double  checkpoint_ms = 0.0;   // a recurrent state's checkpoints (generate_result::checkpoint_ms)
    double  decode_model_ms = 0.0;
    double  decode_ms_at[COST_DEPTH_BUCKETS] = {};       // both by the passes' depth (cost_depth_bucket)
    double  decode_model_ms_at[COST_DEPTH_BUCKETS] = {};
    bool    eos = false;          // ended at EOS (then it counts as a produced token per pass)
    bool    identical_to_ar = true;
    double  edit_sim_vs_ar = 1.0; // edit_similarity of the output text to ar's
    bool    tested = false;       // the item's tests ran on the output
    bool    passed = false;
    bool    checked = false;      // an edit item with a reference: the output's code compared with it
    bool    exact = false;        // ... and equal to it, byte for byte
    std::string code;             // edit items: the output's code (edit_extract_code)
    source_stats by_source[DRAFT_SOURCE_COUNT];
};

struct bench_summary {
    std::string method;
    int32_t items = 0;
    int64_t tokens = 0;
    int64_t target_passes = 0;
    int64_t draft_tokens = 0;
    int64_t accepted = 0;
    double  gen_ms = 0.0;
    double  draft_ms = 0.0;
    double  decode_ms = 0.0;
    double  decode_model_ms = 0.0;
    double  checkpoint_ms = 0.0;
    double  decode_ms_at[COST_DEPTH_BUCKETS] = {};
    double  decode_model_ms_at[COST_DEPTH_BUCKETS] = {};
    double  tokens_per_s = 0.0;
    double  speedup_vs_ar = 0.0;          // sum of ar gen_ms / sum of this method's, same items
    double  mean_accepted_per_pass = 0.0; // tokens produced per target pass, EOS included (docs/results/design-notes/cost-curve-and-oracle.md)
    bool    identical_to_ar = true;       // every item's output equals ar's
    int32_t n_different = 0;              // items whose output differs from ar's
    double  mean_edit_sim_vs_ar = 1.0;    // over items
    int32_t tested = 0;                   // items whose tests ran
    int32_t passed = 0;
    double  pass_at_1 = 0.0;              // passed / tested (greedy: one sample per item)
    int32_t checked = 0;                  // edit items compared with their reference
    int32_t exact = 0;                    // ... whose code equals it
    source_stats by_source[DRAFT_SOURCE_COUNT];
};

struct bench_results {
    bench_params params;
    std::string model_desc;
    std::string machine;           // cores, CPU model
    std::string started;           // ISO time
    std::vector<bench_row> rows;
    std::vector<bench_summary> summary; // one per method, in params.methods order
    std::vector<int32_t> cost_n;   // measured cost model, if any method used it
    std::vector<double>  cost_ms;
    int32_t              cost_depth0 = 0;
    std::vector<cost_depth_curve> cost_deeper;
    bench_layout layout = BENCH_LAYOUT_RAW; // the layout used (never AUTO)
    int32_t items_in = 0;          // the dataset's items (after --limit)
    int32_t items_past_train_ctx = 0; // skipped by fit_train_ctx
    int32_t tasks_written = -1;       // with write_tasks: the tasks written
    int32_t reference_tested = 0;  // with run_tests: the dataset's reference solutions, same harness
    std::vector<std::string> reference_failed; // items whose reference fails here (missing module, ...)
};

bool bench_run(const bench_params & p, bench_results & out, std::string * error);

struct request;
// an edit item as fast apply (--task apply): the file and the snippet of its change (the reference
// diff's hunks, or the item's own snippet), the prompt and constraint in rq; the expected answer
// stays the item's reference. The real runs and the oracle share it.
void bench_apply_request(const model & m, const dataset_item & it, const bench_params & p, request & rq);

// Chat task (CopySpec's tables): MT-Redundant items as published (their turns), and HumanEval items
// as a code refinement loop of three turns: write the function, make a named change, add a docstring
// and tests. Every method answers each turn of the same conversation, whose earlier answers are
// autoregressive decoding's (the lossless methods' too, token for token).
std::vector<std::string> bench_chat_turns(const dataset_item & item);

// the summary of the rows with this turn (0 = all) and category ("" = all), methods in params order
std::vector<bench_summary> bench_summarize_rows(const bench_results & res, int32_t turn, const std::string & category);

// ----------------------------------------------------------------------------
// oracle replay of the methods (`editspec bench --oracle`): no model passes, the dataset's
// reference stands in for the target's greedy output (replay.h), prompts in the raw layout
// (docs/results/design-notes/cost-curve-and-oracle.md's reading). Each method runs under several draft sizings, costed on a curve.

struct oracle_row {
    std::string method;
    std::string sizing; // "uncapped", "cap N", "grow", "clairvoyant"
    replay_result r;
};

struct oracle_results {
    std::vector<oracle_row> rows; // per method, per sizing
    int32_t items = 0;
    std::string curve_label;      // where the cost curve came from
    cost_model cost;              // the pass costs, relative to a 1-token pass
    double pass_overhead = 0.0;   // added to every pass, in 1-token passes of the curve
};

// Methods with a fixed cap ("NAME@N") run with that cap only; the others uncapped (each drafter's
// own maximum: reuse 256, lookup 48), fixed caps 8, 16 and 48, grow x2 on full accept / shrink to
// accepted + 2 (start 48, at most 48), the decoder's own cost-model sizing on the curve (likeliest
// chain only, statistics carried across items) and clairvoyant sizing (a bound: every pass pays only for
// what it accepts). Methods that need a draft model cannot be replayed without the model: error.
// pass_overhead: time every pass costs beside the curve's (drafting, verification, a longer context
// than the curve was measured at), in 1-token passes; the passes are costed with it, the cost-model
// sizing sees it, and a second cost-model row ("blind to overhead") sizes on the bare curve.
bool bench_oracle(const bench_params & p, const cost_model & cost, double pass_overhead, oracle_results & out,
                  std::string * error);

// a markdown report of it
std::string oracle_report_md(const bench_params & p, const oracle_results & res);

// recomputes out.summary from out.rows
void bench_summarize(bench_results & out);

// DIR/results.json, DIR/report.md, DIR/speedup.svg
bool bench_write(const bench_results & res, const std::string & dir, std::string * error);

} // namespace editspec
