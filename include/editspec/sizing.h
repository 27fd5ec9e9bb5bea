// Draft sizing: how much of what the drafters offer one target pass verifies. Acceptance
// statistics per source, confidence class and depth give each node an expected acceptance; the
// tree kept maximises expected tokens per unit of measured pass cost (cost.h), or a fixed cap.
//
//     editspec::accept_stats stats;
//     editspec::draft_sizing sz;  sz.cost = &cm;            // or sz.draft_max = 16
//     editspec::pass_shape shape; shape.max_depth = 100;
//     draft_tree sent = editspec::tree_for_pass(offered, sz, stats, shape);
//     ... verify ...
//     editspec::accept_stats_record_pass(stats, sent, accepted_nodes, nullptr);
//
// Pure: no model, no context.
#pragma once

#include "editspec/cost.h"
#include "editspec/draft.h"
#include "editspec/generate.h"

#include <array>
#include <climits>
#include <span>
#include <vector>

namespace editspec {

// Running acceptance statistics per draft source and depth: how often a node whose parent was
// accepted is itself accepted. The cost model turns them into expected accepted tokens.
struct accept_stats {
    static constexpr int32_t n_depth = 64; // depths past this share the last bucket
    using table = std::array<std::array<std::array<float, n_depth + 1>, DRAFT_CLASS_COUNT>, DRAFT_SOURCE_COUNT>;

    table reached{};  // [source][class][depth] nodes tested (their parent was accepted)
    table accepted{}; // [source][class][depth] of those, accepted

    float prior = 0.5f;        // acceptance assumed before any evidence at depth 1; a deeper depth's
                               // prior is the rate of the depth above it
    float prior_weight = 2.0f; // in observations
    // while a class has fewer observations at a depth than this, its rate is taken as at least
    // `optimistic`: a drafter must be tried before its statistics can say it does not pay
    float explore_min_obs = 8.0f;
    float optimistic = 0.9f;
    // ... at depths past the first only in a class whose depth-1 estimate is at least this
    float explore_first = 0.6f;

    // Evidence from the server's other requests (accept_stats_pool_begin): where this table's own is
    // thin it stands in, weighing at most `pooled_weight` observations a depth, and it ends exploration
    // as own evidence does. A server's slots then learn a drafter's worth once, not once each: 16 slots
    // each trying an untried class 8 times sent ~4 draft tokens with every request's first pass.
    table pooled_reached{};
    table pooled_accepted{};
    float pooled_weight = 32.0f;

    // P(node accepted | parent accepted) for a node of `source` and class `cls` (draft_class) at
    // `depth` (1 = child of the root)
    float rate(uint8_t source, uint8_t cls, int32_t depth) const;
    void record(uint8_t source, uint8_t cls, int32_t depth, bool was_accepted);
};

// Pooling a server's evidence (server-slots.h: one pool of every slot's finished requests). Before a
// request: `own` takes what `pool` holds beyond its own counts as its pooled evidence, and `at_start`
// keeps its counts. After it: what `own` learned since `at_start` goes into `pool`. Not thread-safe:
// the caller holds the pool's lock.
void accept_stats_pool_begin(accept_stats & own, const accept_stats & pool, accept_stats & at_start);
void accept_stats_pool_end(accept_stats & pool, const accept_stats & own, const accept_stats & at_start);

// ----------------------------------------------------------------------------
// one pass's tree (generate_spec and the oracle replay share these)

// how drafts are sized: a fixed cap, or the cost model
struct draft_sizing {
    int32_t draft_max = 0;             // fixed cap on draft nodes per pass, 0 = the cost model sizes each tree
    int32_t draft_min = 0;             // with a fixed cap: drafts smaller than this are not sent
    int32_t tree_max  = 256;           // most nodes drafters may offer per pass (cost-model mode)
    const cost_model * cost = nullptr; // required when draft_max == 0
};

struct pass_shape {
    int32_t max_depth  = INT32_MAX; // no node deeper (KV cells and n_predict left)
    int32_t max_nodes  = INT32_MAX; // no more nodes (KV cells left)
    int32_t max_leaves = 1;         // sequences the context offers for paths
    bool    chain_only = true;      // lossless exact mode: only the likeliest chain (docs/exactness.md)
    // the batched pass this tree rides in (step.h): tokens other requests put in it and tokens they
    // expect from it; the sizing then maximises the whole pass's tokens per unit of its cost
    int32_t step_tokens = 0;
    float   step_yield  = 0.0f;
    // of step_tokens, the rows that yield no token (prompt chunks, this pass's pending tokens before its
    // root): work the step does whatever is drafted, priced as sunk (tree_prune_by_cost)
    int32_t step_prompt = 0;
    double  step_depth_ms = 0.0; // what the other requests' depths add to the pass (cost_model::t_depth_extra)
    double  draft_extra_ms = 0.0; // what drafting at all adds to the pass besides its rows: a recurrent state's
                                  // checkpoint saved, and loaded back at a rejection (context::checkpoints)
    int32_t depth       = 0; // tokens in the KV cache before the pass: the cost model's depth
};

// What one pass verifies, from what the drafters offered: cut to max_depth, reduced to its
// likeliest chain when chain_only, sized by sz (fixed cap sz.draft_max, else the cost model),
// cut to max_nodes, then ordered depth-first with the likeliest child first.
draft_tree tree_for_pass(const draft_tree & offered, const draft_sizing & sz, const accept_stats & stats,
                         const pass_shape & shape);

// After a pass: every node whose parent was accepted (or that hangs off the root) was tested.
// `accepted` lists the accepted path's nodes root first; by_source (DRAFT_SOURCE_COUNT entries) counts
// each tested node for the source that placed it, by_proposer (the same, optional) for every source that
// proposed it (draft_node::proposers).
void accept_stats_record_pass(accept_stats & stats, const draft_tree & tree, std::span<const int32_t> accepted,
                              source_stats * by_source, source_stats * by_proposer = nullptr);

// Statistics in hindsight (greedy verification): every node the drafters offered is scored once the
// output reaches its position, sent or not. Scoring only what was sent (accept_stats_record_pass)
// teaches the sizing only about depths it already sends: a class whose drafts are cut at depth 6
// never learns that depth 20 would have held, so its long drafts stay cut short.
//
//     hs.offer(offered, n_out);                  // before sizing, the output's length then
//     ... size, verify, commit ...
//     hs.commit(committed, stats);               // the tokens the pass committed
//
// A tree is scored to depth accept_stats::n_depth; what the output never reaches is dropped.
struct accept_hindsight {
    void offer(const draft_tree & offered, int64_t pos);
    void commit(std::span<const llama_token> tokens, accept_stats & stats);

