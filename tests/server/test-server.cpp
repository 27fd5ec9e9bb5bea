// editspec serve end to end on the shipped model: the official OpenAI Node SDK, requests shaped as
// llama.vim and OpenAI-compatible editor plugins send them, greedy equality with the CLI, a bounded
// load test and the errors of bad requests. The server runs as its own process on loopback.
#include "common/test-util.h"
#include "server/server-process.h"
#include "server/server-state.h"
#include "editspec/apply.h"
#include "editspec/chat-tools.h"
#include "editspec/edit.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <sstream>
#include <spawn.h>
#include <sys/wait.h>
#include <thread>

using json = nlohmann::json;
using namespace editspec;
using test::k_target;
using test::post;
using test::server_process;

namespace {

bool have_shipped() { return std::filesystem::exists(k_target); }

double metric(server_process & s, const std::string & name); // below

} // namespace

TEST(server, openai_node_sdk) {
    if (!have_shipped()) GTEST_SKIP() << "no shipped model";
    // installed by the set-up (scripts/test.sh runs tests/server/install-sdk.sh): no network here
    const std::string dir = std::string(EDITSPEC_SOURCE_DIR) + "/build/node";
    ASSERT_TRUE(std::filesystem::exists(dir + "/node_modules/openai"))
        << dir << ": the OpenAI Node SDK is not installed; scripts/test.sh installs it (tests/server/install-sdk.sh)";
    std::filesystem::copy_file(std::string(EDITSPEC_SOURCE_DIR) + "/tests/server/openai-sdk.mjs", dir + "/openai-sdk.mjs",
                               std::filesystem::copy_options::overwrite_existing);
    server_process s({});
    ASSERT_GT(s.pid, 0);
    std::string out;
    const int rc = test::run_command("node " + dir + "/openai-sdk.mjs http://127.0.0.1:" + std::to_string(s.port) + "/v1 " +
                                         EDITSPEC_DATASETS + "/canitedit/normalized.jsonl 2>&1", &out);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("\"ok\":true"), std::string::npos) << out;
    EXPECT_NE(out.find("\"canitedit_same_with_and_without_prediction\":20"), std::string::npos) << out;
}

// Continue's own client library: chat stream and whole, an edit with `prediction` under the name
// Continue sends it for, and its autocomplete's fill-in-the-middle, all on the shipped models
TEST(server, continue_adapters) {
    if (!have_shipped()) GTEST_SKIP() << "no shipped model";
    const std::string dir = std::string(EDITSPEC_SOURCE_DIR) + "/build/node";
    ASSERT_TRUE(std::filesystem::exists(dir + "/node_modules/@continuedev/openai-adapters"))
        << dir << ": Continue's adapters are not installed; scripts/test.sh installs them (tests/server/install-sdk.sh)";
    std::filesystem::copy_file(std::string(EDITSPEC_SOURCE_DIR) + "/tests/server/continue-adapters.mjs",
                               dir + "/continue-adapters.mjs", std::filesystem::copy_options::overwrite_existing);
    server_process s({"--alias", "gpt-4o"});
    ASSERT_GT(s.pid, 0);
    std::string out;
    const std::string url = "http://127.0.0.1:" + std::to_string(s.port) + "/v1/";
    const int rc = test::run_command("node " + dir + "/continue-adapters.mjs " + url + " " + url + " 2>&1", &out);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("\"ok\":true"), std::string::npos) << out;
}

TEST(server, editor_shaped_requests_and_greedy_equality) {
    if (!have_shipped()) GTEST_SKIP() << "no shipped model";
    server_process s({});
    ASSERT_GT(s.pid, 0);
    int status = 0;
    // llama.vim's /infill fields (autoload/llama.vim): the shipped target fills in the middle
    const json infill = {{"input_prefix", "def f(x):\n"}, {"input_suffix", "\n"}, {"input_extra", json::array({{{"filename", "a.py"}, {"text", "x = 1\n"}}})},
                         {"prompt", "    "}, {"n_predict", 32}, {"stop", json::array()}, {"n_indent", 4}, {"top_k", 40}, {"top_p", 0.9},
                         {"samplers", {"top_k", "top_p", "infill"}}, {"stream", false}, {"cache_prompt", true},
                         {"t_max_prompt_ms", 500}, {"t_max_predict_ms", 1000},
                         {"response_fields", {"content", "timings/prompt_n", "timings/predicted_n", "truncated", "tokens_cached"}}};
    json r = post(s, "/infill", infill.dump(), &status);
    EXPECT_EQ(status, 200) << r.dump();
    EXPECT_TRUE(r.contains("content") && r["content"].is_string() && r.contains("timings/prompt_n") &&
                r.contains("timings/predicted_n") && r.contains("truncated") && r.contains("tokens_cached")) << r.dump();
    // greedy, the middle of a function whose end is in the suffix: what the model writes is what llama.vim shows
    json greedy = {{"input_prefix", "def area(w, h):\n"}, {"input_suffix", "\n\n\nprint(area(2, 3))\n"}, {"prompt", "    "},
                   {"n_predict", 16}, {"temperature", 0}, {"stop", {"\n"}}};
    r = post(s, "/infill", greedy.dump(), &status);
    EXPECT_EQ(status, 200) << r.dump();
    EXPECT_FALSE(r["content"].get<std::string>().empty()) << r.dump();
    // the same fields on /completion with a prompt: only the response fields asked for
    json comp = infill;
    comp.erase("input_prefix");
    comp.erase("input_suffix");
    comp["prompt"] = "### Instruction:\nAdd one.\n### Original code:\nx = 1\n\n### Edited code:\n";
    comp["top_k"] = 1;
    r = post(s, "/completion", comp.dump(), &status);
    EXPECT_EQ(status, 200) << r.dump();
    EXPECT_TRUE(r.contains("content") && r.contains("timings/predicted_n") && r.contains("tokens_cached")) << r.dump();
    EXPECT_FALSE(r.contains("timings")) << r.dump();
    // an OpenAI-compatible edit-prediction provider's /v1/completions: prompt, max_tokens, temperature, stop
    r = post(s, "/v1/completions", json{{"model", "editspec"}, {"prompt", comp["prompt"]}, {"max_tokens", 32},
                                        {"temperature", 0}, {"stop", {"\n\n\n"}}, {"stream", false}}.dump(), &status);
    EXPECT_EQ(status, 200) << r.dump();
    ASSERT_TRUE(r.contains("choices")) << r.dump();
    // greedy: the server's text is `editspec complete`'s
    const std::string prompt = "### Instruction:\nRename x to n.\n### Original code:\ndef f(x):\n    return x * 2\n\n### Edited code:\n";
    const double sent0 = metric(s, "editspec_draft_tokens_sent_total");
    r = post(s, "/completion", json{{"prompt", prompt}, {"n_predict", 40}}.dump(), &status);
    ASSERT_EQ(status, 200) << r.dump();
    // /metrics counts every draft node the passes held, tested or not: the request's own draft_n
    EXPECT_GT(r["timings"]["draft_n"].get<int64_t>(), 0) << r.dump();
    // llama-server's split: the pass that reads the prompt's end is prompt time, the rest generation
    EXPECT_GT(r["timings"]["prompt_ms"].get<double>(), 0.0) << r.dump();
    EXPECT_GT(r["timings"]["predicted_ms"].get<double>(), 0.0) << r.dump();
    // its rates leave the first pass's tokens out (llama-server's, its first token): 0 where the first pass's
    // tree held the whole answer (the cost model's sizing decides; test-generate's
    // the_first_pass_is_timed_inside_generation checks a positive rate deterministically); its counts are the
    // decoded prompt tokens and the cached ones
    EXPECT_GE(r["timings"]["predicted_per_second"].get<double>(), 0.0) << r.dump();
    EXPECT_LT(r["timings"]["predicted_per_second"].get<double>(),
              1000.0 * r["timings"]["predicted_n"].get<double>() / r["timings"]["predicted_ms"].get<double>()) << r.dump();
    EXPECT_EQ(r["timings"]["prompt_n"].get<int64_t>() + r["timings"]["cache_n"].get<int64_t>(),
              r["tokens_evaluated"].get<int64_t>()) << r.dump();
    EXPECT_EQ(metric(s, "editspec_draft_tokens_sent_total") - sent0, r["timings"]["draft_n"].get<double>()) << r.dump();
    // libllama reuses a pass's graph only where the one before had its shape (drafted passes vary)
    EXPECT_LE(metric(s, "editspec_step_graphs_reused_total"), metric(s, "editspec_step_ubatches_total"));
    test::temp_dir tmp;
    std::ofstream(tmp.path / "p.txt") << prompt;
    std::string out;
    ASSERT_EQ(test::run_command(std::string(EDITSPEC_BIN) + " complete -m " + k_target + " -f " + (tmp.path / "p.txt").string() +
                                    " -n 40 -t 1 --method lookup-longest --json", &out), 0) << out;
    EXPECT_EQ(r["content"], json::parse(out)["text"]);
    // and the chat endpoint, given the code fenced in the message as editors send it, is `editspec
    // edit`'s answer, with or without the code as a prediction (a prediction is a speed hint)
    std::ofstream(tmp.path / "f.py") << "def f(x):\n    return x * 2\n";
    ASSERT_EQ(test::run_command(std::string(EDITSPEC_BIN) + " edit -m " + k_target + " -f " + (tmp.path / "f.py").string() +
                                    " -i 'Rename x to n.' -t 1 --json", &out), 0) << out;
    const json messages = {{{"role", "user"}, {"content", "Rename x to n.\n\n```python\ndef f(x):\n    return x * 2\n```\n"}}};
    for (const bool with_prediction : {true, false}) {
        json body = {{"messages", messages}};
        if (with_prediction) body["prediction"] = {{"type", "content"}, {"content", "def f(x):\n    return x * 2\n"}};
        r = post(s, "/v1/chat/completions", body.dump(), &status);
        ASSERT_EQ(status, 200) << r.dump();
        EXPECT_EQ(r["choices"][0]["message"]["content"], json::parse(out)["text"]) << "with prediction: " << with_prediction;
    }
}

