// Entropy-aware dynamic verification (src/verify/entropy.cpp): EfficientEdit eq. 9-10.
#include "editspec/verify.h"
#include "verify/verify-case.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace editspec;

namespace {

// logits whose softmax is probs (log p); tokens 0.. in order
std::vector<float> from_probs(const std::vector<double> & probs) {
    std::vector<float> l;
    for (double p : probs) {
        l.push_back((float) std::log(p));
    }
    return l;
}

// entropy-aware verification with top-k size k over the case's tree
struct root_case : test::verify_case {
    verify_result run(int32_t k, bool renorm = true, float temp = 0.0f, uint64_t seed = 1) const {
        verify_params p;
        p.policy         = VERIFY_POLICY_ENTROPY;
        p.entropy_k      = k;
        p.entropy_renorm = renorm;
        p.sampling.temp  = temp;
        return verify_case::run(p, seed);
    }
};

// the [0.2, 0.05, 0.05] head with 0.7 spread over 70 tokens at 0.01: renormalising changes tau
std::vector<double> long_tail() {
    std::vector<double> p = {0.2, 0.05, 0.05};
    p.resize(73, 0.01);
    return p;
}

// 8 tokens: p(0) = 0.9, p(1) = p(2) = 0.05 - 3e-9, 5 tokens at 1e-9. k = 3, renormalised: tau = 2
std::vector<float> tau_two_logits() {
    std::vector<double> p = {0.9, 0.05 - 3e-9, 0.05 - 3e-9, 1e-9, 1e-9, 1e-9, 1e-9, 1e-9};
    return from_probs(p);
}

} // namespace

TEST(verify_entropy, tau_hand_computed_k3) {
    // H = -(0.9 ln 0.9 + 2 * 0.05 ln 0.05) = 0.39439; / ln 3 = 0.35899; * 3 = 1.077 -> tau 2
    {
        const auto l = from_probs({0.9, 0.05, 0.05});
        EXPECT_NEAR(verify_entropy_norm(l.data(), 3, 3, true), 0.35899, 1e-4);
        EXPECT_EQ(verify_entropy_tau(l.data(), 3, 3, true), 2);
    }
    // H = 0.99 * 0.01005 + 2 * 0.005 * 5.2983 = 0.06293; / ln 3 = 0.05728; * 3 = 0.17 -> tau 1 (exact match)
    {
        const auto l = from_probs({0.99, 0.005, 0.005});
        EXPECT_NEAR(verify_entropy_norm(l.data(), 3, 3, true), 0.05728, 1e-4);
        EXPECT_EQ(verify_entropy_tau(l.data(), 3, 3, true), 1);
    }
    // uniform: H_norm = 1, k * H_norm = 3 (up to rounding, which must not make it 4) -> tau 3
    {
        const auto l = from_probs({1.0 / 3, 1.0 / 3, 1.0 / 3});
        EXPECT_NEAR(verify_entropy_norm(l.data(), 3, 3, true), 1.0, 1e-6);
        EXPECT_EQ(verify_entropy_tau(l.data(), 3, 3, true), 3);
    }
}

TEST(verify_entropy, tau_hand_computed_k5) {
    // [0.5 0.2 0.1 0.1 0.1]: H = 0.34657 + 0.32189 + 3 * 0.23026 = 1.35924; / ln 5 = 0.84455; * 5 = 4.22 -> 5
    {
        const auto l = from_probs({0.5, 0.2, 0.1, 0.1, 0.1});
        EXPECT_NEAR(verify_entropy_norm(l.data(), 5, 5, true), 0.84455, 1e-4);
        EXPECT_EQ(verify_entropy_tau(l.data(), 5, 5, true), 5);
    }
    // [0.8 0.05 0.05 0.05 0.05]: H = 0.17851 + 4 * 0.14979 = 0.77766; / ln 5 = 0.48319; * 5 = 2.42 -> 3
    {
        const auto l = from_probs({0.8, 0.05, 0.05, 0.05, 0.05});
        EXPECT_NEAR(verify_entropy_norm(l.data(), 5, 5, true), 0.48319, 1e-4);
        EXPECT_EQ(verify_entropy_tau(l.data(), 5, 5, true), 3);
    }
}

TEST(verify_entropy, tau_uses_only_the_top_k) {
    // the top 3 of a larger vocabulary, in any token order: [0.05 0.9 (tail) 0.05] -> the k3 example
    std::vector<double> p = {0.05, 0.9 - 4e-9, 1e-9, 0.05, 1e-9, 1e-9, 1e-9};
    const auto l = from_probs(p);
    EXPECT_NEAR(verify_entropy_norm(l.data(), (int32_t) l.size(), 3, true), 0.35899, 1e-4);
    EXPECT_EQ(verify_entropy_tau(l.data(), (int32_t) l.size(), 3, true), 2);
}

TEST(verify_entropy, renormalisation_matters) {
    // top-3 of long_tail():
    //   renormalised [2/3 1/6 1/6]: H = 0.27031 + 2 * 0.29863 = 0.86757; / ln 3 = 0.78970; * 3 = 2.37 -> 3
    //   as printed   [0.2 0.05 0.05]: H = 0.32189 + 2 * 0.14979 = 0.62146; / ln 3 = 0.56568; * 3 = 1.70 -> 2
    const auto l = from_probs(long_tail());
    const int32_t n = (int32_t) l.size();
    EXPECT_NEAR(verify_entropy_norm(l.data(), n, 3, true), 0.78970, 1e-4);
    EXPECT_EQ(verify_entropy_tau(l.data(), n, 3, true), 3);
    EXPECT_NEAR(verify_entropy_norm(l.data(), n, 3, false), 0.56568, 1e-4);
    EXPECT_EQ(verify_entropy_tau(l.data(), n, 3, false), 2);
}

