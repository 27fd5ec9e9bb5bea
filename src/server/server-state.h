// The state of `editspec serve` and of one generation, shared by the server's rooms:
//   server.cpp      set-up (the runner, the slots or the step engine, sessions), signals, server_run
//   routes.cpp      the routes, the hooks around them (header refusals, the API key, metrics), errors
//   generation.cpp  one request: parsed, tokenized, queued on a slot, waited for
//   responses.cpp   the response shapes (OpenAI chat / completions, llama.cpp, Relace, ours)
//   streaming.cpp   server-sent events from a slot's text channel
// Slots and their queue are server-slots.h, connections server-connections.h, metrics
// server-metrics.h, sessions server-sessions.h.
#pragma once

#include "server-connections.h"
#include "server-metrics.h"
#include "server-sessions.h"
#include "server-slots.h"
#include "editspec/llama-heads.h"
#include "editspec/server.h"
#include "editspec/step.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>

namespace editspec {

struct server_state {
    server_params params;
    runner rn;
    method_spec method;      // for requests without a prediction
    method_spec with_reuse;  // with one: Reuse first, then the method's drafters
    std::unique_ptr<step_engine> engine;     // every slot's decodes, batched into one pass a step
    std::unique_ptr<step_engine> draft_engine; // with a draft model: every slot's draft-model passes, likewise
    std::unique_ptr<shared_head> head;       // with a head row: every slot's head, following the engine's steps
    std::unique_ptr<slot_pool> slots;
    server_metrics mx;
    std::string model_id;    // the model file's name
    std::atomic<int64_t> next_id{1};
    std::unique_ptr<session_store> sessions; // /v1/sessions
    std::atomic<bool> stopping{false};       // SIGTERM: running generations end at their next token
    std::atomic<int64_t> cut_by_stop{0};     // generations the stop ended before their own end (exit 3)
    const guarded_server * http = nullptr;   // its connections, for /metrics
};

// ----------------------------------------------------------------------------
// one generation

// text from the slot's job to the HTTP thread that streams it: the slot never waits for a client
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

// ----------------------------------------------------------------------------
// helpers (generation.cpp)

std::string make_id(server_state & s, const char * prefix);
int64_t unix_now();
void send_json(httplib::Response & res, int status, const nlohmann::json & j);
void send_error(httplib::Response & res, const api_error & err); // 503s get Retry-After
api_error make_error(int status, const std::string & message, const char * type = nullptr);

// the client's connection, watched for a client that leaves while its request waits or decodes
std::function<bool()> watch_client();
// parses, tokenizes and checks a request; false with err
bool generation_prepare(server_state & s, api_endpoint ep, const std::string & body, generation & g, api_error & err);
// starts g on a slot (waiting its turn in the queue); the generation's text goes to ch when given.
// False with err: 503 when the queue is full or the server stops.
bool generation_start(server_state & s, const std::shared_ptr<generation> & g, const std::shared_ptr<text_channel> & ch,
                      api_error & err);
// waits for a started generation; false with a 500 err when it failed or threw, and with an apply's error
// (4xx; 503 when the server stops) when an apply stopped before its end: a merge is whole or an error
bool generation_finish(server_state & s, generation & g, api_error & err);

// ----------------------------------------------------------------------------
// response shapes (responses.cpp)

nlohmann::json usage_json(const generation & g);
nlohmann::json timings_json(const generate_result & r);
// the response of each endpoint, whole (not streamed)
nlohmann::json response_json(server_state & s, const generation & g, const std::string & id);
// one streamed event: a chat chunk, a completions chunk, or llama.cpp's {"content", "stop"}
nlohmann::json stream_chunk(server_state & s, const generation & g, const std::string & id, const std::string & text,
                            const char * finish);
std::string sse(const nlohmann::json & j);

// streams a started generation (streaming.cpp)
void stream_response(server_state & s, const std::shared_ptr<generation> & g, const std::shared_ptr<text_channel> & ch,
                     const std::string & id, httplib::Response & res);

// the routes and the hooks around them (routes.cpp)
void add_hooks(httplib::Server & svr, server_state & s);
void add_routes(httplib::Server & svr, server_state & s);

} // namespace editspec
