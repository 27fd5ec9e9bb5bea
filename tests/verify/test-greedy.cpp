// Greedy verification (src/verify/greedy.cpp) and the shared walk / dispatch (src/verify/verify.cpp).
#include "editspec/verify.h"
#include "verify/verify-case.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace editspec;

namespace {

constexpr int32_t N_VOCAB = 100;

std::vector<float> peak(llama_token t) { return test::peak(N_VOCAB, t); }

// a hand-made tree over N_VOCAB tokens, nodes tagged as the tests' own
struct tree_case : test::verify_case {
    tree_case() {
        root   = peak(0);
        source = DRAFT_SOURCE_TEST;
    }
};

verify_result run(const tree_case & c, verify_policy policy = VERIFY_POLICY_GREEDY) { return c.run(policy); }

} // namespace

TEST(verify_greedy, empty_tree_gives_bonus) {
    // nothing drafted: the target's argmax at the root is the bonus token
    tree_case c;
    c.root = peak(7);
    const verify_result r = run(c);
    test::expect_verdict(r, {}, 7, false);
}

TEST(verify_greedy, all_right) {
    // the target agrees with a b c, then wants d after c: 3 accepted + bonus d
    tree_case c;
    c.root = peak(10);
    const int32_t a = c.add(-1, 10, 11);
    const int32_t b = c.add(a, 11, 12);
    const int32_t d = c.add(b, 12, 13);
    const verify_result r = run(c);
    test::expect_verdict(r, {a, b, d}, 13, false);
    EXPECT_EQ(r.n_lossy, 0);
}

TEST(verify_greedy, all_wrong) {
    // the target wants 20 first, the draft says 10: nothing accepted, 20 is recovered
    tree_case c;
    c.root = peak(20);
    const int32_t a = c.add(-1, 10, 11);
    c.add(a, 11, 12);
    const verify_result r = run(c);
    test::expect_verdict(r, {}, 20, true);
}

TEST(verify_greedy, stops_at_first_mismatch) {
    // a b accepted, c rejected because the target wants 30 after b; c's own logits are ignored
    tree_case c;
    c.root = peak(10);
    const int32_t a = c.add(-1, 10, 11);
    const int32_t b = c.add(a, 11, 30);
    c.add(b, 12, 13);
    const verify_result r = run(c);
    test::expect_verdict(r, {a, b}, 30, true);
}

TEST(verify_greedy, branch_choice) {
    //     root ── 1 ── 2            the target goes 5 → 6 → 8: the second branch, then the
    //          └─ 5 ── 7            second child of 5 (a later sibling), then the leaf's bonus
    //               └─ 6 ── 8
    tree_case c;
    c.root = peak(5);
    const int32_t n1 = c.add(-1, 1, 2);
    c.add(n1, 2, 3);
    const int32_t n5 = c.add(-1, 5, 6);
    c.add(n5, 7, 0);
    const int32_t n6 = c.add(n5, 6, 8);
    const int32_t n8 = c.add(n6, 8, 9);
    const verify_result r = run(c);
    test::expect_verdict(r, {n5, n6, n8}, 9, false);
}

TEST(verify_greedy, depth_64_chain) {
    // 64 drafts all right: 64 accepted and the bonus after the last
    tree_case c;
    c.root = peak(0);
    int32_t parent = -1;
    for (int32_t i = 0; i < 64; i++) {
        parent = c.add(parent, i, i + 1);
    }
    const verify_result r = run(c);
    ASSERT_EQ(r.accepted.size(), 64u);
    for (int32_t i = 0; i < 64; i++) {
        EXPECT_EQ(r.accepted[i], i);
    }
    EXPECT_EQ(r.token, 64);
    EXPECT_FALSE(r.recovered);
}

TEST(verify_greedy, depth_64_chain_wrong_at_40) {
    // the target disagrees after 40 tokens: 40 accepted, its own token recovered
    tree_case c;
    c.root = peak(0);
    int32_t parent = -1;
    for (int32_t i = 0; i < 64; i++) {
        parent = c.add(parent, i, i == 39 ? 99 : i + 1);
    }
    const verify_result r = run(c);
    EXPECT_EQ(r.accepted.size(), 40u);
    EXPECT_EQ(r.token, 99);
    EXPECT_TRUE(r.recovered);
}

TEST(verify_greedy, leaves_64) {
    // 64 candidates for the first token; the target wants the last one (63), then 77
    tree_case c;
    c.root = peak(63);
    for (int32_t i = 0; i < 64; i++) {
        c.add(-1, i, 77);
    }
    const verify_result r = run(c);
    test::expect_verdict(r, {63}, 77, false);
}

