// Draft sizing: expected acceptance per node from running statistics, and the tree that maximises
// expected tokens per unit of measured pass cost.
#include "editspec/sizing.h"
#include "editspec/log.h"

#include <algorithm>
#include <numeric>

namespace editspec {

float accept_stats::rate(uint8_t source, uint8_t cls, int32_t depth) const {
    const int32_t d = std::min(std::max(depth, 1), n_depth);
    const int32_t c = std::min<int32_t>(cls, DRAFT_CLASS_COUNT - 1);
    // a depth with little evidence leans on the depth above it, not on the flat prior: acceptance
    // changes slowly with depth, and a deep bucket sees few nodes (each must pass every depth above),
    // so a flat prior would keep long drafts of a drafter that copies well looking worse than they are
    float est = prior, first = prior; // first: the estimate at depth 1
    for (int32_t k = 1; k <= d; k++) {
        // the server's other requests, as at most pooled_weight observations at their rate
        const float pr = pooled_reached[source][c][k];
        const float w = std::min(pr, pooled_weight);
        const float pa = pr > 0.0f ? pooled_accepted[source][c][k] / pr * w : 0.0f;
        est = (accepted[source][c][k] + pa + est * prior_weight) / (reached[source][c][k] + w + prior_weight);
        if (k == 1) first = est;
    }
    // optimism tries depths with little evidence only in a class whose first token is accepted
    // often: a class that fails at its first token is not sent 40 deep on the hope that depth 40
    // differs, while a long copy, whose acceptance rises with its length, is tried deep at once
    const bool promising = d == 1 || first >= explore_first;
    const float seen = reached[source][c][d] + pooled_reached[source][c][d];
    return seen < explore_min_obs && promising ? std::max(est, optimistic) : est;
}

void accept_stats_pool_begin(accept_stats & own, const accept_stats & pool, accept_stats & at_start) {
    for (int s = 0; s < DRAFT_SOURCE_COUNT; s++) {
        for (int c = 0; c < DRAFT_CLASS_COUNT; c++) {
            for (int k = 0; k <= accept_stats::n_depth; k++) {
                // what the pool holds of this slot's own past requests is in its own counts already
                own.pooled_reached[s][c][k] = std::max(0.0f, pool.reached[s][c][k] - own.reached[s][c][k]);
                own.pooled_accepted[s][c][k] = std::max(0.0f, pool.accepted[s][c][k] - own.accepted[s][c][k]);
                own.pooled_accepted[s][c][k] = std::min(own.pooled_accepted[s][c][k], own.pooled_reached[s][c][k]);
            }
        }
    }
    at_start.reached = own.reached;
    at_start.accepted = own.accepted;
}

void accept_stats_pool_end(accept_stats & pool, const accept_stats & own, const accept_stats & at_start) {
    for (int s = 0; s < DRAFT_SOURCE_COUNT; s++) {
        for (int c = 0; c < DRAFT_CLASS_COUNT; c++) {
            for (int k = 0; k <= accept_stats::n_depth; k++) {
                pool.reached[s][c][k] += std::max(0.0f, own.reached[s][c][k] - at_start.reached[s][c][k]);
                pool.accepted[s][c][k] += std::max(0.0f, own.accepted[s][c][k] - at_start.accepted[s][c][k]);
            }
        }
    }
}

void accept_stats::record(uint8_t source, uint8_t cls, int32_t depth, bool was_accepted) {
    const int32_t d = std::min(std::max(depth, 1), n_depth);
    const int32_t c = std::min<int32_t>(cls, DRAFT_CLASS_COUNT - 1);
    reached[source][c][d] += 1.0f;
    accepted[source][c][d] += was_accepted ? 1.0f : 0.0f;
}

std::vector<float> tree_node_probs(const draft_tree & tree, const accept_stats & stats) {
    const int32_t n = tree.size();
    std::vector<float> rate(n), p(n);
    const std::vector<int32_t> depth = tree.depths();
    // sum of the children's rates per parent (index parent + 1; 0 = root)
    std::vector<float> child_sum(n + 1, 0.0f);
    for (int32_t i = 0; i < n; i++) {
        const draft_node & nd = tree.nodes[i];
        rate[i] = stats.rate(nd.source, draft_class(nd), depth[i]);
        child_sum[nd.parent + 1] += rate[i];
    }
    for (int32_t i = 0; i < n; i++) {
        const draft_node & nd = tree.nodes[i];
        // one target token per node: at most one child is accepted
        const float share = std::max(1.0f, child_sum[nd.parent + 1]);
        const float parent_p = nd.parent < 0 ? 1.0f : p[nd.parent];
        p[i] = parent_p * rate[i] / share;
    }
    return p;
}

// probs of the kept nodes, in the kept order
static std::vector<float> tree_node_probs_subset(const std::vector<float> & probs, const std::vector<bool> & keep) {
    std::vector<float> out;
    for (size_t i = 0; i < probs.size(); i++) {
        if (keep[i]) out.push_back(probs[i]);
    }
    return out;
}

draft_tree tree_order_dfs(const draft_tree & tree, const std::vector<float> & probs) {
    const int32_t n = tree.size();
    std::vector<std::vector<int32_t>> children(n + 1); // [parent + 1]
    for (int32_t i = 0; i < n; i++) {
        children[tree.nodes[i].parent + 1].push_back(i);
    }
    for (auto & c : children) {
        std::stable_sort(c.begin(), c.end(), [&](int32_t a, int32_t b) { return probs[a] > probs[b]; });
    }
    draft_tree out;
    out.nodes.reserve(n);
    std::vector<int32_t> remap(n, -1);
    std::vector<int32_t> stack(children[0].rbegin(), children[0].rend());
    while (!stack.empty()) {
        const int32_t i = stack.back();
        stack.pop_back();
        draft_node nd = tree.nodes[i];
        nd.parent = nd.parent < 0 ? -1 : remap[nd.parent];
        remap[i] = out.size();
        out.nodes.push_back(nd);
        const auto & c = children[i + 1];
        stack.insert(stack.end(), c.rbegin(), c.rend());
    }
    return out;
}

draft_tree tree_first_chain(const draft_tree & tree) {
    draft_tree out;
    for (int32_t i = 0; i < tree.size() && tree.nodes[i].parent == i - 1; i++) {
        out.nodes.push_back(tree.nodes[i]);
    }
    return out;
}

draft_tree tree_truncate(const draft_tree & tree, int32_t n) {
    draft_tree out;
    out.nodes.assign(tree.nodes.begin(), tree.nodes.begin() + std::min(n, tree.size()));
    return out;
}

draft_tree tree_prune_by_cost(const draft_tree & tree, const std::vector<float> & probs, const cost_model & cost,
                              int32_t max_leaves, int32_t step_tokens, float step_yield, int32_t depth,
                              double step_depth_ms, int32_t step_prompt, double draft_extra_ms) {
    const int32_t n = tree.size();
    if (n == 0) {
        return tree;
    }
    // a child's probability never exceeds its parent's, and ties go to the lower index (the
    // parent), so every prefix of this order is closed under parents
    std::vector<int32_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return probs[a] > probs[b]; });

    // the step's pass with this request's m tokens: the weights read once for every token, each
    // request's attention at its own depth (a deep pass costs more per token, its curve has another shape)
    const pass_part others{step_tokens, 0};
    auto pass = [&](int32_t m) {
        const pass_part own{m, depth};
        const pass_part parts[2] = {own, others};
        return cost.t_step(parts) + step_depth_ms;
    };
    const double t1 = cost.t(1, depth);
    // the prompt rows' cost is sunk: the nodes are weighed over the pass without them, at the slope
    // the pass has with them
    const double p1 = pass(1);
    double plain = p1;
    if (step_prompt > 0) {
        const pass_part parts[2] = {{1, depth}, {std::max(0, step_tokens - step_prompt), 0}};
        plain = std::min(p1, cost.t_step(parts) + step_depth_ms);
    }
    auto priced = [&](int32_t m) { return (plain + (m > 1 ? pass(m) - p1 + draft_extra_ms : 0.0)) / t1; };
    // no draft: one token (and the others' yield) for the pass without this request's nodes
    double best_value = (step_yield + 1.0) / priced(1);
    int32_t best_n = 0;
    double gain = step_yield + 1.0;
    for (int32_t k = 0; k < n; k++) {
        gain += probs[order[k]];
        const double value = gain / priced(2 + k);
        if (value > best_value) {
            best_value = value;
            best_n = k + 1;
        }
    }
    std::vector<bool> keep(n, false);
    for (int32_t k = 0; k < best_n; k++) {
        keep[order[k]] = true;
    }
    return tree_limit_leaves(tree.kept(keep), tree_node_probs_subset(probs, keep), max_leaves);
}

