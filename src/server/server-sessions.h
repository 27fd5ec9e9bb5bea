// /v1/sessions (sessions.cpp): document sessions whose KV cache follows the user's edits (PIE,
// session.h), created, edited, asked for the next line and closed over HTTP.
//
//   POST   /v1/sessions               {"text": "...", "strategy": "pie", "drift_max": -1} -> {"id", "tokens"}
//   POST   /v1/sessions/ID/edits      {"offset": 120, "delete": 4, "insert": "x"} or {"edits": [...]}
//   POST   /v1/sessions/ID/complete   {"max_tokens": 64} -> {"line": "..."}
//   DELETE /v1/sessions/ID
//
// Each method returns the HTTP status and fills `out` with the response (an error body on failure).
#pragma once

#include "editspec/request.h"
#include "editspec/server.h"

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace editspec {

struct session_store_params {
    int32_t max_sessions = 4;  // each holds a context of the server's --ctx-size
    double  idle_s = 600.0;    // a session idle this long may be evicted by a new one
    int32_t drift_max = -1;    // default drift control (session.h)
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

private:
    struct impl;
    std::unique_ptr<impl> d_;
};

} // namespace editspec
