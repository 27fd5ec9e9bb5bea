// CopySpec's copy drafter (src/draft/copy.cpp): the γ-gram index against a brute-force scan, the
// match rules, extension, the budget, and the index's O(1) step (its timing is bench/bench-copy).
#include "editspec/copy.h"
#include "editspec/drafters.h"

#include <gtest/gtest.h>

#include <random>

using namespace editspec;

namespace {

// brute force: end positions e < L of earlier occurrences of the last γ tokens, oldest first
std::vector<int32_t> scan(const token_vec & h, int32_t gamma) {
    std::vector<int32_t> out;
    const int32_t L = (int32_t) h.size();
    if (L < gamma + 1) return out;
    for (int32_t e = gamma; e < L; e++) {
        if (std::equal(h.begin() + (e - gamma), h.begin() + e, h.end() - gamma)) out.push_back(e);
    }
    return out;
}

copy_params params(copy_match match, int32_t n_copy = 10) {
    copy_params p;
    p.match = match;
    p.n_copy = n_copy;
    return p;
}

} // namespace

TEST(copy_index, header_example) {
    copy_index ix(3);
    ix.append(token_vec{1, 2, 3, 4, 1, 2, 3, 9, 1, 2, 3});
    // "1 2 3" ends at 3 and 7 before the tail's own (11)
    EXPECT_EQ(ix.first_match(), 3);
    EXPECT_EQ(ix.recent_match(), 7);
    EXPECT_EQ(ix.matches(8), (std::vector<int32_t>{7, 3}));
}

TEST(copy_index, matches_brute_force_on_random_histories) {
    // small vocabularies make many matches and overlapping ones; appended in pieces of any size
    std::mt19937 rng(11);
    for (int32_t gamma : {1, 2, 3, 5}) {
        for (int vocab : {2, 4, 50}) {
            copy_index ix(gamma);
            token_vec h;
            for (int step = 0; step < 300; step++) {
                token_vec piece(rng() % 4);
                for (auto & t : piece) t = (llama_token) (rng() % vocab);
                ix.append(piece);
                h.insert(h.end(), piece.begin(), piece.end());
                const std::vector<int32_t> want = scan(h, gamma);
                ASSERT_EQ(ix.first_match(), want.empty() ? -1 : want.front()) << "gamma " << gamma << " L " << h.size();
                ASSERT_EQ(ix.recent_match(), want.empty() ? -1 : want.back()) << "gamma " << gamma << " L " << h.size();
                const std::vector<int32_t> got = ix.matches(1 << 20);
                ASSERT_EQ(got, std::vector<int32_t>(want.rbegin(), want.rend()));
            }
        }
    }
}

TEST(copy_index, no_match_before_gamma_plus_one_tokens) {
    copy_index ix(3);
    ix.append(token_vec{1, 1, 1});
    EXPECT_EQ(ix.first_match(), -1); // the tail is the only 3-gram
    ix.append(token_vec{1});
    EXPECT_EQ(ix.first_match(), 3); // [1 1 1] ends at 3, followed by the 4th token
}

TEST(copy_drafter, first_recent_and_branches) {
    const token_vec h = {7, 1, 2, 3, 4, 5, 8, 1, 2, 3, 6, 9, 1, 2, 3};
    for (auto [match, want] : {std::pair{COPY_MATCH_FIRST, token_vec{4, 5, 8}}, std::pair{COPY_MATCH_RECENT, token_vec{6, 9, 1}}}) {
        copy_drafter d(params(match, 3));
        d.begin(token_vec(h.begin(), h.begin() + 5));
        draft_tree tree;
        d.propose(h, tree, 16);
        ASSERT_EQ(tree.size(), 3);
        EXPECT_EQ(tree.path_to(2), want);
        EXPECT_EQ(tree.nodes[0].source, DRAFT_SOURCE_COPY);
    }
    copy_drafter d(params(COPY_MATCH_BRANCHES, 2));
    d.begin(h);
    draft_tree tree;
    d.propose(h, tree, 16);
    // most recent first: [6 9] then [4 5]
    ASSERT_EQ(tree.size(), 4);
    EXPECT_EQ(tree.path_to(1), (token_vec{6, 9}));
    EXPECT_EQ(tree.path_to(3), (token_vec{4, 5}));
}

