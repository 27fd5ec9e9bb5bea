// EfficientEdit's Reuse drafter (§III-A): the code being edited is the draft.
//
//     editspec::reuse_drafter reuse(original_tokens);      // reuse_params{}: the measured default
//     std::vector<editspec::drafter_i *> ds = {&reuse};    // or {&reuse, &lookup}: one tree
//     editspec::generate_spec(*ctx, prompt, gp, sp, ds);
//
// The drafter keeps a pointer p into the original code's tokens:
//
//   in sync      propose() adds original[p .. p + min(budget, m_max)) as one path; accept() moves p
//                over the committed tokens that equal original[p ..]. The first committed token that
//                differs is the target's rejection: an edit starts here (the paper's "self-editing
//                positioning"), and the drafter leaves sync, remembering p as the edit point.
//   out of sync  (the Generate phase: other drafters, e.g. a draft model, produce the edit) each
//                propose() tries to re-synchronise: it matches a suffix of the committed tokens
//                against the original and, where they match, drafts what follows there. The
//                paper says only "prefix matching"; its code (find_suffix_and_return_remaining)
//                takes the first occurrence of the last 7 output tokens in the rest of the
//                original. Which rule picks the right place is measured (tests/draft/test-reuse.cpp,
//                oracle replay on CanItEdit); the rules are reuse_sync.
//   confidence   nodes carry a class the decoder's acceptance statistics are kept by: a re-sync by
//                its match length (1 .. 3), in sync by how many tokens have come out in step with the
//                original since the last (re)sync (4: < 4, 5: < 16, 6: < 64, 7: more). A long
//                unchanged stretch predicts more unchanged tokens; per-depth statistics alone cannot
//                see it (oracle replay on CanItEdit: docs/results/design-notes/reuse-sync-rules.md).
//   candidates   a proposal may hold several re-sync candidates as sibling branches; accept()
//                follows the candidate whose continuation the committed tokens took (in sync
//                again) or, when none took all of them, stays out of sync.
//
// Which re-sync rule and candidate count is the default was measured by oracle replay on CanItEdit
// (docs/results/design-notes/reuse-sync-rules.md; tests/draft/test-reuse.cpp prints the table).
//
// The pure pieces (reuse_sync_candidates) take spans, so tests need no model. A reuse_drafter
// belongs to one request and one thread.
#pragma once

#include "editspec/draft.h"
#include "editspec/engine.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace editspec {

// how an out-of-sync drafter finds its place in the original again. Every rule looks at end
// positions e of the original (the draft would continue with original[e]) and the match length
// k(e) = the common suffix of original[0 .. e) and the committed tokens (capped at k_max).
enum reuse_sync : uint8_t {
    REUSE_SYNC_PAPER    = 0, // EfficientEdit's code: k = 7 exactly, the first occurrence lying wholly
                             // in the original after the edit point p
    REUSE_SYNC_LONGEST  = 1, // the largest k(e) >= k_min anywhere; ties: the first at/after p, else the
                             // last before p
    REUSE_SYNC_K_DOWN   = 2, // k = k_max (8) down to k_min (2): the first k that occurs anywhere, at its
                             // first occurrence in the original (the naive rule)
    REUSE_SYNC_NEAREST  = 3, // the smallest e >= p with k(e) >= k_min (the nearest match after the edit
                             // point); when there is none, REUSE_SYNC_LONGEST
    REUSE_SYNC_BRANCHES = 4, // up to n_branch candidates as sibling branches: NEAREST's, LONGEST's, then
                             // the next longest matches; the budget is shared between them
};

// "paper", "longest", "k-down", "nearest", "branches"
const char * reuse_sync_name(reuse_sync rule);

