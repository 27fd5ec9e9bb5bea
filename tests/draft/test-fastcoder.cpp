// FastCoder / CodeSwift (src/draft/fastcoder.cpp): the α/β-weighted trie, the cache's suffix
// search, retrieval timing (skip token, missing table), and greedy decoding with fastcoder equal to
// ar while the cache fills and is searched first.
#include "common/test-util.h"
#include "editspec/decoder.h"
#include "editspec/fastcoder.h"
#include "editspec/methods.h"

#include <gtest/gtest.h>


using namespace editspec;

TEST(retrieval_trie, merge_sums_weights_node_by_node) {
    retrieval_trie a, b;
    a.clear();
    b.clear();
    a.add(token_vec{1, 2, 3}, 1.0f);
    a.add(token_vec{5}, 1.0f);
    b.add(token_vec{1, 2, 4}, 2.0f);
    b.add(token_vec{1}, 0.5f); // a continuation cut short (a file's end): its prefix weight counts
    a.merge(b);
    ASSERT_EQ(a.nodes.size(), 6u); // root, 1, 2, 3, 5; and 4 from b
    EXPECT_EQ(a.top_paths(1), (std::vector<token_vec>{{1, 2, 4}}));
    EXPECT_FLOAT_EQ(a.nodes[0].weight, 4.5f);
    EXPECT_FLOAT_EQ(a.nodes[1].weight, 3.5f); // token 1: 1 + 2 + 0.5
}

TEST(retrieval_trie, alpha_and_beta_choose_the_source) {
    // two repository continuations against three common ones: α = 2 prefers the repository's
    for (float alpha : {1.0f, 2.0f}) {
        retrieval_trie t;
        t.clear();
        t.add(token_vec{7, 8}, alpha);
        t.add(token_vec{7, 8}, alpha);
        for (int i = 0; i < 3; i++) t.add(token_vec{9}, 1.0f);
        EXPECT_EQ(t.top_paths(1)[0], alpha > 1.5f ? token_vec({7, 8}) : token_vec({9}));
    }
}

TEST(retrieval_cache, longest_suffix_newest_first) {
    retrieval_cache c;
    c.add(token_vec{1, 2, 3, 10, 11});
    c.add(token_vec{9, 2, 3, 20, 21});
    c.add(token_vec{5, 2, 3, 30});
    EXPECT_EQ(c.n_sequences(), 3);
    retrieval_params p;
    retrieval_trie t;
    t.clear();
    // ... 9 2 3: the three-token match wins over the two-token ones
    EXPECT_EQ(c.search(token_vec{4, 9, 2, 3}, p, t, 1.0f), 3);
    EXPECT_EQ(t.top_paths(4), (std::vector<token_vec>{{20, 21}}));
    // ... 2 3 alone: every sequence, the newest first on ties
    t.clear();
    EXPECT_EQ(c.search(token_vec{2, 3}, p, t, 1.0f), 2);
    EXPECT_EQ(t.top_paths(1)[0], (token_vec{30}));
    EXPECT_EQ(t.top_paths(4).size(), 3u);
    // no pair: nothing, and nothing runs past a sequence's end
    t.clear();
    EXPECT_EQ(c.search(token_vec{3, 30}, p, t, 1.0f), 0);
    EXPECT_EQ(c.search(token_vec{7, 8}, p, t, 1.0f), 0);
}

namespace {

struct fastcoder_fixture : public ::testing::Test {
    test::temp_dir dir;
    std::unique_ptr<model> m;
    std::unique_ptr<context> ctx;

    void index(const std::string & name, const std::vector<std::string> & texts, datastore & ds) {
        std::string err;
        ASSERT_TRUE(test::index_texts(*m, dir.path, name, texts, ds, &err)) << err;
    }
};

} // namespace

