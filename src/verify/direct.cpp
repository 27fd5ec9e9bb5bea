// Direct acceptance (lossy, comparison only): drafts are kept without verification.
//
// EfficientEdit's lower-bound baseline (§V-C, Table III "Direct": "the draft model's
// greedy decoding outputs are used directly without any verification by the target model"). In a
// tree, the first-proposed path: the first lossy_ok child of each node, down to a leaf; the target
// only supplies the bonus token there. Nodes without lossy_ok are verified losslessly as usual.
#include "editspec/verify.h"

namespace editspec {

verify_result verify_direct(const verify_input & in, const sampling_params & sp, rng_state & rng) {
    auto rule = [](const float * /*logits*/, std::span<const int32_t> children) -> int32_t {
        return children.front();
    };
    return verify_walk(in, sp, rng, rule, /*rule_first=*/true);
}

} // namespace editspec
