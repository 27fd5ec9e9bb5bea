// EfficientEdit's Reuse drafter (src/draft/reuse.cpp): the re-sync rules on tiny token lists, the
// pointer's life through edits, the Reuse/Generate phases, then the oracle replay on CanItEdit that
// chose the default rule.
#include "common/test-util.h"
#include "editspec/dataset.h"
#include "editspec/efficientedit.h"
#include "editspec/lookup.h"
#include "editspec/replay.h"
#include "editspec/reuse.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

using namespace editspec;

namespace {

reuse_params rule(reuse_sync r) { return reuse_params_for(r); }

// the drafter's tree for the history (budget 100)
draft_tree proposed(drafter_i & d, const token_vec & history) {
    draft_tree t;
    d.propose(history, t, 100);
    return t;
}

// begins the drafter on the prompt [0] and returns its first tree
draft_tree started(drafter_i & d) {
    d.begin(token_vec{0});
    return proposed(d, token_vec{0});
}

// where the rule's re-sync candidates point in the original, in the order offered
std::vector<int32_t> positions(const token_vec & hist, const token_vec & orig, int32_t p, reuse_sync r) {
    std::vector<int32_t> out;
    for (const auto & c : reuse_sync_candidates(hist, orig, p, rule(r))) {
        out.push_back(c.pos);
    }
    return out;
}

// the tokens of every path of a tree, root to leaf, in leaf order
std::vector<token_vec> paths(const draft_tree & t) {
    std::vector<token_vec> out;
    for (int32_t leaf : t.leaves()) out.push_back(t.path_to(leaf));
    return out;
}

// proposes a fixed path out of sync (a stand-in for a draft model); records what it heard
// a draft model's stand-in: proposes `path`, backs off as model_drafter does
struct fixed_drafter : drafter_i {
    token_vec path;
    int32_t n_proposed = 0, n_accepts = 0;
    draft_backoff backoff;
    const char * name() const override { return "fixed"; }
    uint8_t source() const override { return DRAFT_SOURCE_MODEL; }
    void begin(std::span<const llama_token>) override {}
    void propose(std::span<const llama_token>, draft_tree & tree, int32_t budget) override {
        if (backoff.skip()) return;
        n_proposed++;
        tree.add_path(-1, path, DRAFT_SOURCE_MODEL, tree.size() + budget);
        backoff.proposed(true);
    }
    void accept(std::span<const llama_token>) override { n_accepts++; }
    void sized(const draft_tree & sent) override { backoff.sized(sent, source()); }
};

} // namespace

// ----------------------------------------------------------------------------
// re-sync rules, pure

TEST(reuse_sync, header_example) {
    // original = [1, 2, 3, 9, 4, 2, 3, 5]; the output ends in [2, 3], which occurs before
    // original[3] and before original[7]
    const token_vec orig = {1, 2, 3, 9, 4, 2, 3, 5};
    const token_vec hist = {8, 8, 7, 2, 3};
    // longest, edit point 4: k = 2 at 3 and 7, a tie; 7 is the first at/after p
    const auto c = reuse_sync_candidates(hist, orig, 4, rule(REUSE_SYNC_LONGEST));
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].k, 2);
    EXPECT_EQ(positions(hist, orig, 4, REUSE_SYNC_LONGEST), (std::vector<int32_t>{7}));
    // with p = 3 the match before original[3] is at/after p and first
    EXPECT_EQ(positions(hist, orig, 3, REUSE_SYNC_LONGEST), (std::vector<int32_t>{3}));
    // with p = 8 nothing is at/after p: the nearest before it, 7
    EXPECT_EQ(positions(hist, orig, 8, REUSE_SYNC_LONGEST), (std::vector<int32_t>{7}));
    // nearest: the smallest e >= p = 4 with any match is 7
    EXPECT_EQ(positions(hist, orig, 4, REUSE_SYNC_NEAREST), (std::vector<int32_t>{7}));
    // k-down (8 .. 2): k = 2 occurs; its first occurrence, whatever p
    EXPECT_EQ(positions(hist, orig, 4, REUSE_SYNC_K_DOWN), (std::vector<int32_t>{3}));
    // branches: nearest's 7, then (longest is also 7) the other k = 2 match
    EXPECT_EQ(positions(hist, orig, 4, REUSE_SYNC_BRANCHES), (std::vector<int32_t>{7, 3}));
}