draft_tree tree_limit_leaves(const draft_tree & tree, const std::vector<float> & probs, int32_t max_leaves) {
    const int32_t n = tree.size();
    std::vector<bool> keep(n, true);
    // one sequence id per leaf: drop the least likely leaves while there are too many
    while (true) {
        std::vector<bool> has_child(n, false);
        for (int32_t i = 0; i < n; i++) {
            if (keep[i] && tree.nodes[i].parent >= 0) has_child[tree.nodes[i].parent] = true;
        }
        int32_t n_leaves = 0, worst = -1;
        for (int32_t i = 0; i < n; i++) {
            if (keep[i] && !has_child[i]) {
                n_leaves++;
                if (worst < 0 || probs[i] <= probs[worst]) worst = i; // ties: the later leaf goes
            }
        }
        if (n_leaves <= max_leaves || worst < 0) break;
        keep[worst] = false;
    }
    return tree.kept(keep);
}

// nodes deeper than max_depth go, with everything under them
draft_tree tree_limit_depth(const draft_tree & tree, int32_t max_depth) {
    const std::vector<int32_t> depth = tree.depths();
    std::vector<bool> keep(depth.size());
    for (size_t i = 0; i < depth.size(); i++) keep[i] = depth[i] <= max_depth; // and so its subtree
    return tree.kept(keep);
}

