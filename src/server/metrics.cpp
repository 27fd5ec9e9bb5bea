// Prometheus metrics (server-metrics.h).
#include "server-metrics.h"

#include <cstdio>

namespace editspec {

std::string server_route_label(const std::string & path) {
    static const char * const exact[] = {"/v1/chat/completions", "/chat/completions", "/v1/completions", "/completions",
                                         "/completion", "/infill", "/v1/apply", "/v1/code/apply", "/health", "/metrics", "/v1/models",
                                         "/models", "/v1/sessions"};
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
    auto counter = [&](const char * name, const char * help, int64_t v) {
        snprintf(buf, sizeof(buf), "# HELP %s %s\n# TYPE %s counter\n%s %lld\n", name, help, name, name, (long long) v);
        o += buf;
    };
    counter("editspec_prompt_tokens_total", "prompt tokens processed", prompt_tokens);
    counter("editspec_tokens_generated_total", "tokens generated", generated_tokens);
    counter("editspec_target_passes_total", "target model passes while generating", target_passes);
    o += "# HELP editspec_draft_tokens_total draft tokens verified by the target, by drafter source\n"
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
    return o;
}

void server_metrics::queue_wait(double seconds) {
    std::lock_guard<std::mutex> lock(mu);
    queue_wait_sum += seconds;
    queue_wait_n++;
}

std::string server_metrics::render_step(const step_stats & st) {
    char buf[2048];
    snprintf(buf, sizeof(buf),
             "# HELP editspec_steps_total batched target passes (every active request's tokens in one llama_decode)\n"
             "# TYPE editspec_steps_total counter\neditspec_steps_total %lld\n"
             "# HELP editspec_step_tokens_total tokens the steps carried (tokens per step: / editspec_steps_total)\n"
             "# TYPE editspec_step_tokens_total counter\neditspec_step_tokens_total %lld\n"
             "# HELP editspec_step_requests_total requests' batches the steps carried (requests per step: / editspec_steps_total)\n"
             "# TYPE editspec_step_requests_total counter\neditspec_step_requests_total %lld\n"
             "# HELP editspec_step_seconds_total time inside the steps' llama_decode\n"
             "# TYPE editspec_step_seconds_total counter\neditspec_step_seconds_total %.6f\n"
             "# HELP editspec_step_gather_seconds_total time steps waited for active requests' batches\n"
             "# TYPE editspec_step_gather_seconds_total counter\neditspec_step_gather_seconds_total %.6f\n"
             "# HELP editspec_steps_aborted_total steps cut short because every request in them was cancelled\n"
             "# TYPE editspec_steps_aborted_total counter\neditspec_steps_aborted_total %lld\n"
             "# HELP editspec_step_cancelled_total request batches dropped because their client left\n"
             "# TYPE editspec_step_cancelled_total counter\neditspec_step_cancelled_total %lld\n",
             (long long) st.steps, (long long) st.tokens, (long long) st.batches, st.decode_ms / 1000.0,
             st.gather_ms / 1000.0, (long long) st.aborted, (long long) st.cancelled);
    return buf;
}

std::string server_metrics::render_store(const prompt_store_stats & ps) {
    char buf[1024];
    snprintf(buf, sizeof(buf),
             "# HELP editspec_prompt_store_bytes past prompts' KV states held in RAM (--cache-ram)\n"
             "# TYPE editspec_prompt_store_bytes gauge\neditspec_prompt_store_bytes %lld\n"
             "# HELP editspec_prompt_store_entries past prompts held in RAM\n"
             "# TYPE editspec_prompt_store_entries gauge\neditspec_prompt_store_entries %d\n"
             "# HELP editspec_prompt_store_saved_total prompts' states kept when their slot moved on\n"
             "# TYPE editspec_prompt_store_saved_total counter\neditspec_prompt_store_saved_total %lld\n"
             "# HELP editspec_prompt_store_restored_total stored states loaded back into a slot\n"
             "# TYPE editspec_prompt_store_restored_total counter\neditspec_prompt_store_restored_total %lld\n",
             (long long) ps.bytes, ps.entries, (long long) ps.saved, (long long) ps.restored);
    return buf;
}

} // namespace editspec
