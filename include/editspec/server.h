// `editspec serve`: an OpenAI- and llama.cpp-compatible HTTP server on the request layer.
//
//   POST /v1/chat/completions   OpenAI chat (SSE streaming), Predicted Outputs (`prediction`) drive
//                               EfficientEdit's Reuse drafter; `tools` rendered by the model's template
//                               and its tool calls read back (chat-tools.h)
//   POST /v1/completions        OpenAI text completions, `suffix` = fill-in-the-middle
//   POST /completion, /infill   llama.cpp's (llama.vim, llama.vscode, Continue's llama.cpp provider)
//   POST /v1/apply              fast apply (apply.h): {code, update, instruction?} -> the merged file;
//                               a chat message in the <code>...</code>\n<update>...</update> format
//                               is an apply too, its code the prediction
//   GET  /v1/models, /health, /metrics (Prometheus)
//
// N slots, each a view of one step engine (step.h: a KV stream each, every active request's tokens
// in one batched pass a step) on the one loaded model; requests wait for a free slot in a
// bounded FIFO (503 with Retry-After past it). A request reuses what its slot's cache holds of its
// prompt (pie.h: the exact prefix, or with --kv-reuse pie the spans after an edit too), or
// what a prompt kept in RAM holds when that is more (prompt-store.h, --cache-ram); one that names a document session ("session": ID, /v1/sessions) runs on that session's KV instead. /health and /metrics answer whatever the slots do.
// Bodies are refused before they are read when chunked, compressed, unmeasured, over --max-body-mb or
// not JSON; every client error is a 4xx in OpenAI's error schema. SIGTERM stops accepting, refuses the
// queue, ends running generations at their next token and exits 0; a second signal exits at once.
//
//     editspec::server_params sp;
//     sp.runner.model_path = "model.gguf";
//     return editspec::server_run(sp);   // blocks until SIGINT / SIGTERM
#pragma once

#include "editspec/apply.h"
#include "editspec/chat-tools.h"
#include "editspec/engine.h"
#include "editspec/pie.h"
#include "editspec/request.h"
#include "editspec/sampling.h"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace editspec {

// how many connections the server holds and how long a request may take to arrive (slow clients;
// src/server/server-connections.h). A newcomer past a bound closes the oldest held connection of that
// client (of all clients) that has not sent its request's head; 503 when none has.
struct connection_limits {
    size_t max_total       = 256; // connections held at once (--max-connections)
    size_t max_per_client  = 64;  // from one client address (--max-connections-per-client)
    int    read_deadline_s = 30;  // a request's head and body, from its first byte (--request-read-timeout)
    int    idle_s          = 10;  // a connection waits this long for its first (or next) request
    int    io_timeout_s    = 10;  // one read or write waits at most this long
};

struct server_params {
    runner_params runner;              // models, context size per slot, threads
    std::string host = "127.0.0.1";    // loopback unless told otherwise
    int32_t port = 8012;
    std::string api_key;               // non-empty: requests need "Authorization: Bearer <key>"
    int32_t n_parallel = 1;            // slots: requests decoded at once, batched into one pass a step
                                       // (step.h), each with a KV stream of runner.n_ctx tokens
    int32_t step_tokens = 0;           // most tokens one batched step carries, 0 = 2 x n_batch (1024)
    std::string method = "auto";       // drafters for every request (methods.h); `prediction` feeds Reuse
    size_t max_body = 8u << 20;        // bytes
    int32_t max_queue = 32;            // requests waiting for a slot; past them, 503 with Retry-After
    int32_t max_tokens = 4096;         // most tokens one request may ask for
    int32_t max_sessions = 4;          // /v1/sessions at once (each holds a KV cache of --ctx-size)
    double  session_idle_s = 600.0;    // a session idle this long may be evicted by a new one
    prompt_cache_params prompt_cache;  // what a request reuses of its slot's KV cache (--kv-reuse)
    size_t cache_ram_mib = 8192;       // past prompts' KV states kept in RAM (prompt-store.h), 0 = none
    prompt_layout layout = PROMPT_LAYOUT_AUTO; // edit and apply prompts (--prompt-layout)
    apply_view file_view = APPLY_VIEW_AUTO;    // how much of the file an apply prompt shows (--apply-view)
    // more names /v1/models lists for the model (--alias): clients that switch features on by model
    // name (Continue sends `prediction` only to models named like gpt-4o) find one. Every request's
    // "model" is answered by the one loaded model whatever it names.
    std::vector<std::string> aliases;
    // a Jinja chat template's text (--chat-template-file) in place of the GGUF's: then every chat request
    // is rendered by it through llama.cpp's Jinja engine; "" = the GGUF's, through it for requests with tools
    std::string chat_template;
    connection_limits connections;     // slow clients cannot starve the server
};

