// Speculative sampling (src/verify/speculative-sampling.cpp): the output must have exactly the distribution of
// autoregressive sampling from sampling_dist(), for any tree.
#include "editspec/verify.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

using namespace editspec;

namespace {

constexpr int32_t N_VOCAB = 5;

// A toy target whose next-token logits depend on the last token only:
// logits after the committed prefix = ROOT, after token a = NEXT[a].
const std::vector<float> ROOT = {1.0f, 0.2f, -0.5f, 0.6f, -1.0f};
const std::vector<std::vector<float>> NEXT = {
    {0.3f, 1.2f, -0.2f, 0.0f, -0.7f},
    {-0.4f, 0.1f, 0.9f, 0.5f, 0.0f},
    {0.8f, 0.8f, -1.0f, 0.2f, 0.4f},
    {0.0f, -0.3f, 0.5f, 1.1f, -0.2f},
    {0.6f, 0.0f, 0.0f, -0.6f, 0.9f},
};

struct tree_case {
    const char *                 name;
    std::vector<std::pair<int32_t, llama_token>> nodes; // (parent, token), parents first; duplicates allowed
};

// trees over the toy vocabulary, each a reason to exist:
const std::vector<tree_case> TREES = {
    {"empty", {}},                                                      // bonus only
    {"chain", {{-1, 0}, {0, 1}, {1, 2}}},                               // Leviathan / Chen: one candidate per node
    {"chain_unlikely", {{-1, 4}, {0, 4}}},                              // the least likely token: mostly recovered
    {"wide", {{-1, 0}, {-1, 3}, {-1, 1}, {0, 1}, {0, 2}, {1, 3}, {2, 0}}}, // SpecInfer: several candidates, residuals
    {"all_root", {{-1, 0}, {-1, 1}, {-1, 2}, {-1, 3}}},                 // candidates for 4 of 5 tokens
    {"duplicates", {{-1, 3}, {-1, 3}, {0, 0}, {1, 1}}},                 // same token twice (the tree merges; be defensive)
};

struct built_tree {
    draft_tree                 tree;
    std::vector<const float *> logits; // [n_nodes]
};

built_tree build(const tree_case & tc) {
    built_tree b;
    for (auto [parent, token] : tc.nodes) {
        b.tree.nodes.push_back({token, parent, DRAFT_SOURCE_TEST});
        b.logits.push_back(NEXT[token].data());
    }
    return b;
}

// the first two emitted tokens of one generation: one verification step, and when it emitted only
// one token, the second from plain autoregressive sampling after it
std::pair<llama_token, llama_token> first_two(const built_tree & b, const sampling_params & sp, rng_state & rng) {
    verify_input in;
    in.tree        = &b.tree;
    in.n_vocab     = N_VOCAB;
    in.root_logits = ROOT.data();
    in.node_logits = b.logits;
    verify_params p;
    p.policy   = VERIFY_POLICY_SAMPLING;
    p.sampling = sp;
    const verify_result r = verify_tree(in, p, rng);
    std::vector<llama_token> out;
    for (int32_t i : r.accepted) {
        out.push_back(b.tree.nodes[i].token);
    }
    out.push_back(r.token);
    if (out.size() < 2) {
        out.push_back(sampling_sample(NEXT[out[0]].data(), N_VOCAB, sp, rng.coin()));
    }
    return {out[0], out[1]};
}

std::vector<double> dense(const std::vector<token_prob> & d) {
    std::vector<double> p(N_VOCAB, 0.0);
    for (const token_prob & tp : d) {
        p[tp.token] = tp.p;
    }
    return p;
}

// upper 1 - 3e-7 point of chi-square with df degrees of freedom (Wilson-Hilferty, z = 5)
double chi2_critical(int df) {
    const double a = 2.0 / (9.0 * df);
    return df * std::pow(1.0 - a + 5.0 * std::sqrt(a), 3.0);
}

// Pearson's chi-square of observed counts against expected probabilities; cells the target gives
// probability 0 must stay empty (a token outside top-k / top-p is a bug however rare)
void expect_matches(const std::vector<int64_t> & obs, const std::vector<double> & expected, int64_t n,
                    const std::string & what) {
    double chi2 = 0.0;
    int df = -1;
    for (size_t i = 0; i < obs.size(); i++) {
        if (expected[i] <= 0.0) {
            EXPECT_EQ(obs[i], 0) << what << ": cell " << i << " has probability 0";
            continue;
        }
        const double e = expected[i] * (double) n;
        chi2 += ((double) obs[i] - e) * ((double) obs[i] - e) / e;
        df++;
    }
    if (df < 1) {
        return;
    }
    EXPECT_LT(chi2, chi2_critical(df)) << what << ": chi2 = " << chi2 << " with df = " << df;
}

void check_distribution(const sampling_params & sp, const char * sp_name) {
    const int64_t N = 200000;
    const std::vector<double> p1 = dense(sampling_dist(ROOT.data(), N_VOCAB, sp));
    std::vector<std::vector<double>> p2(N_VOCAB);
    for (int32_t a = 0; a < N_VOCAB; a++) {
        p2[a] = dense(sampling_dist(NEXT[a].data(), N_VOCAB, sp));
    }
    for (const tree_case & tc : TREES) {
        const built_tree b = build(tc);
        rng_state rng(1234);
        std::vector<int64_t> obs1(N_VOCAB, 0), obs2(N_VOCAB * N_VOCAB, 0);
        for (int64_t i = 0; i < N; i++) {
            auto [a, c] = first_two(b, sp, rng);
            obs1[a]++;
            obs2[a * N_VOCAB + c]++;
        }
        std::vector<double> e2(N_VOCAB * N_VOCAB);
        for (int32_t a = 0; a < N_VOCAB; a++) {
            for (int32_t c = 0; c < N_VOCAB; c++) {
                e2[a * N_VOCAB + c] = p1[a] * p2[a][c];
            }
        }
        const std::string what = std::string(sp_name) + " / " + tc.name;
        expect_matches(obs1, p1, N, what + " / first token");
        expect_matches(obs2, e2, N, what + " / first two tokens");
    }
}

} // namespace

