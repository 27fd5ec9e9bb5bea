// Direct acceptance (src/verify/direct.cpp): the first-proposed path, unverified.
#include "editspec/verify.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace editspec;

namespace {

constexpr int32_t N_VOCAB = 16;

std::vector<float> peak(llama_token t) {
    std::vector<float> l(N_VOCAB, 0.0f);
    l[t] = 5.0f;
    return l;
}

struct direct_case {
    std::vector<float>              root = peak(15);
    draft_tree                      tree;
    std::vector<std::vector<float>> node;
    std::vector<uint8_t>            lossy_ok;

    int32_t add(int32_t parent, llama_token token, llama_token target_next, uint8_t lossy = 1) {
        tree.nodes.push_back({token, parent, DRAFT_SOURCE_MODEL, NAN});
        node.push_back(peak(target_next));
        lossy_ok.push_back(lossy);
        return tree.size() - 1;
    }

    verify_result run() const {
        verify_input in;
        in.tree        = &tree;
        in.n_vocab     = N_VOCAB;
        in.root_logits = root.data();
        for (const auto & l : node) {
            in.node_logits.push_back(l.data());
        }
        in.lossy_ok = lossy_ok;
        verify_params p;
        p.policy = VERIFY_POLICY_DIRECT;
        rng_state rng(1);
        return verify_tree(in, p, rng);
    }
};

} // namespace

TEST(verify_direct, follows_first_path_to_leaf) {
    //     root ── 1 ── 2 ── 3        the target wants 15 everywhere else; direct ignores it and
    //          │    └─ 9             takes 1 2 3, then the target's own token after 3 (bonus 8)
    //          └─ 15
    direct_case c;
    const int32_t a = c.add(-1, 1, 15);
    const int32_t b = c.add(a, 2, 15);
    c.add(a, 9, 15);
    const int32_t d = c.add(b, 3, 8);
    c.add(-1, 15, 15);
    const verify_result r = c.run();
    EXPECT_EQ(r.accepted, (std::vector<int32_t>{a, b, d}));
    EXPECT_EQ(r.n_lossy, 3);
    EXPECT_EQ(r.token, 8);
    EXPECT_FALSE(r.recovered);
}

TEST(verify_direct, lossless_nodes_are_verified) {
    // the path 1 -> 2 where 2 is not lossy_ok: 1 taken unverified, 2 checked greedily and rejected
    direct_case c;
    const int32_t a = c.add(-1, 1, 7);
    c.add(a, 2, 7, /*lossy=*/0);
    const verify_result r = c.run();
    EXPECT_EQ(r.accepted, (std::vector<int32_t>{a}));
    EXPECT_EQ(r.token, 7);
    EXPECT_TRUE(r.recovered);
}

TEST(verify_direct, empty_tree) {
    // nothing to take: the bonus at the root
    direct_case c;
    const verify_result r = c.run();
    EXPECT_TRUE(r.accepted.empty());
    EXPECT_EQ(r.token, 15);
    EXPECT_FALSE(r.recovered);
}
