// Prompt lookup drafters: llama.cpp's ngram-simple and the longest suffix match.
//
// ref: llama.cpp common/ngram-map.cpp common_ngram_simple_draft (PR 18471), pinned commit de3ff81;
//      Saxena, "Prompt Lookup Decoding" (2023); vLLM v1/spec_decode/ngram_proposer.py
#include "editspec/drafters.h"
#include "editspec/lookup.h"
#include "editspec/match.h"

#include <algorithm>
#include <climits>

namespace editspec {

const char * lookup_mode_name(lookup_mode mode) {
    switch (mode) {
        case LOOKUP_MODE_NGRAM_SIMPLE: return "ngram-simple";
        case LOOKUP_MODE_LONGEST:      return "lookup-longest";
        default:                       return "lookup-unknown";
    }
}

// Transcribed from common_ngram_simple_draft with tokens = history[0 .. L-1) and
// sampled = history[L-1]; the comments keep llama.cpp's names (cur_len = L - 1).
token_vec lookup_ngram_simple(std::span<const llama_token> history, const lookup_params & params) {
    token_vec draft;
    if (history.empty() || params.n_max <= 0 || params.m_max <= 0) {
        return draft;
    }
    const size_t n       = (size_t) params.n_max; // n_draft_min: size of the n-gram looked up
    const size_t m       = (size_t) params.m_max; // n_draft_max: most tokens copied
    const size_t cur_len = history.size() - 1;    // tokens.size(); history[cur_len] is `sampled`

    // "We need at least n_draft_min + n_draft_max + 1 tokens."
    if (cur_len <= n + m + 1) {
        return draft;
    }

    // pattern = tokens[cur_len-n+1 .. cur_len) + sampled = the last n tokens of the history
    const llama_token * pattern = history.data() + history.size() - n;

    // backwards from cur_len-n-1: skips the tail (start cur_len-n+1) and the start cur_len-n;
    // j = 0 is never tried (match_pos 0 means "no match")
    size_t match_pos = 0;
    for (size_t j = cur_len - n - 1; j > 0; --j) {
        if (std::equal(pattern, pattern + n, history.data() + j)) {
            match_pos = j;
            break;
        }
    }
    if (match_pos == 0) {
        return draft;
    }

    // copies from tokens only: the continuation stops before `sampled`
    const size_t copy_max = std::min(m, cur_len - (match_pos + n));
    if (copy_max < n) {
        return draft;
    }
    draft.assign(history.begin() + match_pos + n, history.begin() + match_pos + n + copy_max);
    return draft;
}

token_vec lookup_longest(std::span<const llama_token> history, const lookup_params & params, int32_t * n_matched) {
    token_vec draft;
    const int64_t L     = (int64_t) history.size();
    const int64_t n_max = params.n_max;
    const int64_t n_min = std::max<int64_t>(params.n_min, 1);
    if (L < 2 || n_max < n_min || params.m_max <= 0) {
        return draft;
    }
    const llama_token * h    = history.data();
    const llama_token   last = h[L - 1];

    // e: end (exclusive) of a candidate occurrence; h[e] is the first token of its continuation.
    // Scan from the most recent; a later e only wins with a strictly longer match.
    int64_t best_e = -1;
    int64_t best_k = n_min - 1;
    for (int64_t e = L - 1; e >= 1; --e) {
        if (h[e - 1] != last) {
            continue; // the common case, without a call
        }
        // common suffix of h[0 .. e) and h[0 .. L), capped at n_max (and at e)
        const int64_t k = match_suffix_len(history, e, history, n_max);
        if (k > best_k) {
            best_k = k;
            best_e = e;
            if (k == n_max) {
                break; // nothing earlier can beat the cap, and ties go to the most recent
            }
        }
    }
    if (best_e < 0) {
        return draft;
    }
    const int64_t end = std::min(L, best_e + (int64_t) params.m_max);
    draft.assign(h + best_e, h + end);
    if (n_matched) {
        *n_matched = (int32_t) best_k;
    }
    return draft;
}

token_vec lookup_draft(std::span<const llama_token> history, const lookup_params & params, int32_t * n_matched) {
    switch (params.mode) {
        case LOOKUP_MODE_NGRAM_SIMPLE:
            if (n_matched) *n_matched = params.n_max; // ngram-simple matches exactly n tokens
            return lookup_ngram_simple(history, params);
        case LOOKUP_MODE_LONGEST:
            return lookup_longest(history, params, n_matched);
        default:
            return {};
    }
}

uint8_t lookup_conf(int32_t n_matched) {
    if (n_matched <= 2) return (uint8_t) std::max(1, n_matched);
    if (n_matched <= 4) return 3;
    if (n_matched <= 7) return 4;
    if (n_matched <= 11) return 5;
    return 6;
}

void lookup_drafter::propose(std::span<const llama_token> history, draft_tree & tree, int32_t budget) {
    if (budget <= 0) {
        return;
    }
    int32_t n_matched = 0;
    const token_vec draft = lookup_draft(history, params, &n_matched);
    if (draft.empty()) {
        return;
    }
    n_proposed += (int64_t) draft.size();
    // budget counts new nodes; INT32_MAX-safe
    const int32_t max_nodes = (int32_t) std::min<int64_t>((int64_t) tree.size() + budget, INT32_MAX);
    tree.add_path(-1, draft, DRAFT_SOURCE_LOOKUP, max_nodes, lookup_conf(n_matched));
}

// the table's rows (drafters.h)
namespace {

std::unique_ptr<drafter_i> make_lookup(const drafter_desc & self, const drafter_inputs &, std::string *) {
    lookup_params lp;
    lp.mode = std::string(self.name) == "lookup" ? LOOKUP_MODE_NGRAM_SIMPLE : LOOKUP_MODE_LONGEST;
    return std::make_unique<lookup_drafter>(lp);
}

} // namespace

std::span<const drafter_desc> lookup_drafters() {
    static const drafter_desc rows[] = {
        {"lookup", "prompt lookup, llama.cpp's ngram-simple defaults (n = 12, m = 48)", 0, VERIFY_POLICY_GREEDY,
         DRAFTER_LOSSY_NOT_REUSE, make_lookup},
        // auto's second, without datastores (with them FastCoder takes its place: fastcoder.cpp)
        {"lookup-longest", "prompt lookup, the longest match n = 12 .. 1, m = 48", 0, VERIFY_POLICY_GREEDY,
         DRAFTER_LOSSY_NOT_REUSE, make_lookup, 2,
         [](const drafter_inputs & in) { return in.datastores.empty() && in.repo_datastores.empty(); }},
    };
    return rows;
}

} // namespace editspec
