// Acceptance policies: given the target's logits over a draft tree, decide which drafts to keep.
//
//     editspec::verify_input in;
//     in.tree        = &tree;                       // the tree that was decoded
//     in.n_vocab     = n_vocab;
//     in.root_logits = llama_get_logits_ith(ctx, i_last);     // after the last committed token
//     for (int32_t i = 0; i < tree.size(); i++) {
//         in.node_logits.push_back(llama_get_logits_ith(ctx, i_node[i]));
//     }
//     editspec::verify_params vp;                   // greedy by default
//     editspec::rng_state     rng(vp.sampling.seed);
//     editspec::verify_result r = editspec::verify_tree(in, vp, rng);
//     // commit tree.nodes[r.accepted[0..]].token, then r.token; keep the KV of r.accepted only
//
// Terms (vLLM's, vllm/v1/sample/rejection_sampler.py, adapted to a tree). Each verification step
// emits `accepted tokens + one recovered token` or `accepted tokens + one bonus token`:
//
//   accepted tokens:  draft tokens the policy keeps, a chain root child → ... → deepest kept node.
//                     Lossless policies accept a draft on the relationship between the target's and
//                     the draft's probabilities (greedy: it is the target's argmax; sampling: a coin
//                     under the target's probability of it); lossy policies also by a looser rule.
//   recovered token:  the target's own token at the first node where drafts were checked and all
//                     rejected. Under speculative sampling it is drawn from the adjusted (residual)
//                     distribution: the target's, with the rejected drafts removed and renormalised.
//   bonus token:      the target's own token after the accepted path when there was nothing left to
//                     check there (the path reached a leaf, or the tree is empty). It is drawn from
//                     the target's probabilities only.
//
// Policies (verify_policy):
//
//   GREEDY    lossless. The target's token is its argmax (ties: lowest id); a child carrying it is
//             accepted. Ignores sampling.temp: always argmax.
//   SAMPLING  lossless in distribution (Leviathan et al. 2023, Chen et al. 2023; with several
//             candidates SpecInfer, Miao et al. 2024). The output has exactly the distribution of
//             autoregressive sampling from sampling_dist(). temp <= 0: identical to GREEDY.
//   TOPK      lossy. Also accepts a draft among the target's top_k logits (EfficientEdit,
//             Table III baseline "Top-k").
//   ENTROPY   lossy. EfficientEdit's entropy-aware dynamic verification (§III-B, eq. 9-10):
//             also accepts a draft among the target's top_tau, tau = max(1, ceil(k * H_norm)).
//   DIRECT    lossy, for comparison only (EfficientEdit's Table III "Direct"): drafts are accepted
//             unverified, following the first child at each node.
//
// Forced choices (verify_params::forced, in place of the policy): the target's token at output
// position i is a given token instead of its own. Replay benchmarks use it on random-weight models
// of a real shape (`bench --replay`): every pass is real, the choices come from a reference output.
//
// The lossy rules apply only to nodes with lossy_ok (e.g. draft-model drafts, not Reuse drafts:
// the paper verifies the Reuse phase greedily). Elsewhere, and wherever the lossy rule accepts
// nothing, the lossless rule of sampling.temp runs (argmax at temp <= 0, speculative sampling
// above). TOPK and ENTROPY give the target's own choice precedence: at a node they first run the
// lossless rule over all children, then the lossy rule over the lossy_ok ones. DIRECT runs its
// rule first.
//
// Pure: no llama_context, no globals besides an optional debug log (EDITSPEC_VERIFY_DEBUG=1).
// Thread-safe for distinct rng_state objects.
#pragma once

#include "editspec/constraint.h"
#include "editspec/draft.h"
#include "editspec/sampling.h"
#include "editspec/verify-policy.h"

