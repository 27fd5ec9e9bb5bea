// The acceptance policies by name: the one enum that the drafter table (a drafter's default policy,
// drafters.h) and the verifier (verify.h, which implements them and their names) both read. It lives
// in the draft layer so that draft never includes verify (src/layers.txt).
//
//     editspec::drafter_desc d{.name = "mine", .policy = editspec::VERIFY_POLICY_GREEDY, ...};
//     editspec::verify_params vp; vp.policy = d.policy;
#pragma once

namespace editspec {

enum verify_policy {
    VERIFY_POLICY_GREEDY,   // lossless: accept the target's argmax
    VERIFY_POLICY_SAMPLING, // lossless in distribution: speculative sampling (temp <= 0 = GREEDY)
    VERIFY_POLICY_TOPK,     // lossy: accept a draft among the target's top_k
    VERIFY_POLICY_ENTROPY,  // lossy: accept a draft among the target's top_tau (EfficientEdit eq. 9-10)
    VERIFY_POLICY_DIRECT,   // lossy, comparison only: accept drafts unverified
};

} // namespace editspec
