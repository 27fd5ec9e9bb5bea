// Prometheus metrics (server-metrics.h).
#include "server-metrics.h"

#include <cmath>
#include <cstdio>

namespace editspec {

namespace {

// one metric without labels in the text format: its HELP and TYPE lines and its value (counts
// whole, seconds to the microsecond)
void metric_append(std::string & o, const char * name, const char * type, const char * help, double v) {
    char buf[512];
    const bool whole = v == std::floor(v) && std::fabs(v) < 9007199254740992.0;
    snprintf(buf, sizeof(buf), whole ? "# HELP %s %s\n# TYPE %s %s\n%s %.0f\n" : "# HELP %s %s\n# TYPE %s %s\n%s %.6f\n",
             name, help, name, type, name, v);
    o += buf;
}

} // namespace

std::string server_route_label(const std::string & path) {
    static const char * const exact[] = {"/v1/chat/completions", "/chat/completions", "/v1/completions", "/completions",
                                         "/completion", "/infill", "/v1/apply", "/v1/code/apply", "/health", "/metrics", "/v1/models",
                                         "/models", "/v1/sessions", "/tokenize", "/detokenize"};
    for (const char * p : exact) {
        if (path == p) return p;
    }
    if (path.rfind("/v1/sessions/", 0) == 0) {
        if (path.size() > 6 && path.compare(path.size() - 6, 6, "/edits") == 0) return "/v1/sessions/{id}/edits";
        if (path.size() > 9 && path.compare(path.size() - 9, 9, "/complete") == 0) return "/v1/sessions/{id}/complete";
        return "/v1/sessions/{id}";
    }
    return "other";
}

void server_metrics::request(const std::string & route, int status, double seconds) {
    std::lock_guard<std::mutex> lock(mu);
    requests[route + " " + std::to_string(status)]++;
    int b = 0;
    while (b < n_bounds && seconds > bounds[b]) b++;
    latency_le[b]++;
    latency_sum += seconds;
    latency_n++;
}

void server_metrics::generation(const generate_result & r) {
    std::lock_guard<std::mutex> lock(mu);
    prompt_tokens += r.prompt_tokens;
    generated_tokens += (int64_t) r.tokens.size();
    target_passes += r.target_passes;
    draft_sent += r.draft_tokens;
    for (int s = 0; s < DRAFT_SOURCE_COUNT; s++) {
        drafted[s] += r.by_source[s].n_drafted;
        accepted[s] += r.by_source[s].n_accepted;
    }
}

std::string server_metrics::render() {
    std::lock_guard<std::mutex> lock(mu);
    std::string o;
    char buf[256];
    o += "# HELP editspec_requests_total HTTP requests by route (its pattern) and status\n# TYPE editspec_requests_total counter\n";
    for (const auto & [k, v] : requests) {
        const size_t sp = k.find(' ');
        snprintf(buf, sizeof(buf), "editspec_requests_total{path=\"%s\",status=\"%s\"} %lld\n", k.substr(0, sp).c_str(),
                 k.substr(sp + 1).c_str(), (long long) v);
        o += buf;
    }
    auto counter = [&](const char * name, const char * help, int64_t v) { metric_append(o, name, "counter", help, (double) v); };
    counter("editspec_prompt_tokens_total", "prompt tokens processed", prompt_tokens);
    counter("editspec_tokens_generated_total", "tokens generated", generated_tokens);
    counter("editspec_target_passes_total", "target model passes while generating", target_passes);
    // a rejected node's children are sent too, and never tested: what drafting costs is the sent count
    counter("editspec_draft_tokens_sent_total", "draft tokens the target's passes held, tested or not", draft_sent);
    o += "# HELP editspec_draft_tokens_total draft tokens the target tested (a node whose parent was accepted), "
         "by drafter source\n"
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
    snprintf(buf, sizeof(buf),
             "# HELP editspec_queue_wait_seconds time requests waited for a slot\n# TYPE editspec_queue_wait_seconds summary\n"
             "editspec_queue_wait_seconds_sum %.6f\neditspec_queue_wait_seconds_count %lld\n",
             queue_wait_sum, (long long) queue_wait_n);
    o += buf;
    o += "# HELP editspec_clients_left_total requests whose client closed the connection before the answer: "
         "dropped from the queue, or cancelled while they decoded\n# TYPE editspec_clients_left_total counter\n";
    o += "editspec_clients_left_total{state=\"queued\"} " + std::to_string(left_queued) + "\n";
    o += "editspec_clients_left_total{state=\"running\"} " + std::to_string(left_running) + "\n";
    return o;
}

void server_metrics::client_left(bool queued) {
    std::lock_guard<std::mutex> lock(mu);
    (queued ? left_queued : left_running)++;
}

void server_metrics::queue_wait(double seconds) {
    std::lock_guard<std::mutex> lock(mu);
    queue_wait_sum += seconds;
    queue_wait_n++;
}

std::string server_metrics::render_step(const step_stats & st, const char * prefix, const char * what) {
    std::string o;
    const std::string p = prefix;
    const std::string w = what;
    metric_append(o, (p + "steps_total").c_str(), "counter",
                  ("batched " + w + " passes (every active request's tokens in one llama_decode)").c_str(), (double) st.steps);
    metric_append(o, (p + "step_tokens_total").c_str(), "counter",
                  ("tokens the steps carried (tokens per step: / " + p + "steps_total)").c_str(), (double) st.tokens);
    metric_append(o, (p + "step_requests_total").c_str(), "counter",
                  ("requests' batches the steps carried (requests per step: / " + p + "steps_total)").c_str(),
                  (double) st.batches);
    metric_append(o, (p + "step_ubatches_total").c_str(), "counter",
                  ("ubatches libllama split the steps into, one weight read each (per step: / " + p + "steps_total)").c_str(),
                  (double) st.ubatches);
    metric_append(o, (p + "step_graphs_reused_total").c_str(), "counter",
                  ("of " + p + "step_ubatches_total, those whose compute graph libllama reused (the shape of the one before)").c_str(),
                  (double) st.graphs_reused);
    metric_append(o, (p + "step_seconds_total").c_str(), "counter", "time inside the steps' llama_decode", st.decode_ms / 1000.0);
    metric_append(o, (p + "step_model_seconds_total").c_str(), "counter",
                  "the cost model's time for the same steps, each request's rows at its depth (cost_model::t_step)",
                  st.model_ms / 1000.0);
    metric_append(o, (p + "step_modelled_seconds_total").c_str(), "counter",
                  ("the measured time of the steps " + p + "step_model_seconds_total covers (those after the cost model was known)").c_str(),
                  st.modelled_decode_ms / 1000.0);
    metric_append(o, (p + "step_gather_seconds_total").c_str(), "counter", "time steps waited for active requests' batches",
                  st.gather_ms / 1000.0);
    metric_append(o, (p + "step_jobs_seconds_total").c_str(), "counter",
                  "time the engine's thread ran the requests' own work between steps (drafting, verifying, output)",
                  st.jobs_ms / 1000.0);
    metric_append(o, (p + "step_rows_lent_total").c_str(), "counter",
                  "output rows a request read in place from the context's buffer (a request on the engine's thread)", (double) st.rows_lent);
    metric_append(o, (p + "step_rows_copied_total").c_str(), "counter",
                  "output rows copied out for a request (one decoding from its own thread, or rows a later step would overwrite)",
                  (double) st.rows_copied);
    metric_append(o, (p + "step_copy_seconds_total").c_str(), "counter", "time copying those rows (inside the steps' time)",
                  st.copy_ms / 1000.0);
    metric_append(o, (p + "step_layout_seconds_total").c_str(), "counter",
                  "time laying the requests' batches into each step's one before its llama_decode (inside the steps' time)",
                  st.layout_ms / 1000.0);
    metric_append(o, (p + "steps_argmax_total").c_str(), "counter",
                  "steps that handed back each row's argmax instead of its logits (EDITSPEC_DEVICE_ARGMAX=1, every request greedy)",
                  (double) st.steps_argmax);
    metric_append(o, (p + "steps_aborted_total").c_str(), "counter",
                  "steps cut short because every request in them was cancelled", (double) st.aborted);
    metric_append(o, (p + "step_cancelled_total").c_str(), "counter", "request batches dropped because their client left",
                  (double) st.cancelled);
    return o;
}

std::string server_metrics::render_head(const shared_head_stats & h) {
    std::string o;
    metric_append(o, "editspec_head_steps_total", "counter", "target steps the head followed (one catch-up decode of every request's rows each)",
                  (double) h.steps);
    metric_append(o, "editspec_head_draft_calls_total", "counter", "the head's draft calls (the requests that ask at once share one)",
                  (double) h.calls);
    metric_append(o, "editspec_head_drafts_total", "counter", "requests' drafts the calls made (per call: / editspec_head_draft_calls_total)",
                  (double) h.drafts);
    metric_append(o, "editspec_head_seconds_total", "counter", "time in the head's catch-up decodes and draft calls",
                  (h.follow_ms + h.draft_ms) / 1000.0);
    return o;
}

std::string server_metrics::render_store(const prompt_store_stats & ps) {
    std::string o;
    metric_append(o, "editspec_prompt_store_bytes", "gauge", "past prompts' KV states held in RAM (--cache-ram)",
                  (double) ps.bytes);
    metric_append(o, "editspec_prompt_store_entries", "gauge", "past prompts held in RAM", (double) ps.entries);
    metric_append(o, "editspec_prompt_store_saved_total", "counter", "prompts' states kept when their slot moved on",
                  (double) ps.saved);
    metric_append(o, "editspec_prompt_store_restored_total", "counter", "stored states loaded back into a slot",
                  (double) ps.restored);
    metric_append(o, "editspec_prompt_store_recycled_total", "counter",
                  "states kept in an evicted state's buffer (pages written already, no faults)", (double) ps.recycled);
    return o;
}

std::string server_metrics::render_connections(const connection_counts & c) {
    std::string o;
    metric_append(o, "editspec_connections_open", "gauge", "connections held (--max-connections)", (double) c.open);
    metric_append(o, "editspec_connections_busy", "gauge", "of those, with a request past its head", (double) c.busy);
    metric_append(o, "editspec_connections_refused_total", "counter", "newcomers answered 503: every held connection busy",
                  (double) c.refused);
    metric_append(o, "editspec_connections_evicted_total", "counter",
                  "connections closed while waiting for or reading a request, for a newcomer", (double) c.evicted);
    metric_append(o, "editspec_requests_read_timeout_total", "counter",
                  "requests whose head and body missed --request-read-timeout", (double) c.timed_out);
    return o;
}

} // namespace editspec
