// Prompt lookup drafters (src/draft/lookup.cpp): llama.cpp's ngram-simple, quirk by quirk, and the
// longest suffix match; the drafter's budget and tree merge; speed on 8k-token histories.
#include "editspec/lookup.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>

using namespace editspec;

namespace {

lookup_params simple_params(int32_t n, int32_t m) {
    lookup_params p;
    p.mode  = LOOKUP_MODE_NGRAM_SIMPLE;
    p.n_max = n;
    p.m_max = m;
    return p;
}

lookup_params longest_params(int32_t n_max, int32_t n_min, int32_t m) {
    lookup_params p;
    p.mode  = LOOKUP_MODE_LONGEST;
    p.n_max = n_max;
    p.n_min = n_min;
    p.m_max = m;
    return p;
}

} // namespace

// ----------------------------------------------------------------------------
// ngram-simple

TEST(lookup_ngram_simple, header_example) {
    // pattern [1, 2] last occurred at 1; 3 tokens follow it
    EXPECT_EQ(lookup_ngram_simple(token_vec{9, 1, 2, 3, 4, 5, 6, 1, 2}, simple_params(2, 3)), (token_vec{3, 4, 5}));
}

TEST(lookup_ngram_simple, no_draft_until_longer_than_n_plus_m_plus_2) {
    // n = 2, m = 3: llama.cpp's tokens (history minus the last token) must exceed n + m + 1 = 6.
    // 8 tokens: tokens has 7 -> draft [3, 4, 5] from the match at 1
    EXPECT_EQ(lookup_ngram_simple(token_vec{9, 1, 2, 3, 4, 5, 1, 2}, simple_params(2, 3)), (token_vec{3, 4, 5}));
    // 7 tokens: tokens has 6 -> nothing, although [1, 2] at 1 is followed by [3, 4]
    EXPECT_TRUE(lookup_ngram_simple(token_vec{9, 1, 2, 3, 4, 1, 2}, simple_params(2, 3)).empty());
    // the defaults need more than 62 tokens: 62 have none even for a perfect repetition, 63 do
    token_vec h;
    for (int i = 0; i < 62; i++) {
        h.push_back(i % 20);
    }
    EXPECT_TRUE(lookup_ngram_simple(h, simple_params(12, 48)).empty());
    h.push_back(62 % 20);
    EXPECT_FALSE(lookup_ngram_simple(h, simple_params(12, 48)).empty());
}

TEST(lookup_ngram_simple, position_zero_is_no_match) {
    // the only earlier [1, 2] starts at position 0, which llama.cpp reads as "no match"
    EXPECT_TRUE(lookup_ngram_simple(token_vec{1, 2, 3, 4, 5, 6, 7, 1, 2}, simple_params(2, 3)).empty());
    // longest has no such rule
    EXPECT_EQ(lookup_longest(token_vec{1, 2, 3, 4, 5, 6, 7, 1, 2}, longest_params(2, 1, 3)), (token_vec{3, 4, 5}));
}

TEST(lookup_ngram_simple, tail_shifted_by_one_is_skipped) {
    // [3, 3] occurs at 6 (the tail shifted by one) and 7 (the tail); the search starts at
    // L-n-2 = 5, so neither is tried: no draft
    const token_vec h = {9, 8, 7, 6, 5, 4, 3, 3, 3};
    EXPECT_TRUE(lookup_ngram_simple(h, simple_params(2, 3)).empty());
    // longest takes the overlapping occurrence ending at 8 and drafts the run's next token
    EXPECT_EQ(lookup_longest(h, longest_params(2, 1, 3)), (token_vec{3}));
}

TEST(lookup_ngram_simple, most_recent_occurrence) {
    // [1, 2] at 1 (then 5 5 5) and at 6 (then 7 7 7): the backward search stops at 6
    const token_vec h = {9, 1, 2, 5, 5, 5, 1, 2, 7, 7, 7, 0, 1, 2};
    EXPECT_EQ(lookup_ngram_simple(h, simple_params(2, 3)), (token_vec{7, 7, 7})); // not [5, 5, 5]
}

