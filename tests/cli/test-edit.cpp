// editspec edit (src/cli/cmd-edit.cpp, src/decode/edit.cpp): the prompt format, code extraction,
// the unified diff checked with patch(1), the command on a temp file with the tiny model, and the
// test that matters most: greedy reuse / reuse+lookup / efficientedit:greedy output equals
// autoregressive output on CanItEdit edit prompts. Flash attention off, one thread.
#include "common/test-util.h"
#include "editspec/apply.h"
#include "editspec/dataset.h"
#include "editspec/decoder.h"
#include "editspec/edit.h"
#include "editspec/make-model.h"
#include "editspec/methods.h"
#include "editspec/reuse.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

using namespace editspec;
namespace fs = std::filesystem;

namespace {

using test::read_text;

void write_text(const fs::path & p, const std::string & s) { std::ofstream(p, std::ios::binary) << s; }

std::string quote(const std::string & s) { return "'" + s + "'"; } // no quotes in our paths

using test::temp_dir;

// applies `diff` to a copy of `a` with patch(1); the patched text
std::string apply_patch(const std::string & a, const std::string & diff) {
    temp_dir d;
    write_text(d.path / "f", a);
    write_text(d.path / "p", diff);
    std::string out;
    const int rc = test::run_command("patch -s --no-backup-if-mismatch " + quote((d.path / "f").string()) + " < " +
                                         quote((d.path / "p").string()) + " 2>&1",
                                     &out);
    EXPECT_EQ(rc, 0) << out << "\n--- diff:\n" << diff;
    return read_text(d.path / "f");
}

const char * bin() { return EDITSPEC_BIN; }
std::string model_arg() { return std::string(" -m ") + quote(test::tiny_model_q8_path()) + " -t 1"; }

const std::string sample_code = "def add(a, b):\n    return a + b\n\n\nprint(add(1, 2))\n";

} // namespace

// ----------------------------------------------------------------------------
// prompt and answer

TEST(edit_prompt, plain_template_byte_for_byte) {
    // the training-data format (edit.h): verbatim instruction and code, the code's own newline kept
    EXPECT_EQ(edit_prompt_plain("Rename x.", "x = 1\n"),
              "### Instruction:\nRename x.\n### Original code:\nx = 1\n\n### Edited code:\n");
    EXPECT_EQ(edit_prompt_plain("I", "y"), "### Instruction:\nI\n### Original code:\ny\n### Edited code:\n");
    // the tiny model has no chat template: edit_prompt is the plain one
    auto m = test::load_or_fail(test::tiny_model_q8_path());
    ASSERT_TRUE(m);
    EXPECT_FALSE(edit_prompt_parse_special(*m));
    EXPECT_EQ(edit_prompt(*m, "I", "y"), edit_prompt_plain("I", "y"));
    EXPECT_EQ(edit_original_tokens(*m, "x = 1\n"), m->tokenize("x = 1\n", false, false)); // no BOS
    // the file-first layout: the code a prefix of every prompt about it
    EXPECT_EQ(edit_prompt_plain("Rename x.", "x = 1\n", PROMPT_LAYOUT_FILE_FIRST),
              "### Original code:\nx = 1\n\n### Instruction:\nRename x.\n### Edited code:\n");
    EXPECT_EQ(edit_prompt(*m, "I", "y", PROMPT_LAYOUT_FILE_FIRST), edit_prompt_plain("I", "y", PROMPT_LAYOUT_FILE_FIRST));
    // auto (the default): an edit on a model without a chat template takes the layout it was trained on
    prompt_layout l = PROMPT_LAYOUT_FILE_FIRST;
    ASSERT_TRUE(prompt_layout_parse("auto", l));
    EXPECT_EQ(l, PROMPT_LAYOUT_AUTO);
    EXPECT_FALSE(prompt_layout_parse("file_first", l));
    EXPECT_EQ(prompt_layout_for_edit(*m, PROMPT_LAYOUT_AUTO), PROMPT_LAYOUT_INSTRUCTION_FIRST);
    EXPECT_EQ(prompt_layout_for_edit(*m, PROMPT_LAYOUT_FILE_FIRST), PROMPT_LAYOUT_FILE_FIRST);
    EXPECT_EQ(edit_prompt(*m, "I", "y", PROMPT_LAYOUT_AUTO), edit_prompt_plain("I", "y"));
}

TEST(apply_prompt, message_format_round_trips_and_plain_template) {
    const apply_input in{"def f(x):\n    return x\n", "# ... existing code ...\n    return x + 1\n", "Add one."};
    EXPECT_EQ(apply_message(in), "<instruction>Add one.</instruction>\n<code>def f(x):\n    return x\n</code>\n"
                                 "<update># ... existing code ...\n    return x + 1\n</update>");
    apply_input back;
    ASSERT_TRUE(apply_message_parse(apply_message(in), back));
    EXPECT_EQ(back.code, in.code);
    EXPECT_EQ(back.update, in.update);
    EXPECT_EQ(back.instruction, in.instruction);
    // no instruction; code that itself holds "</code>" and "<update>" text
    const apply_input odd{"s = '</code>'\nt = '<update>'\n", "s = ''\n", ""};
    ASSERT_TRUE(apply_message_parse(apply_message(odd), back));
    EXPECT_EQ(back.code, odd.code);
    EXPECT_EQ(back.update, odd.update);
    EXPECT_EQ(back.instruction, "");
    EXPECT_FALSE(apply_message_parse("<code>x</code> and no update", back));
    EXPECT_FALSE(apply_message_parse("Rename x.\n```\nx = 1\n```", back));
    // a model without a chat template: the plain edit template with the update in the instruction
    auto m = test::load_or_fail(test::tiny_model_q8_path());
    ASSERT_TRUE(m);
    EXPECT_FALSE(apply_prompt_parse_special(*m));
    EXPECT_EQ(apply_prompt(*m, in), "### Instruction:\nAdd one.\n### Update:\n# ... existing code ...\n    return x + 1"
                                    "\n### Original code:\ndef f(x):\n    return x\n\n### Edited code:\n");
    EXPECT_EQ(apply_prompt(*m, odd).rfind("### Instruction:\nApply the update to the code.\n### Update:\n", 0), 0u);
    // the file-first layout: the same parts, the code first; its message reads back the same
    EXPECT_EQ(apply_prompt(*m, in, PROMPT_LAYOUT_FILE_FIRST),
              "### Original code:\ndef f(x):\n    return x\n\n### Instruction:\nAdd one.\n### Update:\n"
              "# ... existing code ...\n    return x + 1\n### Edited code:\n");
    // auto: an apply puts the file first
    EXPECT_EQ(apply_prompt(*m, in, PROMPT_LAYOUT_AUTO), apply_prompt(*m, in, PROMPT_LAYOUT_FILE_FIRST));
    EXPECT_EQ(apply_message(in, PROMPT_LAYOUT_AUTO), apply_message(in, PROMPT_LAYOUT_FILE_FIRST));
    const std::string ff = apply_message(in, PROMPT_LAYOUT_FILE_FIRST);
    EXPECT_EQ(ff.rfind("<code>def f(x):", 0), 0u) << ff;
    ASSERT_TRUE(apply_message_parse(ff, back)) << ff;
    EXPECT_EQ(back.code, in.code);
    EXPECT_EQ(back.update, in.update);
    EXPECT_EQ(back.instruction, in.instruction);
    ASSERT_TRUE(apply_message_parse(apply_message(odd, PROMPT_LAYOUT_FILE_FIRST), back));
    EXPECT_EQ(back.update, odd.update);
    EXPECT_EQ(back.instruction, "");
}

