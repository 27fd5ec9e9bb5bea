// Oracle replay (docs/results/design-notes/cost-curve-and-oracle.md): target passes a drafter needs when the greedy output is known.
#include "editspec/replay.h"
#include "editspec/log.h"
#include "editspec/verify.h"

#include <algorithm>
#include <climits>

namespace editspec {

void replay_result::add(const replay_result & o) {
    n_tokens   += o.n_tokens;
    n_passes   += o.n_passes;
    n_drafts   += o.n_drafts;
    n_drafted  += o.n_drafted;
    n_accepted += o.n_accepted;
    n_cut      += o.n_cut;
    cost       += o.cost;
    cost_ar    += o.cost_ar;
}

void replay_fn_drafter::propose(std::span<const llama_token> history, draft_tree & tree, int32_t budget) {
    if (budget <= 0) {
        return;
    }
    const token_vec d = fn(history);
    // budget counts new nodes; INT32_MAX-safe
    const int32_t max_nodes = (int32_t) std::min<int64_t>((int64_t) tree.size() + budget, INT32_MAX);
    tree.add_path(-1, d, src, max_nodes);
}

void drafter_chain::begin(std::span<const llama_token> prompt) {
    for (drafter_i * d : ds) {
        d->begin(prompt);
    }
}

void drafter_chain::propose(std::span<const llama_token> history, draft_tree & tree, int32_t budget) {
    const int32_t start = tree.size();
    for (drafter_i * d : ds) {
        const int32_t left = budget - (tree.size() - start);
        if (left <= 0) {
            break;
        }
        d->propose(history, tree, left);
    }
}

void drafter_chain::accept(std::span<const llama_token> accepted) {
    for (drafter_i * d : ds) {
        d->accept(accepted);
    }
}

replay_result oracle_replay(std::span<const llama_token> context, std::span<const llama_token> reference,
                            drafter_i & drafter, const replay_params & params, const cost_model & cost) {
    replay_result r;
    const int64_t N = (int64_t) reference.size();
    r.n_tokens = N;
    r.cost_ar  = (double) N * cost.t(1);

    // history = context + reference[0 .. pos)
    token_vec history(context.begin(), context.end());
    history.reserve(context.size() + reference.size());

    int32_t budget = params.sizing == REPLAY_SIZING_GROW_SHRINK ? params.cap_init : params.cap;
    if (budget < 0) {
        budget = INT32_MAX / 2;
    }

    const bool by_decoder = params.sizing == REPLAY_SIZING_DECODER;
    if (by_decoder && (!params.spec || (params.spec->draft_max == 0 && !params.spec->cost))) {
        ES_LOG_ERROR("oracle_replay: decoder sizing needs spec params with a cap or a cost model\n");
        return r;
    }
    accept_stats local_stats;
    accept_stats & stats = params.stats ? *params.stats : local_stats;
    if (by_decoder) {
        budget = params.spec->draft_max > 0 ? params.spec->draft_max : params.spec->tree_max;
    }

    const bool use_hs = by_decoder && params.hindsight; // statistics from every offered node
    accept_hindsight hs;
    drafter.begin(context);
    draft_tree tree;
    std::vector<int32_t> path;
    int64_t pos = 0;
    while (pos < N) {
        tree.clear();
        drafter.propose(history, tree, budget);
        const std::span<const llama_token> rest = reference.subspan(pos);
        int32_t a_offered = 0; // what verifying the whole offered tree would have accepted
        if (by_decoder) {
            a_offered = (int32_t) verify_forced_path(tree, verify_forced{rest}, 0).accepted.size();
            pass_shape shape;
            shape.max_depth = (int32_t) std::min<int64_t>(N - pos - 1, INT32_MAX);
            shape.max_leaves = params.max_leaves;
            shape.chain_only = params.max_leaves <= 1;
            if (use_hs) hs.offer(tree_limit_depth(tree, shape.max_depth), pos);
            tree = tree_for_pass(tree, *params.spec, stats, shape);
        }

        path = verify_forced_path(tree, verify_forced{rest}, 0).accepted; // the target's choices are the reference
        const int32_t a = (int32_t) path.size();
        if (by_decoder) {
            if (!use_hs) accept_stats_record_pass(stats, tree, path, nullptr);
            const int32_t a_max = (int32_t) std::min<int64_t>(a_offered, N - pos - 1); // the sizing's max_depth
            r.n_cut += a == tree.max_depth() && a_max > a ? 1 : 0;
        }
        // the target's own token follows the accepted ones unless the reference (EOS) has ended
        const int64_t n_commit = std::min<int64_t>(a + 1, N - pos);
        const int32_t drafted  = params.sizing == REPLAY_SIZING_CLAIRVOYANT ? a : tree.size();

        r.n_passes++;
        r.n_drafts   += tree.empty() ? 0 : 1;
        r.n_drafted  += drafted;
        r.n_accepted += a;
        r.cost       += cost.t(1 + drafted);

        if (params.sizing == REPLAY_SIZING_GROW_SHRINK && !tree.empty()) {
            if (a >= tree.max_depth()) {
                budget = std::min(budget * 2, params.cap_max);
            } else {
                budget = std::min(a + 2, params.cap_max);
            }
        }

        const std::span<const llama_token> committed = rest.first(n_commit);
        history.insert(history.end(), committed.begin(), committed.end());
        drafter.accept(committed);
        if (use_hs) hs.commit(committed, stats);
        pos += n_commit;
    }
    return r;
}

void replay_tokenize(const model & m, const dataset_text & text, token_vec & context, token_vec & reference) {
    context   = m.tokenize(text.context, /*add_special=*/true, /*parse_special=*/false);
    reference = m.tokenize(text.reference, /*add_special=*/false, /*parse_special=*/false);
    reference.push_back(m.facts().eos);
}

} // namespace editspec
