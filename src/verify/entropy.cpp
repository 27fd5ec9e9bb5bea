// Entropy-aware dynamic verification (lossy): EfficientEdit §III-B, eq. 9-10.
//
// Where the target is confident, a draft must be its top token; where it is unsure, any of its top
// tau tokens will do. With base threshold k, at each node:
//
//     H_norm = -sum_{i=1..k} p_i log p_i / log k            (eq. 9, p_i the target's k most probable)
//     tau    = ceil(k * H_norm)  if that is >= 1, else 1    (eq. 10)
//
// and a draft is accepted when it is among the target's top tau. Worked example, k = 3:
//
//     top-3 p = 0.90 0.05 0.05   H = 0.394  H_norm = 0.359  k*H_norm = 1.08  tau = 2
//     top-3 p = 0.99 .005 .005   H = 0.063  H_norm = 0.057  k*H_norm = 0.17  tau = 1 (exact match)
//     top-3 p = 1/3  1/3  1/3    H = log 3  H_norm = 1      k*H_norm = 3     tau = 3
//
// Not fixed by the paper, chosen here: p is softmax(logits) at temperature 1 (the paper decodes
// greedily, so the model's own distribution), renormalised over the k unless
// verify_params::entropy_renorm is false; tau is capped at k (only reachable without
// renormalisation); a rounding margin of 1e-9 keeps k*H_norm = 2.0000000001 at 2.
// The paper applies it to the draft model's edit content only (the Reuse phase is verified
// greedily): that is verify_input::lossy_ok.
#include "editspec/verify.h"

#include <algorithm>
#include <cmath>

namespace editspec {

// H_norm of the k entries of top (the largest logits, best first)
static double entropy_norm_of(const std::vector<token_logit> & top, const float * logits, int32_t n_vocab,
                              bool renorm) {
    const int32_t k = (int32_t) top.size();
    if (k <= 1) {
        return 0.0;
    }
    // log of the softmax normaliser: over the k (renormalised) or over the whole vocabulary
    const double max_l = top[0].logit;
    double z = 0.0;
    if (renorm) {
        for (const token_logit & tl : top) {
            z += std::exp((double) tl.logit - max_l);
        }
    } else {
        for (int32_t t = 0; t < n_vocab; t++) {
            z += std::exp((double) logits[t] - max_l);
        }
    }
    const double log_z = max_l + std::log(z);
    double h = 0.0;
    for (const token_logit & tl : top) {
        const double log_p = (double) tl.logit - log_z;
        const double p     = std::exp(log_p);
        if (p > 0.0) {
            h -= p * log_p;
        }
    }
    return h / std::log((double) k);
}

static int32_t entropy_tau_of(const std::vector<token_logit> & top, const float * logits, int32_t n_vocab,
                              int32_t k, bool renorm) {
    const int32_t k_eff = (int32_t) top.size();
    if (k_eff <= 1) {
        return 1;
    }
    const double h_norm = entropy_norm_of(top, logits, n_vocab, renorm);
    const double tau    = std::ceil((double) k * h_norm - 1e-9);
    return (int32_t) std::clamp(tau, 1.0, (double) k_eff);
}

double verify_entropy_norm(const float * logits, int32_t n_vocab, int32_t k, bool renorm) {
    return entropy_norm_of(verify_top_logits(logits, n_vocab, k), logits, n_vocab, renorm);
}

int32_t verify_entropy_tau(const float * logits, int32_t n_vocab, int32_t k, bool renorm) {
    return entropy_tau_of(verify_top_logits(logits, n_vocab, k), logits, n_vocab, k, renorm);
}

verify_result verify_entropy(const verify_input & in, const verify_params & p, rng_state & rng) {
    const draft_tree & tree = *in.tree;
    const int32_t k      = p.entropy_k;
    const bool    renorm = p.entropy_renorm;
    auto rule = [&](const float * logits, std::span<const int32_t> children) -> int32_t {
        const std::vector<token_logit> top = verify_top_logits(logits, in.n_vocab, k);
        const int32_t tau = entropy_tau_of(top, logits, in.n_vocab, k, renorm);
        // best-ranked first: with several qualifying children, the most probable one
        for (int32_t i = 0; i < tau && i < (int32_t) top.size(); i++) {
            for (int32_t c : children) {
                if (tree.nodes[c].token == top[i].token) {
                    return c;
                }
            }
        }
        return -1;
    };
    return verify_walk(in, p.sampling, rng, rule, /*rule_first=*/false);
}

} // namespace editspec