TEST(reuse_sync, longest_prefers_more_matched_tokens) {
    // [5, 2, 3] matches 3 tokens before original[4]; [2, 3] alone before original[8] (nearer p)
    const token_vec orig = {0, 5, 2, 3, 6, 7, 1, 2, 3, 4};
    const token_vec hist = {9, 5, 2, 3};
    const auto c = reuse_sync_candidates(hist, orig, 6, rule(REUSE_SYNC_LONGEST));
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].pos, 4);
    EXPECT_EQ(c[0].k, 3);
    // nearest takes the first match at/after p = 6 even though it is shorter
    EXPECT_EQ(positions(hist, orig, 6, REUSE_SYNC_NEAREST), (std::vector<int32_t>{9}));
    // nearest with nothing after p falls back to the longest
    EXPECT_EQ(positions(hist, orig, 10, REUSE_SYNC_NEAREST), (std::vector<int32_t>{4}));
}

TEST(reuse_sync, k_min_and_paper_rule) {
    // a 1-token match is below K_DOWN's k_min = 2: no candidate
    const token_vec orig = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    EXPECT_TRUE(reuse_sync_candidates(token_vec{0, 4}, orig, 0, rule(REUSE_SYNC_K_DOWN)).empty());
    EXPECT_EQ(reuse_sync_candidates(token_vec{3, 4}, orig, 0, rule(REUSE_SYNC_K_DOWN))[0].pos, 4);
    // paper: the last 7 tokens must lie wholly in original[p ..]
    const token_vec hist = {1, 2, 3, 4, 5, 6, 7};
    EXPECT_EQ(reuse_sync_candidates(hist, orig, 0, rule(REUSE_SYNC_PAPER))[0].pos, 7);
    EXPECT_TRUE(reuse_sync_candidates(hist, orig, 1, rule(REUSE_SYNC_PAPER)).empty()); // starts before p
    EXPECT_TRUE(reuse_sync_candidates(token_vec{3, 4, 5, 6, 7}, orig, 0, rule(REUSE_SYNC_PAPER)).empty()); // 5 < 7
}

TEST(reuse_sync, nothing_left_is_no_candidate) {
    // the only match ends the original: nothing to draft after it
    const token_vec orig = {1, 2, 3};
    EXPECT_TRUE(reuse_sync_candidates(token_vec{2, 3}, orig, 0, rule(REUSE_SYNC_LONGEST)).empty());
    EXPECT_TRUE(reuse_sync_candidates(token_vec{}, orig, 0, rule(REUSE_SYNC_LONGEST)).empty());
}

TEST(reuse_sync, branches_offer_nearest_then_longest_then_the_rest) {
    // matches of [2, 3]: k = 3 before 4 ([5, 2, 3]), k = 2 before 9, k = 2 before 12; p = 8
    const token_vec orig = {0, 5, 2, 3, 6, 7, 1, 1, 2, 3, 4, 2, 3, 8};
    const token_vec hist = {9, 5, 2, 3};
    // nearest at/after p, longest, then the rest by k, then nearness
    EXPECT_EQ(positions(hist, orig, 8, REUSE_SYNC_BRANCHES), (std::vector<int32_t>{10, 4, 13}));
    reuse_params p = rule(REUSE_SYNC_BRANCHES);
    p.n_branch = 2;
    EXPECT_EQ(reuse_sync_candidates(hist, orig, 8, p).size(), 2u);
}

// ----------------------------------------------------------------------------
// the drafter through edits

TEST(reuse_drafter, drafts_the_original_then_follows_the_pointer) {
    // in sync from the start: the whole original (capped by the budget), then what follows the
    // committed tokens
    const token_vec orig = {10, 11, 12, 13, 14, 15};
    reuse_drafter d(orig);
    d.begin(token_vec{1, 2});
    draft_tree t;
    d.propose(token_vec{1, 2}, t, 4);
    EXPECT_EQ(paths(t), (std::vector<token_vec>{{10, 11, 12, 13}})); // budget 4
    d.accept(token_vec{10, 11, 12, 13, 14});                         // all 4 + the target's 14
    EXPECT_TRUE(d.synced());
    EXPECT_EQ(d.pointer(), 5);
    t = proposed(d, token_vec{1, 2, 10, 11, 12, 13, 14});
    EXPECT_EQ(paths(t), (std::vector<token_vec>{{15}}));
    d.accept(token_vec{15, 99});                                      // past the end: out of sync
    EXPECT_FALSE(d.synced());
    t = proposed(d, token_vec{1, 2, 10, 11, 12, 13, 14, 15, 99});
    EXPECT_TRUE(t.empty()); // nothing after the end
}

