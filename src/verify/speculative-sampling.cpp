// Speculative sampling (lossless in distribution) over a draft tree.
//
// Leviathan et al. 2023 "Fast Inference from Transformers via Speculative Decoding" and Chen et al.
// 2023 "Accelerating Large Language Model Decoding with Speculative Sampling": accept a draft x
// drawn from q with probability min(1, p(x)/q(x)), else draw from norm(max(0, p - q)). SpecInfer
// (Miao et al. 2024, multi-step speculative sampling) extends it to several candidates per node:
// try them in turn, each against the residual left by the rejected ones.
//
// editspec's drafters are deterministic given the history, so each candidate's q is one-hot on its
// token. The rule then reduces to, at each node with target distribution p:
//
//     for each child x, in tree order:
//         accept x with probability p(x)              (coin < p(x))
//         else p(x) = 0, renormalise p                (the residual)
//     nothing accepted: the recovered token ~ p       (the residual)
//
// Why it is exact: child i is accepted with probability prod_{j<i} (1 - p'(x_j)) * p'(x_i) = p(x_i)
// (p' the renormalised residual), and any other token y comes out with (1 - sum_i p(x_i)) *
// p(y) / (1 - sum_i p(x_i)) = p(y). After an accepted child the same holds at the child, with the
// target's distribution given the longer prefix, so every emitted sequence has the probability
// autoregressive sampling gives it. tests/verify/test-sampling.cpp checks this statistically.
#include "editspec/verify.h"
#include "editspec/log.h"

#include <algorithm>
#include <cmath>

namespace editspec {

// ----------------------------------------------------------------------------
// verify_target

verify_target::verify_target(const float * logits, int32_t n_vocab, const sampling_params & sp)
    : logits_(logits), n_vocab_(n_vocab), temp_(sp.temp), max_logit_(0.0f), sum_exp_(0.0) {
    const bool all_tokens = sp.top_k <= 0 || sp.top_k >= n_vocab;
    dense_ = sp.temp > 0.0f && all_tokens && !(sp.top_p < 1.0f);
    if (!dense_) {
        // top-k / top-p (or temp <= 0): the shared definition, sorted; small when top_k is set
        sparse_ = sampling_dist(logits, n_vocab, sp);
        total_  = 0.0;
        for (const token_prob & tp : sparse_) {
            total_ += tp.p;
        }
        return;
    }
    // softmax(logits / temp) over every token, in double as sampling_dist: one pass for the
    // maximum, one for the sum; single probabilities are computed when asked for
    max_logit_ = logits[0];
    for (int32_t t = 1; t < n_vocab; t++) {
        max_logit_ = std::max(max_logit_, logits[t]);
    }
    double sum = 0.0;
    for (int32_t t = 0; t < n_vocab; t++) {
        sum += std::exp(((double) logits[t] - max_logit_) / temp_);
    }
    sum_exp_ = sum;
}

double verify_target::p_full(llama_token t) const {
    if (t < 0 || t >= n_vocab_) {
        return 0.0;
    }
    if (dense_) {
        return std::exp(((double) logits_[t] - max_logit_) / temp_) / sum_exp_;
    }
    for (const token_prob & tp : sparse_) {
        if (tp.token == t) {
            return tp.p;
        }
    }
    return 0.0;
}

double verify_target::p(llama_token t) const {
    if (std::binary_search(rejected_.begin(), rejected_.end(), t)) {
        return 0.0;
    }
    const double rem = total_ - rejected_p_;
    if (rem <= 0.0) {
        return 0.0;
    }
    return std::min(1.0, p_full(t) / rem);
}

void verify_target::reject(llama_token t) {
    if (t < 0 || t >= n_vocab_) {
        return;
    }
    auto it = std::lower_bound(rejected_.begin(), rejected_.end(), t);
    if (it != rejected_.end() && *it == t) {
        return;
    }
    rejected_p_ += p_full(t);
    rejected_.insert(it, t);
}

llama_token verify_target::draw(float coin) const {
    // walk the residual's cumulative mass up to coin * (its total); rejected tokens are skipped
    llama_token last = -1; // the last token with mass, for a coin that rounding left above the total
    if (dense_) {
        const double target = (double) coin * (1.0 - rejected_p_) * sum_exp_; // in units of exp()
        double cum = 0.0;
        size_t r = 0;
        for (int32_t t = 0; t < n_vocab_; t++) {
            if (r < rejected_.size() && rejected_[r] == t) {
                r++;
                continue;
            }
            const double e = std::exp(((double) logits_[t] - max_logit_) / temp_);
            if (e <= 0.0) {
                continue;
            }
            cum += e;
            last = t;
            if (target < cum) {
                return t;
            }
        }
    } else {
        // sorted by p as sampling_dist, so with nothing rejected this is sampling_draw exactly
        const double target = (double) coin * (total_ - rejected_p_);
        double cum = 0.0;
        for (const token_prob & tp : sparse_) {
            if (tp.p <= 0.0f || std::binary_search(rejected_.begin(), rejected_.end(), tp.token)) {
                continue;
            }
            cum += tp.p;
            last = tp.token;
            if (target < cum) {
                return tp.token;
            }
        }
    }
    if (last >= 0) {
        return last;
    }
    // every token of the support was rejected, which needs all of its mass on the drafts; only
    // rounding gets here. The target's argmax is the least surprising answer.
    ES_LOG_WARN("%s: empty residual after %zu rejections\n", __func__, rejected_.size());
    return sampling_argmax(logits_, n_vocab_);
}

// ----------------------------------------------------------------------------
// the step and the policy

int32_t verify_sampling_step(const verify_input & in, std::span<const int32_t> children, verify_target & target,
                             rng_state & rng) {
    for (int32_t c : children) {
        const llama_token t = in.tree->nodes[c].token;
        const double pt = target.p(t); // 0 for a duplicate of a rejected sibling
        if (pt >= 1.0) {
            return c;
        }
        if (pt > 0.0 && (double) rng.coin() < pt) {
            return c;
        }
        target.reject(t);
    }
    return -1;
}

verify_result verify_sampling(const verify_input & in, const sampling_params & sp, rng_state & rng) {
    if (sp.temp <= 0.0f) {
        return verify_greedy(in); // the same decisions, and no coins drawn
    }
    return verify_walk(in, sp, rng, verify_rule(), false);
}

} // namespace editspec