struct reuse_params {
    reuse_sync sync     = REUSE_SYNC_BRANCHES;
    int32_t    m_max    = 256; // most draft tokens per path (docs/results/design-notes/cost-curve-and-oracle.md: "reuse up to 256")
    int32_t    k_min    = 1;   // shortest suffix match that re-syncs, tokens (PAPER: the only k, 7)
    int32_t    k_max    = 64;  // longest suffix compared, tokens (K_DOWN: where it starts, 8)
    int32_t    n_branch = 3;   // BRANCHES: most candidates per proposal
    // re-sync drafts are as long as their evidence: at most resync_len << (k - 1) tokens for a
    // k-token match (4 after 1 token, 8 after 2, ...), 0 = m_max. Once a re-sync is confirmed the
    // drafter is in sync and drafts m_max again.
    int32_t    resync_len = 4;
    // Generate phase (efficientedit_drafter, efficientedit.h): the shortest match, after the committed tokens and a node
    // of the draft model's path, below which the original's continuation is attached; 0 = never
    int32_t    attach_k_min = 2;
};

// the defaults of a rule: PAPER k 7; K_DOWN k 8 .. 2; the others k_min 1, k_max 64
reuse_params reuse_params_for(reuse_sync rule);

struct reuse_candidate {
    int32_t pos; // original[pos] is the first draft token
    int32_t k;   // committed tokens matched before pos
};

// The re-sync rule as a pure function: the candidates (best first; at most one unless BRANCHES)
// for committed tokens `history` (everything committed: prompt + output so far) against
// `original`, p = the edit point (where the last sync ended). Candidates at pos == original.size()
// (nothing left to draft) are never returned.
//
// Example, k_min 1: original = [1, 2, 3, 9, 4, 2, 3, 5], history = [... 7, 2, 3], p = 4
//   k(3) = 2 ([2, 3] before original[3]); k(7) = 2 ([2, 3] before original[7])
//   LONGEST: k = 2 at 3 and 7; 7 is the first at/after p       -> pos 7 (draft [5])
//   NEAREST: 7 is the smallest e >= 4 with k >= 1               -> pos 7
//   K_DOWN (k 8 .. 2): k = 2 occurs; its first occurrence       -> pos 3 (draft [9, 4, 2, 3, 5])
//   BRANCHES: NEAREST's 7, then the other k = 2 match            -> pos 7, pos 3
std::vector<reuse_candidate> reuse_sync_candidates(std::span<const llama_token> history,
                                                   std::span<const llama_token> original, int32_t p,
                                                   const reuse_params & params);

class reuse_drafter : public drafter_i {
public:
    explicit reuse_drafter(std::span<const llama_token> original, const reuse_params & params = {});

    const char * name() const override { return "reuse"; }
    uint8_t source() const override { return DRAFT_SOURCE_REUSE; }
    // resets to the start of the original, in sync
    void begin(std::span<const llama_token> prompt) override;
    void propose(std::span<const llama_token> history, draft_tree & tree, int32_t budget) override;
    void accept(std::span<const llama_token> accepted) override;

    // Out of sync, after another drafter has added nodes [first, end) to the tree: below the deepest of
    // them whose path, appended to the committed tokens, matches the original (NEAREST rule, k >=
    // attach_k_min, at or after the edit point), adds the original's continuation (as long as a
    // re-sync's, at most `budget` nodes). accept() follows it like any candidate, after that path.
    // Returns the nodes added.
    int32_t propose_after(std::span<const llama_token> history, draft_tree & tree, int32_t first, int32_t end,
                          int32_t budget);

    bool synced() const { return synced_; }
    int32_t pointer() const { return p_; }      // in sync: the next original token; else the edit point
    const reuse_params & params() const { return params_; }

    // counters
    int64_t n_edits     = 0; // times a committed token left the original (sync lost)
    int64_t n_resyncs   = 0; // re-sync proposals made while out of sync
    int64_t n_resync_ok = 0; // of those, proposals whose first token was committed
    int64_t n_attached  = 0; // continuations attached below another drafter's path (propose_after)

private:
    token_vec    original_;
    reuse_params params_;
    int32_t      p_      = 0;    // see pointer()
    bool         synced_ = true;
    int32_t      run_    = 0;    // tokens committed in step with the original since the last (re)sync
    std::vector<reuse_candidate> live_; // positions the last proposal drafted from (first = main)
    std::vector<token_vec> live_prefix_; // per live_ entry: the path it hangs below (empty: the root)
    bool         live_resync_ = false;  // the last proposal was a re-sync
};

} // namespace editspec