TEST(apply_snippet, changed_lines_with_context_and_markers) {
    std::string before;
    for (int i = 1; i <= 20; i++) before += "line" + std::to_string(i) + "\n";
    std::string after = before;
    after.replace(after.find("line10\n"), 7, "TEN\n");
    const std::string m = "# ... existing code ...";
    // one change in the middle: markers above and below, one context line each side
    EXPECT_EQ(apply_snippet(before, after, m, 1), m + "\nline9\nTEN\nline11\n" + m + "\n");
    // a change at the top and one at the end, far apart: no marker before the first, none after the last
    std::string ends = "FIRST\n" + before.substr(before.find('\n') + 1);
    ends.replace(ends.find("line20\n"), 7, "LAST\n");
    EXPECT_EQ(apply_snippet(before, ends, m, 1), "FIRST\nline2\n" + m + "\nline19\nLAST\n");
    // a deleted line shows by its absence between context lines
    std::string del = before;
    del.erase(del.find("line10\n"), 7);
    EXPECT_EQ(apply_snippet(before, del, m, 1), m + "\nline9\nline11\n" + m + "\n");
    EXPECT_EQ(apply_snippet(before, before, m), "");
    // merging the snippet by hand gives `after` back: every line it shows is after's, in order
    const std::string s3 = apply_snippet(before, after, m);
    EXPECT_NE(s3.find("line7\nline8\nline9\nTEN\nline11\nline12\nline13\n"), std::string::npos) << s3;
}

TEST(edit_extract_code, strips_a_wrapping_fence_only) {
    // a fenced answer: the text between the opening line and the last closing fence
    EXPECT_EQ(edit_extract_code("```python\nx = 1\n```\nDone."), "x = 1\n");
    EXPECT_EQ(edit_extract_code("\n\n```\nx = 1\ny\n```"), "x = 1\ny\n");
    // an inner ``` line (a docstring with markdown) stays: the last fence closes
    EXPECT_EQ(edit_extract_code("```\na\n```\nb\n```\n"), "a\n```\nb\n");
    // no closing fence: the rest
    EXPECT_EQ(edit_extract_code("```py\nx = 1\n"), "x = 1\n");
    // not wrapped: unchanged, even with a fence further down
    EXPECT_EQ(edit_extract_code("x = 1\n```\n"), "x = 1\n```\n");
    EXPECT_EQ(edit_extract_code(""), "");
}

// ----------------------------------------------------------------------------
// unified diff

TEST(edit_unified_diff, format_of_one_change) {
    // one changed line among 9: three lines of context each side, GNU's header and ranges
    std::string a, b;
    for (int i = 1; i <= 9; i++) {
        a += "l" + std::to_string(i) + "\n";
        b += (i == 5 ? std::string("L5") : "l" + std::to_string(i)) + "\n";
    }
    EXPECT_EQ(edit_unified_diff(a, b, "a/f", "b/f"),
              "--- a/f\n+++ b/f\n@@ -2,7 +2,7 @@\n l2\n l3\n l4\n-l5\n+L5\n l6\n l7\n l8\n");
    EXPECT_EQ(edit_unified_diff(a, a, "a/f", "b/f"), ""); // equal: no diff at all
}

TEST(edit_unified_diff, edge_ranges) {
    // insertion into an empty file: "-0,0"; one-line ranges omit the count; no newline at EOF
    EXPECT_EQ(edit_unified_diff("", "x\n", "a", "b"), "--- a\n+++ b\n@@ -0,0 +1 @@\n+x\n");
    EXPECT_EQ(edit_unified_diff("x\n", "x", "a", "b"),
              "--- a\n+++ b\n@@ -1 +1 @@\n-x\n+x\n\\ No newline at end of file\n");
    // an insertion after line 2 of 2: the empty old range names line 2
    EXPECT_EQ(edit_unified_diff("a\nb\n", "a\nb\nc\n", "a", "b"), "--- a\n+++ b\n@@ -1,2 +1,3 @@\n a\n b\n+c\n");
}

TEST(edit_unified_diff, patch_applies_random_edits) {
    // random line edits (insert, delete, replace, runs of them, missing final newline): patch(1)
    // turns a into b exactly, and changes 7+ lines apart get separate hunks
    std::mt19937 rng(7);
    for (int t = 0; t < 60; t++) {
        std::vector<std::string> la;
        const int n = rng() % 40;
        for (int i = 0; i < n; i++) la.push_back("line " + std::to_string(rng() % 12)); // repeats on purpose
        std::vector<std::string> lb = la;
        const int edits = 1 + rng() % 5;
        for (int e = 0; e < edits; e++) {
            const int pos = lb.empty() ? 0 : rng() % (lb.size() + 1);
            switch (rng() % 3) {
                case 0: lb.insert(lb.begin() + pos, "new " + std::to_string(rng() % 100)); break;
                case 1: if (pos < (int) lb.size()) lb.erase(lb.begin() + pos); break;
                case 2: if (pos < (int) lb.size()) lb[pos] = "changed " + std::to_string(rng() % 100); break;
            }
        }
        auto join = [&](const std::vector<std::string> & v, bool final_nl) {
            std::string s;
            for (size_t i = 0; i < v.size(); i++) s += v[i] + (i + 1 < v.size() || final_nl ? "\n" : "");
            return s;
        };
        const std::string a = join(la, rng() % 4 != 0), b = join(lb, rng() % 4 != 0);
        const std::string d = edit_unified_diff(a, b, "a/f", "b/f");
        if (a == b) {
            EXPECT_TRUE(d.empty());
            continue;
        }
        EXPECT_EQ(apply_patch(a, d), b) << "case " << t << "\n" << d;
    }
}

// ----------------------------------------------------------------------------
// the command

TEST(edit_cli, json_parses_with_statistics) {
    // the random model never ends its answer: cut short by -n, the answer is not the code (issue 69):
    // exit 1, --json says "complete": false without the code or the text, its statistics kept
    temp_dir d;
    write_text(d.path / "f.py", sample_code);
    std::string out;
    const int rc = test::run_command(std::string(bin()) + " edit" + model_arg() + " -f " +
                                         quote((d.path / "f.py").string()) + " -i 'Rename add to plus.' -n 48 --json",
                                     &out);
    ASSERT_EQ(rc, 1) << out;
    const nlohmann::json j = nlohmann::json::parse(out);
    EXPECT_EQ(j["method"], "auto"); // the default
    EXPECT_NE(j["drafters"].get<std::string>().find("reuse"), std::string::npos) << j.dump();
    EXPECT_EQ(j["tokens"], 48);                      // the random model never stops early
    EXPECT_EQ(j["complete"], false);
    EXPECT_EQ(j["stop"], "max_tokens");
    EXPECT_FALSE(j.contains("code")) << j.dump();
    EXPECT_FALSE(j.contains("text")) << j.dump();
    EXPECT_GE(j["target_passes"].get<int>(), 1);
    EXPECT_GT(j["tokens_per_pass"].get<double>(), 0.0);
    EXPECT_TRUE(j["by_source"].is_object());
    for (const char * k : {"prompt_tokens", "gen_ms", "first_pass_ms", "tokens_per_s", "draft_tokens", "accepted", "stop", "model"}) {
        EXPECT_TRUE(j.contains(k)) << k;
    }
    EXPECT_EQ(read_text(d.path / "f.py"), sample_code); // not --in-place: untouched
    EXPECT_EQ(d.names(), (std::vector<std::string>{"f.py"}));
    // --in-place with an answer cut short: nothing written, nothing printed, exit 1 naming the limit
    std::string err;
    EXPECT_EQ(test::run_command(std::string(bin()) + " edit" + model_arg() + " -f " + quote((d.path / "f.py").string()) +
                                    " -i 'Rename add to plus.' -n 48 --in-place 2>&1 >/dev/null", &err), 1) << err;
    EXPECT_NE(err.find("-n 48"), std::string::npos) << err;
    EXPECT_EQ(read_text(d.path / "f.py"), sample_code);
    EXPECT_EQ(d.names(), (std::vector<std::string>{"f.py"}));
    // -n below the whole answer's size: refused before decoding (exit 2), the size named
    EXPECT_EQ(test::run_command(std::string(bin()) + " edit" + model_arg() + " -f " + quote((d.path / "f.py").string()) +
                                    " -i 'Rename add to plus.' -n 4 --in-place 2>&1", &err), 2) << err;
    EXPECT_NE(err.find("raise -n"), std::string::npos) << err;
    EXPECT_EQ(read_text(d.path / "f.py"), sample_code);
}

