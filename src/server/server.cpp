// `editspec serve` (server.h): its set-up (the runner, the slots on a step engine, sessions), signals
// and server_run. The rooms: server-state.h.
#include "server-state.h"
#include "editspec/llama-heads.h"
#include "editspec/log.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <pthread.h>
#include <thread>
#include <unistd.h>

namespace editspec {

namespace {

// the slots: views of one step engine (a KV region or stream of --ctx-size tokens each, every active
// request's tokens in one llama_decode a step; PIE's too: an edit's gaps go in as prompt chunks at their
// own positions). A draft model has a step engine of its own beside it, a head row (llama.cpp's MTP,
// EAGLE-3, DFlash) one head context for every slot that follows each step (llama-heads.h)
bool add_slots(server_state & s, const server_params & p, const runner_params & rp, std::string * error) {
    s.rn.ctx.reset(); // it measured the cost model; the engine holds the slots' KV
    step_params stp;
    stp.n_seq = p.n_parallel;
    stp.per_seq.n_ctx = rp.n_ctx;
    stp.per_seq.n_threads = rp.n_threads;
    stp.per_seq.flash_attn = rp.flash_attn;
    stp.per_seq.type_k = stp.per_seq.type_v = rp.kv_type;
    stp.per_seq.rs_snapshots = rp.rs_snapshots;
    stp.n_step_tokens = p.step_tokens > 0 ? p.step_tokens : 2 * stp.per_seq.n_batch;
    s.engine = step_engine::create(*s.rn.target.model, stp, error);
    if (!s.engine) {
        *error += "; lower --parallel or --ctx-size";
        return false;
    }
    // the engine pads a step (streams) where one pass costs less than the split, and sets the cost
    // model's figure for each step beside its measured time (/metrics)
    s.engine->set_pass_cost([cost = s.rn.cost](std::span<const pass_part> parts) { return cost.t_step(parts); });
    if (s.rn.draft.model) {
        // the draft model's passes batch too: a stream per slot in one context (a context per request
        // decoded each request's draft passes alone, each on its own thread and OpenMP team);
        step_params dp = stp;
        dp.per_seq.type_k = dp.per_seq.type_v = GGML_TYPE_F16; // as the CLI's draft model (--cache-type is the target's)
        dp.n_step_tokens = 0; // n_seq * n_batch: a request's catch-up after its prompt fits beside the others'
        // requests that draft at once come back from the same target step together and stay in step: a
        // short wait finds them, and a request drafting alone (EfficientEdit's Generate phase while the
        // others reuse) is not held 1 ms a pass that costs ~0.6 ms on the shipped draft model
        dp.wait_ms = 0.2;
        // its decodes run on the target engine's thread: one OpenMP team in the process (two teams on
        // the cores put the draft passes at twice their cost in the CLI)
        s.draft_engine = step_engine::create(*s.rn.draft.model, dp, error, s.engine.get());
        if (!s.draft_engine) {
            *error = "draft model '" + s.rn.draft.model->path() + "': " + *error + "; lower --parallel or --ctx-size";
            return false;
        }
        if (!s.rn.draft_cost.empty()) {
            s.draft_engine->set_pass_cost([cost = s.rn.draft_cost](std::span<const pass_part> parts) { return cost.t_step(parts); });
        }
    }
    if (s.method.uses_head()) {
        const auto row = std::find_if(s.method.drafters.begin(), s.method.drafters.end(), [](const std::string & n) {
            const drafter_desc * d = drafter_find(n);
            return d && (d->needs & DRAFTER_NEEDS_HEAD);
        });
        drafter_inputs in;
        in.target = s.rn.target.model.get();
        in.head_model = s.rn.head.model.get();
        in.settings = rp.settings;
        s.head = shared_head_create(*row, *s.engine, in, error);
        if (!s.head) return false;
    }
    for (int32_t i = 0; i < p.n_parallel; i++) {
        s.slots->add(s.engine->view(i), s.engine.get(), i, s.draft_engine ? s.draft_engine->view(i) : nullptr,
                     s.draft_engine.get());
    }
    return true;
}

bool open_state(const server_params & p, server_state & s) {
    std::string error;
    s.params = p;
    runner_params rp = p.runner;
    rp.trees = true;
    if (!method_parse(p.method, s.method, &error)) {
        ES_SAY("serve", "error: %s\n", error.c_str());
        return false;
    }
    s.with_reuse = method_with_original(s.method);
    if (s.method.uses_draft_model() && rp.draft_model_path.empty()) {
        ES_SAY("serve", "error: method '%s' needs a draft model (--draft-model)\n", p.method.c_str());
        return false;
    }
    if (!runner_open(rp, s.rn, &error)) {
        ES_SAY("serve", "error: %s\n", error.c_str());
        return false;
    }
    ES_SAY("serve", "fetching the cost model (measured once per model file and thread count)\n");
    // on a thread of its own: its passes (a measurement, or the check of a cached curve) make an OpenMP
    // team for the thread that computes them, and a team on this thread beside the step engine's would
    // outnumber the cores for the server's life: libgomp's workers then sleep between passes, and waking
    // them cost 30% of the shipped model's requests (perf: the kernel's context switches 11% of the time).
    // libgomp frees a thread's team when the thread ends
    bool costed = false;
    std::thread([&] {
        thread_name_set("es-cost");
        costed = runner_cost(s.rn, &error);
    }).join();
    if (!costed) {
        ES_SAY("serve", "error: %s\n", error.c_str());
        return false;
    }
    s.slots = std::make_unique<slot_pool>((size_t) p.max_queue, p.prompt_cache, p.cache_ram_mib << 20);
    if (!add_slots(s, p, rp, &error)) {
        ES_SAY("serve", "error: %s\n", error.c_str());
        return false;
    }
    s.slots->start();
    session_store_params ssp;
    ssp.max_sessions = p.max_sessions;
    ssp.idle_s = p.session_idle_s;
    ssp.compute = s.engine.get();
    s.sessions = std::make_unique<session_store>(s.rn, ssp);
    s.model_id = std::filesystem::path(p.runner.model_path).filename().string();
    if (!chat_templates_load(*s.rn.target.model, p.chat_template, s.chat, s.chat_error)) {
        if (!p.chat_template.empty()) {
            ES_SAY("serve", "error: --chat-template-file: %s\n", s.chat_error.c_str());
            return false;
        }
        ES_SAY("serve", "warning: requests with tools will be refused: %s\n", s.chat_error.c_str());
    }
    return true;
}

// ----------------------------------------------------------------------------
// signals, on a thread of their own (sigwait), watched from the start: a signal while the model
// loads exits at once; once serving, the first SIGINT / SIGTERM stops accepting, refuses the queue,
// ends running generations at their next token and leaves the process SHUTDOWN_GRACE_S to exit on
// its own (3 when it cut generations short, or ran out of that time); a second signal exits at once.

constexpr int SHUTDOWN_GRACE_S = 10;

// what the signal thread stops; set while serving (the thread outlives server_run's locals)
std::atomic<server_state *> g_state{nullptr};
std::atomic<httplib::Server *> g_server{nullptr};

void signals_watch() {
    static sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr); // every thread started after this inherits the mask
    std::thread([] {
        int sig = 0;
        if (sigwait(&set, &sig) != 0) return;
        server_state * s = g_state.load();
        httplib::Server * svr = g_server.load();
        if (!s || !svr) {
            ES_SAY("serve", "%s before serving: exiting\n", strsignal(sig));
            _exit(0);
        }
        ES_SAY("serve", "%s: stopping (a second signal exits at once)\n", strsignal(sig));
        s->stopping = true;
        s->slots->close();
        s->watcher->cancel_all(); // every running request stops within a step
        svr->stop();
        std::thread([] {
            std::this_thread::sleep_for(std::chrono::seconds(SHUTDOWN_GRACE_S));
            ES_SAY("serve", "still busy %d s after the signal: exiting\n", SHUTDOWN_GRACE_S);
            _exit(3);
        }).detach();
        if (sigwait(&set, &sig) != 0) return;
        ES_SAY("serve", "%s again: exiting now\n", strsignal(sig));
        _exit(128 + sig);
    }).detach();
}

} // namespace

