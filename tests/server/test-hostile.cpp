// An adversarial client against a live `editspec serve` (shipped model, loopback): malformed,
// oversized, wrongly typed, slow and concurrent requests to every endpoint. After every case /health
// answers within 5 s; a client error is a 4xx JSON body in OpenAI's schema, never a 5xx and never a
// 200; the greedy answer is the same after the battery as before it; SIGTERM exits 0.
#include "common/test-util.h"
#include "server/server-process.h"
#include "editspec/server.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <mutex>
#include <chrono>
#include <thread>

using json = nlohmann::json;
using namespace editspec;
using test::server_process;

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
    return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// a connected TCP socket to the server (-1 on failure), reads and writes time out after 10 s
int connect_to(int port) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t) port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval tv{10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, (sockaddr *) &a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

bool send_all(int fd, const std::string & data) {
    size_t at = 0;
    while (at < data.size()) {
        const ssize_t n = send(fd, data.data() + at, data.size() - at, MSG_NOSIGNAL);
        if (n <= 0) return false;
        at += (size_t) n;
    }
    return true;
}

// sends raw bytes, reads the response's status line: the status, 0 when the connection closed first
int raw_status(int port, const std::string & request, std::string * response = nullptr) {
    const int fd = connect_to(port);
    if (fd < 0) return -1;
    send_all(fd, request); // the server may answer and close before it has read everything
    std::string got;
    char buf[4096];
    while (got.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n <= 0) break;
        got.append(buf, (size_t) n);
    }
    close(fd);
    if (response) *response = got;
    if (got.rfind("HTTP/1.1 ", 0) != 0 || got.size() < 12) return 0;
    return std::stoi(got.substr(9, 3));
}

std::string raw_post(const std::string & path, const std::string & body, const std::string & extra_headers = "",
                     const std::string & type = "application/json") {
    return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: " + type + "\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n" + extra_headers + "\r\n" + body;
}

// reads a stream until n "data: " events arrived (n tokens generated); false when it ended first
bool read_events(int fd, int n) {
    std::string got;
    char buf[4096];
    size_t events = 0, at = 0;
    while (events < (size_t) n) {
        const ssize_t k = recv(fd, buf, sizeof(buf), 0);
        if (k <= 0) return false;
        got.append(buf, (size_t) k);
        while ((at = got.find("data: ", at)) != std::string::npos) {
            events++;
            at += 6;
        }
        at = got.size() > 6 ? got.size() - 6 : 0;
    }
    return true;
}

// /health answers 200 within 5 s
::testing::AssertionResult health_ok(const server_process & s) {
    httplib::Client c("127.0.0.1", s.port);
    c.set_connection_timeout(5, 0);
    c.set_read_timeout(5, 0);
    const auto t0 = clock_type::now();
    auto r = c.Get("/health");
    const double dt = seconds_since(t0);
    if (!r) return ::testing::AssertionFailure() << "/health: " << httplib::to_string(r.error());
    if (r->status != 200 || dt > 5.0) return ::testing::AssertionFailure() << "/health: " << r->status << " after " << dt << " s";
    return ::testing::AssertionSuccess();
}

// a client error: the status asked for (or any 4xx when want == 0), with an OpenAI error body
::testing::AssertionResult client_error(int status, const std::string & body, int want = 0) {
    if (status < 400 || status > 499 || (want != 0 && status != want)) {
        return ::testing::AssertionFailure() << "status " << status << " (want " << (want ? std::to_string(want) : "4xx")
                                             << "): " << body.substr(0, 300);
    }
    const json j = json::parse(body, nullptr, false);
    if (!j.is_object() || !j.contains("error") || !j["error"].contains("message") || !j["error"]["message"].is_string()) {
        return ::testing::AssertionFailure() << "status " << status << " without an OpenAI error body: " << body.substr(0, 300);
    }
    return ::testing::AssertionSuccess();
}

