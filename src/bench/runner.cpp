// editspec bench: runs every method on every item A/B in one process.
#include "editspec/apply.h"
#include "editspec/bench.h"
#include "editspec/decoder.h"
#include "editspec/edit.h"
#include "editspec/log.h"
#include "editspec/methods.h"
#include "editspec/chat.h"
#include "editspec/request.h"
#include "editspec/replay.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <thread>

namespace editspec {

namespace {

std::string machine_description() {
    std::ifstream f("/proc/cpuinfo");
    std::string line, cpu = "unknown CPU";
    while (std::getline(f, line)) {
        if (line.rfind("model name", 0) == 0) {
            cpu = line.substr(line.find(':') + 2);
            break;
        }
    }
    return std::to_string(std::thread::hardware_concurrency()) + " cores, " + cpu;
}

std::string now_iso() {
    char buf[64];
    std::time_t t = std::time(nullptr);
    std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    return buf;
}

// one prompt of one item (chat items have one per turn)
struct bench_prompt {
    std::string id;
    token_vec prompt;
    token_vec reference; // replay: the target's output, EOS last
    token_vec original;  // the code being edited (Reuse drafts)
    std::shared_ptr<token_constraint> constraint; // apply with --constrain
    const dataset_item * item = nullptr;
    int32_t turn = 0;     // chat
    std::string category; // chat
    size_t n_fit = 0;     // the prompt's size for --fit-train-ctx: an apply's with the whole file (the same
                          // items whatever --apply-view), else the prompt's
};

// the program an output makes, and the tests that judge it; false when the item has none
bool program_of(const dataset_item & it, const std::string & output, std::string & code, std::string & tests) {
    if (it.tests.empty()) return false;
    if (it.task == DATASET_TASK_EDIT) {
        code = edit_extract_code(output);
        tests = it.tests;
        return true;
    }
    if (it.task == DATASET_TASK_COMPLETE) {
        code = it.context_code + output;
        tests = it.tests + (it.entry_point.empty() ? "" : "\ncheck(" + it.entry_point + ")\n");
        return true;
    }
    return false;
}

bench_row row_from(const std::string & item, const std::string & method, const generate_result & r) {
    bench_row row;
    row.item = item;
    row.method = method;
    row.prompt_tokens = r.prompt_tokens;
    row.tokens = (int32_t) r.tokens.size();
    row.target_passes = r.target_passes;
    row.draft_tokens = r.draft_tokens;
    row.accepted = r.accepted;
    row.gen_ms = r.gen_ms;
    row.draft_ms = r.draft_ms;
    row.decode_ms = r.decode_ms;
    row.decode_model_ms = r.decode_model_ms;
    row.checkpoint_ms = r.checkpoint_ms;
    for (int32_t b = 0; b < COST_DEPTH_BUCKETS; b++) {
        row.decode_ms_at[b] = r.decode_ms_at[b];
        row.decode_model_ms_at[b] = r.decode_model_ms_at[b];
    }
    row.eos = r.stop == STOP_REASON_EOG;
    row.prompt_cached = r.prompt_cached;
    row.prompt_ms = r.prompt_ms;
    for (int s = 0; s < DRAFT_SOURCE_COUNT; s++) row.by_source[s] = r.by_source[s];
    return row;
}

} // namespace

std::vector<bench_summary> bench_summarize_rows(const bench_results & res, int32_t turn, const std::string & category) {
    std::vector<bench_summary> out;
    const auto selected = [&](const bench_row & row) {
        return (turn == 0 || row.turn == turn) && (category.empty() || row.category == category);
    };
    // the reference: ar, or with --no-ar the first method
    const std::string ref = res.params.methods.empty() ? std::string(METHOD_AR) : res.params.methods.front();
    std::map<std::string, double> ar_ms_by_item;
    for (const bench_row & row : res.rows) {
        if (row.method == ref && selected(row)) ar_ms_by_item[row.item] = row.gen_ms;
    }
    for (const std::string & method : res.params.methods) {
        bench_summary s;
        s.method = method;
        double ar_ms = 0.0, sim = 0.0;
        int64_t produced = 0;
        for (const bench_row & row : res.rows) {
            if (row.method != method || !selected(row)) continue;
            s.items++;
            s.tokens += row.tokens;
            produced += row.tokens + (row.eos ? 1 : 0);
            s.target_passes += row.target_passes;
            s.draft_tokens += row.draft_tokens;
            s.accepted += row.accepted;
            s.gen_ms += row.gen_ms;
            s.draft_ms += row.draft_ms;
            s.decode_ms += row.decode_ms;
            s.decode_model_ms += row.decode_model_ms;
            s.checkpoint_ms += row.checkpoint_ms;
            for (int32_t b = 0; b < COST_DEPTH_BUCKETS; b++) {
                s.decode_ms_at[b] += row.decode_ms_at[b];
                s.decode_model_ms_at[b] += row.decode_model_ms_at[b];
            }
            if (!row.identical_to_ar) {
                s.identical_to_ar = false;
                s.n_different++;
            }
            sim += row.edit_sim_vs_ar;
            s.tested += row.tested;
            s.passed += row.passed;
            s.checked += row.checked;
            s.exact += row.exact;
            for (int k = 0; k < DRAFT_SOURCE_COUNT; k++) {
                s.by_source[k].n_drafted += row.by_source[k].n_drafted;
                s.by_source[k].n_accepted += row.by_source[k].n_accepted;
                s.by_source[k].n_offered += row.by_source[k].n_offered;
            }
            auto it = ar_ms_by_item.find(row.item);
            ar_ms += it != ar_ms_by_item.end() ? it->second : 0.0;
        }
        s.tokens_per_s = s.gen_ms > 0 ? 1000.0 * s.tokens / s.gen_ms : 0.0;
        s.speedup_vs_ar = s.gen_ms > 0 ? ar_ms / s.gen_ms : 0.0;
        s.mean_accepted_per_pass = s.target_passes > 0 ? (double) produced / s.target_passes : 0.0;
        s.mean_edit_sim_vs_ar = s.items > 0 ? sim / s.items : 1.0;
        s.pass_at_1 = s.tested > 0 ? (double) s.passed / s.tested : 0.0;
        out.push_back(s);
    }
    return out;
}

void bench_summarize(bench_results & out) {
    out.summary = bench_summarize_rows(out, 0, "");
}

std::vector<std::string> bench_chat_turns(const dataset_item & it) {
    if (it.kind != DATASET_KIND_HUMANEVAL) {
        return it.turns;
    }
    // the refinement loop: each turn a request an editor's user makes of the code just written
    const std::string & f = it.entry_point.empty() ? std::string("the function") : it.entry_point;
    return {"Complete this Python function. Answer with the whole code.\n\n```python\n" + it.context_code + "```",
            "Rename the function `" + f + "` to `" + f + "_v2` and give every local variable a more descriptive name. "
            "Answer with the whole code again.",
            "Add a docstring example for an empty input, and after the function a few assert statements that test it. "
            "Answer with the whole code again."};
}

// the item's file and the snippet of its change: the reference diff's hunks, or its own snippet
static apply_input bench_apply_input(const dataset_item & it) {
    return {it.context_code,
            it.update.empty() ? apply_snippet(it.context_code, it.reference, "# ... existing code ...") : it.update, ""};
}

void bench_apply_request(const model & m, const dataset_item & it, const bench_params & p, request & rq) {
    request_apply_tokens(m, bench_apply_input(it), rq, p.constrain, p.edit_layout, apply_view_for(p.file_view, p.constrain));
}

namespace {

// the prompts of the items (chat items: the first turn), their references and original code
bool bench_prompts(const bench_params & p, bench_layout layout, const model & m, const std::vector<dataset_item> & items,
                   std::vector<bench_prompt> & prompts, std::string * error) {
    for (const dataset_item & it : items) {
        bench_prompt bp;
        bp.id = it.id;
        if (p.task == DATASET_TASK_CHAT) {
            // the first turn (the prompt checks); bench_chat builds the conversation turn by turn
            const std::vector<std::string> turns = bench_chat_turns(it);
            if (turns.empty()) {
                if (error) *error = "item " + it.id + " has no turns";
                return false;
            }
            bp.item = &it;
            bp.prompt = chat_tokens(m, {{"user", turns[0]}});
            prompts.push_back(bp);
            continue;
        }
        bp.item = &it;
        replay_tokenize(m, dataset_raw_layout(it, p.instruction), bp.prompt, bp.reference);
        if (p.apply && it.task == DATASET_TASK_EDIT) {
            request rq;
            bench_apply_request(m, it, p, rq);
            bp.prompt = rq.prompt;
            bp.constraint = rq.constraint;
            bp.n_fit = m.tokenize(apply_prompt(m, bench_apply_input(it), p.edit_layout, APPLY_VIEW_FILE), true,
                                  apply_prompt_parse_special(m)).size();
        } else if (layout == BENCH_LAYOUT_EDIT && it.task == DATASET_TASK_EDIT) {
            const std::string & instr =
                p.instruction == INSTRUCTION_KIND_LAZY && !it.instruction_lazy.empty() ? it.instruction_lazy : it.instruction;
            bp.prompt = m.tokenize(edit_prompt(m, instr, it.context_code, p.edit_layout),
                                   true, edit_prompt_parse_special(m));
        }
        bp.original = edit_original_tokens(m, it.context_code);
        prompts.push_back(bp);
    }
    return true;
}

// a model used past the contexts it was trained on gives degraded (often empty) answers, and its
// speed figures describe those answers: say so once, up front
void warn_past_train_ctx(const model & m, const std::vector<bench_prompt> & prompts) {
    const int32_t n_train = m.facts().n_ctx_train;
    size_t n_past = 0;
    for (const bench_prompt & bp : prompts) {
        n_past += n_train > 0 && bp.prompt.size() + bp.original.size() > (size_t) n_train;
    }
    if (n_past > 0) {
        fprintf(stderr,
                "bench: warning: %zu of %zu items' prompts (with an answer as long as the original code) go past "
                "the model's training context of %d tokens; its answers there degrade\n",
                n_past, prompts.size(), n_train);
    }
}

// the progress line's entry for one method's result
std::string progress_entry(const method_spec & ms, const generate_result & r, const bench_row & row, double ar_ms) {
    char buf[160];
    if (!ms.is_ar()) {
        snprintf(buf, sizeof(buf), " | %s %.2fx%s", ms.name.c_str(), r.gen_ms > 0 ? ar_ms / r.gen_ms : 0.0,
                 row.identical_to_ar ? "" : " (differs)");
    } else if (r.tokens.empty()) {
        // a tok/s of 0 reads as a hang; the model ended the answer at once (often a prompt past its
        // training context)
        snprintf(buf, sizeof(buf), "ar: no tokens (EOS first, prompt %d tokens)", (int) row.prompt_tokens);
    } else {
        snprintf(buf, sizeof(buf), "ar %.1f tok/s", r.tokens_per_s());
    }
    return buf;
}

void print_progress(bench_results & out, size_t i, size_t n, const std::string & id, const std::string & line) {
    bench_summarize(out);
    std::string running;
    for (const bench_summary & s : out.summary) {
        if (method_name_is_ar(s.method)) continue;
        char buf[96];
        snprintf(buf, sizeof(buf), " %s %.2fx", s.method.c_str(), s.speedup_vs_ar);
        running += buf;
    }
    fprintf(stderr, "[%zu/%zu] %s: %s\n        running:%s\n", i + 1, n, id.c_str(), line.c_str(), running.c_str());
}

// what each method carries from item to item: acceptance statistics, fastcoder's cache (items of
// one repository, in file order: a cache holds only code an item's context or datastores hold too);
// and the items' repository datastores, opened once each
struct bench_carry {
    std::vector<accept_stats> stats;    // per method
    std::vector<retrieval_cache> caches; // per method
    std::map<std::string, std::unique_ptr<datastore>> repo_stores;
};

// every method on one prompt, ar first; appends the rows; *line gets the progress line
bool bench_item(const bench_params & p, runner & rn, const std::vector<method_spec> & specs,
                bench_carry & carry, const bench_prompt & bp, bench_results & out, std::string * line,
                generate_result & ar, std::string * error) {
    const model & m = *rn.target.model;
    request rq;
    rq.prompt = bp.prompt;
    rq.original = bp.original;
    rq.constraint = bp.constraint;
    rq.gen.n_predict = p.n_predict > 0 ? p.n_predict : (p.replay ? -1 : 512);
    // replay: the target's choices are the reference's (EOS last)
    const verify_forced forced{bp.reference, m.facts().eos != LLAMA_TOKEN_NULL ? m.facts().eos : m.facts().eot};
    rq.forced = p.replay ? &forced : nullptr;
    auto fail = [&](const std::string & msg) {
        if (error) *error = msg;
        return false;
    };
    const datastore * repo = nullptr;
    if (bp.item && !bp.item->repo_datastore.empty()) {
        auto & ds = carry.repo_stores[bp.item->repo_datastore];
        if (!ds) {
            ds = std::make_unique<datastore>();
            if (!datastore_open(bp.item->repo_datastore, &m, *ds, error)) {
                carry.repo_stores.erase(bp.item->repo_datastore);
                return fail("item " + bp.id + ": " + *error);
            }
        }
        repo = ds.get();
    }
    if (repo) rq.repo_datastores = std::span<const datastore * const>(&repo, 1);
    std::string code, tests;
    const bool has_tests = p.run_tests && bp.item && bp.turn == 0 && program_of(*bp.item, "", code, tests);
    if (has_tests) {
        // the reference solution under the same harness: which items can pass here at all
        const test_outcome t = run_python_tests(bp.item->reference, tests, p.tests);
        if (!t.ran) return fail("item " + bp.id + ": " + t.error);
        out.reference_tested++;
        if (!t.passed) out.reference_failed.push_back(bp.id);
    }
    for (size_t k = 0; k < specs.size(); k++) {
        const method_spec & ms = specs[k];
        rq.stats = &carry.stats[k];
        rq.cache = &carry.caches[k];
        generate_result r;
        if (!runner_generate(rn, ms, rq, r, error)) return false;
        if (r.stop == STOP_REASON_ERROR) return fail("item " + bp.id + ", method " + ms.name + ": " + r.error);
        bench_row row = row_from(bp.id, ms.name, r);
        row.turn = bp.turn;
        row.category = bp.category;
        if (k == 0) {
            ar = r; // ar, or with --no-ar the first method
        } else {
            row.identical_to_ar = r.tokens == ar.tokens;
            row.edit_sim_vs_ar = row.identical_to_ar ? 1.0 : edit_similarity(ar.text, r.text);
        }
        if (bp.turn == 0 && bp.item && bp.item->task == DATASET_TASK_EDIT && !bp.item->reference.empty()) {
            row.checked = true;
            row.code = p.apply ? apply_merged_code({bp.item->context_code, "", ""}, r.text) : edit_extract_code(r.text);
            row.exact = row.code == bp.item->reference;
        }
        if (has_tests) {
            program_of(*bp.item, r.text, code, tests);
            const test_outcome t = run_python_tests(code, tests, p.tests);
            if (!t.ran) return fail("item " + bp.id + ", method " + ms.name + ": " + t.error);
            row.tested = true;
            row.passed = t.passed;
        }
        out.rows.push_back(row);
        *line += progress_entry(ms, r, row, ar.gen_ms);
    }
    return true;
}

// one chat item, turn by turn: every method answers each turn; the conversation goes on with ar's answer
bool bench_chat(const bench_params & p, runner & rn, const std::vector<method_spec> & specs, bench_carry & carry,
                const dataset_item & it, bench_results & out, size_t i, size_t n, std::string * error) {
    const model & m = *rn.target.model;
    const std::vector<std::string> turns = bench_chat_turns(it);
    chat_conversation conv;
    for (size_t t = 0; t < turns.size(); t++) {
        chat_add(m, conv, {"user", turns[t]});
        bench_prompt bp;
        bp.id = it.id + "#" + std::to_string(t + 1);
        bp.item = &it;
        bp.turn = (int32_t) t + 1;
        bp.category = it.kind == DATASET_KIND_HUMANEVAL ? "refine" : it.category;
        bp.prompt = conv.tokens;
        if ((int32_t) bp.prompt.size() + 8 >= rn.ctx->n_ctx()) {
            fprintf(stderr, "bench: %s: the conversation is %zu tokens, the context holds %d: its later turns are left out\n",
                    bp.id.c_str(), bp.prompt.size(), rn.ctx->n_ctx());
            return true;
        }
        std::string line;
        generate_result ar;
        if (!bench_item(p, rn, specs, carry, bp, out, &line, ar, error)) return false;
        if (p.progress) print_progress(out, i, n, bp.id, line);
        chat_add_answer(m, conv, ar.tokens, ar.text);
    }
    return true;
}

// the runner the bench's models and datastores open in
runner_params bench_runner_params(const bench_params & p) {
    runner_params rp;
    rp.model_path = p.model_path;
    rp.datastore_paths = p.datastore_paths;
    rp.repo_datastore_paths = p.repo_datastore_paths;
    rp.draft_model_path = p.draft_model_path; // loaded once; each "sd" drafter gets its own context on it
    rp.n_ctx = p.n_ctx;
    rp.n_threads = p.threads;
    rp.flash_attn = p.flash_attn;
    rp.kv_type = p.kv_type;
    rp.rs_snapshots = p.rs_snapshots;
    rp.draft = p.draft;
    rp.settings = p.settings;
    return rp;
}

// with --fit-train-ctx, drops the items whose prompt and original exceed the model's training
// context (counted in out); otherwise warns of them
// the apply tasks the run would decode (those its context holds), as JSONL for an endpoint's test
bool bench_write_tasks(const bench_params & p, const std::vector<bench_prompt> & prompts, int32_t n_ctx,
                       bench_results & out, std::string * error) {
    if (!p.apply) {
        if (error) *error = "--write-tasks writes apply tasks: add --task apply";
        return false;
    }
    std::ofstream f(p.write_tasks);
    if (!f) {
        if (error) *error = "cannot write '" + p.write_tasks + "'";
        return false;
    }
    out.tasks_written = 0;
    for (const bench_prompt & bp : prompts) {
        if ((int32_t) bp.prompt.size() + 8 >= n_ctx) continue;
        const dataset_item & it = *bp.item;
        const apply_input in = bench_apply_input(it);
        f << nlohmann::json{{"id", it.id}, {"code", in.code}, {"update", in.update}, {"expected", it.reference}}.dump()
          << "\n";
        out.tasks_written++;
    }
    if (!f.flush()) {
        if (error) *error = "cannot write '" + p.write_tasks + "'";
        return false;
    }
    return true;
}

void bench_fit_train_ctx(const bench_params & p, const model & m, std::vector<bench_prompt> & prompts, bench_results & out) {
    if (p.fit_train_ctx) {
        const size_t n_train = (size_t) std::max(0, m.facts().n_ctx_train);
        const auto past = [&](const bench_prompt & bp) {
            return n_train > 0 && std::max(bp.n_fit, bp.prompt.size()) + bp.original.size() > n_train;
        };
        out.items_past_train_ctx = (int32_t) std::count_if(prompts.begin(), prompts.end(), past);
        prompts.erase(std::remove_if(prompts.begin(), prompts.end(), past), prompts.end());
        if (p.progress) {
            fprintf(stderr, "bench: %zu of %d items fit the model's training context of %zu tokens\n", prompts.size(),
                    out.items_in, n_train);
        }
    } else if (p.progress && !p.replay) {
        warn_past_train_ctx(m, prompts);
    }
}

} // namespace

bool bench_run(const bench_params & p, bench_results & out, std::string * error) {
    auto fail = [&](const std::string & msg) {
        if (error) *error = msg;
        return false;
    };
    out = bench_results();
    out.params = p;
    out.started = now_iso();
    out.machine = machine_description();
    // ar first: the reference of every other method (--no-ar: the first method given)
    out.params.methods.clear();
    if (!p.no_ar) out.params.methods.push_back(METHOD_AR);
    for (const std::string & m : p.methods) {
        if (!method_name_is_ar(m) || p.no_ar) out.params.methods.push_back(m);
    }
    if (out.params.methods.empty()) return fail("--no-ar needs a method");
    std::vector<method_spec> specs;
    bool need_cost = false;
    for (const std::string & name : out.params.methods) {
        method_spec ms;
        if (!method_parse(name, ms, error)) return false;
        need_cost = need_cost || (!ms.is_ar() && ms.draft_max == 0);
        specs.push_back(ms);
    }
    if (p.task == DATASET_TASK_CHAT && p.replay) {
        return fail("--replay needs reference outputs; chat datasets have none");
    }
    if (p.run_tests && p.replay) {
        return fail("--tests judges the model's own outputs; with --replay every output is the reference");
    }
    out.layout = p.layout != BENCH_LAYOUT_AUTO ? p.layout : (p.replay ? BENCH_LAYOUT_RAW : BENCH_LAYOUT_EDIT);

    std::vector<dataset_item> items;
    if (!dataset_load(p.dataset_path, DATASET_KIND_AUTO, items, error)) return false;
    if (items.empty()) return fail("dataset '" + p.dataset_path + "' has no items");
    if (p.limit > 0 && (size_t) p.limit < items.size()) items.resize(p.limit);

    runner rn;
    if (!runner_open(bench_runner_params(p), rn, error)) return false;
    const model & m = *rn.target.model;
    out.model_desc = m.facts().desc + " (" + m.facts().arch + ")";
    out.params.flash_attn = rn.ctx->params().flash_attn; // what runs (on by itself on a GPU in the exact mode)
    if (out.params.model_setting.empty()) {
        out.params.model_setting = p.replay ? "real-shape replay" : "model outputs";
    }
    if (need_cost) {
        if (p.progress) fprintf(stderr, "bench: measuring the cost model (cached per model file and threads)\n");
        if (!runner_cost(rn, error)) return false;
        out.cost_n = rn.cost.n;
        out.cost_ms = rn.cost.ms;
        out.cost_depth0 = rn.cost.depth0;
        out.cost_deeper = rn.cost.deeper;
    }
    std::vector<bench_prompt> prompts;
    if (!bench_prompts(p, out.layout, m, items, prompts, error)) return false;
    out.items_in = (int32_t) items.size();
    bench_fit_train_ctx(p, m, prompts, out);
    if (!p.write_tasks.empty()) return bench_write_tasks(p, prompts, rn.ctx->n_ctx(), out, error);
    bench_carry carry;
    carry.stats.resize(specs.size());
    carry.caches.resize(specs.size());
    for (size_t i = 0; i < prompts.size(); i++) {
        const bench_prompt & bp = prompts[i];
        if ((int32_t) bp.prompt.size() + 8 >= rn.ctx->n_ctx()) {
            fprintf(stderr, "bench: skipping %s: prompt is %zu tokens, the context holds %d\n", bp.id.c_str(),
                    bp.prompt.size(), rn.ctx->n_ctx());
            continue;
        }
        if (p.task == DATASET_TASK_CHAT) {
            if (!bench_chat(p, rn, specs, carry, *bp.item, out, i, prompts.size(), error)) return false;
            continue;
        }
        std::string line;
        generate_result ar;
        if (!bench_item(p, rn, specs, carry, bp, out, &line, ar, error)) return false;
        if (p.progress) print_progress(out, i, prompts.size(), bp.id, line);
    }
    bench_summarize(out);
    return true;
}

} // namespace editspec
