// The step engine (step.h): views' batches gathered into one llama_decode per step.
//
// One step, three views (A on stream 0 generating, B on 1 prefilling a chunk, C on 2 verifying a
// chain of 3 drafts after its pending token):
//
//   row   token        pos            seq (stream)   logits
//   0     a_root       nA             0              1
//   1-4   b_0 .. b_3   0 .. 3         1              0 0 0 1
//   5-8   c_root c1-3  nC .. nC+3     2              1 1 1 1
//
// Rows go in view order, each view's contiguous; seq is the view's region of the unified cache (one
// ubatch whatever the lengths), or its stream (libllama's sequential split takes consecutive streams
// with equal token counts into one ubatch). Each view gets back the logits of its own rows.
#include "editspec/step.h"
#include "editspec/clock.h"
#include "editspec/log.h"
#include "engine/upper-state.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <future>

namespace editspec {

// the engine whose loop runs on this thread (its jobs' fibers park for steps of any engine)
static thread_local step_engine * t_engine = nullptr;

std::vector<int32_t> step_ubatch_sizes(std::vector<int32_t> tokens, int32_t n_ubatch) {
    std::vector<int32_t> sizes;
    for (size_t first = 0;;) {
        while (first < tokens.size() && tokens[first] == 0) first++;
        if (first == tokens.size()) return sizes;
        size_t end = first;
        int32_t fewest = tokens[first];
        while (end < tokens.size() && tokens[end] > 0) fewest = std::min(fewest, tokens[end++]);
        const int32_t take = std::max(1, std::min(fewest, n_ubatch / (int32_t) (end - first)));
        for (size_t s = first; s < end; s++) tokens[s] -= take;
        sizes.push_back(take * (int32_t) (end - first));
    }
}

int32_t step_ubatches(std::vector<int32_t> tokens, int32_t n_ubatch) {
    return (int32_t) step_ubatch_sizes(std::move(tokens), n_ubatch).size();
}

// a view's batch as a part of the step: its tokens, after its first position's cells (a prompt chunk's
// or a pass's rows attend to those and to each other)
static pass_part step_part_of(const llama_batch & b) {
    pass_part p;
    p.tokens = b.n_tokens;
    p.depth = b.n_tokens > 0 ? b.pos[0] : 0;
    for (int32_t i = 1; i < b.n_tokens; i++) p.depth = std::min(p.depth, b.pos[i]);
    for (int32_t i = 0; i < b.n_tokens; i++) p.outputs += b.logits[i] != 0;
    return p;
}

void step_engine::set_pass_cost(std::function<double(std::span<const pass_part>)> f) {
    auto p = f ? std::make_shared<const std::function<double(std::span<const pass_part>)>>(std::move(f)) : nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    pass_cost_ = std::move(p);
}

void step_engine::set_step_hook(std::function<void(const llama_batch &)> hook) {
    std::lock_guard<std::mutex> kv(ctx_mu_);
    step_hook_ = std::move(hook);
}

step_layout step_layout_of(const step_params & p) {
    step_layout l;
    int32_t n_step_tokens = p.n_step_tokens > 0 ? p.n_step_tokens : p.n_seq * p.per_seq.n_batch;
    n_step_tokens = std::max(n_step_tokens, p.per_seq.n_batch);
    l.cp = p.per_seq;
    // regions where the kernels keep them exact: the CPU's flash attention skips other regions' blocks
    // a region is a whole number of the attention's blocks (and libllama's 256-cell padding)
    const int32_t n_ctx_region = (p.per_seq.n_ctx + 255) / 256 * 256;
    l.regions = p.regions && p.n_seq > 1 && p.per_seq.flash_attn && !engine_has_gpu() && !p.recurrent &&
                (int64_t) n_ctx_region * p.n_seq <= p.regions_max_cells;
    if (const char * r = getenv("EDITSPEC_STEP_REGIONS")) l.regions = l.regions && atoi(r) != 0;
    l.n_ctx_seq = l.regions ? n_ctx_region : p.per_seq.n_ctx;
    l.cp.n_ctx = l.n_ctx_seq * p.n_seq;
    l.cp.n_seq_max = p.n_seq;
    l.cp.kv_unified = l.regions || p.n_seq == 1; // else a stream per request
    l.cp.n_batch = n_step_tokens;
    // regions: the whole step in one ubatch (split_simple takes any mix up to n_ubatch)
    l.cp.n_ubatch = l.regions ? l.cp.n_batch : std::min(p.per_seq.n_ubatch, l.cp.n_batch);
    return l;
}

std::unique_ptr<step_engine> step_engine::create(const model & m, const step_params & p, std::string * error,
                                                 step_engine * host) {
    auto fail = [&](const std::string & msg) -> std::unique_ptr<step_engine> {
        if (error) *error = msg;
        return nullptr;
    };
    if (p.n_seq < 1 || p.n_seq > 64) {
        return fail("step engine: " + std::to_string(p.n_seq) + " requests at once is out of range [1, 64]");
    }
    if (p.per_seq.n_ctx < 1) {
        return fail("step engine: each request needs a context size (it is " + std::to_string(p.per_seq.n_ctx) + ")");
    }
    std::unique_ptr<step_engine> e(new step_engine());
    e->params_ = p;
    e->params_.recurrent = m.facts().recurrent;
    const step_layout layout = step_layout_of(e->params_);
    e->params_.n_step_tokens = layout.cp.n_batch;
    e->regions_ = layout.regions;
    const context_params & cp = layout.cp;
    const int32_t n_ctx_seq = layout.n_ctx_seq;
    std::string err;
    e->ctx_ = context_create(m, cp, &err);
    if (!e->ctx_) {
        return fail("step engine: " + err + " (" + std::to_string(p.n_seq) + " requests x " + std::to_string(p.per_seq.n_ctx) +
                    " tokens)");
    }
    // the engine's abort callback replaces the context's own: a step is cut short when every
    // request in it is cancelled
    llama_set_abort_callback(e->ctx_->get(), &step_engine::abort_cb, e.get());
    e->merged_ = std::make_unique<batch>(cp.n_batch, 1);
    e->n_vocab_ = m.facts().n_vocab;
    if (e->regions_ && !llama_memory_set_seq_regions(llama_get_memory(e->ctx_->get()), true)) {
        return fail("step engine: the KV cache of " + std::to_string(cp.n_ctx) + " cells takes no regions of " +
                    std::to_string(n_ctx_seq) + " (a recurrent or hybrid model?); EDITSPEC_STEP_REGIONS=0 gives each request a stream");
    }
    e->n_ctx_seq_ = e->regions_ ? (int32_t) llama_n_ctx(e->ctx_->get()) / p.n_seq : (int32_t) llama_n_ctx_seq(e->ctx_->get());
    if (const char * pr = getenv("EDITSPEC_STEP_PAD")) e->params_.pad_ratio = atof(pr);
    e->active_.assign((size_t) p.n_seq, 0);
    e->last_parts_.assign((size_t) p.n_seq, pass_part{});
    // the warm-up decode runs on the engine's thread, as every step does: ggml's OpenMP team belongs to
    // the thread that computes, and one team in the process keeps its workers spinning between passes
    // (libgomp spins ~300k rounds while its threads fit the cores, 100 once they do not: a worker
    // asleep between passes costs a futex wake-up per pass)
    e->host_ = host;
    if (host) {
        std::lock_guard<std::mutex> g(host->guests_mu_);
        host->guests_.push_back(e.get());
    }
    std::promise<bool> warm;
    std::future<bool> warmed = warm.get_future();
    if (host) {
        bool ok = false;
        host->run_on_thread([&] { ok = context_warm_up(*e->ctx_); });
        warm.set_value(ok);
        e->thread_ = std::thread([eng = e.get()] {
            thread_name_set("es-step");
            eng->loop();
        });
        e->thread_id_ = e->thread_.get_id();
    } else {
        e->thread_ = std::thread([eng = e.get(), &warm] {
            thread_name_set("es-step"); // its OpenMP workers too: they start from it
            eng->thread_id_ = std::this_thread::get_id();
            warm.set_value(context_warm_up(*eng->ctx_));
            eng->loop();
        });
    }
    if (!warmed.get()) {
        return fail("step engine: the warm-up decode failed (EDITSPEC_LOG=info shows libllama's reason)");
    }
    ES_LOG_INFO("step engine: %d requests at once, %d tokens of context each (%s), at most %d tokens a step\n", p.n_seq,
                e->n_ctx_seq_, e->regions_ ? "regions of one cache" : "a stream each", e->params_.n_step_tokens);
    return e;
}

step_engine::~step_engine() {
    if (host_) {
        std::lock_guard<std::mutex> g(host_->guests_mu_);
        std::erase(host_->guests_, this);
    }
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

std::unique_ptr<context> step_engine::view(llama_seq_id seq) {
    ES_ASSERT(seq >= 0 && seq < params_.n_seq);
    return context_view(*ctx_, *this, seq, n_ctx_seq_, params_.per_seq);
}

void step_engine::enter(llama_seq_id seq) {
    std::lock_guard<std::mutex> lock(mu_);
    active_[(size_t) seq] = 1;
}

void step_engine::leave(llama_seq_id seq) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        active_[(size_t) seq] = 0;
    }
    cv_.notify_all(); // a step may have been waiting for this view
}

