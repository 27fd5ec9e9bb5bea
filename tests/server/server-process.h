// `editspec serve` as its own process on loopback, for the server's tests (test-server.cpp,
// test-hostile.cpp), and a JSON POST helper.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <random>
#include <spawn.h>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <vector>

extern char ** environ;

namespace editspec::test {

using json = nlohmann::json;

inline const std::string k_target = std::string(EDITSPEC_MODELS) + "/editspec-target.gguf";

// `editspec serve` on a free port (the shipped target, or extra's "-m"), stopped (SIGTERM) at scope exit
struct server_process {
    pid_t pid = -1;
    int port = 0;

    explicit server_process(std::vector<std::string> extra) {
        // the server answers an oversized body before reading it: a client still writing it must see
        // EPIPE, not die of SIGPIPE (and leave the server running)
        signal(SIGPIPE, SIG_IGN);
        std::mt19937 rng(std::random_device{}());
        for (int attempt = 0; attempt < 5 && pid < 0; attempt++) {
            port = 20000 + (int) (rng() % 20000);
            // the shipped target unless extra names a model
            const bool own_model = std::find(extra.begin(), extra.end(), "-m") != extra.end();
            const bool own_threads = std::find(extra.begin(), extra.end(), "-t") != extra.end(); // else 1
            std::vector<std::string> args = {EDITSPEC_BIN, "serve", "--port", std::to_string(port)};
            if (!own_threads) args.insert(args.end(), {"-t", "1"});
            if (!own_model) args.insert(args.end(), {"-m", k_target});
            args.insert(args.end(), extra.begin(), extra.end());
            std::vector<char *> argv;
            for (std::string & a : args) argv.push_back(a.data());
            argv.push_back(nullptr);
            if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) pid = -1;
            if (pid > 0 && !wait_up()) stop();
        }
    }
    ~server_process() { stop(); }
    // SIGTERM, then the exit status as waitpid reports it (-1 when not running)
    int stop() {
        int st = -1;
        if (pid > 0) {
            kill(pid, SIGTERM);
            waitpid(pid, &st, 0);
            pid = -1;
        }
        return st;
    }
    bool wait_up() {
        httplib::Client c("127.0.0.1", port);
        for (int i = 0; i < 300; i++) {
            if (auto r = c.Get("/health"); r && r->status == 200) return true;
            int st = 0;
            if (waitpid(pid, &st, WNOHANG) == pid) { pid = -1; return false; } // exited (port taken?)
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        return false;
    }
    httplib::Client client() const {
        httplib::Client c("127.0.0.1", port);
        c.set_read_timeout(120, 0);
        return c;
    }
};

// a JSON POST; *status is the HTTP status, or -1 when no response came (a refused connection, a
// server that died): never the previous call's status, so `EXPECT_EQ(status, 400)` fails on a dead server
inline json post(const server_process & s, const std::string & path, const std::string & body, int * status = nullptr,
          const httplib::Headers & headers = {}) {
    auto c = s.client();
    auto r = c.Post(path.c_str(), headers, body, "application/json");
    if (status) *status = r ? r->status : -1;
    if (!r) return json{{"transport_error", httplib::to_string(r.error())}};
    return json::parse(r->body, nullptr, false);
}

} // namespace editspec::test