std::string nested(size_t depth) {
    return std::string(depth, '[') + std::string(depth, ']');
}

json chat(const std::string & content) {
    return {{"messages", {{{"role", "user"}, {"content", content}}}}, {"max_tokens", 4}};
}

const std::string k_greedy = R"({"prompt": "def add(a, b):\n", "n_predict": 24})";

// a prompt the shipped model continues to its n_predict ("1, 2, 3, ..." repeats forever); a prompt
// like "def f(x):\n" ends at EOS at once, and a stream of it has nothing left to cut short
const std::string k_endless = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10,";

// session ids as capabilities: "sess-" and 32 hex digits, all distinct, and far apart as random
// 128-bit numbers are (each pair differs in 64 +- 6 bits; a counter, a clock or a short random
// part differs in a few): no id says anything about the next
::testing::AssertionResult ids_unguessable(const std::vector<std::string> & ids) {
    std::vector<std::array<uint64_t, 2>> bits;
    for (const std::string & id : ids) {
        if (id.size() != 37 || id.rfind("sess-", 0) != 0 || id.find_first_not_of("0123456789abcdef", 5) != std::string::npos) {
            return ::testing::AssertionFailure() << "'" << id << "' is not sess- and 32 hex digits";
        }
        bits.push_back({std::stoull(id.substr(5, 16), nullptr, 16), std::stoull(id.substr(21, 16), nullptr, 16)});
    }
    int ones = 0;
    for (size_t i = 0; i < bits.size(); i++) {
        ones += __builtin_popcountll(bits[i][0]) + __builtin_popcountll(bits[i][1]);
        for (size_t j = 0; j < i; j++) {
            const int d = __builtin_popcountll(bits[i][0] ^ bits[j][0]) + __builtin_popcountll(bits[i][1] ^ bits[j][1]);
            // P(d < 24) for two random ids: about 1e-12
            if (d < 24) return ::testing::AssertionFailure() << ids[j] << " and " << ids[i] << " differ in " << d << " of 128 bits";
        }
    }
    const double frac = (double) ones / (128.0 * (double) bits.size());
    if (frac < 0.4 || frac > 0.6) return ::testing::AssertionFailure() << "a fraction " << frac << " of the ids' bits is set";
    return ::testing::AssertionSuccess();
}

} // namespace

