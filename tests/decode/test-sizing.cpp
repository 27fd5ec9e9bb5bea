// Draft sizing (src/decode/sizing.cpp) and the draft tree (src/draft/tree.cpp), model-free: depths,
// acceptance statistics, node probabilities, pruning by a cost curve, leaf limits, depth-first order
// and what one pass verifies.
#include "editspec/sizing.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace editspec;

namespace {

//     root ── 1 ── 2 ── 3
//          │    └─ 4
//          └─ 5
draft_tree sample_tree() {
    draft_tree t;
    const int32_t a = t.add(-1, 1, DRAFT_SOURCE_LOOKUP);
    const int32_t b = t.add(a, 2, DRAFT_SOURCE_LOOKUP);
    t.add(b, 3, DRAFT_SOURCE_LOOKUP);
    t.add(a, 4, DRAFT_SOURCE_LOOKUP);
    t.add(-1, 5, DRAFT_SOURCE_LOOKUP);
    return t;
}

std::vector<llama_token> tokens(const draft_tree & t) {
    std::vector<llama_token> out;
    for (const draft_node & n : t.nodes) out.push_back(n.token);
    return out;
}

// statistics whose rate is exactly r for every class and depth (no prior pull, no exploration floor)
accept_stats fixed_rate(float r) {
    accept_stats s;
    s.prior = r;
    s.prior_weight = 1.0f;
    s.explore_min_obs = 0.0f;
    return s;
}

} // namespace

TEST(draft_tree, depths_merging_and_paths) {
    draft_tree t = sample_tree();
    EXPECT_EQ(t.depths(), (std::vector<int32_t>{1, 2, 3, 2, 1}));
    EXPECT_EQ(t.max_depth(), 3);
    EXPECT_EQ(t.depth(2), 3);
    EXPECT_EQ(draft_tree().max_depth(), 0);
    // a path sharing the prefix 1 2 merges; the new tail hangs under node 2's index
    const int32_t last = t.add_path(-1, std::vector<llama_token>{1, 2, 9}, DRAFT_SOURCE_REUSE, 100);
    EXPECT_EQ(t.size(), 6);
    EXPECT_EQ(t.path_to(last), (std::vector<llama_token>{1, 2, 9}));
    EXPECT_EQ(t.nodes[last].source, DRAFT_SOURCE_REUSE);
    // max_nodes stops a path: nothing added beyond 7 nodes
    t.add_path(-1, std::vector<llama_token>{7, 8, 9}, DRAFT_SOURCE_REUSE, 7);
    EXPECT_EQ(t.size(), 7);
    EXPECT_EQ(t.leaves().size(), 5u); // 3, 4, 5, 9, 7
}

TEST(draft_tree, a_token_two_drafters_propose_is_agreed) {
    draft_tree t;
    t.add_path(-1, std::vector<llama_token>{1, 2, 3}, DRAFT_SOURCE_REUSE, 100);
    t.add_path(-1, std::vector<llama_token>{1, 2, 3}, DRAFT_SOURCE_REUSE, 100); // the same drafter again
    EXPECT_EQ(t.nodes[0].agreed + t.nodes[1].agreed + t.nodes[2].agreed, 0);
    t.add_path(-1, std::vector<llama_token>{1, 2, 7}, DRAFT_SOURCE_LOOKUP, 100); // agrees on 1 2 only
    EXPECT_EQ(t.size(), 4);
    EXPECT_TRUE(t.nodes[0].agreed && t.nodes[1].agreed);
    EXPECT_FALSE(t.nodes[2].agreed || t.nodes[3].agreed);
    EXPECT_EQ(draft_class(t.nodes[0]), t.nodes[0].conf + DRAFT_CONF_COUNT);
    EXPECT_EQ(draft_class(t.nodes[2]), t.nodes[2].conf);
    t.add(2, 4, DRAFT_SOURCE_COPY);
    t.add(2, 4, DRAFT_SOURCE_LOOKUP); // both read the request's own tokens: no independent agreement
    EXPECT_FALSE(t.nodes[4].agreed);
    t.add(2, 4, DRAFT_SOURCE_RETRIEVAL);
    EXPECT_TRUE(t.nodes[4].agreed);
    // agreed nodes keep statistics of their own: a rate learned for them does not move the others'
    accept_stats s;
    for (int i = 0; i < 20; i++) s.record(DRAFT_SOURCE_REUSE, draft_class(t.nodes[0]), 1, true);
    for (int i = 0; i < 20; i++) s.record(DRAFT_SOURCE_REUSE, 0, 1, false);
    EXPECT_GT(s.rate(DRAFT_SOURCE_REUSE, draft_class(t.nodes[0]), 1), 0.9f);
    EXPECT_LT(s.rate(DRAFT_SOURCE_REUSE, 0, 1), 0.1f);
}

