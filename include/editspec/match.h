// Suffix matching, the one scan the lookup and Reuse drafters share: how far the tokens before a
// position in one sequence agree with the end of another.
#pragma once

#include "llama.h"

#include <algorithm>
#include <cstdint>
#include <span>

namespace editspec {

// the largest k <= cap with seq[e - k .. e) == tail's last k tokens (k <= e and k <= tail.size())
inline int64_t match_suffix_len(std::span<const llama_token> seq, int64_t e, std::span<const llama_token> tail, int64_t cap) {
    const int64_t L = (int64_t) tail.size();
    cap = std::min({cap, e, L});
    int64_t k = 0;
    while (k < cap && seq[e - 1 - k] == tail[L - 1 - k]) {
        k++;
    }
    return k;
}

} // namespace editspec