TEST(edit_cli, in_place_and_diff) {
    // the same greedy merge three ways: the printed code, --in-place's file (backup FILE.orig, no
    // temp files left), --diff's patch applied to the original. (Not --json's "code": the random
    // model's bytes are not always UTF-8, and JSON replaces those.) An apply: constrained, it ends
    // whole on the random model, where a free edit never ends (edit and apply write alike)
    temp_dir d;
    const fs::path f = d.path / "f.py";
    write_text(f, sample_code);
    write_text(d.path / "u.py", "def add(a, b):\n    return b + a\n# ... existing code ...\n");
    fs::permissions(f, fs::perms(0640));
    const std::string base = std::string(bin()) + " apply" + model_arg() + " -f " + quote(f.string()) + " -u " +
                             quote((d.path / "u.py").string()) + " --method reuse+lookup-longest@8";
    std::string code;
    ASSERT_EQ(test::run_command(base, &code), 0) << code;

    std::string diff;
    ASSERT_EQ(test::run_command(base + " --diff", &diff), 0) << diff;
    // an absolute path as git writes it: a/tmp/...
    EXPECT_EQ(diff.rfind("--- a" + f.string() + "\n+++ b" + f.string() + "\n@@ ", 0), 0u) << diff;
    EXPECT_EQ(apply_patch(sample_code, diff), code);

    std::string out;
    ASSERT_EQ(test::run_command(base + " --in-place", &out), 0) << out;
    EXPECT_TRUE(out.empty()); // nothing on stdout
    EXPECT_EQ(read_text(f), code);
    EXPECT_EQ(read_text(d.path / "f.py.orig"), sample_code);
    EXPECT_EQ(d.names(), (std::vector<std::string>{"f.py", "f.py.orig", "u.py"}));
    EXPECT_EQ(fs::status(f).permissions() & fs::perms::all, fs::perms(0640)); // mode kept
}

TEST(edit_cli, stdin_prints_the_code) {
    // no -f: the code comes from stdin, the merged code goes to stdout, as with -f
    temp_dir d;
    write_text(d.path / "in.py", sample_code);
    write_text(d.path / "u.py", "# ... existing code ...\nprint(add(3, 4))\n");
    std::string out, out_f;
    const std::string base = std::string(bin()) + " apply" + model_arg() + " -u " + quote((d.path / "u.py").string());
    ASSERT_EQ(test::run_command(base + " < " + quote((d.path / "in.py").string()), &out), 0);
    ASSERT_EQ(test::run_command(base + " -f " + quote((d.path / "in.py").string()), &out_f), 0);
    EXPECT_FALSE(out.empty());
    EXPECT_EQ(out, out_f);
}

TEST(apply_cli, merges_with_the_file_as_prediction_and_checks_input) {
    // editspec apply: the update from a file or stdin gives the same merged code; its JSON says the
    // file's tokens were drafted (Reuse); --in-place keeps a backup; bad input exits 2
    temp_dir d;
    const fs::path f = d.path / "f.py", u = d.path / "u.py";
    write_text(f, sample_code);
    write_text(u, "# ... existing code ...\nprint(add(2, 3))\n");
    const std::string base = std::string(bin()) + " apply" + model_arg() + " -f " + quote(f.string());
    std::string out, out_stdin, json_out;
    ASSERT_EQ(test::run_command(base + " -u " + quote(u.string()), &out), 0) << out;
    ASSERT_EQ(test::run_command(base + " -u - < " + quote(u.string()), &out_stdin), 0) << out_stdin;
    EXPECT_EQ(out, out_stdin);
    ASSERT_EQ(test::run_command(base + " -u " + quote(u.string()) + " --json", &json_out), 0) << json_out;
    const nlohmann::json j = nlohmann::json::parse(json_out);
    EXPECT_EQ(j["method"], "auto");
    EXPECT_NE(j["drafters"].get<std::string>().find("reuse"), std::string::npos) << json_out; // auto feeds Reuse the file
    std::string reuse_json;
    ASSERT_EQ(test::run_command(base + " -u " + quote(u.string()) + " --json --method reuse", &reuse_json), 0) << reuse_json;
    const nlohmann::json jr = nlohmann::json::parse(reuse_json);
    ASSERT_TRUE(jr["by_source"].contains("reuse")) << reuse_json;
    EXPECT_GT(jr["by_source"]["reuse"]["drafted"].get<int>(), 0);
    EXPECT_EQ(jr["text"], j["text"]);
    ASSERT_EQ(test::run_command(base + " -u " + quote(u.string()) + " --in-place", &out_stdin), 0);
    EXPECT_EQ(read_text(f), out);
    EXPECT_EQ(read_text(d.path / "f.py.orig"), sample_code);
    write_text(d.path / "blank.py", "  \n");
    for (const std::string & args : {std::string(" -u ") + quote((d.path / "nope.py").string()),
                                     std::string(" -u ") + quote((d.path / "blank.py").string()),
                                     std::string("")}) {
        std::string err;
        EXPECT_EQ(test::run_command(base + args + " 2>&1", &err), 2) << args << ": " << err;
    }
    std::string err;
    EXPECT_EQ(test::run_command(std::string(bin()) + " apply" + model_arg() + " -u - < " + quote(u.string()) + " 2>&1", &err), 2)
        << err; // the code and the update both from stdin
}

