// Slots and their FIFO (server-slots.h).
#include "server-slots.h"

namespace editspec {

void slot_pool::add(std::unique_ptr<context> ctx) {
    slot s;
    s.ctx = std::move(ctx);
    s.memory = std::make_unique<slot_memory>();
    slots_.push_back(std::move(s));
}

void slot_pool::start() {
    for (size_t i = 0; i < slots_.size(); i++) {
        threads_.emplace_back([this, i] {
            while (true) {
                std::function<void()> j;
                {
                    std::unique_lock<std::mutex> lock(mu_);
                    cv_.wait(lock, [&] { return stopping_ || slots_[i].pending; });
                    if (!slots_[i].pending) return;
                    j = std::move(slots_[i].pending);
                    slots_[i].pending = nullptr;
                }
                j();
                {
                    std::lock_guard<std::mutex> lock(mu_);
                    slots_[i].busy = false;
                }
                cv_.notify_all();
            }
        });
    }
}

// the free slot for a prompt: the one whose reuse of it is worth most (prompt_reuse_plan::score), when
// it reuses at least half of it (so that two conversations sharing only a system prompt or an
// opening line do not evict each other); else the least recently used
int32_t slot_pool::pick(std::span<const llama_token> prompt) const {
    int32_t best = -1, lru = -1;
    int64_t best_score = 0;
    for (size_t i = 0; i < slots_.size(); i++) {
        if (slots_[i].busy) continue;
        if (lru < 0 || slots_[i].last_used < slots_[lru].last_used) lru = (int32_t) i;
        const context & c = *slots_[i].ctx;
        const prompt_reuse_plan plan = prompt_reuse_plan_make(c.cached_prompt(), c.cached_stale(), prompt, pc_);
        const int32_t reuse = plan.n_reused();
        if (reuse > 0 && 2 * (size_t) reuse >= prompt.size() && plan.score() > best_score) {
            best = (int32_t) i;
            best_score = plan.score();
        }
    }
    return best >= 0 ? best : lru;
}

slot_status slot_pool::submit(std::span<const llama_token> prompt, job j, std::future<void> & done) {
    auto promise = std::make_shared<std::promise<void>>();
    done = promise->get_future();
    {
        std::unique_lock<std::mutex> lock(mu_);
        if (closed_) return SLOT_STOPPING;
        if (next_ticket_ - serving_ >= max_waiting_ + slots_.size()) return SLOT_QUEUE_FULL;
        const uint64_t ticket = next_ticket_++;
        int32_t i = -1;
        cv_.wait(lock, [&] { return closed_ || (ticket == serving_ && (i = pick(prompt)) >= 0); });
        if (closed_) return SLOT_STOPPING;
        serving_++;
        slot & sl = slots_[i];
        sl.busy = true;
        sl.last_used = ++n_runs_;
        context * ctx = sl.ctx.get();
        slot_memory * mem = sl.memory.get();
        sl.pending = [this, ctx, mem, promise, j = std::move(j), p = token_vec(prompt.begin(), prompt.end())] {
            try {
                if (mem->cache.n_tokens() > slot_memory::CACHE_TOKENS_MAX) mem->cache.clear();
                store_.prepare(*ctx, p, pc_);
                j(*ctx, *mem);
                promise->set_value();
            } catch (...) {
                ctx->kv_clear();
                *mem = slot_memory();
                promise->set_exception(std::current_exception());
            }
        };
    }
    cv_.notify_all();
    return SLOT_OK;
}

void slot_pool::close() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        closed_ = true;
    }
    cv_.notify_all();
}

void slot_pool::stop() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        closed_ = true;
        stopping_ = true;
    }
    cv_.notify_all();
    for (std::thread & t : threads_) {
        if (t.joinable()) t.join();
    }
    threads_.clear();
}

} // namespace editspec
