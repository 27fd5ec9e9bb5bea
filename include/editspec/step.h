// Many requests, one pass: a step engine batches the decodes of several requests into one
// llama_decode per step (continuous batching, as llama-server, vLLM and SGLang do).
//
//     editspec::step_params sp;
//     sp.n_seq = 4;                         // four requests at once, a KV stream each
//     sp.per_seq.n_ctx = 4096;              // each request's context
//     auto eng = editspec::step_engine::create(model, sp, &err);
//     std::unique_ptr<editspec::context> c = eng->view(2);   // a context on stream 2
//     eng->enter(2);  generate_spec(*c, ...);  eng->leave(2); // on any thread, one per view
//     eng->spawn([&] { eng->enter(3); generate_ar(*c3, ...); eng->leave(3); }); // or as a job on its thread
//
// Design: one llama_context whose unified KV cache gives each view a region of cells of its own
// (regions, the default on a CPU: patches/llama-kv-regions.patch places a sequence's tokens in the
// lowest free cells of its region, so they lie as in a cache of its own, offset by whole blocks of the
// flash-attention kernel, which skips the blocks a row's mask drops: a request's attention sums run
// over exactly the cells, in the blocks, it would have alone; exact, as the batch-invariant kernels
// make each row of a mat-mul independent of the rows beside it). libllama takes a unified cache's
// batch in one ubatch whatever its mix (split_simple): a step is one pass. Without regions (a GPU,
// flash attention off) each view has a KV stream of its own (kv_unified = false). A view is
// a `context` (engine.h) whose decode() hands its batch to the engine and waits: the engine thread
// gathers the batches of every active view (one that entered and did not leave) into one batch, in
// stream order, and decodes it; each view gets its rows' logits (view_outputs: a job's read in place, a
// view's own thread's copied, as the next step would overwrite them under it). A step starts once every
// active view has a batch waiting, or `wait_frac` of the last step's time after the first arrived (a
// view drafting slowly, or between requests, does not hold the others back; plus wait_ms). A step carries at most
// `n_step_tokens` tokens, the smallest batches first (generating requests' passes before prompt
// chunks); a view's batch that does not fit waits for the next step.
//
// The decoders run unchanged on a view: they see one sequence (0), n_seq_max() == 1 (draft trees
// are chains, as exact greedy verification wants anyway), n_ctx() = per_seq.n_ctx (rounded up to 256
// with regions). With streams, libllama's ubatch split puts equal token counts of consecutive streams
// in one ubatch (split_equal), so views whose batches differ in length, or streams with an idle one
// between them, take more than one ubatch of the step; padding (pad_ratio) evens the lengths and fills
// the idle streams between with throwaway tokens where that costs little.
//
// Cancellation: a view's cancel flag (context::set_cancel) fails its decode at once; a step whose
// every batch is cancelled is aborted inside llama_decode (llama_set_abort_callback).
//
// Jobs (spawn): a request's whole job can run as a fiber (fiber.h) on the engine's own thread, where a
// view's decode parks the fiber until its step is done. The engine's loop then owns every request: it
// runs each runnable job's host work (draft, verify, keep, commit) between steps, and a step starts as
// soon as every job has parked, with no thread per request and no wake-ups across threads. A guest
// engine's batches from the host's jobs (the draft model's passes) are stepped by the host's loop, on
// its thread, once no job can run: every job that drafts this round has asked, and the target's step
// follows once all have come back to it. The server's slots run so; a view decoded from a thread of its
// own (tests, a session) waits on a condition variable, and a guest's thread steps those.
//
// Threading: enter/leave/view/decode from any thread; one thread per view at a time. Every KV
// operation of a view takes the engine's context lock, so it never runs during a step's decode.
// Every decode of the engine (its warm-up, a lone request's pass) runs on the engine's thread: ggml's
// OpenMP team belongs to the thread that computes, and libgomp lets a team's workers spin between
// passes only while all teams' threads fit the cores; past that they sleep after each pass, and
// waking them cost ~10% of a token on 2 cores (docs/results/issue53-batching).
#pragma once

#include "editspec/engine.h"
#include "editspec/fiber.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace editspec {