TEST(edit_cli, bad_input_exits_2_and_writes_nothing) {
    temp_dir d;
    const fs::path f = d.path / "f.py";
    write_text(f, sample_code);
    std::string big;
    for (int i = 0; i < 200; i++) big += "value_" + std::to_string(i) + " = compute(" + std::to_string(i) + ")\n";
    write_text(d.path / "big.py", big);
    write_text(d.path / "empty.py", "");
    const std::string e = std::string(bin()) + " edit" + model_arg();
    struct case_t { const char * why; std::string args; };
    const std::vector<case_t> cases = {
        {"missing file", " -f " + quote((d.path / "nope.py").string()) + " -i x"},
        {"empty instruction", " -f " + quote(f.string()) + " -i '  ' --in-place"},
        {"no instruction", " -f " + quote(f.string())},
        {"prompt over the context", " -f " + quote((d.path / "big.py").string()) + " -i x -c 256 --in-place"},
        {"empty file", " -f " + quote((d.path / "empty.py").string()) + " -i x --in-place"},
        {"unknown method", " -f " + quote(f.string()) + " -i x --method nope --in-place"},
        {"efficientedit without a draft model", " -f " + quote(f.string()) + " -i x --method efficientedit --in-place"},
        {"--in-place without a file", " -i x --in-place < " + quote(f.string())},
        {"missing model", " -m /nonexistent.gguf -f " + quote(f.string()) + " -i x"},
        {"a cache type not offered", " -f " + quote(f.string()) + " -i x --cache-type q4_0 --in-place"},
        {"a Q8_0 cache without flash attention", " -f " + quote(f.string()) + " -i x --cache-type q8_0 --no-flash-attn --in-place"},
    };
    for (const case_t & c : cases) {
        std::string out;
        const int rc = test::run_command(e + c.args + " 2>&1", &out);
        EXPECT_EQ(rc, 2) << c.why << ": " << out;
        // one line on stderr (CLI11's own usage errors may add a hint line)
        EXPECT_LE(std::count(out.begin(), out.end(), '\n'), 2) << c.why << ": " << out;
    }
    // nothing was written: the inputs as they were, no backups or temp files
    EXPECT_EQ(read_text(f), sample_code);
    EXPECT_EQ(read_text(d.path / "big.py"), big);
    EXPECT_EQ(d.names(), (std::vector<std::string>{"big.py", "empty.py", "f.py"}));
}

// ----------------------------------------------------------------------------
// lossless: greedy speculative output equals autoregressive output on edit prompts

namespace {

struct edit_case {
    std::string id;
    token_vec prompt;
    token_vec original;
};

// the first `n` CanItEdit edits whose prompt leaves room in `n_ctx` for the output and a tree
std::vector<edit_case> edit_cases(const model & m, int32_t n_ctx, size_t n) {
    std::vector<dataset_item> items;
    std::string err;
    EXPECT_TRUE(dataset_load(std::string(EDITSPEC_DATASETS) + "/canitedit/normalized.jsonl", DATASET_KIND_AUTO, items,
                             &err))
        << err;
    std::vector<edit_case> cases;
    for (const dataset_item & it : items) {
        edit_case c;
        c.id = it.id;
        c.prompt = m.tokenize(edit_prompt(m, it.instruction, it.context_code), true, false);
        c.original = edit_original_tokens(m, it.context_code);
        if ((int32_t) c.prompt.size() + 64 + 300 > n_ctx) continue;
        cases.push_back(std::move(c));
        if (cases.size() == n) break;
    }
    return cases;
}

// runs `method` on an edit's prompt with target `m` on `ctx`; flat cost: the cost model keeps whole
// trees (long reuse drafts)
generate_result run_method(const model & m, context & ctx, const std::string & method, const edit_case & c,
                           const token_vec & original, const generate_params & gp, const model * draft,
                           std::span<const datastore * const> stores) {
    method_spec ms;
    std::string err;
    EXPECT_TRUE(method_parse(method, ms, &err)) << err;
    drafter_inputs in;
    in.original = original;
    in.target = &m;
    in.target_ctx = &ctx;
    in.draft_model = draft;
    in.datastores = stores;
    in.repo_datastores = stores;
    in.draft_params.n_ctx = 2048;
    in.draft_params.n_threads = 1;
    std::vector<std::unique_ptr<drafter_i>> owned;
    EXPECT_TRUE(method_make_drafters(ms, in, owned, &err)) << err;
    std::vector<drafter_i *> ds;
    for (auto & d : owned) ds.push_back(d.get());
    static const cost_model flat = cost_model_from_table({1, 512}, {1.0, 1.0});
    spec_params sp;
    sp.verify.policy = ms.policy;
    sp.draft_max = ms.draft_max;
    sp.cost = ms.draft_max == 0 ? &flat : nullptr;
    sp.lossy_ok = method_lossy_ok(ms);
    generate_result r = generate_spec(ctx, c.prompt, gp, sp, ds);
    EXPECT_NE(r.stop, STOP_REASON_ERROR) << r.error;
    return r;
}

struct lossless_fixture : public ::testing::Test {
    static void SetUpTestSuite() {
        m = test::load_or_fail(test::tiny_model_q8_path()).release();
        ASSERT_TRUE(m);
        context_params cp;
        cp.n_ctx = 2048;
        cp.n_threads = 1; // spinning threads stall on a busy 2-core machine
        cp.n_seq_max = 65;
        std::string err;
        ctx = context_create(*m, cp, &err).release();
        ASSERT_TRUE(ctx) << err;
        cases = edit_cases(*m, cp.n_ctx, 32);
    }
    static void TearDownTestSuite() {
        delete ctx;
        delete m;
    }

    // runs `method` on the prompt (run_method below)
    generate_result run(const std::string & method, const edit_case & c, const token_vec & original,
                        const generate_params & gp, const model * draft = nullptr,
                        std::span<const datastore * const> stores = {}) {
        return run_method(*m, *ctx, method, c, original, gp, draft, stores);
    }

    // the target's logits after prompt + out[0, j) for each j: one pass over the text (CPU decoding
    // is batch-exact, docs/exactness.md)
    std::vector<std::vector<float>> target_logits(const token_vec & prompt, const token_vec & out) {
        token_vec all = prompt;
        all.insert(all.end(), out.begin(), out.end());
        const int32_t n_vocab = m->facts().n_vocab;
        std::vector<std::vector<float>> logits;
        ctx->kv_clear();
        batch b(ctx->n_batch(), 1);
        for (size_t at = 0; at < all.size(); at += (size_t) ctx->n_batch()) {
            b.clear();
            const size_t end = std::min(all.size(), at + (size_t) ctx->n_batch());
            for (size_t i = at; i < end; i++) b.add(all[i], (llama_pos) i, {0}, i + 1 >= prompt.size() && i + 1 < all.size());
            if (!ctx->decode(b)) {
                ADD_FAILURE() << "decode failed";
                return {};
            }
            for (size_t i = at; i < end; i++) {
                if (i + 1 >= prompt.size() && i + 1 < all.size()) {
                    const float * l = ctx->logits((int32_t) (i - at));
                    logits.emplace_back(l, l + n_vocab);
                }
            }
        }
        ctx->kv_clear();
        return logits;
    }

    static inline model * m = nullptr;
    static inline context * ctx = nullptr;
    static inline std::vector<edit_case> cases;
};

} // namespace

TEST_F(lossless_fixture, reuse_methods_equal_ar_on_canitedit) {
    // the original is the item's code: the random model rarely follows it, so drafts are mostly
    // rejected at the first token and Reuse re-syncs all the time; fixed caps and the cost model
    ASSERT_GE(cases.size(), 30u);
    generate_params gp;
    gp.n_predict = 64;
    for (const edit_case & c : cases) {
        const generate_result ar = generate_ar(*ctx, c.prompt, gp);
        ASSERT_NE(ar.stop, STOP_REASON_ERROR) << ar.error;
        for (const char * method : {"reuse", "reuse+lookup", "reuse+lookup-longest@16", "reuse@64"}) {
            const generate_result r = run(method, c, c.original, gp);
            EXPECT_EQ(r.tokens, ar.tokens) << c.id << " " << method;
        }
    }
}

