// Direct acceptance (src/verify/direct.cpp): the first-proposed path, unverified.
#include "editspec/verify.h"
#include "verify/verify-case.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace editspec;

namespace {

constexpr int32_t N_VOCAB = 16;

// the target wants 15 at the root; direct acceptance where lossy_ok allows it
struct direct_case : test::verify_case {
    direct_case() { root = test::peak(N_VOCAB, 15); }
    verify_result run() const { return verify_case::run(VERIFY_POLICY_DIRECT); }
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
    EXPECT_EQ(r.n_lossy, 3);
    test::expect_verdict(r, {a, b, d}, 8, false);
}

TEST(verify_direct, lossless_nodes_are_verified) {
    // the path 1 -> 2 where 2 is not lossy_ok: 1 taken unverified, 2 checked greedily and rejected
    direct_case c;
    const int32_t a = c.add(-1, 1, 7);
    c.add(a, 2, 7, /*lossy=*/0);
    const verify_result r = c.run();
    test::expect_verdict(r, {a}, 7, true);
}

TEST(verify_direct, empty_tree) {
    // nothing to take: the bonus at the root
    direct_case c;
    const verify_result r = c.run();
    test::expect_verdict(r, {}, 15, false);
}
