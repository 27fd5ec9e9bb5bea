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
};

struct exactness_result {
    std::string error;           // non-empty: the check could not run
    int32_t n   = 0;             // first pass size whose rows differ, 0 = none
    int32_t row = -1;            // its first differing row, -1 = every row of every size matched
    double rel  = 0;             // that row's relative L2 difference from one-token decoding
    bool argmax_differs = false; // the greedy token of that row differs too
    int32_t n_sizes = 0;         // pass sizes checked
};

// every size up to 16, then sizes around the kernels' tile and block edges, up to n_max
std::vector<int32_t> exactness_batch_sizes(int32_t n_max);

// decodes n_max random tokens one at a time after the prefix (the reference), then a pass of each
// size from the same prefix, and reports the first pass whose rows are not the reference's bit for bit
exactness_result exactness_check(const model & m, const exactness_params & p);

} // namespace editspec
