// Batch invariance of a model's passes on its backend (exactness.h).
#include "editspec/exactness.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

namespace editspec {

std::vector<int32_t> exactness_batch_sizes(int32_t n_max) {
    static const int32_t edges[] = {17, 23, 24, 31, 32, 33, 47, 48, 63, 64, 65, 100, 127, 128, 129, 200, 255, 256,
                                    257, 384, 511, 512};
    std::vector<int32_t> v;
    for (int32_t n = 1; n <= std::min(16, n_max); n++) v.push_back(n);
    for (int32_t n : edges) {
        if (n <= n_max) v.push_back(n);
    }
    return v;
}

exactness_result exactness_check(const model & m, const exactness_params & p) {
    exactness_result r;
    if (p.n_max < 1 || p.n_max > 512 || p.n_prefix < 0 || p.n_prefix > 4096) {
        r.error = "exactness: n_max " + std::to_string(p.n_max) + " (1..512) or prefix " + std::to_string(p.n_prefix) +
                  " (0..4096) out of range";
        return r;
    }
    context_params cp;
    cp.n_ctx = std::max(1024, p.n_prefix + p.n_max + 16);
    cp.n_threads = p.n_threads;
    cp.n_batch = 512;
    cp.flash_attn = p.flash_attn;
    cp.type_k = p.kv_type;
    cp.type_v = p.kv_type;
    auto ctx = context_create(m, cp, &r.error);
    if (!ctx) return r;
    const int32_t n_vocab = m.facts().n_vocab;

    // random tokens of the vocabulary's ordinary range, the same for a given prefix length
    std::mt19937 rng(1000 + p.n_prefix);
    const uint32_t lo = std::min(100, n_vocab - 1), span = (uint32_t) std::max(1, std::min(30000, n_vocab - (int32_t) lo));
    token_vec toks(p.n_prefix + p.n_max);
    for (auto & t : toks) t = (llama_token) (lo + rng() % span);

    batch b(512, 1);
    ctx->kv_clear();
    if (p.n_prefix > 0 && !context_prefill(*ctx, b, token_vec(toks.begin(), toks.begin() + p.n_prefix), 0, 0)) {
        r.error = "exactness: prefill of " + std::to_string(p.n_prefix) + " tokens failed";
        return r;
    }
    std::vector<std::vector<float>> ref;
    for (int32_t i = 0; i < p.n_max; i++) {
        b.clear();
        b.add(toks[p.n_prefix + i], p.n_prefix + i, {0}, true);
        if (!ctx->decode(b)) {
            r.error = "exactness: one-token decode " + std::to_string(i) + " failed";
            return r;
        }
        ref.emplace_back(ctx->logits(0), ctx->logits(0) + n_vocab);
    }
    for (int32_t n : exactness_batch_sizes(p.n_max)) {
        r.n_sizes++;
        if (!ctx->kv_rm(0, p.n_prefix, -1)) {
            r.error = "exactness: the model's cache cannot drop a pass (kv_rm)";
            return r;
        }
        b.clear();
        for (int32_t i = 0; i < n; i++) b.add(toks[p.n_prefix + i], p.n_prefix + i, {0}, true);
        if (!ctx->decode(b)) {
            r.error = "exactness: a pass of " + std::to_string(n) + " tokens failed";
            return r;
        }
        for (int32_t i = 0; i < n; i++) {
            const float * got = ctx->logits(i);
            if (memcmp(got, ref[i].data(), n_vocab * sizeof(float)) == 0) continue;
            double d2 = 0, r2 = 0;
            int32_t a = 0, g = 0;
            for (int32_t v = 0; v < n_vocab; v++) {
                d2 += (double) (got[v] - ref[i][v]) * (got[v] - ref[i][v]);
                r2 += (double) ref[i][v] * ref[i][v];
                if (got[v] > got[a]) a = v;
                if (ref[i][v] > ref[i][g]) g = v;
            }
            r.n = n;
            r.row = i;
            r.rel = std::sqrt(d2 / std::max(r2, 1e-30));
            r.argmax_differs = a != g;
            return r;
        }
    }
    return r;
}

} // namespace editspec
