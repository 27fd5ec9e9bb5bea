// Retrieval drafts (src/draft/retrieval.cpp): the weighted trie's paths by frequency, the suffix
// match from the longest length down, and greedy decoding with `rest` equal to ar on a datastore
// that holds the model's own outputs (many accepted drafts) and others (rejected ones).
#include "common/test-util.h"
#include "editspec/decoder.h"
#include "editspec/methods.h"
#include "editspec/retrieval.h"

#include <gtest/gtest.h>


using namespace editspec;

TEST(retrieval_trie, paths_by_frequency) {
    retrieval_trie t;
    t.clear();
    t.add(token_vec{1, 2, 3});
    t.add(token_vec{1, 2, 4});
    t.add(token_vec{1, 2, 4});
    t.add(token_vec{5, 6});
    const std::vector<token_vec> p = t.top_paths(3);
    ASSERT_EQ(p.size(), 2u); // two first tokens: two paths
    EXPECT_EQ(p[0], (token_vec{1, 2, 4}));
    EXPECT_EQ(p[1], (token_vec{5, 6}));
    EXPECT_EQ(t.top_paths(1, 2), (std::vector<token_vec>{{1, 2, 4}})); // cut where fewer than 2 agree
}

namespace {

struct rest_fixture : public ::testing::Test {
    test::temp_dir dir;
    std::unique_ptr<model> m;
    std::unique_ptr<context> ctx;
    datastore ds;

    void index(const std::vector<std::string> & texts) {
        std::string err;
        ASSERT_TRUE(test::index_texts(*m, dir.path, "f", texts, ds, &err)) << err;
    }
};

} // namespace

TEST_F(rest_fixture, longest_suffix_and_most_frequent_continuation) {
    m = test::load_or_fail(test::tiny_model_q8_path(), true);
    ASSERT_TRUE(m);
    index({"def area(w, h):\n    return w * h\n", "def area(w, h):\n    return w * h\n", "def area(w, h):\n    pass\n"});
    const datastore * stores[] = {&ds};
    retrieval_drafter d(stores);
    const token_vec history = m->tokenize("x = 1\ndef area(w, h):\n", false, false);
    draft_tree tree;
    d.propose(history, tree, 64);
    ASSERT_FALSE(tree.empty());
    EXPECT_GE(d.last_match, 4);
    EXPECT_EQ(tree.nodes[0].source, DRAFT_SOURCE_RETRIEVAL);
    // the first path is the continuation two of the three files share
    const token_vec want = m->tokenize("    return w * h\n", false, false);
    const token_vec first = tree.path_to(tree.leaves().front());
    ASSERT_GE(first.size(), want.size());
    EXPECT_TRUE(std::equal(want.begin(), want.end(), first.begin())) << m->detokenize(first);
    // nothing matches: no draft
    draft_tree none;
    d.propose(token_vec{m->facts().n_vocab - 1, m->facts().n_vocab - 2}, none, 64);
    EXPECT_TRUE(none.empty());
}

TEST_F(rest_fixture, capped_occurrences_keep_each_continuations_share) {
    m = test::load_or_fail(test::tiny_model_q8_path(), true);
    ASSERT_TRUE(m);
    // 3 files continue "value =" one way, 9 the other, both ways round: the suffix array sorts the
    // 12 occurrences by their continuations, so reading only its first 4 would take the minority
    // whenever it sorts first
    for (const bool alpha_first : {true, false}) {
        std::vector<std::string> texts(3, alpha_first ? "value = alpha\n" : "value = omega\n");
        texts.insert(texts.end(), 9, alpha_first ? "value = omega\n" : "value = alpha\n");
        ds = datastore();
        index(texts);
        const datastore * stores[] = {&ds};
        retrieval_params p;
        p.max_occurrences = 4;
        p.n_paths = 1;
        retrieval_drafter d(stores, p);
        const token_vec history = m->tokenize("x = 0\nvalue =", false, false);
        draft_tree tree;
        d.propose(history, tree, 64);
        ASSERT_FALSE(tree.empty());
        const std::string drafted = m->detokenize(tree.path_to(tree.leaves().front()));
        EXPECT_EQ(drafted.rfind(alpha_first ? " omega" : " alpha", 0), 0u) << drafted;
    }
}

TEST_F(rest_fixture, greedy_rest_equals_ar) {
    m = test::load_or_fail(test::tiny_model_q8_path());
    ASSERT_TRUE(m);
    ctx = test::make_spec_context(*m, 256);
    ASSERT_TRUE(ctx);
    std::mt19937 rng(21);
    const std::vector<test::ar_case> cases = test::ar_cases(*ctx, rng, 24, 48);
    std::vector<std::string> texts;
    for (size_t p = 0; p < cases.size(); p++) {
        // the datastore holds half the prompts with their outputs (drafts that hold), and the other
        // half's outputs cut and shuffled (drafts that fail)
        std::string text = cases[p].text;
        if (p % 2) std::shuffle(text.begin() + text.size() / 2, text.end(), rng);
        texts.push_back(text);
    }
    index(texts);
    method_spec ms;
    std::string err;
    ASSERT_TRUE(method_parse("rest@24", ms, &err)) << err;
    const datastore * stores[] = {&ds};
    drafter_inputs in;
    in.datastores = stores;
    int64_t accepted = 0;
    for (size_t p = 0; p < cases.size(); p++) {
        std::vector<std::unique_ptr<drafter_i>> owned;
        ASSERT_TRUE(method_make_drafters(ms, in, owned, &err)) << err;
        drafter_i * ds_[] = {owned[0].get()};
        spec_params sp;
        sp.draft_max = 24;
        generate_params gp;
        gp.n_predict = 48;
        const generate_result r = generate_spec(*ctx, cases[p].prompt, gp, sp, ds_);
        ASSERT_EQ(r.tokens, cases[p].ar.tokens) << "prompt " << p;
        accepted += r.by_source[DRAFT_SOURCE_RETRIEVAL].n_accepted;
    }
    EXPECT_GT(accepted, 100); // the datastore's drafts were tried and held
    // without a datastore the method is refused by name
    std::vector<std::unique_ptr<drafter_i>> owned;
    EXPECT_FALSE(method_make_drafters(ms, drafter_inputs{}, owned, &err));
    EXPECT_NE(err.find("--datastore"), std::string::npos) << err;
}