TEST_F(lossless_fixture, reuse_accepts_long_drafts_and_stays_lossless) {
    // the original is the autoregressive output itself with edits (a substitution, a deletion, an
    // insertion): Reuse's drafts are accepted for long stretches, rejected at each edit, re-synced
    // after; the output still equals ar's and Reuse's tokens were accepted
    generate_params gp;
    gp.n_predict = 64;
    std::mt19937 rng(11);
    int64_t reuse_accepted = 0;
    for (size_t i = 0; i < 8 && i < cases.size(); i++) {
        const edit_case & c = cases[i];
        const generate_result ar = generate_ar(*ctx, c.prompt, gp);
        token_vec orig = ar.tokens;
        ASSERT_GE(orig.size(), 40u);
        orig[10 + rng() % 5] = 1000 + (int) (rng() % 1000);                // substitution
        orig.erase(orig.begin() + 25, orig.begin() + 27);                  // deletion
        orig.insert(orig.begin() + 35, {(llama_token) 500, (llama_token) 501}); // insertion
        for (const char * method : {"reuse", "reuse+lookup-longest", "reuse@8"}) {
            const generate_result r = run(method, c, orig, gp);
            EXPECT_EQ(r.tokens, ar.tokens) << c.id << " " << method;
            if (std::string(method) == "reuse") {
                reuse_accepted += r.by_source[DRAFT_SOURCE_REUSE].n_accepted;
                EXPECT_LT(r.target_passes, 20) << c.id; // 64 tokens in far fewer passes
            }
        }
    }
    EXPECT_GT(reuse_accepted, 8 * 40);
}

TEST_F(lossless_fixture, efficientedit_greedy_equals_ar) {
    // efficientedit with greedy verification is lossless; with the draft model = the target its
    // Generate-phase drafts are the target's own tokens, and with the F32 model as draft they differ
    auto f32 = test::load_or_fail(test::tiny_model_path());
    ASSERT_TRUE(f32);
    generate_params gp;
    gp.n_predict = 48;
    for (size_t i = 0; i < 6 && i < cases.size(); i++) {
        const edit_case & c = cases[i];
        const generate_result ar = generate_ar(*ctx, c.prompt, gp);
        for (const model * draft : {(const model *) m, (const model *) f32.get()}) {
            const generate_result r = run("efficientedit:greedy", c, c.original, gp, draft);
            EXPECT_EQ(r.tokens, ar.tokens) << c.id;
            if (draft == m) {
                // the draft model drafts what the target says: many model tokens accepted
                EXPECT_GT(r.by_source[DRAFT_SOURCE_MODEL].n_accepted, 20) << c.id;
            }
        }
    }
}

TEST(method_with_original, reuse_goes_where_auto_places_it) {
    // a request with code being edited runs the server's method with Reuse: after the text drafters,
    // before a model's (auto's order); a method that drafts from the original already runs as it is
    static const struct { const char * method, * name, * drafters; } cases[] = {
        {"ar", "reuse", "reuse"},
        {"lookup-longest", "lookup-longest+reuse", "lookup-longest reuse"},
        {"lookup-longest+copy@48:topk", "lookup-longest+copy+reuse@48:topk", "lookup-longest copy reuse"},
        {"sd", "reuse+sd", "reuse sd"},
        {"copy+sd", "copy+reuse+sd", "copy reuse sd"},
        {"lookup+llama-draft-mtp", "lookup+reuse+llama-draft-mtp", "lookup reuse llama-draft-mtp"},
        {"sd+reuse", "sd+reuse", "sd reuse"},
        {"efficientedit", "efficientedit", "efficientedit"},
    };
    for (const auto & c : cases) {
        method_spec ms, back;
        std::string err;
        ASSERT_TRUE(method_parse(c.method, ms, &err)) << err;
        const method_spec out = method_with_original(ms);
        std::string drafters;
        for (const std::string & d : out.drafters) drafters += (drafters.empty() ? "" : " ") + d;
        EXPECT_EQ(out.name, c.name) << c.method;
        EXPECT_EQ(drafters, c.drafters) << c.method;
        // the name parses back to the same drafters, cap and policy
        ASSERT_TRUE(method_parse(out.name, back, &err)) << err;
        EXPECT_EQ(back.drafters, out.drafters) << c.method;
        EXPECT_EQ(back.draft_max, ms.draft_max) << c.method;
        EXPECT_EQ(back.policy, ms.policy) << c.method;
    }
}

TEST_F(lossless_fixture, efficientedit_entropy_runs_and_is_lossy_on_model_nodes_only) {
    // the default policy is entropy; lossy_ok lets it judge the draft model's nodes only
    method_spec ms;
    std::string err;
    ASSERT_TRUE(method_parse("efficientedit", ms, &err)) << err;
    EXPECT_EQ(ms.policy, VERIFY_POLICY_ENTROPY);
    const auto ok = method_lossy_ok(ms);
    ASSERT_TRUE(ok);
    EXPECT_TRUE(ok(draft_node{1, -1, DRAFT_SOURCE_MODEL}));
    EXPECT_FALSE(ok(draft_node{1, -1, DRAFT_SOURCE_REUSE}));
    EXPECT_FALSE(ok(draft_node{1, -1, DRAFT_SOURCE_LOOKUP}));
    // other lossy methods: everything but Reuse's nodes; lossless ones need no filter
    ASSERT_TRUE(method_parse("reuse+lookup:topk", ms, &err));
    EXPECT_FALSE(method_lossy_ok(ms)(draft_node{1, -1, DRAFT_SOURCE_REUSE}));
    EXPECT_TRUE(method_lossy_ok(ms)(draft_node{1, -1, DRAFT_SOURCE_LOOKUP}));
    ASSERT_TRUE(method_parse("reuse+lookup", ms, &err));
    EXPECT_FALSE(method_lossy_ok(ms));
    // errors: reuse without an original, efficientedit without a draft model
    drafter_inputs in;
    std::vector<std::unique_ptr<drafter_i>> owned;
    ASSERT_TRUE(method_parse("reuse", ms, &err));
    EXPECT_FALSE(method_make_drafters(ms, in, owned, &err));
    EXPECT_NE(err.find("original code"), std::string::npos) << err;

    // end to end, what the policy promises (verify.h, entropy.cpp): a token of the output is the
    // target's argmax, or a draft among the target's top tau = max(1, ceil(k * H_norm)) there; ar's
    // output up to the first such token; and lossy acceptances happen. The draft model: the
    // target's own weights in Q4_0, mostly its argmax, at times its second choice
    test::temp_dir dir;
    make_model_params mp;
    mp.shape = "tiny";
    mp.type = make_model_type_from_name("q4_0");
    mp.seed = 2; // the fixture's Q8_0 target's weights
    mp.n_threads = 1;
    mp.out = (dir.path / "tiny-q4_0-seed2.gguf").string();
    ASSERT_TRUE(make_model(mp, &err)) << err;
    auto q4 = test::load_or_fail(mp.out);
    ASSERT_TRUE(q4);
    const int32_t n_vocab = m->facts().n_vocab;
    generate_params gp;
    gp.n_predict = 32;
    int lossy_tokens = 0, cases_lossy = 0;
    for (size_t i = 0; i < 8 && i < cases.size(); i++) {
        const edit_case & c = cases[i];
        const generate_result ar = generate_ar(*ctx, c.prompt, gp);
        const generate_result r = run("efficientedit", c, c.original, gp, q4.get());
        const std::vector<std::vector<float>> logits = target_logits(c.prompt, r.tokens);
        ASSERT_EQ(logits.size(), r.tokens.size());
        size_t first = r.tokens.size(); // the first token that is not the target's argmax
        for (size_t j = 0; j < r.tokens.size(); j++) {
            const float * l = logits[j].data();
            if (r.tokens[j] == verify_top_logits(l, n_vocab, 1)[0].token) continue;
            first = std::min(first, j);
            lossy_tokens++;
            const int32_t tau = verify_entropy_tau(l, n_vocab, 5, true);
            bool in_top = false;
            for (const token_logit & t : verify_top_logits(l, n_vocab, tau)) in_top |= t.token == r.tokens[j];
            EXPECT_TRUE(in_top) << c.id << ": token " << j << " (" << r.tokens[j] << ") is outside the target's top " << tau;
        }
        cases_lossy += first < r.tokens.size();
        EXPECT_TRUE(std::equal(r.tokens.begin(), r.tokens.begin() + (ptrdiff_t) std::min(first, ar.tokens.size()), ar.tokens.begin()))
            << c.id << ": differs from ar before its first lossy token (" << first << ")";
    }
    printf("entropy: %d tokens accepted outside the target's argmax in %d of 8 cases\n", lossy_tokens, cases_lossy);
    EXPECT_GT(cases_lossy, 0) << "entropy-aware verification accepted nothing greedy would not";

    // Reuse's nodes are verified greedily under a lossy policy: the original is ar's output with
    // tokens swapped for the target's second choice where tau >= 2 (the entropy rule would take
    // them); Reuse alone drafts, so the output is ar's
    int swapped = 0;
    for (size_t i = 0; i < 4 && i < cases.size(); i++) {
        const edit_case & c = cases[i];
        const generate_result ar = generate_ar(*ctx, c.prompt, gp);
        const std::vector<std::vector<float>> logits = target_logits(c.prompt, ar.tokens);
        ASSERT_EQ(logits.size(), ar.tokens.size());
        token_vec orig = ar.tokens;
        for (size_t j = 4; j < orig.size(); j += 8) {
            const float * l = logits[j].data();
            if (verify_entropy_tau(l, n_vocab, 5, true) < 2) continue;
            orig[j] = verify_top_logits(l, n_vocab, 2)[1].token;
            swapped++;
        }
        const generate_result r = run("reuse:entropy", c, orig, gp);
        EXPECT_EQ(r.tokens, ar.tokens) << c.id << ": a Reuse draft was accepted by the entropy rule";
        EXPECT_GT(r.by_source[DRAFT_SOURCE_REUSE].n_accepted, 0) << c.id;
    }
    EXPECT_GT(swapped, 4);
}

