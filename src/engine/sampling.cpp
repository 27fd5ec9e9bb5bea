// Temperature / top-k / top-p distributions and draws.
#include "editspec/sampling.h"

#include <algorithm>
#include <cmath>

namespace editspec {

llama_token sampling_argmax(const float * logits, int32_t n_vocab) {
    int32_t best = 0;
    float best_v = logits[0];
    for (int32_t i = 1; i < n_vocab; i++) {
        if (logits[i] > best_v) {
            best_v = logits[i];
            best = i;
        }
    }
    return best;
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