// ----------------------------------------------------------------------------
// requests, parsed from any endpoint's JSON (api.cpp; pure, fuzzed)

enum api_endpoint {
    API_CHAT,        // /v1/chat/completions
    API_COMPLETIONS, // /v1/completions
    API_COMPLETION,  // /completion (llama.cpp)
    API_INFILL,      // /infill (llama.cpp)
    API_APPLY,       // /v1/apply (editspec)
    API_CODE_APPLY,  // /v1/code/apply (Relace's shape: initial_code, edit_snippet → mergedCode)
    API_FIM,         // /v1/fim/completions (Mistral's shape: prompt, suffix → a chat-shaped answer;
                     // Continue's OpenAI-compatible adapters send their autocomplete here)
};
constexpr int API_ENDPOINT_COUNT = 7;

struct api_error {
    int status = 400;
    std::string message;
    std::string type = "invalid_request_error";
    std::string param;    // the offending field, "" = none
    std::string code;     // OpenAI's code, "" = none
};

// a chat message: role, content, an assistant's tool_calls, a tool's tool_call_id and name
using api_message = chat_message;

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
    double t_max_predict_ms = 0.0;       // llama.cpp: stop at the first newline after this long generating (0 = no limit)
    int32_t n_indent = 0;                // llama.cpp: end before a new line indented less than this (0 = off)
    std::vector<std::string> response_fields; // llama.cpp: only these ("timings/predicted_n": nested)
    int32_t n_cmpl = 1;                  // llama.cpp: completions of the prompt ("n_cmpl", or "n"), answered
                                         // as an array when over 1; completion i samples with seed + i
    std::string model;                   // as the client named it (echoed)
    bool is_apply = false;               // /v1/apply, or a chat message in the apply format
    apply_input apply;                   // its code, update and instruction (the code is the prediction)
    bool constrain = false;              // "constrain": every merged line from the code or the update
    bool constrain_given = false;        // ... sent; else api_apply_constrained decides
    std::string session;                 // a document session (/v1/sessions) whose KV the request starts from
    std::vector<chat_tool> tools;        // chat: "tools" (functions the model may call)
    chat_tool_choice tool_choice = CHAT_TOOL_CHOICE_AUTO; // "tool_choice" (a named function: required, the others left out)
    bool parallel_tool_calls = false;    // "parallel_tool_calls"
    std::string json_schema;             // "response_format": json_object ("{}") or json_schema's schema, as JSON text
    bool uses_tools = false;             // tools offered, a message holds a call or a result, or a JSON answer is
                                         // asked: the model's template renders it through llama.cpp's Jinja engine (chat-tools.h)
    chat_tools_prompt jinja;             // ... what it rendered (generation_prepare) and how its reply is read
    std::string cache_key;               // "prompt_cache_key" (OpenAI's), else "user", else the X-Session-Id
                                         // header: what a balancer routes by to keep a conversation on the replica
                                         // that caches it (deploy/); echoed in the X-Editspec-Cache-Key header
};