TEST(verify_greedy, leaves_64_none_right) {
    // 64 candidates 0..63, the target wants 80: all rejected
    tree_case c;
    c.root = peak(80);
    for (int32_t i = 0; i < 64; i++) {
        c.add(-1, i, 77);
    }
    const verify_result r = run(c);
    test::expect_verdict(r, {}, 80, true);
}

TEST(verify_greedy, ties_go_to_lowest_id) {
    // tokens 3 and 5 tie at the root: the argmax is 3 (as sampling_argmax), so child 3 wins
    tree_case c;
    c.root = peak(5);
    c.root[3] = 5.0f;
    c.add(-1, 5, 1);
    const int32_t n3 = c.add(-1, 3, 1);
    const verify_result r = run(c);
    EXPECT_EQ(r.accepted, (std::vector<int32_t>{n3}));
}

TEST(verify_greedy, out_of_range_tokens_never_accepted) {
    // bad draft tokens are rejected, not read out of bounds
    tree_case c;
    c.root = peak(4);
    c.add(-1, -1, 1);
    c.add(-1, N_VOCAB, 1);
    const verify_result r = run(c);
    test::expect_verdict(r, {}, 4, true);
}

TEST(verify_greedy, unvisited_logits_may_be_null) {
    // only the accepted path and its children are read: a rejected branch may have no logits
    tree_case c;
    c.root = peak(1);
    const int32_t n1 = c.add(-1, 1, 2);
    const int32_t n9 = c.add(-1, 9, 2);
    verify_input in = c.input();
    in.node_logits[n9] = nullptr;
    verify_params p;
    rng_state rng(1);
    const verify_result r = verify_tree(in, p, rng);
    EXPECT_EQ(r.accepted, (std::vector<int32_t>{n1}));
    EXPECT_EQ(r.token, 2);
}

TEST(verify_greedy, ignores_temperature) {
    // GREEDY picks the argmax whatever sampling.temp says (temp only matters for SAMPLING)
    tree_case c;
    c.root = peak(3);
    c.root[4] = 4.9f; // nearly as likely: a sampler would often pick it
    c.add(-1, 4, 1);
    verify_params p;
    p.policy        = VERIFY_POLICY_GREEDY;
    p.sampling.temp = 1.0f;
    for (uint64_t seed = 0; seed < 50; seed++) {
        rng_state rng(seed);
        const verify_result r = verify_tree(c.input(), p, rng);
        EXPECT_TRUE(r.accepted.empty());
        EXPECT_EQ(r.token, 3);
    }
}

TEST(verify_greedy, lossy_policies_without_lossy_ok_are_greedy) {
    // lossy_ok all 0: TOPK, ENTROPY and DIRECT fall back to the greedy rule everywhere
    tree_case c;
    c.root = peak(3);
    c.root[4] = 4.9f; // rank 2: TOPK / ENTROPY would take it where allowed
    const int32_t n4 = c.add(-1, 4, 1);
    c.add(n4, 1, 2);
    c.lossy_ok.assign(c.tree.size(), 0);
    for (verify_policy pol : {VERIFY_POLICY_TOPK, VERIFY_POLICY_ENTROPY, VERIFY_POLICY_DIRECT}) {
        const verify_result r = run(c, pol);
        EXPECT_TRUE(r.accepted.empty()) << verify_policy_name(pol);
        EXPECT_EQ(r.token, 3) << verify_policy_name(pol);
        EXPECT_TRUE(r.recovered) << verify_policy_name(pol);
    }
}

TEST(verify_greedy, policy_names_round_trip) {
    // every policy parses back from its name; unknown names are refused and leave *out alone
    for (verify_policy pol : {VERIFY_POLICY_GREEDY, VERIFY_POLICY_SAMPLING, VERIFY_POLICY_TOPK,
                              VERIFY_POLICY_ENTROPY, VERIFY_POLICY_DIRECT}) {
        verify_policy out = VERIFY_POLICY_GREEDY;
        EXPECT_TRUE(verify_policy_from_name(verify_policy_name(pol), &out));
        EXPECT_EQ(out, pol);
    }
    verify_policy out = VERIFY_POLICY_ENTROPY;
    EXPECT_FALSE(verify_policy_from_name("typical", &out));
    EXPECT_EQ(out, VERIFY_POLICY_ENTROPY);
    EXPECT_FALSE(verify_policy_is_lossy(VERIFY_POLICY_SAMPLING));
    EXPECT_TRUE(verify_policy_is_lossy(VERIFY_POLICY_ENTROPY));
}