TEST(lookup_ngram_simple, at_most_m_tokens) {
    // 6 tokens follow the match, m = 3 keeps 3
    const token_vec h = {9, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2};
    EXPECT_EQ(lookup_ngram_simple(h, simple_params(2, 3)), (token_vec{3, 4, 5}));
    EXPECT_EQ(lookup_ngram_simple(h, simple_params(2, 5)), (token_vec{3, 4, 5, 6, 7}));
}

TEST(lookup_ngram_simple, never_copies_the_last_token) {
    // match at 5; llama.cpp copies from `tokens` (the history minus the last token), so the
    // draft stops at [3, 4, 1] although m = 5 and the history goes on with 2
    const token_vec h = {9, 8, 7, 6, 5, 1, 2, 3, 4, 1, 2};
    EXPECT_EQ(lookup_ngram_simple(h, simple_params(2, 5)), (token_vec{3, 4, 1}));
    // longest copies up to the end
    EXPECT_EQ(lookup_longest(h, longest_params(2, 1, 5)), (token_vec{3, 4, 1, 2}));
}

TEST(lookup_ngram_simple, none_if_fewer_than_n) {
    // match at 6 (the first start tried, L-n-2): only 1 token (h[8]) lies between it and the last
    // token, fewer than n = 2 -> no draft; llama.cpp does not look for an older occurrence
    const token_vec h = {9, 8, 7, 6, 5, 4, 1, 2, 1, 2};
    EXPECT_TRUE(lookup_ngram_simple(h, simple_params(2, 3)).empty());
    // longest drafts the two tokens that follow (into the tail)
    EXPECT_EQ(lookup_longest(h, longest_params(2, 1, 3)), (token_vec{1, 2}));
}

// ----------------------------------------------------------------------------
// longest

TEST(lookup_longest, header_examples) {
    // [1, 2, 3] at 0..3 matches 3 tokens; the more recent [2, 3] at 4..6 only 2
    EXPECT_EQ(lookup_longest(token_vec{1, 2, 3, 9, 2, 3, 7, 8, 5, 1, 2, 3}, longest_params(3, 1, 4)),
              (token_vec{9, 2, 3, 7}));
    // best k = 2 at e = 3; the draft runs into the tail
    EXPECT_EQ(lookup_longest(token_vec{4, 2, 3, 7, 1, 2, 3}, longest_params(3, 1, 4)), (token_vec{7, 1, 2, 3}));
}

TEST(lookup_longest, ties_go_to_the_most_recent) {
    // [1, 2] ends at 2 (then 5) and at 5 (then 6), both k = 2: the later one wins
    EXPECT_EQ(lookup_longest(token_vec{1, 2, 5, 1, 2, 6, 0, 1, 2}, longest_params(12, 1, 48)),
              (token_vec{6, 0, 1, 2}));
}

TEST(lookup_longest, n_max_caps_the_comparison) {
    // tail [5, 3, 4]: the occurrence ending at 3 matches 3 tokens, the one ending at 7 only 2.
    const token_vec h = {5, 3, 4, 7, 1, 3, 4, 8, 5, 3, 4};
    // n_max = 3 tells them apart: the older, longer match
    EXPECT_EQ(lookup_longest(h, longest_params(3, 1, 3)), (token_vec{7, 1, 3}));
    // n_max = 2 caps both at 2: a tie, so the most recent
    EXPECT_EQ(lookup_longest(h, longest_params(2, 1, 3)), (token_vec{8, 5, 3}));
}

TEST(lookup_longest, n_min_refuses_short_matches) {
    // only a 1-token match ([2] ending at 3)
    const token_vec h = {1, 5, 2, 9, 2};
    EXPECT_EQ(lookup_longest(h, longest_params(12, 1, 48)), (token_vec{9, 2}));
    EXPECT_TRUE(lookup_longest(h, longest_params(12, 2, 48)).empty());
}

TEST(lookup_longest, at_most_m_tokens) {
    // 7 tokens follow the match; m = 4 keeps 4
    const token_vec h = {1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2};
    EXPECT_EQ(lookup_longest(h, longest_params(12, 1, 4)), (token_vec{3, 4, 5, 6}));
}

TEST(lookup_longest, nothing_to_match) {
    // no earlier occurrence of the last token, or too short a history
    EXPECT_TRUE(lookup_longest(token_vec{1, 2, 3, 4}, longest_params(12, 1, 48)).empty());
    EXPECT_TRUE(lookup_longest(token_vec{7}, longest_params(12, 1, 48)).empty());
    EXPECT_TRUE(lookup_longest(token_vec{}, longest_params(12, 1, 48)).empty());
}

