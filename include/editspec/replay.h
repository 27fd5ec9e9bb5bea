// Oracle replay (docs/results/design-notes/cost-curve-and-oracle.md): what a drafter can reach when the target's greedy output is known.
//
//     editspec::lookup_drafter lookup;                       // longest match, n 12..1, m 48
//     editspec::replay_result r = editspec::oracle_replay(ctx_tokens, ref_tokens, lookup, {});
//     printf("%.2f tokens/pass, %.2fx\n", r.tokens_per_pass(), r.speedup());
//
// The reference output (EOS appended) stands in for the target's greedy output. Each target pass:
//
//     history = context + reference[0 .. pos)          (every committed token)
//     tree    = drafter.propose(history, budget)        (a path or a tree of draft tokens)
//     a       = deepest tree path equal to reference[pos ..]   (the accepted tokens)
//     pos    += a + 1                                   (plus the target's own token; the last
//                                                        pass stops at the end of the reference)
//
// The first output token is drafted like any other: the prompt pass can carry a draft too.
// A pass verifies 1 + tree.size() tokens (the last committed token and every draft node), and
// costs t(1 + tree.size()) on the cost curve (clairvoyant sizing: t(1 + a)). Autoregressive
// decoding costs N * t(1) for N reference tokens, so
//
//     speedup = N * t(1) / sum over passes of t(1 + drafted)
//
// Everything here is pure (no model): the functions run in tests and in `editspec bench --oracle`.
#pragma once

#include "editspec/cost.h"
#include "editspec/dataset.h"
#include "editspec/decoder.h"
#include "editspec/draft.h"
#include "editspec/engine.h"

#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

namespace editspec {

// ----------------------------------------------------------------------------
// (passes are costed on a cost_model, cost.h: cost_model_design() or a measured one, relative)

// ----------------------------------------------------------------------------
// draft sizing: how many draft tokens one pass may verify

enum replay_sizing {
    REPLAY_SIZING_FIXED       = 0, // budget = cap every pass (-1 = unlimited)
    REPLAY_SIZING_GROW_SHRINK = 1, // budget starts at cap_init; after a fully accepted draft it
                                   // doubles (at most cap_max), after a rejection it becomes
                                   // accepted + 2; a pass with no draft leaves it alone
    REPLAY_SIZING_CLAIRVOYANT = 2, // the drafter proposes with budget cap, but the pass verifies
                                   // (and pays for) only the tokens that will be accepted: a bound
    REPLAY_SIZING_DECODER     = 3, // as generate_spec sizes each pass (tree_for_pass): spec's fixed
                                   // cap or its cost model, with running acceptance statistics
};

struct replay_params {
    replay_sizing sizing   = REPLAY_SIZING_FIXED;
    int32_t       cap      = -1; // FIXED, CLAIRVOYANT: most draft nodes per pass, -1 = unlimited
    int32_t       cap_init = 48; // GROW_SHRINK: first budget, tokens (48: start at lookup's m)
    int32_t       cap_max  = 48; // GROW_SHRINK: largest budget, tokens
    const spec_params * spec = nullptr; // DECODER: sizing (draft_max, tree_max, cost) as the decoder
    accept_stats * stats = nullptr;     // DECODER: statistics carried across items (null: per item)
    int32_t max_leaves = 1;             // DECODER: paths per pass (chain-only when 1)
    bool    hindsight  = false;         // DECODER: statistics from every offered node once the output
                                        // reaches it (accept_hindsight), not only from the sent ones
};

struct replay_result {
    int64_t n_tokens   = 0;   // reference tokens produced, EOS included
    int64_t n_passes   = 0;   // target passes
    int64_t n_drafts   = 0;   // passes that carried a draft
    int64_t n_drafted  = 0;   // draft tokens verified (tree nodes; clairvoyant: accepted ones)
    int64_t n_accepted = 0;   // draft tokens accepted
    int64_t n_cut      = 0;   // DECODER: passes whose sent draft was accepted whole while the offered
                              // tree held more accepted tokens (the sizing cut it short)
    double  cost       = 0.0; // sum over passes of t(1 + drafted)
    double  cost_ar    = 0.0; // n_tokens * t(1): autoregressive decoding

    double tokens_per_pass() const { return n_passes > 0 ? (double) n_tokens / (double) n_passes : 0.0; }
    double speedup() const { return cost > 0.0 ? cost_ar / cost : 0.0; }
    // totals over items: ratios of sums, as docs/results/design-notes/cost-curve-and-oracle.md reports them
    void add(const replay_result & other);
};

// Replays one item through `drafter` (begin(context) first, accept() after every pass with the
// tokens the pass committed). reference must end with EOS if EOS is to be counted.
//
// Example: context [5, 6, 7], reference [5, 6, 8, 2] (2 = EOS), a drafter that proposes
// [5, 6, 7] first and nothing after:
//   pass 1: history [5,6,7]         draft [5,6,7]  accepted [5,6]  + target 8  -> pos 3
//   pass 2: history [5,6,7,5,6,8]   no draft                       + target 2  -> pos 4
//   2 passes, 4 tokens: 2.0 tokens per pass; cost t(4) + t(1) = 1.525 + 1 vs 4 * t(1) -> 1.58x
replay_result oracle_replay(std::span<const llama_token> context, std::span<const llama_token> reference,
                            drafter_i & drafter, const replay_params & params = {},
                            const cost_model & cost = cost_model_design());

// a drafter made of a function history -> one draft path (truncated to the budget)
struct replay_fn_drafter : drafter_i {
    using draft_fn = std::function<token_vec(std::span<const llama_token> history)>;
    explicit replay_fn_drafter(draft_fn fn, uint8_t source = DRAFT_SOURCE_TEST) : fn(std::move(fn)), src(source) {}

    const char * name() const override { return "fn"; }
    uint8_t source() const override { return src; }
    void begin(std::span<const llama_token> prompt) override {}
    void propose(std::span<const llama_token> history, draft_tree & tree, int32_t budget) override;
    void accept(std::span<const llama_token> accepted) override {}

    draft_fn fn;
    uint8_t  src;
};

// several drafters into one tree, as the decoder runs them: each proposes in turn with what the
// others left of the budget, and every one hears every accept (not owned)
struct drafter_chain : drafter_i {
    explicit drafter_chain(std::vector<drafter_i *> ds) : ds(std::move(ds)) {}

    const char * name() const override { return "chain"; }
    uint8_t source() const override { return DRAFT_SOURCE_TEST; }
    void begin(std::span<const llama_token> prompt) override;
    void propose(std::span<const llama_token> history, draft_tree & tree, int32_t budget) override;
    void accept(std::span<const llama_token> accepted) override;

    std::vector<drafter_i *> ds;
};

// ----------------------------------------------------------------------------
// tokens of a dataset item for the replay

// The reading that reproduces the figures of docs/results/design-notes/cost-curve-and-oracle.md (tests/bench/test-oracle.cpp):
//   context   = tokenize(text.context,   add_special = true,  parse_special = false)  (BOS first)
//   reference = tokenize(text.reference, add_special = false, parse_special = false) + EOS
// i.e. the two texts are tokenized separately, as a server sees a prompt and then its output.
void replay_tokenize(const model & m, const dataset_text & text, token_vec & context, token_vec & reference);

} // namespace editspec
