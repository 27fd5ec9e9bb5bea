// Temperature / top-k / top-p distributions and draws.
#include "editspec/sampling.h"

#include <algorithm>
#include <cmath>

namespace editspec {

// The greedy verifier's work on the host for every row it walks (a 32k vocabulary: ~20 us a row with one
// running best, whose compare-and-branch does not vectorize). 16 independent lanes, each with its largest
// value and where it first came (compares and selects, which vectorize), then the lane that holds the top
// value first: the token a running best from token 0 finds (NaNs skipped alike; a NaN at token 0, where
// that best would stick, gives 0 as it did)
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
// in AVX2 registers where the CPU has them (a GPU server's does): compares only, the same answer
__attribute__((target_clones("avx2", "default")))
#endif
llama_token sampling_argmax(const float * logits, int32_t n_vocab) {
    if (n_vocab <= 0 || std::isnan(logits[0])) return 0;
    constexpr int32_t W = 16;
    float lane[W];
    int32_t at[W];
    for (int32_t j = 0; j < W; j++) lane[j] = -INFINITY, at[j] = 0;
    int32_t i = 0;
    for (; i + W <= n_vocab; i += W) {
        for (int32_t j = 0; j < W; j++) {
            const bool gt = logits[i + j] > lane[j];
            lane[j] = gt ? logits[i + j] : lane[j];
            at[j]   = gt ? i + j : at[j];
        }
    }
    float top = -INFINITY;
    for (float m : lane) top = m > top ? m : top;
    int32_t best = n_vocab;
    for (int32_t j = 0; j < W; j++) {
        if (lane[j] == top && top > -INFINITY && at[j] < best) best = at[j];
    }
    for (; i < n_vocab; i++) { // the tail's tokens come after every lane's
        if (logits[i] > top) top = logits[i], best = i;
    }
    return top > -INFINITY ? best : 0; // every number -inf: token 0 is one
}

std::vector<token_prob> sampling_dist(const float * logits, int32_t n_vocab, const sampling_params & p) {
    std::vector<token_prob> out;
    if (p.temp <= 0.0f) {
        out.push_back({sampling_argmax(logits, n_vocab), 1.0f});
        return out;
    }
    out.resize(n_vocab);
    for (int32_t i = 0; i < n_vocab; i++) {
        out[i] = {i, logits[i]};
    }
    auto by_logit = [](const token_prob & a, const token_prob & b) {
        return a.p > b.p || (a.p == b.p && a.token < b.token);
    };
    const int32_t k = (p.top_k > 0 && p.top_k < n_vocab) ? p.top_k : n_vocab;
    if (k < n_vocab) {
        std::partial_sort(out.begin(), out.begin() + k, out.end(), by_logit);
        out.resize(k);
    } else {
        std::sort(out.begin(), out.end(), by_logit);
    }
    // softmax in double for a stable sum
    const double max_l = out[0].p;
    double sum = 0.0;
    std::vector<double> e(out.size());
    for (size_t i = 0; i < out.size(); i++) {
        e[i] = std::exp(((double) out[i].p - max_l) / p.temp);
        sum += e[i];
    }
    size_t keep = out.size();
    if (p.top_p < 1.0f) {
        double cum = 0.0;
        for (size_t i = 0; i < out.size(); i++) {
            cum += e[i] / sum;
            if (cum >= p.top_p) {
                keep = i + 1;
                break;
            }
        }
    }
    double kept = 0.0;
    for (size_t i = 0; i < keep; i++) {
        kept += e[i];
    }
    out.resize(keep);
    for (size_t i = 0; i < keep; i++) {
        out[i].p = (float) (e[i] / kept);
    }
    return out;
}

llama_token sampling_draw(const std::vector<token_prob> & dist, float coin) {
    float cum = 0.0f;
    for (const token_prob & tp : dist) {
        cum += tp.p;
        if (coin < cum) {
            return tp.token;
        }
    }
    return dist.back().token; // rounding left the coin above the total
}

llama_token sampling_sample(const float * logits, int32_t n_vocab, const sampling_params & p, float coin) {
    if (p.temp <= 0.0f) {
        return sampling_argmax(logits, n_vocab);
    }
    return sampling_draw(sampling_dist(logits, n_vocab, p), coin);
}

} // namespace editspec
