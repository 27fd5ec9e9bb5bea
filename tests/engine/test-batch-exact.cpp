// Greedy speculative output equals autoregressive output only if every row of an n-token pass is
// bit-identical to decoding that token alone (docs/exactness.md). This checks it for every weight
// type a user downloads (tiny-256 models: rows wide enough for K-quants and the repacked kernels),
// passes of 1 to 256 tokens, after prefixes of several lengths, with 1 and 2 threads, flash
// attention off and the F16 KV cache editspec uses.
#include "common/test-util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

using namespace editspec;

namespace {

constexpr int32_t N_MAX = 256;

// every size up to 16, then sizes around the kernels' tile and block edges
const std::vector<int32_t> & batch_sizes() {
    static const std::vector<int32_t> v = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10,  11,  12,  13,  14,  15, 16,
                                           17, 23, 24, 31, 32, 33, 47, 48, 63, 64, 65, 100, 127, 128, 129, 200,
                                           255, 256};
    return v;
}

struct mismatch {
    int32_t n = 0;    // batch size
    int32_t row = -1; // first row that differs, -1 = none
    double rel = 0;   // relative L2 difference of that row's logits
    bool argmax_differs = false;
};

std::vector<float> row_of(const context & ctx, int32_t i, int32_t n_vocab) {
    return std::vector<float>(ctx.logits(i), ctx.logits(i) + n_vocab);
}

// decodes N_MAX tokens one at a time after a prefix (the reference), then every batch size from
// the same prefix, and reports the first batch whose rows are not the reference's bit for bit
mismatch first_mismatch(const model & m, int32_t n_threads, int32_t n_prefix, ggml_type kv_type) {
    context_params cp;
    cp.n_ctx = 1024;
    cp.n_threads = n_threads;
    cp.n_batch = 512;
    cp.type_k = kv_type;
    cp.type_v = kv_type;
    std::string err;
    auto ctx = context_create(m, cp, &err);
    EXPECT_TRUE(ctx) << err;
    if (!ctx) return {0, 0, 0, false};
    const int32_t n_vocab = m.facts().n_vocab;

    std::mt19937 rng(1000 + n_prefix);
    token_vec toks(n_prefix + N_MAX);
    for (auto & t : toks) t = 100 + rng() % 30000;

    batch b(512, 1);
    auto prefill = [&] {
        ctx->kv_clear();
        if (n_prefix > 0) {
            EXPECT_TRUE(context_prefill(*ctx, b, token_vec(toks.begin(), toks.begin() + n_prefix), 0, 0));
        }
    };
    prefill();
    std::vector<std::vector<float>> ref;
    for (int32_t i = 0; i < N_MAX; i++) {
        b.clear();
        b.add(toks[n_prefix + i], n_prefix + i, {0}, true);
        EXPECT_TRUE(ctx->decode(b));
        ref.push_back(row_of(*ctx, 0, n_vocab));
    }
    for (int32_t n : batch_sizes()) {
        ctx->kv_rm(0, n_prefix, -1);
        b.clear();
        for (int32_t i = 0; i < n; i++) b.add(toks[n_prefix + i], n_prefix + i, {0}, true);
        EXPECT_TRUE(ctx->decode(b));
        for (int32_t i = 0; i < n; i++) {
            const float * got = ctx->logits(i);
            if (memcmp(got, ref[i].data(), n_vocab * sizeof(float)) == 0) continue;
            double d2 = 0, r2 = 0;
            int32_t a = 0, r = 0;
            for (int32_t v = 0; v < n_vocab; v++) {
                d2 += (double) (got[v] - ref[i][v]) * (got[v] - ref[i][v]);
                r2 += (double) ref[i][v] * ref[i][v];
                if (got[v] > got[a]) a = v;
                if (ref[i][v] > ref[i][r]) r = v;
            }
            return {n, i, std::sqrt(d2 / std::max(r2, 1e-30)), a != r};
        }
    }
    return {};
}

class batch_exact : public ::testing::TestWithParam<std::string> {};

TEST_P(batch_exact, rows_match_single_token_decoding) {
    auto m = test::load_or_fail(test::typed_model_path(GetParam()));
    ASSERT_TRUE(m);
    for (int32_t n_threads : {1, 2}) {
        for (int32_t n_prefix : {0, 37, 300}) {
            const mismatch r = first_mismatch(*m, n_threads, n_prefix, GGML_TYPE_F16);
            EXPECT_EQ(r.row, -1) << GetParam() << ", " << n_threads << " threads, prefix " << n_prefix
                                 << ": a pass of " << r.n << " tokens differs first at row " << r.row
                                 << " (relative L2 " << r.rel << (r.argmax_differs ? ", argmax differs" : "")
                                 << ")";
        }
    }
}

// every type editspec promises exactness for; the K-quant mixes are llama-quantize's
INSTANTIATE_TEST_SUITE_P(types, batch_exact,
                         ::testing::Values("f32", "f16", "bf16", "q8_0", "q4_0", "q5_0", "iq4_nl", "q4_k_m",
                                           "q4_k_s", "q5_k_m", "q6_k"));

} // namespace
