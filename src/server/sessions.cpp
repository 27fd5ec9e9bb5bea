// /v1/sessions: document sessions (session.h) over HTTP. Each session owns a context (its KV cache
// follows the document's edits); their requests run on one worker thread, and their passes on the
// step engine's thread between its steps (ggml's thread team belongs to the thread that computes: one
// team in the process, as the slots' and the draft model's). Bounded in number, idle time and waiting
// work: a new session evicts the one idle longest when the idle limit has passed, else it is refused
// (429); past SESSION_QUEUE_MAX requests waiting for the worker, 503.
#include "server-sessions.h"
#include "editspec/clock.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <future>
#include <map>
#include <random>
#include <thread>

namespace editspec {

using json = nlohmann::json;

namespace {


constexpr size_t SESSION_QUEUE_MAX = 16; // requests waiting for the sessions' worker

int fail(json & out, int status, const std::string & msg, const std::string & param = "") {
    api_error err;
    err.status = status;
    err.message = msg;
    err.param = param;
    if (status == 404) err.code = "session_not_found";
    if (status == 429) {
        err.type = "rate_limit_error";
        err.code = "too_many_sessions";
    }
    if (status >= 500) err.type = "server_error";
    out = api_error_json(err);
    return status;
}

int fail(json & out, const api_error & err) {
    out = api_error_json(err);
    return err.status;
}

// 128 random bits: a session id is a capability, not a counter another client can guess
std::string session_new_id() {
    static std::mutex mu;
    static std::random_device rd;
    std::lock_guard<std::mutex> lock(mu);
    char buf[40];
    snprintf(buf, sizeof(buf), "sess-%08x%08x%08x%08x", rd(), rd(), rd(), rd());
    return buf;
}

} // namespace

struct session_store::impl {
    struct entry {
        std::unique_ptr<context> ctx;
        std::unique_ptr<doc_session> doc;
        std::unique_ptr<slot_memory> memory = std::make_unique<slot_memory>(); // requests run on the session
        clock_type::time_point last_used;
    };
    const runner & rn;
    session_store_params params;
    std::map<std::string, entry> sessions; // touched on the worker only

    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::function<void()>> jobs;
    bool stopping = false;
    std::thread worker;

    impl(const runner & r, const session_store_params & p) : rn(r), params(p) {
        worker = std::thread([this] {
            thread_name_set("es-sessions");
            while (true) {
                std::function<void()> j;
                {
                    std::unique_lock<std::mutex> lock(mu);
                    cv.wait(lock, [&] { return stopping || !jobs.empty(); });
                    if (jobs.empty()) return;
                    j = std::move(jobs.front());
                    jobs.pop_front();
                }
                j();
            }
        });
    }
    ~impl() {
        {
            std::lock_guard<std::mutex> lock(mu);
            stopping = true;
        }
        cv.notify_all();
        worker.join();
        sessions.clear();
    }

    // the session (worker only), touched; null with the 404 error in out
    entry * find(const std::string & id, json & out) {
        auto it = sessions.find(id);
        if (it == sessions.end()) {
            fail(out, 404, "no session '" + id + "' (closed, or evicted after idling)");
            return nullptr;
        }
        it->second.last_used = clock_type::now();
        return &it->second;
    }

