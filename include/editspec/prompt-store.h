// The prompt store: past prompts' KV states kept in RAM, so that a file a slot has since moved on
// from (to another file, another conversation, the apply after an edit) is loaded back instead of
// encoded again. llama-server's --cache-ram does the same; editspec's serve shares one store between
// its slots.
//
//     prompt_store store(8192ull << 20);          // bytes
//     store.prepare(ctx, prompt, pc);             // before the request's prefill, in the slot's job
//     context_prefill_cached(ctx, b, ...);        // then reuses what ctx holds, as pie.h says
//
// prepare() first keeps ctx's cached prompt in the store when the request would lose at least
// MIN_TOKENS of it, then loads the stored prompt whose reuse is worth most (prompt_reuse_plan::score:
// exact tokens before stale ones) when that beats what ctx holds by MIN_TOKENS exact tokens: llama_state_seq_get_data / set_data of sequence 0, with the tokens and their
// stale marks. A loaded state is the same bytes the slot held, in the same cell order, so lossless
// reuse stays exact (tested). States are evicted least recently used past the byte budget, and an
// evicted state's buffer is kept for the next save that fits it: memory written once is written
// again at memcpy speed, while fresh pages cost a fault each (a 588 MB state, a 3,000-token file on
// the ds13 shape, is ~150,000 faults; 2-3 ms a MB on a VM whose host backs memory at first touch),
// and a save holds every slot's steps while it runs.
//
// Lower layer: engine only. Thread-safe: one store serves every slot's job.
#pragma once

#include "editspec/engine.h"
#include "editspec/pie.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

namespace editspec {

struct prompt_store_stats {
    int64_t bytes    = 0; // held now
    int32_t entries  = 0; // held now
    int64_t saved    = 0; // states kept, ever
    int64_t restored = 0; // states loaded into a context, ever
    int64_t recycled = 0; // states saved into an evicted state's buffer, ever
};

class prompt_store {
public:
    // a state must save or win at least this many tokens to be worth a copy of the whole sequence
    static constexpr int32_t MIN_TOKENS = 64;

    explicit prompt_store(size_t budget_bytes) : budget_(budget_bytes) {}

    // Before a request whose prompt is `prompt` decodes on ctx: keeps ctx's cached prompt and loads the
    // best stored one (see above). Returns the number of tokens loaded, 0 when ctx keeps its own. A
    // failed load leaves ctx empty (a cold request), never half-written.
    int32_t prepare(context & ctx, std::span<const llama_token> prompt, const prompt_cache_params & pc);

    prompt_store_stats stats() const;

    // the most tokens of `prompt` a stored prompt holds (prompt_reuse_plan::n_reused); 0 = none
    int32_t best_reuse(std::span<const llama_token> prompt, const prompt_cache_params & pc) const;

private:
    struct entry { // unchanged once stored (a load reads it outside the lock) until evicted unshared
        token_vec tokens;
        std::vector<uint8_t> stale;
        std::unique_ptr<uint8_t[]> state; // llama_state_seq_get_data of sequence 0 (not zeroed first: a
        size_t n_state = 0;               // state is hundreds of MiB, written once)
        size_t cap = 0;                   // bytes of `state` (a recycled buffer may hold more than n_state)
        size_t bytes() const { return cap + tokens.size() * sizeof(llama_token) + stale.size(); }
    };
    struct slot {
        std::shared_ptr<entry> e;
        uint64_t last_used = 0;
    };
    struct spare { // an evicted state's buffer, its pages written
        std::unique_ptr<uint8_t[]> buf;
        size_t cap = 0;
    };

    void save(context & ctx); // ctx's cached prompt into the store
    // mu_ held: a buffer for a state of n bytes (and `extra` bytes of tokens beside it), counted in the
    // budget: a spare that fits, else a new one, room made by dropping spares, then evicting the least
    // recently used. No buffer: n never fits
    spare take_buffer(size_t n, size_t extra);
    void drop(size_t i); // mu_ held: held_[i] out; its buffer kept as a spare unless a load holds it

    const size_t budget_;
    mutable std::mutex mu_;
    std::vector<slot> held_;
    std::vector<spare> spares_; // in stats_.bytes too
    uint64_t clock_ = 0;
    prompt_store_stats stats_;
};

} // namespace editspec
