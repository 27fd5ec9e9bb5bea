// Slots and their FIFO (server-slots.h).
#include "server-slots.h"

#include <algorithm>
#include <cstdlib>

namespace editspec {

void slot_pool::add(std::unique_ptr<context> ctx, step_engine * engine, llama_seq_id seq, std::unique_ptr<context> draft,
                    step_engine * draft_engine) {
    slot s;
    s.ctx = std::move(ctx);
    s.engine = engine;
    s.seq = seq;
    s.draft = std::move(draft);
    s.draft_engine = draft_engine;
    s.job_on_engine = engine != nullptr;
    s.memory = std::make_unique<slot_memory>();
    s.memory->draft = s.draft.get();
    slots_.push_back(std::move(s));
}

void slot_pool::start() {
    // EDITSPEC_SLOT_THREADS=1: a thread per slot, whose decodes wait for the engine's steps (the layout
    // before jobs ran on the engine's thread; for A/B runs)
    if (const char * t = getenv("EDITSPEC_SLOT_THREADS"); t && atoi(t) != 0) {
        for (slot & sl : slots_) sl.job_on_engine = false;
    }
    for (size_t i = 0; i < slots_.size(); i++) {
        if (slots_[i].job_on_engine) continue; // its jobs run as fibers on the engine's thread
        threads_.emplace_back([this, i] {
            thread_name_set("es-slot");
            while (true) {
                std::function<void()> j;
                {
                    std::unique_lock<std::mutex> lock(mu_);
                    cv_.wait(lock, [&] { return stopping_ || slots_[i].pending; });
                    if (!slots_[i].pending) return;
                    j = std::move(slots_[i].pending);
                    slots_[i].pending = nullptr;
                }
                j(); // frees the slot (busy = false) before its request hears it is done
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

int32_t slot_pool::cached_tokens(std::span<const llama_token> prompt) {
    int32_t best = store_.best_reuse(prompt, pc_);
    std::lock_guard<std::mutex> lock(mu_);
    for (const slot & sl : slots_) {
        if (sl.busy) continue;
        const context & c = *sl.ctx;
        best = std::max(best, prompt_reuse_plan_make(c.cached_prompt(), c.cached_stale(), prompt, pc_).n_reused());
    }
    return best;
}

slot_status slot_pool::submit(std::span<const llama_token> prompt, job j, slot_done done, const std::atomic<bool> * cancel) {
    std::vector<std::function<void()>> after;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (closed_) return SLOT_STOPPING;
        size_t busy = 0;
        for (const slot & sl : slots_) busy += sl.busy ? 1 : 0;
        if (queue_.size() + busy >= max_waiting_ + slots_.size()) return SLOT_QUEUE_FULL;
        queue_.push_back(waiting{token_vec(prompt.begin(), prompt.end()), std::move(j), std::move(done), cancel});
        dispatch(after);
    }
    for (auto & f : after) f();
    return SLOT_OK;
}

void slot_pool::drop_cancelled() {
    std::vector<std::function<void()>> after;
    {
        std::lock_guard<std::mutex> lock(mu_);
        for (auto it = queue_.begin(); it != queue_.end();) {
            if (it->cancel && it->cancel->load()) {
                after.push_back([d = std::move(it->done)] { d(SLOT_CANCELLED, nullptr); });
                it = queue_.erase(it);
            } else {
                ++it;
            }
        }
        dispatch(after);
    }
    for (auto & f : after) f();
}

void slot_pool::dispatch(std::vector<std::function<void()>> & after) {
    while (!queue_.empty() && !closed_) {
        waiting & w = queue_.front();
        if (w.cancel && w.cancel->load()) {
            after.push_back([d = std::move(w.done)] { d(SLOT_CANCELLED, nullptr); });
            queue_.pop_front();
            continue;
        }
        const int32_t i = pick(w.prompt);
        if (i < 0) return; // first come, first served: the next wait behind it
        waiting taken = std::move(w);
        queue_.pop_front();
        if (auto run = start_on((size_t) i, std::move(taken))) after.push_back(std::move(run));
    }
}

std::function<void()> slot_pool::start_on(size_t i, waiting w) {
    slot & sl = slots_[i];
    sl.busy = true;
    sl.last_used = ++n_runs_;
    context * ctx = sl.ctx.get();
    slot_memory * mem = sl.memory.get();
    step_engine * engine = sl.engine;
    step_engine * draft_engine = sl.draft_engine;
    const llama_seq_id seq = sl.seq;
    std::function<void()> run = [this, i, ctx, mem, engine, draft_engine, seq, w = std::move(w)] {
        std::exception_ptr failure;
        {
            struct in_step { // the engine's steps wait for this slot while its job runs
                step_engine * e;
                llama_seq_id seq;
                in_step(step_engine * e, llama_seq_id seq) : e(e), seq(seq) { if (e) e->enter(seq); }
                ~in_step() { if (e) e->leave(seq); }
            } entered(engine, seq), entered_draft(draft_engine, seq);
            // the server's evidence of the drafters' worth, pooled from every slot's finished requests
            auto at_start = std::make_unique<accept_stats>();
            {
                std::lock_guard<std::mutex> lock(mu_);
                accept_stats_pool_begin(mem->stats, pooled_, *at_start);
            }
            try {
                if (mem->cache.n_tokens() > slot_memory::CACHE_TOKENS_MAX) mem->cache.clear();
                store_.prepare(*ctx, w.prompt, pc_);
                w.j(*ctx, *mem);
            } catch (...) {
                failure = std::current_exception();
            }
            if (!failure) {
                std::lock_guard<std::mutex> lock(mu_);
                accept_stats_pool_end(pooled_, mem->stats, *at_start);
            }
            ctx->set_cancel(nullptr);
            if (mem->draft) mem->draft->set_cancel(nullptr);
            if (failure) {
                if (mem->draft) mem->draft->kv_clear();
                ctx->kv_clear();
                context * draft = mem->draft;
                *mem = slot_memory();
                mem->draft = draft;
            }
        }
        // the slot is free again before its request hears it is done: a request sent right after the
        // answer sees this slot's cached prompt (--apply-view cached), not a busy slot
        release(i);
        w.done(SLOT_OK, failure);
    };
    if (sl.job_on_engine) {
        // the engine's loop owns the request: its job runs on the engine's thread (step.h, Jobs)
        return [engine, run = std::move(run)]() mutable { engine->spawn(std::move(run)); };
    }
    sl.pending = std::move(run);
    cv_.notify_all();
    return nullptr;
}

void slot_pool::release(size_t i) {
    std::vector<std::function<void()>> after;
    {
        std::lock_guard<std::mutex> lock(mu_);
        slots_[i].busy = false;
        dispatch(after);
    }
    cv_.notify_all(); // stop() waits for the jobs to free their slots
    for (auto & f : after) f();
}

void slot_pool::close() {
    std::deque<waiting> dropped;
    {
        std::lock_guard<std::mutex> lock(mu_);
        closed_ = true;
        dropped.swap(queue_);
    }
    cv_.notify_all();
    for (waiting & w : dropped) w.done(SLOT_STOPPING, nullptr);
}

void slot_pool::stop() {
    close();
    {
        std::unique_lock<std::mutex> lock(mu_);
        stopping_ = true;
        cv_.notify_all();
        // the jobs on engines' threads end on their own (each frees its slot)
        cv_.wait(lock, [&] {
            return std::none_of(slots_.begin(), slots_.end(), [](const slot & sl) { return sl.job_on_engine && sl.busy; });
        });
    }
    cv_.notify_all();
    // and past their slot's release (its notify, the engine's leave, the job's captures): this pool and
    // its views may go once their fibers are done
    for (slot & sl : slots_) {
        if (sl.job_on_engine) sl.engine->wait_jobs();
    }
    for (std::thread & t : threads_) {
        if (t.joinable()) t.join();
    }
    threads_.clear();
}

} // namespace editspec
