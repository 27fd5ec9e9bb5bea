// editspec rpc-server: this machine's CPU as a worker for another process's --rpc (ggml's RPC
// protocol; llama.cpp's ggml-rpc-server of the pinned commit speaks the same).
#include "cli/commands.h"
#include "editspec/rpc.h"

#include <memory>
#include <thread>

namespace editspec::cli {

namespace {

struct rpc_server_opts {
    std::string host = "127.0.0.1";
    int32_t port = 50052;
    int32_t threads = 0;
    std::string cache;
};

bool is_loopback(const std::string & host) {
    return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

int run_rpc_server(const rpc_server_opts & o) {
    const char * cmd = "rpc-server";
    if (o.port < 1 || o.port > 65535) return fail_input(cmd, "--port " + std::to_string(o.port) + " out of range [1, 65535]");
    if (o.threads < 0 || o.threads > 1024) return fail_input(cmd, "--threads " + std::to_string(o.threads) + " out of range [0, 1024]");
    const int n_threads = o.threads > 0 ? o.threads : (int) std::max(1u, std::thread::hardware_concurrency());
    if (!is_loopback(o.host)) {
        fprintf(stderr, "editspec rpc-server: warning: listening on %s: the RPC protocol has no authentication and "
                        "lets any client that reaches the port run graphs and write memory here; use a private network\n",
                o.host.c_str());
    }
    fprintf(stderr, "editspec rpc-server: worker at %s:%d, %d threads; give the main process --rpc %s:%d\n",
            o.host.c_str(), o.port, n_threads, o.host.c_str(), o.port);
    std::string err;
    engine_rpc_serve(o.host, o.port, n_threads, o.cache, &err); // returns only when it cannot serve
    return fail_runtime(cmd, err);
}

} // namespace

command cmd_rpc_server_add(CLI::App & app) {
    auto o = std::make_shared<rpc_server_opts>();
    CLI::App * sub = app.add_subcommand(
        "rpc-server", "serve this machine's CPU to another editspec's --rpc: it holds and runs the layers given to it");
    sub->add_option("-H,--host", o->host, "address to listen on (loopback unless told: the protocol has no authentication)")
        ->capture_default_str();
    sub->add_option("-p,--port", o->port, "port")->capture_default_str();
    sub->add_option("-t,--threads", o->threads, "threads of the CPU backend (0 = every core)")->capture_default_str();
    sub->add_option("-c,--cache", o->cache, "directory that keeps large tensors sent before, by hash, so a reload skips the transfer");
    sub->footer("One main process at a time; the worker serves until killed. Example, two workers on one host:\n"
                "  editspec rpc-server -p 50052 -t 1 & editspec rpc-server -p 50053 -t 1 &\n"
                "  editspec complete -m model.gguf --rpc 127.0.0.1:50052,127.0.0.1:50053 -p 'def f():'");
    return {sub, [o] { return run_rpc_server(*o); }};
}

} // namespace editspec::cli