step_load step_engine::view_others(llama_seq_id seq) const {
    std::lock_guard<std::mutex> lock(mu_);
    step_load l;
    const int32_t own = last_parts_[(size_t) seq].tokens;
    l.tokens = last_total_ - own;
    l.requests = last_batches_ - (own > 0 ? 1 : 0);
    for (size_t q = 0; q < last_parts_.size(); q++) {
        if (q != (size_t) seq && last_parts_[q].tokens > 0) l.parts.push_back(last_parts_[q]);
    }
    return l;
}

step_stats step_engine::stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
}

bool step_engine::all_cancelled(const std::vector<submission *> & subs) {
    for (const submission * s : subs) {
        if (!s->cancel || !s->cancel->load()) return false;
    }
    return !subs.empty();
}

// called by ggml's main compute thread, the engine's own, between graph nodes: step_subs_ is only
// written by that thread outside llama_decode
bool step_engine::abort_cb(void * data) {
    step_engine * e = static_cast<step_engine *>(data);
    if (!e->step_abort_.load(std::memory_order_relaxed) && all_cancelled(e->step_subs_)) e->step_abort_ = true;
    return e->step_abort_.load(std::memory_order_relaxed);
}

bool step_engine::view_decode(llama_seq_id seq, const llama_batch & b, const std::atomic<bool> * cancel, view_outputs & out,
                              bool argmax) {
    if (b.n_tokens > params_.per_seq.n_batch) {
        ES_LOG_ERROR("%s: a batch of %d tokens is over the view's n_batch %d\n", __func__, b.n_tokens, params_.per_seq.n_batch);
        return false;
    }
    submission s;
    s.seq = seq;
    s.b = &b;
    s.cancel = cancel;
    s.out = &out;
    s.argmax = argmax;
    s.job = fiber::current();
    s.sched = t_engine;
    ES_ASSERT((!s.job || s.sched) && "a view decoded from a fiber no step engine runs");
    std::unique_lock<std::mutex> lock(mu_);
    // every pass goes to the engine's thread, a lone request's too: one thread computes (see create())
    queue_.push_back(&s);
    if (!s.job) {
        cv_.notify_all(); // the engine's thread is the one waiting on cv_ (a job's is the one running it)
        s.cv.wait(lock, [&] { return s.done; });
        return s.ok;
    }
    // a job: its engine's loop goes on with the others and the step, and resumes it once s is done
    while (!s.done) {
        lock.unlock();
        fiber::park();
        lock.lock();
    }
    return s.ok;
}

