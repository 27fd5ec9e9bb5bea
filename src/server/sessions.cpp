// /v1/sessions: document sessions (session.h) over HTTP. Each session owns a context (its KV cache
// follows the document's edits); all their decoding runs on one worker thread (ggml's thread team
// belongs to the thread that calls it, as the slots' do). Bounded in number and idle time: a new
// session evicts the one idle longest when the idle limit has passed, else it is refused (429).
#include "server-sessions.h"

#include "editspec/session.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <thread>

namespace editspec {

using json = nlohmann::json;

namespace {

using clock_type = std::chrono::steady_clock;

json error_json(int status, const std::string & msg, const std::string & param = "") {
    api_error err;
    err.status = status;
    err.message = msg;
    err.param = param;
    if (status == 404) err.code = "session_not_found";
    if (status == 429) {
        err.type = "rate_limit_error";
        err.code = "too_many_sessions";
    }
    return api_error_json(err);
}

// the request body as a JSON object ("" = {}); false with the 400 error in out
bool parse_body(const std::string & body, json & in, json & out) {
    try {
        in = body.empty() ? json::object() : json::parse(body);
    } catch (const json::exception &) {
        out = error_json(400, "the body is not JSON");
        return false;
    }
    if (!in.is_object()) {
        out = error_json(400, "the body must be a JSON object");
        return false;
    }
    return true;
}

} // namespace

struct session_store::impl {
    struct entry {
        std::unique_ptr<context> ctx;
        std::unique_ptr<doc_session> doc;
        clock_type::time_point last_used;
    };
    const runner & rn;
    session_store_params params;
    std::map<std::string, entry> sessions; // touched on the worker only
    int64_t next_id = 1;

    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::function<void()>> jobs;
    bool stopping = false;
    std::thread worker;

    impl(const runner & r, const session_store_params & p) : rn(r), params(p) {
        worker = std::thread([this] {
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
            out = error_json(404, "no session '" + id + "' (closed, or evicted after idling)");
            return nullptr;
        }
        it->second.last_used = clock_type::now();
        return &it->second;
    }

    // runs f on the worker and waits for it
    int on_worker(const std::function<int()> & f) {
        std::promise<int> done;
        {
            std::lock_guard<std::mutex> lock(mu);
            jobs.push_back([&] {
                int st = 500;
                try {
                    st = f();
                } catch (const std::exception &) {
                    st = 500;
                }
                done.set_value(st);
            });
        }
        cv.notify_all();
        return done.get_future().get();
    }
};

session_store::session_store(const runner & rn, const session_store_params & p) : d_(std::make_unique<impl>(rn, p)) {}
session_store::~session_store() = default;

int session_store::create(const std::string & body, json & out) {
    json in;
    if (!parse_body(body, in, out)) return 400;
    if (!in.contains("text") || !in["text"].is_string()) {
        out = error_json(400, "a session needs \"text\": the document (a string)", "text");
        return 400;
    }
    session_params sp;
    const std::string strategy = in.value("strategy", std::string("pie"));
    if (!kv_strategy_parse(strategy, sp.strategy)) {
        out = error_json(400, "\"strategy\" must be \"recompute\", \"conflict\" or \"pie\"", "strategy");
        return 400;
    }
    if (in.contains("drift_max") && !in["drift_max"].is_number_integer()) {
        out = error_json(400, "\"drift_max\" must be an integer", "drift_max");
        return 400;
    }
    sp.drift_max = in.value("drift_max", d_->params.drift_max);
    const std::string text = in["text"].get<std::string>();
    return d_->on_worker([&]() -> int {
        if (d_->params.max_sessions <= 0) {
            out = error_json(429, "this server holds no document sessions (--max-sessions 0)");
            return 429;
        }
        // bounded: evict the session idle longest once it has been idle past the limit
        if ((int32_t) d_->sessions.size() >= d_->params.max_sessions) {
            auto oldest = d_->sessions.end();
            for (auto it = d_->sessions.begin(); it != d_->sessions.end(); ++it) {
                if (oldest == d_->sessions.end() || it->second.last_used < oldest->second.last_used) oldest = it;
            }
            const double idle = std::chrono::duration<double>(clock_type::now() - oldest->second.last_used).count();
            if (idle < d_->params.idle_s) {
                out = error_json(429, "the server holds " + std::to_string(d_->sessions.size()) +
                                          " sessions (its --max-sessions); close one (DELETE /v1/sessions/ID)");
                return 429;
            }
            d_->sessions.erase(oldest);
        }
        std::string error;
        impl::entry e;
        e.ctx = runner_new_context(d_->rn, &error);
        if (!e.ctx) {
            out = error_json(500, "cannot create the session's context: " + error);
            return 500;
        }
        e.doc = std::make_unique<doc_session>(*e.ctx, sp);
        if (!e.doc->open(text, &error)) {
            out = error_json(400, error, "text");
            return 400;
        }
        e.last_used = clock_type::now();
        const std::string id = "sess-" + std::to_string(d_->next_id++);
        out = {{"id", id}, {"object", "session"}, {"tokens", e.doc->tokens().size()},
               {"strategy", kv_strategy_name(sp.strategy)}};
        d_->sessions.emplace(id, std::move(e));
        return 200;
    });
}

int session_store::edit(const std::string & id, const std::string & body, json & out) {
    json in;
    if (!parse_body(body, in, out)) return 400;
    // one edit, or {"edits": [...]}
    std::vector<text_edit> edits;
    const json list = in.contains("edits") ? in["edits"] : json::array({in});
    if (!list.is_array() || list.empty()) {
        out = error_json(400, "\"edits\" must be a non-empty array", "edits");
        return 400;
    }
    for (const json & e : list) {
        if (!e.is_object() || !e.contains("offset") || !e["offset"].is_number_unsigned() ||
            (e.contains("delete") && !e["delete"].is_number_unsigned()) || (e.contains("insert") && !e["insert"].is_string())) {
            out = error_json(400, "an edit is {\"offset\": bytes, \"delete\": bytes, \"insert\": text}", "edits");
            return 400;
        }
        edits.push_back({e["offset"].get<size_t>(), e.value("delete", (size_t) 0), e.value("insert", std::string())});
    }
    return d_->on_worker([&]() -> int {
        impl::entry * ent = d_->find(id, out);
        if (!ent) return 404;
        doc_session & doc = *ent->doc;
        json stats = json::array();
        for (const text_edit & e : edits) {
            edit_stats st;
            std::string error;
            if (!doc.edit(e, &st, &error)) {
                if (doc.tokens().empty()) d_->sessions.erase(id); // a decode failure closed it
                out = error_json(400, error, "edits");
                return 400;
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
    json in;
    if (!parse_body(body, in, out)) return 400;
    if (in.contains("max_tokens") && !in["max_tokens"].is_number_unsigned()) {
        out = error_json(400, "\"max_tokens\" must be a positive integer", "max_tokens");
        return 400;
    }
    const int32_t n = std::min<int32_t>(in.value("max_tokens", 64), 256);
    return d_->on_worker([&]() -> int {
        impl::entry * ent = d_->find(id, out);
        if (!ent) return 404;
        out = {{"id", id}, {"line", ent->doc->predict_line(n)}};
        return 200;
    });
}

int session_store::close(const std::string & id, json & out) {
    return d_->on_worker([&]() -> int {
        if (d_->sessions.erase(id) == 0) {
            out = error_json(404, "no session '" + id + "'");
            return 404;
        }
        out = {{"id", id}, {"deleted", true}};
        return 200;
    });
}

} // namespace editspec
