// `editspec serve`: an OpenAI- and llama.cpp-compatible HTTP server on the request layer.
//
//   POST /v1/chat/completions   OpenAI chat (SSE streaming), Predicted Outputs (`prediction`) drive
//                               EfficientEdit's Reuse drafter
//   POST /v1/completions        OpenAI text completions, `suffix` = fill-in-the-middle
//   POST /completion, /infill   llama.cpp's (llama.vim, llama.vscode, Continue's llama.cpp provider)
//   POST /v1/apply              fast apply (apply.h): {code, update, instruction?} -> the merged file;
//                               a chat message in the <code>...</code>\n<update>...</update> format
//                               is an apply too, its code the prediction
//   GET  /v1/models, /health, /metrics (Prometheus)
//
// N slots, each a context (KV cache) on the one loaded model; requests wait for a free slot.
//
//     editspec::server_params sp;
//     sp.runner.model_path = "model.gguf";
//     return editspec::server_run(sp);   // blocks until SIGINT / SIGTERM
#pragma once

#include "editspec/apply.h"
#include "editspec/engine.h"
#include "editspec/request.h"
#include "editspec/sampling.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace editspec {

struct server_params {
    runner_params runner;              // models, context size per slot, threads
    std::string host = "127.0.0.1";    // loopback unless told otherwise
    int32_t port = 8012;
    std::string api_key;               // non-empty: requests need "Authorization: Bearer <key>"
    int32_t n_parallel = 1;            // slots
    std::string method = "lookup-longest"; // drafters for every request; `prediction` adds Reuse
    size_t max_body = 8u << 20;        // bytes
    int32_t max_tokens = 4096;         // most tokens one request may ask for
    int32_t max_sessions = 4;          // /v1/sessions at once (each holds a KV cache of --ctx-size)
    double  session_idle_s = 600.0;    // a session idle this long may be evicted by a new one
};

// ----------------------------------------------------------------------------
// requests, parsed from any endpoint's JSON (api.cpp; pure, fuzzed)

enum api_endpoint {
    API_CHAT,        // /v1/chat/completions
    API_COMPLETIONS, // /v1/completions
    API_COMPLETION,  // /completion (llama.cpp)
    API_INFILL,      // /infill (llama.cpp)
    API_APPLY,       // /v1/apply (editspec)
};

struct api_error {
    int status = 400;
    std::string message;
    std::string type = "invalid_request_error";
    std::string param;    // the offending field, "" = none
    std::string code;     // OpenAI's code, "" = none
};

struct api_message {
    std::string role;
    std::string content;
};

struct api_request {
    api_endpoint endpoint = API_COMPLETION;
    std::vector<api_message> messages;   // chat
    std::string prompt;                  // completions; infill: the text before the cursor's line end
    std::vector<llama_token> prompt_tokens; // /completion given tokens instead of text
    bool has_suffix = false;             // fill-in-the-middle (suffix, input_suffix)
    std::string prefix, suffix;          // infill: input_prefix (extra context first), input_suffix
    bool has_prediction = false;
    std::string prediction;              // Predicted Outputs: the expected output (Reuse's original)
    int32_t n_predict = -1;              // -1 = the server's limit
    sampling_params sampling;            // temperature 0 (greedy) unless asked
    std::vector<std::string> stop;
    bool stream = false;
    bool include_usage = false;          // stream_options.include_usage
    double t_max_predict_ms = 0.0;       // llama.cpp: stop after this long (0 = no limit)
    std::vector<std::string> response_fields; // llama.cpp: only these ("timings/predicted_n": nested)
    std::string model;                   // as the client named it (echoed)
    bool is_apply = false;               // /v1/apply, or a chat message in the apply format
    apply_input apply;                   // its code, update and instruction (the code is the prediction)
    bool constrain = false;              // /v1/apply "constrain": every merged line from the code or the update
};

// sets a 400 error on `param` (may be ""); returns false
bool api_fail(api_error & err, const std::string & param, const std::string & message);

// parses a request body of `endpoint`; false with *err (status 400, the field named)
bool api_parse(api_endpoint endpoint, const std::string & body, api_request & out, api_error & err);

// the prompt's tokens on model m: the chat template for chat (a chat with a prediction on a model
// without a chat template: edit_prompt of the prediction, the instruction being the last user
// message without its fenced code, as `editspec edit` prompts), FIM tokens around prefix / suffix,
// else the text with BOS; false with *err (e.g. fill-in-the-middle on a model without FIM tokens)
bool api_prompt_tokens(const model & m, const api_request & rq, std::vector<llama_token> & out, api_error & err);

// {"error": {...}} in OpenAI's schema
nlohmann::json api_error_json(const api_error & err);

// OpenAI's finish_reason for a stop reason: "stop" or "length"
const char * api_finish_reason(stop_reason r);

// blocks serving until SIGINT / SIGTERM; returns an exit status (errors printed on stderr)
int server_run(const server_params & p);

} // namespace editspec