TEST(accept_stats, prior_exploration_and_evidence) {
    accept_stats s; // prior 0.5, weight 2, optimistic 0.9 below 8 observations
    EXPECT_FLOAT_EQ(s.rate(DRAFT_SOURCE_LOOKUP, 0, 1), 0.9f); // untried: optimistic
    for (int i = 0; i < 8; i++) s.record(DRAFT_SOURCE_LOOKUP, 0, 1, i < 2);
    EXPECT_FLOAT_EQ(s.rate(DRAFT_SOURCE_LOOKUP, 0, 1), (2.0f + 1.0f) / (8.0f + 2.0f)); // 0.3 with the prior
    // a deeper depth without evidence takes the depth above's rate: optimism tries depth 1 only
    EXPECT_FLOAT_EQ(s.rate(DRAFT_SOURCE_LOOKUP, 0, 2), (2.0f + 1.0f) / (8.0f + 2.0f));
    EXPECT_FLOAT_EQ(s.rate(DRAFT_SOURCE_REUSE, 0, 1), 0.9f);  // another source
    // depths past the table share its last bucket; classes past the last likewise
    s.record(DRAFT_SOURCE_LOOKUP, DRAFT_CLASS_COUNT + 3, accept_stats::n_depth + 10, true);
    EXPECT_EQ(s.reached[DRAFT_SOURCE_LOOKUP][DRAFT_CLASS_COUNT - 1][accept_stats::n_depth], 1.0f);
}

TEST(accept_stats, a_servers_pooled_evidence_stands_in_where_a_slots_own_is_thin) {
    // the server: 40 depth-1 lookup nodes tested, 2 accepted, by other slots' requests
    accept_stats pool;
    for (int i = 0; i < 40; i++) pool.record(DRAFT_SOURCE_LOOKUP, 0, 1, i < 2);
    accept_stats slot, at_start;
    for (int i = 0; i < 4; i++) slot.record(DRAFT_SOURCE_LOOKUP, 0, 1, false); // this slot's own, in the pool too
    for (int i = 0; i < 4; i++) pool.record(DRAFT_SOURCE_LOOKUP, 0, 1, false);
    EXPECT_FLOAT_EQ(slot.rate(DRAFT_SOURCE_LOOKUP, 0, 1), 0.9f); // 4 observations alone: still exploring
    accept_stats_pool_begin(slot, pool, at_start);
    EXPECT_EQ(slot.pooled_reached[DRAFT_SOURCE_LOOKUP][0][1], 40.0f); // the pool less the slot's own
    EXPECT_EQ(slot.pooled_accepted[DRAFT_SOURCE_LOOKUP][0][1], 2.0f);
    // 4 own rejections, the pool's 2/40 weighed as 32 observations, the prior's 2 at 0.5: no exploring
    EXPECT_FLOAT_EQ(slot.rate(DRAFT_SOURCE_LOOKUP, 0, 1), (0.0f + 2.0f / 40.0f * 32.0f + 1.0f) / (4.0f + 32.0f + 2.0f));
    EXPECT_FLOAT_EQ(slot.rate(DRAFT_SOURCE_REUSE, 0, 1), 0.9f); // a source the server has not tried
    // the request learns 3 more; its end adds those to the pool, not the 4 it held before
    for (int i = 0; i < 3; i++) slot.record(DRAFT_SOURCE_LOOKUP, 0, 1, true);
    accept_stats_pool_end(pool, slot, at_start);
    EXPECT_EQ(pool.reached[DRAFT_SOURCE_LOOKUP][0][1], 47.0f);
    EXPECT_EQ(pool.accepted[DRAFT_SOURCE_LOOKUP][0][1], 5.0f);
}