void step_engine::view_forget(view_outputs & out) {
    std::lock_guard<std::mutex> kv(ctx_mu_);
    std::erase(lent_, &out);
}

void step_engine::copy_out(view_outputs & out) {
    const auto t0 = clock_type::now();
    size_t n = 0;
    for (const float * r : out.row) n += r != nullptr;
    out.copy.resize(n * (size_t) n_vocab_);
    size_t k = 0;
    for (const float *& r : out.row) {
        if (!r) continue;
        float * dst = out.copy.data() + k++ * (size_t) n_vocab_;
        std::memcpy(dst, r, sizeof(float) * (size_t) n_vocab_);
        r = dst;
    }
    std::lock_guard<std::mutex> lock(mu_);
    stats_.rows_copied += (int64_t) n;
    stats_.copy_ms += ms_since(t0);
}

void step_engine::finish(submission * s) {
    s->done = true;
    if (!s->job) {
        s->cv.notify_one(); // its view's thread alone: one wake-up a request, not one per request per batch
    } else if (s->sched == this) {
        wake_locked(s->job);
    } else {
        s->sched->wake(s->job); // a guest engine's step resumes a job of its host's (lock order: guest, host)
    }
}

void step_engine::wake_locked(fiber * f) {
    if (std::find(runnable_.begin(), runnable_.end(), f) == runnable_.end()) runnable_.push_back(f);
    cv_.notify_all();
}