TEST(verify_entropy, tau_edge_cases) {
    // k = 1: log 1 = 0, tau is 1; k beyond the vocabulary: capped at the vocabulary
    const auto l = from_probs({0.25, 0.25, 0.25, 0.25});
    EXPECT_EQ(verify_entropy_tau(l.data(), 4, 1, true), 1);
    EXPECT_EQ(verify_entropy_tau(l.data(), 4, 9, true), 4);
    // k = 2 without renormalisation can exceed 1 (0.3 0.3 of 1): tau is capped at k
    const auto m = from_probs({0.3, 0.3, 0.1, 0.1, 0.1, 0.1});
    EXPECT_GT(verify_entropy_norm(m.data(), 6, 2, false), 1.0);
    EXPECT_EQ(verify_entropy_tau(m.data(), 6, 2, false), 2);
}

TEST(verify_entropy, accepts_within_tau) {
    // tau = 2 at the root: the draft 1 (rank 2) is accepted by the lossy rule, then the bonus
    // is the target's argmax after it
    root_case c;
    c.root = tau_two_logits();
    std::vector<float> after(8, 0.0f);
    after[6] = 3.0f;
    const int32_t n1 = c.add(-1, 1, after);
    const verify_result r = c.run(3);
    EXPECT_EQ(r.n_lossy, 1);
    test::expect_verdict(r, {n1}, 6, false);
}

TEST(verify_entropy, rejects_beyond_tau) {
    // tau = 2: a draft at rank 4 is rejected; the recovered token is the argmax
    root_case c;
    c.root = tau_two_logits();
    c.add(-1, 3, std::vector<float>(8, 0.0f));
    const verify_result r = c.run(3);
    test::expect_verdict(r, {}, 0, true);
}

TEST(verify_entropy, confident_target_needs_exact_match) {
    // [0.99 .005 .005]: tau = 1, so even the rank-2 draft is rejected
    root_case c;
    c.root = from_probs({0.99, 0.005, 0.005});
    c.add(-1, 1, from_probs({0.99, 0.005, 0.005}));
    const verify_result r = c.run(3);
    test::expect_verdict(r, {}, 0, true);
}

TEST(verify_entropy, lossy_ok_respected) {
    // the same rank-2 draft as accepts_within_tau, but not lossy_ok (a Reuse draft): greedy rejects it
    root_case c;
    c.root = tau_two_logits();
    c.add(-1, 1, std::vector<float>(8, 0.0f), /*lossy=*/0);
    const verify_result r = c.run(3);
    test::expect_verdict(r, {}, 0, true);
}

TEST(verify_entropy, prefers_the_more_probable_draft) {
    // uniform-ish top 5 of [0.3 0.25 0.2 0.15 0.1]: tau = 5; drafts 3 (rank 4) and 1 (rank 2),
    // in that tree order: the more probable one, 1, is accepted
    root_case c;
    c.root = from_probs({0.3, 0.25, 0.2, 0.15, 0.1});
    ASSERT_EQ(verify_entropy_tau(c.root.data(), 5, 5, true), 5);
    c.add(-1, 3, c.root);
    const int32_t n1 = c.add(-1, 1, c.root);
    const verify_result r = c.run(5);
    EXPECT_EQ(r.accepted, (std::vector<int32_t>{n1}));
}

TEST(verify_entropy, target_choice_comes_first) {
    // a lossless draft carrying the argmax (0) beats a lossy draft at rank 2, and counts as lossless
    root_case c;
    c.root = tau_two_logits();
    c.add(-1, 1, std::vector<float>(8, 0.0f), /*lossy=*/1);
    const int32_t n0 = c.add(-1, 0, std::vector<float>(8, 0.0f), /*lossy=*/0);
    const verify_result r = c.run(3);
    EXPECT_EQ(r.accepted, (std::vector<int32_t>{n0}));
    EXPECT_EQ(r.n_lossy, 0);
}

TEST(verify_entropy, renorm_flag_changes_acceptance) {
    // long_tail(): rank-3 draft 2 is inside tau = 3 renormalised, outside tau = 2 as printed
    root_case c;
    c.root = from_probs(long_tail());
    c.add(-1, 2, std::vector<float>(73, 0.0f));
    EXPECT_EQ(c.run(3, true).accepted.size(), 1u);
    EXPECT_EQ(c.run(3, false).accepted.size(), 0u);
}

TEST(verify_entropy, chain_of_lossy_accepts) {
    // root (tau 2) -> 1 (rank 2) -> same logits, tau 2 -> 1 (rank 2) -> leaf: bonus argmax 0
    // (tokens 1 and 2 tie; 1 ranks first, so a second-level draft 2 would be rank 3 and rejected)
    root_case c;
    c.root = tau_two_logits();
    const int32_t a = c.add(-1, 1, tau_two_logits());
    const int32_t b = c.add(a, 1, tau_two_logits());
    c.add(a, 2, tau_two_logits()); // rank 3: not taken
    const verify_result r = c.run(3);
    EXPECT_EQ(r.n_lossy, 2);
    test::expect_verdict(r, {a, b}, 0, false);
}

TEST(verify_entropy, sampling_temperature_keeps_the_rule) {
    // at temp > 0 a draft inside tau is accepted on every seed (the lossy rule is deterministic);
    // one outside tau only when the target's own sample lands on it
    root_case c;
    c.root = tau_two_logits();
    c.add(-1, 1, std::vector<float>(8, 0.0f));
    for (uint64_t seed = 0; seed < 100; seed++) {
        EXPECT_EQ(c.run(3, true, 1.0f, seed).accepted.size(), 1u) << seed;
    }
}
