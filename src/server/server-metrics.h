// Prometheus metrics of `editspec serve`: requests by route and status (counted once the response
// is written, every status and route), latency, tokens and drafts by source. Thread-safe.
#pragma once

#include "editspec/draft.h"
#include "editspec/generate.h"
#include "editspec/llama-heads.h"
#include "editspec/prompt-store.h"
#include "editspec/step.h"
#include "server-connections.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace editspec {

struct server_metrics {
    static constexpr double bounds[] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
    static constexpr int n_bounds = sizeof(bounds) / sizeof(bounds[0]);

    // one answered request; route is a route's pattern (server_route_label), never a raw path, so a
    // client cannot grow the label set
    void request(const std::string & route, int status, double seconds);
    // one finished generation
    void generation(const generate_result & r);
    // the text exposition format
    std::string render();
    // the prompt store's gauges and counters (it keeps its own figures)
    static std::string render_store(const prompt_store_stats & ps);
    static std::string render_head(const shared_head_stats & h);
    // the step engine's counters: steps, tokens and requests they carried (per step: divide by steps)
    // a step engine's counters: the target's (editspec_steps_total, ...) or, with prefix "editspec_draft_" and
    // what "draft-model", the draft model's engine
    static std::string render_step(const step_stats & st, const char * prefix = "editspec_", const char * what = "target");
    static std::string render_connections(const connection_counts & c);
    // the time one request waited for a slot
    void queue_wait(double seconds);
    // a request whose client left: while it waited for a slot (dropped) or while it decoded (cancelled)
    void client_left(bool queued);

private:
    std::mutex mu;
    std::map<std::string, int64_t> requests; // "route status" -> count
    int64_t prompt_tokens = 0, generated_tokens = 0, target_passes = 0;
    int64_t draft_sent = 0; // every draft node the target's passes held (drafted[] counts the tested ones)
    int64_t drafted[DRAFT_SOURCE_COUNT] = {}, accepted[DRAFT_SOURCE_COUNT] = {};
    int64_t latency_le[n_bounds + 1] = {}; // per bucket; cumulated at render time
    double latency_sum = 0.0;
    int64_t latency_n = 0;
    double queue_wait_sum = 0.0;
    int64_t queue_wait_n = 0;
    int64_t left_queued = 0, left_running = 0;
};

// the route a path belongs to, as metrics label it ("/v1/sessions/{id}/edits", "other")
std::string server_route_label(const std::string & path);

} // namespace editspec
