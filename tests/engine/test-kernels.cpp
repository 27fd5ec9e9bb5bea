// The patched CPU mat-mul kernels on shapes the random models miss (issue 71, item 3): every column of a
// batched product equals that column multiplied alone, bit for bit, for every weight type editspec
// promises exactness for, with K of an odd number of blocks, row counts that are not multiples of any
// tile (1, 7, 37, 67), batches of 2 to 33 columns, and 1 to 3 threads. test-batch-exact checks whole
// models; this checks the matrix product alone, where a tile's edge or a thread's share of the rows is
// what differs (ggml's CPU backend, the graph as libllama builds it: ggml_mul_mat of the weights by f32
// activations).
#include <ggml-cpu.h>
#include <ggml.h>

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

// out [n_cols][n_rows] = W (type, n_rows x k, from w) times X (f32, k x n_cols), on n_threads
std::vector<float> mul_mat(ggml_type type, const std::vector<float> & w, const float * x, int64_t k, int64_t n_rows,
                           int64_t n_cols, int n_threads) {
    const size_t bytes = ggml_row_size(type, k) * n_rows + ggml_row_size(GGML_TYPE_F32, k) * n_cols +
                         sizeof(float) * n_rows * n_cols + 16 * ggml_tensor_overhead() + ggml_graph_overhead() + (1 << 20);
    ggml_init_params ip = {bytes, nullptr, false};
    ggml_context * ctx = ggml_init(ip);
    EXPECT_NE(ctx, nullptr);
    if (!ctx) return {};
    ggml_tensor * W = ggml_new_tensor_2d(ctx, type, k, n_rows);
    ggml_tensor * X = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, n_cols);
    ggml_quantize_chunk(type, w.data(), W->data, 0, n_rows, k, nullptr);
    memcpy(X->data, x, sizeof(float) * k * n_cols);
    ggml_tensor * out = ggml_mul_mat(ctx, W, X);
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    EXPECT_EQ(ggml_graph_compute_with_ctx(ctx, gf, n_threads), GGML_STATUS_SUCCESS);
    std::vector<float> r((size_t) (n_rows * n_cols));
    memcpy(r.data(), out->data, r.size() * sizeof(float));
    ggml_free(ctx);
    return r;
}

struct kernel_case {
    ggml_type type;
    std::vector<int64_t> ks; // K: an odd number of the type's blocks
};

class kernels_odd : public ::testing::TestWithParam<kernel_case> {};

TEST_P(kernels_odd, batched_columns_equal_columns_alone) {
    const kernel_case kc = GetParam();
    std::mt19937 rng(71);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int64_t k : kc.ks) {
        for (int64_t n_rows : {1, 7, 37, 67}) {
            std::vector<float> w((size_t) (k * n_rows));
            for (float & v : w) v = nd(rng) * 0.1f;
            const int64_t max_cols = 33;
            std::vector<float> x((size_t) (k * max_cols));
            for (float & v : x) v = nd(rng);
            for (int n_threads : {1, 2, 3}) {
                // each column alone: the reference a one-token decode computes
                std::vector<std::vector<float>> alone;
                for (int64_t c = 0; c < max_cols; c++) alone.push_back(mul_mat(kc.type, w, x.data() + c * k, k, n_rows, 1, n_threads));
                for (int64_t n_cols : {2, 3, 7, 16, 33}) {
                    const std::vector<float> got = mul_mat(kc.type, w, x.data(), k, n_rows, n_cols, n_threads);
                    ASSERT_EQ(got.size(), (size_t) (n_rows * n_cols));
                    for (int64_t c = 0; c < n_cols; c++) {
                        const bool same = memcmp(got.data() + c * n_rows, alone[c].data(), sizeof(float) * n_rows) == 0;
                        ASSERT_TRUE(same) << ggml_type_name(kc.type) << ": K " << k << ", " << n_rows << " rows, column " << c
                                          << " of " << n_cols << ", " << n_threads << " threads: "
                                          << got[c * n_rows] << " against " << alone[c][0] << " alone (row 0)";
                    }
                }
            }
        }
    }
}

// the types of test-batch-exact's models (the K-quant mixes are made of Q4_K, Q5_K, Q6_K and Q8_0)
INSTANTIATE_TEST_SUITE_P(types, kernels_odd,
                         ::testing::Values(kernel_case{GGML_TYPE_F32, {224, 389}}, kernel_case{GGML_TYPE_F16, {224, 389}},
                                           kernel_case{GGML_TYPE_BF16, {224, 390}}, kernel_case{GGML_TYPE_Q8_0, {224, 416}},
                                           kernel_case{GGML_TYPE_Q4_0, {224, 416}}, kernel_case{GGML_TYPE_Q5_0, {224, 416}},
                                           kernel_case{GGML_TYPE_IQ4_NL, {224, 416}}, kernel_case{GGML_TYPE_Q4_K, {768, 1280}},
                                           kernel_case{GGML_TYPE_Q5_K, {768, 1280}}, kernel_case{GGML_TYPE_Q6_K, {768, 1280}}),
                         [](const ::testing::TestParamInfo<kernel_case> & i) { return std::string(ggml_type_name(i.param.type)); });

} // namespace