#include "llama.h"

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace editspec {

// enum verify_policy: verify-policy.h (the drafter table names a default policy per drafter)

// "greedy", "sampling", "topk", "entropy", "direct"
const char * verify_policy_name(verify_policy policy);
// parses a name of verify_policy_name; false (and *out untouched) on an unknown name
bool verify_policy_from_name(const std::string & name, verify_policy * out);
// true for TOPK, ENTROPY, DIRECT
bool verify_policy_is_lossy(verify_policy policy);

// the target's choice at output position i: tokens[i], past them `end` (EOS)
struct verify_forced {
    std::span<const llama_token> tokens;
    llama_token end = LLAMA_TOKEN_NULL;

    llama_token at(size_t i) const { return i < tokens.size() ? tokens[i] : end; }
};

struct verify_params {
    verify_policy   policy    = VERIFY_POLICY_GREEDY;
    const verify_forced * forced = nullptr; // set: every choice is forced (verify_forced_path); policy unused
    sampling_params sampling;              // the target's distribution; temp 0 = the target picks its argmax
    int32_t         top_k     = 3;         // TOPK: accept a draft among the target's top_k logits
    int32_t         entropy_k = 5;         // ENTROPY: base threshold k (paper: 3 Qwen2.5-Coder, 5 DeepSeek-Coder)
    // ENTROPY: renormalise the top-k probabilities to sum to 1 before eq. 9. The paper does not say;
    // renormalised, H_norm is a normalised entropy in [0, 1] and tau <= k. false = the target's
    // full-softmax probabilities of its top k, as printed.
    bool            entropy_renorm = true;
};

struct verify_input {
    const draft_tree *         tree        = nullptr; // the draft tree that was decoded
    int32_t                    n_vocab     = 0;
    const float *              root_logits = nullptr; // [n_vocab] target logits after the last committed token
    std::vector<const float *> node_logits;           // [n_nodes][n_vocab] target logits after each tree node
    // GREEDY without a constraint, instead of the logits: the target's argmax after the last committed
    // token and after each node (a decode's argmax outputs, context::argmax_only); -1 / empty = none
    llama_token                root_argmax = -1;
    std::vector<llama_token>   node_argmax;           // [n_nodes]
    std::vector<uint8_t>       lossy_ok;              // [n_nodes] or empty (= all 1); lossy rules judge node i only where 1
    size_t                     n_out       = 0;       // output tokens before this pass (where forced choices start)
    // GREEDY only: the target's token at a node is constrained_argmax over the output to that node
    // (out, then the path's tokens) instead of its argmax (constraint.h); null = none
    token_constraint *         constraint  = nullptr;
    std::span<const llama_token> out;                 // with a constraint: the output before this pass
};

struct verify_result {
    std::vector<int32_t> accepted;        // accepted node indices, root child first, each the parent of the next
    llama_token          token     = -1;  // the target's own token after the accepted path (recovered or bonus)
    bool                 recovered = false; // true = recovered token (drafts were rejected there), false = bonus token
    int32_t              n_lossy   = 0;   // of accepted, those kept by a lossy rule rather than the lossless one
};

// Runs p.policy over the tree. Only the nodes on the accepted path and their children are looked
// at; node_logits of other nodes may be null. Invalid input (null tree or logits, sizes that do not
// match the tree, a parent that does not precede its child, argmax without logits for another policy
// than GREEDY or with a constraint) is a programmer error and traps.
// Draft tokens outside [0, n_vocab) are never accepted.
verify_result verify_tree(const verify_input & in, const verify_params & p, rng_state & rng);

// ----------------------------------------------------------------------------
// The policies (verify_tree dispatches to these; one file each)

verify_result verify_greedy  (const verify_input & in);                                                      // greedy.cpp
verify_result verify_sampling(const verify_input & in, const sampling_params & sp, rng_state & rng);         // sampling.cpp
verify_result verify_topk    (const verify_input & in, const verify_params & p, rng_state & rng);            // topk.cpp
verify_result verify_entropy (const verify_input & in, const verify_params & p, rng_state & rng);            // entropy.cpp
verify_result verify_direct  (const verify_input & in, const sampling_params & sp, rng_state & rng);         // direct.cpp

// Forced choices (forced.cpp): the deepest path whose tokens are f.at(n_out), f.at(n_out + 1), ...;
// then the forced token after it (recovered when that node had children). Needs no logits.
verify_result verify_forced_path(const draft_tree & tree, const verify_forced & f, size_t n_out);

// ----------------------------------------------------------------------------
// Building blocks, shared by the policy files and reachable from tests

// a lossy rule at one node: among `children` (node indices, the node's lossy_ok children in tree
// order, never empty) the child to accept, or -1. logits: [n_vocab] the target's logits at the node.
using verify_rule = std::function<int32_t(const float * logits, std::span<const int32_t> children)>;

// Walks the tree from the root. At each node: when it has no children, the bonus token; else
// (rule_first) the rule, then the lossless rule of sp over all children, then (!rule_first) the
// rule, and when nothing was accepted, the recovered token. rule may be empty (lossless only).
verify_result verify_walk(const verify_input & in, const sampling_params & sp, rng_state & rng,
                          const verify_rule & rule, bool rule_first);

// GREEDY at one node: the child carrying the target's argmax, or -1; *target = the argmax (with
// in.constraint: the likeliest allowed token after `path`, in.out and then the path's tokens)
int32_t verify_greedy_step(const verify_input & in, const float * logits, std::span<const int32_t> children,
                           llama_token * target, std::span<const llama_token> path = {});
// the child of `children` whose token is t, or -1
int32_t verify_greedy_child(const verify_input & in, std::span<const int32_t> children, llama_token t);

// the target's greedy token at a node whose output is `path` (in.out + the path's tokens, when
// constrained): sampling_argmax, or constrained_argmax with in.constraint
llama_token verify_greedy_token(const verify_input & in, const float * logits, std::span<const llama_token> path);

// The target's distribution at one node, sampling_dist(logits, sp) (sp.temp > 0), with rejected
// draft tokens removed: SpecInfer's residual for one-hot draft proposals. Without top-k / top-p the
// softmax is kept implicit (a linear pass, no sort of the vocabulary).
class verify_target {
public:
    verify_target(const float * logits, int32_t n_vocab, const sampling_params & sp);

    // the residual probability of t (0 for rejected tokens and tokens outside the support)
    double p(llama_token t) const;
    // removes t: p(t) = 0, the rest renormalised; no-op when already removed
    void reject(llama_token t);
    // draws from the residual with a coin in [0, 1)
    llama_token draw(float coin) const;

private:
    double p_full(llama_token t) const; // before any rejection

    const float *           logits_;
    int32_t                 n_vocab_;
    float                   temp_;
    bool                    dense_;        // true: softmax(logits / temp) over all tokens, kept implicit
    float                   max_logit_;    // dense: the largest logit
    double                  sum_exp_;      // dense: sum of exp((l - max_logit) / temp)
    std::vector<token_prob> sparse_;       // !dense: sampling_dist(logits, sp)
    double                  total_ = 1.0;  // mass before rejections: 1 dense, the sum of sparse_ (so that
                                           // total_ - rejected_p_ cancels exactly)
    std::vector<llama_token> rejected_;    // [n_rejected] removed tokens, ascending
    double                  rejected_p_ = 0.0; // their total p_full
};

// SAMPLING at one node (SpecInfer's multi-candidate speculative sampling with one-hot proposals):
// for each child in order, accept it with probability target.p(token) (a coin below it), else
// target.reject(token). Returns the accepted child or -1; target then holds the residual.
//
// Every editspec drafter is deterministic given the history (lookup, reuse, copy, retrieval, and the
// draft model drafting greedily), so each candidate's proposal q is one-hot and the acceptance
// ratio p(x)/q(x) is p(x). draft_node::p_draft is not used: it is the draft model's probability of a
// token it chose by argmax, not the probability it sampled with, and using it would bias the output.
int32_t verify_sampling_step(const verify_input & in, std::span<const int32_t> children, verify_target & target,
                             rng_state & rng);

struct token_logit {
    llama_token token;
    float       logit;
};

// the k largest logits, best first (ties: lowest id, as sampling_argmax). One linear pass.
std::vector<token_logit> verify_top_logits(const float * logits, int32_t n_vocab, int32_t k);

// EfficientEdit eq. 9: H_norm = -sum p_i log p_i / log k over the target's k most probable tokens,
// p = softmax(logits) at temperature 1 (the model's own confidence), renormalised over the k when
// renorm. k <= 1: 0.
double verify_entropy_norm(const float * logits, int32_t n_vocab, int32_t k, bool renorm);
// EfficientEdit eq. 10: tau = ceil(k * H_norm) when >= 1, else 1; capped at k
int32_t verify_entropy_tau(const float * logits, int32_t n_vocab, int32_t k, bool renorm);

} // namespace editspec
