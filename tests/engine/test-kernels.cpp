// The patched CPU mat-mul kernels on shapes the random models miss (issue 71, item 3): every column of a
// batched product equals that column multiplied alone, bit for bit, for every weight type editspec
// promises exactness for, with K of an odd number of blocks, row counts that are not multiples of any
// tile (1, 7, 37, 67), batches of 2 to 33 columns, and 1 to 3 threads. test-batch-exact checks whole
// models; this checks the matrix product alone, where a tile's edge or a thread's share of the rows is
// what differs (ggml's CPU backend, the graph as libllama builds it: ggml_mul_mat of the weights by f32
// activations). And the patched flash attention over an F16 or Q8_0 cache laid out as libllama's (a cell's heads
// side by side): every query row of a pass equals that row alone, bit for bit, over head sizes that
// take each of the kernel's paths, grouped-query heads, masked holes and partial blocks.
#include <ggml-alloc.h>
#include <ggml-backend.h>
#include <ggml-cpu.h>
#include <ggml.h>

#include "editspec/exactness.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cmath>
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

// FNV-1a over the floats' bits: two builds of ggml-cpu compared product by product
uint64_t digest_add(uint64_t h, const std::vector<float> & v) {
    for (float f : v) {
        uint32_t u;
        memcpy(&u, &f, 4);
        h = (h ^ u) * 1099511628211ull;
    }
    return h;
}

// weights w (n_rows x k, small as a model's) and activations x (max_cols columns of k), normal
void random_operands(std::mt19937 & rng, int64_t k, int64_t n_rows, int64_t max_cols, std::vector<float> & w,
                     std::vector<float> & x) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    w.resize((size_t) (k * n_rows));
    for (float & v : w) v = nd(rng) * 0.1f;
    x.resize((size_t) (k * max_cols));
    for (float & v : x) v = nd(rng);
}

struct kernel_case {
    ggml_type type;
    std::vector<int64_t> ks; // K: an odd number of the type's blocks
};

class kernels_odd : public ::testing::TestWithParam<kernel_case> {};

TEST_P(kernels_odd, batched_columns_equal_columns_alone) {
    const kernel_case kc = GetParam();
    uint64_t h = 1469598103934665603ull; // the digest of every product (EDITSPEC_KERNELS_DIGEST, below)
    std::mt19937 rng(71);
    for (int64_t k : kc.ks) {
        for (int64_t n_rows : {1, 7, 37, 67}) {
            const int64_t max_cols = 33;
            std::vector<float> w, x;
            random_operands(rng, k, n_rows, max_cols, w, x);
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
                    h = digest_add(h, got);
                }
            }
        }
    }
    if (getenv("EDITSPEC_KERNELS_DIGEST")) printf("digest %s %016llx\n", ggml_type_name(kc.type), (unsigned long long) h);
}

// each output close to the dequantized weights times the activations, in double (a kernel that unpacks
// a block wrong is batch-invariant and wrong; the activations' 8-bit quantization is the error allowed, a
// few thousandths of the terms' size). got: [cols][n_rows]
void expect_products(ggml_type type, const std::vector<float> & w, const std::vector<float> & x, int64_t k, int64_t n_rows,
                     int64_t cols, const std::vector<float> & got, const std::string & what) {
    const auto * traits = ggml_get_type_traits(type);
    ASSERT_TRUE(type == GGML_TYPE_F32 || traits->to_float);
    std::vector<uint8_t> q(ggml_row_size(type, k) * n_rows); // the weights as the kernel sees them
    ggml_quantize_chunk(type, w.data(), q.data(), 0, n_rows, k, nullptr);
    std::vector<float> deq((size_t) (k * n_rows));
    for (int64_t r = 0; r < n_rows; r++) {
        if (type == GGML_TYPE_F32) memcpy(deq.data() + r * k, q.data() + ggml_row_size(type, k) * r, sizeof(float) * k);
        else traits->to_float(q.data() + ggml_row_size(type, k) * r, deq.data() + r * k, k);
    }
    ASSERT_EQ(got.size(), (size_t) (n_rows * cols));
    for (int64_t c = 0; c < cols; c++) {
        for (int64_t r = 0; r < n_rows; r++) {
            double ref = 0.0, size = 0.0;
            for (int64_t i = 0; i < k; i++) {
                const double t = (double) deq[r * k + i] * x[c * k + i];
                ref += t;
                size += t * t;
            }
            ASSERT_NEAR(got[c * n_rows + r], ref, 0.05 * std::sqrt(size) + 1e-6)
                << ggml_type_name(type) << " " << what << ": K " << k << ", row " << r << ", column " << c << " of " << cols;
        }
    }
}

