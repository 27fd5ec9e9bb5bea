// `editspec bench --oracle`: every method's drafters replayed against the dataset's reference
// outputs (replay.h), under several draft sizings, costed on a pass-cost curve. No model passes:
// it shows what a method could reach on a cost curve, and where a sizing rule loses against the
// clairvoyant bound.
#include "editspec/bench.h"
#include "editspec/cost.h"
#include "editspec/datastore.h"
#include "editspec/edit.h"
#include "editspec/fastcoder.h"
#include "editspec/methods.h"
#include "editspec/request.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <map>
#include <memory>

namespace editspec {

namespace {

struct sizing_row {
    std::string name;
    replay_params rp;
    bool warm = false; // statistics from a first replay of every item (an in-sample bound for them)
};

// the sizings a method is replayed under (bench.h): its own cap only, or the whole study
std::vector<sizing_row> oracle_sizings(const method_spec & ms, const spec_params * sp, const spec_params * sp_bare) {
    std::vector<sizing_row> v;
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
    rp.sizing = REPLAY_SIZING_DECODER; // statistics set per row
    rp.spec = sp;
    v.push_back({"cost model", rp});
    // what verifying whole trees would add if off-chain nodes were exact (the decoder verifies one
    // chain: exactness.md §3); 64 paths, what the decoder's context offers (runner_n_seq_max)
    rp.max_leaves = 64;
    v.push_back({"cost model, whole trees", rp});
    rp.max_leaves = 1;
    // what better acceptance statistics could add: scored on every offered node, not only the sent
    // ones; and known in advance (the same items replayed first)
    rp.hindsight = true;
    v.push_back({"cost model, hindsight statistics", rp});
    rp.hindsight = false;
    v.push_back({"cost model, statistics known in advance", rp, true});
    if (sp_bare) {
        rp.spec = sp_bare;
        v.push_back({"cost model, blind to overhead", rp});
    }
    rp = {};
    rp.sizing = REPLAY_SIZING_CLAIRVOYANT;
    v.push_back({"clairvoyant", rp});
    return v;
}

// an item's tokens, once for every method and sizing
struct item_tokens {
    token_vec context, reference, original;
    std::string repo_datastore; // the item's D_r (fastcoder), empty for none
};

// the datastores rest and fastcoder search: --datastore, --repo-datastore, and the items' own D_r
// (each opened once)
struct oracle_stores {
    std::vector<std::unique_ptr<datastore>> owned;
    std::vector<const datastore *> common, repo;
    std::map<std::string, const datastore *> by_item;
};

bool oracle_open_stores(const bench_params & p, const model & m, const std::vector<item_tokens> & items,
                        oracle_stores & out, std::string * error) {
    auto open = [&](const std::string & path) -> const datastore * {
        auto ds = std::make_unique<datastore>();
        if (!datastore_open(path, &m, *ds, error)) return nullptr;
        out.owned.push_back(std::move(ds));
        return out.owned.back().get();
    };
    for (const std::string & path : p.datastore_paths) {
        if (const datastore * ds = open(path)) out.common.push_back(ds);
        else return false;
    }
    for (const std::string & path : p.repo_datastore_paths) {
        if (const datastore * ds = open(path)) out.repo.push_back(ds);
        else return false;
    }
    for (const item_tokens & t : items) {
        if (t.repo_datastore.empty() || out.by_item.count(t.repo_datastore)) continue;
        if (const datastore * ds = open(t.repo_datastore)) out.by_item[t.repo_datastore] = ds;
        else return false;
    }
    return true;
}

bool oracle_items(const bench_params & p, const model & m, std::vector<item_tokens> & out, std::string * error) {
    std::vector<dataset_item> items;
    if (!dataset_load(p.dataset_path, DATASET_KIND_AUTO, items, error)) return false;
    if (items.empty()) {
        if (error) *error = "dataset '" + p.dataset_path + "' has no items";
        return false;
    }
    if (p.limit > 0 && (size_t) p.limit < items.size()) items.resize(p.limit);
    for (const dataset_item & it : items) {
        item_tokens t;
        replay_tokenize(m, dataset_raw_layout(it, p.instruction), t.context, t.reference);
        if (p.apply && it.task == DATASET_TASK_EDIT) {
            request rq;
            bench_apply_request(m, it, p, rq);
            t.context = rq.prompt;
        }
        if (it.task == DATASET_TASK_EDIT) t.original = edit_original_tokens(m, it.context_code);
        t.repo_datastore = it.repo_datastore;
        out.push_back(std::move(t));
    }
    return true;
}

// one row: the method's drafters replayed over every item under one sizing
bool oracle_replay_row(const method_spec & ms, const model & m, const std::vector<item_tokens> & items,
                       const oracle_stores & stores, replay_params rp, bool warm, const cost_model & cost,
                       replay_result & out, std::string * error) {
    accept_stats stats; // carried across items, as bench carries them per method
    rp.stats = &stats;
    // warm: every item replayed once first, so the statistics are known in advance; fastcoder's
    // cache starts empty again (it would hold the reference outputs themselves)
    for (int run = warm ? 0 : 1; run < 2; run++) {
        out = {};
        retrieval_cache cache; // carried across items, likewise
        for (const item_tokens & t : items) {
            drafter_inputs in;
            in.original = t.original;
            in.target = &m;
            in.datastores = stores.common;
            in.repo_datastores = stores.repo;
            const auto it = stores.by_item.find(t.repo_datastore);
            if (it != stores.by_item.end()) in.repo_datastores = std::span<const datastore * const>(&it->second, 1);
            in.cache = &cache;
            std::vector<std::unique_ptr<drafter_i>> owned;
            if (!method_make_drafters(ms, in, owned, error)) return false;
            std::vector<drafter_i *> ds;
            for (auto & d : owned) ds.push_back(d.get());
            drafter_chain chain(ds);
            out.add(oracle_replay(t.context, t.reference, chain, rp, cost));
        }
    }
    return true;
}

} // namespace

bool bench_oracle(const bench_params & p, const cost_model & bare_cost, double pass_overhead, oracle_results & out,
                  std::string * error) {
    auto fail = [&](const std::string & msg) {
        if (error) *error = msg;
        return false;
    };
    if (p.task != DATASET_TASK_EDIT && p.task != DATASET_TASK_COMPLETE) {
        return fail("--oracle replays reference outputs; chat datasets have none");
    }
    if (p.apply && p.constrain) {
        return fail("--oracle replays free greedy decoding; --constrain is not modelled (drop one)");
    }
    if (pass_overhead < 0.0) {
        return fail("pass overhead " + std::to_string(pass_overhead) + " is negative");
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
    model_load_result lr = model_load(p.model_path, /*vocab_only=*/true);
    if (!lr.model) return fail(lr.error);
    const model & m = *lr.model;
    std::vector<item_tokens> items;
    if (!oracle_items(p, m, items, error)) return false;
    oracle_stores stores;
    if (!oracle_open_stores(p, m, items, stores, error)) return false;

    // passes cost the curve plus the overhead, in 1-token passes; the decoder's sizing sees either
    const cost_model bare = cost_model_relative(bare_cost);
    cost_model cost = bare;
    for (double & t : cost.ms) t += pass_overhead;
    const cost_model cost_rel = cost_model_relative(cost); // what a decoder sizes with: t(1) = 1
    spec_params sp, sp_bare;
    sp.cost = &cost_rel;
    sp_bare.cost = &bare;

    out = {};
    out.items = (int32_t) items.size();
    out.cost = bare;
    out.pass_overhead = pass_overhead;
    for (const method_spec & ms : specs) {
        for (const sizing_row & sz : oracle_sizings(ms, &sp, pass_overhead > 0.0 ? &sp_bare : nullptr)) {
            oracle_row row;
            row.method = ms.name;
            row.sizing = sz.name;
            replay_params rp = sz.rp;
            if (!rp.spec) rp.spec = &sp;
            if (!oracle_replay_row(ms, m, items, stores, rp, sz.warm, cost, row.r, error)) return false;
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
    for (int32_t n : res.cost.n) {
        s += ' ';
        s += std::to_string(n);
        s += " |";
    }
    s += "\n| --- |";
    for (size_t i = 0; i < res.cost.n.size(); i++) s += " ---: |";
    s += "\n| cost vs 1 token |";
    for (double t : res.cost.ms) {
        snprintf(buf, sizeof(buf), " %.2f |", (t / res.cost.ms[0] + res.pass_overhead) / (1.0 + res.pass_overhead));
        s += buf;
    }
    s += "\n\nRejected: draft tokens sent and not accepted, per pass. Cut short (cost-model rows): passes whose\n"
         "draft was accepted whole while the drafters had offered more that would have been. The two are what\n"
         "a sizing loses against clairvoyant.\n\n"
         "| method | sizing | tokens per pass | draft tokens per pass | accepted / drafted | rejected per pass | cut short | speedup |\n"
         "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n";
    for (const oracle_row & row : res.rows) {
        const replay_result & r = row.r;
        const double passes = (double) std::max<int64_t>(1, r.n_passes);
        std::string cut;
        if (row.sizing.rfind("cost model", 0) == 0) {
            snprintf(buf, sizeof(buf), "%.1f %%", 100.0 * (double) r.n_cut / passes);
            cut = buf;
        }
        snprintf(buf, sizeof(buf), "| %s | %s | %.2f | %.2f | %.3f | %.2f | %s | %.2fx |\n", row.method.c_str(),
                 row.sizing.c_str(), r.tokens_per_pass(), (double) r.n_drafted / passes,
                 r.n_drafted > 0 ? (double) r.n_accepted / (double) r.n_drafted : 0.0,
                 (double) (r.n_drafted - r.n_accepted) / passes, cut.c_str(), r.speedup());
        s += buf;
    }
    return s;
}

} // namespace editspec