void step_engine::wake(fiber * f) {
    std::lock_guard<std::mutex> lock(mu_);
    wake_locked(f);
}

void step_engine::spawn(std::function<void()> job) {
    ES_ASSERT(!host_ && "a guest engine's jobs are its host's");
    auto f = std::make_unique<fiber>(std::move(job));
    std::lock_guard<std::mutex> lock(mu_);
    runnable_.push_back(f.get());
    jobs_.push_back(std::move(f));
    cv_.notify_all();
}

void step_engine::wait_jobs() {
    ES_ASSERT(std::this_thread::get_id() != thread_id_ && "step_engine::wait_jobs() from the engine's thread");
    std::unique_lock<std::mutex> lock(mu_);
    jobs_cv_.wait(lock, [&] { return jobs_.empty(); });
}

void step_engine::yield() {
    fiber * f = fiber::current();
    ES_ASSERT(f && t_engine == this && "step_engine::yield() from a job of another thread");
    wake(f); // behind the runnable ones
    fiber::park();
}

void step_engine::run_jobs(std::unique_lock<std::mutex> & lock) {
    while (!runnable_.empty()) {
        fiber * f = runnable_.front();
        runnable_.erase(runnable_.begin());
        lock.unlock();
        const auto t0 = clock_type::now();
        try {
            f->resume();
        } catch (const std::exception & e) {
            ES_LOG_ERROR("step engine: a job ended with an exception: %s\n", e.what());
        } catch (...) {
            ES_LOG_ERROR("step engine: a job ended with an exception\n");
        }
        const double ms = ms_since(t0);
        lock.lock();
        stats_.jobs_ms += ms;
        if (f->finished()) {
            std::erase(runnable_, f);
            std::unique_ptr<fiber> done;
            for (auto & j : jobs_) {
                if (j.get() == f) done = std::move(j);
            }
            std::erase(jobs_, nullptr);
            lock.unlock();
            done.reset(); // its stack unmapped outside the lock
            lock.lock();
            jobs_cv_.notify_all();
        }
    }
}

void step_engine::run_on_thread(const std::function<void()> & f) {
    if (std::this_thread::get_id() == thread_id_) {
        f(); // a job's fiber or a hook: between steps, or inside one, on this very thread
        return;
    }
    guest_job j;
    j.f = &f;
    std::unique_lock<std::mutex> lock(mu_);
    guest_jobs_.push_back(&j);
    cv_.notify_all(); // the engine's thread is the one waiting on cv_
    guest_cv_.wait(lock, [&] { return j.done; });
}

void step_engine::run_guest_jobs(std::unique_lock<std::mutex> & lock) {
    if (guest_jobs_.empty()) return;
    while (!guest_jobs_.empty()) {
        guest_job * j = guest_jobs_.front();
        guest_jobs_.pop_front();
        lock.unlock();
        (*j->f)();
        lock.lock();
        j->done = true;
    }
    guest_cv_.notify_all();
}

bool step_engine::has_batch() const {
    if (stepping_) return false;
    // a guest leaves its host's jobs' batches to the host (run_guest_steps)
    return std::any_of(queue_.begin(), queue_.end(), [&](const submission * s) { return !host_ || !s->job; });
}

