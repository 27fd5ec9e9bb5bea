// `editspec bench --oracle`: every method's drafters replayed against the dataset's reference
// outputs (replay.h), under several draft sizings, costed on a pass-cost curve. No model passes:
// it shows what a method could reach on a cost curve, and where a sizing rule loses against the
// clairvoyant bound.
#include "editspec/bench.h"
#include "editspec/cost.h"
#include "editspec/edit.h"
#include "editspec/methods.h"

#include <climits>
#include <cstdio>
#include <memory>

namespace editspec {

bool bench_oracle(const bench_params & p, const cost_curve & bare_curve, double pass_overhead, oracle_results & out,
                  std::string * error) {
    auto fail = [&](const std::string & msg) {
        if (error) *error = msg;
        return false;
    };
    if (p.task != DATASET_TASK_EDIT && p.task != DATASET_TASK_COMPLETE) {
        return fail("--oracle replays reference outputs; chat datasets have none");
    }
    std::vector<method_spec> specs;
    for (const std::string & name : p.methods) {
        method_spec ms;
        if (!method_parse(name, ms, error)) return false;
        if (ms.uses_draft_model()) {
            return fail("method '" + name + "' drafts with a model; --oracle replays only drafters that need no model pass");
        }
        specs.push_back(ms);
    }
    std::vector<dataset_item> items;
    if (!dataset_load(p.dataset_path, DATASET_KIND_AUTO, items, error)) return false;
    if (items.empty()) return fail("dataset '" + p.dataset_path + "' has no items");
    if (p.limit > 0 && (size_t) p.limit < items.size()) items.resize(p.limit);

    model_load_result lr = model_load(p.model_path, /*vocab_only=*/true);
    if (!lr.model) return fail(lr.error);
    const model & m = *lr.model;

    struct sizing_t {
        std::string name;
        replay_params rp;
    };
    if (pass_overhead < 0.0) {
        return fail("pass overhead " + std::to_string(pass_overhead) + " is negative");
    }
    // the cost model the decoder would size with: the curve's points, relative to one token
    auto model_of = [](const cost_curve & c) {
        std::vector<int32_t> n;
        std::vector<double> rel;
        for (const auto & pt : c.points) {
            n.push_back(pt.first);
            rel.push_back(pt.second / c.points.front().second);
        }
        return cost_model_from_table(n, rel);
    };
    cost_curve curve = bare_curve;
    for (auto & pt : curve.points) pt.second += pass_overhead * bare_curve.points.front().second;
    const cost_model cm = model_of(curve), cm_bare = model_of(bare_curve);
    spec_params sp, sp_bare;
    sp.cost = &cm;
    sp_bare.cost = &cm_bare;

    auto sizings_for = [&](const method_spec & ms) {
        std::vector<sizing_t> v;
        replay_params rp;
        if (ms.draft_max > 0) {
            rp.cap = ms.draft_max;
            v.push_back({"cap " + std::to_string(ms.draft_max), rp});
            return v;
        }
        v.push_back({"uncapped", rp});
        for (int32_t cap : {8, 16, 48}) {
            rp.cap = cap;
            v.push_back({"cap " + std::to_string(cap), rp});
        }
        rp = {};
        rp.sizing = REPLAY_SIZING_GROW_SHRINK;
        v.push_back({"grow", rp});
        rp = {};
        rp.sizing = REPLAY_SIZING_DECODER; // stats set per method below
        rp.spec = &sp;
        v.push_back({"cost model", rp});
        if (pass_overhead > 0.0) {
            rp.spec = &sp_bare;
            v.push_back({"cost model, blind to overhead", rp});
        }
        rp = {};
        rp.sizing = REPLAY_SIZING_CLAIRVOYANT;
        v.push_back({"clairvoyant", rp});
        return v;
    };

    // tokens once per item
    struct item_tokens {
        token_vec context, reference, original;
    };
    std::vector<item_tokens> toks;
    for (const dataset_item & it : items) {
        item_tokens t;
        replay_tokenize(m, dataset_raw_layout(it, p.instruction), t.context, t.reference);
        if (it.task == DATASET_TASK_EDIT) t.original = edit_original_tokens(m, it.context_code);
        toks.push_back(std::move(t));
    }

    out = {};
    out.items = (int32_t) items.size();
    out.curve = bare_curve;
    out.pass_overhead = pass_overhead;
    for (const method_spec & ms : specs) {
        for (sizing_t & sz : sizings_for(ms)) {
            accept_stats stats; // carried across items, as bench carries them per method
            if (!sz.rp.spec) sz.rp.spec = &sp;
            sz.rp.stats = &stats;
            oracle_row row;
            row.method = ms.name;
            row.sizing = sz.name;
            for (const item_tokens & t : toks) {
                method_inputs in;
                in.original = t.original;
                in.target = &m;
                std::vector<std::unique_ptr<drafter_i>> owned;
                if (!method_make_drafters(ms, in, owned, error)) return false;
                std::vector<drafter_i *> ds;
                for (auto & d : owned) ds.push_back(d.get());
                drafter_chain chain(ds);
                row.r.add(oracle_replay(t.context, t.reference, chain, sz.rp, curve));
            }
            out.rows.push_back(row);
        }
    }
    return true;
}

std::string oracle_report_md(const bench_params & p, const oracle_results & res) {
    std::string s;
    char buf[512];
    s += "# editspec bench --oracle\n\n";
    s += "Oracle replay: the dataset's reference output stands in for the target's greedy output; no model\n"
         "passes. Each pass verifies 1 + the draft nodes and costs t(1 + nodes) on the curve below\n"
         "(clairvoyant: only the accepted ones, a bound). Speedup = tokens x t(1) / summed pass costs.\n\n";
    snprintf(buf, sizeof(buf), "| | |\n| --- | --- |\n| tokenizer | `%s` |\n| dataset | `%s` (%d items, %s instruction, raw layout) |\n| cost curve | %s |\n\n",
             p.model_path.c_str(), p.dataset_path.c_str(), res.items,
             p.instruction == INSTRUCTION_KIND_LAZY ? "lazy" : "descriptive", res.curve_label.c_str());
    s += buf;
    if (res.pass_overhead > 0.0) {
        snprintf(buf, sizeof(buf), "Every pass also pays %.3g single-token passes beside the curve (--pass-overhead): the costs\n"
                 "below include it; \"blind to overhead\" sizes on the bare curve.\n\n", res.pass_overhead);
        s += buf;
    }
    s += "| tokens in the pass |";
    for (const auto & pt : res.curve.points) s += " " + std::to_string(pt.first) + " |";
    s += "\n| --- |";
    for (size_t i = 0; i < res.curve.points.size(); i++) s += " ---: |";
    s += "\n| cost vs 1 token |";
    for (const auto & pt : res.curve.points) {
        snprintf(buf, sizeof(buf), " %.2f |", (pt.second / res.curve.points[0].second + res.pass_overhead) / (1.0 + res.pass_overhead));
        s += buf;
    }
    s += "\n\n| method | sizing | tokens per pass | draft tokens per pass | accepted / drafted | speedup |\n"
         "| --- | --- | ---: | ---: | ---: | ---: |\n";
    for (const oracle_row & row : res.rows) {
        const replay_result & r = row.r;
        snprintf(buf, sizeof(buf), "| %s | %s | %.2f | %.2f | %.3f | %.2fx |\n", row.method.c_str(), row.sizing.c_str(),
                 r.tokens_per_pass(), r.n_passes > 0 ? (double) r.n_drafted / (double) r.n_passes : 0.0,
                 r.n_drafted > 0 ? (double) r.n_accepted / (double) r.n_drafted : 0.0, r.speedup());
        s += buf;
    }
    return s;
}

} // namespace editspec