draft_tree tree_for_pass(const draft_tree & offered, const draft_sizing & sp, const accept_stats & stats,
                         const pass_shape & shape) {
    draft_tree tree = tree_limit_depth(offered, shape.max_depth);
    if (tree.empty()) {
        return tree; // nothing offered: no sizing (and no cost model needed)
    }
    if (shape.chain_only) {
        tree = tree_first_chain(tree_order_dfs(tree, tree_node_probs(tree, stats)));
    }
    if (sp.draft_max > 0) {
        tree = tree_truncate(tree, sp.draft_max);
        if (tree.size() < sp.draft_min) tree.clear();
        tree = tree_limit_leaves(tree, tree_node_probs(tree, stats), shape.max_leaves);
    } else {
        ES_ASSERT(sp.cost != nullptr); // generate_spec refuses drafters without a cap or a cost model
        tree = tree_prune_by_cost(tree, tree_node_probs(tree, stats), *sp.cost, shape.max_leaves, shape.step_tokens,
                                  shape.step_yield, shape.depth, shape.step_depth_ms, shape.step_prompt,
                                  shape.draft_extra_ms);
    }
    tree = tree_truncate(tree, shape.max_nodes);
    // depth-first, likeliest child first: the likeliest path occupies consecutive rows
    return tree_order_dfs(tree, tree_node_probs(tree, stats));
}

void accept_stats_record_pass(accept_stats & stats, const draft_tree & tree, std::span<const int32_t> accepted,
                              source_stats * by_source, source_stats * by_proposer) {
    const int32_t n = tree.size();
    std::vector<bool> on_path(n, false);
    for (int32_t a : accepted) on_path[a] = true;
    const std::vector<int32_t> depth = tree.depths();
    for (int32_t i = 0; i < n; i++) {
        const int32_t p = tree.nodes[i].parent;
        if (p < 0 || on_path[p]) {
            stats.record(tree.nodes[i].source, draft_class(tree.nodes[i]), depth[i], on_path[i]);
            if (by_source) {
                by_source[tree.nodes[i].source].n_drafted++;
                by_source[tree.nodes[i].source].n_accepted += on_path[i];
            }
            if (by_proposer) {
                const uint32_t bits = tree.nodes[i].proposers | (1u << tree.nodes[i].source);
                for (int s = 0; s < DRAFT_SOURCE_COUNT; s++) {
                    if (!(bits & (1u << s))) continue;
                    by_proposer[s].n_drafted++;
                    by_proposer[s].n_accepted += on_path[i];
                }
            }
        }
    }
}

void accept_hindsight::offer(const draft_tree & offered, int64_t pos) {
    if (offered.empty()) return;
    pending p;
    p.tree = tree_limit_depth(offered, accept_stats::n_depth);
    p.children.resize(p.tree.nodes.size() + 1);
    for (int32_t i = 0; i < p.tree.size(); i++) p.children[p.tree.nodes[i].parent + 1].push_back(i);
    p.pos = pos;
    open.push_back(std::move(p));
}

void accept_hindsight::commit(std::span<const llama_token> tokens, accept_stats & stats) {
    out.insert(out.end(), tokens.begin(), tokens.end());
    size_t kept = 0;
    for (size_t k = 0; k < open.size(); k++) {
        pending & p = open[k];
        bool done = false;
        // every child of an accepted node was tested; the one carrying the output's token is accepted
        while (!done && p.pos + p.depth < (int64_t) out.size()) {
            const llama_token t = out[(size_t) (p.pos + p.depth)];
            int32_t next = -1;
            for (int32_t c : p.children[p.at + 1]) {
                const draft_node & nd = p.tree.nodes[c];
                stats.record(nd.source, draft_class(nd), p.depth + 1, nd.token == t);
                if (nd.token == t) next = c;
            }
            done = next < 0;
            p.at = next;
            p.depth++;
        }
        if (!done) {
            if (kept != k) open[kept] = std::move(p);
            kept++;
        }
    }
    open.resize(kept);
}

} // namespace editspec