// The statistical tests: first token and first two tokens against the target's distribution.
// Breaking the residual (drawing the recovered token from p instead of p without the rejected
// drafts) or the renormalisation between siblings makes them fail by a wide margin.

// sampling_argmax (lanes, then the first index of the top value) picks the token a running best from
// token 0 picks, whatever the size, ties, NaNs, infinities and signed zeros
TEST(verify_sampling, argmax_is_the_first_running_best) {
    auto running_best = [](const std::vector<float> & l) {
        int32_t best = 0;
        for (int32_t i = 1; i < (int32_t) l.size(); i++) {
            if (l[i] > l[best]) best = i;
        }
        return best;
    };
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = INFINITY;
    std::mt19937 rng(3);
    for (int32_t trial = 0; trial < 3000; trial++) {
        const int32_t n = 1 + (int32_t) (rng() % 200) + (trial % 7 == 0 ? 32256 : 0);
        std::vector<float> l(n);
        const int32_t levels = 1 + (int32_t) (rng() % 6); // few distinct values: many ties
        for (float & x : l) x = (float) (rng() % levels) - 2.0f;
        for (int32_t k = (int32_t) (rng() % 4); k > 0; k--) {
            const float special[] = {nan, -inf, inf, -0.0f, 0.0f, nan};
            l[rng() % n] = special[rng() % 6];
        }
        if (trial % 11 == 0) l[0] = nan;
        if (trial % 13 == 0) std::fill(l.begin(), l.end(), trial % 2 ? -inf : nan);
        EXPECT_EQ(sampling_argmax(l.data(), n), running_best(l)) << "trial " << trial << ", " << n << " tokens";
    }
}

TEST(verify_sampling, distribution_softmax) {
    // temp 1, no truncation: the dense path (no sort of the vocabulary)
    sampling_params sp;
    sp.temp = 1.0f;
    check_distribution(sp, "temp 1");
}

TEST(verify_sampling, distribution_hot) {
    // a flatter distribution: more rejections, more recovered tokens
    sampling_params sp;
    sp.temp = 2.5f;
    check_distribution(sp, "temp 2.5");
}

TEST(verify_sampling, distribution_top_k) {
    // top-k truncation: the sparse path through sampling_dist; drafts outside the top-k never pass
    sampling_params sp;
    sp.temp  = 0.7f;
    sp.top_k = 3;
    check_distribution(sp, "temp 0.7 top-k 3");
}

TEST(verify_sampling, distribution_top_p) {
    // nucleus truncation, also sparse
    sampling_params sp;
    sp.temp  = 1.3f;
    sp.top_p = 0.8f;
    check_distribution(sp, "temp 1.3 top-p 0.8");
}