struct step_params {
    int32_t n_seq         = 1;     // views (requests decoding at once), a KV region or stream each, <= 64
    bool    regions       = true;  // one unified cache, a region of cells per view: every step one ubatch.
                                   // Taken where the kernels keep it exact: flash attention on, no GPU
                                   // (its kernels do not skip other regions' blocks); else a stream per view
    int32_t regions_max_cells = 32768; // and while the cache has at most this many cells: each row's mask
                                   // spans every region (libllama builds it, the kernel scans it), a cost
                                   // that grows as views x their context, where a stream's spans its own
    context_params per_seq;        // per view: n_ctx (tokens), n_batch (most tokens of one decode call,
                                   // a prompt's chunk), threads, flash attention
    int32_t n_step_tokens = 0;     // most tokens one step carries, 0 = n_seq * per_seq.n_batch
    double  wait_frac     = 0.25;  // how long a step waits for active views without a batch, as a
                                   // fraction of the last step's decode time (plus wait_ms)
    double  wait_ms       = 1.0;   // and a fixed part (a small draft model's passes take well under 1 ms)
    double  pad_ratio     = -1.0;  // streams only: pad batches to the step's longest (one ubatch) while the padded
                                   // step has at most this many times its own tokens; 0 = never;
                                   // < 0: while the padded pass costs no more than the ubatches it
                                   // replaces, by the pass cost (step_engine::set_pass_cost), 1.5 before
                                   // one is known (EDITSPEC_STEP_PAD overrides)
    bool    recurrent     = false; // the model keeps a recurrent state (model_facts::recurrent; create sets it
                                   // from the model): a stream per view (libllama splits such a batch by
                                   // sequence), never padded (a pad's tokens could not leave the state)
    int32_t n_ubatch_max() const { return per_seq.n_ubatch; }
};

struct step_stats {
    int64_t steps      = 0; // llama_decode calls
    int64_t tokens     = 0; // tokens they carried
    int64_t batches    = 0; // view batches they carried (requests per step = batches / steps)
    int64_t ubatches   = 0; // ubatches libllama split the steps into (one weight read each; step_ubatches)
    int64_t graphs_reused = 0; // of those, ubatches whose compute graph libllama reused from the one before
                               // (same shape: no graph built, no allocation planned)
    int64_t aborted    = 0; // steps cut short because every request in them was cancelled
    int64_t cancelled  = 0; // view batches refused or dropped because their request was cancelled
    double  decode_ms  = 0; // time inside llama_decode
    double  model_ms   = 0; // what the pass cost (set_pass_cost) made of the same steps, each request at its depth
    int64_t modelled   = 0; // steps model_ms covers (those after the pass cost was set)
    double  modelled_decode_ms = 0; // and their decode_ms
    double  gather_ms  = 0; // time a step waited for active views after its first batch arrived
    double  jobs_ms    = 0; // time the engine's thread ran its jobs (spawn) between steps: the requests'
                            // host work (drafting, verifying, output; a head's draft calls inside them)
    int64_t rows_lent  = 0; // output rows a view read in place, from the context's own buffer (a job's)
    int64_t rows_copied = 0; // output rows copied out for a view (a view's own thread, or lent rows a
                             // step that did not carry their view would overwrite)
    double  copy_ms    = 0; // time those copies took (inside decode_ms)
    double  layout_ms  = 0; // time laying the requests' batches into the step's one (and its padding) before
                            // llama_decode, on a step that decoded (inside decode_ms)
    int64_t steps_argmax = 0; // steps that handed back each row's argmax, not its logits (engine_argmax_outputs)
};

// With streams (not regions): the ubatches libllama's split of a multi-stream batch makes (llama_batch_allocr::split_equal,
// sequential): each takes a run of consecutive streams that still hold tokens, the same number from
// each (the fewest any of them holds, at most n_ubatch in all). tokens[s]: stream s's tokens, in stream
// order (0 = none in the step).
int32_t step_ubatches(std::vector<int32_t> tokens, int32_t n_ubatch);
// the same split's ubatches, each one's tokens, in order
std::vector<int32_t> step_ubatch_sizes(std::vector<int32_t> tokens, int32_t n_ubatch);

// how a step engine lays out its one context: a region of cells of one unified cache per view where the
// kernels keep that exact (flash attention on, no GPU, EDITSPEC_STEP_REGIONS not 0; every step one
// ubatch), else a stream per view; the context's sizes and batches. `editspec check-exact --requests`
// checks passes in the same layout
struct step_layout {
    context_params cp;
    bool regions = false;
    int32_t n_ctx_seq = 0; // cells a view may hold (a region's, rounded up to 256, or the stream's asked size)
};
step_layout step_layout_of(const step_params & p);