TEST(accept_stats, a_node_counts_for_every_drafter_that_proposed_it) {
    // lookup places 10 11 12; Reuse proposes 10 11 13 after it: 10 and 11 are lookup's (placed first)
    // and Reuse's too (a prediction's tokens), 13 Reuse's alone
    draft_tree t;
    const llama_token a[] = {10, 11, 12}, b[] = {10, 11, 13};
    t.add_path(-1, a, DRAFT_SOURCE_LOOKUP, 64);
    t.add_path(-1, b, DRAFT_SOURCE_REUSE, 64);
    ASSERT_EQ(t.size(), 4);
    EXPECT_EQ(t.nodes[1].source, DRAFT_SOURCE_LOOKUP);
    EXPECT_TRUE(t.nodes[1].agreed);
    accept_stats s;
    source_stats by[DRAFT_SOURCE_COUNT] = {}, prop[DRAFT_SOURCE_COUNT] = {};
    const int32_t path[] = {0, 1, 3}; // 10 11 13 accepted
    accept_stats_record_pass(s, t, path, by, prop);
    EXPECT_EQ(by[DRAFT_SOURCE_LOOKUP].n_drafted, 3);
    EXPECT_EQ(by[DRAFT_SOURCE_LOOKUP].n_accepted, 2);
    EXPECT_EQ(by[DRAFT_SOURCE_REUSE].n_drafted, 1);
    EXPECT_EQ(prop[DRAFT_SOURCE_REUSE].n_drafted, 3);
    EXPECT_EQ(prop[DRAFT_SOURCE_REUSE].n_accepted, 3);
    EXPECT_EQ(prop[DRAFT_SOURCE_LOOKUP].n_drafted, 3);
    EXPECT_EQ(prop[DRAFT_SOURCE_LOOKUP].n_accepted, 2);
    EXPECT_EQ(prop[DRAFT_SOURCE_COPY].n_drafted, 0);
}

TEST(accept_stats, a_pass_records_the_tested_nodes_only) {
    // accepted path 1 -> 2: nodes under the root and under accepted nodes were tested (1, 5, 2, 4;
    // 3 hangs under 2, which was accepted, so it too); nothing else
    const draft_tree t = sample_tree();
    accept_stats s;
    source_stats by[DRAFT_SOURCE_COUNT] = {};
    const int32_t path[] = {0, 1};
    accept_stats_record_pass(s, t, path, by);
    EXPECT_EQ(by[DRAFT_SOURCE_LOOKUP].n_drafted, 5);
    EXPECT_EQ(by[DRAFT_SOURCE_LOOKUP].n_accepted, 2);
    EXPECT_EQ(s.reached[DRAFT_SOURCE_LOOKUP][0][1], 2.0f);  // 1 and 5
    EXPECT_EQ(s.accepted[DRAFT_SOURCE_LOOKUP][0][1], 1.0f); // 1
    EXPECT_EQ(s.reached[DRAFT_SOURCE_LOOKUP][0][3], 1.0f);  // 3, tested and rejected
    // a rejected first node: its children were never tested
    accept_stats s2;
    accept_stats_record_pass(s2, t, {}, nullptr);
    EXPECT_EQ(s2.reached[DRAFT_SOURCE_LOOKUP][0][2], 0.0f);
    EXPECT_EQ(s2.reached[DRAFT_SOURCE_LOOKUP][0][1], 2.0f);
}

