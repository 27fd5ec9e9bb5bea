// Top-k verification (src/verify/topk.cpp) and top-k selection (verify_top_logits).
#include "editspec/verify.h"
#include "verify/verify-case.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace editspec;

namespace {

constexpr int32_t N_VOCAB = 10;

// logits ranking the tokens 4 > 7 > 1 > 2 > (the rest at 0)
std::vector<float> ranked() {
    std::vector<float> l(N_VOCAB, 0.0f);
    l[4] = 4.0f;
    l[7] = 3.0f;
    l[1] = 2.0f;
    l[2] = 1.0f;
    return l;
}

// every position ranks the tokens as ranked() does; nodes carry no logits of their own choosing
struct topk_case : test::verify_case {
    topk_case() { root = ranked(); }
    int32_t add(int32_t parent, llama_token token, uint8_t lossy = 1) { return verify_case::add(parent, token, ranked(), lossy); }
    verify_result run(int32_t k) const {
        verify_params p;
        p.policy = VERIFY_POLICY_TOPK;
        p.top_k  = k;
        return verify_case::run(p);
    }
};

} // namespace

TEST(verify_top_logits, order_and_ties) {
    // best first; equal logits keep the lower id first (as sampling_argmax)
    std::vector<float> l = {1.0f, 3.0f, 2.0f, 3.0f, 0.5f, 2.0f};
    const auto top = verify_top_logits(l.data(), (int32_t) l.size(), 4);
    ASSERT_EQ(top.size(), 4u);
    EXPECT_EQ(top[0].token, 1);
    EXPECT_EQ(top[1].token, 3);
    EXPECT_EQ(top[2].token, 2);
    EXPECT_EQ(top[3].token, 5);
    // k beyond the vocabulary: all of it; k <= 0: nothing
    EXPECT_EQ(verify_top_logits(l.data(), (int32_t) l.size(), 99).size(), l.size());
    EXPECT_TRUE(verify_top_logits(l.data(), (int32_t) l.size(), 0).empty());
}

TEST(verify_topk, accepts_rank_k_not_k_plus_1) {
    // top_k = 3 is {4, 7, 1}: draft 1 (rank 3) passes, draft 2 (rank 4) does not
    {
        topk_case c;
        const int32_t n = c.add(-1, 1);
        const verify_result r = c.run(3);
        EXPECT_EQ(r.n_lossy, 1);
        test::expect_verdict(r, {n}, 4, false); // the leaf's bonus: the argmax after it
    }
    {
        topk_case c;
        c.add(-1, 2);
        const verify_result r = c.run(3);
        test::expect_verdict(r, {}, 4, true);
    }
}

TEST(verify_topk, prefers_highest_probability) {
    // drafts 1 (rank 3) and 7 (rank 2), in that order: 7 is taken
    topk_case c;
    c.add(-1, 1);
    const int32_t n7 = c.add(-1, 7);
    EXPECT_EQ(c.run(3).accepted, (std::vector<int32_t>{n7}));
}

TEST(verify_topk, lossy_ok_respected) {
    // rank-2 draft 7 without lossy_ok: verified greedily, rejected
    topk_case c;
    c.add(-1, 7, /*lossy=*/0);
    EXPECT_TRUE(c.run(3).accepted.empty());
}

TEST(verify_topk, top_1_is_greedy) {
    // k = 1 only admits the argmax, which greedy admits anyway
    topk_case c;
    c.add(-1, 7);
    const int32_t n4 = c.add(-1, 4);
    const verify_result r = c.run(1);
    EXPECT_EQ(r.accepted, (std::vector<int32_t>{n4}));
    EXPECT_EQ(r.n_lossy, 0);
}
