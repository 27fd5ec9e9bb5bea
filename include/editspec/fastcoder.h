// FastCoder / CodeSwift (seeds 002 and 004): retrieval drafts (REST, retrieval.h) from a repository
// datastore D_r and a common one D_c searched in parallel, merged in a trie weighted α·t_r + β·t_c
// (§4.4); a cache of verified retrieved sequences and of the model's own output, searched first once
// it holds l sequences (§4.2); and retrieval timing (§4.3): at a line's first non-whitespace token
// the datastores are searched only with probability p (the skip token), and contexts whose suffix
// found nothing are not searched again (the missing table). The request's own tokens are searched at
// every pass too, and their continuation drafted when its match is at least as long as the stores'.
//
//     editspec::retrieval_cache cache;                        // may outlive requests (a repository's)
//     editspec::fastcoder_drafter fc(target, repo_stores, common_stores, &cache);
//     fc.begin(prompt); fc.propose(history, tree, 32); fc.accept(accepted);
//
// Every part can be switched off (fastcoder_params) for the paper's Table II ablations.
#pragma once

#include "editspec/datastore.h"
#include "editspec/draft.h"
#include "editspec/engine.h"
#include "editspec/retrieval.h"

#include <cstdint>
#include <random>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace editspec {

struct fastcoder_params {
    retrieval_params retrieval;  // n_max 16, n_min 2, 64 occurrences, depth 16, n_paths 4
    float   alpha = 1.0f;        // weight of a repository continuation (α; the paper's α = β = 1)
    float   beta  = 1.0f;        // weight of a common one (β)
    bool    use_repo = true;     // search D_r (off: D_c alone, REST's datastore)
    bool    use_cache = true;    // the cache (§4.2)
    bool    use_timing = true;   // skip token and missing table (§4.3)
    bool    use_context = true;  // the request's own tokens (context and output) searched too; its match wins
                                 // when at least as long as the stores' (§4.2 caches the context; this
                                 // searches it from the first token, not once the cache holds l sequences)
    int32_t cache_min_match = 2; // a cache answer needs a suffix match this long (shorter: the stores)
    int32_t cache_min = 50;      // l: the cache is searched once it holds this many sequences
    int32_t output_chunk = 20;   // the model's output goes into the cache every this many tokens
    float   skip_p = 0.5f;       // p: retrieval probability at a line's first non-whitespace token
    uint32_t seed = 0x5eed;      // the skip token's draws (deterministic per request)
};

// The cache: short token sequences (a context's tail and what followed it), searched by the longest
// suffix of the context as a datastore is, through an index of the token pairs they hold. Small
// (hundreds of sequences), so it lives in memory and may be shared by the requests of one
// repository (bench items, a server's requests); not thread-safe.
class retrieval_cache {
public:
    int32_t n_sequences() const { return n_seq_; }
    int64_t n_tokens() const { return (int64_t) tokens_.size(); }
    void add(std::span<const llama_token> sequence);
    // retrieval_search over the cache: the longest suffix (n_max .. max(n_min, 2)) and its continuations
    int32_t search(std::span<const llama_token> history, const retrieval_params & p, retrieval_trie & trie, float w) const;
    void clear();

private:
    static uint64_t pair_key(llama_token a, llama_token b) { return ((uint64_t) (uint32_t) a << 32) | (uint32_t) b; }
    token_vec tokens_;   // sequences, each followed by DATASTORE_SEP
    std::unordered_map<uint64_t, std::vector<int32_t>> pairs_; // (t[i-2], t[i-1]) -> i
    int32_t n_seq_ = 0;
};

// per-request counts, for reports
struct fastcoder_stats {
    int64_t proposals = 0;      // propose() calls
    int64_t from_cache = 0;     // answered by the cache
    int64_t from_context = 0;   // answered by the request's own tokens
    int64_t searched = 0;       // datastore searches made
    int64_t found = 0;          // ... that found a continuation
    int64_t skipped_token = 0;  // not searched: skip token
    int64_t skipped_missing = 0;// not searched: missing table
};

class fastcoder_drafter : public drafter_i {
public:
    // target: its vocabulary says which tokens end in a line's indentation (the skip token);
    // cache: shared across requests, or null for one of the drafter's own
    fastcoder_drafter(const model & target, std::span<const datastore * const> repo,
                      std::span<const datastore * const> common, retrieval_cache * cache,
                      const fastcoder_params & params = {});

    const char * name() const override { return "fastcoder"; }
    uint8_t source() const override { return DRAFT_SOURCE_RETRIEVAL; }
    void begin(std::span<const llama_token> prompt) override;
    void propose(std::span<const llama_token> history, draft_tree & tree, int32_t budget) override;
    void accept(std::span<const llama_token> accepted) override;

    fastcoder_params params;
    fastcoder_stats stats;

private:
    bool at_line_start(std::span<const llama_token> history) const;
    int32_t search_stores(std::span<const llama_token> history);
    int32_t search_context(std::span<const llama_token> history);

    std::vector<const datastore *> repo_, common_;
    retrieval_cache own_cache_;
    retrieval_cache * cache_;
    std::vector<uint8_t> line_end_;  // token ends in a newline and blanks (the next token starts a line's text)
    std::vector<uint8_t> blank_;     // token is blanks only
    std::unordered_set<uint64_t> missing_;
    std::mt19937 rng_;
    retrieval_trie trie_, trie_repo_, trie_ctx_;
    bool proposed_ = false;           // trie_ holds this pass's proposal: an accepted path goes into the cache
    token_vec recent_;                // the last committed tokens (contexts of cached sequences)
    token_vec prompt_;                // the request's context (its last 8,192 tokens), cached once
    bool prompt_cached_ = false;
    int32_t n_output_ = 0;            // output tokens not yet in the cache
};

} // namespace editspec
