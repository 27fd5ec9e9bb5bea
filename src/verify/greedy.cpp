// Greedy verification (lossless): a draft is accepted when it is the target's argmax.
//
// The rule of EfficientEdit's Reuse phase (EfficientEdit's eq. 7) and of llama.cpp's speculative
// examples at temperature 0. With several candidates per node (a tree), at most one child can carry
// the argmax, so the accepted path is unique and equals what greedy autoregressive decoding would
// produce token for token.
#include "editspec/verify.h"

namespace editspec {

llama_token verify_greedy_token(const verify_input & in, const float * logits, std::span<const llama_token> path) {
    if (!in.constraint) return sampling_argmax(logits, in.n_vocab);
    return constrained_argmax(logits, in.n_vocab, *in.constraint, path);
}

int32_t verify_greedy_step(const verify_input & in, const float * logits, std::span<const int32_t> children,
                           llama_token * target, std::span<const llama_token> path) {
    *target = verify_greedy_token(in, logits, path);
    return verify_greedy_child(in, children, *target);
}

int32_t verify_greedy_child(const verify_input & in, std::span<const int32_t> children, llama_token t) {
    for (int32_t c : children) {
        if (in.tree->nodes[c].token == t) {
            return c;
        }
    }
    return -1;
}

verify_result verify_greedy(const verify_input & in) {
    sampling_params sp; // temp 0: the walk never draws a coin
    sp.temp = 0.0f;
    rng_state unused(0);
    return verify_walk(in, sp, unused, verify_rule(), false);
}

} // namespace editspec
