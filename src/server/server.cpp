// The HTTP side of `editspec serve`: routes, slots, streaming, metrics.
#include "server-sessions.h"
#include "editspec/server.h"
#include "editspec/edit.h"
#include "editspec/log.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <deque>
#include <future>
#include <thread>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>

namespace editspec {

namespace {

using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;

// ----------------------------------------------------------------------------
// metrics (Prometheus text format)

struct metrics {
    static constexpr double bounds[] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
    static constexpr int n_bounds = sizeof(bounds) / sizeof(bounds[0]);

    std::mutex mu;
    std::map<std::string, int64_t> requests; // "endpoint status" -> count
    int64_t prompt_tokens = 0, generated_tokens = 0, target_passes = 0;
    int64_t drafted[DRAFT_SOURCE_COUNT] = {}, accepted[DRAFT_SOURCE_COUNT] = {};
    int64_t latency_le[n_bounds + 1] = {}; // cumulative at render time; here per bucket
    double latency_sum = 0.0;
    int64_t latency_n = 0;

    void request(const std::string & path, int status, double seconds) {
        std::lock_guard<std::mutex> lock(mu);
        requests[path + " " + std::to_string(status)]++;
        int b = 0;
        while (b < n_bounds && seconds > bounds[b]) b++;
        latency_le[b]++;
        latency_sum += seconds;
        latency_n++;
    }

    void generation(const generate_result & r) {
        std::lock_guard<std::mutex> lock(mu);
        prompt_tokens += r.prompt_tokens;
        generated_tokens += (int64_t) r.tokens.size();
        target_passes += r.target_passes;
        for (int s = 0; s < DRAFT_SOURCE_COUNT; s++) {
            drafted[s] += r.by_source[s].n_drafted;
            accepted[s] += r.by_source[s].n_accepted;
        }
    }

    std::string render() {
        std::lock_guard<std::mutex> lock(mu);
        std::string o;
        char buf[256];
        o += "# HELP editspec_requests_total HTTP requests by path and status\n# TYPE editspec_requests_total counter\n";
        for (const auto & [k, v] : requests) {
            const size_t sp = k.find(' ');
            snprintf(buf, sizeof(buf), "editspec_requests_total{path=\"%s\",status=\"%s\"} %lld\n", k.substr(0, sp).c_str(),
                     k.substr(sp + 1).c_str(), (long long) v);
            o += buf;
        }
        auto counter = [&](const char * name, const char * help, int64_t v) {
            snprintf(buf, sizeof(buf), "# HELP %s %s\n# TYPE %s counter\n%s %lld\n", name, help, name, name, (long long) v);
            o += buf;
        };
        counter("editspec_prompt_tokens_total", "prompt tokens processed", prompt_tokens);
        counter("editspec_tokens_generated_total", "tokens generated", generated_tokens);
        counter("editspec_target_passes_total", "target model passes while generating", target_passes);
        o += "# HELP editspec_draft_tokens_total draft tokens verified by the target, by drafter source\n"
             "# TYPE editspec_draft_tokens_total counter\n";
        for (int s = 0; s < DRAFT_SOURCE_COUNT; s++) {
            snprintf(buf, sizeof(buf), "editspec_draft_tokens_total{source=\"%s\"} %lld\n", draft_source_name((uint8_t) s),
                     (long long) drafted[s]);
            o += buf;
        }
        o += "# HELP editspec_draft_tokens_accepted_total draft tokens accepted, by drafter source\n"
             "# TYPE editspec_draft_tokens_accepted_total counter\n";
        for (int s = 0; s < DRAFT_SOURCE_COUNT; s++) {
            snprintf(buf, sizeof(buf), "editspec_draft_tokens_accepted_total{source=\"%s\"} %lld\n",
                     draft_source_name((uint8_t) s), (long long) accepted[s]);
            o += buf;
        }
        o += "# HELP editspec_request_seconds request latency\n# TYPE editspec_request_seconds histogram\n";
        int64_t cum = 0;
        for (int b = 0; b <= n_bounds; b++) {
            cum += latency_le[b];
            if (b < n_bounds) snprintf(buf, sizeof(buf), "editspec_request_seconds_bucket{le=\"%g\"} %lld\n", bounds[b], (long long) cum);
            else snprintf(buf, sizeof(buf), "editspec_request_seconds_bucket{le=\"+Inf\"} %lld\n", (long long) cum);
            o += buf;
        }
        snprintf(buf, sizeof(buf), "editspec_request_seconds_sum %.6f\neditspec_request_seconds_count %lld\n", latency_sum,
                 (long long) latency_n);
        o += buf;
        return o;
    }
};

// ----------------------------------------------------------------------------
// slots: one context and one thread each. Decoding always runs on the slot's own thread: ggml's
// OpenMP team belongs to the thread that calls it, and teams of several HTTP threads spinning at
// once would fight over the cores (3x slower measured on 2 cores).
//
// A request goes to the free slot whose KV cache its prompt extends (a chat that continues an earlier
// conversation finds that conversation's slot and decodes only its new turn), else to the slot used
// least recently: the N slots keep the N most recent conversations.

struct slots {
    using job = std::function<void(context &)>;
    struct slot {
        std::unique_ptr<context> ctx;
        job pending;            // set by run(), taken by the slot's thread
        bool busy = false;      // a job is assigned and not finished
        uint64_t last_used = 0; // run() order
    };
    std::mutex mu;
    std::condition_variable cv;
    std::vector<slot> sl;
    std::vector<std::thread> threads;
    uint64_t n_runs = 0;
    bool stopping = false;

