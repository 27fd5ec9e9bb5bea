// A merge is whole or it is an error (issue 69): `editspec apply` and every apply shape of `editspec
// serve` (/v1/apply, Relace's /v1/code/apply, Morph's chat message, whole and streamed) never hand back
// or write a file cut short by the context, max_tokens, a client that leaves or a server that stops.
// Property tests over random files around the context's edge on the shipped model: a success holds the
// whole merge (the snippet's change and the file's last line, which the constraint must write), a
// refusal names the sizes, and a refused --in-place leaves the file byte-identical with nothing beside it.
#include "common/test-util.h"
#include "server/server-process.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <spawn.h>
#include <sys/wait.h>
#include <thread>

using json = nlohmann::json;
using namespace editspec;
using test::k_target;
using test::post;
using test::server_process;
namespace fs = std::filesystem;

namespace {

bool have_shipped() { return fs::exists(k_target); }

void write_text(const fs::path & p, const std::string & s) { std::ofstream(p, std::ios::binary) << s; }

// a Python module of n_lines lines, its last line unique ("# end of module ID"), and a snippet that
// changes one line in its middle with the rest elided: every whole merge ends with that last line
struct apply_case {
    std::string code, update, changed, last;
};

apply_case make_case(std::mt19937 & rng, int32_t n_lines, int32_t id) {
    apply_case c;
    std::vector<std::string> lines;
    for (int32_t i = 0; (int32_t) lines.size() < n_lines - 1; i++) {
        if (i % 6 == 0) lines.push_back("def step_" + std::to_string(i) + "(x):");
        else lines.push_back("    x = x * " + std::to_string(rng() % 97) + " + " + std::to_string(i));
    }
    c.last = "# end of module " + std::to_string(id);
    lines.push_back(c.last);
    for (const std::string & l : lines) c.code += l + "\n";
    size_t k = lines.size() / 2;
    while (lines[k].rfind("def ", 0) == 0) k++;
    c.changed = "    x = x - " + std::to_string(1000 + id) + "  # changed";
    c.update = "# ... existing code ...\n" + lines[k - 1] + "\n" + c.changed + "\n# ... existing code ...\n";
    return c;
}

// a merge handed back as success is whole: the change in it and the file's last line at its end
::testing::AssertionResult merge_whole(const apply_case & c, const std::string & merged) {
    std::string tail = merged;
    while (!tail.empty() && (tail.back() == '\n' || tail.back() == '`' || tail.back() == ' ')) tail.pop_back();
    const bool ends = tail.size() >= c.last.size() && tail.compare(tail.size() - c.last.size(), c.last.size(), c.last) == 0;
    if (ends && merged.find(c.changed) != std::string::npos) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "a partial merge returned as success (" << merged.size() << " of the file's "
                                         << c.code.size() << " bytes; ends with the last line: " << ends << ")";
}

// an error body in OpenAI's schema
::testing::AssertionResult openai_error(const json & r) {
    if (r.is_object() && r.contains("error") && r["error"].is_object() && r["error"].contains("message") &&
        r["error"]["message"].is_string() && !r["error"]["message"].get<std::string>().empty() && r["error"].contains("type")) {
        return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << "not an OpenAI error: " << r.dump();
}

enum apply_shape { SHAPE_APPLY, SHAPE_RELACE, SHAPE_MORPH, SHAPE_MORPH_STREAM, SHAPE_COUNT };

std::string apply_body(apply_shape shape, const apply_case & c, int32_t max_tokens, bool free = false) {
    json j;
    if (shape == SHAPE_APPLY) j = {{"code", c.code}, {"update", c.update}};
    if (shape == SHAPE_RELACE) j = {{"initial_code", c.code}, {"edit_snippet", c.update}};
    if (shape == SHAPE_MORPH || shape == SHAPE_MORPH_STREAM) {
        j = {{"model", "morph-v3-fast"},
             {"messages", {{{"role", "user"}, {"content", "<code>" + c.code + "</code>\n<update>" + c.update + "</update>"}}}}};
        if (shape == SHAPE_MORPH_STREAM) j["stream"] = true;
    }
    if (max_tokens >= 0) j["max_tokens"] = max_tokens;
    if (free) j["constrain"] = false; // the model's free output: it may run to the context's end
    return j.dump();
}

const char * apply_path(apply_shape shape) {
    return shape == SHAPE_APPLY ? "/v1/apply" : shape == SHAPE_RELACE ? "/v1/code/apply" : "/v1/chat/completions";
}

// what one request got: the HTTP status, the merged code of a success, the error of a refusal
struct apply_answer {
    int status = -1;      // -1: no answer (a transport error)
    bool merged = false;  // a success that hands back a file
    std::string code;
    std::string finish;   // the finish_reason a success carries ("" where the shape has none)
    json error;           // the error object
};

apply_answer send_apply(const server_process & s, apply_shape shape, const apply_case & c, int32_t max_tokens,
                        double timeout_s = 120.0, bool free = false) {
    apply_answer a;
    httplib::Client cl("127.0.0.1", s.port);
    cl.set_read_timeout(std::chrono::milliseconds((int64_t) (timeout_s * 1000)));
    auto r = cl.Post(apply_path(shape), apply_body(shape, c, max_tokens, free), "application/json");
    if (!r) return a;
    a.status = r->status;
    if (shape == SHAPE_MORPH_STREAM && r->status == 200) {
        // server-sent events: content deltas, then a finish chunk, or an error event in its place
        std::string text, finish;
        size_t at = 0;
        while ((at = r->body.find("data: ", at)) != std::string::npos) {
            const size_t end = r->body.find("\n\n", at);
            const std::string ev = r->body.substr(at + 6, end == std::string::npos ? std::string::npos : end - at - 6);
            at = end == std::string::npos ? r->body.size() : end;
            if (ev == "[DONE]") continue;
            const json j = json::parse(ev, nullptr, false);
            if (j.contains("error")) {
                a.error = j;
                return a;
            }
            if (!j.contains("choices") || j["choices"].empty()) continue;
            const json & ch = j["choices"][0];
            if (ch.contains("delta") && ch["delta"].contains("content")) text += ch["delta"]["content"].get<std::string>();
            if (ch.contains("finish_reason") && ch["finish_reason"].is_string()) finish = ch["finish_reason"];
        }
        // a stream that ends without an error hands back a file, whatever its finish_reason says
        a.merged = true;
        a.code = text;
        a.finish = finish;
        return a;
    }
    const json j = json::parse(r->body, nullptr, false);
    if (r->status != 200) {
        a.error = j;
        return a;
    }
    a.merged = true;
    if (shape == SHAPE_APPLY) a.finish = j.value("finish_reason", std::string());
    if (shape == SHAPE_MORPH) a.finish = j["choices"][0].value("finish_reason", std::string());
    a.code = shape == SHAPE_APPLY    ? j.value("merged_code", std::string())
             : shape == SHAPE_RELACE ? j.value("mergedCode", std::string())
                                     : j["choices"][0]["message"].value("content", std::string());
    return a;
}

} // namespace

// The two cases: an 18,000-character file (3,000 short lines) and a megabyte's, a two-line
// snippet. The CLI exits non-zero naming the sizes and the flag, big.py byte-identical; every apply
// shape answers 400 context_length_exceeded naming the sizes before decoding (seconds, not minutes)
TEST(merge_whole, files_over_the_context_are_refused_before_decoding) {
    if (!have_shipped()) GTEST_SKIP() << "no shipped model";
    test::temp_dir d;
    std::string big;
    for (int i = 0; i < 3000; i++) big += "v" + std::to_string(i % 1000) + " = " + std::to_string(i % 7) + "\n";
    std::string huge;
    while (huge.size() < (1u << 20)) huge += big;
    const std::string update = "# ... existing code ...\nv999 = 42\n";
    write_text(d.path / "big.py", big);
    write_text(d.path / "change.py", update);
    std::string out;
    const std::string cmd = std::string(EDITSPEC_BIN) + " apply -m " + k_target + " -t 1 -f " + (d.path / "big.py").string() +
                            " -u " + (d.path / "change.py").string();
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(test::run_command(cmd + " --in-place 2>&1", &out), 2) << out;
    const double cli_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_NE(out.find("--ctx-size"), std::string::npos) << out;
    EXPECT_NE(out.find("context holds 4096"), std::string::npos) << out;
    EXPECT_EQ(test::read_text(d.path / "big.py"), big);
    EXPECT_EQ(d.names(), (std::vector<std::string>{"big.py", "change.py"})); // no backup, no temp file
    EXPECT_EQ(test::run_command(cmd + " 2>/dev/null", &out), 2);
    EXPECT_TRUE(out.empty()) << out.substr(0, 200); // nothing on stdout either
    EXPECT_LT(cli_s, 30.0);

    server_process s({});
    ASSERT_GT(s.pid, 0);
    for (const std::string * code : {&big, &huge}) {
        const apply_case c{*code, update, "v999 = 42", ""};
        for (int sh = 0; sh < SHAPE_COUNT; sh++) {
            const auto t = std::chrono::steady_clock::now();
            const apply_answer a = send_apply(s, (apply_shape) sh, c, -1);
            const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
            SCOPED_TRACE(std::string(apply_path((apply_shape) sh)) + " with " + std::to_string(code->size()) + " bytes");
            EXPECT_EQ(a.status, 400) << a.error.dump().substr(0, 300);
            ASSERT_TRUE(openai_error(a.error));
            EXPECT_EQ(a.error["error"]["code"], "context_length_exceeded");
            const std::string msg = a.error["error"]["message"];
            EXPECT_NE(msg.find("--ctx-size"), std::string::npos) << msg;
            EXPECT_NE(msg.find("the file is"), std::string::npos) << msg;
            // the bar: under 1 s for 18 KB, under 5 s for 1 MB on 2 cores; asserted with room for a
            // busy or sanitized run (the figures: docs/results/issue69-merge-whole)
            EXPECT_LT(secs, code == &big ? 10.0 : 30.0);
            printf("refused %s, %zu bytes: %.2f s\n", apply_path((apply_shape) sh), code->size(), secs);
        }
    }
    // the server still serves
    int status = 0;
    const json ok = post(s, "/v1/apply", json{{"code", "x = 1\ny = 2\n"}, {"update", "x = 3\n# ... existing code ...\n"}}.dump(), &status);
    EXPECT_EQ(status, 200) << ok.dump();
}

// 160 random (file, snippet, context, max_tokens, shape, client that leaves) cases through the server
// at two context sizes: no partial merge returned as success; every refusal an OpenAI error
TEST(merge_whole, server_property_no_partial_merge_on_any_shape) {
    if (!have_shipped()) GTEST_SKIP() << "no shipped model";
    std::mt19937 rng(69);
    int n_cases = 0, n_merged = 0, n_refused = 0, n_cut = 0, n_left = 0;
    for (const int32_t n_ctx : {384, 768}) {
        server_process s({"--ctx-size", std::to_string(n_ctx), "--max-tokens", "2048"});
        ASSERT_GT(s.pid, 0);
        for (int k = 0; k < 80; k++, n_cases++) {
            // files of 0.3x to 1.3x the context's tokens (about 9 tokens a line)
            const int32_t n_lines = (int32_t) (n_ctx * (0.3 + 1.0 * (rng() % 1000) / 1000.0) / 9.0);
            const apply_case c = make_case(rng, std::max(n_lines, 8), n_cases);
            const apply_shape shape = (apply_shape) (rng() % SHAPE_COUNT);
            // max_tokens: none, or from a third of the file's tokens to twice them
            const int32_t max_tokens = rng() % 2 ? -1 : (int32_t) (n_lines * 9 * (0.3 + 1.7 * (rng() % 1000) / 1000.0));
            const bool leaves = rng() % 8 == 0; // the client leaves after 30-300 ms
            const bool free = rng() % 4 == 0;   // unconstrained: the model's own answer, which may not end
            SCOPED_TRACE("case " + std::to_string(n_cases) + ": ctx " + std::to_string(n_ctx) + ", " + std::to_string(n_lines) +
                         " lines, " + apply_path(shape) + (shape == SHAPE_MORPH_STREAM ? " (stream)" : "") +
                         ", max_tokens " + std::to_string(max_tokens) + (leaves ? ", the client leaves" : "") +
                         (free ? ", unconstrained" : ""));
            const apply_answer a = send_apply(s, shape, c, max_tokens, leaves ? 0.03 + (rng() % 270) / 1000.0 : 120.0, free);
            if (a.status < 0) {
                ASSERT_TRUE(leaves) << "no answer from the server";
                n_left++;
                continue;
            }
            if (a.merged) {
                n_merged++;
                // a success is an answer that ended on its own; under the constraint, the whole merge
                if (shape != SHAPE_RELACE) EXPECT_EQ(a.finish, "stop") << "a merge cut short handed back as the file";
                if (!free) EXPECT_TRUE(merge_whole(c, a.code));
                continue;
            }
            ASSERT_TRUE(openai_error(a.error));
            EXPECT_EQ(a.status, 400) << a.error.dump();
            const std::string code = a.error["error"].value("code", std::string());
            EXPECT_TRUE(code == "context_length_exceeded" || code == "max_tokens_too_small" || code == "incomplete_merge")
                << a.error.dump();
            (a.error["error"]["message"].get<std::string>().find("stopped after") == std::string::npos ? n_refused : n_cut)++;
        }
        int status = 0;
        post(s, "/v1/apply", json{{"code", "x = 1\n"}, {"update", "x = 2\n"}}.dump(), &status);
        EXPECT_EQ(status, 200) << "the server serves after the cases";
    }
    printf("%d cases: %d merged whole, %d refused before decoding, %d cut short and refused, %d clients left\n", n_cases,
           n_merged, n_refused, n_cut, n_left);
    // the cases reach every side of the edge: merged, refused before decoding, cut short while decoding
    EXPECT_GT(n_merged, 20);
    EXPECT_GT(n_refused, 20);
    EXPECT_GT(n_cut, 0);
}

// 40 random cases through `editspec apply --in-place` (and without it): exit 0 with the whole merge
// written, or non-zero with the file byte-identical and nothing beside it
TEST(merge_whole, cli_property_in_place_whole_or_untouched) {
    if (!have_shipped()) GTEST_SKIP() << "no shipped model";
    std::mt19937 rng(70);
    int n_merged = 0, n_refused = 0, n_cut = 0;
    for (int k = 0; k < 40; k++) {
        const int32_t n_ctx = k % 2 ? 384 : 768;
        const int32_t n_lines = (int32_t) (n_ctx * (0.3 + 1.0 * (rng() % 1000) / 1000.0) / 9.0);
        const apply_case c = make_case(rng, std::max(n_lines, 8), k);
        const int32_t n_predict = rng() % 2 ? 0 : (int32_t) (n_lines * 9 * (0.3 + 1.7 * (rng() % 1000) / 1000.0)) + 1;
        const bool in_place = rng() % 4 != 0;
        SCOPED_TRACE("case " + std::to_string(k) + ": -c " + std::to_string(n_ctx) + ", " + std::to_string(n_lines) +
                     " lines, -n " + std::to_string(n_predict) + (in_place ? ", --in-place" : ""));
        test::temp_dir d;
        const fs::path f = d.path / "m.py";
        write_text(f, c.code);
        write_text(d.path / "u.py", c.update);
        std::string out;
        const int rc = test::run_command(std::string(EDITSPEC_BIN) + " apply -m " + k_target + " -t 1 -c " +
                                             std::to_string(n_ctx) + " -n " + std::to_string(n_predict) + " -f " + f.string() +
                                             " -u " + (d.path / "u.py").string() + (in_place ? " --in-place" : "") + " 2>/dev/null",
                                         &out);
        if (rc == 0) {
            n_merged++;
            EXPECT_TRUE(merge_whole(c, in_place ? test::read_text(f) : out));
            continue;
        }
        (rc == 2 ? n_refused : n_cut)++;
        EXPECT_TRUE(rc == 1 || rc == 2) << rc;
        EXPECT_TRUE(out.empty()) << "printed after an error: " << out.substr(0, 200);
        EXPECT_EQ(test::read_text(f), c.code);
        EXPECT_EQ(d.names(), (std::vector<std::string>{"m.py", "u.py"}));
    }
    printf("40 cases: %d merged whole, %d refused before decoding, %d cut short\n", n_merged, n_refused, n_cut);
    EXPECT_GT(n_merged, 5);
    EXPECT_GT(n_refused, 5);
}

// a stop from outside: SIGTERM to `editspec apply --in-place` while it decodes leaves the file as it
// was; SIGTERM to the server while it merges answers 503 (or closes), never a partial merge
TEST(merge_whole, sigterm_never_writes_or_returns_a_partial_merge) {
    if (!have_shipped()) GTEST_SKIP() << "no shipped model";
    std::mt19937 rng(71);
    const apply_case c = make_case(rng, 300, 1); // ~2,700 tokens: seconds of decoding
    for (int k = 0; k < 3; k++) {
        test::temp_dir d;
        const fs::path f = d.path / "m.py";
        write_text(f, c.code);
        write_text(d.path / "u.py", c.update);
        std::vector<std::string> args = {EDITSPEC_BIN, "apply", "-m", k_target, "-t", "1", "-c", "4096", "-f", f.string(),
                                         "-u", (d.path / "u.py").string(), "--in-place", "--method", "ar"};
        std::vector<char *> argv;
        for (std::string & a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        pid_t pid = -1;
        ASSERT_EQ(posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ), 0);
        std::this_thread::sleep_for(std::chrono::milliseconds(300 + 300 * k));
        kill(pid, SIGTERM);
        int st = 0;
        waitpid(pid, &st, 0);
        const std::string now = test::read_text(f);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
            EXPECT_TRUE(merge_whole(c, now)) << "finished before the signal";
        } else {
            EXPECT_EQ(now, c.code) << "case " << k;
            EXPECT_EQ(d.names(), (std::vector<std::string>{"m.py", "u.py"})) << "case " << k;
        }
    }
    for (int k = 0; k < 2; k++) {
        server_process s({"--method", "ar"});
        ASSERT_GT(s.pid, 0);
        auto pending = std::async(std::launch::async, [&] { return send_apply(s, k ? SHAPE_MORPH_STREAM : SHAPE_APPLY, c, -1); });
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        const int st = s.stop(); // SIGTERM, and the exit status
        const apply_answer a = pending.get();
        if (a.merged) {
            EXPECT_TRUE(merge_whole(c, a.code)) << "case " << k << ": finished before the signal";
        } else {
            EXPECT_TRUE(a.status < 0 || a.status == 503 || a.error.contains("error")) << a.status << " " << a.error.dump();
            EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 3) << "a stop that cut a merge short exits 3: " << st;
        }
        printf("SIGTERM to the server during %s: %s\n", k ? "a streamed apply message" : "/v1/apply",
               a.merged ? "finished first" : a.status < 0 ? "the connection closed" : a.error.dump().substr(0, 160).c_str());
    }
}
