// Slots of `editspec serve`: one context each, and a bounded FIFO of requests that wait for one. A
// slot's context is a view of the server's step engine (step.h), and its request's job runs as a fiber
// on the engine's thread (step_engine::spawn): one loop owns every running request, runs each one's
// drafting and verification between steps and every slot's decode in its one batched llama_decode per
// step (one thread computes: ggml's OpenMP team belongs to the thread that calls it, and teams of
// several threads spinning at once fight over the cores; docs/results/issue53-batching). A slot
// without an engine runs its jobs on a thread of its own.
//
// A request goes to the free slot whose KV cache holds most of its prompt (pie.h: the common
// prefix, and with KV_REUSE_PIE the spans after an edit too) when that is at least half the prompt:
// a chat that continues an earlier conversation, or a file sent again, finds its slot and decodes
// only what is new. Else it goes to the slot used least recently: the N slots keep the N most recent
// conversations and files. Requests are served in the order they came; past max_waiting waiting ones
// a new request is refused at once. A slot's memory (the sizing's acceptance statistics, FastCoder's
// cache of verified drafts) lives as long as its context, so later requests draft better. With a
// prompt store (prompt-store.h, --cache-ram), a slot keeps the prompt it moves on from in RAM, and a
// request whose prompt a stored one holds better than its slot loads it back first. The drafters'
// acceptance is pooled too: a request starts from every slot's finished ones where its slot's own
// evidence is thin (sizing.h, accept_stats_pool_begin).
//
//     slot_pool pool(32, prompt_cache_params{}, 8192ull << 20);
//     pool.add(engine->view(0), engine.get(), 0);  pool.start();   // (+ a draft engine's view of stream 0)
//     auto done = [&](slot_status st, std::exception_ptr e) { ... };  // once: ran (e: what it threw), or dropped
//     if (pool.submit(prompt, [&](context & c, slot_memory & m) { ... }, done, &cancel) != SLOT_OK) { ... refused }
//     pool.stop();
//
// The pool owns the queue: submit returns at once (the request's HTTP thread then waits on the request
// itself, server-state.h), and a slot coming free starts the next request from the thread that freed it.
// Thread-safe: submit from any number of threads.
#pragma once

#include "editspec/engine.h"
#include "editspec/fastcoder.h"
#include "editspec/pie.h"
#include "editspec/prompt-store.h"
#include "editspec/sizing.h"
#include "editspec/step.h"

#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <deque>
#include <span>
#include <thread>
#include <vector>

namespace editspec {

enum slot_status {
    SLOT_OK,         // the job runs (or ran) on a slot
    SLOT_QUEUE_FULL, // max_waiting requests wait already: answer 503 with Retry-After
    SLOT_STOPPING,   // the server is stopping: answer 503
    SLOT_CANCELLED,  // the request's client went away while it waited: nothing to answer
};

// a queued request's end: SLOT_OK once its job ran (`failure`: what it threw, or null), SLOT_CANCELLED
// when its cancel flag dropped it from the queue, SLOT_STOPPING when close() did. Called once, on the
// thread that ended it (the engine's, a slot's, the watcher's, or close()'s), with no lock of the pool held
using slot_done = std::function<void(slot_status outcome, std::exception_ptr failure)>;

// what a slot keeps across requests beside its KV cache (cleared with it)
struct slot_memory {
    accept_stats stats;    // draft acceptance by source and depth: the cost model's sizing
    retrieval_cache cache; // FastCoder: verified retrievals and outputs
    context * draft = nullptr; // the slot's stream of the draft model's step engine (its draft-model drafters
                               // decode there, every request's draft passes in one llama_decode), null = none
    token_vec draft_kept;      // the tokens that stream holds (a request repeating a prompt decodes only what differs)
    static constexpr int64_t CACHE_TOKENS_MAX = 1 << 20; // past this the cache starts again
};

class slot_pool {
public:
    using job = std::function<void(context &, slot_memory &)>;

    // store_bytes: the prompt store's budget, 0 = none
    slot_pool(size_t max_waiting, const prompt_cache_params & pc, size_t store_bytes = 0)
        : max_waiting_(max_waiting), pc_(pc), store_(store_bytes) {}
    ~slot_pool() { stop(); }

    // before start(); a view of engine (its stream seq) enters the engine while a job runs on it, and
    // so does `draft`, a view of the draft model's step engine on the same stream (slot_memory::draft)
    void add(std::unique_ptr<context> ctx, step_engine * engine = nullptr, llama_seq_id seq = 0,
             std::unique_ptr<context> draft = nullptr, step_engine * draft_engine = nullptr);
    void start();

    // queues j for the free slot that suits the prompt best, in the order requests came. SLOT_OK: queued
    // (perhaps started already), and `done` will be called once (above): when j returned or threw (the
    // slot's cache is then cleared: half-written state is never reused), or when the request was dropped
    // from the queue, because *cancel became true (see drop_cancelled) or close() was called. Else
    // refused at once, done never called: SLOT_QUEUE_FULL, or SLOT_STOPPING once close() was called.
    // *cancel must live until done is called.
    slot_status submit(std::span<const llama_token> prompt, job j, slot_done done, const std::atomic<bool> * cancel = nullptr);
    // drops every queued request whose cancel flag is set (a client left; its done hears SLOT_CANCELLED)
    // and lets the next ones start. A running job is left to its own flag.
    void drop_cancelled();

    // refuses new and waiting requests; running jobs go on
    void close();
    // close(), then waits for the running jobs and joins the threads. Idempotent.
    void stop();

    size_t size() const { return slots_.size(); }

    // the most tokens of `prompt` a free slot's KV cache or a stored prompt holds (an apply asks before
    // it picks its prompt: apply_view_for); a busy slot's cache is changing, and not counted
    int32_t cached_tokens(std::span<const llama_token> prompt);
    prompt_store_stats store_stats() const { return store_.stats(); }

private:
    struct slot {
        std::unique_ptr<context> ctx;
        std::unique_ptr<slot_memory> memory;
        step_engine * engine = nullptr;  // ctx is its view on stream seq
        std::unique_ptr<context> draft;  // a view of draft_engine on stream seq, or null
        step_engine * draft_engine = nullptr;
        llama_seq_id seq = 0;
        bool job_on_engine = false;    // its jobs run on engine's thread (step_engine::spawn), not on its own
        std::function<void()> pending; // set by dispatch(), taken by the slot's thread
        bool busy = false;             // a job is assigned and not finished
        uint64_t last_used = 0;        // submit() order
    };

    struct waiting {
        token_vec prompt;
        job j;
        slot_done done;
        const std::atomic<bool> * cancel;
    };

    int32_t pick(std::span<const llama_token> prompt) const; // mu_ held; -1 = none free
    // mu_ held: starts queued requests while the first can have a slot, drops cancelled ones; what must
    // run once mu_ is let go (spawns, dropped requests' done) goes to `after`
    void dispatch(std::vector<std::function<void()>> & after);
    std::function<void()> start_on(size_t i, waiting w); // mu_ held: slot i runs w (what runs it, for `after`)
    void release(size_t i); // a job is done with slot i: the next requests start

    const size_t max_waiting_;
    const prompt_cache_params pc_;
    prompt_store store_;
    std::mutex mu_;
    accept_stats pooled_; // mu_ held: every slot's finished requests' acceptance (accept_stats_pool_begin)
    std::condition_variable cv_;
    std::vector<slot> slots_;
    std::vector<std::thread> threads_;
    uint64_t n_runs_ = 0;
    std::deque<waiting> queue_; // in the order they came
    bool closed_ = false, stopping_ = false;
};

} // namespace editspec
