// ggml's RPC backend: workers as devices (--rpc) and this process as a worker (editspec rpc-server).
// Reached through the backend registry's proc addresses, as llama.cpp's tools do, so no RPC header
// or library is linked directly.
#include "editspec/rpc.h"
#include "editspec/engine.h"
#include "editspec/log.h"

#include "ggml-backend.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <netdb.h>
#include <poll.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace editspec {

static std::vector<std::string> g_rpc_servers;

const std::vector<std::string> & engine_rpc_servers() {
    return g_rpc_servers;
}

static bool split_endpoint(const std::string & ep, std::string & host, int & port) {
    const size_t colon = ep.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == ep.size()) return false;
    host = ep.substr(0, colon);
    const std::string p = ep.substr(colon + 1);
    if (p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos) return false;
    port = std::stoi(p);
    return port > 0 && port < 65536;
}

bool rpc_parse_endpoints(const std::string & list, std::vector<std::string> & out, std::string * error) {
    out.clear();
    size_t start = 0;
    while (start <= list.size()) {
        const size_t comma = std::min(list.find(',', start), list.size());
        const std::string ep = list.substr(start, comma - start);
        std::string host;
        int port = 0;
        if (!split_endpoint(ep, host, port)) {
            *error = "--rpc '" + list + "': '" + ep + "' is not HOST:PORT (e.g. 127.0.0.1:50052)";
            return false;
        }
        out.push_back(ep);
        start = comma + 1;
    }
    return !out.empty();
}

// a TCP connection to ep within timeout_ms: ggml's client aborts the process when it cannot connect
static bool tcp_reachable(const std::string & ep, int timeout_ms, std::string * error) {
    std::string host;
    int port = 0;
    split_endpoint(ep, host, port);
    addrinfo hints{};
    hints.ai_family   = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo * res = nullptr;
    const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (rc != 0) {
        *error = "--rpc " + ep + ": cannot resolve '" + host + "': " + gai_strerror(rc);
        return false;
    }
    std::string why = "no address";
    bool ok = false;
    for (addrinfo * a = res; a && !ok; a = a->ai_next) {
        const int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK, a->ai_protocol);
        if (fd < 0) {
            why = strerror(errno);
            continue;
        }
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
            ok = true;
        } else if (errno == EINPROGRESS) {
            pollfd p{fd, POLLOUT, 0};
            int err = 0;
            socklen_t len = sizeof(err);
            if (poll(&p, 1, timeout_ms) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
                ok = true;
            } else {
                why = err ? strerror(err) : "timed out after " + std::to_string(timeout_ms / 1000) + " s";
            }
        } else {
            why = strerror(errno);
        }
        close(fd);
    }
    freeaddrinfo(res);
    if (!ok) *error = "--rpc " + ep + ": no RPC worker answers there (" + why + "); start one with `editspec rpc-server -H HOST -p PORT`";
    return ok;
}

static ggml_backend_reg_t rpc_registry(std::string * error) {
    ggml_backend_reg_t reg = ggml_backend_reg_by_name("RPC");
    if (!reg) *error = "this build has no RPC backend (llama.cpp built without GGML_RPC; scripts/setup-llama.sh builds it)";
    return reg;
}

static void rpc_abort_message(const char * msg) {
    std::string eps;
    for (const auto & e : g_rpc_servers) eps += (eps.empty() ? "" : ",") + e;
    fprintf(stderr, "editspec: fatal: %s(a lost RPC worker ends the process: ggml's RPC client has no recovery; workers: %s)\n",
            msg, eps.c_str());
}

bool engine_add_rpc_servers(const std::string & list, std::string * error) {
    engine_init();
    std::vector<std::string> eps;
    if (!rpc_parse_endpoints(list, eps, error)) return false;
    ggml_backend_reg_t reg = rpc_registry(error);
    if (!reg) return false;
    using add_server_fn = ggml_backend_reg_t (*)(const char *);
    auto add_server = (add_server_fn) ggml_backend_reg_get_proc_address(reg, "ggml_backend_rpc_add_server");
    if (!add_server) {
        *error = "the RPC backend has no ggml_backend_rpc_add_server";
        return false;
    }
    for (const auto & ep : eps) {
        if (!tcp_reachable(ep, 5000, error)) return false;
    }
    ggml_set_abort_callback(rpc_abort_message);
    for (const auto & ep : eps) {
        g_rpc_servers.push_back(ep);
        ggml_backend_reg_t r = add_server(ep.c_str());
        if (!r) {
            *error = "--rpc " + ep + ": the worker reports no device";
            return false;
        }
        ggml_backend_register(r);
        ES_LOG_INFO("rpc: worker %s: %zu device(s)\n", ep.c_str(), ggml_backend_reg_dev_count(r));
    }
    return true;
}

bool engine_rpc_serve(const std::string & host, int port, int n_threads, const std::string & cache_dir,
                      std::string * error) {
    engine_init();
    ggml_backend_reg_t reg = rpc_registry(error);
    if (!reg) return false;
    using start_fn = void (*)(const char *, const char *, size_t, size_t, ggml_backend_dev_t *);
    auto start = (start_fn) ggml_backend_reg_get_proc_address(reg, "ggml_backend_rpc_start_server");
    ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    if (!start || !cpu) {
        *error = !start ? "the RPC backend has no ggml_backend_rpc_start_server" : "no CPU backend";
        return false;
    }
    // the port is checked here: ggml's server exits the process on a bind failure without a reason
    std::string probe_error;
    if (tcp_reachable(host + ":" + std::to_string(port), 1000, &probe_error)) {
        *error = host + ":" + std::to_string(port) + " is in use (another worker or server listens there)";
        return false;
    }
    const std::string ep = host + ":" + std::to_string(port);
    start(ep.c_str(), cache_dir.empty() ? nullptr : cache_dir.c_str(), (size_t) n_threads, 1, &cpu);
    *error = "the RPC server at " + ep + " stopped (could it bind the port?)";
    return false;
}

} // namespace editspec