    struct pending {
        draft_tree tree;
        std::vector<std::vector<int32_t>> children; // [node + 1] (0 = the root's)
        int64_t pos   = 0;  // output position of a depth-1 node
        int32_t at    = -1; // deepest node known accepted (-1 = root)
        int32_t depth = 0;  // its depth
    };
    std::vector<pending> open;
    token_vec out; // output committed so far
};

// ----------------------------------------------------------------------------
// pieces, exposed for tests

// nodes deeper than max_depth go, with everything under them
draft_tree tree_limit_depth(const draft_tree & tree, int32_t max_depth);

// expected acceptance probability of every node: parent's × the source's rate at that depth,
// shared among siblings so that siblings sum to at most the parent's
std::vector<float> tree_node_probs(const draft_tree & tree, const accept_stats & stats);

// keeps the nodes that maximise (1 + expected accepted) / cost(1 + nodes), at most max_leaves
// leaves; returns the pruned tree (order kept, parents re-indexed). In a batched pass that others
// fill with step_tokens tokens expecting step_yield from it, the whole pass's value:
// (step_yield + 1 + expected accepted) / cost(step_tokens + 1 + nodes): a node pays when it adds
// more to the pass's tokens than it adds to its cost, so drafts shrink where the pass is already
// costly per token and grow where the curve is flat.
// The pass is priced as cost_model::t_step does, each request at its depth: this request's 1 + nodes
// at `depth`, the others' tokens at the base depth plus step_depth_ms (what their depths add). Alone
// (no others): cost.t(1 + nodes, depth). Of step_tokens, `step_prompt` rows yield nothing (prompt
// chunks): their cost is sunk, so the nodes are priced by what they add to the pass (its slope where
// the prompt puts it) over the pass without them. A node beside a 500-token chunk is not nearly free:
// an accepted one saves a later pass of the plain step's cost per token, and costs the chunk's slope
// (counting the chunk as cost per yield sent ~4 nodes with every request's first pass at any
// acceptance above 2%; 16 clients of random weights paid 4% of their step tokens for them).
// draft_extra_ms (pass_shape) is added to the price of every pass with nodes.
draft_tree tree_prune_by_cost(const draft_tree & tree, const std::vector<float> & probs, const cost_model & cost,
                              int32_t max_leaves, int32_t step_tokens = 0, float step_yield = 0.0f, int32_t depth = 0,
                              double step_depth_ms = 0.0, int32_t step_prompt = 0, double draft_extra_ms = 0.0);

// drops the least likely leaves (by probs) until at most max_leaves remain
draft_tree tree_limit_leaves(const draft_tree & tree, const std::vector<float> & probs, int32_t max_leaves);

// depth-first preorder, children by descending probability: the likeliest path comes first
draft_tree tree_order_dfs(const draft_tree & tree, const std::vector<float> & probs);

// the first chain of a depth-first tree: node 0, its first child, that node's first child, ...
draft_tree tree_first_chain(const draft_tree & tree);

// keeps the first n nodes (insertion order keeps parents first)
draft_tree tree_truncate(const draft_tree & tree, int32_t n);

} // namespace editspec