int server_run(const server_params & p) {
    signals_watch();
    // named while it sets up: a pass computed on it would leave OpenMP workers of this name for the
    // server's life (test-server counts them: none); its own name back before it serves
    const std::string name = thread_name_get();
    thread_name_set("editspec-setup");
#ifdef __GLIBC__
    // a fixed mmap threshold: glibc raises it to each large block freed, and then the per-request
    // buffers (logits, prompt states, sessions' contexts) come from arenas that never shrink: RSS
    // less the prompt store grew 48% in the soak's two minutes, 1% with this
    // (docs/results/issue58-hostile)
    mallopt(M_MMAP_THRESHOLD, 128 << 10);
#endif
    server_state s;
    if (!open_state(p, s)) return 2;
    // connections counted and bounded, a deadline for each request's head and body (server-connections.h)
    guarded_server svr(p.connections);
    s.http = &svr;
    svr.set_payload_max_length(p.max_body);
    // a restarted server binds at once although the last one's connections are in TIME_WAIT
    socket_t listen_sock = INVALID_SOCKET;
    svr.set_socket_options([&listen_sock](socket_t sock) {
        int yes = 1;
        setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
        listen_sock = sock;
    });
    add_hooks(svr, s);
    add_routes(svr, s);
    if (!svr.bind_to_port(p.host.c_str(), p.port)) {
        ES_SAY("serve", "error: cannot listen on %s:%d (in use, or not an address of this machine)\n",
                p.host.c_str(), p.port);
        return 1;
    }
    // httplib listens with a backlog of 5: a burst of clients on a busy machine found it full and were
    // dropped unanswered; a listening socket takes a new backlog from a second listen()
    if (listen_sock != INVALID_SOCKET) listen(listen_sock, SOMAXCONN);
    const bool loopback = p.host == "127.0.0.1" || p.host == "localhost" || p.host == "::1";
    if (!loopback && p.api_key.empty()) {
        ES_SAY("serve", "warning: listening on %s without --api-key: anyone who can reach this address can "
                        "use the model\n", p.host.c_str());
    }
    g_state = &s;
    g_server = &svr;
    ES_SAY("serve", "listening on http://%s:%d (%d slot%s, queue %d, method %s; with a prediction %s)\n",
            p.host.c_str(), p.port, p.n_parallel, p.n_parallel == 1 ? "" : "s", p.max_queue, s.method.name.c_str(),
            s.with_reuse.name.c_str());
    thread_name_set(name.empty() ? "editspec" : name.c_str());
    const bool ok = svr.listen_after_bind();
    s.stopping = true;
    s.slots->stop();
    s.sessions.reset();
    // a signal from here on finds nothing to stop: the process is leaving
    g_server = nullptr;
    g_state = nullptr;
    if (!ok) return 1;
    if (const int64_t cut = s.cut_by_stop.load(); cut > 0) {
        ES_SAY("serve", "stopped: %lld generation%s cut short before its end\n", (long long) cut, cut == 1 ? " was" : "s were");
        return 3;
    }
    return 0;
}

} // namespace editspec