// hindsight: an offered tree is scored as the output arrives, over several passes, sent or not; the
// same nodes as accept_stats_record_pass would score had the whole tree been sent
TEST(accept_stats, hindsight_scores_every_offered_node_as_the_output_arrives) {
    const draft_tree t = sample_tree(); // 1 -> 2 -> 3, 1 -> 4, 5
    accept_stats s;
    accept_hindsight hs;
    hs.commit(std::vector<llama_token>{9}, s); // output before the offer: nothing to score
    hs.offer(t, 1);                             // offered at output position 1
    hs.commit(std::vector<llama_token>{1}, s);  // a pass committed one token: depth 1 decided
    EXPECT_EQ(s.reached[DRAFT_SOURCE_LOOKUP][0][1], 2.0f);  // 1 and 5
    EXPECT_EQ(s.accepted[DRAFT_SOURCE_LOOKUP][0][1], 1.0f); // 1
    EXPECT_EQ(s.reached[DRAFT_SOURCE_LOOKUP][0][2], 0.0f);  // not yet known
    EXPECT_EQ(hs.open.size(), 1u);
    hs.commit(std::vector<llama_token>{2, 7}, s); // 2 accepted at depth 2, 3 rejected at depth 3
    EXPECT_EQ(s.reached[DRAFT_SOURCE_LOOKUP][0][2], 2.0f);  // 2 and 4
    EXPECT_EQ(s.accepted[DRAFT_SOURCE_LOOKUP][0][2], 1.0f);
    EXPECT_EQ(s.reached[DRAFT_SOURCE_LOOKUP][0][3], 1.0f);
    EXPECT_EQ(s.accepted[DRAFT_SOURCE_LOOKUP][0][3], 0.0f);
    EXPECT_TRUE(hs.open.empty());
    // the same counts as recording the whole tree sent with its accepted path 1 -> 2
    accept_stats sent;
    const int32_t path[] = {0, 1};
    accept_stats_record_pass(sent, t, path, nullptr);
    EXPECT_EQ(sent.reached, s.reached);
    EXPECT_EQ(sent.accepted, s.accepted);
}

TEST(cost_model, sizes_measured) {
    EXPECT_EQ(cost_model_sizes(256), (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256}));
    EXPECT_EQ(cost_model_sizes(20), (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20}));
    EXPECT_EQ(cost_model_sizes(1), (std::vector<int32_t>{1}));
}

TEST(cost_model, deeper_curves_interpolate_in_depth_and_survive_json) {
    cost_model cm = cost_model_from_table({1, 8}, {2.0, 4.0});
    EXPECT_EQ(cm.t(4, 5000), cm.t(4)); // no deeper curve: depth costs nothing
    cm.depth0 = 256;
    cm.deeper = {{1024, {4.0, 10.0}}, {3072, {8.0, 30.0}}};
    EXPECT_NEAR(cm.t(1, 100), 2.0, 1e-9);   // at or above depth0: the base curve
    EXPECT_NEAR(cm.t(1, 256), 2.0, 1e-9);
    EXPECT_NEAR(cm.t(1, 640), 3.0, 1e-9);   // halfway from 256 to 1,024
    EXPECT_NEAR(cm.t(8, 1024), 10.0, 1e-9);
    EXPECT_NEAR(cm.t(8, 2048), 20.0, 1e-9); // halfway from 1,024 to 3,072
    EXPECT_NEAR(cm.t(1, 5120), 12.0, 1e-9); // past the deepest: the last two curves' line
    EXPECT_NEAR(cm.t(4, 1024), 4.0 + 3.0 / 7.0 * 6.0, 1e-9); // linear in tokens within a curve
    // the sizing sees the depth: a pass whose drafts pay at 256 cached tokens may not at 3,072
    draft_tree chain;
    chain.add_path(-1, std::vector<llama_token>{1, 2, 3, 4, 5, 6}, DRAFT_SOURCE_LOOKUP, 100);
    const std::vector<float> p = tree_node_probs(chain, fixed_rate(0.55f));
    cost_model steep = cost_model_from_table({1, 2, 8}, {1.0, 1.1, 2.0});
    steep.deeper = {{3072, {3.0, 6.0, 24.0}}};
    EXPECT_GT(tree_prune_by_cost(chain, p, steep, 1, 0, 0.0f, 0).size(), 0);
    EXPECT_EQ(tree_prune_by_cost(chain, p, steep, 1, 0, 0.0f, 3072).size(), 0);
    // the relative curve scales every depth by the base's 1-token pass
    const cost_model rel = cost_model_relative(cm);
    EXPECT_NEAR(rel.t(1), 1.0, 1e-9);
    EXPECT_NEAR(rel.t(8, 3072), 15.0, 1e-9);
    // json: written and read back; a deeper curve out of order or of another length is refused
    cost_model back;
    ASSERT_TRUE(cost_model_from_json(cost_model_to_json(cm), back));
    EXPECT_EQ(back.depth0, 256);
    ASSERT_EQ(back.deeper.size(), 2u);
    EXPECT_EQ(back.deeper[1].depth, 3072);
    EXPECT_EQ(back.deeper[1].ms, (std::vector<double>{8.0, 30.0}));
    EXPECT_FALSE(cost_model_from_json(R"({"n":[1,8],"ms":[2,4],"deeper":[{"depth":3072,"ms":[8,9,10]}]})", back));
    EXPECT_FALSE(cost_model_from_json(R"({"n":[1,8],"ms":[2,4],"deeper":[{"depth":3072,"ms":[]}]})", back));
    // a deeper curve over the first sizes only: past them, the base curve scaled by the last one's ratio
    ASSERT_TRUE(cost_model_from_json(R"({"n":[1,8],"ms":[2,4],"deeper":[{"depth":3072,"ms":[8]}]})", back));
    EXPECT_NEAR(back.t(1, 3072), 8.0, 1e-9);
    EXPECT_NEAR(back.t(8, 3072), 16.0, 1e-9);
    EXPECT_FALSE(cost_model_from_json(R"({"n":[1,8],"ms":[2,4],"depth0":256,"deeper":[{"depth":100,"ms":[8,9]}]})", back));
    ASSERT_TRUE(cost_model_from_json(R"({"n":[1,8],"ms":[2,4]})", back)); // a curve of v5 and before
    EXPECT_TRUE(back.deeper.empty());
    // the depths measured: those the context holds with a pass of n_max behind them
    EXPECT_EQ(cost_model_depths(256, 256, 4096), (std::vector<int32_t>{1024, 3072}));
    EXPECT_EQ(cost_model_depths(256, 256, 2048), (std::vector<int32_t>{1024}));
    EXPECT_TRUE(cost_model_depths(256, 256, 1024).empty());
    EXPECT_EQ(cost_depth_bucket(511), 0);
    EXPECT_EQ(cost_depth_bucket(3400), 3);
    EXPECT_STREQ(cost_depth_bucket_name(4), "4096+");
}

