// The prompt store (prompt-store.h).
//
// ref: llama.cpp's server --cache-ram (tools/server: server_prompt_cache), which keeps a slot's
// state when a request that does not continue it arrives and loads the best stored one back
#include "editspec/prompt-store.h"
#include "editspec/clock.h"
#include "editspec/log.h"

#include <algorithm>
#include <chrono>

namespace editspec {

namespace {


// a holds b's tokens as its prefix, with the same stale marks there: b's state is part of a's
bool covers(const token_vec & at, const std::vector<uint8_t> & as, const token_vec & bt, const std::vector<uint8_t> & bs) {
    return at.size() >= bt.size() && std::equal(bt.begin(), bt.end(), at.begin()) &&
           std::equal(bs.begin(), bs.end(), as.begin());
}

} // namespace

void prompt_store::evict(size_t room) {
    while (!held_.empty() && (size_t) stats_.bytes + room > budget_) {
        auto lru = std::min_element(held_.begin(), held_.end(),
                                    [](const slot & a, const slot & b) { return a.last_used < b.last_used; });
        stats_.bytes -= (int64_t) lru->e->bytes();
        held_.erase(lru);
    }
    stats_.entries = (int32_t) held_.size();
}

void prompt_store::save(context & ctx) {
    const token_vec & t = ctx.cached_prompt();
    const std::vector<uint8_t> & stale = ctx.cached_stale();
    {
        std::lock_guard<std::mutex> lock(mu_);
        for (slot & s : held_) {
            if (covers(s.e->tokens, s.e->stale, t, stale)) { // kept already
                s.last_used = ++clock_;
                return;
            }
        }
    }
    // sequence 0 holds the prompt at 0 .. n-1, and may hold generated tokens after it and share cells
    // with the tree's sequences: the state is the prompt's alone
    ctx.kv_keep(0);
    if (!ctx.kv_rm(0, (llama_pos) t.size(), -1)) return; // a cache that cannot drop a tail: nothing kept
    const size_t n = ctx.state_size();
    if (n == 0 || n + t.size() * (sizeof(llama_token) + 1) > budget_) return;
    const auto t0 = std::chrono::steady_clock::now();
    auto e = std::make_shared<entry>();
    e->tokens = t;
    e->stale = stale;
    e->state.reset(new uint8_t[n]);
    e->n_state = n;
    if (ctx.state_get(e->state.get(), n) != n) {
        ES_LOG_WARN("prompt store: could not read the state of a %zu-token prompt; not kept\n", t.size());
        return;
    }
    ES_LOG_INFO("prompt store: kept a %zu-token prompt (%.0f MiB) in %.0f ms\n", t.size(), n / 1048576.0, ms_since(t0));
    std::lock_guard<std::mutex> lock(mu_);
    // a stored prompt that this one extends is part of it
    std::erase_if(held_, [&](const slot & s) {
        if (!covers(e->tokens, e->stale, s.e->tokens, s.e->stale)) return false;
        stats_.bytes -= (int64_t) s.e->bytes();
        return true;
    });
    evict(e->bytes());
    stats_.bytes += (int64_t) e->bytes();
    held_.push_back({std::move(e), ++clock_});
    stats_.entries = (int32_t) held_.size();
    stats_.saved++;
}

int32_t prompt_store::prepare(context & ctx, std::span<const llama_token> prompt, const prompt_cache_params & pc) {
    if (budget_ == 0) return 0;
    const prompt_cache_params p = prompt_cache_for(ctx, pc);
    const prompt_reuse_plan own = prompt_reuse_plan_make(ctx.cached_prompt(), ctx.cached_stale(), prompt, p);
    if ((int32_t) ctx.cached_prompt().size() - own.n_reused() >= MIN_TOKENS) save(ctx);

    std::shared_ptr<const entry> best;
    {
        std::lock_guard<std::mutex> lock(mu_);
        // worth MIN_TOKENS exact tokens more than what ctx holds (prompt_reuse_plan::score)
        int64_t best_score = own.score() + 2 * MIN_TOKENS - 1;
        slot * chosen = nullptr;
        for (slot & s : held_) {
            const int64_t score = prompt_reuse_plan_make(s.e->tokens, s.e->stale, prompt, p).score();
            if (score > best_score) {
                best_score = score;
                chosen = &s;
            }
        }
        if (!chosen) return 0;
        chosen->last_used = ++clock_;
        best = chosen->e;
    }
    const auto t0 = std::chrono::steady_clock::now();
    ctx.kv_clear();
    if (ctx.state_set(best->state.get(), best->n_state) == 0) {
        ES_LOG_WARN("prompt store: could not load a stored %zu-token prompt; encoding it again\n", best->tokens.size());
        ctx.kv_clear();
        return 0;
    }
    ctx.set_cached_prompt(best->tokens, best->stale);
    {
        std::lock_guard<std::mutex> lock(mu_);
        stats_.restored++;
    }
    ES_LOG_INFO("prompt store: loaded a %zu-token prompt in %.0f ms (the slot held %d tokens of this one)\n",
                best->tokens.size(), ms_since(t0), own.n_reused());
    return (int32_t) best->tokens.size();
}

int32_t prompt_store::best_reuse(std::span<const llama_token> prompt, const prompt_cache_params & pc) const {
    std::lock_guard<std::mutex> lock(mu_);
    int32_t best = 0;
    for (const slot & s : held_) best = std::max(best, prompt_reuse_plan_make(s.e->tokens, s.e->stale, prompt, pc).n_reused());
    return best;
}

prompt_store_stats prompt_store::stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
}

} // namespace editspec
