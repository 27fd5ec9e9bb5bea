// editspec serve: the OpenAI- and llama.cpp-compatible HTTP server (server.h).
#include "cli/commands.h"
#include "editspec/server.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace editspec::cli {

namespace {

struct serve_opts {
    request_opts req;
    std::string host = "127.0.0.1";
    int32_t port = 8012;
    std::string api_key;
    int32_t parallel = 1;
    int32_t queue = 32;
    int32_t max_tokens = 4096;
    size_t max_body_mb = 8;
    int32_t max_sessions = 4;
    double session_idle_s = 600.0;
    std::string kv_reuse = "prefix";
    int32_t reuse_min = 32;
    int32_t drift_max = -1;
    int32_t pie_refresh = 0;
    int64_t cache_ram_mib = 8192;
    bool cache_ram_given = false; // --cache-ram on the command line (else the default, bounded below)
    std::string layout = "auto";
    std::vector<std::string> aliases;
    int32_t step_tokens = 0;
    connection_limits connections;
};

// MiB the kernel says a new allocation can take without swapping (/proc/meminfo's MemAvailable),
// -1 where that is not known
int64_t mem_available_mib() {
    FILE * f = fopen("/proc/meminfo", "r");
    if (!f) return -1;
    char line[256];
    long long kib = -1;
    while (fgets(line, sizeof(line), f)) {
        if (sscanf(line, "MemAvailable: %lld kB", &kib) == 1) break;
    }
    fclose(f);
    return kib < 0 ? -1 : (int64_t) (kib >> 10);
}

int run_serve(const serve_opts & o_in) {
    const char * cmd = "serve";
    serve_opts o = o_in;
    if (o.port < 1 || o.port > 65535) {
        return fail_input(cmd, "--port " + std::to_string(o.port) + " out of range [1, 65535]");
    }
    if (o.parallel < 1 || o.parallel > 64) {
        return fail_input(cmd, "--parallel " + std::to_string(o.parallel) + " out of range [1, 64]");
    }
    if (o.step_tokens < 0 || o.step_tokens > 65536) {
        return fail_input(cmd, "--step-tokens " + std::to_string(o.step_tokens) + " out of range [0, 65536]");
    }
    if (o.queue < 0 || o.queue > 4096) {
        return fail_input(cmd, "--queue " + std::to_string(o.queue) + " out of range [0, 4096]");
    }
    if (o.max_body_mb < 1 || o.max_body_mb > 1024) {
        return fail_input(cmd, "--max-body-mb " + std::to_string(o.max_body_mb) + " out of range [1, 1024]");
    }
    if (o.connections.max_total < 1 || o.connections.max_total > 8192) {
        return fail_input(cmd, "--max-connections " + std::to_string(o.connections.max_total) + " out of range [1, 8192]");
    }
    if (o.connections.max_per_client < 1 || o.connections.max_per_client > o.connections.max_total) {
        return fail_input(cmd, "--max-connections-per-client " + std::to_string(o.connections.max_per_client) +
                                   " out of range [1, --max-connections " + std::to_string(o.connections.max_total) + "]");
    }
    if (o.connections.read_deadline_s < 1 || o.connections.read_deadline_s > 3600) {
        return fail_input(cmd, "--request-read-timeout " + std::to_string(o.connections.read_deadline_s) +
                                   " out of range [1, 3600] s");
    }
    if (o.max_tokens < 1) {
        return fail_input(cmd, "--max-tokens must be at least 1");
    }
    if (o.max_sessions < 0 || o.max_sessions > 64) {
        return fail_input(cmd, "--max-sessions " + std::to_string(o.max_sessions) + " out of range [0, 64]");
    }
    prompt_cache_params pc;
    if (!kv_reuse_parse(o.kv_reuse, pc.mode)) {
        return fail_input(cmd, "--kv-reuse '" + o.kv_reuse + "' is not one of: " + kv_reuse_names());
    }
    if (o.reuse_min < 8 || o.reuse_min > 4096) {
        return fail_input(cmd, "--reuse-min " + std::to_string(o.reuse_min) + " out of range [8, 4096]");
    }
    if (o.drift_max < -1) {
        return fail_input(cmd, "--drift-max " + std::to_string(o.drift_max) + " must be -1 (no limit) or more");
    }
    if (o.cache_ram_mib < 0 || o.cache_ram_mib > (1 << 20)) {
        return fail_input(cmd, "--cache-ram " + std::to_string(o.cache_ram_mib) + " out of range [0, 1048576] MiB");
    }
    // the prompt store fits the machine: the default takes at most half the memory available at
    // start, and a budget over all of it is refused (it would end in swap or the OOM killer)
    if (const int64_t avail = mem_available_mib(); avail >= 0) {
        if (o.cache_ram_given && o.cache_ram_mib > avail) {
            return fail_input(cmd, "--cache-ram " + std::to_string(o.cache_ram_mib) + " MiB is more than this machine has available (" +
                                       std::to_string(avail) + " MiB, /proc/meminfo's MemAvailable); give at most that, or 0");
        }
        if (!o.cache_ram_given && o.cache_ram_mib > avail / 2) {
            o.cache_ram_mib = avail / 2;
            fprintf(stderr, "editspec serve: --cache-ram %lld MiB (half of the %lld MiB available; 8192 where there is more)\n",
                    (long long) o.cache_ram_mib, (long long) avail);
        }
    }
    pc.min_block = o.reuse_min;
    pc.drift_max = o.drift_max;
    if (o.pie_refresh < 0 || o.pie_refresh > 4096) {
        return fail_input(cmd, "--pie-refresh " + std::to_string(o.pie_refresh) + " out of range [0, 4096]");
    }
    pc.refresh = o.pie_refresh;
    // the models as every request command resolves them (the method is checked by server_run)
    const request_opts & ro = o.req;
    server_params sp;
    sp.method = ro.method;
    sp.runner.model_path = ro.model.empty() ? default_model_path() : ro.model;
    sp.runner.draft_model_path = ro.draft_model.empty() ? default_draft_model_path(sp.runner.model_path) : ro.draft_model;
    sp.runner.n_ctx = ro.n_ctx;
    sp.runner.n_threads = ro.threads;
    sp.runner.flash_attn = ro.flash_attn;
    sp.runner.draft = ro.draft;
    sp.runner.settings = ro.settings;
    if (const std::string bad = method_settings_check(ro.settings); !bad.empty()) {
        return fail_input(cmd, bad);
    }
    sp.runner.datastore_paths = ro.datastores;
    sp.runner.repo_datastore_paths = ro.repo_datastores;
    if (const int status = check_draft_options(cmd, ro.draft); status != 0) {
        return status;
    }
    sp.host = o.host;
    sp.port = o.port;
    sp.api_key = o.api_key;
    if (sp.api_key.empty()) {
        if (const char * env = std::getenv("EDITSPEC_API_KEY"); env && *env) sp.api_key = env;
    }
    sp.n_parallel = o.parallel;
    sp.step_tokens = o.step_tokens;
    sp.max_queue = o.queue;
    sp.max_sessions = o.max_sessions;
    sp.session_idle_s = o.session_idle_s;
    sp.max_tokens = o.max_tokens;
    for (const std::string & a : o.aliases) {
        if (a.empty() || a.size() > 256) return fail_input(cmd, "--alias '" + a + "': 1 to 256 characters");
    }
    sp.aliases = o.aliases;
    sp.prompt_cache = pc;
    sp.cache_ram_mib = (size_t) o.cache_ram_mib;
    if (const int status = parse_prompt_layout(cmd, o.layout, sp.layout); status != 0) return status;
    sp.max_body = o.max_body_mb << 20;
    sp.connections = o.connections;
    return server_run(sp);
}

// what one request may carry (server.h), for --help
std::string limits_footer() {
    return "Limits of one request (400 past them, naming the field): JSON nesting " + std::to_string(API_JSON_DEPTH_MAX) +
           " levels; " + std::to_string(API_MESSAGES_MAX) + " chat messages; prediction " +
           std::to_string(API_PREDICTION_BYTES_MAX >> 10) + " KiB; " + std::to_string(API_STOP_MAX) + " stop strings of " +
           std::to_string(API_STOP_BYTES_MAX) + " bytes; " + std::to_string(API_INPUT_EXTRA_MAX) + " /infill input_extra chunks; " +
           std::to_string(API_N_CMPL_MAX) + " completions (n_cmpl) per /completion or /infill; " +
           std::to_string(API_EDITS_MAX) + " edits per /v1/sessions/ID/edits; " + std::to_string(SERVER_HEADERS_MAX) +
           " headers of " + std::to_string(SERVER_HEADER_BYTES_MAX >> 10) + " KiB in all (431). A POST body must be JSON "
           "(415), sent whole with Content-Length (411). A connection waits " + std::to_string(connection_limits{}.idle_s) +
           " s for its next request; one read or write waits " + std::to_string(connection_limits{}.io_timeout_s) +
           " s. SIGTERM/SIGINT: stop accepting, refuse the queue, end running generations, exit 0; "
           "a second signal exits at once.";
}

} // namespace