void step_engine::run_ready(std::unique_lock<std::mutex> & lock) {
    do {
        run_guest_jobs(lock);
        run_jobs(lock); // each job's host work, up to its next decode (or its end)
    } while (run_guest_steps(lock));
}

bool step_engine::run_guest_steps(std::unique_lock<std::mutex> & lock) {
    if (!runnable_.empty()) return false;
    lock.unlock(); // lock order: guests_mu_, a guest's mu_, then this one's
    bool any = false;
    {
        std::lock_guard<std::mutex> g(guests_mu_);
        for (step_engine * guest : guests_) any = guest->step_for_host() || any;
    }
    lock.lock();
    return any;
}

bool step_engine::step_for_host() {
    std::unique_lock<std::mutex> lock(mu_);
    if (stepping_ || queue_.empty()) return false;
    // every job of the host has run to its next decode: all that will ask this step have asked
    std::vector<submission *> subs;
    int32_t n_tokens = 0;
    if (!take_step(subs, n_tokens)) return false;
    step(lock, subs, n_tokens);
    return true;
}

bool step_engine::take_step(std::vector<submission *> & subs, int32_t & n_tokens) {
    // cancelled batches are answered at once; of the others the smallest go first (generating
    // requests' passes, then prompt chunks) up to the step's token budget (the first always fits)
    for (auto it = queue_.begin(); it != queue_.end();) {
        if ((*it)->cancel && (*it)->cancel->load()) {
            (*it)->ok = false;
            finish(*it);
            stats_.cancelled++;
            it = queue_.erase(it);
        } else {
            ++it;
        }
    }
    std::vector<submission *> order(queue_.begin(), queue_.end());
    std::stable_sort(order.begin(), order.end(),
                     [](const submission * a, const submission * b) { return a->b->n_tokens < b->b->n_tokens; });
    subs.clear();
    n_tokens = 0;
    for (submission * s : order) {
        if (!subs.empty() && n_tokens + s->b->n_tokens > params_.n_step_tokens) continue;
        n_tokens += s->b->n_tokens;
        subs.push_back(s);
    }
    std::erase_if(queue_, [&](const submission * s) { return std::find(subs.begin(), subs.end(), s) != subs.end(); });
    std::sort(subs.begin(), subs.end(), [](const submission * a, const submission * b) { return a->seq < b->seq; });
    return !subs.empty();
}

void step_engine::loop() {
    t_engine = this;
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
        cv_.wait(lock, [&] { return (stop_ && jobs_.empty()) || !guest_jobs_.empty() || !runnable_.empty() || has_batch(); });
        run_ready(lock);
        if (stop_ && queue_.empty() && jobs_.empty()) return;
        if (!has_batch()) continue;
        // gather: every active view's batch, or as many as came within the wait
        const auto t_first = clock_type::now();
        const double wait_ms = params_.wait_ms + params_.wait_frac * last_step_ms_;
        auto all_in = [&] {
            if (stop_) return true;
            for (size_t i = 0; i < active_.size(); i++) {
                if (!active_[i]) continue;
                bool in = false;
                for (const submission * s : queue_) in = in || s->seq == (llama_seq_id) i;
                if (!in) return false;
            }
            return true;
        };
        // a guest's decode (a draft model's pass) runs while the step gathers, and the jobs it resumes
        // go on to their next pass
        const auto deadline = t_first + std::chrono::microseconds((int64_t) (wait_ms * 1000.0));
        while (!cv_.wait_until(lock, deadline, [&] { return all_in() || !guest_jobs_.empty() || !runnable_.empty(); }) ||
               !all_in()) {
            if (guest_jobs_.empty() && runnable_.empty()) break; // the deadline passed
            run_ready(lock);
        }
        run_ready(lock);
        stats_.gather_ms += ms_since(t_first);
        if (stepping_) continue; // (a guest's: its host stepped it meanwhile)

        std::vector<submission *> subs;
        int32_t n_tokens = 0;
        if (!take_step(subs, n_tokens)) {
            cv_.notify_all();
            continue;
        }
        step(lock, subs, n_tokens);
    }
}

