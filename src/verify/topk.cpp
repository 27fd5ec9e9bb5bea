// Top-k verification (lossy): a draft is also accepted when it is among the target's top_k logits.
//
// The fixed-threshold baseline of EfficientEdit (§V-C, Table III: "the draft model's
// greedy decoding output is accepted if it appears among the top-k tokens (ranked by probability)
// in the target model's output distribution", k = 3 and 5). Ranking is by raw logit, which any
// temperature preserves; top-k / top-p of the sampling parameters do not narrow it.
#include "editspec/verify.h"

namespace editspec {

verify_result verify_topk(const verify_input & in, const verify_params & p, rng_state & rng) {
    const draft_tree & tree = *in.tree;
    const int32_t k = p.top_k;
    auto rule = [&](const float * logits, std::span<const int32_t> children) -> int32_t {
        // best-ranked first: with several qualifying children, the most probable one
        for (const token_logit & tl : verify_top_logits(logits, in.n_vocab, k)) {
            for (int32_t c : children) {
                if (tree.nodes[c].token == tl.token) {
                    return c;
                }
            }
        }
        return -1;
    };
    return verify_walk(in, p.sampling, rng, rule, /*rule_first=*/false);
}

} // namespace editspec