TEST(hostile, every_endpoint_survives_and_answers_client_errors_with_4xx) {
    server_process s({"--max-sessions", "1", "--session-idle", "1", "--parallel", "1", "--queue", "2", "--ctx-size", "1024"});
    ASSERT_GT(s.pid, 0);
    int status = 0;
    const json before = test::post(s, "/completion", k_greedy, &status);
    ASSERT_EQ(status, 200) << before.dump();

    // bodies that are JSON but wrong: each endpoint, each a 4xx naming the problem
    struct bad_case {
        const char * path;
        std::string body;
    };
    const std::string big_prediction(API_PREDICTION_BYTES_MAX + 1, 'x');
    json many_messages = chat("x");
    for (int i = 0; i < 1100; i++) many_messages["messages"].push_back({{"role", "user"}, {"content", "x"}});
    json many_stops = chat("x");
    many_stops["stop"] = json::array();
    for (int i = 0; i < 17; i++) many_stops["stop"].push_back("s" + std::to_string(i));
    const std::vector<bad_case> cases = {
        // not JSON, not an object, nested past the limit (a recursive copy used to overflow the stack)
        {"/v1/chat/completions", "{"}, {"/v1/chat/completions", "[1, 2]"}, {"/completion", "\"x\""},
        {"/v1/sessions/x/edits", "{\"edits\": " + nested(600000) + "}"},
        {"/v1/chat/completions", "{\"messages\": " + nested(100000) + "}"}, {"/v1/apply", nested(70)},
        {"/v1/sessions", nested(65)},
        // wrong types (nlohmann type errors used to be 500s)
        {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}], "prediction": {"type": 5, "content": "x"}})"},
        {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}], "prediction": {"type": "content", "content": "x"}, "logprobs": "yes"})"},
        {"/v1/chat/completions", R"({"messages": "hello"})"}, {"/v1/chat/completions", R"({"messages": []})"},
        {"/v1/chat/completions", R"({"messages": [{"role": 1, "content": "x"}]})"},
        {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": 5}]})"},
        {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": "10"})"},
        {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}], "stop": 7})"},
        {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}], "stream_options": "yes"})"},
        {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}], "temperature": -1})"},
        {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}], "top_p": 0})"},
        {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}], "n": 2})"},
        {"/v1/completions", R"({"prompt": 5})"}, {"/v1/completions", R"({"prompt": "x", "suffix": 3})"},
        // numbers out of range, never truncated (2^64 - 1 used to read as -1, 2^32 as token 0)
        {"/completion", R"({"prompt": "x", "n_predict": 18446744073709551615})"},
        {"/completion", R"({"prompt": [4294967296]})"}, {"/completion", R"({"prompt": [100000000]})"},
        {"/completion", R"({"prompt": [-1]})"}, {"/completion", R"({"prompt": "x", "seed": 1e300})"},
        {"/completion", R"({"prompt": "x", "response_fields": 3})"}, {"/completion", R"({})"},
        {"/completion", R"({"prompt": "x", "n_cmpl": 9})"}, {"/completion", R"({"prompt": "x", "n_cmpl": 0})"},
        {"/completion", R"({"prompt": "x", "n_cmpl": 2, "stream": true})"}, {"/completion", R"({"prompt": "x", "seed": "7"})"},
        {"/completion", R"({"prompt": "x", "n_indent": -1})"}, {"/completion", R"({"prompt": "x", "t_max_predict_ms": -5})"},
        {"/infill", R"({"input_prefix": "x", "input_extra": "y"})"},
        {"/v1/apply", R"({"code": 5, "update": "x"})"}, {"/v1/apply", R"({"code": "x"})"},
        {"/v1/apply", R"({"code": "x", "update": "y", "stream": true})"},
        {"/v1/apply", R"({"code": "x", "update": "y", "constrain": true, "temperature": 0.5})"},
        {"/v1/code/apply", R"({"initial_code": 5, "edit_snippet": "x"})"}, {"/v1/code/apply", R"({"initial_code": "x"})"},
        {"/v1/code/apply", R"({"initial_code": "x", "edit_snippet": " "})"},
        // llama-server's token endpoints
        {"/tokenize", R"({"content": 5})"}, {"/tokenize", R"({})"}, {"/tokenize", R"({"content": "x", "add_special": "yes"})"},
        {"/detokenize", R"({"tokens": [4294967296]})"}, {"/detokenize", R"({"tokens": [-1]})"},
        {"/detokenize", R"({"tokens": "1 2"})"}, {"/detokenize", R"({"tokens": [1.5]})"}, {"/detokenize", "[1]"},
        // sessions
        {"/v1/sessions", R"({"text": 5})"}, {"/v1/sessions", R"({"text": "x", "strategy": 5})"},
        {"/v1/sessions", R"({"text": "x", "strategy": "fast"})"}, {"/v1/sessions", R"({"text": "x", "drift_max": "x"})"},
        {"/v1/sessions", R"({"text": "x", "drift_max": 18446744073709551615})"},
        {"/v1/sessions/none/edits", R"({"offset": -1})"}, {"/v1/sessions/none/edits", R"({"edits": "x"})"},
        {"/v1/sessions/none/edits", R"({"edits": []})"}, {"/v1/sessions/none/complete", R"({"max_tokens": 1099511627776})"},
        {"/v1/sessions/none/complete", R"({"max_tokens": 0})"}, {"/v1/sessions/none/complete", "{}"},
        // oversized within the body limit
        {"/v1/chat/completions", json{{"messages", {{{"role", "user"}, {"content", "x"}}}},
                                      {"prediction", {{"type", "content"}, {"content", big_prediction}}}}.dump()},
        {"/v1/chat/completions", many_messages.dump()}, {"/v1/chat/completions", many_stops.dump()},
        {"/completion", json{{"prompt", std::string(3 << 20, 'x')}}.dump()}, // over the context
    };
    for (const bad_case & c : cases) {
        SCOPED_TRACE(std::string(c.path) + " " + c.body.substr(0, 120));
        auto cl = s.client();
        auto r = cl.Post(c.path, c.body, "application/json");
        ASSERT_TRUE(r) << httplib::to_string(r.error());
        EXPECT_TRUE(client_error(r->status, r->body));
        ASSERT_TRUE(health_ok(s));
    }

    // refused on their headers, before the body is read
    const std::string body = chat("x").dump();
    struct raw_case {
        std::string request;
        int want;
    };
    std::string many_headers;
    for (int i = 0; i < 200; i++) many_headers += "X-H" + std::to_string(i) + ": v\r\n";
    const std::vector<raw_case> raw = {
        // chunked: httplib checked only Content-Length against --max-body-mb
        {"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
             std::string("1000\r\n") + std::string(4096, ' ') + "\r\n", 411},
        // compressed: 8 MB of gzip inflates to gigabytes
        {raw_post("/v1/chat/completions", body, "Content-Encoding: gzip\r\n"), 415},
        {raw_post("/v1/chat/completions", body, "Content-Encoding: br\r\n"), 415},
        // no length: read until the client closes
        {"POST /v1/apply HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\r\n{\"code\": \"", 411},
        {raw_post("/v1/chat/completions", body, "", "text/plain"), 415},  // a web page's simple POST
        {raw_post("/v1/sessions", body, "", "application/x-www-form-urlencoded"), 415},
        {"POST /completion HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 999999999999\r\n\r\n{", 413},
        {"POST /completion HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: -5\r\n\r\n{", 400},
        {raw_post("/completion", k_greedy, many_headers), 431},
        {"GET /v1/nowhere HTTP/1.1\r\nHost: x\r\n\r\n", 404},
        {"BREW /health HTTP/1.1\r\nHost: x\r\n\r\n", 0},
        {"GET /" + std::string(20000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n", 414},
        {"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 not http at all\r\n\r\n", 0}, // TLS to a plain port
    };
    for (const raw_case & c : raw) {
        SCOPED_TRACE(c.request.substr(0, 100));
        std::string resp;
        const int st = raw_status(s.port, c.request, &resp);
        if (c.want != 0) EXPECT_EQ(st, c.want) << resp.substr(0, 300);
        else EXPECT_TRUE(st == 0 || (st >= 400 && st <= 499)) << resp.substr(0, 300);
        ASSERT_TRUE(health_ok(s));
    }
    // an oversized body with its length: read and dropped, then 413 with a JSON body
    {
        auto c = s.client();
        auto r = c.Post("/v1/chat/completions", std::string(9 << 20, ' '), "application/json");
        ASSERT_TRUE(r) << httplib::to_string(r.error());
        EXPECT_TRUE(client_error(r->status, r->body, 413));
        ASSERT_TRUE(health_ok(s));
    }

    // a document session that cannot open evicts nobody; ids are unguessable
    json sess = test::post(s, "/v1/sessions", json{{"text", "x = 1\n"}}.dump(), &status);
    ASSERT_EQ(status, 200) << sess.dump();
    const std::string id = sess["id"];
    std::this_thread::sleep_for(std::chrono::milliseconds(1200)); // past --session-idle 1
    json r = test::post(s, "/v1/sessions", json{{"text", std::string(20000, 'y') + " z\n"}}.dump(), &status);
    EXPECT_TRUE(client_error(status, r.dump(), 400));
    r = test::post(s, "/v1/sessions/" + id + "/edits", json{{"offset", 0}, {"delete", 0}, {"insert", "# a\n"}}.dump(), &status);
    EXPECT_EQ(status, 200) << r.dump();
    // an edit outside the document, a pure insertion at 0 (no BOS needed here) and a delete of it all
    r = test::post(s, "/v1/sessions/" + id + "/edits", json{{"offset", 1000000}, {"delete", 1}}.dump(), &status);
    EXPECT_TRUE(client_error(status, r.dump(), 400));
    auto cl = s.client();
    auto del = cl.Delete(("/v1/sessions/" + id).c_str());
    ASSERT_TRUE(del);
    EXPECT_EQ(del->status, 200);
    ASSERT_TRUE(health_ok(s));
    // ids are unguessable: 32 more sessions, each opened and closed (--max-sessions 1)
    {
        std::vector<std::string> ids = {id};
        for (int i = 0; i < 32; i++) {
            const json o = test::post(s, "/v1/sessions", json{{"text", "x = " + std::to_string(i) + "\n"}}.dump(), &status);
            ASSERT_EQ(status, 200) << o.dump();
            ids.push_back(o["id"]);
            auto d = cl.Delete(("/v1/sessions/" + ids.back()).c_str());
            ASSERT_TRUE(d && d->status == 200) << ids.back();
        }
        EXPECT_TRUE(ids_unguessable(ids));
    }

    // slow clients: 40 connections trickle headers; /health answers within 1 s throughout
    {
        std::vector<int> fds;
        for (int i = 0; i < 40; i++) {
            const int fd = connect_to(s.port);
            ASSERT_GE(fd, 0);
            send_all(fd, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n");
            fds.push_back(fd);
        }
        double worst = 0.0;
        for (int round = 0; round < 4; round++) {
            for (int fd : fds) send_all(fd, "X-Slow: 1\r\n");
            const auto t0 = clock_type::now();
            EXPECT_TRUE(health_ok(s));
            worst = std::max(worst, seconds_since(t0));
            std::this_thread::sleep_for(std::chrono::milliseconds(500));
        }
        // the bar is 1 s on a quiet machine (measured: a few ms); ctest runs another test beside this
        // one, so the check here only has to tell an answer from a blocked server (5 s and more)
        EXPECT_LT(worst, 3.0);
        RecordProperty("health_worst_ms_under_40_slow_clients", std::to_string((int) (worst * 1000)));
        for (int fd : fds) close(fd);
    }

    // concurrent: 24 clients at once on one slot and a queue of 2: each is answered 200 or 503 with
    // Retry-After, never 500, and /health answers meanwhile (a client that leaves: the test below)
    {
        std::atomic<int> ok{0}, busy{0}, other{0};
        std::mutex mu;
        std::string others; // what the others got
        std::vector<std::thread> th;
        for (int i = 0; i < 24; i++) {
            th.emplace_back([&, i] {
                auto c = s.client();
                json b = {{"prompt", "def f" + std::to_string(i) + "(x):\n"}, {"n_predict", 48}};
                const auto t0 = clock_type::now();
                auto res = c.Post("/completion", b.dump(), "application/json");
                const double dt = seconds_since(t0);
                if (res && res->status == 200) ok++;
                else if (res && res->status == 503 && res->has_header("Retry-After") &&
                         json::parse(res->body, nullptr, false).contains("error")) busy++;
                else {
                    other++;
                    std::lock_guard<std::mutex> lock(mu);
                    others += res ? std::to_string(res->status) + " " + res->body.substr(0, 200) + "\n"
                                  : "transport error: " + httplib::to_string(res.error()) + " after " +
                                        std::to_string(dt) + " s\n";
                }
            });
        }
        EXPECT_TRUE(health_ok(s));
        for (std::thread & t : th) t.join();
        EXPECT_EQ(other.load(), 0) << others;
        EXPECT_GE(ok.load(), 3);
        RecordProperty("concurrent_200", std::to_string(ok.load()));
        RecordProperty("concurrent_503", std::to_string(busy.load()));
        ASSERT_TRUE(health_ok(s));
    }

    // after all of it: the same greedy answer, and every response counted in /metrics
    const json after = test::post(s, "/completion", k_greedy, &status);
    ASSERT_EQ(status, 200) << after.dump();
    EXPECT_EQ(after["content"], before["content"]);
    auto m = cl.Get("/metrics");
    ASSERT_TRUE(m);
    EXPECT_NE(m->body.find("path=\"/v1/chat/completions\",status=\"415\""), std::string::npos) << m->body;
    EXPECT_NE(m->body.find("path=\"/completion\",status=\"200\""), std::string::npos) << m->body;

    // SIGTERM while a generation streams: it ends at its next token, and the process exits 3 (it cut a
    // generation short) well within the watchdog's 10 s
    const int fd = connect_to(s.port);
    send_all(fd, raw_post("/completion", json{{"prompt", k_endless}, {"n_predict", 900}, {"stream", true}}.dump()));
    EXPECT_TRUE(read_events(fd, 3)) << "the stream did not start";
    const auto t0 = clock_type::now();
    const int st = s.stop();
    const double stop_s = seconds_since(t0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 3) << "wait status " << st;
    EXPECT_LT(stop_s, 5.0);
    RecordProperty("sigterm_exit_s", std::to_string(stop_s));
    close(fd);
}

// A streaming client that leaves mid-generation frees its slot: on one slot, the next request is
// served at once, not after the abandoned generation's 2000 tokens (autoregressive: seconds)
TEST(hostile, a_client_that_leaves_frees_the_slot) {
    server_process s({"--parallel", "1", "--queue", "2", "--method", "ar", "--ctx-size", "2048"});
    ASSERT_GT(s.pid, 0);
    const int fd = connect_to(s.port);
    ASSERT_GE(fd, 0);
    send_all(fd, raw_post("/completion", json{{"prompt", k_endless}, {"n_predict", 2000}, {"stream", true}}.dump()));
    ASSERT_TRUE(read_events(fd, 3)) << "the stream did not start";
    close(fd); // leaves with ~2000 tokens to go
    int status = 0;
    const auto t0 = clock_type::now();
    const json r = test::post(s, "/completion", R"({"prompt": "def add(a, b):\n", "n_predict": 8})", &status);
    const double dt = seconds_since(t0);
    ASSERT_EQ(status, 200) << r.dump();
    // measured: ~0.1 s; the slot still held: the rest of 2000 tokens, ~8 s on a quiet machine
    EXPECT_LT(dt, 2.5) << "the next request waited " << dt << " s for the one slot";
    RecordProperty("next_request_ms_after_a_client_left", std::to_string((int) (dt * 1000)));
    // the server's own count agrees: no request waited for the slot
    auto c = s.client();
    auto m = c.Get("/metrics");
    ASSERT_TRUE(m);
    const std::string key = "\neditspec_queue_wait_seconds_sum ";
    const size_t at = m->body.find(key);
    ASSERT_NE(at, std::string::npos) << m->body;
    const double waited = std::stod(m->body.substr(at + key.size()));
    EXPECT_LT(waited, 2.0) << "requests waited " << waited << " s for a slot in all";
}

// Clients that leave while their request waits for the slot or while it decodes, not streamed: the
// server's one client watcher sees each close at once (no timer), drops a queued request from the queue
// and cancels a running one; /metrics counts both, and the next request is served at once.
TEST(hostile, clients_that_leave_queued_or_decoding_are_dropped_at_once) {
    server_process s({"--parallel", "1", "--queue", "4", "--method", "ar", "--ctx-size", "2048"});
    ASSERT_GT(s.pid, 0);
    auto metric = [&](const std::string & key) -> double {
        auto c = s.client();
        auto m = c.Get("/metrics");
        if (!m) return -1.0;
        const size_t at = m->body.find("\n" + key + " ");
        return at == std::string::npos ? -1.0 : std::stod(m->body.substr(at + key.size() + 2));
    };
    // waits up to `limit` s for a metric to reach `want`; the seconds it took, or -1
    auto reaches = [&](const std::string & key, double want, double limit) -> double {
        const auto t0 = clock_type::now();
        while (seconds_since(t0) < limit) {
            if (metric(key) >= want) return seconds_since(t0);
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return -1.0;
    };
    const std::string queued = "editspec_clients_left_total{state=\"queued\"}";
    const std::string running = "editspec_clients_left_total{state=\"running\"}";
    const std::string started = "editspec_queue_wait_seconds_count";
    ASSERT_EQ(metric(queued), 0.0);
    const json endless = {{"prompt", k_endless}, {"n_predict", 1500}};

    // A holds the slot (non-streamed); B waits behind it, then leaves: dropped from the queue while A runs
    const int a = connect_to(s.port);
    ASSERT_TRUE(send_all(a, raw_post("/completion", endless.dump())));
    ASSERT_GE(reaches(started, 1, 30.0), 0.0) << "A never started";
    const int b = connect_to(s.port);
    ASSERT_TRUE(send_all(b, raw_post("/completion", endless.dump())));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    close(b);
    const double dropped_s = reaches(queued, 1, 10.0);
    EXPECT_GE(dropped_s, 0.0) << "the queued request whose client left was not dropped";
    EXPECT_LT(dropped_s, 2.0) << "seconds to drop a queued request whose client left";
    EXPECT_EQ(metric(started), 1.0) << "B's job ran";

    // A leaves while it decodes: cancelled, and the next request has the slot at once
    close(a);
    const double cancelled_s = reaches(running, 1, 10.0);
    EXPECT_GE(cancelled_s, 0.0) << "the running request whose client left was not cancelled";
    EXPECT_LT(cancelled_s, 2.0) << "seconds to cancel a running request whose client left";
    int status = 0;
    const auto t0 = clock_type::now();
    const json r = test::post(s, "/completion", R"({"prompt": "def add(a, b):\n", "n_predict": 8})", &status);
    const double next_s = seconds_since(t0);
    ASSERT_EQ(status, 200) << r.dump();
    EXPECT_LT(next_s, 2.5) << "the next request waited for the abandoned ones";
    EXPECT_EQ(metric(started), 2.0) << "only A and the last request ran";
    RecordProperty("queued_client_dropped_ms", std::to_string((int) (dropped_s * 1000)));
    RecordProperty("running_client_cancelled_ms", std::to_string((int) (cancelled_s * 1000)));
}

// A port in use: exit 1 with a message, not an abort
TEST(hostile, a_port_in_use_exits_1) {
    server_process s({});
    ASSERT_GT(s.pid, 0);
    std::string out;
    const int rc = test::run_command(std::string(EDITSPEC_BIN) + " serve -m " + test::k_target + " -t 1 --port " +
                                         std::to_string(s.port) + " 2>&1", &out);
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("cannot listen"), std::string::npos) << out;
}

// A prompt store larger than the machine's memory is refused at start, naming both; the default is
// bounded to what the machine has (said in the log where it is less than 8192 MiB)
TEST(hostile, a_cache_ram_over_the_machine_is_refused) {
    std::string out;
    const int rc = test::run_command(std::string(EDITSPEC_BIN) + " serve -m " + test::k_target +
                                         " -t 1 --port 1 --cache-ram 1048576 2>&1",
                                     &out);
    EXPECT_EQ(rc, 2) << out;
    EXPECT_NE(out.find("--cache-ram 1048576 MiB is more than this machine has available"), std::string::npos) << out;
}
