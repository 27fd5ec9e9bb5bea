// /v1/sessions (sessions.cpp): document sessions whose KV cache follows the user's edits (PIE,
// session.h), created, edited, asked for the next line and closed over HTTP.
//
//   POST   /v1/sessions               {"text": "...", "strategy": "pie", "drift_max": -1} -> {"id", "tokens"}
//   POST   /v1/sessions/ID/edits      {"offset": 120, "delete": 4, "insert": "x"} or {"edits": [...]}
//   POST   /v1/sessions/ID/complete   {"max_tokens": 64} -> {"line": "..."}
//   DELETE /v1/sessions/ID
//
// A chat, completion or apply request with "session": ID runs on that session's context, starting
// from the document's KV (submit; doc_session::lend and take_back): with strategy pie the document's
// spans are shifted into the request's prompt, so an apply encodes little more than its snippet.
//
// Each method returns the HTTP status and fills `out` with the response (an error body on failure).
#pragma once

#include "editspec/request.h"
#include "editspec/server.h"
#include "editspec/session.h"
#include "editspec/step.h"
#include "server-slots.h"

#include <exception>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace editspec {

struct session_store_params {
    int32_t max_sessions = 4;  // each holds a context of the server's --ctx-size
    double  idle_s = 600.0;    // a session idle this long may be evicted by a new one
    int32_t drift_max = -1;    // default drift control (session.h)
    step_engine * compute = nullptr; // whose thread computes the sessions' passes (context::set_compute:
                               // one OpenMP team in the process); null = the sessions' worker thread
};

constexpr int32_t SESSION_COMPLETE_MAX = 256; // tokens one /complete may decode

// ----------------------------------------------------------------------------
// request bodies (sessions-parse.cpp; pure, fuzzed). An empty body reads as {}. False with a 400 in
// *err naming the field.

struct session_create_request {
    std::string text;       // the document
    session_params params;  // strategy and drift_max, the store's defaults where absent
};

bool session_parse_create(const std::string & body, const session_store_params & defaults, session_create_request & out,
                          api_error & err);
// one edit {offset, delete?, insert?} or {"edits": [...]} (at most API_EDITS_MAX)
bool session_parse_edits(const std::string & body, std::vector<text_edit> & out, api_error & err);
// {"max_tokens"?} in [1, SESSION_COMPLETE_MAX], default 64
bool session_parse_complete(const std::string & body, int32_t & n_max, api_error & err);

// ----------------------------------------------------------------------------
// the store

// a request named a session that is not there (or cannot lend its KV): 404 with the message
struct session_gone : std::runtime_error {
    using std::runtime_error::runtime_error;
};

class session_store {
public:
    // contexts come from the runner's target (runner_new_context)
    session_store(const runner & rn, const session_store_params & p);
    ~session_store();

    int create(const std::string & body, nlohmann::json & out);
    int edit(const std::string & id, const std::string & body, nlohmann::json & out);
    int complete(const std::string & id, const std::string & body, nlohmann::json & out);
    int close(const std::string & id, nlohmann::json & out);

    // Queues a request on session `id`: on the sessions' worker, the document's KV is lent to the job
    // (ctx, the session's memory, how the prompt may reuse the document) and taken back after it.
    // 200: queued, `done` is called once when it ran, on the worker, with its exception if any
    // (session_gone when the session was closed or evicted meanwhile, or is KV_REUSE_CONFLICT); else 503
    // with out, done never called. The store runs every queued job before it goes.
    using job = std::function<void(context &, slot_memory &, const prompt_cache_params &)>;
    int submit(const std::string & id, job j, std::function<void(std::exception_ptr)> done, nlohmann::json & out);

private:
    struct impl;
    std::unique_ptr<impl> d_;
};

} // namespace editspec