TEST(tree_sizing, node_probs_multiply_along_paths_and_share_among_siblings) {
    const draft_tree t = sample_tree();
    const std::vector<float> p = tree_node_probs(t, fixed_rate(0.8f));
    // the root's children 1 and 5 would sum to 1.6 > 1: each gets 0.8 / 1.6 = 0.5
    EXPECT_FLOAT_EQ(p[0], 0.5f);
    EXPECT_FLOAT_EQ(p[4], 0.5f);
    // 2 and 4 under 1: 0.5 * 0.8 / 1.6
    EXPECT_FLOAT_EQ(p[1], 0.25f);
    EXPECT_FLOAT_EQ(p[3], 0.25f);
    // 3, an only child: 0.25 * 0.8
    EXPECT_FLOAT_EQ(p[2], 0.2f);
}

TEST(tree_sizing, pruning_follows_the_cost_curve) {
    draft_tree chain;
    chain.add_path(-1, std::vector<llama_token>{1, 2, 3, 4, 5, 6, 7, 8}, DRAFT_SOURCE_LOOKUP, 100);
    const std::vector<float> p = tree_node_probs(chain, fixed_rate(0.9f));
    // free extra tokens: everything goes
    EXPECT_EQ(tree_prune_by_cost(chain, p, cost_model_from_table({1, 512}, {1.0, 1.0}), 1).size(), 8);
    // every token costs a whole pass: no draft pays (expected gain < 1 per node)
    EXPECT_EQ(tree_prune_by_cost(chain, p, cost_model_from_table({1, 2, 512}, {1.0, 2.0, 512.0}), 1).size(), 0);
    // the design's curve (cost_model_design): a prefix, closed under parents, neither empty nor everything at 0.9^k
    const draft_tree kept = tree_prune_by_cost(chain, p, cost_model_design(), 1);
    EXPECT_GT(kept.size(), 0);
    const std::vector<llama_token> all = tokens(chain);
    EXPECT_EQ(tokens(kept), std::vector<llama_token>(all.begin(), all.begin() + kept.size()));
    // a low rate: the first tokens alone are not worth a 2-token pass on that curve
    EXPECT_EQ(tree_prune_by_cost(chain, tree_node_probs(chain, fixed_rate(0.05f)), cost_model_design(), 1).size(), 0);
}

