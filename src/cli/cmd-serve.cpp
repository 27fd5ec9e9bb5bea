// editspec serve: the OpenAI- and llama.cpp-compatible HTTP server (server.h).
#include "cli/commands.h"
#include "editspec/server.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

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
    std::string view = "auto";
    std::vector<std::string> aliases;
    std::string chat_template_file;
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

// the server's own options (the request options: request_runner_params); an exit status
int check_serve_opts(const serve_opts & o) {
    const char * cmd = "serve";
    struct range { const char * name; int64_t value, lo, hi; };
    const range ranges[] = {
        {"--port", o.port, 1, 65535},
        {"--parallel", o.parallel, 1, 64},
        {"--step-tokens", o.step_tokens, 0, 65536},
        {"--queue", o.queue, 0, 4096},
        {"--max-body-mb", (int64_t) o.max_body_mb, 1, 1024},
        {"--max-connections", (int64_t) o.connections.max_total, 1, 8192},
        {"--max-connections-per-client", (int64_t) o.connections.max_per_client, 1, (int64_t) o.connections.max_total},
        {"--request-read-timeout", o.connections.read_deadline_s, 1, 3600},
        {"--max-tokens", o.max_tokens, 1, INT32_MAX},
        {"--max-sessions", o.max_sessions, 0, 64},
        {"--reuse-min", o.reuse_min, 8, 4096},
        {"--drift-max", o.drift_max, -1, INT32_MAX},
        {"--cache-ram", o.cache_ram_mib, 0, 1 << 20},
        {"--pie-refresh", o.pie_refresh, 0, 4096},
    };
    for (const range & r : ranges) {
        if (r.value < r.lo || r.value > r.hi) {
            return fail_input(cmd, std::string(r.name) + " " + std::to_string(r.value) + " out of range [" + std::to_string(r.lo) +
                                       ", " + std::to_string(r.hi) + "]");
        }
    }
    for (const std::string & a : o.aliases) {
        if (a.empty() || a.size() > 256) return fail_input(cmd, "--alias '" + a + "': 1 to 256 characters");
    }
    return 0;
}

// the prompt store fits the machine: the default takes at most half the memory available at start,
// and a budget over all of it is refused (it would end in swap or the OOM killer); an exit status
int fit_cache_ram(serve_opts & o) {
    const int64_t avail = mem_available_mib();
    if (avail < 0) return 0;
    if (o.cache_ram_given && o.cache_ram_mib > avail) {
        return fail_input("serve", "--cache-ram " + std::to_string(o.cache_ram_mib) + " MiB is more than this machine has "
                                   "available (" + std::to_string(avail) + " MiB, /proc/meminfo's MemAvailable); give at most "
                                   "that, or 0");
    }
    if (!o.cache_ram_given && o.cache_ram_mib > avail / 2) {
        o.cache_ram_mib = avail / 2;
        fprintf(stderr, "editspec serve: --cache-ram %lld MiB (half of the %lld MiB available; 8192 where there is more)\n",
                (long long) o.cache_ram_mib, (long long) avail);
    }
    return 0;
}

int run_serve(const serve_opts & o_in) {
    const char * cmd = "serve";
    serve_opts o = o_in;
    if (const int status = check_serve_opts(o); status != 0) return status;
    server_params sp;
    // conflict is a session's baseline: its cells leave their positions, no request may start there
    if (!kv_reuse_parse(o.kv_reuse, sp.prompt_cache.mode) || sp.prompt_cache.mode == KV_REUSE_CONFLICT) {
        return fail_input(cmd, "--kv-reuse '" + o.kv_reuse + "': expected prefix or pie");
    }
    if (const int status = fit_cache_ram(o); status != 0) return status;
    // the models and checks as every request command's (the method is parsed again by server_run)
    method_spec ms;
    if (const int status = request_runner_params(cmd, o.req, ms, true, sp.runner); status != 0) return status;
    if (const int status = parse_prompt_layout(cmd, o.layout, sp.layout); status != 0) return status;
    if (!apply_view_parse(o.view, sp.file_view)) {
        return fail_input(cmd, "--apply-view '" + o.view + "' must be one of " + apply_view_names());
    }
    sp.method = o.req.method;
    sp.prompt_cache.min_block = o.reuse_min;
    sp.prompt_cache.drift_max = o.drift_max;
    sp.prompt_cache.refresh = o.pie_refresh;
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
    sp.aliases = o.aliases;
    if (!o.chat_template_file.empty()) {
        std::ifstream f(o.chat_template_file, std::ios::binary);
        std::ostringstream text;
        text << f.rdbuf();
        if (!f || text.str().empty()) {
            return fail_input(cmd, "--chat-template-file '" + o.chat_template_file + "': cannot read it, or it is empty");
        }
        sp.chat_template = text.str();
    }
    sp.cache_ram_mib = (size_t) o.cache_ram_mib;
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
           " s. SIGTERM/SIGINT: stop accepting, refuse the queue (503), end running generations at their next "
           "token (an apply answers 503, never part of the file), exit 0, or 3 when generations were cut short; a "
           "second signal, or work still running 10 s after the first, exits at once.";
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
    sub->add_option("--chat-template-file", o->chat_template_file,
                    "a Jinja chat template in place of the model's own: every chat request is rendered by it through "
                    "llama.cpp's Jinja engine (requests with tools always are, with the model's template by default)");
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
    sub->add_option("--apply-view", o->view,
                    "how much of the file an apply prompt shows: auto (a constrained apply: none, the file read once as "
                    "the merge is written; one on a session, or unconstrained: file), cached (as auto, and file when a "
                    "slot or stored prompt holds half of the file's prompt: its KV reused, worth it where attention is "
                    "cheap, e.g. a GPU; the answer then depends on the cache), file, windows (its lines within " +
                        std::to_string(APPLY_WINDOW) + " of the snippet's), none")
        ->capture_default_str();
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