namespace {

// `path` in j: a key of that name (llama.cpp's response_fields are flat), else a/b/0 through nested
// objects and arrays; null when absent
const json * field_at(const json & j, const std::string & path) {
    if (j.is_object() && j.contains(path)) return &j[path];
    const json * v = &j;
    size_t at = 0;
    while (v) {
        const size_t slash = path.find('/', at);
        const std::string key = path.substr(at, slash == std::string::npos ? std::string::npos : slash - at);
        if (v->is_object()) {
            v = v->contains(key) ? &(*v)[key] : nullptr;
        } else if (v->is_array() && !key.empty() && std::all_of(key.begin(), key.end(), ::isdigit)) {
            const size_t i = std::stoul(key);
            v = i < v->size() ? &(*v)[i] : nullptr;
        } else {
            v = nullptr;
        }
        if (slash == std::string::npos) break;
        at = slash + 1;
    }
    return v;
}

} // namespace

namespace {

// every recorded body posted to s: 200 with the fields its client reads
void replay_recorded(server_process & s, const json & corpus, const std::string & model) {
    for (const json & rec : corpus["requests"]) {
        const std::string what = model + ": " + rec["client"].get<std::string>() + ": " + rec["what"].get<std::string>();
        auto c = s.client();
        auto r = c.Post(rec["path"].get<std::string>().c_str(), rec["body"].get<std::string>(), "application/json");
        ASSERT_TRUE(r) << what;
        ASSERT_EQ(r->status, 200) << what << "\n" << r->body;
        if (!rec["stream"].get<bool>()) {
            const json j = json::parse(r->body);
            std::vector<const json *> answers = {&j};
            if (rec.contains("array_of")) {
                ASSERT_TRUE(j.is_array() && j.size() == rec["array_of"].get<size_t>()) << what << "\n" << r->body;
                answers.clear();
                for (const json & x : j) answers.push_back(&x);
            }
            for (const json * a : answers) {
                for (const json & k : rec["reads"]) EXPECT_TRUE(field_at(*a, k)) << what << ": no " << k << "\n" << r->body;
            }
            continue;
        }
        // server-sent events: "data: {...}" lines, OpenAI's streams ending with [DONE]
        std::vector<json> events;
        std::istringstream lines(r->body);
        for (std::string line; std::getline(lines, line);) {
            if (line.rfind("data: ", 0) != 0 || line == "data: [DONE]") continue;
            events.push_back(json::parse(line.substr(6)));
        }
        ASSERT_FALSE(events.empty()) << what << "\n" << r->body;
        for (const json & e : events) {
            for (const json & k : rec["every_event"]) EXPECT_TRUE(field_at(e, k)) << what << ": an event without " << k << ": " << e.dump();
        }
        for (const json & k : rec["some_event"]) {
            EXPECT_TRUE(std::any_of(events.begin(), events.end(), [&](const json & e) { return field_at(e, k) != nullptr; }))
                << what << ": no event with " << k << "\n" << r->body;
        }
    }
}

} // namespace

// request bodies of llama.vim, llama.vscode, Tabby, Continue and Zed, taken from their source
// (tests/server/client-requests.json), posted byte for byte: each is answered 200 with the fields
// its client reads, by the shipped models (`editspec serve`'s defaults) and by a model with
// DeepSeek-Coder's vocabulary (the test model: other FIM tokens, a chat template's absence alike)
TEST(server, recorded_client_requests) {
    std::ifstream f(std::string(EDITSPEC_SOURCE_DIR) + "/tests/server/client-requests.json");
    ASSERT_TRUE(f) << "tests/server/client-requests.json";
    const json corpus = json::parse(f);
    ASSERT_GE(corpus["requests"].size(), 8u);
    {
        server_process s({"-m", test::tiny_model_path(), "--max-tokens", "64"});
        ASSERT_GT(s.pid, 0);
        replay_recorded(s, corpus, "test model");
    }
    if (!have_shipped()) GTEST_SKIP() << "no shipped model";
    server_process s({"--max-tokens", "64"});
    ASSERT_GT(s.pid, 0);
    replay_recorded(s, corpus, "shipped models");
}

// fast apply: /v1/apply and a chat message in the <code>/<update> format give `editspec apply`'s code,
// the file drafted as the prediction
TEST(server, apply_endpoint_and_message_format) {
    if (!have_shipped()) GTEST_SKIP() << "no shipped model";
    server_process s({});
    ASSERT_GT(s.pid, 0);
    const std::string code = "def area(w, h):\n    return w * h\n\n\ndef perimeter(w, h):\n    return 2 * (w + h)\n";
    const std::string update = "# ... existing code ...\ndef perimeter(w, h):\n    return 2 * w + 2 * h\n";
    int status = 0;
    // the default: greedy and constrained (each merged line a line of the code or the update), labelled
    const json r = post(s, "/v1/apply", json{{"code", code}, {"update", update}}.dump(), &status);
    ASSERT_EQ(status, 200) << r.dump();
    ASSERT_TRUE(r.contains("merged_code") && r["merged_code"].is_string()) << r.dump();
    EXPECT_EQ(r["constrained"], true) << r.dump();
    EXPECT_GT(r["usage"]["completion_tokens_details"]["accepted_prediction_tokens"].get<int>(), 0) << r.dump();
    test::temp_dir tmp;
    std::ofstream(tmp.path / "f.py") << code;
    std::ofstream(tmp.path / "u.py") << update;
    const std::string apply_cmd = std::string(EDITSPEC_BIN) + " apply -m " + k_target + " -f " + (tmp.path / "f.py").string() +
                                  " -u " + (tmp.path / "u.py").string() + " -t 1 --json";
    std::string out;
    ASSERT_EQ(test::run_command(apply_cmd, &out), 0) << out;
    EXPECT_EQ(r["merged_code"], json::parse(out)["code"]);
    EXPECT_EQ(json::parse(out)["constrained"], true) << out;
    // the model's free greedy output: "constrain": false, --no-constrain, and the chat message format
    const json rf = post(s, "/v1/apply", json{{"code", code}, {"update", update}, {"constrain", false}}.dump(), &status);
    ASSERT_EQ(status, 200) << rf.dump();
    EXPECT_EQ(rf["constrained"], false) << rf.dump();
    ASSERT_EQ(test::run_command(apply_cmd + " --no-constrain", &out), 0) << out;
    EXPECT_EQ(rf["merged_code"], json::parse(out)["code"]);
    const json messages = {{{"role", "user"}, {"content", apply_message({code, update, ""})}}};
    const json cf = post(s, "/v1/chat/completions", json{{"messages", messages}, {"constrain", false}}.dump(), &status);
    ASSERT_EQ(status, 200) << cf.dump();
    EXPECT_EQ(edit_extract_code(cf["choices"][0]["message"]["content"]), rf["merged_code"]);
    // every apply shape merges as /v1/apply by default: Morph's chat message (on a model without a
    // chat template, whose prompt is the apply prompt) and Relace's /v1/code/apply
    const json c = post(s, "/v1/chat/completions", json{{"messages", messages}}.dump(), &status);
    ASSERT_EQ(status, 200) << c.dump();
    EXPECT_EQ(edit_extract_code(c["choices"][0]["message"]["content"]), r["merged_code"]);
    EXPECT_TRUE(c["usage"].contains("completion_tokens_details")) << c.dump();
    const json rl = post(s, "/v1/code/apply", json{{"initial_code", code}, {"edit_snippet", update}}.dump(), &status);
    ASSERT_EQ(status, 200) << rl.dump();
    EXPECT_EQ(rl["mergedCode"], r["merged_code"]);
    EXPECT_EQ(rl["constrained"], true);
    EXPECT_GT(rl["usage"]["completion_tokens"].get<int>(), 0) << rl.dump();
    const json rl_bad = post(s, "/v1/code/apply", json{{"initial_code", code}}.dump(), &status);
    EXPECT_EQ(status, 400) << rl_bad.dump();
    EXPECT_NE(rl_bad.dump().find("edit_snippet"), std::string::npos) << rl_bad.dump();
    // a sampled apply is the model's own output, unconstrained; constrained sampling is refused
    const json rs = post(s, "/v1/apply", json{{"code", code}, {"update", update}, {"temperature", 0.5}}.dump(), &status);
    ASSERT_EQ(status, 200) << rs.dump();
    EXPECT_EQ(rs["constrained"], false) << rs.dump();
    const json bad = post(s, "/v1/apply", json{{"code", code}, {"update", update}, {"constrain", true}, {"temperature", 0.5}}.dump(), &status);
    EXPECT_EQ(status, 400) << bad.dump();
    // refusals (post's status is -1 when no answer came: a dead server fails these)
    json no = post(s, "/v1/apply", json{{"code", code}}.dump(), &status);
    EXPECT_EQ(status, 400) << no.dump();
    no = post(s, "/v1/apply", json{{"code", code}, {"update", update}, {"stream", true}}.dump(), &status);
    EXPECT_EQ(status, 400) << no.dump();
    no = post(s, "/v1/apply", json{{"code", code}, {"update", update}, {"constrain", "yes"}}.dump(), &status);
    EXPECT_EQ(status, 400) << no.dump();
    // a merge is whole or an error (issue 69; tests/server/test-merge-whole.cpp): max_tokens below the
    // merged file's size is refused before decoding, on every shape, naming the sizes
    for (const auto & [path, body] : {std::pair{"/v1/apply", json{{"code", code}, {"update", update}, {"max_tokens", 5}}},
                                      std::pair{"/v1/code/apply", json{{"initial_code", code}, {"edit_snippet", update}, {"max_tokens", 5}}},
                                      std::pair{"/v1/chat/completions", json{{"messages", messages}, {"max_tokens", 5}}}}) {
        no = post(s, path, body.dump(), &status);
        EXPECT_EQ(status, 400) << path << ": " << no.dump();
        EXPECT_EQ(no["error"]["code"], "max_tokens_too_small") << path << ": " << no.dump();
        EXPECT_EQ(no["error"]["param"], "max_tokens") << path << ": " << no.dump();
    }
}