// a recurrent state's checkpoint (context::checkpoints) costs a drafted pass a fixed price besides its rows:
// weak drafts that paid on the curve alone no longer do, likely ones still go
TEST(tree_sizing, a_checkpoint_price_drops_weak_drafts) {
    draft_tree chain;
    chain.add_path(-1, std::vector<llama_token>{1, 2, 3, 4, 5, 6, 7, 8}, DRAFT_SOURCE_LOOKUP, 100);
    const cost_model cm = cost_model_from_table({1, 2, 8, 512}, {10.0, 11.0, 17.0, 512.0}); // ms: +1 a row to 8
    const std::vector<float> weak = tree_node_probs(chain, fixed_rate(0.3f)), sure = tree_node_probs(chain, fixed_rate(0.95f));
    EXPECT_GT(tree_prune_by_cost(chain, weak, cm, 1).size(), 0);
    // 5 ms (half a pass) for the checkpoint: 0.3 + 0.09 + ... tokens do not pay it
    EXPECT_EQ(tree_prune_by_cost(chain, weak, cm, 1, 0, 0.0f, 0, 0.0, 0, 5.0).size(), 0);
    EXPECT_EQ(tree_prune_by_cost(chain, sure, cm, 1, 0, 0.0f, 0, 0.0, 0, 5.0).size(), 8);
}

// in a batched pass (step.h) the sizing weighs the whole pass: beside a prompt chunk the nodes are
// nearly free, beside many requests in the linear part of the curve each node must pay its share
TEST(tree_sizing, pruning_weighs_the_whole_batched_pass) {
    draft_tree chain;
    chain.add_path(-1, std::vector<llama_token>{1, 2, 3, 4, 5, 6, 7, 8}, DRAFT_SOURCE_LOOKUP, 100);
    const std::vector<float> p = tree_node_probs(chain, fixed_rate(0.5f));
    const cost_model cm = cost_model_design();
    const int32_t alone = tree_prune_by_cost(chain, p, cm, 1).size();
    // 500 tokens beside it that yield nothing, not a prompt's (another request's drafts, say): the
    // pass is costly whatever it adds, and the whole chain rides along
    EXPECT_EQ(tree_prune_by_cost(chain, p, cm, 1, 500, 0.0f).size(), 8);
    EXPECT_LE(alone, 8);
    // a 500-token prompt chunk: its cost is sunk, and each node pays the chunk's slope (18 ms a token
    // on this curve) against the plain pass's 99 ms: 2 nodes of p 0.5 and 0.25, not 8
    EXPECT_EQ(tree_prune_by_cost(chain, p, cm, 1, 500, 0.0f, 0, 0.0, 500).size(), 2);
    // likelier nodes still ride: the chunk does not forbid drafting
    EXPECT_GT(tree_prune_by_cost(chain, tree_node_probs(chain, fixed_rate(0.97f)), cm, 1, 500, 0.0f, 0, 0.0, 500).size(), 0);
    // 31 other requests of 1 token each (the curve is nearly linear past 16 tokens), each yielding
    // one: a node worth half a token costs more of the pass than it adds
    EXPECT_LT(tree_prune_by_cost(chain, p, cm, 1, 31, 31.0f).size(), std::max(alone, 1));
    // no one beside it: the sizing alone
    EXPECT_EQ(tree_prune_by_cost(chain, p, cm, 1, 0, 0.0f).size(), alone);
}