namespace {

// what one method did in a sweep
struct sweep_row {
    int cases = 0;         // edits it ran on
    int equal = 0;         // of those, output equal to ar's
    int64_t drafted = 0;   // draft tokens it sent to the target
    int64_t accepted = 0;  // of those, accepted
};

// every row of the drafter table (drafters.h) and `auto`, each alone, against ar on a few edits:
// what a request can feed them is fed (the code being edited, a draft model, a datastore of the
// items' code), lossy default policies are asked for greedy. Returns what each method did, by the
// method's name.
// self_draft: the target is its own draft model, and Reuse's original is ar's output with every
// sixth token wrong, so drafts are accepted as well as rejected (a random model accepts no other
// model's drafts and no code's).
std::map<std::string, sweep_row> sweep_table(const model & m, context & ctx, const std::vector<edit_case> & cases,
                                             size_t n_cases, int32_t n_predict = 40, bool self_draft = false) {
    auto other = self_draft ? nullptr : test::load_or_fail(test::tiny_model_path());
    const model * draft = self_draft ? &m : other.get();
    EXPECT_TRUE(draft);
    test::temp_dir dir;
    std::vector<std::string> texts;
    for (size_t i = 0; i < n_cases && i < cases.size(); i++) texts.push_back(m.detokenize(cases[i].original));
    datastore ds;
    std::string err;
    EXPECT_TRUE(test::index_texts(m, dir.path, "items", texts, ds, &err)) << err;
    const datastore * stores[] = {&ds};
    std::vector<std::string> methods = {"auto"};
    for (const drafter_desc & d : drafter_table()) {
        // a model-native head's rows need a model with one: tests/draft/test-heads.cpp sweeps them
        if ((d.needs & DRAFTER_NEEDS_HEAD) && llama_model_n_layer_nextn(m.get()) <= 0) continue;
        methods.push_back(std::string(d.name) + (verify_policy_is_lossy(d.policy) ? ":greedy" : ""));
    }
    generate_params gp;
    gp.n_predict = n_predict;
    std::map<std::string, sweep_row> rows;
    // the edits, and one whose prompt ends with 64 of its tokens again: the random model never
    // repeats 12 tokens on its own, and n-gram drafters (lookup, llama-ngram-*) draft from a repeat
    std::vector<edit_case> swept(cases.begin(), cases.begin() + (ptrdiff_t) std::min(n_cases, cases.size()));
    if (!swept.empty()) {
        edit_case rep = swept[0];
        rep.id += " (its last 64 prompt tokens again)";
        rep.prompt.insert(rep.prompt.end(), swept[0].prompt.end() - 64, swept[0].prompt.end());
        swept.push_back(rep);
    }
    for (const edit_case & c : swept) {
        const generate_result ar = generate_ar(ctx, c.prompt, gp);
        token_vec original = c.original;
        if (self_draft) {
            original = ar.tokens;
            for (size_t i = 5; i < original.size(); i += 6) original[i] = (original[i] + 1) % m.facts().n_vocab;
        }
        for (const std::string & method : methods) {
            const generate_result r = run_method(m, ctx, method, c, original, gp, draft, stores);
            EXPECT_EQ(r.tokens, ar.tokens) << method << " on " << c.id;
            sweep_row & row = rows[method];
            row.cases++;
            row.equal += r.tokens == ar.tokens;
            row.drafted += r.draft_tokens;
            row.accepted += r.accepted;
        }
    }
    for (const auto & [name, row] : rows) {
        printf("sweep: %-28s %d cases, %d equal to ar, %lld drafted, %lld accepted\n", name.c_str(), row.cases, row.equal,
               (long long) row.drafted, (long long) row.accepted);
    }
    return rows;
}

// the sweep ran every row of the table and `auto` on every case, each equal to ar there, and each
// drafter (but `none`) sent drafts to the target: an equality with no drafts checks nothing
void expect_swept(const std::map<std::string, sweep_row> & rows, size_t n_cases) {
    std::vector<std::string> names = {"auto"};
    for (const drafter_desc & d : drafter_table()) {
        if (!(d.needs & DRAFTER_NEEDS_HEAD)) names.push_back(d.name); // (sweep_table: not on these models)
    }
    for (const std::string & name : names) {
        auto it = rows.find(name);
        if (it == rows.end()) it = rows.find(name + ":greedy");
        if (it == rows.end()) {
            ADD_FAILURE() << name << ": not run";
            continue;
        }
        const sweep_row & row = it->second;
        EXPECT_EQ(row.cases, (int) n_cases + 1) << name;
        EXPECT_EQ(row.equal, (int) n_cases + 1) << name;
        if (name == "none") EXPECT_EQ(row.drafted, 0) << name << " proposes nothing";
        else EXPECT_GT(row.drafted, 0) << name << " sent no drafts to the target: its equality with ar is vacuous";
    }
}

// a drafter of one row: proposes the last token again, three times (mostly wrong: rejections)
struct repeat_drafter : drafter_i {
    const char * name() const override { return "test-repeat"; }
    uint8_t source() const override { return DRAFT_SOURCE_TEST; }
    void begin(std::span<const llama_token>) override {}
    void propose(std::span<const llama_token> history, draft_tree & tree, int32_t budget) override {
        const llama_token t[3] = {history.back(), history.back(), history.back()};
        tree.add_path(-1, std::span<const llama_token>(t, std::min<size_t>(3, (size_t) std::max(budget, 0))),
                      source(), budget);
    }
    void accept(std::span<const llama_token>) override {}
};

} // namespace