// and every product is the product it stands for
TEST_P(kernels_odd, products_are_the_dequantized_weights_times_the_activations) {
    const kernel_case kc = GetParam();
    std::mt19937 rng(72);
    for (int64_t k : kc.ks) {
        const int64_t n_rows = 37, n_cols = 7;
        std::vector<float> w, x;
        random_operands(rng, k, n_rows, n_cols, w, x);
        for (int n_threads : {1, 2}) {
            for (int64_t cols : {(int64_t) 1, n_cols}) {
                expect_products(kc.type, w, x, k, n_rows, cols, mul_mat(kc.type, w, x.data(), k, n_rows, cols, n_threads),
                                std::to_string(n_threads) + " threads");
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

// ggml-cpu's repacked weights (the CPU_REPACK buffer type, which libllama loads Q4_0, Q4_K and IQ4_NL
// matrices of 8k rows into on x86, and on AVX512-VNNI Q8_0, Q5_0, Q4_0 and Q4_K of 16k rows): out
// [n_cols][n_rows] as mul_mat above, through the backend, so ggml's repack kernels (and the patch's
// kernels on AVX512-VNNI) compute it. Empty when the CPU
// backend has no repack buffer type or does not repack this type and shape (checked by the caller).
struct repacked {
    ggml_backend_buffer_type_t buft = nullptr;
    ggml_backend_t             cpu  = nullptr;

    repacked() {
        ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
        if (!dev) return;
        ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
        auto get_extra = (ggml_backend_buffer_type_t * (*) (ggml_backend_dev_t))
            ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts");
        for (ggml_backend_buffer_type_t * b = get_extra ? get_extra(dev) : nullptr; b && *b; b++) {
            if (std::string(ggml_backend_buft_name(*b)) == "CPU_REPACK") buft = *b;
        }
        cpu = ggml_backend_cpu_init();
    }
    ~repacked() {
        if (cpu) ggml_backend_free(cpu);
    }

    // false when the product did not run on repacked weights
    bool mul_mat(ggml_type type, const std::vector<float> & w, const float * x, int64_t k, int64_t n_rows, int64_t n_cols,
                 int n_threads, std::vector<float> & r) {
        ggml_init_params ip = {16 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
        ggml_context * cw = ggml_init(ip);
        ggml_context * cx = ggml_init(ip);
        ggml_tensor * W = ggml_new_tensor_2d(cw, type, k, n_rows);
        ggml_tensor * X = ggml_new_tensor_2d(cx, GGML_TYPE_F32, k, n_cols);
        ggml_tensor * out = ggml_mul_mat(cx, W, X);
        ggml_backend_buffer_t bw = ggml_backend_alloc_ctx_tensors_from_buft(cw, buft);
        ggml_backend_buffer_t bx = ggml_backend_alloc_ctx_tensors_from_buft(cx, ggml_backend_cpu_buffer_type());
        bool ok = bw && bx && ggml_backend_dev_supports_op(ggml_backend_get_device(cpu), out) &&
                  ggml_backend_buft_is_host(ggml_backend_buffer_get_type(bx));
        // the repack buffer takes the matrix only where a kernel does (type, rows a multiple of 8, ...)
        ok = ok && ggml_backend_buffer_get_type(bw) == buft && W->extra != nullptr;
        if (ok) {
            std::vector<uint8_t> q(ggml_row_size(type, k) * n_rows);
            ggml_quantize_chunk(type, w.data(), q.data(), 0, n_rows, k, nullptr);
            ggml_backend_tensor_set(W, q.data(), 0, q.size());
            ggml_backend_tensor_set(X, x, 0, sizeof(float) * k * n_cols);
            ggml_cgraph * gf = ggml_new_graph(cx);
            ggml_build_forward_expand(gf, out);
            ggml_backend_cpu_set_n_threads(cpu, n_threads);
            ok = ggml_backend_graph_compute(cpu, gf) == GGML_STATUS_SUCCESS;
            r.resize((size_t) (n_rows * n_cols));
            ggml_backend_tensor_get(out, r.data(), 0, r.size() * sizeof(float));
        }
        if (bw) ggml_backend_buffer_free(bw);
        if (bx) ggml_backend_buffer_free(bx);
        ggml_free(cw);
        ggml_free(cx);
        return ok;
    }
};

class kernels_repacked : public ::testing::TestWithParam<kernel_case> {};

// every column of a batched product on repacked weights equals that column alone, bit for bit: rows in
// tiles of 4 or 8 and the rows left over (2, 3, 5, 7, 16, 33 columns), weight rows of 1 to 5 blocks of 16
// (24: 3 of 8, which the 16-row layouts leave to ggml's own), 1 to 3 threads. EDITSPEC_KERNELS_DIGEST=1 prints a digest of every product, to compare two builds of ggml-cpu
// (LD_PRELOAD): a new kernel that must give the old one's results bit for bit.
TEST_P(kernels_repacked, batched_columns_equal_columns_alone) {
    const kernel_case kc = GetParam();
    repacked rp;
    if (!rp.buft || !rp.cpu) GTEST_SKIP() << "ggml-cpu has no CPU_REPACK buffer type here";
    uint64_t h = 1469598103934665603ull;
    std::mt19937 rng(73);
    int n_run = 0;
    for (int64_t k : kc.ks) {
        for (int64_t n_rows : {16, 24, 80}) {
            const int64_t max_cols = 33;
            std::vector<float> w, x;
            random_operands(rng, k, n_rows, max_cols, w, x);
            for (int n_threads : {1, 2, 3}) {
                std::vector<std::vector<float>> alone(max_cols);
                bool ran = true;
                for (int64_t c = 0; c < max_cols && ran; c++) ran = rp.mul_mat(kc.type, w, x.data() + c * k, k, n_rows, 1, n_threads, alone[c]);
                if (!ran) continue; // this type or shape is not repacked on this CPU
                n_run++;
                for (int64_t n_cols : {2, 3, 5, 7, 16, 33}) {
                    std::vector<float> got;
                    ASSERT_TRUE(rp.mul_mat(kc.type, w, x.data(), k, n_rows, n_cols, n_threads, got));
                    for (int64_t c = 0; c < n_cols; c++) {
                        const bool same = memcmp(got.data() + c * n_rows, alone[c].data(), sizeof(float) * n_rows) == 0;
                        ASSERT_TRUE(same) << ggml_type_name(kc.type) << " repacked: K " << k << ", " << n_rows << " rows, column "
                                          << c << " of " << n_cols << ", " << n_threads << " threads: " << got[c * n_rows]
                                          << " against " << alone[c][0] << " alone (row 0)";
                    }
                    h = digest_add(h, got);
                }
            }
        }
    }
    if (n_run == 0) GTEST_SKIP() << ggml_type_name(kc.type) << " is not repacked on this CPU";
    if (getenv("EDITSPEC_KERNELS_DIGEST")) printf("digest %s %016llx\n", ggml_type_name(kc.type), (unsigned long long) h);
}

// and every product on repacked weights is the product it stands for (a layout unpacked wrong)
TEST_P(kernels_repacked, products_are_the_dequantized_weights_times_the_activations) {
    const kernel_case kc = GetParam();
    repacked rp;
    if (!rp.buft || !rp.cpu) GTEST_SKIP() << "ggml-cpu has no CPU_REPACK buffer type here";
    std::mt19937 rng(74);
    int n_run = 0;
    for (int64_t k : kc.ks) {
        const int64_t n_rows = 48, n_cols = 11;
        std::vector<float> w, x;
        random_operands(rng, k, n_rows, n_cols, w, x);
        for (int64_t cols : {(int64_t) 1, n_cols}) {
            std::vector<float> got;
            if (!rp.mul_mat(kc.type, w, x.data(), k, n_rows, cols, 2, got)) continue;
            n_run++;
            expect_products(kc.type, w, x, k, n_rows, cols, got, "repacked");
        }
    }
    if (n_run == 0) GTEST_SKIP() << ggml_type_name(kc.type) << " is not repacked on this CPU";
}

// the types ggml-cpu repacks on x86 (AVX2 and up; Q8_0, Q5_0, Q5_K and Q6_K on AVX512-VNNI)
INSTANTIATE_TEST_SUITE_P(types, kernels_repacked,
                         ::testing::Values(kernel_case{GGML_TYPE_Q8_0, {224, 416}}, kernel_case{GGML_TYPE_Q5_0, {224, 416}},
                                           kernel_case{GGML_TYPE_Q4_0, {224, 416}}, kernel_case{GGML_TYPE_IQ4_NL, {224, 416}},
                                           kernel_case{GGML_TYPE_Q4_K, {768, 1280}}, kernel_case{GGML_TYPE_Q5_K, {768, 1280}},
                                           kernel_case{GGML_TYPE_Q6_K, {768, 1280}}),
                         [](const ::testing::TestParamInfo<kernel_case> & i) { return std::string(ggml_type_name(i.param.type)); });

// ggml-base's reference quantizer (ggml-quants.h, not among the installed headers; block_q8_K * there)
extern "C" void quantize_row_q8_K_ref(const float * x, void * y, int64_t k);

// ----------------------------------------------------------------------------
// the activations' Q8_K quantization (every K-quant product's other side): the CPU's from_float (the
// patch's AVX512 one, item 14) gives ggml's reference quantizer's every bit, on rows of every kind a
// model sends: normal values, both signs of the largest magnitude (the first one sets the scale's sign),
// a block of zeros, values far apart in size, and a row of one value
TEST(kernels_quantize, q8_K_rows_equal_the_reference) {
    const int64_t k = 8 * 256;
    const ggml_from_float_t cpu = ggml_get_type_traits_cpu(GGML_TYPE_Q8_K)->from_float;
    const auto ref = quantize_row_q8_K_ref;
    ASSERT_NE(cpu, nullptr);
    std::mt19937 rng(76);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const size_t bytes = ggml_row_size(GGML_TYPE_Q8_K, k);
    const size_t block = ggml_type_size(GGML_TYPE_Q8_K);
    for (int kind = 0; kind < 6; kind++) {
        for (int rep = 0; rep < 50; rep++) {
            std::vector<float> x((size_t) k);
            for (float & v : x) v = nd(rng) * (kind == 3 ? std::pow(10.0f, (float) (rng() % 9) - 4.0f) : 1.0f);
            if (kind == 1) { // the largest magnitude with both signs, the negative first or the positive first
                const float m = 9.5f;
                x[17] = rep % 2 ? -m : m;
                x[200] = rep % 2 ? m : -m;
            }
            if (kind == 2) std::fill(x.begin() + 256, x.begin() + 512, 0.0f); // a block of zeros
            if (kind == 4) std::fill(x.begin(), x.end(), rep % 2 ? -0.37f : 0.37f);
            if (kind == 5) for (float & v : x) v = std::round(v * 4.0f) / 4.0f; // ties on the grid
            std::vector<uint8_t> a(bytes, 0xAB), b(bytes, 0xAB);
            cpu(x.data(), a.data(), k);
            ref(x.data(), b.data(), k);
            for (int64_t i = 0; i < k / 256; i++) {
                // a block of zeros: d and qs (the reference leaves its sums as they were, and so does the kernel)
                ASSERT_EQ(memcmp(a.data() + i * block, b.data() + i * block, block), 0)
                    << "kind " << kind << ", row " << rep << ", block " << i << ": not the reference's bytes";
            }
        }
    }
}

// ----------------------------------------------------------------------------
// flash attention

struct fa_shape {
    int64_t d;         // the head size (K and V)
    int64_t n_head;    // query heads
    int64_t n_head_kv; // KV heads (grouped-query attention when fewer)
    int64_t n_kv;      // cells
    ggml_type kv = GGML_TYPE_F16; // the cache's type: F16, or Q8_0 (-ctk/-ctv q8_0; d a multiple of 32)
};

// out [n_tokens][n_head][d] = flash attention of q ([n_tokens][n_head][d], f32) over the cache k, v
// ([n_kv][n_head_kv][d], given as f16, held as sh.kv: a cell's heads side by side, as in libllama's
// cache) with mask ([n_tokens][n_kv], f16), as libllama builds it (q and the cache permuted to heads-major)
std::vector<float> flash_attn(const fa_shape & sh, const float * q, const std::vector<ggml_fp16_t> & k,
                              const std::vector<ggml_fp16_t> & v, const ggml_fp16_t * mask, int64_t n_tokens, int n_threads) {
    const size_t bytes = sizeof(float) * sh.d * sh.n_head * n_tokens * 2 + 2 * k.size() * sizeof(ggml_fp16_t) +
                         sizeof(ggml_fp16_t) * sh.n_kv * n_tokens + 16 * ggml_tensor_overhead() + ggml_graph_overhead() + (1 << 20) +
                         // the work buffer's share for the segments' sums (ggml-batch-invariant.patch, item 6)
                         sizeof(float) * n_tokens * sh.n_head * (sh.n_kv / 256 + 2) * (sh.d + 2);
    ggml_init_params ip = {bytes, nullptr, false};
    ggml_context * ctx = ggml_init(ip);
    EXPECT_NE(ctx, nullptr);
    if (!ctx) return {};
    ggml_tensor * Q = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, sh.d, sh.n_head, n_tokens);
    ggml_tensor * K = ggml_new_tensor_3d(ctx, sh.kv, sh.d, sh.n_head_kv, sh.n_kv);
    ggml_tensor * V = ggml_new_tensor_3d(ctx, sh.kv, sh.d, sh.n_head_kv, sh.n_kv);
    ggml_tensor * M = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, sh.n_kv, n_tokens);
    memcpy(Q->data, q, sizeof(float) * sh.d * sh.n_head * n_tokens);
    for (auto [t, x] : {std::pair{K, &k}, std::pair{V, &v}}) {
        if (sh.kv == GGML_TYPE_F16) {
            memcpy(t->data, x->data(), x->size() * sizeof(ggml_fp16_t));
            continue;
        }
        std::vector<float> f(x->size());
        for (size_t i = 0; i < f.size(); i++) f[i] = ggml_fp16_to_fp32((*x)[i]);
        ggml_quantize_chunk(sh.kv, f.data(), t->data, 0, sh.n_kv * sh.n_head_kv, sh.d, nullptr);
    }
    memcpy(M->data, mask, sizeof(ggml_fp16_t) * sh.n_kv * n_tokens);
    ggml_tensor * out = ggml_flash_attn_ext(ctx, ggml_permute(ctx, Q, 0, 2, 1, 3), ggml_permute(ctx, K, 0, 2, 1, 3),
                                            ggml_permute(ctx, V, 0, 2, 1, 3), M, 1.0f / sqrtf((float) sh.d), 0.0f, 0.0f);
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    EXPECT_EQ(ggml_graph_compute_with_ctx(ctx, gf, n_threads), GGML_STATUS_SUCCESS);
    std::vector<float> r((size_t) (sh.d * sh.n_head * n_tokens));
    memcpy(r.data(), out->data, r.size() * sizeof(float));
    ggml_free(ctx);
    return r;
}

class kernels_flash_attn : public ::testing::TestWithParam<fa_shape> {};

// the rows of a pass of n_tokens (the last n_tokens positions, each seeing the cells up to its own, and
// not the holes: another sequence's cells, holding NaN that must never be multiplied) against each
// token's row computed alone: 1 to 70 tokens (tiles of rows and what is left over), 1 to 3 threads.
// (EDITSPEC_STOCK_FLASH_ATTN=1, ggml's own paths, fails it: 64+ rows go through its tiled kernel, and a
// single row over 512+ cells is split across the threads.)
TEST_P(kernels_flash_attn, batched_rows_equal_rows_alone) {
    const fa_shape sh = GetParam();
    std::mt19937 rng(74);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<ggml_fp16_t> k((size_t) (sh.n_kv * sh.n_head_kv * sh.d)), v(k.size());
    std::vector<bool> hole((size_t) sh.n_kv);
    for (int64_t c = 0; c < sh.n_kv; c++) hole[c] = c % 7 == 3;
    for (size_t i = 0; i < k.size(); i++) {
        const bool h = hole[i / (size_t) (sh.n_head_kv * sh.d)];
        k[i] = ggml_fp32_to_fp16(h ? NAN : nd(rng));
        v[i] = ggml_fp32_to_fp16(h ? NAN : nd(rng));
    }
    const int64_t max_tokens = 70;
    std::vector<float> q((size_t) (max_tokens * sh.n_head * sh.d));
    for (float & x : q) x = nd(rng);
    uint64_t h = 1469598103934665603ull; // every pass's rows (EDITSPEC_KERNELS_DIGEST: two builds compared)
    for (int64_t n_tokens : {1, 2, 5, 33, 40, 70}) {
        // token t at position n_kv - n_tokens + t
        std::vector<ggml_fp16_t> mask((size_t) (n_tokens * sh.n_kv));
        for (int64_t t = 0; t < n_tokens; t++) {
            for (int64_t c = 0; c < sh.n_kv; c++) {
                const bool seen = !hole[c] && c <= sh.n_kv - n_tokens + t;
                mask[t * sh.n_kv + c] = ggml_fp32_to_fp16(seen ? 0.0f : -INFINITY);
            }
        }
        for (int n_threads : {1, 2, 3}) {
            const std::vector<float> got = flash_attn(sh, q.data(), k, v, mask.data(), n_tokens, n_threads);
            const size_t row = (size_t) (sh.n_head * sh.d);
            ASSERT_EQ(got.size(), row * n_tokens);
            h = digest_add(h, got);
            if (sh.kv != GGML_TYPE_F16 && n_threads == 1) {
                // a quantized cache holds other values: near the F16 cache's answer (a kernel that read the
                // blocks' scales or values wrong would be batch-invariant and wrong)
                fa_shape f16 = sh;
                f16.kv = GGML_TYPE_F16;
                const std::vector<float> ref = flash_attn(f16, q.data(), k, v, mask.data(), n_tokens, 1);
                double d2 = 0, r2 = 0;
                for (size_t i = 0; i < ref.size(); i++) {
                    d2 += (double) (got[i] - ref[i]) * (got[i] - ref[i]);
                    r2 += (double) ref[i] * ref[i];
                }
                ASSERT_LT(sqrt(d2 / r2), 0.02) << ggml_type_name(sh.kv) << " cache, " << n_tokens << " tokens: relative L2 from F16";
            }
            for (int64_t t = 0; t < n_tokens; t++) {
                const std::vector<float> alone = flash_attn(sh, q.data() + t * row, k, v, mask.data() + t * sh.n_kv, 1, n_threads);
                ASSERT_EQ(alone.size(), row);
                for (size_t i = 0; i < row; i++) ASSERT_TRUE(std::isfinite(alone[i])) << "a masked cell was multiplied";
                const bool same = memcmp(got.data() + t * row, alone.data(), sizeof(float) * row) == 0;
                ASSERT_TRUE(same) << "head size " << sh.d << ", " << sh.n_head << "/" << sh.n_head_kv << " heads, " << sh.n_kv
                                  << " cells: token " << t << " of " << n_tokens << ", " << n_threads
                                  << " threads: " << got[t * row] << " against " << alone[0] << " alone";
            }
        }
    }
    if (getenv("EDITSPEC_KERNELS_DIGEST")) {
        printf("digest flash d%lld h%lld/%lld c%lld %s %016llx\n", (long long) sh.d, (long long) sh.n_head, (long long) sh.n_head_kv,
               (long long) sh.n_kv, ggml_type_name(sh.kv), (unsigned long long) h);
    }
}

// a unified cache of regions (patches/llama-kv-regions.patch, the step engine's layout): three
// sequences, each in a region of 256 cells of its own (free cells hold NaN), their passes' rows in one
// batch, interleaved, against each sequence's rows over a cache of its own (its region's cells at 0):
// the same bits, on 1-3 threads (a row skips the blocks its mask drops whole, and a region starts on
// a block, so its cells fall into the blocks they fill alone)
// CI's AVX2 run (tests/CMakeLists.txt: test-kernels-avx2, the AVX2 ggml-cpu of scripts/setup-llama.sh
// loaded in place of the native one) must run that library's paths: a preload that did not take would
// pass every test above on the native kernels
TEST(kernels_paths, the_avx2_library_when_asked) {
    if (!getenv("EDITSPEC_EXPECT_AVX2")) GTEST_SKIP() << "for test-kernels-avx2 (EDITSPEC_EXPECT_AVX2=1)";
    EXPECT_TRUE(ggml_cpu_has_avx2());
    EXPECT_TRUE(ggml_cpu_has_fma());
    EXPECT_FALSE(ggml_cpu_has_avx512());
    EXPECT_FALSE(ggml_cpu_has_avx512_vnni());
    EXPECT_FALSE(ggml_cpu_has_avx_vnni());
}

TEST(kernels_flash_attn_regions, rows_of_several_regions_equal_each_alone) {
    const int64_t region = 256;
    const int64_t len[3] = {100, 256, 37};  // cells each sequence holds, its pass the last n_pass of them
    const int64_t n_pass[3] = {3, 1, 33};
    for (const fa_shape & base : {fa_shape{128, 4, 2, 0}, fa_shape{64, 2, 2, 0}, fa_shape{128, 4, 2, 0, GGML_TYPE_Q8_0}}) {
        fa_shape sh = base;
        sh.n_kv = 3 * region;
        const int64_t cell = sh.n_head_kv * sh.d, row = sh.n_head * sh.d;
        std::mt19937 rng(75);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        std::vector<ggml_fp16_t> k((size_t) (sh.n_kv * cell)), v(k.size());
        for (int64_t c = 0; c < sh.n_kv; c++) {
            const bool used = c % region < len[c / region];
            for (int64_t i = 0; i < cell; i++) {
                k[(size_t) (c * cell + i)] = ggml_fp32_to_fp16(used ? nd(rng) : NAN);
                v[(size_t) (c * cell + i)] = ggml_fp32_to_fp16(used ? nd(rng) : NAN);
            }
        }
        std::vector<std::pair<int, int64_t>> rows; // (sequence, position), interleaved as a step lays them
        for (int64_t i = 0; i < 33; i++) {
            for (int r = 0; r < 3; r++) {
                if (i < n_pass[r]) rows.push_back({r, len[r] - n_pass[r] + i});
            }
        }
        const int64_t n_rows = (int64_t) rows.size();
        std::vector<float> q((size_t) (n_rows * row));
        for (float & x : q) x = nd(rng);
        std::vector<ggml_fp16_t> mask((size_t) (n_rows * sh.n_kv));
        for (int64_t t = 0; t < n_rows; t++) {
            for (int64_t c = 0; c < sh.n_kv; c++) {
                const bool seen = c / region == rows[t].first && c % region <= rows[t].second;
                mask[(size_t) (t * sh.n_kv + c)] = ggml_fp32_to_fp16(seen ? 0.0f : -INFINITY);
            }
        }
        for (int n_threads : {1, 2, 3}) {
            const std::vector<float> got = flash_attn(sh, q.data(), k, v, mask.data(), n_rows, n_threads);
            ASSERT_EQ(got.size(), (size_t) (n_rows * row));
            for (int r = 0; r < 3; r++) {
                fa_shape own = sh;
                own.n_kv = region;
                const std::vector<ggml_fp16_t> k_own(k.begin() + r * region * cell, k.begin() + (r + 1) * region * cell);
                const std::vector<ggml_fp16_t> v_own(v.begin() + r * region * cell, v.begin() + (r + 1) * region * cell);
                std::vector<float> q_own;
                std::vector<ggml_fp16_t> m_own;
                std::vector<int64_t> at; // the rows of the batch that are sequence r's
                for (int64_t t = 0; t < n_rows; t++) {
                    if (rows[t].first != r) continue;
                    at.push_back(t);
                    q_own.insert(q_own.end(), q.begin() + t * row, q.begin() + (t + 1) * row);
                    for (int64_t c = 0; c < region; c++) {
                        m_own.push_back(ggml_fp32_to_fp16(c <= rows[t].second ? 0.0f : -INFINITY));
                    }
                }
                const std::vector<float> alone = flash_attn(own, q_own.data(), k_own, v_own, m_own.data(), (int64_t) at.size(), n_threads);
                ASSERT_EQ(alone.size(), at.size() * (size_t) row);
                for (size_t j = 0; j < at.size(); j++) {
                    for (int64_t i = 0; i < row; i++) ASSERT_TRUE(std::isfinite(alone[j * row + i]));
                    const bool same = memcmp(got.data() + at[j] * row, alone.data() + j * row, sizeof(float) * row) == 0;
                    ASSERT_TRUE(same) << "head size " << sh.d << ": sequence " << r << "'s row at position " << rows[at[j]].second
                                      << ", " << n_threads << " threads: " << got[at[j] * row] << " against "
                                      << alone[j * row] << " in a cache of its own";
                }
            }
        }
    }
}

// head sizes of the kernel's paths (64: 16-lane chunks only; 80: and a part; 128: the 8-register block;
// 256: two), grouped-query heads, blocks of 32 cells with a part left over, caches of 300 and 600 cells
// (2 and 3 segments of 256), and of 1,400 (6 segments: a row alone has its cells split over 2 and 3
// threads, the batch's rows do not); the same paths over a Q8_0 cache
INSTANTIATE_TEST_SUITE_P(shapes, kernels_flash_attn,
                         ::testing::Values(fa_shape{64, 4, 4, 37}, fa_shape{80, 4, 2, 70}, fa_shape{128, 4, 4, 300},
                                           fa_shape{128, 8, 2, 129}, fa_shape{128, 2, 2, 600},
                                           fa_shape{256, 2, 1, 45}, fa_shape{64, 4, 2, 1400},
                                           fa_shape{64, 4, 4, 37, GGML_TYPE_Q8_0}, fa_shape{128, 4, 4, 300, GGML_TYPE_Q8_0},
                                           fa_shape{128, 8, 2, 129, GGML_TYPE_Q8_0}, fa_shape{256, 2, 1, 45, GGML_TYPE_Q8_0},
                                           fa_shape{64, 4, 2, 1400, GGML_TYPE_Q8_0}),
                         [](const ::testing::TestParamInfo<fa_shape> & i) {
                             return "d" + std::to_string(i.param.d) + "_h" + std::to_string(i.param.n_head) + "_kv" +
                                    std::to_string(i.param.n_head_kv) + "_c" + std::to_string(i.param.n_kv) +
                                    (i.param.kv == GGML_TYPE_F16 ? "" : std::string("_") + ggml_type_name(i.param.kv));
                         });

// ggml_argmax as patches/llama-output-argmax.patch leaves it (argmax outputs: the token of each row libllama
// hands back instead of the row's logits): the lowest index of the row's largest value, NaNs never winning, as
// editspec's sampling_argmax on the host (test-sampling checks that one against a running best from index 0),
// over rows full of ties, NaNs, infinities, signed zeros and denormals of many lengths: what `check-exact` runs
// on a GPU, here on the CPU
TEST(kernels_argmax, rows_give_the_hosts_token) {
    for (const int32_t n : {1, 2, 7, 31, 300, 4099, 32256}) {
        const editspec::argmax_check_result r = editspec::exactness_check_argmax(n, false);
        ASSERT_TRUE(r.error.empty()) << r.error;
        EXPECT_EQ(r.backend, "CPU");
        EXPECT_EQ(r.rows, 256);
        EXPECT_EQ(r.row, -1) << n << " values a row: row " << r.row << " gives " << r.got << ", the host " << r.want;
    }
}

} // namespace