// a step's pass (step.h) holds several requests at their own depths: the weights are read once for
// every token, each request's rows read its own cells (issue 70 item 4)
TEST(tree_sizing, a_step_is_priced_at_each_requests_depth) {
    cost_model cm = cost_model_from_table({1, 2, 8}, {1.0, 1.1, 2.0});
    cm.deeper = {{3072, {3.0, 6.0, 24.0}}};
    const pass_part alone[1] = {{5, 3072}};
    EXPECT_NEAR(cm.t_step(alone), cm.t(5, 3072), 1e-9); // one request: its pass
    // 4 tokens at 3,072 beside 4 at 100: t(8) for the weights, plus the deep request's attention
    const pass_part step[2] = {{4, 3072}, {4, 100}};
    EXPECT_NEAR(cm.t_depth_extra(step), cm.t(4, 3072) - cm.t(4), 1e-9);
    EXPECT_NEAR(cm.t_step(step), cm.t(8) + cm.t(4, 3072) - cm.t(4), 1e-9);
    EXPECT_LT(cm.t_step(step), cm.t(8, 3072)); // not every row at the deepest request's depth
    const cost_model flat = cost_model_from_table({1, 2, 8}, {1.0, 1.1, 2.0});
    EXPECT_NEAR(flat.t_step(step), flat.t(8), 1e-9); // no deeper curves: depth costs nothing

    // a shallow request beside three deep ones of one token each: the step is costly whatever it adds,
    // so its drafts grow against the same step priced with the others shallow (1 node there, 3 here)
    draft_tree chain;
    chain.add_path(-1, std::vector<llama_token>{1, 2, 3, 4, 5, 6}, DRAFT_SOURCE_LOOKUP, 100);
    const std::vector<float> p = tree_node_probs(chain, fixed_rate(0.55f));
    const pass_part deep_others[3] = {{1, 3072}, {1, 3072}, {1, 3072}};
    const double extra = cm.t_depth_extra(deep_others);
    EXPECT_NEAR(extra, 3 * (cm.t(1, 3072) - cm.t(1)), 1e-9);
    const int32_t shallow = tree_prune_by_cost(chain, p, cm, 1, 3, 3.0f, 0, 0.0).size();
    const int32_t deep = tree_prune_by_cost(chain, p, cm, 1, 3, 3.0f, 0, extra).size();
    EXPECT_EQ(shallow, 1);
    EXPECT_GE(deep, 3);
    // alone, the pricing is the request's own pass at its depth, as before steps knew depth
    EXPECT_EQ(tree_prune_by_cost(chain, p, cm, 1, 0, 0.0f, 3072, 0.0).size(), 0);
}

TEST(tree_sizing, leaves_depth_order_and_truncation) {
    const draft_tree t = sample_tree();
    std::vector<float> p = tree_node_probs(t, fixed_rate(0.8f));
    p[4] = 0.6f; // make 5 likelier than 1
    // depth-first with the likeliest child first
    EXPECT_EQ(tokens(tree_order_dfs(t, p)), (std::vector<llama_token>{5, 1, 2, 3, 4}));
    // one leaf: the likeliest leaf's path stays (ties drop the later leaf)
    const draft_tree one = tree_limit_leaves(t, p, 1);
    EXPECT_EQ(one.leaves().size(), 1u);
    EXPECT_EQ(tokens(one), (std::vector<llama_token>{5}));
    EXPECT_EQ(tokens(tree_limit_depth(t, 1)), (std::vector<llama_token>{1, 5}));
    EXPECT_EQ(tokens(tree_limit_depth(t, 2)), (std::vector<llama_token>{1, 2, 4, 5}));
    EXPECT_EQ(tokens(tree_first_chain(t)), (std::vector<llama_token>{1, 2, 3}));
    EXPECT_EQ(tokens(tree_truncate(t, 2)), (std::vector<llama_token>{1, 2}));
}

TEST(tree_sizing, what_one_pass_verifies) {
    const draft_tree t = sample_tree();
    const accept_stats s = fixed_rate(0.9f);
    pass_shape shape; // chain only, one leaf
    draft_sizing cap;
    cap.draft_max = 2;
    EXPECT_EQ(tokens(tree_for_pass(t, cap, s, shape)), (std::vector<llama_token>{1, 2}));
    cap.draft_min = 3; // smaller drafts are not sent
    EXPECT_TRUE(tree_for_pass(t, cap, s, shape).empty());
    // the cost model on a flat curve sends the whole likeliest chain, cut by the depth left
    const cost_model flat = cost_model_from_table({1, 512}, {1.0, 1.0});
    draft_sizing by_cost;
    by_cost.cost = &flat;
    EXPECT_EQ(tokens(tree_for_pass(t, by_cost, s, shape)), (std::vector<llama_token>{1, 2, 3}));
    shape.max_depth = 2;
    EXPECT_EQ(tokens(tree_for_pass(t, by_cost, s, shape)), (std::vector<llama_token>{1, 2}));
    // trees allowed: several leaves, at most max_nodes nodes
    shape = {};
    shape.chain_only = false;
    shape.max_leaves = 8;
    shape.max_nodes = 4;
    EXPECT_EQ(tree_for_pass(t, by_cost, s, shape).size(), 4);
    EXPECT_TRUE(tree_for_pass(draft_tree(), draft_sizing(), s, shape).empty()); // nothing offered: no cost model needed
}