// what one request may carry; past these a request is refused with 400 naming the field
// (`editspec serve --help` lists them)
constexpr int32_t API_JSON_DEPTH_MAX        = 64;        // nesting of arrays and objects in a body
constexpr size_t  API_MESSAGES_MAX          = 1024;      // chat messages
constexpr size_t  API_TOOLS_MAX             = 256;       // chat tools, and tool calls in one message
constexpr size_t  API_PREDICTION_BYTES_MAX  = 1u << 20;  // prediction.content
constexpr size_t  API_STOP_MAX              = 16;        // stop strings
constexpr size_t  API_STOP_BYTES_MAX        = 256;       // bytes of one stop string
constexpr size_t  API_INPUT_EXTRA_MAX       = 256;       // /infill input_extra chunks
constexpr size_t  API_EDITS_MAX             = 1024;      // edits in one /v1/sessions/ID/edits
constexpr int32_t API_N_CMPL_MAX            = 8;         // /completion, /infill: n_cmpl (llama.vscode sends 3)
constexpr size_t  API_CACHE_KEY_BYTES_MAX   = 256;       // prompt_cache_key, user, X-Session-Id

// what one connection may do
constexpr size_t  SERVER_HEADERS_MAX        = 100;       // headers of a request (431 past them)
constexpr size_t  SERVER_HEADER_BYTES_MAX   = 64u << 10; // their names and values together

// sets a 400 error on `param` (may be ""); returns false
bool api_fail(api_error & err, const std::string & param, const std::string & message);

// v as an integer in [lo, hi]; false for a non-integer or one out of range (2^64 - 1 included)
bool api_json_int(const nlohmann::json & v, int64_t lo, int64_t hi, int64_t & out);

// the deepest nesting of arrays and objects in JSON text (brackets inside strings not counted)
int32_t api_json_depth(std::string_view text);

// a request body as a JSON object, nesting at most API_JSON_DEPTH_MAX; false with a 400 in *err
bool api_parse_json(const std::string & body, nlohmann::json & out, api_error & err);

// parses a request body of `endpoint`; false with *err (status 400, the field named)
bool api_parse(api_endpoint endpoint, const std::string & body, api_request & out, api_error & err);

// a cache key (prompt_cache_key, user, X-Session-Id) fits API_CACHE_KEY_BYTES_MAX and a header
bool api_cache_key_ok(const std::string & key);

// the prompt's tokens on model m: the chat template for chat (on a model without a chat template, a
// last user message that holds fenced code is prompted as `editspec edit` prompts: edit_prompt of
// its last fenced block, the instruction being the message without its fenced code); FIM tokens
// around prefix / suffix; else the text with BOS, special tokens written in it parsed (as llama-server
// does). Never depends on the prediction. A chat may stop
// rendering past n_max tokens (chat_tokens). Edit and apply prompts are laid out as `layout` says
// (edit.h), an apply's file as `view` says (apply.h). False with *err (e.g. fill-in-the-middle on a
// model without FIM tokens)
bool api_prompt_tokens(const model & m, const api_request & rq, std::vector<llama_token> & out, api_error & err,
                       size_t n_max = SIZE_MAX, prompt_layout layout = PROMPT_LAYOUT_INSTRUCTION_FIRST,
                       apply_view view = APPLY_VIEW_FILE);

// true for a request prompted with editspec's apply prompt (apply_prompt)
bool api_uses_apply_prompt(const api_request & rq, const model & m);

// whether an apply decodes under the constraint: "constrain" as sent; by default, an apply (any of
// its shapes) decoded greedily on editspec's apply prompt (the mode that merges right; README)
bool api_apply_constrained(const api_request & rq, const model & m);

// {"error": {...}} in OpenAI's schema
nlohmann::json api_error_json(const api_error & err);

// OpenAI's finish_reason for a stop reason: "stop" or "length"
const char * api_finish_reason(stop_reason r);

// blocks serving until SIGINT / SIGTERM; returns an exit status (errors printed on stderr)
int server_run(const server_params & p);

} // namespace editspec