command cmd_serve_add(CLI::App & app) {
    auto o = std::make_shared<serve_opts>();
    CLI::App * sub = app.add_subcommand("serve", "serve OpenAI- and llama.cpp-compatible HTTP endpoints (chat, completions, "
                                                 "Predicted Outputs, /v1/fim/completions, /completion, /infill, "
                                                 "/v1/apply, /v1/code/apply; docs/editors.md)");
    add_request_options(sub, o->req,
                        "decoding method of every request (below; a request with `prediction` adds Reuse)");
    sub->add_option("--host", o->host, "address to listen on (loopback unless told otherwise)")->capture_default_str();
    sub->add_option("--port", o->port, "TCP port")->capture_default_str();
    sub->add_option("--api-key", o->api_key, "require 'Authorization: Bearer KEY' (default: $EDITSPEC_API_KEY, none)");
    sub->add_option("--parallel", o->parallel,
                    "slots: requests decoded at once, all of them in one batched pass a step; each has a KV "
                    "cache of --ctx-size tokens (llama-server's -c is the total: -c 4096 -np 4 gives each 1024)")
        ->capture_default_str();
    sub->add_option("--step-tokens", o->step_tokens,
                    "most tokens one batched pass carries (generating requests' drafts first, then prompt chunks "
                    "of up to 512); 0 = 1024")
        ->capture_default_str();
    sub->add_option("--queue", o->queue, "requests that may wait for a busy slot, in order; past them 503 with Retry-After")
        ->capture_default_str();
    sub->add_option("--max-tokens", o->max_tokens, "most tokens one request may generate")->capture_default_str();
    sub->add_option("--alias", o->aliases,
                    "another name /v1/models lists for the model (repeatable), for clients that switch features on "
                    "by model name, e.g. Continue's `prediction` for gpt-4o-like names");
    sub->add_option("--max-sessions", o->max_sessions, "document sessions (/v1/sessions) held at once, each with its own KV cache")
        ->capture_default_str();
    sub->add_option("--session-idle", o->session_idle_s, "seconds after which an idle session may be evicted by a new one")
        ->capture_default_str();
    sub->add_option("--kv-reuse", o->kv_reuse,
                    "what a request reuses of its slot's KV cache: 'prefix' (the common prefix; exact, the answer "
                    "equals a cold request's) or 'pie' (also every span after an edit, shifted into place as PIE "
                    "does: only the changed tokens are encoded; lossy, usage.prompt_tokens_details reports "
                    "cached, shifted, encoded and stale tokens)")
        ->capture_default_str();
    sub->add_option("--reuse-min", o->reuse_min, "pie: the shortest span of a cached prompt worth shifting, tokens")
        ->capture_default_str();
    sub->add_option("--drift-max", o->drift_max, "pie: most stale tokens (KV computed against an older text) a prompt may "
                                                 "keep; past them it is encoded again from the first (-1 = no limit)")
        ->capture_default_str();
    sub->add_option("--pie-refresh", o->pie_refresh,
                    "pie: tokens at the head of each shifted span encoded again (they attended to the edited text "
                    "nearest)")
        ->capture_default_str();
    sub->add_option("--cache-ram", o->cache_ram_mib,
                    "MiB of RAM for past prompts' KV states: a slot's prompt is kept when a request moves it on, "
                    "and loaded back when a later request reuses more of it than any slot holds (0 = none; "
                    "llama-server's --cache-ram; the default is bounded to half the memory available at start, and "
                    "more than all of it is refused)")
        ->capture_default_str()
        ->each([o](const std::string &) { o->cache_ram_given = true; });
    sub->add_option("--prompt-layout", o->layout, prompt_layout_help())->capture_default_str();
    sub->add_option("--max-body-mb", o->max_body_mb, "largest request body, MiB (chunked, compressed and unmeasured "
                                                      "bodies are refused)")->capture_default_str();
    sub->add_option("--max-connections", o->connections.max_total,
                    "connections held at once; a newcomer past it closes the oldest one still waiting for or sending "
                    "its request, else gets 503 (slow clients cannot starve the server)")
        ->capture_default_str();
    sub->add_option("--max-connections-per-client", o->connections.max_per_client,
                    "connections held at once from one client address, the same way")
        ->capture_default_str();
    sub->add_option("--request-read-timeout", o->connections.read_deadline_s,
                    "seconds a request's head and body may take to arrive, from its first byte (not per byte)")
        ->capture_default_str();
    sub->footer(methods_footer() + "\n" + limits_footer());
    return {sub, [o] { return run_serve(*o); }};
}

} // namespace editspec::cli
