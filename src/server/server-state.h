// The state of `editspec serve` and of one request it serves, shared by the server's rooms:
//   server.cpp      set-up (the runner, the slots or the step engine, sessions), signals, server_run
//   routes.cpp      the routes, the hooks around them (header refusals, the API key, metrics), errors
//   generation.cpp  one request: parsed, tokenized, queued on a slot, waited for
//   watcher.cpp     the client watcher (server-watcher.h): clients that leave cancel their requests
//   responses.cpp   the response shapes (OpenAI chat / completions, llama.cpp, Relace, ours)
//   streaming.cpp   server-sent events from a slot's text channel
// Slots and their queue are server-slots.h, connections server-connections.h, metrics
// server-metrics.h, sessions server-sessions.h.
#pragma once

#include "server-connections.h"
#include "server-metrics.h"
#include "server-sessions.h"
#include "server-slots.h"
#include "server-watcher.h"
#include "editspec/llama-heads.h"
#include "editspec/server.h"
#include "editspec/step.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace editspec {

struct server_state {
    server_params params;
    runner rn;
    method_spec method;      // for requests without a prediction
    method_spec with_reuse;  // with one: the method with Reuse (method_with_original)
    std::unique_ptr<step_engine> engine;     // every slot's decodes, batched into one pass a step
    std::unique_ptr<step_engine> draft_engine; // with a draft model: every slot's draft-model passes, likewise
    std::unique_ptr<shared_head> head;       // with a head row: every slot's head, following the engine's steps
    std::unique_ptr<slot_pool> slots;
    server_metrics mx;
    std::string model_id;    // the model file's name
    chat_templates chat;     // the model's chat templates for llama.cpp's Jinja engine (requests with tools)
    std::string chat_error;  // ... why there are none (no common library, a template that does not compile)
    std::atomic<int64_t> next_id{1};
    std::unique_ptr<session_store> sessions; // /v1/sessions
    std::atomic<bool> stopping{false};       // SIGTERM: running generations end at their next token
    std::atomic<int64_t> cut_by_stop{0};     // generations the stop ended before their own end (exit 3)
    const guarded_server * http = nullptr;   // its connections, for /metrics
    // every request's client, from its queueing to its end; declared last, so destroyed first: its
    // thread is gone before what its requests' on_gone touch (the slots)
    std::unique_ptr<client_watcher> watcher = std::make_unique<client_watcher>();
};

// ----------------------------------------------------------------------------
// one request

// One request the server serves, owned from its parse to its answer: what it asks (api_request), what it
// decodes (request), what came of it, its cancel flag and its output channel. Its HTTP thread makes it,
// queues it (generation_start) and reads its channel (generation_finish, stream_response); the slot's
// job decodes it and writes the channel, never waiting for the client; the client watcher cancels it
// when its client leaves (queued, in its prompt or generating, streamed or not) and the server's stop
// cancels every one. Held by shared_ptr by those three; the last one frees it.
struct served_request {
    api_request rq;
    request req;
    const method_spec * ms = nullptr;
    generate_result r;
    bool ok = false;
    std::string error;
    // the client left (or the server stops): a queued request is dropped, a running job's decodes fail at
    // once and a step of only cancelled requests is cut short (context::set_cancel)
    std::atomic<bool> cancel{false};
    bool streamed = false; // its text goes to the channel as it comes (set before it is queued)
    uint64_t watch = 0;    // its handle in the client watcher while it is queued or decoding

    // the channel, under mu
    std::mutex mu;
    std::condition_variable cv;
    std::string pending;           // streamed text not yet sent
    bool finished = false;         // the job is done with: it ran (or threw), or never ran
    slot_status outcome = SLOT_OK; // SLOT_CANCELLED, SLOT_STOPPING: dropped from the queue, never ran
    std::exception_ptr failure;    // what the job threw
    bool reader_gone = false;      // the client left: the job stops at its next token

    // the job's text: false once the client left (the generation stops there)
    bool write(std::string_view text);
    // the job is done with (the slot's done callback); wakes the reader
    void finish(slot_status outcome, std::exception_ptr failure);
    // the client left or the server stops: cancelled, and a waiting reader wakes
    void leave();
    // the reader: waits for streamed text or the end, moves the text into `text`; true once finished
    bool next(std::string & text);
};

// ----------------------------------------------------------------------------
// helpers (generation.cpp)

std::string make_id(server_state & s, const char * prefix);
int64_t unix_now();
void send_json(httplib::Response & res, int status, const nlohmann::json & j);
void send_error(httplib::Response & res, const api_error & err); // 503s get Retry-After
api_error make_error(int status, const std::string & message, const char * type = nullptr);

// parses, tokenizes and checks a request; false with err
bool generation_prepare(server_state & s, api_endpoint ep, const std::string & body, served_request & g, api_error & err);
// queues g on a slot (or its session) and watches its client (this thread's connection); its text goes
// to its channel when g.streamed. False with err: 503 when the queue is full or the server stops.
bool generation_start(server_state & s, const std::shared_ptr<served_request> & g, api_error & err);
// waits for a started generation; false with err: 499 when its client left while it was queued, 503 when
// the server stopped, 500 when it failed or threw, and an apply's error (4xx; 503 when the server stops)
// when an apply stopped before its end: a merge is whole or an error
bool generation_finish(server_state & s, served_request & g, api_error & err);

// ----------------------------------------------------------------------------
// response shapes (responses.cpp)

nlohmann::json usage_json(const served_request & g);
nlohmann::json timings_json(const generate_result & r);
// the response of each endpoint, whole (not streamed)
nlohmann::json response_json(server_state & s, const served_request & g, const std::string & id);
// one streamed event: a chat chunk, a completions chunk, or llama.cpp's {"content", "stop"}
nlohmann::json stream_chunk(server_state & s, const served_request & g, const std::string & id, const std::string & text,
                            const char * finish);
std::string sse(const nlohmann::json & j);

// A chat the model's template rendered (api_request::jinja): its reply so far read by the template's
// parser (partial: more may come), the calls the model gave no id given one, kept in `ids` by index so
// that a stream's calls keep theirs
struct chat_reply_reader {
    chat_reply reply;             // what was read last
    std::vector<std::string> ids; // the calls' ids
    chat_reply read(const served_request & g, const std::string & text, bool partial);
};
// OpenAI's message.tool_calls
nlohmann::json tool_calls_json(const std::vector<chat_tool_call> & calls);
// a stream's chunk with this delta (a chat's)
nlohmann::json stream_delta_chunk(server_state & s, const served_request & g, const std::string & id, const nlohmann::json & delta,
                                  const char * finish);
// finish_reason of a chat whose reply holds calls: "tool_calls" where it ended on its own
const char * chat_finish_reason(const served_request & g, const chat_reply & reply);

// streams a started generation (streaming.cpp)
void stream_response(server_state & s, const std::shared_ptr<served_request> & g, const std::string & id,
                     httplib::Response & res);

// the routes and the hooks around them (routes.cpp)
void add_hooks(httplib::Server & svr, server_state & s);
void add_routes(httplib::Server & svr, server_state & s);

} // namespace editspec