TEST(reuse_drafter, substitution_resyncs_after_the_edit) {
    // original "a b c d e f g" (1..7); the output replaces c with X: a b X d e f g.
    // Pass 1 drafts all 7, the target keeps a b and says X: an edit at pointer 2.
    // Pass 2: the output ends in [b, X]; X is not in the original: no draft (the Generate phase).
    // Pass 3: the target said d; [X, d] -> d matches before original[4]: draft e f g.
    const token_vec orig = {1, 2, 3, 4, 5, 6, 7};
    reuse_drafter d(orig); // NEAREST
    draft_tree t = started(d);
    EXPECT_EQ(t.size(), 7);
    d.accept(token_vec{1, 2, 50});
    EXPECT_FALSE(d.synced());
    EXPECT_EQ(d.pointer(), 2);
    EXPECT_EQ(d.n_edits, 1);
    t = proposed(d, token_vec{0, 1, 2, 50});
    EXPECT_TRUE(t.empty());
    d.accept(token_vec{4});
    t = proposed(d, token_vec{0, 1, 2, 50, 4});
    EXPECT_EQ(paths(t), (std::vector<token_vec>{{5, 6, 7}}));
    d.accept(token_vec{5, 6, 7, 2}); // all, then EOS (2)
    EXPECT_EQ(d.n_resync_ok, 1);
    EXPECT_FALSE(d.synced()); // EOS is not in the original
}

TEST(reuse_drafter, insertion_resyncs_at_the_edit_point) {
    // original x ( ) \n r y \n (1 2 3 4 5 6 4); the output inserts "z \n" before r:
    // x ( ) \n z \n r y \n. z is rejected at pointer 4 (the edit point). Once the output ends in
    // "z \n", the nearest e >= 4 after a \n is 4 itself (original[3] = \n): the draft resumes at r.
    const token_vec orig = {1, 2, 3, 4, 5, 6, 4};
    reuse_drafter d(orig);
    draft_tree t = started(d);
    d.accept(token_vec{1, 2, 3, 4, 9}); // z (9) instead of r
    EXPECT_EQ(d.pointer(), 4);
    t = proposed(d, token_vec{0, 1, 2, 3, 4, 9});
    EXPECT_TRUE(t.empty()); // z is new
    d.accept(token_vec{4});
    t = proposed(d, token_vec{0, 1, 2, 3, 4, 9, 4});
    EXPECT_EQ(paths(t), (std::vector<token_vec>{{5, 6, 4}}));
    // K_DOWN needs 2 matched tokens: [9, 4] is nowhere in the original, so it has no draft yet
    reuse_drafter kd(orig, rule(REUSE_SYNC_K_DOWN));
    t = started(kd);
    kd.accept(token_vec{1, 2, 3, 4, 9});
    kd.accept(token_vec{4}); // no proposal this pass: out of sync, nothing to follow
    t = proposed(kd, token_vec{0, 1, 2, 3, 4, 9, 4});
    EXPECT_TRUE(t.empty());
}

TEST(reuse_drafter, deletion_resyncs_further_on) {
    // original A \n B \n C \n (1 9 2 9 3 9); the output drops "B \n": after A \n the target says C.
    // [\n, C] matches before original[5]: the draft is [\n], then the end
    const token_vec orig = {1, 9, 2, 9, 3, 9, 7};
    reuse_drafter d(orig);
    draft_tree t = started(d);
    d.accept(token_vec{1, 9, 3});
    EXPECT_EQ(d.pointer(), 2);
    t = proposed(d, token_vec{0, 1, 9, 3});
    EXPECT_EQ(paths(t), (std::vector<token_vec>{{9, 7}}));
}

TEST(reuse_drafter, wrong_resync_keeps_the_edit_point) {
    // a re-sync whose first token is rejected does not move the edit point; one that takes some
    // tokens moves it to where it failed
    const token_vec orig = {1, 2, 3, 4, 5, 2, 6, 7};
    reuse_drafter d(orig);
    draft_tree t = started(d);
    d.accept(token_vec{1, 8}); // edit at 1
    t = proposed(d, token_vec{0, 1, 8, 2}); // [2] nearest at/after 1: before original[2]
    EXPECT_EQ(paths(t)[0].front(), 3);
    d.accept(token_vec{9}); // wrong
    EXPECT_EQ(d.pointer(), 1);
    EXPECT_FALSE(d.synced());
    t = proposed(d, token_vec{0, 1, 8, 2, 9, 2});
    d.accept(token_vec{3, 4, 0}); // took 3, 4, then 0 instead of 5
    EXPECT_EQ(d.pointer(), 4);
    EXPECT_FALSE(d.synced());
}