    void add(std::unique_ptr<context> ctx) { sl.push_back(slot{std::move(ctx)}); }

    void start() {
        for (size_t i = 0; i < sl.size(); i++) {
            threads.emplace_back([this, i] {
                while (true) {
                    job j;
                    {
                        std::unique_lock<std::mutex> lock(mu);
                        cv.wait(lock, [&] { return stopping || sl[i].pending; });
                        if (!sl[i].pending) return;
                        j = std::move(sl[i].pending);
                        sl[i].pending = nullptr;
                    }
                    j(*sl[i].ctx);
                    {
                        std::lock_guard<std::mutex> lock(mu);
                        sl[i].busy = false;
                    }
                    cv.notify_all();
                }
            });
        }
    }

    // the free slot for a prompt (mu held): the slot whose cached tokens the prompt mostly extends (its
    // conversation; at least half of what it caches, so that two conversations sharing only an opening
    // line or a system prompt do not evict each other), the longest such prefix first; else the least
    // recently used slot. -1 = none free.
    int32_t pick(std::span<const llama_token> prompt) const {
        int32_t best = -1, lru = -1;
        size_t best_common = 0;
        for (size_t i = 0; i < sl.size(); i++) {
            if (sl[i].busy) continue;
            if (lru < 0 || sl[i].last_used < sl[lru].last_used) lru = (int32_t) i;
            const token_vec & cached = sl[i].ctx->cached_prompt();
            size_t common = 0;
            while (common < cached.size() && common < prompt.size() && cached[common] == prompt[common]) common++;
            if (common > 0 && 2 * common >= cached.size() && common > best_common) {
                best = (int32_t) i;
                best_common = common;
            }
        }
        return best >= 0 ? best : lru;
    }

    // runs j on the free slot that suits the prompt best and waits for it
    void run(std::span<const llama_token> prompt, const job & j) {
        std::promise<void> done;
        {
            std::unique_lock<std::mutex> lock(mu);
            int32_t i = -1;
            cv.wait(lock, [&] { return (i = pick(prompt)) >= 0; });
            sl[i].busy = true;
            sl[i].last_used = ++n_runs;
            sl[i].pending = [&](context & c) {
                j(c);
                done.set_value();
            };
        }
        cv.notify_all();
        done.get_future().wait();
    }

