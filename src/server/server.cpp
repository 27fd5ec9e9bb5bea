// The HTTP side of `editspec serve`: routes, streaming, refusals on headers, signals. Slots and their
// queue are server-slots.h, connections server-connections.h, metrics server-metrics.h, sessions
// server-sessions.h.
#include "server-connections.h"
#include "server-metrics.h"
#include "server-sessions.h"
#include "server-slots.h"
#include "editspec/clock.h"
#include "editspec/server.h"
#include "editspec/edit.h"
#include "editspec/log.h"
#include "editspec/step.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <mutex>
#include <pthread.h>
#include <thread>
#include <unistd.h>

namespace editspec {

namespace {

using json = nlohmann::json;

// ----------------------------------------------------------------------------
// state

struct server_state {
    server_params params;
    runner rn;
    method_spec method;      // for requests without a prediction
    method_spec with_reuse;  // with one: Reuse first, then the method's drafters
    std::unique_ptr<step_engine> engine;     // every slot's decodes, batched into one pass a step
    std::unique_ptr<slot_pool> slots;
    server_metrics mx;
    std::string model_id;    // the model file's name
    std::atomic<int64_t> next_id{1};
    std::unique_ptr<session_store> sessions; // /v1/sessions
    std::atomic<bool> stopping{false};       // SIGTERM: running generations end at their next token
    const guarded_server * http = nullptr;   // its connections, for /metrics
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
    if (err.status == 503) res.set_header("Retry-After", "1");
    send_json(res, err.status, api_error_json(err));
}

api_error make_error(int status, const std::string & message, const char * type = nullptr) {
    api_error err;
    err.status = status;
    err.message = message;
    err.type = type ? type : status >= 500 ? "server_error" : "invalid_request_error";
    return err;
}

// ----------------------------------------------------------------------------
// one generation

// text from the slot's thread to the HTTP thread that streams it: the slot never waits for a client
struct text_channel {
    std::mutex mu;
    std::condition_variable cv;
    std::string pending;      // written, not yet sent
    bool finished = false;    // the job returned
    bool reader_gone = false; // the client went away: the job stops at its next token
};

struct generation {
    api_request rq;
    request req;
    const method_spec * ms = nullptr;
    generate_result r;
    bool ok = false;
    std::string error;
    std::future<void> done;
    // the client left (or the server stops): the job's decodes fail at once, a step of only
    // cancelled requests is cut short (context::set_cancel)
    std::atomic<bool> cancel{false};
    std::function<bool()> gone; // true once the client's connection is closed; null = not watched
};

// the client's connection, watched for a client that leaves while its request waits or decodes
std::function<bool()> watch_client(const httplib::Request & req) {
    (void) req;
    const int fd = connection_socket();
    if (fd < 0) return nullptr;
    return [fd] { return connection_closed(fd); };
}

// parses, tokenizes and checks a request; false with err
bool prepare(server_state & s, api_endpoint ep, const std::string & body, generation & g, api_error & err) {
    if (!api_parse(ep, body, g.rq, err)) return false;
    const model & m = *s.rn.target.model;
    const int32_t n_ctx = s.params.runner.n_ctx;
    if (!api_prompt_tokens(m, g.rq, g.req.prompt, err, (size_t) n_ctx, s.params.layout)) return false;
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
    g.req.gen.n_indent = g.rq.n_indent;
    g.req.gen.t_max_ms = g.rq.t_max_predict_ms;
    g.req.gen.prompt_cache = s.params.prompt_cache;
    g.ms = &s.method;
    g.rq.constrain = api_apply_constrained(g.rq, m);
    if (g.rq.constrain) {
        if (g.rq.sampling.temp > 0.0f) {
            return api_fail(err, "constrain", "a constrained apply decodes greedily: send temperature 0 or leave it out");
        }
        g.req.constraint = std::make_shared<apply_constraint>(m, g.rq.apply);
    }
    if (g.rq.has_prediction) {
        g.req.original = m.tokenize(g.rq.prediction, false, false);
        if (!g.req.original.empty()) g.ms = &s.with_reuse;
    }
    return true;
}

// starts g on a slot (waiting its turn in the queue); the generation's text goes to ch when given.
// False with err: 503 when the queue is full or the server stops.
bool start(server_state & s, const std::shared_ptr<generation> & g, const std::shared_ptr<text_channel> & ch, api_error & err) {
    server_state * sp = &s;
    g->req.gen.on_text = [sp, ch](std::string_view text) {
        if (sp->stopping.load()) return false;
        if (ch) {
            {
                std::lock_guard<std::mutex> lock(ch->mu);
                if (ch->reader_gone) return false;
                ch->pending.append(text);
            }
            ch->cv.notify_all();
        }
        return true;
    };
    struct finish_on_exit { // the channel hears the end when the job is done with, run or not
        std::shared_ptr<text_channel> ch;
        ~finish_on_exit() {
            if (!ch) return;
            {
                std::lock_guard<std::mutex> lock(ch->mu);
                ch->finished = true;
            }
            ch->cv.notify_all();
        }
    };
    auto fin = std::make_shared<finish_on_exit>(); // (a temporary's destructor would finish the channel now)
    fin->ch = ch;
    if (!g->rq.session.empty()) {
        // on the session's context, from the document's KV (server-sessions.h)
        json out;
        const int status = s.sessions->submit(g->rq.session, [sp, g, fin](context & ctx, slot_memory & mem,
                                                                          const prompt_cache_params & reuse) {
            g->req.stats = &mem.stats;
            g->req.cache = &mem.cache;
            g->req.gen.prompt_cache = reuse;
            ctx.set_cancel(&g->cancel);
            g->ok = runner_generate_in(sp->rn, ctx, *g->ms, g->req, g->r, &g->error);
            ctx.set_cancel(nullptr);
        }, g->done, out);
        if (status != 200) {
            err = make_error(status, out["error"]["message"].get<std::string>());
            return false;
        }
        return true;
    }
    const auto t_queue = clock_type::now();
    const slot_status st = s.slots->submit(g->req.prompt, [sp, g, fin](context & ctx, slot_memory & mem) {
        g->req.stats = &mem.stats;
        g->req.cache = &mem.cache;
        ctx.set_cancel(&g->cancel);
        g->ok = runner_generate_in(sp->rn, ctx, *g->ms, g->req, g->r, &g->error);
        ctx.set_cancel(nullptr);
    }, g->done, [sp, g] { return sp->stopping.load() || (g->gone && g->gone()); });
    s.mx.queue_wait(ms_since(t_queue) / 1000.0);
    if (st == SLOT_CANCELLED) {
        err = make_error(499, "the client closed the connection while the request waited", "invalid_request_error");
        return false;
    }
    if (st == SLOT_QUEUE_FULL) {
        err = make_error(503, "every slot is busy and " + std::to_string(s.params.max_queue) +
                                  " requests wait already (--queue); retry shortly", "server_error");
        return false;
    }
    if (st == SLOT_STOPPING) {
        err = make_error(503, "the server is stopping", "server_error");
        return false;
    }
    return true;
}

// waits for a started generation; false with a 500 err when it failed or threw
bool finish(server_state & s, generation & g, api_error & err) {
    try {
        // a client that leaves (or a stopping server) cancels the job: it stops within one step
        while (g.done.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready) {
            if (s.stopping.load() || (g.gone && g.gone())) g.cancel = true;
        }
        g.done.get();
    } catch (const session_gone & e) {
        err = make_error(404, e.what());
        err.param = "session";
        err.code = "session_not_found";
        return false;
    } catch (const std::exception & e) {
        err = make_error(500, std::string("internal error while generating: ") + e.what());
        return false;
    } catch (...) {
        err = make_error(500, "internal error while generating");
        return false;
    }
    if (!g.ok || g.r.stop == STOP_REASON_ERROR) {
        err = make_error(500, g.ok ? g.r.error : g.error);
        return false;
    }
    s.mx.generation(g.r);
    return true;
}

json usage_json(const generation & g) {
    const source_stats & reuse = g.r.by_source[DRAFT_SOURCE_REUSE];
    json u = {{"prompt_tokens", g.r.prompt_tokens},
              // cached: kept in place (exact); shifted: kept from an earlier request at another
              // position (--kv-reuse pie); encoded: decoded for this request
              {"prompt_tokens_details", {{"cached_tokens", g.r.prompt_cached - g.r.prompt_shifted},
                                         {"shifted_tokens", g.r.prompt_shifted},
                                         {"encoded_tokens", g.r.prompt_tokens - g.r.prompt_cached},
                                         {"stale_tokens", g.r.prompt_stale}}},
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
            {"draft_n_accepted", r.accepted},
            {"drafters", r.drafters},  // editspec's: which drafters ran (`auto` resolved)
            {"policy", r.policy}};     // and the acceptance policy that verified them
}

// the response of each endpoint, whole (not streamed)
json response_json(server_state & s, const generation & g, const std::string & id) {
    const generate_result & r = g.r;
    const std::string model = g.rq.model.empty() ? s.model_id : g.rq.model;
    switch (g.rq.endpoint) {
        case API_CHAT:
            // a constrained apply message is answered with the merged file, as fast-apply APIs answer
            return {{"id", id}, {"object", "chat.completion"}, {"created", unix_now()}, {"model", model},
                    {"choices", json::array({{{"index", 0},
                                              {"message", {{"role", "assistant"},
                                                           {"content", g.rq.is_apply && g.rq.constrain
                                                                           ? apply_merged_code(g.rq.apply, r.text)
                                                                           : r.text}}},
                                              {"logprobs", nullptr},
                                              {"finish_reason", api_finish_reason(r.stop)}}})},
                    {"usage", usage_json(g)},
                    {"timings", timings_json(r)}}; // llama-server's extension, same fields
        case API_FIM: // Mistral's: the completion as a chat message
            return {{"id", id}, {"object", "chat.completion"}, {"created", unix_now()}, {"model", model},
                    {"choices", json::array({{{"index", 0},
                                              {"message", {{"role", "assistant"}, {"content", r.text}}},
                                              {"finish_reason", api_finish_reason(r.stop)}}})},
                    {"usage", usage_json(g)}};
        case API_COMPLETIONS:
            return {{"id", id}, {"object", "text_completion"}, {"created", unix_now()}, {"model", model},
                    {"choices", json::array({{{"index", 0}, {"text", r.text}, {"logprobs", nullptr},
                                              {"finish_reason", api_finish_reason(r.stop)}}})},
                    {"usage", usage_json(g)},
                    {"timings", timings_json(r)}};
        case API_CODE_APPLY: // Relace's fields; "constrained" is ours
            return {{"mergedCode", apply_merged_code(g.rq.apply, r.text)},
                    {"constrained", g.rq.constrain},
                    {"usage", usage_json(g)},
                    {"timings", timings_json(r)}};
        case API_APPLY:
            return {{"id", id}, {"object", "editspec.apply"}, {"created", unix_now()}, {"model", model},
                    {"merged_code", apply_merged_code(g.rq.apply, r.text)},
                    // labelled: constrained output may differ from the model's free greedy output
                    {"constrained", g.rq.constrain},
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
        case API_FIM:
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

// llama.cpp's n_cmpl: the completions of one prompt, one after another on the slots (completion i
// samples with seed + i; greedy ones are equal), answered as an array with each one's index
void send_completions(server_state & s, api_endpoint ep, const std::string & body, const std::shared_ptr<generation> & first,
                      const std::string & id, httplib::Response & res) {
    json out = json::array();
    api_error err;
    for (int32_t i = 0; i < first->rq.n_cmpl; i++) {
        auto g = first;
        if (i > 0) {
            g = std::make_shared<generation>();
            if (!prepare(s, ep, body, *g, err)) break; // parsed once already: only a changed server could refuse
            g->gone = first->gone;
            g->req.gen.sampling.seed += (uint32_t) i;
        }
        if (!start(s, g, nullptr, err) || !finish(s, *g, err)) break;
        json one = response_json(s, *g, id);
        one["index"] = i;
        out.push_back(std::move(one));
    }
    if ((int32_t) out.size() < first->rq.n_cmpl) {
        send_error(res, err);
        return;
    }
    send_json(res, 200, out);
}

void handle_generate(server_state & s, api_endpoint ep, const httplib::Request & req, httplib::Response & res) {
    auto g = std::make_shared<generation>();
    api_error err;
    if (!prepare(s, ep, req.body, *g, err)) {
        send_error(res, err);
        return;
    }
    g->gone = watch_client(req);
    const std::string id = make_id(s, ep == API_CHAT ? "chatcmpl-" : ep == API_APPLY || ep == API_CODE_APPLY ? "apply-" : "cmpl-");
    if (g->rq.cache_key.empty()) {
        g->rq.cache_key = req.get_header_value("X-Session-Id");
        if (!api_cache_key_ok(g->rq.cache_key)) {
            send_error(res, make_error(400, "the X-Session-Id header takes at most " + std::to_string(API_CACHE_KEY_BYTES_MAX) +
                                                " printable bytes"));
            return;
        }
    }
    if (!g->rq.cache_key.empty()) res.set_header("X-Editspec-Cache-Key", g->rq.cache_key);
    if (!g->rq.stream && g->rq.n_cmpl > 1) {
        send_completions(s, ep, req.body, g, id, res);
        return;
    }
    if (!g->rq.stream) {
        if (!start(s, g, nullptr, err) || !finish(s, *g, err)) {
            send_error(res, err);
            return;
        }
        send_json(res, 200, response_json(s, *g, id));
        return;
    }
    // streaming: the slot writes text into a channel and this thread sends it, so a slow reader never
    // holds a slot; a client that goes away stops the generation at its next token. Started before
    // the status line is sent, so a full queue is still a 503.
    auto ch = std::make_shared<text_channel>();
    if (!start(s, g, ch, err)) {
        send_error(res, err);
        return;
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider("text/event-stream", [&s, g, ch, id](size_t, httplib::DataSink & sink) {
        auto write = [&](const json & j) {
            const std::string ev = sse(j);
            return sink.is_writable() && sink.write(ev.data(), ev.size());
        };
        auto leave = [&] {
            std::lock_guard<std::mutex> lock(ch->mu);
            ch->reader_gone = true;
            return false;
        };
        try {
            while (true) {
                std::string text;
                bool finished = false;
                {
                    std::unique_lock<std::mutex> lock(ch->mu);
                    // a reader that leaves during a long prefill stops it too (not only at the next token)
                    while (!ch->cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return ch->finished || !ch->pending.empty(); })) {
                        if (s.stopping.load() || (g->gone && g->gone())) {
                            g->cancel = true;
                            ch->reader_gone = true;
                        }
                    }
                    text.swap(ch->pending);
                    finished = ch->finished;
                }
                if (!text.empty() && !write(stream_chunk(s, *g, id, text, nullptr))) return leave();
                if (finished) break;
            }
            api_error err;
            if (!finish(s, *g, err)) {
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
        } catch (...) {
            // the content provider runs outside httplib's exception handler: end this response only
            return leave();
        }
    });
}

bool authorized(const server_state & s, const httplib::Request & req) {
    if (s.params.api_key.empty()) return true;
    const std::string want = "Bearer " + s.params.api_key;
    return req.get_header_value("Authorization") == want;
}

// a request refused on its headers, before its body is read: chunked, compressed or unmeasured
// bodies (httplib would read them past --max-body-mb), bodies over the limit, bodies that are not
// JSON (a web page in the user's browser cannot post JSON to a loopback server without asking it
// first), too many or too large headers. 0 = accepted.
int refuse_on_headers(const server_state & s, const httplib::Request & req, std::string & why) {
    size_t header_bytes = 0;
    for (const auto & [k, v] : req.headers) header_bytes += k.size() + v.size();
    if (req.headers.size() > SERVER_HEADERS_MAX || header_bytes > SERVER_HEADER_BYTES_MAX) {
        why = "the request has " + std::to_string(req.headers.size()) + " headers of " + std::to_string(header_bytes) +
              " bytes; at most " + std::to_string(SERVER_HEADERS_MAX) + " headers of " +
              std::to_string(SERVER_HEADER_BYTES_MAX) + " bytes are accepted";
        return 431;
    }
    if (req.has_header("Transfer-Encoding")) {
        why = "a body sent with Transfer-Encoding is refused: send it whole, with Content-Length";
        return 411;
    }
    const std::string encoding = req.get_header_value("Content-Encoding");
    if (!encoding.empty() && encoding != "identity") {
        why = "a body with Content-Encoding '" + encoding + "' is refused: send it uncompressed";
        return 415;
    }
    if (req.method != "POST" && req.method != "PUT" && req.method != "PATCH" && req.method != "DELETE") return 0;
    if (!req.has_header("Content-Length")) {
        if (req.method == "DELETE") return 0; // no body: nothing is read
        why = "a POST needs a Content-Length header";
        return 411;
    }
    const std::string len = req.get_header_value("Content-Length");
    char * end = nullptr;
    errno = 0;
    const unsigned long long n = strtoull(len.c_str(), &end, 10);
    if (len.empty() || *end != '\0' || errno == ERANGE || len[0] == '-') {
        why = "Content-Length '" + len + "' is not a byte count";
        return 400;
    }
    // a body over the limit by a believable amount is read and dropped by httplib (413 after it, so a
    // client still writing it sees the answer); one claiming far more is refused before any of it
    if (n / 64 > s.params.max_body) {
        why = "the body is " + std::to_string(n) + " bytes, over the server's limit of " + std::to_string(s.params.max_body) +
              " (--max-body-mb)";
        return 413;
    }
    if (n > 0) {
        std::string type = req.get_header_value("Content-Type");
        type = type.substr(0, type.find(';'));
        while (!type.empty() && type.back() == ' ') type.pop_back();
        std::transform(type.begin(), type.end(), type.begin(), [](unsigned char c) { return (char) tolower(c); });
        if (type != "application/json") {
            why = "a body must be JSON: send 'Content-Type: application/json' (got '" + req.get_header_value("Content-Type") + "')";
            return 415;
        }
    }
    return 0;
}

// the request's start, for the latency metric: set when its headers are in (pre-routing), read when
// its response is written (the logger), both on the connection's thread
thread_local clock_type::time_point t_request_start{};

// the slots: views of one step engine (a KV stream of --ctx-size tokens each, every active request's
// tokens in one llama_decode a step), or with --kv-reuse pie contexts of their own: PIE decodes an
// edit's gaps under a spare sequence beside the slot's, which a view's one stream does not have
bool add_slots(server_state & s, const server_params & p, const runner_params & rp, std::string * error) {
    if (p.prompt_cache.mode == KV_REUSE_PIE) {
        fprintf(stderr, "editspec serve: --kv-reuse pie: each slot has a context of its own and requests decode a "
                        "pass each, not batched (the default, --kv-reuse prefix, batches them)\n");
        s.slots->add(std::move(s.rn.ctx));
        for (int32_t i = 1; i < p.n_parallel; i++) {
            auto ctx = runner_new_context(s.rn, error);
            if (!ctx) return false;
            s.slots->add(std::move(ctx));
        }
        return true;
    }
    s.rn.ctx.reset(); // it measured the cost model; the engine holds the slots' KV
    step_params stp;
    stp.n_seq = p.n_parallel;
    stp.per_seq.n_ctx = rp.n_ctx;
    stp.per_seq.n_threads = rp.n_threads;
    stp.per_seq.flash_attn = rp.flash_attn;
    stp.n_step_tokens = p.step_tokens > 0 ? p.step_tokens : 2 * stp.per_seq.n_batch;
    s.engine = step_engine::create(*s.rn.target.model, stp, error);
    if (!s.engine) {
        *error += "; lower --parallel or --ctx-size";
        return false;
    }
    for (int32_t i = 0; i < p.n_parallel; i++) s.slots->add(s.engine->view(i), s.engine.get(), i);
    return true;
}

bool open_state(const server_params & p, server_state & s) {
    std::string error;
    s.params = p;
    runner_params rp = p.runner;
    rp.trees = true;
    if (!method_parse(p.method, s.method, &error)) {
        fprintf(stderr, "editspec serve: error: %s\n", error.c_str());
        return false;
    }
    s.with_reuse = method_with_original(s.method);
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
    s.slots = std::make_unique<slot_pool>((size_t) p.max_queue, p.prompt_cache, p.cache_ram_mib << 20);
    if (!add_slots(s, p, rp, &error)) {
        fprintf(stderr, "editspec serve: error: %s\n", error.c_str());
        return false;
    }
    s.slots->start();
    session_store_params ssp;
    ssp.max_sessions = p.max_sessions;
    ssp.idle_s = p.session_idle_s;
    s.sessions = std::make_unique<session_store>(s.rn, ssp);
    s.model_id = std::filesystem::path(p.runner.model_path).filename().string();
    return true;
}

// what runs around every route: the header checks and the API key before it, the metrics after it,
// a JSON body on every error status
void add_hooks(httplib::Server & svr, server_state & s) {
    svr.set_pre_routing_handler([&s](const httplib::Request & req, httplib::Response & res) {
        t_request_start = clock_type::now();
        connection_mark_busy(); // its head is in: not closed for a newcomer (server-connections.h)
        std::string why;
        if (const int status = refuse_on_headers(s, req, why); status != 0) {
            send_error(res, make_error(status, why));
            res.set_header("Connection", "close"); // its body, if any, is never read
            return httplib::Server::HandlerResponse::Handled;
        }
        if (req.path == "/health" || authorized(s, req)) return httplib::Server::HandlerResponse::Unhandled;
        api_error err = make_error(401, "missing or wrong API key: send 'Authorization: Bearer <key>'", "authentication_error");
        err.code = "invalid_api_key";
        send_error(res, err);
        return httplib::Server::HandlerResponse::Handled;
    });
    // every response, once written: the metrics (all statuses and routes, streams when they end)
    svr.set_logger([&s](const httplib::Request & req, const httplib::Response & res) {
        const bool timed = t_request_start != clock_type::time_point{};
        const double seconds = timed ? std::chrono::duration<double>(clock_type::now() - t_request_start).count() : 0.0;
        t_request_start = clock_type::time_point{};
        s.mx.request(server_route_label(req.path), res.status, seconds);
    });
    // every error status gets a JSON body (httplib's own 404 / 413 / 400 have none)
    svr.set_error_handler([&s](const httplib::Request & req, httplib::Response & res) {
        if (connection_late()) { // httplib answers a head it could not read with 400
            res.status = 408;
            res.set_header("Connection", "close");
            send_error(res, make_error(408, "the request's head and body did not arrive within --request-read-timeout " +
                                                std::to_string(s.params.connections.read_deadline_s) + " s"));
            return;
        }
        if (!res.body.empty()) return;
        send_error(res, make_error(res.status, res.status == 404   ? "no route " + req.method + " " + req.path
                                               : res.status == 413 ? "the request body is over the server's limit"
                                                                   : "bad request (HTTP " + std::to_string(res.status) + ")"));
    });
    svr.set_exception_handler([](const httplib::Request &, httplib::Response & res, std::exception_ptr ep) {
        std::string what = "internal error while handling the request";
        try {
            if (ep) std::rethrow_exception(ep);
        } catch (const std::exception & e) {
            what += std::string(": ") + e.what();
        } catch (...) {
        }
        send_error(res, make_error(500, what));
    });
}

void add_routes(httplib::Server & svr, server_state & s) {
    auto generate = [&s](api_endpoint ep) {
        return [&s, ep](const httplib::Request & req, httplib::Response & res) { handle_generate(s, ep, req, res); };
    };
    svr.Post("/v1/chat/completions", generate(API_CHAT));
    svr.Post("/chat/completions", generate(API_CHAT));
    svr.Post("/v1/completions", generate(API_COMPLETIONS));
    svr.Post("/completions", generate(API_COMPLETIONS));
    svr.Post("/completion", generate(API_COMPLETION));
    svr.Post("/infill", generate(API_INFILL));
    svr.Post("/v1/fim/completions", generate(API_FIM));
    svr.Post("/fim/completions", generate(API_FIM));
    svr.Post("/v1/apply", generate(API_APPLY));
    svr.Post("/v1/code/apply", generate(API_CODE_APPLY));
    svr.Get("/health", [&s](const httplib::Request &, httplib::Response & res) {
        if (s.stopping.load()) send_json(res, 503, {{"status", "stopping"}});
        else send_json(res, 200, {{"status", "ok"}});
    });
    // document sessions (server-sessions.h)
    auto session_route = [](std::function<int(const httplib::Request &, json &)> f) {
        return [f](const httplib::Request & req, httplib::Response & res) {
            json out;
            const int status = f(req, out);
            if (status == 503) res.set_header("Retry-After", "1");
            send_json(res, status, out);
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
        json data = json::array({{{"id", s.model_id}, {"object", "model"}, {"created", 0}, {"owned_by", "editspec"}}});
        for (const std::string & a : s.params.aliases) {
            data.push_back({{"id", a}, {"object", "model"}, {"created", 0}, {"owned_by", "editspec"}});
        }
        send_json(res, 200, {{"object", "list"}, {"data", data}});
    };
    svr.Get("/v1/models", models);
    svr.Get("/models", models);
    svr.Get("/metrics", [&s](const httplib::Request &, httplib::Response & res) {
        const prompt_store_stats ps = s.slots->store_stats();
        res.set_content(s.mx.render() + server_metrics::render_store(ps) + (s.engine ? server_metrics::render_step(s.engine->stats()) : "") +
                            (s.http ? server_metrics::render_connections(s.http->counts()) : ""),
                        "text/plain; version=0.0.4");
    });
}

// ----------------------------------------------------------------------------
// signals, on a thread of their own (sigwait), watched from the start: a signal while the model
// loads exits at once; once serving, the first SIGINT / SIGTERM stops accepting, refuses the queue,
// ends running generations at their next token and leaves the process SHUTDOWN_GRACE_S to exit on
// its own; a second signal exits at once.

constexpr int SHUTDOWN_GRACE_S = 10;

// what the signal thread stops; set while serving (the thread outlives server_run's locals)
std::atomic<server_state *> g_state{nullptr};
std::atomic<httplib::Server *> g_server{nullptr};

void signals_watch() {
    static sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr); // every thread started after this inherits the mask
    std::thread([] {
        int sig = 0;
        if (sigwait(&set, &sig) != 0) return;
        server_state * s = g_state.load();
        httplib::Server * svr = g_server.load();
        if (!s || !svr) {
            fprintf(stderr, "editspec serve: %s before serving: exiting\n", strsignal(sig));
            _exit(0);
        }
        fprintf(stderr, "editspec serve: %s: stopping (a second signal exits at once)\n", strsignal(sig));
        s->stopping = true;
        s->slots->close();
        svr->stop();
        std::thread([] {
            std::this_thread::sleep_for(std::chrono::seconds(SHUTDOWN_GRACE_S));
            fprintf(stderr, "editspec serve: still busy %d s after the signal: exiting\n", SHUTDOWN_GRACE_S);
            _exit(0);
        }).detach();
        if (sigwait(&set, &sig) != 0) return;
        fprintf(stderr, "editspec serve: %s again: exiting now\n", strsignal(sig));
        _exit(128 + sig);
    }).detach();
}

} // namespace

int server_run(const server_params & p) {
    signals_watch();
    server_state s;
    if (!open_state(p, s)) return 2;
    // connections counted and bounded, a deadline for each request's head and body (server-connections.h)
    guarded_server svr(p.connections);
    s.http = &svr;
    svr.set_payload_max_length(p.max_body);
    // a restarted server binds at once although the last one's connections are in TIME_WAIT
    socket_t listen_sock = INVALID_SOCKET;
    svr.set_socket_options([&listen_sock](socket_t sock) {
        int yes = 1;
        setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
        listen_sock = sock;
    });
    add_hooks(svr, s);
    add_routes(svr, s);
    if (!svr.bind_to_port(p.host.c_str(), p.port)) {
        fprintf(stderr, "editspec serve: error: cannot listen on %s:%d (in use, or not an address of this machine)\n",
                p.host.c_str(), p.port);
        return 1;
    }
    // httplib listens with a backlog of 5: a burst of clients on a busy machine found it full and were
    // dropped unanswered; a listening socket takes a new backlog from a second listen()
    if (listen_sock != INVALID_SOCKET) listen(listen_sock, SOMAXCONN);
    const bool loopback = p.host == "127.0.0.1" || p.host == "localhost" || p.host == "::1";
    if (!loopback && p.api_key.empty()) {
        fprintf(stderr, "editspec serve: warning: listening on %s without --api-key: anyone who can reach this address can "
                        "use the model\n", p.host.c_str());
    }
    g_state = &s;
    g_server = &svr;
    fprintf(stderr, "editspec serve: listening on http://%s:%d (%d slot%s, queue %d, method %s; with a prediction %s)\n",
            p.host.c_str(), p.port, p.n_parallel, p.n_parallel == 1 ? "" : "s", p.max_queue, s.method.name.c_str(),
            s.with_reuse.name.c_str());
    const bool ok = svr.listen_after_bind();
    s.stopping = true;
    s.slots->stop();
    s.sessions.reset();
    // a signal from here on finds nothing to stop: the process is leaving
    g_server = nullptr;
    g_state = nullptr;
    return ok ? 0 : 1;
}

} // namespace editspec