class step_engine final : public view_host {
public:
    // null with *error on failure (the error names the model and the sizes). `host`: an engine whose
    // thread computes this one's decodes between its own steps (a draft model's engine beside the
    // target's: one OpenMP team in the process, see below), null = its own thread; the host must
    // outlive this engine
    static std::unique_ptr<step_engine> create(const model & m, const step_params & p, std::string * error,
                                               step_engine * host = nullptr);
    ~step_engine(); // stops the engine thread; views must be gone or idle
    step_engine(const step_engine &) = delete;
    step_engine & operator=(const step_engine &) = delete;

    // a context decoding through this engine on stream seq (0 <= seq < n_seq); one view per stream
    std::unique_ptr<context> view(llama_seq_id seq);

    // a request starts / ends on stream seq: steps wait for the batches of entered views only
    void enter(llama_seq_id seq);
    void leave(llama_seq_id seq);

    const step_params & params() const { return params_; }
    // the context every view decodes in: for what reads a step's outputs beside the views (the step
    // hook's head); its decodes and KV operations are the engine's and its views'
    const context & shared_context() const { return *ctx_; }
    int32_t n_seq() const { return params_.n_seq; }
    // a unified cache of a region per view (step_params::regions, where it was taken)
    bool regions() const { return regions_; }
    step_stats stats() const;

    // what one pass holding these requests' parts costs (ms): for the padding's choice (pad_ratio < 0)
    // and the steps' modelled time (step_stats::model_ms, against decode_ms); the server hands
    // the cost model here when it makes the engine (cost_model::t_step). Any thread; f must be pure
    void set_pass_cost(std::function<double(std::span<const pass_part>)> f);

    // called with each step's batch right after its llama_decode succeeds, on the engine's thread, the
    // context's lock held: view v's rows hold sequence id v (its region or stream), each view's rows
    // contiguous and in order, positions as the view sent them. A head that follows every request's
    // target states (llama-heads.h) reads them here, while the target's outputs are the step's. With a
    // hook the engine pads no step (padding's throwaway rows would reach it). Empty = none. Any thread
    void set_step_hook(std::function<void(const llama_batch &)> hook);

    // runs f on this engine's thread, between its steps, and waits for it: work on a context that must
    // not overlap a step (a head's context the step hook decodes), or a guest engine's decode, in the
    // process's one OpenMP team. On the engine's own thread (a job's fiber, a hook) f runs at once:
    // nothing else runs there meanwhile
    void run_on_thread(const std::function<void()> & f);

    // runs job as a fiber on this engine's thread (see Jobs above) and returns at once; the engine's
    // destructor waits for every job to end. An exception job lets out is logged and dropped: catch
    // what the caller must hear of. Not on an engine with a host (its jobs belong to the host's)
    void spawn(std::function<void()> job);
    // waits until every job spawned so far has ended and its captures are gone (what owns the state a
    // job touches waits here before it goes). Not from the engine's thread
    void wait_jobs();
    // from a job on this engine's thread: the engine's other runnable jobs run first (to their next
    // decode, or to where they yield too), then this one goes on. A job waiting for the others of its step
    // (a head's draft call that would draft them all at once) yields where a thread would wait
    void yield();

    // view_host: a view's decode, load and KV lock (engine.h)
    bool view_decode(llama_seq_id seq, const llama_batch & b, const std::atomic<bool> * cancel, view_outputs & out,
                     bool argmax) override;
    void view_forget(view_outputs & out) override;
    step_load view_others(llama_seq_id seq) const override;
    std::mutex & view_kv_mutex() const override { return ctx_mu_; }

private:
    struct submission {
        llama_seq_id seq = 0;
        const llama_batch * b = nullptr;
        const std::atomic<bool> * cancel = nullptr;
        view_outputs * out = nullptr;   // the view's rows, lent or copied
        bool argmax = false;            // the view reads each row's argmax only
        bool done = false;
        bool ok = false;
        std::condition_variable cv; // done (under mu_): the view's thread waits here, not on cv_
        fiber * job = nullptr;          // or the job's fiber parks until done
        step_engine * sched = nullptr;  // the engine whose thread runs that fiber (this one or the host)
    };