// issue 59: a constrained apply is prompted with the snippet alone (the file is read once, as the merge
// is written), cached file or not, so its answer never depends on the cache; --apply-view cached keeps
// the whole file once a slot holds its prompt (reused); --apply-view file fixes the whole file
TEST(server, apply_view_follows_the_request_and_the_cache) {
    if (!have_shipped()) GTEST_SKIP() << "no shipped model";
    std::string code;
    for (int i = 0; i < 12; i++) code += "def f" + std::to_string(i) + "(x):\n    return x + " + std::to_string(i) + "\n\n\n";
    const std::string update = "# ... existing code ...\ndef f5(x):\n    return x * 5\n# ... existing code ...\n";
    const std::string body = json{{"code", code}, {"update", update}}.dump();
    // the model's free answer to it never ends (the 15M model loops): cut at max_tokens, it is an error,
    // not a merge (issue 69), and its prompt, the whole file's, is cached all the same
    const std::string free_body = json{{"code", code}, {"update", update}, {"constrain", false}, {"max_tokens", 400}}.dump();
    int status = 0;
    int p_none = 0, p_file = 0;
    std::string merged;
    server_process fixed({"--apply-view", "file"});
    ASSERT_GT(fixed.pid, 0);
    const json f = post(fixed, "/v1/apply", body, &status);
    ASSERT_EQ(status, 200) << f.dump();
    p_file = f["usage"]["prompt_tokens"];
    {
        server_process s({});
        ASSERT_GT(s.pid, 0);
        const json cold = post(s, "/v1/apply", body, &status);
        ASSERT_EQ(status, 200) << cold.dump();
        const json free = post(s, "/v1/apply", free_body, &status); // the whole file: its prompt is cached now
        ASSERT_EQ(status, 400) << free.dump();
        EXPECT_EQ(free["error"]["code"], "incomplete_merge") << free.dump();
        p_none = cold["usage"]["prompt_tokens"];
        EXPECT_LT(2 * p_none, p_file) << "a constrained apply's prompt holds the snippet, not the file";
        const json again = post(s, "/v1/apply", body, &status);
        ASSERT_EQ(status, 200) << again.dump();
        EXPECT_EQ(again["usage"]["prompt_tokens"], p_none) << again.dump();
        merged = cold["merged_code"];
        EXPECT_EQ(again["merged_code"], merged);
    }
    {
        server_process s({"--apply-view", "cached"});
        ASSERT_GT(s.pid, 0);
        const json cold = post(s, "/v1/apply", body, &status);
        ASSERT_EQ(status, 200) << cold.dump();
        EXPECT_EQ(cold["usage"]["prompt_tokens"], p_none) << cold.dump();
        ASSERT_EQ((post(s, "/v1/apply", free_body, &status), status), 400);
        const json warm = post(s, "/v1/apply", body, &status);
        ASSERT_EQ(status, 200) << warm.dump();
        EXPECT_EQ(warm["usage"]["prompt_tokens"], p_file) << warm.dump();
        EXPECT_GE(2 * warm["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), p_file) << warm.dump();
    }
    EXPECT_EQ(f["merged_code"], merged); // the constrained merge: the same, whatever the prompt shows
    std::string out;
    EXPECT_EQ(test::run_command(std::string(EDITSPEC_BIN) + " serve --apply-view half 2>&1", &out), 2) << out;
    EXPECT_NE(out.find("half"), std::string::npos) << out;
}

// 8 clients x 50 requests on 2 slots: no error, every answer is the one its prompt gets alone
// One OpenMP team in the server: ggml's team belongs to the thread that computes, and a second team beside
// the step engine's outnumbered the cores (its workers slept between passes: requests 1.2-1.34x slower).
// The cost model's passes (measured at this start) run on a thread of their own, whose team goes with it;
// a document session's passes run on the engine's thread. Threads are counted by name (a thread's workers
// start with its name): the engine's ("es-step") are the -t threads, its own and its workers; none of the
// cost thread's is left, nor of the main thread while it set up ("editspec-setup"); the sessions' worker
// ("es-sessions") is one thread with no team
TEST(server, the_cost_model_and_sessions_leave_one_openmp_team) {
    auto named = [](pid_t pid, const std::string & name) {
        int n = 0;
        for (const auto & e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
            std::ifstream f(e.path() / "comm");
            std::string comm;
            std::getline(f, comm);
            n += comm == name;
        }
        return n;
    };
    for (const int t : {1, 2}) {
        const std::string cache = ::testing::TempDir() + "editspec-omp-" + std::to_string(getpid()) + "-" + std::to_string(t);
        std::filesystem::remove_all(cache);
        setenv("EDITSPEC_CACHE", cache.c_str(), 1); // measured at this start
        server_process srv({"-m", std::string(EDITSPEC_TEST_MODEL_DIR) + "/tiny-q8_0.gguf", "-t", std::to_string(t),
                            "--parallel", "2", "--ctx-size", "512"});
        unsetenv("EDITSPEC_CACHE");
        ASSERT_GT(srv.pid, 0);
        int status = 0;
        post(srv, "/completion", json{{"prompt", "def add(a, b):"}, {"n_predict", 4}}.dump(), &status);
        ASSERT_EQ(status, 200);
        const json c = post(srv, "/v1/sessions", json{{"text", "def add(a, b):\n    return a + b\n"}}.dump(), &status);
        ASSERT_EQ(status, 200) << c.dump();
        post(srv, "/v1/sessions/" + c["id"].get<std::string>() + "/complete", json{{"max_tokens", 4}}.dump(), &status);
        ASSERT_EQ(status, 200);
        EXPECT_EQ(named(srv.pid, "es-step"), t) << "-t " << t << ": the step engine's thread and its workers";
        EXPECT_EQ(named(srv.pid, "es-cost"), 0) << "-t " << t << ": the cost model's thread's team outlived it";
        EXPECT_EQ(named(srv.pid, "editspec-setup"), 0) << "-t " << t << ": a pass computed on the main thread while it set up";
        EXPECT_EQ(named(srv.pid, "es-sessions"), 1) << "-t " << t << ": a session's passes made a team of their own";
        std::filesystem::remove_all(cache);
    }
}

TEST(server, load_8_clients_50_requests) {
    if (!have_shipped()) GTEST_SKIP() << "no shipped model";
    server_process s({"--parallel", "2"});
    ASSERT_GT(s.pid, 0);
    const char * words[] = {"sum", "max", "count", "reverse", "sort", "join", "split", "mean"};
    std::vector<std::string> prompts, expected;
    for (const char * w : words) {
        prompts.push_back(std::string("### Instruction:\nUse ") + w + ".\n### Original code:\ndef " + w + "_all(xs):\n    return xs\n\n### Edited code:\n");
        int status = 0;
        const json r = post(s, "/completion", json{{"prompt", prompts.back()}, {"n_predict", 16}}.dump(), &status);
        ASSERT_EQ(status, 200);
        expected.push_back(r["content"]);
    }
    std::atomic<int> errors{0}, wrong{0};
    std::vector<double> ms;
    std::mutex mu;
    std::vector<std::thread> clients;
    for (int c = 0; c < 8; c++) {
        clients.emplace_back([&, c] {
            for (int i = 0; i < 50; i++) {
                const int k = (c + i) % 8;
                const auto t0 = std::chrono::steady_clock::now();
                int status = 0;
                const json r = post(s, "/completion", json{{"prompt", prompts[k]}, {"n_predict", 16}}.dump(), &status);
                const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
                if (status != 200 || !r.contains("content")) errors++;
                else if (r["content"] != expected[k]) wrong++;
                std::lock_guard<std::mutex> lock(mu);
                ms.push_back(t);
            }
        });
    }
    for (auto & t : clients) t.join();
    EXPECT_EQ(errors.load(), 0);
    EXPECT_EQ(wrong.load(), 0);
    std::sort(ms.begin(), ms.end());
    printf("load: %zu requests, p50 %.1f ms, p99 %.1f ms\n", ms.size(), ms[ms.size() / 2], ms[ms.size() * 99 / 100]);
}

namespace {

// a counter of /metrics (0 when absent)
double metric(server_process & s, const std::string & name) {
    auto c = s.client();
    auto m = c.Get("/metrics");
    if (!m) return 0.0;
    const size_t at = m->body.find("\n" + name + " ");
    return at == std::string::npos ? 0.0 : std::stod(m->body.substr(at + name.size() + 2));
}

// each of bodies posted to path alone, then all at once from a thread each: the same answers (`field`)
void same_alone_and_at_once(server_process & s, const std::string & path, const std::vector<json> & bodies,
                            const std::function<json(const json &)> & field) {
    std::vector<json> alone, together(bodies.size());
    for (const json & b : bodies) {
        int status = 0;
        const json r = post(s, path, b.dump(), &status);
        ASSERT_EQ(status, 200) << r.dump();
        alone.push_back(field(r));
    }
    std::vector<std::thread> clients;
    for (size_t i = 0; i < bodies.size(); i++) {
        clients.emplace_back([&, i] {
            int status = 0;
            const json r = post(s, path, bodies[i].dump(), &status);
            together[i] = status == 200 ? field(r) : json(r.dump());
        });
    }
    for (auto & t : clients) t.join();
    for (size_t i = 0; i < bodies.size(); i++) EXPECT_EQ(together[i], alone[i]) << "request " << i;
}

} // namespace

// issue 70: the draft model's passes batch across requests (a stream per slot in one context, the
// draft model's step engine): 4 clients at once with `sd` (the shipped draft model drafts every step)
// and with `efficientedit` (edits with a prediction; its Generate phase) each get the answer they get
// alone, and the draft model's steps carry several requests' passes
TEST(server, draft_model_passes_batch_across_requests) {
    if (!have_shipped()) GTEST_SKIP() << "no shipped model";
    std::vector<json> completions, edits;
    const char * words[] = {"sum", "max", "count", "reverse"};
    for (const char * w : words) {
        const std::string code = std::string("def ") + w + "_all(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total\n";
        // a prediction that is another file's: Reuse is rejected early and often, and the draft model
        // writes in EfficientEdit's Generate phase
        const std::string other = std::string("class ") + w + "_table:\n    def __init__(self):\n        self.rows = []\n";
        completions.push_back({{"prompt", std::string("### Instruction:\nUse ") + w + ".\n### Original code:\n" + code + "\n### Edited code:\n"},
                               {"n_predict", 48}});
        edits.push_back({{"messages", {{{"role", "user"}, {"content", std::string("Use ") + w + " and name the loop variable item.\n\n```python\n" + code + "```\n"}}}},
                         {"prediction", {{"type", "content"}, {"content", other}}}, {"max_tokens", 96}, {"temperature", 0}});
    }
    for (const char * method : {"sd", "efficientedit:greedy"}) {
        SCOPED_TRACE(method);
        server_process s({"--parallel", "4", "--method", method});
        ASSERT_GT(s.pid, 0);
        if (std::string(method) == "sd") {
            same_alone_and_at_once(s, "/completion", completions, [](const json & r) { return r["content"]; });
            // a prompt sent again finds its slot's draft stream holding it: the draft model decodes less
            const json again = {{"prompt", std::string(200, ' ') + "def again(xs):\n    return [x for x in xs]\n"}, {"n_predict", 24}};
            double decoded[2];
            std::string answers[2];
            for (int k = 0; k < 2; k++) {
                const double t0 = metric(s, "editspec_draft_step_tokens_total");
                int status = 0;
                const json r = post(s, "/completion", again.dump(), &status);
                ASSERT_EQ(status, 200) << r.dump();
                answers[k] = r["content"];
                decoded[k] = metric(s, "editspec_draft_step_tokens_total") - t0;
            }
            EXPECT_EQ(answers[1], answers[0]);
            EXPECT_LT(decoded[1], decoded[0]) << "the draft model decoded the repeated prompt again";
            printf("draft-model tokens decoded: %.0f the first time, %.0f the second\n", decoded[0], decoded[1]);
        } else {
            same_alone_and_at_once(s, "/v1/chat/completions", edits, [](const json & r) { return r["choices"][0]["message"]["content"]; });
        }
        const double steps = metric(s, "editspec_draft_steps_total"), batches = metric(s, "editspec_draft_step_requests_total");
        EXPECT_GT(steps, 0.0) << "the draft model decoded outside its step engine";
        // alone each step carries one request's pass: at once, 4 requests share some
        EXPECT_GT(batches, steps * 1.1) << batches << " draft passes in " << steps << " steps";
        printf("%s: %.0f draft-model passes in %.0f steps (%.2f requests a step over the whole run)\n", method, batches, steps,
               batches / steps);
    }
}

// a model with a recurrent state serves as the others do: a stream per slot (libllama splits such a batch by
// sequence), a draft's rejected tail taken back to a snapshot of the state (Qwen3.5's hybrid layout at toy
// size, Qwen3-Next's, Mamba-2's) or, ":checkpoints" (--rs-snapshots 0), to a checkpoint saved before the pass. 4 clients
// at once, each with its own answer alone as the prediction or half of it: the same answers, the predictions
// accepted, several requests a step
class server_recurrent : public ::testing::TestWithParam<const char *> {};

TEST_P(server_recurrent, batches_and_answers_as_alone) {
    const std::string param = GetParam(), shape = param.substr(0, param.find(':'));
    server_process s({"-m", test::typed_model_path("q8_0", shape), "--parallel", "4", "--rs-snapshots", shape == param ? "16" : "0"});
    ASSERT_GT(s.pid, 0);
    const char * prompts[] = {"def fib(n):", "class Stack:\n    def __init__(self):", "import os\nimport sys\n", "int main(void) {"};
    auto body = [](const std::string & p, const std::string * prediction) {
        json b = {{"messages", {{{"role", "user"}, {"content", p}}}}, {"max_tokens", 64}, {"temperature", 0}};
        if (prediction) b["prediction"] = {{"type", "content"}, {"content", *prediction}};
        return b;
    };
    std::vector<json> bodies;
    for (const char * p : prompts) {
        int status = 0;
        const json r = post(s, "/v1/chat/completions", body(p, nullptr).dump(), &status);
        ASSERT_EQ(status, 200) << r.dump();
        const std::string answer = r["choices"][0]["message"]["content"];
        size_t cut = answer.size() / 2;
        while (cut > 0 && ((unsigned char) answer[cut] & 0xC0) == 0x80) cut--; // a whole character
        const std::string half = answer.substr(0, cut) + "zzz";
        bodies.push_back(body(p, &answer));
        bodies.push_back(body(p, &half));
    }
    const std::string accepted = "editspec_draft_tokens_accepted_total{source=\"reuse\"}"; // the predictions' drafts
    const double accepted0 = metric(s, accepted);
    same_alone_and_at_once(s, "/v1/chat/completions", bodies, [](const json & r) { return r["choices"][0]["message"]["content"]; });
    EXPECT_GT(metric(s, accepted), accepted0 + 100) << "the predictions were not drafted";
    const double steps = metric(s, "editspec_steps_total"), requests = metric(s, "editspec_step_requests_total");
    EXPECT_GT(requests, steps * 1.1) << requests << " passes in " << steps << " steps";
}

INSTANTIATE_TEST_SUITE_P(server, server_recurrent,
                         ::testing::Values("tiny-qwen35", "tiny-qwen3next", "tiny-mamba2", "tiny-qwen3next:checkpoints",
                                           "tiny-mamba2:checkpoints"),
                         [](const ::testing::TestParamInfo<const char *> & i) {
                             std::string name = std::string(i.param).substr(5);
                             std::replace(name.begin(), name.end(), ':', '_');
                             return name;
                         });

// issue 70: PIE batches (--kv-reuse pie on the step engine's views: an edit's new tokens go into the
// step as prompt chunks at their own positions, between the shifted spans). 4 clients, each a file and
// then its edit (a line inserted near the top: the rest of the file is shifted, not encoded), one
// client after another on one server and all at once on a fresh one: the same answers, the edits
// reused their files' spans, and the steps carried several requests
TEST(server, pie_requests_batch_and_answer_as_alone) {
    if (!have_shipped()) GTEST_SKIP() << "no shipped model";
    const char * words[] = {"sum", "max", "count", "reverse"};
    std::vector<std::pair<json, json>> pairs; // (the file, its edit) per client
    for (const char * w : words) {
        std::string code = std::string("import os\n\ndef ") + w + "_all(xs):\n";
        for (int k = 0; k < 6; k++) {
            code += "    # step " + std::to_string(k) + " of the " + w + "\n    total_" + std::to_string(k) + " = " + w +
                    "(x for x in xs if x > " + std::to_string(k) + ")\n";
        }
        code += "    return total_5\n";
        std::string edited = code;
        edited.insert(edited.find("def "), "# " + std::string(w) + " of every item, by threshold\n");
        const auto body = [](const std::string & file) {
            return json{{"prompt", "### Instruction:\nAdd a docstring.\n### Original code:\n" + file + "\n### Edited code:\n"},
                        {"max_tokens", 24}, {"temperature", 0}};
        };
        pairs.push_back({body(code), body(edited)});
    }
    const auto run = [&](server_process & s, bool at_once, std::vector<json> & answers, std::vector<json> & usage) {
        answers.assign(pairs.size(), json());
        usage.assign(pairs.size(), json());
        const auto client = [&](size_t i) {
            for (const json * b : {&pairs[i].first, &pairs[i].second}) {
                int status = 0;
                const json r = post(s, "/v1/completions", b->dump(), &status);
                if (status != 200) {
                    answers[i] = r.dump();
                    return;
                }
                answers[i] = r["choices"][0]["text"];
                usage[i] = r["usage"]["prompt_tokens_details"];
            }
        };
        std::vector<std::thread> clients;
        for (size_t i = 0; i < pairs.size(); i++) {
            if (at_once) {
                clients.emplace_back(client, i);
            } else {
                client(i);
            }
        }
        for (auto & t : clients) t.join();
    };
    std::vector<json> alone, together, usage_alone, usage_together;
    {
        server_process s({"--parallel", "4", "--kv-reuse", "pie"});
        ASSERT_GT(s.pid, 0);
        run(s, false, alone, usage_alone);
    }
    server_process s({"--parallel", "4", "--kv-reuse", "pie"});
    ASSERT_GT(s.pid, 0);
    run(s, true, together, usage_together);
    for (size_t i = 0; i < pairs.size(); i++) {
        EXPECT_EQ(together[i], alone[i]) << "client " << i;
        EXPECT_EQ(usage_together[i], usage_alone[i]) << "client " << i;
        EXPECT_GT(usage_together[i].value("shifted_tokens", 0), 50) << "client " << i << ": " << usage_together[i].dump();
    }
    const double steps = metric(s, "editspec_steps_total"), batches = metric(s, "editspec_step_requests_total");
    EXPECT_GT(batches, steps * 1.5) << batches << " requests' passes in " << steps << " steps";
    printf("pie, 4 clients at once: %.0f requests' passes in %.0f steps (%.2f a step); client 0 %s\n", batches, steps,
           batches / steps, usage_together[0].dump().c_str());
}

// issue 70: a head batches (--method llama-draft-mtp on tiny-mimo2, a model with an MTP block): one
// head context for every slot follows each step of the engine, and the drafts the requests ask for at
// once go in one call. 4 clients, alone and at once, each get what `ar` answers, and the steps carry
// several requests' passes, the draft calls several requests' drafts
TEST(server, head_requests_batch_and_answer_as_ar) {
    const std::string mimo = std::string(EDITSPEC_TEST_MODEL_DIR) + "/tiny-mimo2-q8_0.gguf";
    const char * texts[] = {"def fibonacci(n):\n    if n < 2:\n        return n\n",
                            "import os\n\nclass Config:\n    def __init__(self, path):\n        self.path = path\n",
                            "for (int i = 0; i < n; i++) {\n    sum += a[i] * b[i];\n}\n",
                            "SELECT name, count(*) FROM users\nWHERE age > 30\n"};
    std::vector<json> bodies;
    for (int i = 0; i < 4; i++) bodies.push_back({{"prompt", texts[i]}, {"n_predict", 40 + 8 * i}});
    const auto content = [](const json & r) { return r["content"]; };
    std::vector<json> ar;
    {
        server_process s({"-m", mimo, "--parallel", "4", "--method", "ar"});
        ASSERT_GT(s.pid, 0);
        for (const json & b : bodies) {
            int status = 0;
            const json r = post(s, "/completion", b.dump(), &status);
            ASSERT_EQ(status, 200) << r.dump();
            ar.push_back(content(r));
        }
        // `ar`'s passes after a prompt's are one token each: libllama reuses the graph of the pass
        // before (nothing of ours in the step changes its shape), and /metrics says so
        const double steps = metric(s, "editspec_steps_total"), reused = metric(s, "editspec_step_graphs_reused_total");
        EXPECT_GE(reused, steps - 3 * (double) bodies.size()) << reused << " graphs reused in " << steps << " steps";
    }
    server_process s({"-m", mimo, "--parallel", "4", "--method", "llama-draft-mtp"});
    ASSERT_GT(s.pid, 0);
    for (size_t i = 0; i < bodies.size(); i++) {
        int status = 0;
        const json r = post(s, "/completion", bodies[i].dump(), &status);
        ASSERT_EQ(status, 200) << r.dump();
        EXPECT_EQ(content(r), ar[i]) << "request " << i << " alone";
    }
    const double steps0 = metric(s, "editspec_steps_total"), batches0 = metric(s, "editspec_step_requests_total");
    const double calls0 = metric(s, "editspec_head_draft_calls_total"), drafts0 = metric(s, "editspec_head_drafts_total");
    EXPECT_GT(drafts0, 0.0) << "the head drafted nothing";
    std::vector<json> together(bodies.size());
    std::vector<std::thread> clients;
    for (size_t i = 0; i < bodies.size(); i++) {
        clients.emplace_back([&, i] {
            int status = 0;
            const json r = post(s, "/completion", bodies[i].dump(), &status);
            together[i] = status == 200 ? content(r) : json(r.dump());
        });
    }
    for (auto & t : clients) t.join();
    for (size_t i = 0; i < bodies.size(); i++) EXPECT_EQ(together[i], ar[i]) << "request " << i << " at once";
    const double steps = metric(s, "editspec_steps_total") - steps0, batches = metric(s, "editspec_step_requests_total") - batches0;
    const double calls = metric(s, "editspec_head_draft_calls_total") - calls0, drafts = metric(s, "editspec_head_drafts_total") - drafts0;
    EXPECT_GT(batches, steps * 1.5) << batches << " requests' passes in " << steps << " steps";
    EXPECT_GT(drafts, calls) << drafts << " drafts in " << calls << " draft calls: no call drafted for two requests";
    printf("llama-draft-mtp, 4 clients at once: %.0f requests' passes in %.0f steps (%.2f a step), %.0f drafts in %.0f head calls\n",
           batches, steps, batches / steps, drafts, calls);
}

// two conversations interleaved on 2 slots: each next turn finds its conversation's slot, decodes only
// its new tokens (usage.prompt_tokens_details.cached_tokens) and answers as a fresh server does
TEST(server, chat_turns_reuse_their_conversation_cache) {
    if (!have_shipped()) GTEST_SKIP() << "no shipped model";
    server_process s({"--parallel", "2", "--method", "copy"});
    ASSERT_GT(s.pid, 0);
    const std::vector<std::string> firsts = {"Write a function that sums a list.\ndef total(xs):\n",
                                             "Write a class for a stack.\nclass Stack:\n"};
    std::vector<json> convs(2, json::array());
    std::vector<int> last_prompt(2, 0);
    auto tok = test::load_or_fail(k_target, true);
    ASSERT_TRUE(tok);
    auto turn = [&](int c, const std::string & user) {
        convs[c].push_back({{"role", "user"}, {"content", user}});
        int status = 0;
        // stop before the model writes a template's "### ..." heading of its own: re-tokenized inside
        // the next prompt, such text may split unlike the tokens the model chose
        const json r = post(s, "/v1/chat/completions", json{{"messages", convs[c]}, {"max_tokens", 24}, {"stop", {"###"}}}.dump(), &status);
        EXPECT_EQ(status, 200) << r.dump();
        convs[c].push_back({{"role", "assistant"}, {"content", r["choices"][0]["message"]["content"]}});
        return r;
    };
    for (int round = 0; round < 3; round++) {
        for (int c = 0; c < 2; c++) {
            const json r = turn(c, round == 0 ? firsts[c] : "Write the whole code again, with a docstring.\n");
            const int prompt = r["usage"]["prompt_tokens"], cached = r["usage"]["prompt_tokens_details"]["cached_tokens"];
            if (round > 0) {
                // the previous turn's prompt was in the cache, and its answer as far as the answer's text
                // re-tokenizes into the tokens the model wrote (three newlines the model wrote one by
                // one come back as one token: the cache then ends there)
                EXPECT_GE(cached, last_prompt[c]) << "conversation " << c << " round " << round << r.dump();
                // what it encodes is the new message, the last answer and the template's turn headings,
                // not the conversation before them
                const std::string & answer = convs[c][convs[c].size() - 3]["content"].get_ref<const std::string &>();
                const int n_new = (int) tok->tokenize(answer + "Write the whole code again, with a docstring.\n", false, false).size();
                EXPECT_LE(prompt - cached, n_new + 24) << r.dump();
            }
            last_prompt[c] = prompt;
        }
    }
    // a fresh server (nothing cached) answers the last turns alike
    server_process fresh({"--method", "copy"});
    ASSERT_GT(fresh.pid, 0);
    for (int c = 0; c < 2; c++) {
        json msgs = convs[c];
        const json answer = msgs.back();
        msgs.erase(msgs.size() - 1);
        int status = 0;
        const json r = post(fresh, "/v1/chat/completions", json{{"messages", msgs}, {"max_tokens", 24}}.dump(), &status);
        ASSERT_EQ(status, 200) << r.dump();
        EXPECT_EQ(r["choices"][0]["message"]["content"], answer["content"]) << "conversation " << c;
        // the first request finds nothing; the second only the opening line both conversations share
        EXPECT_LT(r["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), c == 0 ? 1 : 16) << r.dump();
    }
}

TEST(server, bad_requests_get_json_errors_and_the_server_lives) {
    if (!have_shipped()) GTEST_SKIP() << "no shipped model";
    server_process s({"--max-body-mb", "1", "--ctx-size", "256"});
    ASSERT_GT(s.pid, 0);
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"/completion", "{\"prompt\": \"x\", "},                                       // malformed JSON
        {"/completion", "[1, 2]"},                                                     // not an object
        {"/completion", "{\"prompt\": \"x\", \"n_predict\": \"9\"}"},                  // wrong type
        {"/v1/chat/completions", "{\"messages\": []}"},                                // no messages
        {"/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": \"\xff\xfe\"}]}"}, // invalid UTF-8
        {"/completion", json{{"prompt", std::string(4000, 'x') + " y z"}}.dump()},     // over the context
        {"/completion", "{\"prompt\": \"" + std::string(2 << 20, 'a') + "\"}"},        // body over the limit
    };
    for (const auto & [path, body] : cases) {
        int status = 0;
        const json r = post(s, path, body, &status);
        EXPECT_GE(status, 400) << path << " " << body.substr(0, 60);
        EXPECT_LT(status, 500) << path << " " << body.substr(0, 60);
        EXPECT_TRUE(r.is_object() && r.contains("error") && r["error"].contains("message")) << r.dump().substr(0, 200);
    }
    auto c = s.client();
    auto h = c.Get("/health");
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200);
    auto m = c.Get("/metrics");
    ASSERT_TRUE(m);
    EXPECT_NE(m->body.find("editspec_requests_total"), std::string::npos);
}

TEST(server, api_key) {
    if (!have_shipped()) GTEST_SKIP() << "no shipped model";
    server_process s({"--api-key", "sekrit"});
    ASSERT_GT(s.pid, 0);
    int status = 0;
    json r = post(s, "/completion", "{\"prompt\": \"x\", \"n_predict\": 1}", &status);
    EXPECT_EQ(status, 401);
    EXPECT_TRUE(r.contains("error"));
    r = post(s, "/completion", "{\"prompt\": \"x\", \"n_predict\": 1}", &status, {{"Authorization", "Bearer sekrit"}});
    EXPECT_EQ(status, 200) << r.dump();
}

// the cache key a balancer routes by (deploy/): prompt_cache_key, else user, else X-Session-Id, echoed
// in X-Editspec-Cache-Key; one past 256 bytes or with a control byte is a 400 naming the field
TEST(server, cache_key_is_echoed) {
    if (!have_shipped()) GTEST_SKIP() << "no shipped model";
    server_process s({});
    ASSERT_GT(s.pid, 0);
    auto c = s.client();
    const std::string chat = R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2)";
    auto r = c.Post("/v1/chat/completions", chat + R"(, "prompt_cache_key": "conv-1", "user": "u"})", "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->get_header_value("X-Editspec-Cache-Key"), "conv-1");
    r = c.Post("/v1/chat/completions", chat + R"(, "user": "u-2"})", "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->get_header_value("X-Editspec-Cache-Key"), "u-2");
    r = c.Post("/completion", {{"X-Session-Id", "doc-7"}}, R"({"prompt": "def f", "n_predict": 2, "stream": true})",
               "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->get_header_value("X-Editspec-Cache-Key"), "doc-7");
    r = c.Post("/v1/chat/completions", chat + R"(, "prompt_cache_key": ")" + std::string(300, 'k') + R"("})", "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400);
    EXPECT_EQ(json::parse(r->body)["error"]["param"], "prompt_cache_key") << r->body;
    r = c.Post("/v1/chat/completions", chat + R"(, "prompt_cache_key": "a\u0001b"})", "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    r = c.Post("/v1/chat/completions", chat + R"(, "prompt_cache_key": 7})", "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
}

// --alias: more names in /v1/models (clients switch features on by model name); a request naming
// one is answered by the loaded model and echoes the name
TEST(server, aliases_in_the_model_list) {
    if (!have_shipped()) GTEST_SKIP() << "no shipped model";
    server_process s({"--alias", "gpt-4o", "--alias", "editspec"});
    ASSERT_GT(s.pid, 0);
    auto res = s.client().Get("/v1/models");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200);
    const json m = json::parse(res->body);
    ASSERT_EQ(m["data"].size(), 3u) << m.dump();
    EXPECT_EQ(m["data"][1]["id"], "gpt-4o");
    EXPECT_EQ(m["data"][2]["id"], "editspec");
    int status = 0;
    const json r = post(s, "/v1/completions", R"({"model": "gpt-4o", "prompt": "def f", "max_tokens": 2})", &status);
    EXPECT_EQ(status, 200) << r.dump();
    EXPECT_EQ(r["model"], "gpt-4o");
}

// llama-server's /tokenize and /detokenize: the model's own tokens (as editspec's tokenizer gives them),
// pieces on request, and back to the text
TEST(server, tokenize_and_detokenize) {
    if (!have_shipped()) GTEST_SKIP() << "no shipped model";
    server_process s({});
    ASSERT_GT(s.pid, 0);
    const std::string code = "def area(w, h):\n    return w * h  # café\n";
    int status = 0;
    const json t = post(s, "/tokenize", json{{"content", code}}.dump(), &status);
    ASSERT_EQ(status, 200) << t.dump();
    const token_vec want = test::load_or_fail(k_target, true)->tokenize(code, false, true);
    ASSERT_EQ(t["tokens"].size(), want.size()) << t.dump();
    for (size_t i = 0; i < want.size(); i++) EXPECT_EQ(t["tokens"][i].get<int>(), want[i]) << i;
    const json ts = post(s, "/tokenize", json{{"content", code}, {"add_special", true}, {"with_pieces", true}}.dump(), &status);
    ASSERT_EQ(status, 200) << ts.dump();
    ASSERT_GE(ts["tokens"].size(), want.size());
    std::string pieces;
    for (const json & p : ts["tokens"]) pieces += p["piece"].get<std::string>();
    EXPECT_NE(pieces.find("def area"), std::string::npos) << ts.dump();
    const json d = post(s, "/detokenize", json{{"tokens", t["tokens"]}}.dump(), &status);
    ASSERT_EQ(status, 200) << d.dump();
    EXPECT_EQ(d["content"], code);
    post(s, "/detokenize", R"({"tokens": [999999999]})", &status);
    EXPECT_EQ(status, 400);
}

// /v1/sessions: a document whose KV cache follows its edits; the predicted line equals the CLI's
// (`editspec session`, same strategy and edits); bounded in number; bad input gets a JSON error
TEST(server, document_sessions) {
    if (!have_shipped()) GTEST_SKIP() << "no shipped model";
    server_process s({"--max-sessions", "2"});
    ASSERT_GT(s.pid, 0);
    const std::string doc = "def area(w, h):\n    return w * h\n\n\ndef volume(w, h, d):\n    return area(w, h) * d\n\n\ndef perimeter(w, h):\n";
    int status = 0;
    const json c = post(s, "/v1/sessions", json{{"text", doc}, {"strategy", "pie"}}.dump(), &status);
    ASSERT_EQ(status, 200) << c.dump();
    const std::string id = c["id"];
    const size_t at = doc.find("    return area");
    const json e = post(s, "/v1/sessions/" + id + "/edits",
                        json{{"edits", {{{"offset", at}, {"delete", 0}, {"insert", "    # the box's volume\n"}}}}}.dump(), &status);
    ASSERT_EQ(status, 200) << e.dump();
    EXPECT_GT(e["edits"][0]["stale"].get<int>(), 0) << e.dump();
    const json p = post(s, "/v1/sessions/" + id + "/complete", json{{"max_tokens", 32}}.dump(), &status);
    ASSERT_EQ(status, 200) << p.dump();
    test::temp_dir tmp;
    std::ofstream(tmp.path / "s.jsonl") << json{{"op", "open"}, {"text", doc}}.dump() << "\n"
                                        << json{{"op", "edit"}, {"offset", at}, {"delete", 0}, {"insert", "    # the box's volume\n"}}.dump() << "\n"
                                        << json{{"op", "complete"}, {"n", 32}}.dump() << "\n";
    std::string out;
    ASSERT_EQ(test::run_command(std::string(EDITSPEC_BIN) + " session " + (tmp.path / "s.jsonl").string() + " -m " + k_target +
                                    " -t 1 --strategy pie --text", &out), 0) << out;
    EXPECT_EQ(p["line"].get<std::string>() + "\n", out);
    // errors: unknown session, an edit outside the document, a body that is not JSON
    post(s, "/v1/sessions/sess-999/complete", "{}", &status);
    EXPECT_EQ(status, 404);
    const json bad = post(s, "/v1/sessions/" + id + "/edits", json{{"offset", 100000}}.dump(), &status);
    EXPECT_EQ(status, 400);
    EXPECT_NE(bad["error"]["message"].get<std::string>().find("outside the document"), std::string::npos) << bad.dump();
    post(s, "/v1/sessions", "{not json", &status);
    EXPECT_EQ(status, 400);
    post(s, "/v1/sessions", json{{"text", doc}, {"strategy", "magic"}}.dump(), &status);
    EXPECT_EQ(status, 400);
    // bounded: a third session is refused while two are in use; closing one makes room. (The second:
    // the exact strategy, by the name a request's --kv-reuse gives it too, echoed as sessions say it.)
    const json r = post(s, "/v1/sessions", json{{"text", doc}, {"strategy", "prefix"}}.dump(), &status);
    EXPECT_EQ(status, 200);
    EXPECT_EQ(r.value("strategy", ""), "recompute") << r.dump();
    post(s, "/v1/sessions", json{{"text", doc}}.dump(), &status);
    EXPECT_EQ(status, 429);
    auto cl = s.client();
    auto d = cl.Delete(("/v1/sessions/" + id).c_str());
    ASSERT_TRUE(d);
    EXPECT_EQ(d->status, 200);
    post(s, "/v1/sessions", json{{"text", doc}}.dump(), &status);
    EXPECT_EQ(status, 200);
    EXPECT_EQ(s.client().Get("/health")->status, 200);
}

// The workflow an editor with a live document sends: open the file as a session, type into it
// (keystroke-sized edits), then ask for an apply that names the session. The apply starts from the
// document's KV (PIE shifts it into the prompt): it encodes little more than its snippet and the
// template's text, and the session goes on after it (more edits, a completion). Every apply of the
// same file on a plain slot (--kv-reuse prefix, the file first) reuses the whole file exactly and
// answers as a cold server does, also when the slot moved on to another text in between (the prompt
// store loads the file back).
// (applies keep the whole file in their prompt here, --apply-view file: a second apply of a file then
// reuses it; by default a constrained apply off a session shows the snippet alone, issue 59)
TEST(server, requests_start_from_a_document_session) {
    if (!have_shipped()) GTEST_SKIP() << "no shipped model";
    server_process s({"--apply-view", "file"});
    ASSERT_GT(s.pid, 0);
    std::string doc = "def area(w, h):\n    return w * h\n\n\ndef volume(w, h, d):\n    return area(w, h) * d\n\n\n"
                      "def perimeter(w, h):\n    return 2 * (w + h)\n\n\ndef describe(w, h):\n"
                      "    return f'{w} by {h}: area {area(w, h)}, perimeter {perimeter(w, h)}'\n";
    int status = 0;
    const json c = post(s, "/v1/sessions", json{{"text", doc}, {"strategy", "pie"}}.dump(), &status);
    ASSERT_EQ(status, 200) << c.dump();
    const std::string id = c["id"];
    // typing "    # the box's volume\n" one keystroke at a time above volume's return
    const std::string typed = "    # the box's volume\n";
    size_t at = doc.find("    return area");
    for (size_t i = 0; i < typed.size(); i++) {
        const json e = post(s, "/v1/sessions/" + id + "/edits",
                            json{{"offset", at + i}, {"delete", 0}, {"insert", typed.substr(i, 1)}}.dump(), &status);
        ASSERT_EQ(status, 200) << e.dump();
    }
    doc.insert(at, typed);
    const std::string update = "# ... existing code ...\ndef perimeter(w, h):\n    return 2 * w + 2 * h\n# ... existing code ...\n";
    const json a = post(s, "/v1/apply", json{{"code", doc}, {"update", update}, {"session", id}, {"max_tokens", 160}}.dump(), &status);
    ASSERT_EQ(status, 200) << a.dump();
    const json & d = a["usage"]["prompt_tokens_details"];
    const int prompt = a["usage"]["prompt_tokens"], encoded = d["encoded_tokens"], shifted = d["shifted_tokens"];
    // the document comes from the session (but its last token, which the session keeps out of its KV,
    // and a token at its edge); everything else is the template and the snippet
    const int n_doc = (int) test::load_or_fail(k_target, true)->tokenize(doc, false, false).size();
    EXPECT_GE(shifted, n_doc - 2) << a.dump();
    EXPECT_LE(encoded, prompt - n_doc + 2) << "document " << n_doc << " tokens; " << a.dump();
    // the session lives on: another edit and a completion
    const json e = post(s, "/v1/sessions/" + id + "/edits", json{{"offset", 0}, {"delete", 0}, {"insert", "# shapes\n"}}.dump(), &status);
    ASSERT_EQ(status, 200) << e.dump();
    EXPECT_GT(e["tokens"].get<int>(), c["tokens"].get<int>() + 5) << e.dump(); // the typed line and "# shapes"
    const json p = post(s, "/v1/sessions/" + id + "/complete", json{{"max_tokens", 16}}.dump(), &status);
    ASSERT_EQ(status, 200) << p.dump();
    // a session that is not there: 404 naming the field
    const json gone = post(s, "/v1/apply", json{{"code", doc}, {"update", update}, {"session", "sess-0"}}.dump(), &status);
    EXPECT_EQ(status, 404) << gone.dump();
    EXPECT_EQ(gone["error"]["param"], "session") << gone.dump();
    // on a slot: a second apply of the same file reuses the file (and the template before it) exactly,
    // and both answers are a cold server's
    const std::string update2 = "# ... existing code ...\ndef area(w, h):\n    return h * w\n# ... existing code ...\n";
    const json a1 = post(s, "/v1/apply", json{{"code", doc}, {"update", update}}.dump(), &status);
    ASSERT_EQ(status, 200) << a1.dump();
    const json a2 = post(s, "/v1/apply", json{{"code", doc}, {"update", update2}}.dump(), &status);
    ASSERT_EQ(status, 200) << a2.dump();
    EXPECT_GE(a2["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(),
              (int) test::load_or_fail(k_target, true)->tokenize(doc, false, false).size()) << a2.dump();
    server_process cold({"--apply-view", "file"});
    ASSERT_GT(cold.pid, 0);
    const json c2 = post(cold, "/v1/apply", json{{"code", doc}, {"update", update2}}.dump(), &status);
    ASSERT_EQ(status, 200) << c2.dump();
    EXPECT_EQ(c2["merged_code"], a2["merged_code"]);
    EXPECT_EQ(c2["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0) << c2.dump();
    // the slot moves on to another text; the apply after it loads the file back from the prompt
    // store (--cache-ram) and still answers as the cold server
    std::string other;
    for (int i = 0; i < 30; i++) other += "value_" + std::to_string(i) + " = " + std::to_string(i * 7) + "\n";
    const json o = post(s, "/completion", json{{"prompt", other}, {"n_predict", 4}}.dump(), &status);
    ASSERT_EQ(status, 200) << o.dump();
    const json a3 = post(s, "/v1/apply", json{{"code", doc}, {"update", update2}}.dump(), &status);
    ASSERT_EQ(status, 200) << a3.dump();
    EXPECT_GE(a3["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), n_doc) << a3.dump();
    EXPECT_EQ(c2["merged_code"], a3["merged_code"]);
    auto mc = s.client();
    auto m = mc.Get("/metrics");
    ASSERT_TRUE(m);
    EXPECT_NE(m->body.find("editspec_prompt_store_restored_total 1\n"), std::string::npos) << m->body;
}

// Tools (chat-tools.h) through the server: the model's template renders them (a Qwen2.5 template given by
// --chat-template-file on a model of Qwen2.5-Coder's vocabulary), a conversation with a call and its result
// is answered, a reply is answered in OpenAI's schema whole and streamed, and bad tool fields get 400s. A
// random-weight model writes no calls: the reading of calls is test-chat-tools' (the same parser).
TEST(server, tools_render_into_the_template_and_answer_in_openai_schema) {
    if (!chat_tools_available()) GTEST_SKIP() << "built without llama.cpp's common library";
    const std::string tmpl = std::string(EDITSPEC_VOCAB_DIR) + "/../templates/Qwen-Qwen2.5-7B-Instruct.jinja";
    server_process s({"-m", test::tiny_qwen2_path(), "--chat-template-file", tmpl, "--max-tokens", "200"});
    ASSERT_GT(s.pid, 0);
    const json tools = json::array({{{"type", "function"},
                                     {"function", {{"name", "get_weather"},
                                                   {"description", "The weather in a city now"},
                                                   {"parameters", {{"type", "object"},
                                                                   {"properties", {{"city", {{"type", "string"}}}}},
                                                                   {"required", {"city"}}}}}}}});
    const json ask = json::array({{{"role", "user"}, {"content", "What is the weather in Paris?"}}});
    int status = 0;
    const json plain = post(s, "/v1/chat/completions", json{{"messages", ask}, {"max_tokens", 16}}.dump(), &status);
    ASSERT_EQ(status, 200) << plain.dump();
    const json with = post(s, "/v1/chat/completions", json{{"messages", ask}, {"tools", tools}, {"max_tokens", 16}}.dump(), &status);
    ASSERT_EQ(status, 200) << with.dump();
    // the tools are in the prompt: their schema's tokens and the template's instructions around them
    EXPECT_GT(with["usage"]["prompt_tokens"].get<int>(), plain["usage"]["prompt_tokens"].get<int>() + 40) << with.dump();
    auto check_message = [](const json & r) {
        const json & c = r["choices"][0];
        const json & msg = c["message"];
        EXPECT_EQ(msg["role"], "assistant");
        EXPECT_TRUE(msg["content"].is_string() || (msg["content"].is_null() && msg.contains("tool_calls"))) << r.dump();
        const std::string finish = c["finish_reason"];
        EXPECT_TRUE(finish == "stop" || finish == "length" || finish == "tool_calls") << finish;
        EXPECT_EQ(finish == "tool_calls", msg.contains("tool_calls")) << r.dump();
    };
    check_message(with);
    // a call and its result, the next turn
    json turn = ask;
    turn.push_back({{"role", "assistant"},
                    {"content", nullptr},
                    {"tool_calls", {{{"id", "call_1"}, {"type", "function"},
                                     {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}}}}}}});
    turn.push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny, 21 C"}});
    const json next = post(s, "/v1/chat/completions", json{{"messages", turn}, {"tools", tools}, {"tool_choice", "auto"}, {"max_tokens", 16}}.dump(), &status);
    ASSERT_EQ(status, 200) << next.dump();
    check_message(next);
    EXPECT_GT(next["usage"]["prompt_tokens"].get<int>(), with["usage"]["prompt_tokens"].get<int>());
    // a named function, and none
    const std::vector<json> choices = {json{{"type", "function"}, {"function", {{"name", "get_weather"}}}}, json("none"), json("required")};
    for (const json & choice : choices) {
        const json r = post(s, "/v1/chat/completions", json{{"messages", ask}, {"tools", tools}, {"tool_choice", choice}, {"max_tokens", 16}}.dump(), &status);
        EXPECT_EQ(status, 200) << choice.dump() << r.dump();
    }
    // tool_choice required: the answer is held to the template's grammar (labelled "constrained"): the turn
    // cannot end before a call (this model's text runs to max_tokens; test-chat-tools checks the grammar
    // token by token), and the stream carries the same answer as deltas
    const json units = json::array({{{"type", "function"},
                                     {"function", {{"name", "set_units"},
                                                   {"parameters", {{"type", "object"},
                                                                   {"properties", {{"unit", {{"type", "string"}, {"enum", {"celsius", "fahrenheit"}}}}}},
                                                                   {"required", {"unit"}},
                                                                   {"additionalProperties", false}}}}}}});
    const json forced_body = json{{"messages", ask}, {"tools", units}, {"tool_choice", "required"}, {"max_tokens", 48}};
    const json forced = post(s, "/v1/chat/completions", forced_body.dump(), &status);
    ASSERT_EQ(status, 200) << forced.dump();
    EXPECT_EQ(forced["constrained"], true) << forced.dump();
    const std::string ffinish = forced["choices"][0]["finish_reason"];
    EXPECT_TRUE(ffinish == "length" || ffinish == "tool_calls") << forced.dump();
    check_message(forced);
    {
        json body = forced_body;
        body["stream"] = true;
        auto c = s.client();
        auto res = c.Post("/v1/chat/completions", body.dump(), "application/json");
        ASSERT_TRUE(res);
        std::istringstream lines(res->body);
        std::string line, finish, content;
        json calls = json::array();
        while (std::getline(lines, line)) {
            if (line.rfind("data: {", 0) != 0) continue;
            const json ch = json::parse(line.substr(6))["choices"][0];
            if (ch["delta"].contains("content")) content += ch["delta"]["content"].get<std::string>();
            if (ch["delta"].contains("tool_calls")) {
                const json & d = ch["delta"]["tool_calls"][0];
                const size_t i = d["index"];
                while (calls.size() <= i) calls.push_back({{"name", ""}, {"arguments", ""}});
                if (d["function"].contains("name")) calls[i]["name"] = d["function"]["name"];
                calls[i]["arguments"] = calls[i]["arguments"].get<std::string>() + d["function"]["arguments"].get<std::string>();
            }
            if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
        }
        EXPECT_EQ(finish, ffinish) << res->body;
        const json & msg = forced["choices"][0]["message"];
        if (msg["content"].is_string()) EXPECT_EQ(content, msg["content"]) << res->body;
        const json whole = msg.contains("tool_calls") ? msg["tool_calls"] : json::array();
        ASSERT_EQ(calls.size(), whole.size()) << res->body;
        for (size_t i = 0; i < calls.size(); ++i) {
            EXPECT_EQ(calls[i]["name"], whole[i]["function"]["name"]);
            EXPECT_EQ(calls[i]["arguments"], whole[i]["function"]["arguments"]);
        }
    }
    // response_format: a JSON answer held to its schema's grammar; here the schema fixes it up to a choice,
    // so even this model's answer is the object, whole
    const json schema = {{"type", "object"},
                         {"properties", {{"unit", {{"type", "string"}, {"enum", {"celsius", "fahrenheit"}}}}}},
                         {"required", {"unit"}},
                         {"additionalProperties", false}};
    const json structured = post(s, "/v1/chat/completions",
                                 json{{"messages", ask}, {"max_tokens", 64},
                                      {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "units"}, {"schema", schema}}}}}}.dump(),
                                 &status);
    ASSERT_EQ(status, 200) << structured.dump();
    EXPECT_EQ(structured["constrained"], true);
    EXPECT_EQ(structured["choices"][0]["finish_reason"], "stop") << structured.dump();
    const json answer = json::parse(structured["choices"][0]["message"]["content"].get<std::string>(), nullptr, false);
    ASSERT_TRUE(answer.is_object()) << structured.dump();
    EXPECT_EQ(answer.size(), 1u) << answer.dump();
    EXPECT_TRUE(answer["unit"] == "celsius" || answer["unit"] == "fahrenheit") << answer.dump();
    const json any_object = post(s, "/v1/chat/completions",
                                 json{{"messages", ask}, {"max_tokens", 16}, {"response_format", {{"type", "json_object"}}}}.dump(), &status);
    EXPECT_EQ(status, 200) << any_object.dump();
    EXPECT_EQ(any_object["constrained"], true);
    // "constrain": false: the model's free output, labelled so
    const json free_out = post(s, "/v1/chat/completions", json{{"messages", ask}, {"tools", units}, {"tool_choice", "required"}, {"constrain", false}, {"max_tokens", 16}}.dump(), &status);
    ASSERT_EQ(status, 200) << free_out.dump();
    EXPECT_EQ(free_out["constrained"], false);
    // streamed: chunks of OpenAI's shape, the last with a finish_reason, then [DONE]
    {
        auto c = s.client();
        std::string body;
        auto res = c.Post("/v1/chat/completions", json{{"messages", ask}, {"tools", tools}, {"stream", true}, {"max_tokens", 16}}.dump(), "application/json");
        ASSERT_TRUE(res);
        ASSERT_EQ(res->status, 200);
        std::istringstream lines(res->body);
        std::string line, finish, content;
        bool done = false;
        while (std::getline(lines, line)) {
            if (line.rfind("data: ", 0) != 0) continue;
            if (line == "data: [DONE]") {
                done = true;
                continue;
            }
            const json ev = json::parse(line.substr(6));
            ASSERT_EQ(ev["object"], "chat.completion.chunk") << line;
            const json & ch = ev["choices"][0];
            if (ch["delta"].contains("content")) content += ch["delta"]["content"].get<std::string>();
            if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
        }
        EXPECT_TRUE(done);
        EXPECT_FALSE(finish.empty());
        // greedy: the stream's text is the whole answer's
        if (!with["choices"][0]["message"]["content"].is_null()) EXPECT_EQ(content, with["choices"][0]["message"]["content"]);
    }
    // bad tool fields: 400 naming the field
    const std::vector<std::pair<json, std::string>> bad = {
        {json{{"messages", ask}, {"tools", "get_weather"}}, "tools"},
        {json{{"messages", ask}, {"tools", {{{"type", "function"}, {"function", {{"description", "no name"}}}}}}}, "tools.function"},
        {json{{"messages", ask}, {"tools", tools}, {"tool_choice", "sometimes"}}, "tool_choice"},
        {json{{"messages", ask}, {"tools", tools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}}}, "tool_choice"},
        {json{{"messages", json::array({{{"role", "assistant"}, {"tool_calls", "x"}}})}}, "messages.tool_calls"},
        {json{{"messages", ask}, {"tools", tools}, {"prediction", {{"type", "content"}, {"content", "x"}}}}, "tools"},
        {json{{"messages", ask}, {"tools", tools}, {"temperature", 0.7}, {"constrain", true}}, "constrain"},
        {json{{"messages", ask}, {"temperature", 0.7}, {"response_format", {{"type", "json_object"}}}}, "response_format"},
        {json{{"messages", ask}, {"response_format", {{"type", "xml"}}}}, "response_format"},
        {json{{"messages", ask}, {"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", "x"}}}}}}, "response_format.json_schema.schema"},
    };
    for (const auto & [body, param] : bad) {
        const json r = post(s, "/v1/chat/completions", body.dump(), &status);
        EXPECT_EQ(status, 400) << body.dump() << r.dump();
        EXPECT_EQ(r["error"]["param"], param) << body.dump() << r.dump();
    }
}