    // runs f on the worker and waits for it; 503 when too many wait already or the server stops,
    // 500 when f throws
    int on_worker(json & out, const std::function<int()> & f) {
        auto done = std::make_shared<std::promise<int>>();
        auto result = done->get_future();
        {
            std::lock_guard<std::mutex> lock(mu);
            if (stopping) return fail(out, 503, "the server is stopping");
            if (jobs.size() >= SESSION_QUEUE_MAX) {
                return fail(out, 503, "too many session requests are waiting; retry shortly");
            }
            jobs.push_back([&out, f, done] {
                int st = 500;
                try {
                    st = f();
                } catch (const std::exception & e) {
                    st = fail(out, 500, std::string("internal error: ") + e.what());
                }
                done->set_value(st);
            });
        }
        cv.notify_all();
        return result.get();
    }
};

session_store::session_store(const runner & rn, const session_store_params & p) : d_(std::make_unique<impl>(rn, p)) {}
session_store::~session_store() = default;

int session_store::create(const std::string & body, json & out) {
    session_create_request rq;
    api_error err;
    if (!session_parse_create(body, d_->params, rq, err)) return fail(out, err);
    // validated before anything is evicted: a document that cannot open costs no one their session
    const int32_t n_tokens = (int32_t) d_->rn.target.model->tokenize(rq.text, true, false).size();
    if (n_tokens + 64 > d_->rn.params.n_ctx) {
        return fail(out, 400, "the document is " + std::to_string(n_tokens) + " tokens; a session holds " +
                                  std::to_string(d_->rn.params.n_ctx - 64) + " (the server's --ctx-size less 64 for a prediction)",
                    "text");
    }
    return d_->on_worker(out, [&]() -> int {
        if (d_->params.max_sessions <= 0) return fail(out, 429, "this server holds no document sessions (--max-sessions 0)");
        // bounded: evict the session idle longest once it has been idle past the limit
        if ((int32_t) d_->sessions.size() >= d_->params.max_sessions) {
            auto oldest = d_->sessions.end();
            for (auto it = d_->sessions.begin(); it != d_->sessions.end(); ++it) {
                if (oldest == d_->sessions.end() || it->second.last_used < oldest->second.last_used) oldest = it;
            }
            const double idle = std::chrono::duration<double>(clock_type::now() - oldest->second.last_used).count();
            if (idle < d_->params.idle_s) {
                return fail(out, 429, "the server holds " + std::to_string(d_->sessions.size()) +
                                          " sessions (its --max-sessions); close one (DELETE /v1/sessions/ID)");
            }
            d_->sessions.erase(oldest);
        }
        std::string error;
        impl::entry e;
        e.ctx = runner_new_context(d_->rn, &error);
        if (!e.ctx) return fail(out, 500, "cannot create the session's context: " + error);
        if (step_engine * eng = d_->params.compute) {
            e.ctx->set_compute([eng](const std::function<void()> & f) { eng->run_on_thread(f); });
        }
        e.doc = std::make_unique<doc_session>(*e.ctx, rq.params);
        if (!e.doc->open(rq.text, &error)) return fail(out, 400, error, "text");
        e.last_used = clock_type::now();
        const std::string id = session_new_id();
        out = {{"id", id}, {"object", "session"}, {"tokens", e.doc->tokens().size()},
               // a session's name for the exact mode, as before the modes were one enum
               {"strategy", rq.params.strategy == KV_REUSE_PREFIX ? "recompute" : kv_reuse_name(rq.params.strategy)}};
        d_->sessions.emplace(id, std::move(e));
        return 200;
    });
}

int session_store::edit(const std::string & id, const std::string & body, json & out) {
    std::vector<text_edit> edits;
    api_error err;
    if (!session_parse_edits(body, edits, err)) return fail(out, err);
    return d_->on_worker(out, [&]() -> int {
        impl::entry * ent = d_->find(id, out);
        if (!ent) return 404;
        doc_session & doc = *ent->doc;
        json stats = json::array();
        for (const text_edit & e : edits) {
            edit_stats st;
            std::string error;
            if (!doc.edit(e, &st, &error)) {
                if (doc.tokens().empty()) d_->sessions.erase(id); // a decode failure closed it
                return fail(out, 400, error, "edits");
            }
            stats.push_back({{"first", st.first}, {"removed", st.n_removed}, {"inserted", st.n_inserted},
                             {"encoded", st.n_encoded}, {"stale", st.n_stale}, {"kv_ms", st.kv_ms}});
        }
        const int32_t refreshed = doc.refresh(); // drift control, between requests
        out = {{"id", id}, {"edits", stats}, {"tokens", doc.tokens().size()}, {"stale", doc.n_stale()},
               {"refreshed", std::max(refreshed, 0)}};
        return 200;
    });
}

int session_store::complete(const std::string & id, const std::string & body, json & out) {
    int32_t n = 64;
    api_error err;
    if (!session_parse_complete(body, n, err)) return fail(out, err);
    return d_->on_worker(out, [&]() -> int {
        impl::entry * ent = d_->find(id, out);
        if (!ent) return 404;
        out = {{"id", id}, {"line", ent->doc->predict_line(n)}};
        return 200;
    });
}

int session_store::submit(const std::string & id, job j, std::function<void(std::exception_ptr)> done, json & out) {
    impl & d = *d_;
    {
        std::lock_guard<std::mutex> lock(d.mu);
        if (d.stopping) return fail(out, 503, "the server is stopping");
        if (d.jobs.size() >= SESSION_QUEUE_MAX) return fail(out, 503, "too many session requests are waiting; retry shortly");
        d.jobs.push_back([&d, id, j = std::move(j), done = std::move(done)] {
            try {
                auto it = d.sessions.find(id);
                if (it == d.sessions.end()) throw session_gone("no session '" + id + "' (closed, or evicted after idling)");
                impl::entry & e = it->second;
                e.last_used = clock_type::now();
                prompt_cache_params reuse;
                if (!e.doc->lend(reuse)) {
                    throw session_gone("session '" + id + "' keeps its cells at conflicting positions (strategy conflict): "
                                       "a request can start only from a pie or recompute session");
                }
                std::exception_ptr failed;
                try {
                    j(*e.ctx, *e.memory, reuse);
                } catch (...) {
                    failed = std::current_exception();
                }
                if (!e.doc->take_back(nullptr)) d.sessions.erase(it); // a decode failure closed it
                if (failed) std::rethrow_exception(failed);
            } catch (...) {
                done(std::current_exception());
                return;
            }
            done(nullptr);
        });
    }
    d.cv.notify_all();
    return 200;
}

int session_store::close(const std::string & id, json & out) {
    return d_->on_worker(out, [&]() -> int {
        if (d_->sessions.erase(id) == 0) return fail(out, 404, "no session '" + id + "'");
        out = {{"id", id}, {"deleted", true}};
        return 200;
    });
}

} // namespace editspec
