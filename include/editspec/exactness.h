// Batch invariance: greedy speculative output equals autoregressive output only if every row of an
// n-token pass is bit-identical to decoding that token alone (docs/exactness.md). This measures it
// for a model on the backend it runs on (CPU, or a GPU with --gpu-layers); the tests and
// `editspec check-exact` both call it.
#pragma once

#include "editspec/engine.h"

#include <string>
#include <vector>

namespace editspec {

struct exactness_params {
    int32_t n_threads = 0;              // 0 = all cores
    int32_t n_prefix  = 0;              // random tokens in the KV cache before the checked passes
    int32_t n_max     = 256;            // largest pass checked, tokens (<= 512)
    bool flash_attn   = true;
    ggml_type kv_type = GGML_TYPE_F16;
    int32_t rs_snapshots = CONTEXT_RS_ROLLBACK; // a recurrent model's snapshots (context_params::rs_snapshots)
    // the server's step (check-exact --requests): n_requests at once in one context laid out as `layout`
    // says (a step engine's: step_layout_of; its n_ctx_seq cells a request, in regions of one cache
    // when `regions`, else a stream each), each after its own prefix (n_prefix + 13 * its index),
    // every pass carrying tokens of all of them; each row against that request decoded alone, one
    // token at a time, in a context of its own. Passes of up to min(n_max, 64) tokens a request
    int32_t n_requests = 1;
    context_params layout;
    bool regions = false;
};

struct exactness_result {
    std::string error;           // non-empty: the check could not run
    int32_t n   = 0;             // first pass size whose rows differ, 0 = none
    int32_t row = -1;            // its first differing row, -1 = every row of every size matched
    double rel  = 0;             // that row's relative L2 difference from one-token decoding
    bool argmax_differs = false; // the greedy token of that row differs too
    int32_t n_sizes = 0;         // pass sizes checked
    int32_t n_max = 0;           // the largest of them: exactness_params::n_max, at most CONTEXT_RS_PASS_MAX
                                 // for a recurrent model (the longest pass its decoding makes)
    int32_t request = -1;        // n_requests > 1: the request of that row (row: its index among the request's rows)
    bool mixed = false;          // n_requests > 1: in a pass of mixed sizes (1 + (n - 1) (r + 1) / n_requests
                                 // tokens for request r), else of n tokens each
};

// every size up to 16, then sizes around the kernels' tile and block edges, up to n_max
std::vector<int32_t> exactness_batch_sizes(int32_t n_max);

// decodes n_max random tokens one at a time after the prefix (the reference), then a pass of each
// size from the same prefix, and reports the first pass whose rows are not the reference's bit for bit
// (n_requests > 1: the step's passes above)
exactness_result exactness_check(const model & m, const exactness_params & p);

// Argmax outputs (engine_argmax_outputs) hand back the token ggml_argmax picks on the backend that holds the
// logits. This runs ggml_argmax on rows of ties, NaNs, infinities, signed zeros and denormals (n_vocab values
// each) on this build's first GPU (gpu; the CPU where there is none, or with gpu false) and compares each
// row's token with sampling_argmax's on the host.
struct argmax_check_result {
    std::string error;    // non-empty: the check could not run
    std::string backend;  // the device it ran on, e.g. "CUDA0"
    int32_t rows = 0;     // rows checked
    int32_t row  = -1;    // the first row whose token differs, -1 = none
    llama_token got = -1; // that row's token on the backend
    llama_token want = -1; // and on the host
};
argmax_check_result exactness_check_argmax(int32_t n_vocab, bool gpu = true);

} // namespace editspec