TEST(verify_sampling, temp_zero_is_greedy) {
    // at temperature 0 SAMPLING makes GREEDY's decisions and draws no coins
    for (const tree_case & tc : TREES) {
        const built_tree b = build(tc);
        verify_input in;
        in.tree        = &b.tree;
        in.n_vocab     = N_VOCAB;
        in.root_logits = ROOT.data();
        in.node_logits = b.logits;
        verify_params ps;
        ps.policy = VERIFY_POLICY_SAMPLING;
        rng_state rng(7), untouched(7);
        const verify_result s = verify_tree(in, ps, rng);
        const verify_result g = verify_greedy(in);
        EXPECT_EQ(s.accepted, g.accepted) << tc.name;
        EXPECT_EQ(s.token, g.token) << tc.name;
        EXPECT_EQ(s.recovered, g.recovered) << tc.name;
        EXPECT_EQ(rng.coin(), untouched.coin()) << tc.name;
    }
}

TEST(verify_target, dense_matches_sampling_dist) {
    // the dense path is the same distribution as sampling_dist, without sorting
    sampling_params sp;
    sp.temp = 0.8f;
    const std::vector<double> ref = dense(sampling_dist(ROOT.data(), N_VOCAB, sp));
    verify_target t(ROOT.data(), N_VOCAB, sp);
    for (int32_t i = 0; i < N_VOCAB; i++) {
        EXPECT_NEAR(t.p(i), ref[i], 1e-6) << i;
    }
    EXPECT_EQ(t.p(-1), 0.0);
    EXPECT_EQ(t.p(N_VOCAB), 0.0);
}

TEST(verify_target, reject_renormalises) {
    // removing tokens 0 and 3 leaves p(1) = ref(1) / (1 - ref(0) - ref(3)); rejecting twice is a no-op
    for (int32_t top_k : {0, 4}) {
        sampling_params sp;
        sp.temp  = 1.0f;
        sp.top_k = top_k;
        const std::vector<double> ref = dense(sampling_dist(ROOT.data(), N_VOCAB, sp));
        verify_target t(ROOT.data(), N_VOCAB, sp);
        t.reject(0);
        t.reject(3);
        t.reject(3);
        const double rem = 1.0 - ref[0] - ref[3];
        double sum = 0.0;
        for (int32_t i = 0; i < N_VOCAB; i++) {
            const double want = (i == 0 || i == 3) ? 0.0 : ref[i] / rem;
            EXPECT_NEAR(t.p(i), want, 1e-6) << "top_k " << top_k << " token " << i;
            sum += t.p(i);
        }
        EXPECT_NEAR(sum, 1.0, 1e-6);
        // draws never return a rejected token
        for (int c = 0; c < 1000; c++) {
            const llama_token d = t.draw((float) c / 1000.0f);
            EXPECT_NE(d, 0);
            EXPECT_NE(d, 3);
        }
    }
}

TEST(verify_target, sparse_draw_is_sampling_draw) {
    // with nothing rejected and top-k set, a coin maps to the token autoregressive sampling gives
    sampling_params sp;
    sp.temp  = 0.9f;
    sp.top_k = 4;
    const std::vector<token_prob> d = sampling_dist(ROOT.data(), N_VOCAB, sp);
    verify_target t(ROOT.data(), N_VOCAB, sp);
    for (int c = 0; c < 1000; c++) {
        const float coin = (float) c / 1000.0f;
        EXPECT_EQ(t.draw(coin), sampling_draw(d, coin)) << coin;
    }
}

TEST(verify_sampling, certain_draft_always_accepted) {
    // a draft the target gives probability ~1 is accepted on every seed
    std::vector<float> root(N_VOCAB, -30.0f);
    root[2] = 10.0f;
    draft_tree tree;
    tree.nodes.push_back({2, -1, DRAFT_SOURCE_TEST});
    verify_input in;
    in.tree        = &tree;
    in.n_vocab     = N_VOCAB;
    in.root_logits = root.data();
    in.node_logits = {NEXT[2].data()};
    verify_params p;
    p.policy        = VERIFY_POLICY_SAMPLING;
    p.sampling.temp = 1.0f;
    for (uint64_t seed = 0; seed < 200; seed++) {
        rng_state rng(seed);
        const verify_result r = verify_tree(in, p, rng);
        ASSERT_EQ(r.accepted, (std::vector<int32_t>{0}));
        EXPECT_FALSE(r.recovered);
    }
}
