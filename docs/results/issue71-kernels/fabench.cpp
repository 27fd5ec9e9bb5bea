// fabench D H HKV NKV TOKENS ITERS THREADS: ms per flash-attention op (rows at the cache's end); LAYERS=N caches
// (default 24, as a model pass; 1: one layer's cache, which stays in L3: the op without the memory)
#include "ggml.h"
#include "ggml-cpu.h"
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>
#include <algorithm>
#include <sys/mman.h>
int main(int argc, char ** argv) {
    const int64_t d = atoi(argv[1]), h = atoi(argv[2]), hkv = atoi(argv[3]), nkv = atoi(argv[4]), nt = atoi(argv[5]);
    const int iters = atoi(argv[6]), nth = atoi(argv[7]);
    const int layers = getenv("LAYERS") ? atoi(getenv("LAYERS")) : 24; // distinct caches so the data comes from memory as in a model pass
    size_t bytes = (size_t) layers * (2 * d * hkv * nkv * 2 + d * h * nt * 8 + nkv * nt * 2) + ((size_t) 1 << 30);
    bytes = (bytes + (2u<<20) - 1) & ~(size_t)((2u<<20)-1);
    void * buf = aligned_alloc(2u << 20, bytes);
    if (getenv("HUGE")) madvise(buf, bytes, MADV_HUGEPAGE);
    ggml_init_params ip = {bytes, buf, false};
    ggml_context * ctx = ggml_init(ip);
    ggml_cgraph * gf = ggml_new_graph(ctx);
    std::vector<ggml_tensor *> outs;
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0, 1);
    for (int l = 0; l < layers; ++l) {
        ggml_tensor * Q = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, d, h, nt);
        ggml_tensor * K = ggml_new_tensor_3d(ctx, GGML_TYPE_F16, d, hkv, nkv);
        ggml_tensor * V = ggml_new_tensor_3d(ctx, GGML_TYPE_F16, d, hkv, nkv);
        ggml_tensor * M = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, nkv, nt);
        for (int64_t i = 0; i < ggml_nelements(Q); ++i) ((float *) Q->data)[i] = nd(rng);
        ggml_fp16_t * kk = (ggml_fp16_t *) K->data, * vv = (ggml_fp16_t *) V->data;
        for (int64_t i = 0; i < ggml_nelements(K); ++i) { kk[i] = ggml_fp32_to_fp16(nd(rng)); vv[i] = ggml_fp32_to_fp16(nd(rng)); }
        ggml_fp16_t * m = (ggml_fp16_t *) M->data;
        for (int64_t t = 0; t < M->ne[1]; ++t) for (int64_t c = 0; c < nkv; ++c)
            m[t * nkv + c] = ggml_fp32_to_fp16(c <= nkv - nt + t ? 0.0f : -INFINITY);
        ggml_tensor * out = ggml_flash_attn_ext(ctx, ggml_permute(ctx, Q, 0, 2, 1, 3), ggml_permute(ctx, K, 0, 2, 1, 3),
                                                ggml_permute(ctx, V, 0, 2, 1, 3), M, 1.0f / sqrtf((float) d), 0.0f, 0.0f);
        ggml_build_forward_expand(gf, out);
        outs.push_back(out);
    }
    std::vector<double> t;
    auto digest = [&]() { uint64_t h = 1469598103934665603ull; for (ggml_tensor * o : outs) { const unsigned char * p = (const unsigned char *) o->data; for (size_t i = 0; i < ggml_nbytes(o); ++i) h = (h ^ p[i]) * 1099511628211ull; } return h; };
    for (int i = 0; i < iters; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        ggml_graph_compute_with_ctx(ctx, gf, nth);
        t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    printf("digest %016llx ", (unsigned long long) digest());
    printf("tokens %lld: median %.2f ms, min %.2f (24 layers)\n", (long long) nt, t[t.size() / 2], t[0]);
}