TEST(reuse_drafter, branch_that_was_taken_becomes_the_pointer) {
    // two candidates as siblings; the committed tokens follow the second: in sync there
    const token_vec orig = {0, 5, 2, 3, 6, 7, 1, 1, 2, 3, 4, 2, 3, 8};
    reuse_drafter d(orig, rule(REUSE_SYNC_BRANCHES));
    d.begin(token_vec{});
    d.accept(token_vec{0, 5, 2, 3, 6, 7, 1, 1, 99}); // synced through original[8], then an edit
    EXPECT_EQ(d.pointer(), 8);
    draft_tree t;
    d.propose(token_vec{9, 5, 2, 3}, t, 9);
    ASSERT_EQ(paths(t).size(), 3u);
    EXPECT_EQ(paths(t)[0], (token_vec{4, 2, 3})); // nearest (pos 10), a third of the budget each
    EXPECT_EQ(paths(t)[1], (token_vec{6, 7, 1}));  // longest (pos 4)
    d.accept(token_vec{6, 7, 1, 1});
    EXPECT_TRUE(d.synced());
    EXPECT_EQ(d.pointer(), 8);
}

TEST(efficientedit_drafter, generate_only_out_of_sync) {
    // in sync only Reuse drafts; after an edit the generator drafts, with Reuse's re-sync
    // candidates beside it; both always hear accept()
    const token_vec orig = {1, 2, 3, 4};
    auto gen = std::make_unique<fixed_drafter>();
    gen->path = {40, 41};
    fixed_drafter * g = gen.get();
    efficientedit_drafter d(std::make_unique<reuse_drafter>(orig), std::move(gen));
    draft_tree t = started(d);
    EXPECT_EQ(paths(t), (std::vector<token_vec>{{1, 2, 3, 4}}));
    EXPECT_EQ(g->n_proposed, 0);
    d.accept(token_vec{1, 50});
    t = proposed(d, token_vec{0, 1, 50});
    EXPECT_EQ(g->n_proposed, 1);
    EXPECT_EQ(paths(t), (std::vector<token_vec>{{40, 41}})); // 50 is nowhere in the original
    EXPECT_EQ(t.nodes[0].source, DRAFT_SOURCE_MODEL);
    d.accept(token_vec{2});
    t = proposed(d, token_vec{0, 1, 50, 2});
    // the generator's path and Reuse's re-sync after [2] as a sibling
    EXPECT_EQ(paths(t), (std::vector<token_vec>{{40, 41}, {3, 4}}));
    EXPECT_EQ(t.nodes[2].source, DRAFT_SOURCE_REUSE);
    d.accept(token_vec{3, 4, 0});
    EXPECT_EQ(g->n_accepts, 3);
}

TEST(efficientedit_drafter, draft_model_backs_off_while_its_nodes_are_dropped_and_reuse_goes_on) {
    // out of sync (an edit): every pass the sizing sends Reuse's re-sync candidates but none of
    // the generator's nodes; the generator is asked at passes 0, 2, 5, 10, 19, 36 (waits 1, 2, 4, 8, 16)
    const token_vec orig = {1, 2, 3, 4, 1, 2, 3, 4};
    auto gen = std::make_unique<fixed_drafter>();
    gen->path = {40, 41};
    fixed_drafter * g = gen.get();
    efficientedit_drafter d(std::make_unique<reuse_drafter>(orig), std::move(gen));
    EXPECT_EQ(d.source(), DRAFT_SOURCE_MODEL);
    d.begin(token_vec{0});
    d.accept(token_vec{1, 50}); // an edit: Reuse is out of sync
    int32_t n_reuse_passes = 0;
    for (int pass = 0; pass < 40; pass++) {
        draft_tree offered;
        d.propose(token_vec{0, 1, 50, 1}, offered, 100);
        draft_tree sent;
        for (const draft_node & nd : offered.nodes) {
            if (nd.source == DRAFT_SOURCE_REUSE && (nd.parent < 0 || sent.size() > 0)) {
                sent.nodes.push_back(nd);
                sent.nodes.back().parent = sent.size() == 1 ? -1 : sent.size() - 2;
            }
        }
        n_reuse_passes += sent.size() > 0;
        d.sized(sent);
    }
    EXPECT_EQ(g->n_proposed, 6);
    EXPECT_EQ(n_reuse_passes, 40); // Reuse's candidates every pass meanwhile
}