TEST_F(lossless_fixture, every_drafter_of_the_table_and_auto_equal_ar) {
    ASSERT_GE(cases.size(), 3u);
    expect_swept(sweep_table(*m, *ctx, cases, 3), 3);
}

static bool g_auto_takes_repeat = false; // whether `auto` takes test-repeat (its row's auto_when)

// A new drafter is its file and one row. Here its file is repeat_drafter above and its row the
// drafter_table_add below (in the product: NAME_drafters() in the drafter's file and one word in
// src/draft/drafters.cpp's list): added, it is listed for --help, parses as a method, combines with
// others, `auto` takes it at its row's rank, its drafts are counted in its source family's slot,
// and the lossless sweep runs it. Nothing else is touched.
TEST_F(lossless_fixture, a_drafter_added_as_one_row_enters_the_lossless_sweep) {
    const drafter_desc row = {"test-repeat", "proposes the last token again", 0, VERIFY_POLICY_GREEDY,
                              DRAFTER_LOSSY_NOT_REUSE,
                              [](const drafter_desc &, const drafter_inputs &, std::string *) -> std::unique_ptr<drafter_i> {
                                  return std::make_unique<repeat_drafter>();
                              },
                              /*auto_rank=*/9, [](const drafter_inputs &) { return g_auto_takes_repeat; }};
    if (!drafter_find("test-repeat")) ASSERT_TRUE(drafter_table_add(row));
    EXPECT_FALSE(drafter_table_add(row)); // a name is taken once
    EXPECT_NE(drafter_names_list().find("test-repeat"), std::string::npos);
    method_spec ms;
    std::string err;
    ASSERT_TRUE(method_parse("test-repeat+lookup@8", ms, &err)) << err;
    drafter_inputs in;
    in.original = cases[0].original;
    EXPECT_EQ(method_auto_drafters(in), (std::vector<std::string>{"lookup-longest", "copy", "reuse"}));
    g_auto_takes_repeat = true;
    EXPECT_EQ(method_auto_drafters(in), (std::vector<std::string>{"lookup-longest", "copy", "reuse", "test-repeat"}));
    g_auto_takes_repeat = false;
    generate_params gp;
    gp.n_predict = 24;
    const generate_result r = run_method(*m, *ctx, "test-repeat", cases[0], cases[0].original, gp, nullptr, {});
    EXPECT_GT(r.draft_tokens, 0);
    for (int s = 0; s < DRAFT_SOURCE_COUNT; s++) { // its drafts are counted in its family's slot, and only there
        if (s == DRAFT_SOURCE_TEST) EXPECT_GT(r.by_source[s].n_drafted, 0);
        else EXPECT_EQ(r.by_source[s].n_drafted, 0) << draft_source_name((uint8_t) s);
    }
    const std::map<std::string, sweep_row> run = sweep_table(*m, *ctx, cases, 2);
    ASSERT_TRUE(run.count("test-repeat"));
    expect_swept(run, 2);
}

// every row of the table and `auto` against ar on each weight type a user downloads (the tiny-256
// models of tests/CMakeLists.txt), 1 and 2 threads: one edit and its repeat each, fewer tokens than
// the Q8_0 sweep above, the model its own draft model and ar's output (with wrong tokens) Reuse's
// original, so drafts are accepted and rejected. Left out of the sanitizer run (scripts/test.sh):
// its time is ggml's. One typed model, n_threads, a KV cache of type kv:
static void sweep_typed(const char * type, int32_t n_threads, ggml_type kv) {
    auto m = test::load_or_fail(test::typed_model_path(type));
    ASSERT_TRUE(m);
    context_params cp;
    cp.n_ctx = 2048;
    cp.n_threads = n_threads;
    cp.n_seq_max = 65;
    cp.type_k = cp.type_v = kv;
    std::string err;
    auto ctx = context_create(*m, cp, &err);
    ASSERT_TRUE(ctx) << err;
    const std::vector<edit_case> cases = edit_cases(*m, cp.n_ctx, 1);
    ASSERT_EQ(cases.size(), 1u);
    std::map<std::string, sweep_row> rows = sweep_table(*m, *ctx, cases, 1, 24, /*self_draft=*/true);
    expect_swept(rows, 1);
    // the accepting path ran too: the draft model's and Reuse's drafts are the target's own tokens
    EXPECT_GT(rows["sd"].accepted, 0);
    EXPECT_GT(rows["reuse"].accepted, 0);
}

struct typed_sweep : ::testing::TestWithParam<std::tuple<const char *, int32_t>> {};

TEST_P(typed_sweep, every_drafter_of_the_table_and_auto_equal_ar) {
    const auto [type, n_threads] = GetParam();
    sweep_typed(type, n_threads, GGML_TYPE_F16);
}

// the same sweep over a Q8_0 KV cache (--cache-type q8_0: the patched attention's Q8_0 reads), 1 and 2
// threads: its answers are its own, and every method's equal ar's over it
struct q8_cache_sweep : ::testing::TestWithParam<std::tuple<const char *, int32_t>> {};

TEST_P(q8_cache_sweep, every_drafter_of_the_table_and_auto_equal_ar) {
    const auto [type, n_threads] = GetParam();
    sweep_typed(type, n_threads, GGML_TYPE_Q8_0);
}

INSTANTIATE_TEST_SUITE_P(types, q8_cache_sweep,
                         ::testing::Combine(::testing::Values("f16", "q4_k_m"), ::testing::Values(1, 2)),
                         [](const auto & info) {
                             return std::string(std::get<0>(info.param)) + "_" +
                                    std::to_string(std::get<1>(info.param)) + "_threads";
                         });

INSTANTIATE_TEST_SUITE_P(types, typed_sweep,
                         ::testing::Combine(::testing::Values("f32", "f16", "bf16", "q8_0", "q4_0", "q5_0", "iq4_nl",
                                                              "q4_k_m", "q4_k_s", "q5_k_m", "q6_k"),
                                            ::testing::Values(1, 2)),
                         [](const auto & info) {
                             return std::string(std::get<0>(info.param)) + "_" +
                                    std::to_string(std::get<1>(info.param)) + "_threads";
                         });

// ----------------------------------------------------------------------------
// check-exact: the batch-invariance check of exactness.h for any model and backend