TEST_F(fastcoder_fixture, repository_weight_timing_and_missing_table) {
    m = test::load_or_fail(test::tiny_model_q8_path(), true);
    ASSERT_TRUE(m);
    datastore repo, common;
    index("repo", {"def area(w, h):\n    return w * h\n"}, repo);
    index("common", {"def area(w, h):\n    pass\n", "def area(w, h):\n    pass\n", "def area(w, h):\n    pass\n"}, common);
    const datastore * r[] = {&repo};
    const datastore * c[] = {&common};
    const token_vec history = m->tokenize("x = 1\ndef area(w, h):\n", false, false);
    const token_vec want_repo = m->tokenize("    return", false, false);
    const token_vec want_common = m->tokenize("    pass", false, false);
    for (float alpha : {1.0f, 4.0f}) {
        fastcoder_params fp;
        fp.alpha = alpha;
        fp.use_timing = false;
        fastcoder_drafter d(*m, r, c, nullptr, fp);
        d.begin(history);
        draft_tree tree;
        d.propose(history, tree, 64);
        ASSERT_FALSE(tree.empty());
        const token_vec & want = alpha > 3.0f ? want_repo : want_common; // 1 x α against 3 x β
        // the heaviest path is added first: nodes 0 .. n-1 of the tree
        ASSERT_GE(tree.size(), (int32_t) want.size());
        const token_vec first = tree.path_to((int32_t) want.size() - 1);
        EXPECT_EQ(first, want) << "alpha " << alpha << ": " << m->detokenize(first);
    }
    // the skip token: at a line's first non-whitespace token, p = 0 never searches
    fastcoder_params fp;
    fp.skip_p = 0.0f;
    fastcoder_drafter d(*m, r, c, nullptr, fp);
    const token_vec at_line = m->tokenize("def area(w, h):\n    ", false, false);
    d.begin(at_line);
    draft_tree tree;
    d.propose(at_line, tree, 64);
    EXPECT_TRUE(tree.empty());
    EXPECT_EQ(d.stats.skipped_token, 1);
    EXPECT_EQ(d.stats.searched, 0);
    // the missing table: a context that found nothing is not searched again
    const token_vec nowhere{m->facts().n_vocab - 1, m->facts().n_vocab - 2, m->facts().n_vocab - 3};
    d.propose(nowhere, tree, 64);
    d.propose(nowhere, tree, 64);
    EXPECT_TRUE(tree.empty());
    EXPECT_EQ(d.stats.searched, 1);
    EXPECT_EQ(d.stats.skipped_missing, 1);
}

TEST_F(fastcoder_fixture, the_requests_own_tokens_win_with_the_longer_match) {
    m = test::load_or_fail(test::tiny_model_q8_path(), true);
    ASSERT_TRUE(m);
    datastore common;
    index("common", {"def area(w, h):\n    pass\n", "def area(w, h):\n    pass\n"}, common);
    const datastore * c[] = {&common};
    // the context wrote this function before, after the same line: a longer match than the store's
    const token_vec history = m->tokenize("x = 1\ndef area(w, h):\n    return w * h\n\nx = 1\ndef area(w, h):\n", false, false);
    for (const bool use_context : {true, false}) {
        fastcoder_params fp;
        fp.use_timing = false;
        fp.use_context = use_context;
        fastcoder_drafter d(*m, {}, c, nullptr, fp);
        d.begin(history);
        draft_tree tree;
        d.propose(history, tree, 64);
        ASSERT_FALSE(tree.empty());
        const token_vec want = m->tokenize(use_context ? "    return w * h" : "    pass", false, false);
        ASSERT_GE(tree.size(), (int32_t) want.size());
        EXPECT_EQ(tree.path_to((int32_t) want.size() - 1), want) << m->detokenize(tree.path_to(tree.size() - 1));
        EXPECT_EQ(tree.nodes[0].source, use_context ? DRAFT_SOURCE_LOOKUP : DRAFT_SOURCE_RETRIEVAL);
        EXPECT_EQ(d.stats.from_context, use_context ? 1 : 0);
    }
}