namespace {

// original 1 .. 12, committed [1, 2] then 50 (an edit at original[2]); the generator then proposes
// the edit's new token 51 and goes on with the original: 3, 4
std::unique_ptr<efficientedit_drafter> phase_after_edit() {
    const token_vec orig = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    auto gen = std::make_unique<fixed_drafter>();
    gen->path = {51, 3, 4};
    auto d = std::make_unique<efficientedit_drafter>(std::make_unique<reuse_drafter>(orig), std::move(gen));
    d->begin(token_vec{0});
    d->accept(token_vec{1, 2, 50});
    return d;
}

} // namespace

TEST(efficientedit_drafter, continuation_below_the_generated_path) {
    // below the generator's path the original's continuation after [3, 4] is attached; taking it
    // brings Reuse back in sync
    auto pd = phase_after_edit();
    efficientedit_drafter & d = *pd;
    ASSERT_FALSE(d.reuse().synced());
    draft_tree t;
    d.propose(token_vec{0, 1, 2, 50}, t, 100);
    // k = 2 ([3, 4] before original[4]): 4 << 1 tokens
    EXPECT_EQ(paths(t), (std::vector<token_vec>{{51, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}}));
    EXPECT_EQ(t.nodes[3].source, DRAFT_SOURCE_REUSE);
    EXPECT_EQ(d.reuse().n_attached, 1);
    d.accept(token_vec{51, 3, 4, 5, 6, 7});
    EXPECT_TRUE(d.reuse().synced());
    EXPECT_EQ(d.reuse().pointer(), 7);
    t.clear();
    d.propose(token_vec{0, 1, 2, 50, 51, 3, 4, 5, 6, 7}, t, 3);
    EXPECT_EQ(paths(t), (std::vector<token_vec>{{8, 9, 10}}));
}

TEST(efficientedit_drafter, continuation_not_taken) {
    auto pd = phase_after_edit();
    efficientedit_drafter & d = *pd;
    draft_tree t;
    d.propose(token_vec{0, 1, 2, 50}, t, 5); // 3 for the generator, 2 left for the continuation
    EXPECT_EQ(paths(t), (std::vector<token_vec>{{51, 3, 4, 5, 6}}));
    // the target takes the generator's tokens and one of the continuation, then leaves it
    d.accept(token_vec{51, 3, 4, 5, 99});
    EXPECT_FALSE(d.reuse().synced());
    EXPECT_EQ(d.reuse().pointer(), 5); // the new edit point: original[5] was not taken
    // the target leaves inside the generator's path: the continuation was not reached
    t.clear();
    d.propose(token_vec{0, 1, 2, 50, 51, 3, 4, 5, 99}, t, 5);
    d.accept(token_vec{51, 98});
    EXPECT_FALSE(d.reuse().synced());
    EXPECT_EQ(d.reuse().pointer(), 5);
    // no budget left after the generator: nothing attached
    reuse_drafter r(token_vec{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
    r.begin(token_vec{0});
    r.accept(token_vec{1, 2, 50});
    t.clear();
    t.add_path(-1, token_vec{51, 3, 4}, DRAFT_SOURCE_MODEL, 3);
    EXPECT_EQ(r.propose_after(token_vec{0, 1, 2, 50}, t, 0, t.size(), 0), 0);
    EXPECT_EQ(t.size(), 3);
}

// ----------------------------------------------------------------------------
// oracle replay on CanItEdit (docs/results/design-notes/cost-curve-and-oracle.md's reading): which re-sync rule

namespace {

struct item_tokens {
    token_vec context;
    token_vec reference;
    token_vec original;
};

class reuse_oracle : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        auto m = test::load_or_fail(test::vocab_path("deepseek-coder"), /*vocab_only=*/true);
        ASSERT_TRUE(m);
        std::vector<dataset_item> items;
        std::string err;
        ASSERT_TRUE(dataset_load(std::string(EDITSPEC_DATASETS) + "/canitedit/normalized.jsonl", DATASET_KIND_AUTO,
                                 items, &err))
            << err;
        for (const dataset_item & it : items) {
            item_tokens t;
            replay_tokenize(*m, dataset_raw_layout(it, INSTRUCTION_KIND_DESCRIPTIVE), t.context, t.reference);
            t.original = m->tokenize(it.context_code, false, false); // as bench and edit pass it
            canitedit.push_back(std::move(t));
        }
    }
    static inline std::vector<item_tokens> canitedit;
};

struct replay_totals {
    replay_result r;
    int64_t edits = 0, resyncs = 0, resync_ok = 0;
};

// reuse (rule), optionally with lookup-longest (m 48) after it in the same tree
replay_totals replay_reuse(const std::vector<item_tokens> & items, const reuse_params & rp, bool with_lookup,
                           const replay_params & p) {
    replay_totals tot;
    for (const item_tokens & it : items) {
        reuse_drafter reuse(it.original, rp);
        lookup_drafter lookup;
        std::vector<drafter_i *> ds = {&reuse};
        if (with_lookup) ds.push_back(&lookup);
        drafter_chain md(ds);
        tot.r.add(oracle_replay(it.context, it.reference, md, p));
        tot.edits += reuse.n_edits;
        tot.resyncs += reuse.n_resyncs;
        tot.resync_ok += reuse.n_resync_ok;
    }
    return tot;
}

} // namespace