TEST(lookup_longest, equals_brute_force_on_random_histories) {
    // brute force: for n from n_max down to n_min, the latest start j (j + n < L) with
    // h[j .. j+n) == the last n tokens, draft h[j+n .. j+n+m)
    std::mt19937 rng(99);
    for (int iter = 0; iter < 20000; iter++) {
        const int n_max = 1 + (int) (rng() % 6);
        const int n_min = 1 + (int) (rng() % n_max);
        const int m = 1 + (int) (rng() % 8);
        const int alphabet = 2 + (int) (rng() % 4);
        token_vec h(rng() % 40);
        for (auto & t : h) {
            t = (llama_token) (rng() % alphabet);
        }
        const int L = (int) h.size();
        token_vec want;
        for (int n = n_max; n >= n_min && want.empty(); n--) {
            for (int j = L - n - 1; j >= 0; j--) {
                if (L - n >= 0 && std::equal(h.begin() + j, h.begin() + j + n, h.end() - n)) {
                    want.assign(h.begin() + j + n, h.begin() + std::min(L, j + n + m));
                    break;
                }
            }
        }
        ASSERT_EQ(lookup_longest(h, longest_params(n_max, n_min, m)), want) << "iter " << iter;
    }
}

// ----------------------------------------------------------------------------
// drafter

TEST(lookup_drafter, budget_is_honoured) {
    // the lookup offers [3, 4, 5, 6, 7, 1, 2]; a budget of 3 keeps the first 3 as one path
    lookup_drafter d(longest_params(12, 1, 48));
    const token_vec h = {1, 2, 3, 4, 5, 6, 7, 1, 2};
    draft_tree tree;
    d.propose(h, tree, 3);
    ASSERT_EQ(tree.size(), 3);
    EXPECT_EQ(tree.path_to(2), (token_vec{3, 4, 5}));
    for (const draft_node & n : tree.nodes) {
        EXPECT_EQ(n.source, DRAFT_SOURCE_LOOKUP);
    }
    // budget 0: nothing
    draft_tree empty;
    d.propose(h, empty, 0);
    EXPECT_TRUE(empty.empty());
}

TEST(lookup_drafter, merges_with_other_drafters) {
    // another drafter already proposed [3, 4, 9]; lookup's [3, 4, 5, 6] shares [3, 4], which costs
    // nothing, so a budget of 2 still adds [5, 6] under 4
    draft_tree tree;
    tree.add_path(-1, token_vec{3, 4, 9}, DRAFT_SOURCE_REUSE, 16);
    lookup_drafter d(longest_params(12, 1, 4));
    d.propose(token_vec{1, 2, 3, 4, 5, 6, 7, 1, 2}, tree, 2);
    ASSERT_EQ(tree.size(), 5);
    EXPECT_EQ(tree.nodes[0].source, DRAFT_SOURCE_REUSE); // shared nodes keep their first source
    EXPECT_EQ(tree.nodes[1].source, DRAFT_SOURCE_REUSE);
    EXPECT_EQ(tree.path_to(4), (token_vec{3, 4, 5, 6}));
    EXPECT_EQ(tree.nodes[3].source, DRAFT_SOURCE_LOOKUP);
    EXPECT_EQ(tree.nodes[3].parent, 1); // 5 hangs under the shared 4
}

TEST(lookup_drafter, ngram_simple_mode_and_name) {
    // the drafter dispatches on mode; ngram-simple refuses the short history longest accepts
    const token_vec h = {1, 2, 3, 4, 5, 6, 7, 1, 2};
    lookup_drafter simple(simple_params(2, 3));
    lookup_drafter longest(longest_params(2, 1, 3));
    draft_tree a, b;
    simple.propose(h, a, 16);
    longest.propose(h, b, 16);
    EXPECT_TRUE(a.empty());
    EXPECT_EQ(b.size(), 3);
    EXPECT_STREQ(simple.name(), "ngram-simple");
    EXPECT_STREQ(longest.name(), "lookup-longest");
    EXPECT_EQ(simple.source(), DRAFT_SOURCE_LOOKUP);
}

// (its speed on 8k-token histories: bench/bench-lookup.cpp, a Google Benchmark)