TEST_F(fastcoder_fixture, greedy_fastcoder_equals_ar_as_the_cache_fills) {
    m = test::load_or_fail(test::tiny_model_q8_path());
    ASSERT_TRUE(m);
    ctx = test::make_spec_context(*m, 256);
    ASSERT_TRUE(ctx);
    std::mt19937 rng(23);
    const std::vector<test::ar_case> cases = test::ar_cases(*ctx, rng, 24, 48);
    std::vector<std::string> repo_texts, common_texts;
    for (size_t p = 0; p < cases.size(); p++) {
        // a third of the outputs in the repository store, a third shuffled in the common one (drafts
        // that fail), a third nowhere (the cache's turn: the model's own output of earlier prompts)
        std::string text = cases[p].text;
        if (p % 3 == 0) repo_texts.push_back(text);
        if (p % 3 == 1) {
            std::shuffle(text.begin() + text.size() / 2, text.end(), rng);
            common_texts.push_back(text);
        }
    }
    datastore repo, common;
    index("repo", repo_texts, repo);
    index("common", common_texts, common);
    const datastore * r[] = {&repo};
    const datastore * c[] = {&common};
    retrieval_cache cache; // carried across the prompts
    fastcoder_params fp;
    fp.cache_min = 20;
    int64_t accepted = 0, from_cache = 0;
    for (int pass = 0; pass < 2; pass++) { // the second pass repeats the prompts: the cache answers
        for (size_t p = 0; p < cases.size(); p++) {
            fastcoder_drafter d(*m, r, c, &cache, fp);
            drafter_i * ds[] = {&d};
            spec_params sp;
            sp.draft_max = 24;
            generate_params gp;
            gp.n_predict = 48;
            const generate_result res = generate_spec(*ctx, cases[p].prompt, gp, sp, ds);
            ASSERT_EQ(res.tokens, cases[p].ar.tokens) << "prompt " << p << ", pass " << pass;
            accepted += res.by_source[DRAFT_SOURCE_RETRIEVAL].n_accepted;
            from_cache += d.stats.from_cache;
        }
    }
    EXPECT_GE(cache.n_sequences(), fp.cache_min);
    EXPECT_GT(from_cache, 10);
    EXPECT_GT(accepted, 300);
    // by name: refused without a datastore, made with one
    method_spec ms;
    std::string err;
    ASSERT_TRUE(method_parse("fastcoder", ms, &err)) << err;
    std::vector<std::unique_ptr<drafter_i>> owned;
    drafter_inputs in;
    in.target = m.get();
    EXPECT_FALSE(method_make_drafters(ms, in, owned, &err));
    EXPECT_NE(err.find("--repo-datastore"), std::string::npos) << err;
    in.repo_datastores = r;
    EXPECT_TRUE(method_make_drafters(ms, in, owned, &err)) << err;
}

// The budget bounds the whole proposal: the request's own tokens give several paths (the same line
// followed by four different ones), and budget nodes in all reach the tree, not budget per path.
TEST_F(fastcoder_fixture, the_budget_bounds_every_path_together) {
    m = test::load_or_fail(test::tiny_model_q8_path(), true);
    ASSERT_TRUE(m);
    const token_vec history = m->tokenize("k = 1\nalpha = beta + gamma\nk = 1\ndelta = eps * zeta\n"
                                          "k = 1\ntheta = iota - kappa\nk = 1\nlambda = mu / nu\nk = 1\n",
                                          false, false);
    fastcoder_params fp;
    fp.use_timing = false;
    fastcoder_drafter d(*m, {}, {}, nullptr, fp);
    d.begin(history);
    for (const int32_t budget : {1, 3, 5}) {
        draft_tree tree;
        d.propose(history, tree, budget);
        ASSERT_EQ(d.stats.from_context, budget == 1 ? 1 : budget == 3 ? 2 : 3);
        EXPECT_GT(tree.size(), 0);
        EXPECT_LE(tree.size(), budget);
    }
}