TEST(copy_drafter, budget_and_no_match) {
    const token_vec h = {1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3};
    copy_drafter d(params(COPY_MATCH_FIRST, 10));
    d.begin(h);
    draft_tree tree;
    d.propose(h, tree, 4);
    EXPECT_EQ(tree.size(), 4);
    EXPECT_EQ(tree.path_to(3), (token_vec{4, 5, 6, 7}));
    const token_vec none = {1, 2, 3, 4, 5, 6};
    copy_drafter d2;
    d2.begin(none);
    draft_tree t2;
    d2.propose(none, t2, 16);
    EXPECT_TRUE(t2.empty());
    EXPECT_FALSE(d2.proposed());
}

TEST(copy_drafter, copy_runs_into_the_tail) {
    // a loop copies itself: the draft may reach the tokens just committed
    const token_vec h = {5, 1, 2, 3, 1, 2, 3};
    copy_drafter d(params(COPY_MATCH_RECENT, 10));
    d.begin(h);
    draft_tree tree;
    d.propose(h, tree, 16);
    EXPECT_EQ(tree.path_to(tree.size() - 1), (token_vec{1, 2, 3}));
}

TEST(copy_drafter, extension_follows_the_source_and_doubles) {
    // a 100-token block, then its copy begins: once the output follows it, copy-ext keeps copying
    // from the same place, 10, 20, 40 tokens, without a new match
    token_vec block(100);
    for (int i = 0; i < 100; i++) block[i] = 1000 + i;
    token_vec h = {1};
    h.insert(h.end(), block.begin(), block.end());
    h.push_back(2);
    h.insert(h.end(), block.begin(), block.begin() + 3); // the copy's first 3 tokens: a match
    copy_params p = params(COPY_MATCH_FIRST, 10);
    p.extend = true;
    copy_drafter d(p);
    d.begin(h);
    std::vector<int32_t> sizes;
    size_t copied = 3; // block tokens the copy holds
    for (int step = 0; step < 3; step++) {
        draft_tree tree;
        d.propose(h, tree, 1000);
        sizes.push_back(tree.size());
        // the target accepts the whole draft and adds the block's next token
        token_vec acc = tree.path_to(tree.size() - 1);
        ASSERT_EQ(acc, token_vec(block.begin() + copied, block.begin() + copied + acc.size()));
        copied += acc.size();
        acc.push_back(block[copied++]);
        h.insert(h.end(), acc.begin(), acc.end());
        d.accept(acc);
    }
    EXPECT_EQ(sizes, (std::vector<int32_t>{10, 20, 40}));
    // a rejection ends the streak: the next proposal is a fresh 10-token match
    d.accept(token_vec{4242});
    h.push_back(4242);
    h.insert(h.end(), block.begin(), block.begin() + 3);
    draft_tree tree;
    d.propose(h, tree, 1000);
    EXPECT_EQ(tree.size(), 10);
}

TEST(copy_drafter, a_new_history_reindexes) {
    copy_drafter d;
    d.begin(token_vec{1, 2, 3, 4, 1, 2, 3});
    draft_tree tree;
    d.propose(token_vec{9, 8, 7, 6, 9, 8, 7}, tree, 16); // not an extension of what was indexed
    EXPECT_EQ(tree.path_to(tree.size() - 1), (token_vec{6, 9, 8, 7}));
}

// the papers' settings reach the drafter through the table (--copy-gamma, --copy-len): a history
// that repeats itself is copied |S| tokens at a time, and only once γ tokens match
TEST(copy_drafter, the_table_passes_gamma_and_the_copy_length) {
    const editspec::drafter_desc * d = editspec::drafter_find("copy");
    ASSERT_TRUE(d);
    const editspec::token_vec prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 1, 2, 3};
    auto drafted = [&](int32_t gamma, int32_t len, std::span<const llama_token> history) {
        editspec::drafter_inputs in;
        in.settings.copy_gamma = gamma;
        in.settings.copy_len = len;
        const std::unique_ptr<editspec::drafter_i> dr = d->make(*d, in, nullptr);
        dr->begin(prompt);
        editspec::draft_tree tree;
        dr->propose(history, tree, 64);
        return tree.size();
    };
    EXPECT_EQ(drafted(3, 10, prompt), 10); // "4 .. 12 1" after the first "1 2 3": |S| = 10
    EXPECT_EQ(drafted(3, 4, prompt), 4);   // |S| = 4
    const editspec::token_vec two = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 2, 3};
    EXPECT_EQ(drafted(3, 10, two), 0);     // "12 2 3" occurred nowhere
    EXPECT_GT(drafted(2, 10, two), 0);     // "2 3" did
}
