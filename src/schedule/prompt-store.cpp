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

void prompt_store::drop(size_t i) {
    entry & e = *held_[i].e;
    stats_.bytes -= (int64_t) e.bytes();
    // a load copies the entry's pointer under mu_: held by held_ alone, no load can start on it now
    if (held_[i].e.use_count() == 1 && e.state) {
        stats_.bytes += (int64_t) e.cap;
        spares_.push_back({std::move(e.state), e.cap});
    }
    held_.erase(held_.begin() + (ptrdiff_t) i);
    stats_.entries = (int32_t) held_.size();
}

prompt_store::spare prompt_store::take_buffer(size_t n, size_t extra) {
    while (true) {
        // the smallest spare that holds n, at most twice n: a larger one would hold budget idle
        auto fit = spares_.end();
        for (auto it = spares_.begin(); it != spares_.end(); ++it) {
            if (it->cap >= n && it->cap <= 2 * n && (fit == spares_.end() || it->cap < fit->cap)) fit = it;
        }
        if (fit != spares_.end()) {
            spare sp = std::move(*fit);
            spares_.erase(fit);
            stats_.recycled++;
            return sp; // its bytes stay counted: the new entry holds them
        }
        if ((size_t) stats_.bytes + n + extra <= budget_) {
            stats_.bytes += (int64_t) n;
            return {std::unique_ptr<uint8_t[]>(new uint8_t[n]), n};
        }
        if (!spares_.empty()) { // spares that fit no save of this size go before a stored prompt does
            auto big = std::max_element(spares_.begin(), spares_.end(),
                                        [](const spare & a, const spare & b) { return a.cap < b.cap; });
            stats_.bytes -= (int64_t) big->cap;
            spares_.erase(big);
            continue;
        }
        if (held_.empty()) return {};
        size_t lru = 0;
        for (size_t i = 1; i < held_.size(); i++) {
            if (held_[i].last_used < held_[lru].last_used) lru = i;
        }
        drop(lru);
    }
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
    const size_t extra = t.size() * (sizeof(llama_token) + 1);
    if (n == 0 || n + extra > budget_) return;
    const auto t0 = std::chrono::steady_clock::now();
    spare buf;
    {
        std::lock_guard<std::mutex> lock(mu_);
        buf = take_buffer(n, extra);
    }
    if (!buf.buf) return;
    auto e = std::make_shared<entry>();
    e->tokens = t;
    e->stale = stale;
    e->state = std::move(buf.buf);
    e->n_state = n;
    e->cap = buf.cap;
    if (ctx.state_get(e->state.get(), n) != n) {
        ES_LOG_WARN("prompt store: could not read the state of a %zu-token prompt; not kept\n", t.size());
        std::lock_guard<std::mutex> lock(mu_);
        spares_.push_back({std::move(e->state), e->cap}); // still counted
        return;
    }
    ES_LOG_INFO("prompt store: kept a %zu-token prompt (%.0f MiB) in %.0f ms\n", t.size(), n / 1048576.0, ms_since(t0));
    std::lock_guard<std::mutex> lock(mu_);
    stats_.bytes += (int64_t) (e->bytes() - e->cap); // the buffer is counted already
    // a stored prompt that this one extends is part of it
    for (size_t i = held_.size(); i-- > 0;) {
        if (covers(e->tokens, e->stale, held_[i].e->tokens, held_[i].e->stale)) drop(i);
    }
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
