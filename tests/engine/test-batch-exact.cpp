// How large a pass stays bit-identical to one-token-at-a-time decoding (flash attention off).
// The speculative decoder's greedy mode is lossless only within that size (design.md §3).
#include "common/test-util.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

using namespace editspec;

namespace {

// rows of a batch of n tokens decoded after a prefix, compared with decoding them one by one
int32_t first_inexact_row(const char * path, int32_t n, int32_t n_prefix) {
    auto m = test::load_or_fail(path);
    context_params cp;
    cp.n_ctx = 1024;
    cp.n_threads = 1;
    cp.n_batch = 512;
    std::string err;
    auto ctx = context_create(*m, cp, &err);
    EXPECT_TRUE(ctx) << err;
    std::mt19937 rng(n);
    token_vec toks(n_prefix + n);
    for (auto & t : toks) t = 100 + rng() % 30000;
    const int32_t n_vocab = m->facts().n_vocab;

    batch b(512, 1);
    EXPECT_TRUE(context_prefill(*ctx, b, token_vec(toks.begin(), toks.begin() + n_prefix), 0, 0));
    b.clear();
    for (int32_t i = 0; i < n; i++) b.add(toks[n_prefix + i], n_prefix + i, {0}, true);
    EXPECT_TRUE(ctx->decode(b));
    std::vector<std::vector<float>> batched;
    for (int32_t i = 0; i < n; i++) batched.emplace_back(ctx->logits(i), ctx->logits(i) + n_vocab);

    ctx->kv_rm(0, n_prefix, -1);
    batch one(1, 1);
    for (int32_t i = 0; i < n; i++) {
        one.clear();
        one.add(toks[n_prefix + i], n_prefix + i, {0}, true);
        EXPECT_TRUE(ctx->decode(one));
        if (memcmp(ctx->logits(0), batched[i].data(), n_vocab * sizeof(float)) != 0) {
            return i;
        }
    }
    return -1;
}

TEST(batch_exact, q8_0_rows_match_single_token_decoding) {
    for (int32_t n : {2, 8, 33, 64, 65, 100, 128, 200}) {
        const int32_t row = first_inexact_row(test::tiny_model_q8_path(), n, 37);
        EXPECT_EQ(row, -1) << "batch of " << n << " differs first at row " << row;
    }
}

TEST(batch_exact, f32_rows_match_single_token_decoding) {
    for (int32_t n : {2, 8, 33, 64, 65, 100, 128, 200}) {
        const int32_t row = first_inexact_row(test::tiny_model_path(), n, 37);
        EXPECT_EQ(row, -1) << "batch of " << n << " differs first at row " << row;
    }
}

} // namespace