    step_engine() = default;
    void loop();
    // the guests' work waiting for this engine's thread (mu_ held; released while each runs)
    void run_guest_jobs(std::unique_lock<std::mutex> & lock);
    // one step over `subs` (ctx_mu_ held): false when llama_decode failed or was aborted
    bool run_step(std::vector<submission *> & subs);
    // a step's decode and its bookkeeping; `lock` (on mu_) is released during the decode
    void step(std::unique_lock<std::mutex> & lock, std::vector<submission *> & subs, int32_t n_tokens);
    static bool abort_cb(void * data);
    static bool all_cancelled(const std::vector<submission *> & subs);
    // the rows `out` points into the context's buffer copied into out.copy, and out pointed there (ctx_mu_ held)
    void copy_out(view_outputs & out);
    // s is done (mu_ held): its thread or its fiber goes on
    void finish(submission * s);
    // f may run again (from any thread)
    void wake(fiber * f);
    void wake_locked(fiber * f); // mu_ held
    // every runnable job runs until it parks or ends (mu_ held; released while each runs)
    void run_jobs(std::unique_lock<std::mutex> & lock);
    // the guests' work, the jobs, and the guests' steps for the jobs' batches, until no job can run (mu_ held)
    void run_ready(std::unique_lock<std::mutex> & lock);
    // once no job of this host can run: each guest's step of what the jobs asked, decoded here; true
    // when one ran (mu_ held, released meanwhile)
    bool run_guest_steps(std::unique_lock<std::mutex> & lock);
    // a guest's step, on its host's thread (mu_ not held): false when nothing waited
    bool step_for_host();
    // the waiting batches the next step takes (mu_ held): cancelled ones answered, the smallest first up
    // to n_step_tokens, in stream order; false when none
    bool take_step(std::vector<submission *> & subs, int32_t & n_tokens);
    // a batch waits for this engine's thread to step it (mu_ held)
    bool has_batch() const;

    step_params params_;
    std::unique_ptr<context> ctx_;   // the shared context (regions of one unified cache, or n_seq streams)
    bool regions_ = false;
    std::unique_ptr<batch> merged_;  // the step's batch
    int32_t n_vocab_ = 0;
    int32_t n_ctx_seq_ = 0;          // cells of one region or stream

    mutable std::mutex ctx_mu_;      // the llama_context: a step's decode, or one view's KV operation

    mutable std::mutex mu_;          // everything below
    std::condition_variable cv_;     // for the engine's thread: a batch arrived, a view entered or left, stop
    std::deque<submission *> queue_; // batches waiting, in arrival order
    std::vector<uint8_t> active_;    // [n_seq] entered and not left
    std::vector<submission *> step_subs_; // the running step's (abort_cb reads them)
    bool stepping_ = false;          // a step is decoding (on the engine's thread)
    std::atomic<bool> step_abort_{false};
    step_stats stats_;
    int32_t last_total_ = 0, last_batches_ = 0; // the last step's tokens and batches
    double last_step_ms_ = 0.0;
    std::vector<pass_part> last_parts_; // [n_seq] each stream's part of the last step (tokens 0: none)
    std::vector<view_outputs *> lent_; // views whose rows point into the context's output buffer (under ctx_mu_)
    int32_t run_ubatches_ = 0;       // the running step's ubatches (its decodes: one, or one per request on a retry)
    std::shared_ptr<const std::function<double(std::span<const pass_part>)>> pass_cost_; // set_pass_cost's (under mu_), or null
    std::function<void(const llama_batch &)> step_hook_; // set_step_hook's (under ctx_mu_)
    bool stop_ = false;
    std::thread thread_;
    step_engine * host_ = nullptr;   // computes this engine's decodes, or null
    struct guest_job {
        const std::function<void()> * f = nullptr;
        bool done = false;
    };
    std::deque<guest_job *> guest_jobs_;  // waiting for this engine's thread
    std::condition_variable guest_cv_;    // a guest job is done
    std::vector<std::unique_ptr<fiber>> jobs_; // spawn()'s, running or parked
    std::vector<fiber *> runnable_;       // of those, the ones to resume, in order
    std::condition_variable jobs_cv_;     // a job ended
    std::thread::id thread_id_;           // the engine's thread (run_on_thread runs at once from it)
    std::mutex guests_mu_;                // guests_ (taken before a guest's mu_)
    std::vector<step_engine *> guests_;   // engines whose decodes this one computes (create()'s host)
};

} // namespace editspec