// the server's reading of a reply with calls: ids given where the model wrote none, kept as the reply
// grows, OpenAI's tool_calls shape, finish_reason "tool_calls" only where the model ended its turn
TEST(server, a_replys_calls_get_ids_and_openais_shape) {
    if (!chat_tools_available()) GTEST_SKIP() << "built without llama.cpp's common library";
    auto m = test::load_or_fail(test::tiny_qwen2_path(), true);
    ASSERT_TRUE(m);
    chat_templates t;
    std::string err;
    ASSERT_TRUE(chat_templates_load(*m, test::read_text(std::string(EDITSPEC_VOCAB_DIR) + "/../templates/Qwen-Qwen2.5-7B-Instruct.jinja"), t, err)) << err;
    served_request g;
    chat_tools_input in;
    in.messages = {{"user", "Weather in Paris and Rome?"}};
    in.tools = {{"get_weather", "", R"({"type": "object", "properties": {"city": {"type": "string"}}})"}};
    in.parallel_tool_calls = true;
    ASSERT_TRUE(chat_tools_render(t, in, g.rq.jinja, err)) << err;
    const std::string one = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    const std::string two = one + "\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>";
    chat_reply_reader reader;
    const chat_reply first = reader.read(g, one, true);
    ASSERT_EQ(first.tool_calls.size(), 1u);
    const chat_reply both = reader.read(g, two, false);
    ASSERT_EQ(both.tool_calls.size(), 2u);
    EXPECT_EQ(both.tool_calls[0].id, first.tool_calls[0].id); // kept as the reply grew
    EXPECT_NE(both.tool_calls[0].id, both.tool_calls[1].id);
    EXPECT_TRUE(both.tool_calls[1].id.starts_with("call_") && both.tool_calls[1].id.size() == 29) << both.tool_calls[1].id;
    const json calls = tool_calls_json(both.tool_calls);
    EXPECT_EQ(calls[1], json({{"id", both.tool_calls[1].id}, {"type", "function"},
                               {"function", {{"name", "get_weather"}, {"arguments", both.tool_calls[1].arguments}}}}));
    EXPECT_EQ(json::parse(calls[1]["function"]["arguments"].get<std::string>()), json({{"city", "Rome"}}));
    g.r.stop = STOP_REASON_EOG;
    EXPECT_STREQ(chat_finish_reason(g, both), "tool_calls");
    g.r.stop = STOP_REASON_MAX_TOKENS;
    EXPECT_STREQ(chat_finish_reason(g, both), "length");
    g.r.stop = STOP_REASON_EOG;
    EXPECT_STREQ(chat_finish_reason(g, reader.read(g, "No call.", false)), "stop");
}
