// Constrained argmax: the target's argmax when the constraint allows it (nearly always, where the
// model copies well), else the best allowed token in logit order.
#include "editspec/constraint.h"
#include "editspec/sampling.h"
#include "editspec/verify.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace editspec {

llama_token constrained_argmax(const float * logits, int32_t n_vocab, token_constraint & c,
                               std::span<const llama_token> out) {
    const llama_token best = sampling_argmax(logits, n_vocab);
    if (best >= 0 && c.allows(out, best)) return best;
    // the 64 best first (one linear pass), then the whole vocabulary in order
    for (const token_logit & tl : verify_top_logits(logits, n_vocab, 64)) {
        if (tl.token != best && c.allows(out, tl.token)) return tl.token;
    }
    std::vector<llama_token> order((size_t) n_vocab);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](llama_token a, llama_token b) { return logits[a] > logits[b]; });
    for (size_t i = 64; i < order.size(); i++) {
        if (c.allows(out, order[i])) return order[i];
    }
    return -1;
}

} // namespace editspec
