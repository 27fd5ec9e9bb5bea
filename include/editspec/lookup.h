// Prompt lookup: draft the tokens that followed an earlier occurrence of the sequence's tail.
//
//     editspec::lookup_params lp;                  // longest match, n = 12 down to 1, m = 48
//     editspec::token_vec d = editspec::lookup_longest(history, lp);
//
//     editspec::lookup_drafter lookup(lp);         // the same inside the drafter interface
//     lookup.begin(prompt);
//     lookup.propose(history, tree, /*budget=*/16); // adds d (at most 16 new nodes) as one path
//
// Two variants, both over every committed token (context + output so far):
//   - ngram_simple: llama.cpp's common_ngram_simple_draft (common/ngram-map.cpp, PR 18471) at the
//     pinned commit, quirks included (see lookup_ngram_simple);
//   - longest: "prompt lookup decoding" (Saxena 2023; vLLM's NgramProposer): the longest suffix
//     of the history, n_max tokens down to n_min, that occurred before; its most recent occurrence
//     supplies the draft.
//
// Both are pure functions over spans; lookup_drafter is a thin stateless wrapper, so one drafter
// may serve any number of requests, but a drafter object belongs to one thread.
#pragma once

#include "editspec/draft.h"
#include "editspec/engine.h"

#include <cstdint>
#include <span>

namespace editspec {

enum lookup_mode : uint8_t {
    LOOKUP_MODE_NGRAM_SIMPLE = 0, // llama.cpp's ngram-simple: one n, quirks included
    LOOKUP_MODE_LONGEST      = 1, // longest suffix match from n_max down to n_min
};

const char * lookup_mode_name(lookup_mode mode);

struct lookup_params {
    lookup_mode mode  = LOOKUP_MODE_LONGEST;
    int32_t     n_max = 12; // longest n-gram matched, tokens (ngram_simple: the only n, llama.cpp size_n)
    int32_t     n_min = 1;  // shortest n-gram matched, tokens (longest only)
    int32_t     m_max = 48; // most draft tokens (llama.cpp size_m)
};

// llama.cpp's common_ngram_simple_draft(config{n, m}, tokens, sampled) with
// tokens = history[0 .. L-1) and sampled = history[L-1] (the caller keeps the last committed
// token apart, as llama-server and speculative-simple do). With L = history.size(), n = n_max,
// m = m_max:
//   1. no draft while L - 1 <= n + m + 1 (the history must hold more than n + m + 2 tokens);
//   2. pattern = the last n tokens of the history;
//   3. search start positions j = L-n-2 down to 1 for history[j .. j+n) == pattern and take the
//      first hit, i.e. the most recent occurrence; j = L-n (the tail itself) and j = L-n-1 (the
//      tail shifted by one) are never tried, nor is j = 0 ("position 0 == no match");
//   4. the draft is history[j+n .. j+n+c), c = min(m, L-1 - (j+n)): it never copies the last
//      token (that is `sampled`, outside llama.cpp's `tokens`);
//   5. no draft if c < n.
//
// Example, n = 2, m = 3 (so L must be > 7):
//   history = [9, 1, 2, 3, 4, 5, 6, 1, 2]   L = 9, pattern [1, 2]
//   j = 5: [5, 6] no; j = 4: [4, 5]; ... j = 1: [1, 2] yes
//   c = min(3, 8 - 3) = 3 -> draft [3, 4, 5]
// With history = [1, 2, 3, 4, 5, 6, 7, 1, 2] the only earlier [1, 2] is at j = 0: no draft.
token_vec lookup_ngram_simple(std::span<const llama_token> history, const lookup_params & params);

// Longest suffix match. For every earlier end position e (1 <= e <= L-1, so at least one token
// follows), k(e) = length of the common suffix of history[0 .. e) and history, capped at n_max.
// The winner is the e with the largest k(e) >= n_min; among equals the largest e, i.e. the most
// recent occurrence (the nearest repetition is the likeliest to continue alike in code being
// rewritten; llama.cpp's ngram-simple also takes the most recent; with this rule the oracle replay
// gives the 7.71 tokens per pass of docs/results/design-notes/cost-curve-and-oracle.md on CanItEdit). Occurrences may overlap the tail. The
// draft is history[e .. min(L, e + m_max)), which may run into the tail (repetitive text copies
// itself).
//
// Example, n_max = 3, n_min = 1, m_max = 4:
//   history = [1, 2, 3, 9, 2, 3, 7, 8, 5, 1, 2, 3]   (L = 12, tail ... 1, 2, 3)
//   e = 3: [1, 2, 3] matches 3 tokens; e = 6: [.., 9, 2, 3] matches 2 ([2, 3])
//   k = 3 wins over the more recent k = 2 -> draft history[3 .. 7) = [9, 2, 3, 7]
// With history = [4, 2, 3, 7, 1, 2, 3] the best is e = 3 (k = 2: [2, 3]); the draft runs into
// the tail: [7, 1, 2, 3].
//
// One backward scan: O(L * matched length) per call, at most O(L * n_max): microseconds on 8k-token
// histories beside a target pass's milliseconds (tests/draft/test-lookup.cpp times it), so no
// n-gram index is kept.
token_vec lookup_longest(std::span<const llama_token> history, const lookup_params & params,
                         int32_t * n_matched = nullptr);

// dispatches on params.mode; *n_matched (when given) gets the length of the matched suffix
token_vec lookup_draft(std::span<const llama_token> history, const lookup_params & params,
                       int32_t * n_matched = nullptr);

// confidence class of a draft whose context matched n tokens: 1, 2, 3-4, 5-7, 8-11, 12+ -> 1 .. 6
uint8_t lookup_conf(int32_t n_matched);

// The drafter: adds lookup_draft(history) under the root as one path, merged with what other
// drafters already put there; at most `budget` new nodes (tokens shared with existing paths are
// free). Nodes carry DRAFT_SOURCE_LOOKUP and p_draft = NAN.
struct lookup_drafter : drafter_i {
    explicit lookup_drafter(const lookup_params & params = {}) : params(params) {}

    const char * name() const override { return lookup_mode_name(params.mode); }
    uint8_t source() const override { return DRAFT_SOURCE_LOOKUP; }
    void begin(std::span<const llama_token> prompt) override {}
    void propose(std::span<const llama_token> history, draft_tree & tree, int32_t budget) override;
    void accept(std::span<const llama_token> accepted) override {}

    lookup_params params;
    int64_t n_proposed  = 0; // draft tokens returned by the lookup (before the budget)
};

} // namespace editspec