// The comparison that chose the default (printed; the figures of
// docs/results/design-notes/reuse-sync-rules.md). Columns: tokens
// per target pass with drafts uncapped (reuse up to m_max = 256, lookup 48), then the costed
// speedup (docs/results/design-notes/cost-curve-and-oracle.md's cost curve) for that sizing, fixed caps 8 and 48, grow x2 / shrink to a+2
// (start 48, at most 48), and clairvoyant sizing. "rlen 0" rows draft m_max tokens after a re-sync
// too; the others resync_len 4. Last column: re-sync proposals whose first token was committed /
// re-sync proposals made.
// The bar and the oracle figures of docs/results/design-notes/cost-curve-and-oracle.md, loosely (measured: see reuse.h)
TEST_F(reuse_oracle, default_rule_figures) {
    ASSERT_EQ(canitedit.size(), 105u);
    const reuse_params def;
    replay_params fixed; // uncapped tree: reuse up to 256 tokens, lookup 48
    replay_params clairv;
    clairv.sizing = REPLAY_SIZING_CLAIRVOYANT;
    replay_params grow;
    grow.sizing = REPLAY_SIZING_GROW_SHRINK;

    const replay_totals rl_fixed = replay_reuse(canitedit, def, true, fixed);
    const replay_totals r_fixed  = replay_reuse(canitedit, def, false, fixed);
    printf("reuse+lookup fixed (256, 48): %.2f tokens/pass; reuse alone %.2f\n", rl_fixed.r.tokens_per_pass(),
           r_fixed.r.tokens_per_pass());
    // the bar: >= 8 tokens per target pass (measured 9.68; lookup-longest alone gives 7.71)
    EXPECT_GE(rl_fixed.r.tokens_per_pass(), 8.0);
    EXPECT_GE(r_fixed.r.tokens_per_pass(), 6.3); // measured 6.79

    // clairvoyant bounds: the design's table says reuse 3.16x, reuse + lookup 3.70x (its re-sync rule is
    // not written down; measured here 3.46x and 3.97x)
    EXPECT_GE(replay_reuse(canitedit, def, false, clairv).r.speedup(), 3.16);
    EXPECT_GE(replay_reuse(canitedit, def, true, clairv).r.speedup(), 3.70);
    // grow/shrink: the design's 2.51x / 2.66x; measured 2.71x / 2.79x
    EXPECT_GE(replay_reuse(canitedit, def, false, grow).r.speedup(), 2.51);
    EXPECT_GE(replay_reuse(canitedit, def, true, grow).r.speedup(), 2.66);

    // the default beats the paper's own rule (last 7 tokens, first occurrence after the edit point)
    // by a wide margin in tokens per pass (measured 6.79 vs 3.36 alone)
    const replay_totals paper = replay_reuse(canitedit, reuse_params_for(REUSE_SYNC_PAPER), false, fixed);
    EXPECT_GT(r_fixed.r.tokens_per_pass(), paper.r.tokens_per_pass() * 1.5);
}
