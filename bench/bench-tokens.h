// Token streams the micro-benchmarks share.
#pragma once

#include "editspec/engine.h"

#include <random>

namespace editspec::bench {

// code-like: a 300-token block repeated with 5% of its tokens changed, 32k vocabulary
inline token_vec code_like(int32_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    token_vec block(300);
    for (auto & t : block) t = (llama_token) (rng() % 32000);
    token_vec code;
    while ((int32_t) code.size() < n) {
        for (llama_token t : block) code.push_back(rng() % 20 == 0 ? (llama_token) (rng() % 32000) : t);
    }
    code.resize(n);
    return code;
}

} // namespace editspec::bench