void step_engine::step(std::unique_lock<std::mutex> & lock, std::vector<submission *> & subs, int32_t n_tokens) {
    stepping_ = true;
    step_subs_ = subs;
    step_abort_ = false;
    lock.unlock();

    bool ok;
    run_ubatches_ = 0;
    double ms = 0.0; // the decode's own time: on a host's thread, not the wait for its step to end (the
                     // gather's wait is a fraction of it, and a guest held a host's 20 ms would wait 5 ms a pass)
    const std::function<void()> compute = [&] {
        const auto t0 = clock_type::now();
        std::lock_guard<std::mutex> kv(ctx_mu_);
        ok = run_step(subs);
        if (!ok && !step_abort_ && subs.size() > 1) {
            // one request's batch that cannot be decoded (no KV slot) fails alone
            ES_LOG_WARN("step engine: decoding the step's %zu requests one by one\n", subs.size());
            for (submission * s : subs) {
                std::vector<submission *> one = {s};
                run_step(one);
            }
        }
        ms = ms_since(t0);
    };
    if (host_) {
        host_->run_on_thread(compute);
    } else {
        compute();
    }

    lock.lock();
    step_subs_.clear();
    last_step_ms_ = ms;
    std::fill(last_parts_.begin(), last_parts_.end(), pass_part{});
    for (const submission * s : subs) last_parts_[(size_t) s->seq] = step_part_of(*s->b);
    stats_.decode_ms += ms;
    if (ok && pass_cost_) { // the model's figure for the same pass (a step retried request by request is not one)
        std::vector<pass_part> parts;
        for (const submission * s : subs) parts.push_back(last_parts_[(size_t) s->seq]);
        stats_.model_ms += (*pass_cost_)(parts);
        stats_.modelled++;
        stats_.modelled_decode_ms += ms;
    }
    last_total_ = n_tokens;
    last_batches_ = (int32_t) subs.size();
    stats_.steps++;
    stats_.tokens += n_tokens;
    stats_.batches += (int64_t) subs.size();
    stats_.ubatches += run_ubatches_;
    stats_.graphs_reused = llama_perf_context(ctx_->get()).n_reused; // libllama's count since the context began
    if (!ok && step_abort_) stats_.aborted++;
    for (submission * s : subs) finish(s);
    stepping_ = false;
    cv_.notify_all();
}