// progress on a terminal (issue 72): under a pseudo-terminal `editspec apply` on the shipped model says
// it reads the prompt, shows the answer's progress and sums it up on stderr; without one, nothing
TEST(apply_cli, progress_on_a_terminal_only) {
    const std::string shipped = std::string(EDITSPEC_MODELS) + "/editspec-target.gguf";
    if (!fs::exists(shipped)) GTEST_SKIP() << "no shipped model";
    temp_dir d;
    // a module long enough (~1,500 tokens, a few seconds) for progress lines twice a second
    std::string code, small;
    for (int i = 0; i < 100; i++) code += "def f" + std::to_string(i) + "(x):\n    return x + " + std::to_string(i) + "\n\n";
    small = code.substr(0, code.find("def f8("));
    write_text(d.path / "m.py", code);
    write_text(d.path / "s.py", small);
    write_text(d.path / "u.py", "# ... existing code ...\ndef f7(x):\n    return x - 7\n# ... existing code ...\n");
    auto cmd = [&](const char * file) {
        return std::string(bin()) + " apply -m " + shipped + " -t 1 -f " + (d.path / file).string() + " -u " +
               (d.path / "u.py").string();
    };
    std::string out;
    ASSERT_EQ(test::run_command("script -qec " + quote(cmd("m.py") + " >/dev/null") + " /dev/null", &out), 0) << out;
    EXPECT_NE(out.find("reading the"), std::string::npos) << out;
    EXPECT_NE(out.find("characters ("), std::string::npos) << "no progress line: " << out;
    EXPECT_NE(out.find("tokens in"), std::string::npos) << out;
    ASSERT_EQ(test::run_command(cmd("s.py") + " 2>&1 >/dev/null", &out), 0) << out;
    EXPECT_EQ(out.find("tokens in"), std::string::npos) << "progress without a terminal: " << out;
    EXPECT_EQ(out.find("reading the"), std::string::npos) << out;
    ASSERT_EQ(test::run_command("script -qec " + quote(cmd("s.py") + " --quiet >/dev/null") + " /dev/null", &out), 0) << out;
    EXPECT_EQ(out.find("tokens in"), std::string::npos) << "progress with --quiet: " << out;
}

// a file's bytes are its own: any byte sequence merges whole (a sequence above U+10FFFF once aborted
// `editspec apply`: llama.cpp's tokenizers throw on it, tokenizer_safe_text), and the bytes come back as they
// were; only a file in another encoding than UTF-8 is refused
TEST(apply_cli, a_file_of_any_bytes_merges_whole) {
    const std::string shipped = std::string(EDITSPEC_MODELS) + "/editspec-target.gguf";
    if (!fs::exists(shipped)) GTEST_SKIP() << "no shipped model";
    temp_dir d;
    const std::string code = "def f():\n    return \"x\xF5\x80\x80\x80y caf\xE9\"\n\n\ndef g():\n    return 1\n";
    write_text(d.path / "bad.py", code);
    write_text(d.path / "u.py", "def g():\n    return 2\n");
    std::string out;
    ASSERT_EQ(test::run_command(std::string(bin()) + " apply -m " + shipped + " -t 1 -f " + (d.path / "bad.py").string() +
                                    " -u " + (d.path / "u.py").string() + " 2>/dev/null",
                                &out),
              0)
        << out;
    EXPECT_EQ(out, code.substr(0, code.rfind("1\n")) + "2\n");
    // a UTF-16 or UTF-32 file (a byte-order mark) is refused: a merge of UTF-8 into it would mix two encodings
    const std::string u16("\xFF\xFE" "d\0e\0f\0 \0f\0(\0)\0:\0\n\0", 20), u32be("\0\0\xFE\xFF\0\0\0x", 8);
    for (const std::string & text : {u16, u32be}) {
        write_text(d.path / "enc.py", text);
        EXPECT_EQ(test::run_command(std::string(bin()) + " apply -m " + shipped + " -t 1 -f " + (d.path / "enc.py").string() +
                                        " -u " + (d.path / "u.py").string() + " --in-place 2>&1",
                                    &out),
                  2)
            << out;
        EXPECT_NE(out.find(text[0] == '\0' ? "is UTF-32BE text" : "is UTF-16LE text"), std::string::npos) << out;
        EXPECT_EQ(test::read_text(d.path / "enc.py"), text) << "the file was changed";
    }
}

// --kernels (every command): parsed, in --help, and on a machine without a GPU a warning that the CPU's
// kernels are the exact ones whatever is chosen; the cost model's curve is keyed by the kernels in force
TEST(kernels_cli, parsed_warned_and_shown) {
    std::string out;
    EXPECT_EQ(test::run_command(std::string(bin()) + " complete" + model_arg() + " --kernels fast -p x -n 1 2>&1", &out), 2) << out;
    EXPECT_NE(out.find("auto, exact, stock"), std::string::npos) << out;
    for (const char * cmd : {"complete", "apply", "edit", "serve", "bench", "cost", "check-exact"}) {
        EXPECT_EQ(test::run_command(std::string(bin()) + " " + cmd + " --help", &out), 0) << cmd;
        EXPECT_NE(out.find("--kernels"), std::string::npos) << cmd << " --help does not list --kernels";
    }
    EXPECT_EQ(test::run_command(std::string(bin()) + " complete" + model_arg() + " --kernels stock -p 'def f(' -n 2 2>&1", &out), 0)
        << out;
    if (!engine_has_gpu()) {
        EXPECT_NE(out.find("no GPU"), std::string::npos) << out;
        EXPECT_EQ(test::run_command(std::string(bin()) + " cost" + model_arg() + " --kernels stock --max 2 --fresh --no-save 2>&1", &out), 0)
            << out;
        EXPECT_NE(out.find("exact kernels (CPU)"), std::string::npos) << out;
    }
}

TEST(check_exact_cli, exact_by_default_and_a_difference_with_stock_flash_attention) {
    const std::string m = " -m " + quote(test::typed_model_path("f16")) + " -t 1 --max 64";
    std::string out;
    EXPECT_EQ(test::run_command(std::string(bin()) + " check-exact" + m + " --prefix 0 --prefix 37 2>&1", &out), 0) << out;
    EXPECT_NE(out.find("exact: every row"), std::string::npos) << out;
    EXPECT_EQ(test::run_command(std::string(bin()) + " check-exact" + m + " --prefix 300 --no-flash-attn 2>&1", &out), 0)
        << out;
    // stock flash attention (its tiled kernel for 64+ rows, a KV split across threads for one token
    // over 512+ cells; docs/exactness.md) gives a row other sums: the check must see it
    EXPECT_EQ(test::run_command("EDITSPEC_STOCK_FLASH_ATTN=1 " + std::string(bin()) + " check-exact -m " +
                                    quote(test::typed_model_path("f16")) + " -t 2 --max 64 --prefix 600 2>&1",
                                &out),
              3)
        << out;
    EXPECT_NE(out.find("differs: pass of"), std::string::npos) << out;
    EXPECT_EQ(test::run_command(std::string(bin()) + " check-exact -m " + quote(test::typed_model_path("f16")) +
                                    " --max 0 2>&1",
                                &out),
              2)
        << out;
    EXPECT_NE(out.find("--max 0 out of range"), std::string::npos) << out;
    // a Q8_0 cache: exact too (the patched attention reads it), and a type not offered is refused
    EXPECT_EQ(test::run_command(std::string(bin()) + " check-exact" + m + " --prefix 300 --cache-type q8_0 2>&1", &out), 0)
        << out;
    EXPECT_NE(out.find("q8_0 KV cache"), std::string::npos) << out;
    EXPECT_EQ(test::run_command(std::string(bin()) + " check-exact" + m + " --cache-type q4_0 2>&1", &out), 2) << out;
    EXPECT_NE(out.find("choose f16"), std::string::npos) << out;
    // the server's step: 3 requests in the step engine's layout (regions on a CPU), and the range
    EXPECT_EQ(test::run_command(std::string(bin()) + " check-exact" + m + " --prefix 37 --requests 3 2>&1", &out), 0) << out;
    EXPECT_NE(out.find("3 in regions"), std::string::npos) << out;
    EXPECT_EQ(test::run_command(std::string(bin()) + " check-exact" + m + " --requests 65 2>&1", &out), 2) << out;
    EXPECT_NE(out.find("--requests 65 out of range"), std::string::npos) << out;
}
