// CopySpec: when the last γ tokens occurred before in the context or the output, draft
// the tokens that followed them.
//
//     editspec::copy_drafter copy(editspec::copy_params{});   // γ = 3, |S| = 10, the paper's first match
//     copy.begin(prompt);                                       // indexes every γ-gram of the prompt
//     copy.propose(history, tree, /*budget=*/16);              // indexes what was committed since, drafts
//
// The index (copy_index) holds every γ-gram of context + output in a hash table, updated in O(1)
// per committed token by a rolling hash (§3.1: the cost per step does not grow with the context,
// unlike lookup-longest's backward scan). Variants, each a drafter name (methods.h):
//
//   copy          the paper's rule: the first occurrence of the γ-gram supplies |S| = 10 tokens
//   copy-recent   its most recent occurrence (the nearest repetition, as lookup-longest takes)
//   copy-tree     up to 4 occurrences with different continuations, each a branch of one tree
//   copy-ext      the paper's first match, then while the output keeps following that source the
//                 copy goes on from it without a new match and doubles its length (10, 20, 40, 64)
//
// With the cost model the sizing may send fewer tokens than |S|; nodes carry DRAFT_SOURCE_COPY and a
// confidence class from the source's streak (proposals in a row the output followed), so the sizing
// learns how far a copy that has held for a while keeps holding.
#pragma once

#include "editspec/draft.h"
#include "editspec/engine.h"

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

namespace editspec {

enum copy_match : uint8_t {
    COPY_MATCH_FIRST    = 0, // the earliest occurrence (CopySpec §3.2's footnote)
    COPY_MATCH_RECENT   = 1, // the latest occurrence
    COPY_MATCH_BRANCHES = 2, // several occurrences, most recent first, one branch per continuation
};

struct copy_params {
    int32_t    gamma      = 3;     // γ: tokens matched
    int32_t    n_copy     = 10;    // |S|: tokens copied per attempt
    copy_match match      = COPY_MATCH_FIRST;
    int32_t    n_branches = 4;     // COPY_MATCH_BRANCHES: most branches
    bool       extend     = false; // follow the source while the output does, doubling the copy
    int32_t    n_copy_max = 64;    // extend: the longest copy
};

// Every γ-gram of a token stream, by a rolling polynomial hash. Positions are end positions: the
// γ-gram ending at e is tokens[e-γ .. e), and tokens[e] (when it exists) is what followed it.
//
//   tokens  a b c d a b c x        γ = 3: "a b c" ends at 3 and 7; first = 3, latest = 7
//   position 0 1 2 3 4 5 6 7 8
class copy_index {
public:
    explicit copy_index(int32_t gamma = 3);

    void clear();
    // appends tokens, indexing each γ-gram they complete: O(1) per token (one table update)
    void append(std::span<const llama_token> tokens);
    const token_vec & tokens() const { return tokens_; }
    int32_t size() const { return (int32_t) tokens_.size(); }
    int32_t gamma() const { return gamma_; }

    // end positions e < size() of earlier occurrences of the last γ tokens, so that tokens[e] exists;
    // -1 when there is none (a hash collision counts as none)
    int32_t first_match() const;
    int32_t recent_match() const;
    // up to max such positions, most recent first; earlier occurrences reached through the chain
    std::vector<int32_t> matches(int32_t max) const;

private:
    struct entry {
        int32_t first = -1; // earliest end position with this hash
        int32_t last  = -1; // latest
    };
    struct hash_mix {
        size_t operator()(uint64_t x) const; // splitmix64's finaliser: the polynomial hash's low bits are weak
    };
    bool same_gram(int32_t e1, int32_t e2) const;

    int32_t gamma_;
    uint64_t pow_ = 1;              // B^(γ-1), to roll the oldest token out
    uint64_t hash_ = 0;             // hash of the last γ tokens (valid once size() >= γ)
    token_vec tokens_;
    std::vector<int32_t> prev_;     // [e]: the previous end position with the same hash, -1
    std::unordered_map<uint64_t, entry, hash_mix> table_;
};

// where copy_params' drafts start in index.tokens(): the positions whose continuations are copied,
// the one to use first first (one position, or several for COPY_MATCH_BRANCHES); empty = no match
std::vector<int32_t> copy_sources(const copy_index & index, const copy_params & params);

class copy_drafter : public drafter_i {
public:
    explicit copy_drafter(const copy_params & params = {});

    const char * name() const override;
    uint8_t source() const override { return DRAFT_SOURCE_COPY; }
    void begin(std::span<const llama_token> prompt) override;
    void propose(std::span<const llama_token> history, draft_tree & tree, int32_t budget) override;
    void accept(std::span<const llama_token> accepted) override;

    const copy_index & index() const { return index_; }
    // did the last propose() add nodes
    bool proposed() const { return proposed_; }

    copy_params params;

private:
    void sync(std::span<const llama_token> history);

    copy_index index_;
    int32_t follow_ = -1;   // the source position the output is following (tokens()[follow_] is next), -1
    int32_t streak_ = 0;    // proposals in a row the output followed
    bool proposed_ = false;
};

// Seed 003 §3.3: copy drafts where the last γ tokens match, the draft model's (`generate`)
// otherwise. Both hear every accept(); the draft model backs off on its own when the sizing drops it.
class copy_fallback_drafter : public drafter_pair<copy_drafter> {
public:
    using drafter_pair::drafter_pair; // (the copy drafter, the draft model)

    const char * name() const override { return "copyspec"; }
    void propose(std::span<const llama_token> history, draft_tree & tree, int32_t budget) override;
};

} // namespace editspec