bool step_engine::run_step(std::vector<submission *> & subs) {
    const auto t_layout = clock_type::now();
    batch & mb = *merged_;
    mb.clear();
    llama_memory_t mem = llama_get_memory(ctx_->get());
    // libllama takes equal token counts of consecutive streams into one ubatch: batches of unequal
    // lengths take a ubatch per length, and an idle stream between two requests' splits them. Padding
    // each batch to the longest with throwaway tokens after its own (same stream, later positions, no
    // logits, removed after the pass: a row never attends to a later position), and giving an idle
    // stream between them as many (after its own cells, where their attention stays cheap), makes the
    // step one ubatch, when that adds at most pad_ratio of
    // its tokens. subs are in stream order (loop())
    int32_t n_real = 0, n_longest = 0;
    int64_t attention = 0; // the step's rows times the cells each attends to, about
    for (const submission * s : subs) {
        n_real += s->b->n_tokens;
        n_longest = std::max(n_longest, s->b->n_tokens);
        for (int32_t i = 0; i < s->b->n_tokens; i++) attention += s->b->pos[i] + 1;
    }
    std::vector<std::pair<llama_seq_id, llama_pos>> idle; // idle streams between requests: (stream, its next position)
    bool idle_ok = true;
    int64_t idle_attention = 0;
    for (size_t k = 1; k < subs.size(); k++) {
        for (llama_seq_id q = subs[k - 1]->seq + 1; q < subs[k]->seq; q++) {
            const llama_pos next = llama_memory_seq_pos_max(mem, q) + 1;
            idle_ok = idle_ok && next + n_longest < n_ctx_seq_;
            idle_attention += (int64_t) n_longest * (next + n_longest);
            idle.push_back({q, next});
        }
    }
    // the idle streams' throwaway rows attend to their cells: no more than the step's own rows do, and
    // 512 cells a row (on a CPU the weights, read once for every row, cost more than that)
    idle_ok = idle_ok && idle_attention <= attention + (int64_t) n_longest * 512;
    if (!idle_ok || regions_) idle.clear();
    const int32_t n_padded = n_longest * (int32_t) (subs.size() + idle.size());
    // regions: one ubatch whatever the mix, nothing to pad
    bool pad = !regions_ && !params_.recurrent && !step_hook_ && subs.size() > 1 && n_padded > n_real &&
               n_padded <= mb.capacity() && n_padded <= params_.n_ubatch_max();
    std::shared_ptr<const std::function<double(std::span<const pass_part>)>> cost;
    {
        std::lock_guard<std::mutex> lock(mu_);
        cost = pass_cost_;
    }
    // the padding weighs the weights' read: every part at the cost model's base depth
    auto pass_cost = [&](int32_t n) { const pass_part p{n, 0}; return (*cost)(std::span<const pass_part>(&p, 1)); };
    if (pad && params_.pad_ratio < 0 && cost) {
        // by the pass cost: one padded pass against the ubatches the split makes of the step as it is
        std::vector<int32_t> tokens((size_t) params_.n_seq, 0);
        for (const submission * s : subs) tokens[s->seq] = s->b->n_tokens;
        double split_cost = 0.0;
        for (int32_t n : step_ubatch_sizes(tokens, std::min(params_.n_ubatch_max(), mb.capacity()))) split_cost += pass_cost(n);
        pad = pass_cost(n_padded) <= split_cost;
    } else if (pad) {
        pad = (double) n_padded <= (params_.pad_ratio < 0 ? 1.5 : params_.pad_ratio) * n_real;
    }
    if (!pad) idle.clear();
    std::vector<int32_t> offset(subs.size());
    std::vector<std::pair<llama_seq_id, llama_pos>> pads; // throwaway tokens from (stream, position) on
    std::vector<int32_t> laid((size_t) params_.n_seq, 0); // tokens per stream, as laid out
    size_t next_idle = 0;
    for (size_t k = 0; k < subs.size(); k++) {
        for (; next_idle < idle.size() && idle[next_idle].first < subs[k]->seq; next_idle++) {
            const auto [q, from] = idle[next_idle];
            for (int32_t i = 0; i < n_longest; i++) ES_ASSERT(mb.add(subs[0]->b->token[0], from + i, {q}, false));
            pads.push_back({q, from});
            laid[(size_t) q] = n_longest;
        }
        const llama_batch & b = *subs[k]->b;
        offset[k] = mb.size();
        llama_pos last = -1;
        for (int32_t i = 0; i < b.n_tokens; i++) {
            ES_ASSERT(b.n_seq_id[i] == 1 && b.seq_id[i][0] == 0 && "a view's batch holds sequence 0 only");
            ES_ASSERT(mb.add(b.token[i], b.pos[i], {subs[k]->seq}, b.logits[i] != 0));
            last = std::max(last, b.pos[i]);
        }
        laid[(size_t) subs[k]->seq] = b.n_tokens;
        // padding goes after the batch's last position, where its stream holds nothing: not after a
        // batch that fills a gap before its stream's last cells (PIE's)
        if (pad && b.n_tokens < n_longest && last + n_longest - b.n_tokens < n_ctx_seq_ &&
            llama_memory_seq_pos_max(mem, subs[k]->seq) < last) {
            pads.push_back({subs[k]->seq, last + 1});
            for (int32_t i = b.n_tokens; i < n_longest; i++) {
                ES_ASSERT(mb.add(b.token[b.n_tokens - 1], last + 1 + (i - b.n_tokens), {subs[k]->seq}, false));
            }
            laid[(size_t) subs[k]->seq] = n_longest;
        }
    }
    if (regions_) {
        const int32_t n_ubatch = (int32_t) llama_n_ubatch(ctx_->get());
        run_ubatches_ += (mb.size() + n_ubatch - 1) / n_ubatch;
    } else {
        run_ubatches_ += step_ubatches(laid, std::min(params_.n_ubatch_max(), mb.capacity()));
    }
    const double layout_ms = ms_since(t_layout);
    // rows lent after an earlier decode to a view that has not asked again: copied out before the decode
    // overwrites them (a view in this step, or waiting for a later one, is done with its last rows)
    if (!lent_.empty()) {
        std::vector<view_outputs *> done;
        for (const submission * s : subs) done.push_back(s->out);
        {
            std::lock_guard<std::mutex> lock(mu_);
            for (const submission * s : queue_) done.push_back(s->out);
        }
        for (view_outputs * out : lent_) {
            if (std::find(done.begin(), done.end(), out) == done.end()) copy_out(*out);
        }
        lent_.clear();
    }
    // argmax outputs when every request with output rows reads their argmax only (set for every step: a
    // flag of libllama's context)
    bool argmax = true, any_outputs = false;
    for (const submission * s : subs) {
        bool outputs = false;
        for (int32_t i = 0; i < s->b->n_tokens && !outputs; i++) outputs = s->b->logits[i] != 0;
        argmax = argmax && (s->argmax || !outputs); // a prompt chunk without outputs reads nothing
        any_outputs = any_outputs || outputs;
    }
    argmax = argmax && any_outputs;
    llama_set_output_argmax(ctx_->get(), argmax);
    // a step whose every request is cancelled stops inside llama_decode (abort_cb)
    step_abort_ = all_cancelled(subs);
    const int32_t ret = step_abort_ ? 2 : llama_decode(ctx_->get(), mb.get());
    clear_upper_state();
    if (ret != 0) {
        if (!(ret == 2 && step_abort_)) {
            ES_LOG_ERROR("step engine: llama_decode failed with status %d (%d tokens of %zu requests; 1 = no KV slot)\n", ret,
                         mb.size(), subs.size());
        }
        // earlier ubatches of the step may have stayed in the cache: each request's batch leaves no cell,
        // and neither does an idle stream's padding
        for (const auto & [q, from] : pads) llama_memory_seq_rm(mem, q, from, -1);
        for (submission * s : subs) {
            llama_pos p0 = s->b->pos[0], p1 = s->b->pos[0];
            for (int32_t i = 0; i < s->b->n_tokens; i++) p0 = std::min(p0, s->b->pos[i]), p1 = std::max(p1, s->b->pos[i]);
            llama_memory_seq_rm(mem, s->seq, p0, p1 + 1);
            s->out->row.clear();
            s->out->top.clear();
            s->ok = false;
        }
        return false;
    }
    for (const auto & [q, from] : pads) llama_memory_seq_rm(mem, q, from, -1);
    if (step_hook_) step_hook_(mb.get());
    int64_t n_lent = 0;
    for (size_t k = 0; k < subs.size(); k++) {
        submission & s = *subs[k];
        const llama_batch & b = *s.b;
        view_outputs & out = *s.out;
        out.row.assign((size_t) b.n_tokens, nullptr);
        out.top.clear();
        s.ok = true;
        if (argmax) {
            // one token a row, copied
            out.top.assign((size_t) b.n_tokens, -1);
            for (int32_t i = 0; i < b.n_tokens && s.ok; i++) {
                if (!b.logits[i]) continue;
                out.top[i] = llama_get_argmax_ith(ctx_->get(), offset[k] + i);
                s.ok = out.top[i] >= 0;
            }
            if (!s.ok) out.top.clear();
            continue;
        }
        for (int32_t i = 0; i < b.n_tokens && s.ok; i++) {
            if (!b.logits[i]) continue;
            out.row[i] = llama_get_logits_ith(ctx_->get(), offset[k] + i);
            s.ok = out.row[i] != nullptr;
        }
        if (!s.ok) {
            out.row.clear();
            continue;
        }
        // a job on this thread reads its rows before it parks again, and the next step waits for that:
        // they stay where the decode left them; a view's own thread could still read them during the next
        // step, so it gets a copy
        if (s.job && s.sched == t_engine) {
            lent_.push_back(&out);
            for (const float * r : out.row) n_lent += r != nullptr;
        } else {
            copy_out(out);
        }
    }
    std::lock_guard<std::mutex> lock(mu_);
    stats_.layout_ms += layout_ms;
    stats_.rows_lent += n_lent;
    stats_.steps_argmax += argmax;
    return true;
}

} // namespace editspec
