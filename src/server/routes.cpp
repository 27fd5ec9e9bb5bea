// The routes of `editspec serve` (server-state.h) and what runs around them: refusals on headers,
// the API key, the metrics of every response, a JSON body on every error.
#include "server-state.h"
#include "editspec/clock.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>

namespace editspec {

using json = nlohmann::json;

namespace {

// llama.cpp's n_cmpl: the completions of one prompt, one after another on the slots (completion i
// samples with seed + i; greedy ones are equal), answered as an array with each one's index
void send_completions(server_state & s, api_endpoint ep, const std::string & body, const std::shared_ptr<served_request> & first,
                      const std::string & id, httplib::Response & res) {
    json out = json::array();
    api_error err;
    for (int32_t i = 0; i < first->rq.n_cmpl; i++) {
        auto g = first;
        if (i > 0) {
            g = std::make_shared<served_request>();
            if (!generation_prepare(s, ep, body, *g, err)) break; // parsed once already: only a changed server could refuse
            g->req.gen.sampling.seed += (uint32_t) i;
        }
        if (!generation_start(s, g, err) || !generation_finish(s, *g, err)) break;
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
    auto g = std::make_shared<served_request>();
    api_error err;
    if (!generation_prepare(s, ep, req.body, *g, err)) {
        send_error(res, err);
        return;
    }
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
        if (!generation_start(s, g, err) || !generation_finish(s, *g, err)) {
            send_error(res, err);
            return;
        }
        send_json(res, 200, response_json(s, *g, id));
        return;
    }
    // streaming: the slot writes text into the request's channel and this thread sends it, so a slow
    // reader never holds a slot. Started before the status line is sent, so a full queue is still a 503.
    g->streamed = true;
    if (!generation_start(s, g, err)) {
        send_error(res, err);
        return;
    }
    stream_response(s, g, id, res);
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

// what runs around every route: the header checks and the API key before it, the metrics after it,
// a JSON body on every error status
} // namespace

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
    // llama-server's token endpoints (tools count or cut a prompt by tokens): POST /tokenize {"content",
    // "add_special" (false), "parse_special" (true), "with_pieces" (false)} -> {"tokens": [id or {"id",
    // "piece"}]}; POST /detokenize {"tokens": [id]} -> {"content"}
    svr.Post("/tokenize", [&s](const httplib::Request & req, httplib::Response & res) {
        json in;
        api_error err;
        if (!api_parse_json(req.body, in, err)) return send_error(res, err);
        auto flag = [&](const char * name, bool dflt, bool & out) {
            if (!in.contains(name)) return (out = dflt, true);
            if (!in[name].is_boolean()) return api_fail(err, name, std::string("'") + name + "' must be true or false");
            return (out = in[name].get<bool>(), true);
        };
        bool add_special = false, parse_special = true, with_pieces = false;
        if (!in.contains("content") || !in["content"].is_string()) {
            api_fail(err, "content", "'content' must be a string: the text to tokenize");
            return send_error(res, err);
        }
        if (!flag("add_special", false, add_special) || !flag("parse_special", true, parse_special) ||
            !flag("with_pieces", false, with_pieces)) {
            return send_error(res, err);
        }
        const model & m = *s.rn.target.model;
        json tokens = json::array();
        for (llama_token t : m.tokenize(in["content"].get_ref<const std::string &>(), add_special, parse_special)) {
            if (with_pieces) tokens.push_back({{"id", t}, {"piece", m.token_to_piece(t, true)}});
            else tokens.push_back(t);
        }
        send_json(res, 200, {{"tokens", tokens}});
    });
    svr.Post("/detokenize", [&s](const httplib::Request & req, httplib::Response & res) {
        json in;
        api_error err;
        if (!api_parse_json(req.body, in, err)) return send_error(res, err);
        const model & m = *s.rn.target.model;
        const int32_t n_vocab = m.facts().n_vocab;
        token_vec tokens;
        if (!in.contains("tokens") || !in["tokens"].is_array()) {
            api_fail(err, "tokens", "'tokens' must be an array of token ids");
            return send_error(res, err);
        }
        for (const json & t : in["tokens"]) {
            if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= n_vocab) {
                api_fail(err, "tokens", "'tokens' holds " + t.dump() + ", not a token id of this model (0 to " +
                                            std::to_string(n_vocab - 1) + ")");
                return send_error(res, err);
            }
            tokens.push_back((llama_token) t.get<int64_t>());
        }
        send_json(res, 200, {{"content", m.detokenize(tokens, true)}});
    });
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
                            (s.draft_engine ? server_metrics::render_step(s.draft_engine->stats(), "editspec_draft_", "draft-model") : "") +
                            (s.head ? server_metrics::render_head(s.head->stats()) : "") +
                            (s.http ? server_metrics::render_connections(s.http->counts()) : ""),
                        "text/plain; version=0.0.4");
    });
}

} // namespace editspec