    void stop() {
        {
            std::lock_guard<std::mutex> lock(mu);
            stopping = true;
        }
        cv.notify_all();
        for (std::thread & t : threads) t.join();
    }
};

struct server_state {
    server_params params;
    runner rn;
    method_spec method;      // for requests without a prediction
    method_spec with_reuse;  // with one: Reuse first, then the method's drafters
    slots sl;
    metrics mx;
    std::string model_id;    // the model file's name
    std::atomic<int64_t> next_id{1};
    std::unique_ptr<session_store> sessions; // /v1/sessions
};

std::string make_id(server_state & s, const char * prefix) {
    return std::string(prefix) + std::to_string(s.next_id++);
}

int64_t unix_now() {
    return (int64_t) std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void send_json(httplib::Response & res, int status, const json & j) {
    res.status = status;
    res.set_content(j.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void send_error(httplib::Response & res, const api_error & err) {
    send_json(res, err.status, api_error_json(err));
}

// ----------------------------------------------------------------------------
// one generation

struct generation {
    api_request rq;
    request req;
    const method_spec * ms = nullptr;
    generate_result r;
    int64_t n_prediction = 0; // tokens of the prediction
};

// parses, tokenizes and checks a request; false with err
bool prepare(server_state & s, api_endpoint ep, const std::string & body, generation & g, api_error & err) {
    if (!api_parse(ep, body, g.rq, err)) return false;
    const model & m = *s.rn.target.model;
    if (!api_prompt_tokens(m, g.rq, g.req.prompt, err)) return false;
    const int32_t n_ctx = s.params.runner.n_ctx;
    if (const std::string over = request_over_context(g.req, n_ctx); !over.empty()) {
        err.param = "messages";
        err.code = "context_length_exceeded";
        err.message = over + " (the server's --ctx-size)";
        return false;
    }
    const int32_t room = n_ctx - 1 - (int32_t) g.req.prompt.size();
    const int32_t want = g.rq.n_predict < 0 ? s.params.max_tokens : g.rq.n_predict;
    g.req.gen.n_predict = std::min({want, room, s.params.max_tokens});
    g.req.gen.sampling = g.rq.sampling;
    g.req.gen.stop = g.rq.stop;
    g.ms = &s.method;
    if (g.rq.constrain) {
        if (g.rq.sampling.temp > 0.0f) {
            return api_fail(err, "constrain", "a constrained apply decodes greedily: send temperature 0 or leave it out");
        }
        g.req.constraint = std::make_shared<apply_constraint>(m, g.rq.apply);
    }
    if (g.rq.has_prediction) {
        g.req.original = m.tokenize(g.rq.prediction, false, false);
        g.n_prediction = (int64_t) g.req.original.size();
        if (!g.req.original.empty()) g.ms = &s.with_reuse;
    }
    return true;
}

// runs it in a free slot; on_text (may be null) streams text and returns false to stop
bool run(server_state & s, generation & g, std::function<bool(std::string_view)> on_text, api_error & err) {
    const auto t0 = clock_type::now();
    const double limit_ms = g.rq.t_max_predict_ms;
    g.req.gen.on_text = [&, on_text](std::string_view text) {
        if (on_text && !on_text(text)) return false;
        return limit_ms <= 0 || std::chrono::duration<double, std::milli>(clock_type::now() - t0).count() < limit_ms;
    };
    std::string error;
    bool ok = false;
    s.sl.run(g.req.prompt, [&](context & ctx) { ok = runner_generate_in(s.rn, ctx, *g.ms, g.req, g.r, &error); });
    if (!ok || g.r.stop == STOP_REASON_ERROR) {
        err.status = 500;
        err.type = "server_error";
        err.message = ok ? g.r.error : error;
        return false;
    }
    s.mx.generation(g.r);
    return true;
}

json usage_json(const generation & g) {
    const source_stats & reuse = g.r.by_source[DRAFT_SOURCE_REUSE];
    json u = {{"prompt_tokens", g.r.prompt_tokens},
              {"prompt_tokens_details", {{"cached_tokens", g.r.prompt_cached}}},
              {"completion_tokens", (int64_t) g.r.tokens.size()},
              {"total_tokens", g.r.prompt_tokens + (int64_t) g.r.tokens.size()}};
    if (g.rq.has_prediction) {
        // accepted: prediction tokens the target kept; rejected: prediction tokens it verified and
        // turned down (they cost a pass's work, as OpenAI bills them)
        u["completion_tokens_details"] = {{"accepted_prediction_tokens", reuse.n_accepted},
                                          {"rejected_prediction_tokens", reuse.n_drafted - reuse.n_accepted}};
    }
    return u;
}

json timings_json(const generate_result & r) {
    return {{"prompt_n", r.prompt_tokens},
            {"prompt_ms", r.prompt_ms},
            {"prompt_per_token_ms", r.prompt_tokens > 0 ? r.prompt_ms / r.prompt_tokens : 0.0},
            {"prompt_per_second", r.prompt_ms > 0 ? 1000.0 * r.prompt_tokens / r.prompt_ms : 0.0},
            {"predicted_n", (int64_t) r.tokens.size()},
            {"predicted_ms", r.gen_ms},
            {"predicted_per_token_ms", r.tokens.empty() ? 0.0 : r.gen_ms / r.tokens.size()},
            {"predicted_per_second", r.tokens_per_s()},
            {"draft_n", r.draft_tokens},
            {"draft_n_accepted", r.accepted}};
}

// the response of each endpoint, whole (not streamed)
json response_json(server_state & s, const generation & g, const std::string & id) {
    const generate_result & r = g.r;
    const std::string model = g.rq.model.empty() ? s.model_id : g.rq.model;
    switch (g.rq.endpoint) {
        case API_CHAT:
            return {{"id", id}, {"object", "chat.completion"}, {"created", unix_now()}, {"model", model},
                    {"choices", json::array({{{"index", 0},
                                              {"message", {{"role", "assistant"}, {"content", r.text}}},
                                              {"logprobs", nullptr},
                                              {"finish_reason", api_finish_reason(r.stop)}}})},
                    {"usage", usage_json(g)},
                    {"timings", timings_json(r)}}; // llama-server's extension, same fields
        case API_COMPLETIONS:
            return {{"id", id}, {"object", "text_completion"}, {"created", unix_now()}, {"model", model},
                    {"choices", json::array({{{"index", 0}, {"text", r.text}, {"logprobs", nullptr},
                                              {"finish_reason", api_finish_reason(r.stop)}}})},
                    {"usage", usage_json(g)},
                    {"timings", timings_json(r)}};
        case API_APPLY:
            return {{"id", id}, {"object", "editspec.apply"}, {"created", unix_now()}, {"model", model},
                    {"merged_code", apply_merged_code(g.rq.apply, r.text)},
                    {"finish_reason", api_finish_reason(r.stop)},
                    {"usage", usage_json(g)},
                    {"timings", timings_json(r)}};
        default: break;
    }
    json j = {{"content", r.text},
              {"id_slot", 0},
              {"stop", true},
              {"model", model},
              {"tokens_predicted", (int64_t) r.tokens.size()},
              {"tokens_evaluated", r.prompt_tokens},
              {"stop_type", r.stop == STOP_REASON_EOG ? "eos" : r.stop == STOP_REASON_STRING ? "word" : "limit"},
              {"timings", timings_json(r)},
              {"tokens_cached", r.prompt_cached},
              {"truncated", false}};
    if (g.rq.response_fields.empty()) return j;
    // llama.cpp: only the named fields, flat, "a/b" read from nested objects
    json out = json::object();
    for (const std::string & f : g.rq.response_fields) {
        const json * v = &j;
        size_t at = 0;
        while (v && at <= f.size()) {
            const size_t slash = f.find('/', at);
            const std::string key = f.substr(at, slash == std::string::npos ? std::string::npos : slash - at);
            v = v->is_object() && v->contains(key) ? &(*v)[key] : nullptr;
            if (slash == std::string::npos) break;
            at = slash + 1;
        }
        if (v) out[f] = *v;
    }
    return out;
}

// one streamed event: a chat chunk, a completions chunk, or llama.cpp's {"content", "stop"}
json stream_chunk(server_state & s, const generation & g, const std::string & id, const std::string & text,
                  const char * finish) {
    const std::string model = g.rq.model.empty() ? s.model_id : g.rq.model;
    const json fin = finish ? json(finish) : json(nullptr);
    switch (g.rq.endpoint) {
        case API_CHAT:
            return {{"id", id}, {"object", "chat.completion.chunk"}, {"created", unix_now()}, {"model", model},
                    {"choices", json::array({{{"index", 0},
                                              {"delta", finish ? json::object() : json{{"role", "assistant"}, {"content", text}}},
                                              {"logprobs", nullptr},
                                              {"finish_reason", fin}}})}};
        case API_COMPLETIONS:
            return {{"id", id}, {"object", "text_completion"}, {"created", unix_now()}, {"model", model},
                    {"choices", json::array({{{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", fin}}})}};
        default:
            return {{"content", text}, {"stop", false}};
    }
}

std::string sse(const json & j) {
    return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

// ----------------------------------------------------------------------------
// handlers

void handle_generate(server_state & s, api_endpoint ep, const httplib::Request & req, httplib::Response & res) {
    auto g = std::make_shared<generation>();
    api_error err;
    if (!prepare(s, ep, req.body, *g, err)) {
        send_error(res, err);
        return;
    }
    const std::string id = make_id(s, ep == API_CHAT ? "chatcmpl-" : ep == API_APPLY ? "apply-" : "cmpl-");
    if (!g->rq.stream) {
        if (!run(s, *g, nullptr, err)) {
            send_error(res, err);
            return;
        }
        send_json(res, 200, response_json(s, *g, id));
        return;
    }
    // streaming: the generation runs inside the content provider, writing each piece as it comes;
    // a client that goes away stops it (the write fails)
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider("text/event-stream", [&s, g, id](size_t, httplib::DataSink & sink) {
        api_error err;
        auto write = [&](const json & j) {
            const std::string ev = sse(j);
            return sink.is_writable() && sink.write(ev.data(), ev.size());
        };
        const bool ok = run(s, *g, [&](std::string_view text) { return write(stream_chunk(s, *g, id, std::string(text), nullptr)); }, err);
        if (!ok) {
            write(api_error_json(err));
        } else if (g->rq.endpoint == API_COMPLETION || g->rq.endpoint == API_INFILL) {
            json last = response_json(s, *g, id);
            if (last.contains("content")) last["content"] = "";
            write(last);
        } else {
            write(stream_chunk(s, *g, id, "", api_finish_reason(g->r.stop)));
            if (g->rq.include_usage) {
                json u = stream_chunk(s, *g, id, "", nullptr);
                u["choices"] = json::array();
                u["usage"] = usage_json(*g);
                write(u);
            }
            const std::string done = "data: [DONE]\n\n";
            if (sink.is_writable()) sink.write(done.data(), done.size());
        }
        sink.done();
        return true;
    });
}

bool authorized(const server_state & s, const httplib::Request & req) {
    if (s.params.api_key.empty()) return true;
    const std::string want = "Bearer " + s.params.api_key;
    return req.get_header_value("Authorization") == want;
}

std::atomic<httplib::Server *> g_server{nullptr};

void on_signal(int) {
    if (httplib::Server * svr = g_server.load()) svr->stop();
}

bool open_state(const server_params & p, server_state & s) {
    std::string error;
    s.params = p;
    runner_params rp = p.runner;
    rp.trees = true;
    if (!method_parse(p.method, s.method, &error) ||
        !method_parse(p.method.find("reuse") != std::string::npos || p.method.find("efficientedit") != std::string::npos
                          ? p.method
                          : (p.method == "ar" ? std::string("reuse") : "reuse+" + p.method),
                      s.with_reuse, &error)) {
        fprintf(stderr, "editspec serve: error: %s\n", error.c_str());
        return false;
    }
    if (s.method.uses_draft_model() && rp.draft_model_path.empty()) {
        fprintf(stderr, "editspec serve: error: method '%s' needs a draft model (--draft-model)\n", p.method.c_str());
        return false;
    }
    if (!runner_open(rp, s.rn, &error)) {
        fprintf(stderr, "editspec serve: error: %s\n", error.c_str());
        return false;
    }
    fprintf(stderr, "editspec serve: fetching the cost model (measured once per model file and thread count)\n");
    if (!runner_cost(s.rn, &error)) {
        fprintf(stderr, "editspec serve: error: %s\n", error.c_str());
        return false;
    }
    s.sl.add(std::move(s.rn.ctx));
    for (int32_t i = 1; i < p.n_parallel; i++) {
        auto ctx = runner_new_context(s.rn, &error);
        if (!ctx) {
            fprintf(stderr, "editspec serve: error: slot %d: %s\n", i, error.c_str());
            return false;
        }
        s.sl.add(std::move(ctx));
    }
    s.sl.start();
    session_store_params ssp;
    ssp.max_sessions = p.max_sessions;
    ssp.idle_s = p.session_idle_s;
    s.sessions = std::make_unique<session_store>(s.rn, ssp);
    s.model_id = std::filesystem::path(p.runner.model_path).filename().string();
    return true;
}

void add_routes(httplib::Server & svr, server_state & s) {
    svr.set_pre_routing_handler([&s](const httplib::Request & req, httplib::Response & res) {
        if (req.path == "/health" || authorized(s, req)) return httplib::Server::HandlerResponse::Unhandled;
        api_error err;
        err.status = 401;
        err.type = "authentication_error";
        err.code = "invalid_api_key";
        err.message = "missing or wrong API key: send 'Authorization: Bearer <key>'";
        send_error(res, err);
        return httplib::Server::HandlerResponse::Handled;
    });
    auto timed = [&s](api_endpoint ep) {
        return [&s, ep](const httplib::Request & req, httplib::Response & res) {
            const auto t0 = clock_type::now();
            handle_generate(s, ep, req, res);
            s.mx.request(req.path, res.status, std::chrono::duration<double>(clock_type::now() - t0).count());
        };
    };
    svr.Post("/v1/chat/completions", timed(API_CHAT));
    svr.Post("/chat/completions", timed(API_CHAT));
    svr.Post("/v1/completions", timed(API_COMPLETIONS));
    svr.Post("/completions", timed(API_COMPLETIONS));
    svr.Post("/completion", timed(API_COMPLETION));
    svr.Post("/infill", timed(API_INFILL));
    svr.Post("/v1/apply", timed(API_APPLY));
    svr.Get("/health", [](const httplib::Request &, httplib::Response & res) { send_json(res, 200, {{"status", "ok"}}); });
    // document sessions (server-sessions.h)
    auto session_route = [&s](std::function<int(const httplib::Request &, json &)> f) {
        return [&s, f](const httplib::Request & req, httplib::Response & res) {
            const auto t0 = clock_type::now();
            json out;
            const int status = f(req, out);
            send_json(res, status, out);
            s.mx.request("/v1/sessions", status, std::chrono::duration<double>(clock_type::now() - t0).count());
        };
    };
    svr.Post("/v1/sessions", session_route([&s](const httplib::Request & req, json & out) { return s.sessions->create(req.body, out); }));
    svr.Post(R"(/v1/sessions/([^/]+)/edits)", session_route([&s](const httplib::Request & req, json & out) {
        return s.sessions->edit(req.matches[1], req.body, out);
    }));
    svr.Post(R"(/v1/sessions/([^/]+)/complete)", session_route([&s](const httplib::Request & req, json & out) {
        return s.sessions->complete(req.matches[1], req.body, out);
    }));
    svr.Delete(R"(/v1/sessions/([^/]+))", session_route([&s](const httplib::Request & req, json & out) {
        return s.sessions->close(req.matches[1], out);
    }));
    auto models = [&s](const httplib::Request &, httplib::Response & res) {
        send_json(res, 200, {{"object", "list"},
                             {"data", json::array({{{"id", s.model_id}, {"object", "model"}, {"created", 0}, {"owned_by", "editspec"}}})}});
    };
    svr.Get("/v1/models", models);
    svr.Get("/models", models);
    svr.Get("/metrics", [&s](const httplib::Request &, httplib::Response & res) {
        res.set_content(s.mx.render(), "text/plain; version=0.0.4");
    });
    // every error status gets a JSON body (httplib's own 404 / 413 / 400 have none)
    svr.set_error_handler([](const httplib::Request & req, httplib::Response & res) {
        if (!res.body.empty()) return;
        api_error err;
        err.status = res.status;
        err.message = res.status == 404 ? "no route " + req.method + " " + req.path
                    : res.status == 413 ? "the request body is over the server's limit"
                                        : "bad request (HTTP " + std::to_string(res.status) + ")";
        send_error(res, err);
    });
    svr.set_exception_handler([](const httplib::Request &, httplib::Response & res, std::exception_ptr) {
        api_error err;
        err.status = 500;
        err.type = "server_error";
        err.message = "internal error while handling the request";
        send_error(res, err);
    });
}

} // namespace

int server_run(const server_params & p) {
    server_state s;
    if (!open_state(p, s)) {
        s.sl.stop();
        return 2;
    }
    httplib::Server svr;
    svr.set_payload_max_length(p.max_body);
    // a restarted server binds at once although the last one's connections are in TIME_WAIT
    svr.set_socket_options([](socket_t sock) {
        int yes = 1;
        setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    });
    const size_t n_threads = std::max<size_t>(8, 4 * (size_t) p.n_parallel);
    svr.new_task_queue = [n_threads] { return new httplib::ThreadPool(n_threads); };
    add_routes(svr, s);
    if (!svr.bind_to_port(p.host.c_str(), p.port)) {
        fprintf(stderr, "editspec serve: error: cannot listen on %s:%d (in use, or not an address of this machine)\n",
                p.host.c_str(), p.port);
        return 1;
    }
    g_server = &svr;
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    fprintf(stderr, "editspec serve: listening on http://%s:%d (%d slot%s, method %s; with a prediction %s)\n", p.host.c_str(),
            p.port, p.n_parallel, p.n_parallel == 1 ? "" : "s", s.method.name.c_str(), s.with_reuse.name.c_str());
    const bool ok = svr.listen_after_bind();
    g_server = nullptr;
    s.sessions.reset();
    s.sl.stop();
    return ok ? 0 : 1;
}

} // namespace editspec
