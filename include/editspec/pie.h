// PIE (Positional Integrity Encoding: He et al., "Let the Code LLM Edit Itself When You Edit the
// Code") in one place: how a context's KV cache, which holds one token sequence, follows a new one.
// Request reuse (a file sent again) and document sessions (session.h: the KV follows a user's edits)
// both go through it, with one enum of modes:
//
//     prompt_cache_params pc;                  // KV_REUSE_PREFIX: exact, the default
//     pc.mode = KV_REUSE_PIE;                  // opt-in: spans after an edit too, re-rotated (lossy)
//     prefill_stats st;
//     if (!context_prefill_cached(ctx, b, prompt_but_last, pc, &st)) ...;   // st.cached, st.shifted, st.encoded
//
// KV_REUSE_PREFIX keeps the longest common prefix of the cached tokens and the prompt and encodes
// the rest: a token's KV depends only on the tokens before it and our kernels are batch-invariant
// (docs/exactness.md), so the output equals a cold request's. (A session calls it "recompute": the
// paper's exact reference.)
//
// KV_REUSE_PIE: after the common prefix, the prompt and the cached tokens are matched in spans of at
// least min_block tokens (a user's edits between them), in order; a session knows its one span from
// the edit's token diff. Cached cells outside the spans are removed, each span is shifted to its
// position in the prompt (llama.cpp re-rotates the keys by RoPE: PIE's K <- R(d)K), and only the
// tokens between spans are encoded, each gap attending to everything before it (pie_apply). A kept
// span's KV was computed against the old text before it: it is stale, as in the paper, and the
// answer may differ from a cold request's. Stale tokens are counted per cached token; past drift_max
// of them the prompt is encoded again from the first stale one (drift control).
//
// KV_REUSE_CONFLICT: the paper's "conflict fast encoding" baseline, sessions only (the later cells
// stay at their old positions; session.cpp): requests refuse it.
//
// Lower layer: engine only. Both request modes fall back to the prefix on a cache that cannot shift
// (M-RoPE, recurrent).
#pragma once

#include "editspec/engine.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace editspec {

enum kv_reuse_mode {
    KV_REUSE_PREFIX   = 0, // the common prefix, exact ("recompute" in a session)
    KV_REUSE_PIE      = 1, // the common prefix and every matching span after it, shifted (PIE)
    KV_REUSE_CONFLICT = 2, // sessions only: the later cells kept at their old positions (the paper's baseline)
};

const char * kv_reuse_name(kv_reuse_mode m);                        // "prefix", "pie", "conflict"
bool kv_reuse_parse(const std::string & name, kv_reuse_mode & out); // those, or "recompute" for prefix
std::string kv_reuse_names();                                       // "prefix, recompute, pie, conflict"

struct prompt_cache_params {
    kv_reuse_mode mode = KV_REUSE_PREFIX;
    int32_t min_block  = 32; // PIE: the shortest matching span worth keeping
    int32_t drift_max  = -1; // PIE: most stale tokens a prompt may keep, -1 = no limit
    int32_t refresh    = 0;  // PIE: tokens at the head of each span encoded again (the nearest to the edit)
};

// cached tokens [from, from + n) are prompt tokens [to, to + n)
struct prompt_reuse_block {
    int32_t from = 0;
    int32_t to   = 0;
    int32_t n    = 0;
};

struct prompt_reuse_plan {
    int32_t n_prefix = 0;                   // cached[0, n_prefix) == prompt[0, n_prefix), kept in place
    std::vector<prompt_reuse_block> blocks; // PIE spans after the prefix, ascending in both from and to
    int32_t n_stale = 0;                    // kept tokens that will be stale: stale ones of the prefix, and the blocks
    int32_t n_shifted() const;              // tokens in blocks
    int32_t n_reused() const { return n_prefix + n_shifted(); }
    // what the plan is worth when sources compete (slots, stored prompts): an exact token counts
    // twice a stale one, so of two caches that hold a file, the one that holds it in its place wins
    int64_t score() const { return 2 * (int64_t) n_reused() - n_stale; }
};

// The plan for a prompt over the cached tokens (pure: no KV is touched). stale[i] != 0 marks cached
// token i as stale (empty = none); with drift_max >= 0 the plan keeps at most that many stale tokens
// (blocks go first, then the prefix is cut at its first stale token).
prompt_reuse_plan prompt_reuse_plan_make(std::span<const llama_token> cached, std::span<const uint8_t> stale,
                                         std::span<const llama_token> prompt, const prompt_cache_params & p);

// Carries out a plan on sequence 0 of ctx, which holds the cached tokens at their own positions:
// removes the cells outside the prefix and the blocks, shifts each block to its place (RoPE
// re-rotates its keys) and encodes the gaps at their positions (a gap's tokens attend to what precedes
// them: the mask is by position). Then sequence 0 holds tokens; stale (tokens.size()) marks the blocks' tokens
// and the prefix's old marks (old_stale, as long as the cached tokens or empty). False on a failed
// removal or decode: the cache is then cleared.
bool pie_apply(context & ctx, batch & b, std::span<const llama_token> tokens, const prompt_reuse_plan & plan,
               std::span<const uint8_t> old_stale, std::vector<uint8_t> & stale);

// pc as ctx can honour it: PIE falls back to the prefix on a cache that cannot shift
prompt_cache_params prompt_cache_for(const context & ctx, const prompt_cache_params & pc);

struct prefill_stats {
    int32_t cached  = 0; // prompt tokens kept in place (the common prefix)
    int32_t shifted = 0; // prompt tokens kept from an earlier request at another position (PIE)
    int32_t encoded = 0; // prompt tokens decoded now
    int32_t stale   = 0; // prompt tokens whose KV was computed against another text before them
};

// Decodes `tokens` into sequence 0 from position 0, reusing what the cache holds from an earlier call
// as pc says; every other sequence is emptied. The context's cached prompt becomes `tokens`, with
// its stale marks. False on a decode failure (the cache is then empty).
bool context_prefill_cached(context & ctx, batch & b, std::span<const llama_token> tokens,
                            const prompt_cache_params & pc = {}, prefill_stats * st = nullptr);

} // namespace editspec
