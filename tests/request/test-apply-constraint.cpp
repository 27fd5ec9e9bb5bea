// Constrained apply (apply.h, constraint.h): what the constraint allows, and that speculative
// decoding under it equals constrained autoregressive decoding token for token.
#include "common/test-util.h"

#include "editspec/apply.h"
#include "editspec/request.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

using namespace editspec;

namespace {

const std::string k_shipped = std::string(EDITSPEC_MODELS) + "/editspec-target.gguf";
const std::string k_examples = std::string(EDITSPEC_MODELS) + "/../docs/examples/apply/";

// feeds text's tokens one by one; the number allowed before the first refusal (all: the size)
size_t allowed_prefix(const model & m, apply_constraint & c, const std::string & text, bool then_end, bool * end_ok) {
    const token_vec toks = m.tokenize(text, false, false);
    token_vec out;
    for (llama_token t : toks) {
        if (!c.allows(out, t)) return out.size();
        out.push_back(t);
    }
    const llama_token eos = m.facts().eos != LLAMA_TOKEN_NULL ? m.facts().eos : m.facts().eot;
    if (then_end) *end_ok = c.allows(out, eos);
    return out.size();
}

// the constraint for `in` allows all of text's tokens and then the end
bool allows_all(const model & m, const apply_input & in, const std::string & text) {
    apply_constraint c(m, in);
    bool end = false;
    return allowed_prefix(m, c, text, true, &end) == m.tokenize(text, false, false).size() && end;
}

// ... or refuses one of its tokens, or the end after them
bool refuses(const model & m, const apply_input & in, const std::string & text) {
    apply_constraint c(m, in);
    bool end = true;
    return allowed_prefix(m, c, text, true, &end) < m.tokenize(text, false, false).size() || !end;
}

const char * k_code =
    "import os\n"
    "\n"
    "def load(path):\n"
    "    with open(path) as f:\n"
    "        return f.read()\n"
    "\n"
    "def save(path, text):\n"
    "    tmp = path + '.tmp'\n"
    "    with open(tmp, 'w') as f:\n"
    "        f.write(text)\n"
    "    os.replace(tmp, path)\n"
    "\n"
    "def size(path):\n"
    "    return os.path.getsize(path)\n";

// renames save's parameter, deletes nothing, elides the rest
const char * k_update =
    "# ... existing code ...\n"
    "def save(path, content):\n"
    "    tmp = path + '.tmp'\n"
    "    with open(tmp, 'w') as f:\n"
    "        f.write(content)\n"
    "# ... existing code ...\n";

// the code with save's parameter renamed
std::string merged_of(std::string code) {
    for (const char * from : {"def save(path, text)", "f.write(text)"}) {
        const std::string f = from;
        std::string to = f;
        to.replace(to.find("text"), 4, "content");
        code.replace(code.find(f), f.size(), to);
    }
    return code;
}

} // namespace

TEST(apply_constraint, markers) {
    EXPECT_TRUE(apply_is_marker("# ... existing code ...\n"));
    EXPECT_TRUE(apply_is_marker("    // ... rest of the code\n"));
    EXPECT_TRUE(apply_is_marker("# (unchanged code)\n"));
    EXPECT_FALSE(apply_is_marker("x = 1  # ...\n"));
    EXPECT_FALSE(apply_is_marker("print('...')\n"));
}

TEST(apply_constraint, allows_the_merge_and_refuses_slips) {
    auto m = test::load_or_fail(k_shipped);
    ASSERT_TRUE(m);
    const apply_input in{k_code, k_update, ""};
    const std::string merged = merged_of(k_code);
    EXPECT_TRUE(allows_all(*m, in, merged)) << "the whole merge, then the end";
    auto refused = [&](const std::string & text, const char * what) { EXPECT_TRUE(refuses(*m, in, text)) << what; };
    std::string garbled = merged;
    garbled.replace(garbled.find("getsize"), 7, "getsizz");
    refused(garbled, "a garbled name");
    std::string twice = merged;
    twice.insert(twice.find("def size"), "def size(path):\n");
    refused(twice, "an unchanged line written twice");
    std::string back = merged;
    back.insert(back.find("def size"), "import os\n");
    refused(back, "a line from further up");
    std::string old = merged;
    old.insert(old.find("    tmp"), "def save(path, text):\n");
    refused(old, "the old line beside its replacement... then the end comes too early or never");
    refused(merged.substr(0, merged.find("def size")), "an elided line left out (the end refused)");
    std::string marker = merged;
    marker.insert(marker.find("def size"), "# ... existing code ...\n");
    refused(marker, "a marker copied");
    // a chat model's fences: around the whole merge only, a language tag at most
    EXPECT_TRUE(allows_all(*m, in, "```python\n" + merged + "```\n"));
    refused(merged + "```(start, range(size)\n", "text after a fence");
    refused("```python\n" + merged + "```\nimport os\n", "a line after the closing fence");
    refused("import os\n```\n" + merged.substr(10), "a fence opened after the first line");
    refused("```python\n" + merged.substr(0, merged.find("def size")) + "```\n", "the fence closed before the merge is whole");
}

TEST(apply_constraint, deleted_lines_stay_deleted) {
    auto m = test::load_or_fail(k_shipped);
    ASSERT_TRUE(m);
    // the snippet shows "tmp = ..." and "with open" side by side: the line between them goes
    const std::string code = "def f(a):\n    x = a + 1\n    print('debug', x)\n    y = x * 2\n    return y\n";
    const std::string update = "def f(a):\n    x = a + 1\n    y = x * 2\n# ... existing code ...\n";
    const apply_input in{code, update, ""};
    apply_constraint c1(*m, in);
    bool end = false;
    const std::string good = "def f(a):\n    x = a + 1\n    y = x * 2\n    return y\n";
    EXPECT_EQ(allowed_prefix(*m, c1, good, true, &end), m->tokenize(good, false, false).size());
    EXPECT_TRUE(end);
    apply_constraint c2(*m, in);
    EXPECT_LT(allowed_prefix(*m, c2, code, false, &end), m->tokenize(code, false, false).size());
}

// what the snippet decides, case by case: the merge it allows, and a slip it refuses
TEST(apply_constraint, snippet_rules) {
    auto m = test::load_or_fail(k_shipped);
    ASSERT_TRUE(m);
    struct rule_case {
        const char * what, * code, * update, * merged, * slip;
    };
    const rule_case cases[] = {
        // a blank line beside an unchanged line before a marker is the code's own, not a new one: the
        // method the marker elides must still be written (docs/examples/apply/inventory.py)
        {"g, elided by the marker, left out",
         "class A:\n    def f(self):\n        return 1\n\n    def g(self):\n        return 2\n\n    def h(self):\n        return 3\n",
         "# ... existing code ...\n    def f(self):\n        return 10\n\n# ... existing code ...\n    def h(self):\n        return 3\n",
         "class A:\n    def f(self):\n        return 10\n\n    def g(self):\n        return 2\n\n    def h(self):\n        return 3\n",
         "class A:\n    def f(self):\n        return 10\n\n    def h(self):\n        return 3\n"},
        // a changed line between two unchanged lines, with no marker there, replaces the code between
        // them however unlike its old version it is (docs/examples/apply/wordstats.py)
        {"the old line kept",
         "def top(path, n):\n    with open(path) as f:\n        c = Counter(words(f.read()))\n    return c.most_common(n)\n",
         "def top(path, n):\n    with open(path) as f:\n        c = Counter(w for w in words(f.read()) if w)\n    return c.most_common(n)\n",
         "def top(path, n):\n    with open(path) as f:\n        c = Counter(w for w in words(f.read()) if w)\n    return c.most_common(n)\n",
         "def top(path, n):\n    with open(path) as f:\n        c = Counter(words(f.read()))\n        c = Counter(w for w in words(f.read()) if w)\n"
         "    return c.most_common(n)\n"},
        // a context line the code has twice is its occurrence nearest the previous context line: the
        // code between the two occurrences is elided, not deleted (held-out apply task 00069)
        {"the code between two occurrences left out",
         "def t(self):\n    x = X()\n    x.a = 42\n    self.check(1)\n\n    y = load(x)\n    self.check(1)\n\n    z = 3\n",
         "    # ... rest of the code ...\n    x = X()\n    x.a = 43\n    self.check(1)\n    # ... rest of the code ...\n",
         "def t(self):\n    x = X()\n    x.a = 43\n    self.check(1)\n\n    y = load(x)\n    self.check(1)\n\n    z = 3\n",
         "def t(self):\n    x = X()\n    x.a = 43\n    self.check(1)\n\n    z = 3\n"},
    };
    for (const rule_case & c : cases) {
        const apply_input in{c.code, c.update, ""};
        EXPECT_TRUE(allows_all(*m, in, c.merged)) << c.what;
        EXPECT_TRUE(refuses(*m, in, c.slip)) << c.what;
    }
}

// a body wrapped in a new block: its re-indented lines replace the old ones, the blank line after
// it is the old body's, so the code the end marker elides stays required; every snippet line is
// written, in its order
TEST(apply_constraint, wrapped_body_replaces_the_old_one) {
    auto m = test::load_or_fail(k_shipped);
    ASSERT_TRUE(m);
    const std::string code = "import os\n\ndef f(p):\n    x = os.stat(p)\n    return x.st_size\n\ndef h():\n    pass\n";
    const std::string update = "# ... existing code ...\ndef f(p):\n    try:\n        x = os.stat(p)\n        return x.st_size\n"
                               "    except OSError:\n        return 0\n\n# ... existing code ...\n";
    const apply_input in{code, update, ""};
    const std::string merged = "import os\n\ndef f(p):\n    try:\n        x = os.stat(p)\n        return x.st_size\n"
                               "    except OSError:\n        return 0\n\ndef h():\n    pass\n";
    EXPECT_TRUE(allows_all(*m, in, merged));
    auto refused = [&](const std::string & text, const char * what) { EXPECT_TRUE(refuses(*m, in, text)) << what; };
    std::string old_too = merged;
    old_too.insert(old_too.find("    except"), "    x = os.stat(p)\n");
    refused(old_too, "the old body line written back");
    refused(merged.substr(0, merged.find("def h")), "the elided function left out");
    std::string early = merged;
    early.erase(early.find("def f(p):\n"), 10);
    early.insert(early.find("    except"), "def f(p):\n");
    refused(early, "the snippet's context line moved after its new lines");
}

// the merged file ends as the original does
TEST(apply_constraint, merged_code_keeps_the_final_newline_convention) {
    EXPECT_EQ(apply_merged_code({"a = 1\nb = 2", "", ""}, "a = 10\nb = 2\n"), "a = 10\nb = 2");
    EXPECT_EQ(apply_merged_code({"a = 1\r\nb = 2", "", ""}, "a = 10\r\nb = 2\r\n"), "a = 10\r\nb = 2");
    EXPECT_EQ(apply_merged_code({"a = 1\n", "", ""}, "a = 10"), "a = 10\n");
    EXPECT_EQ(apply_merged_code({"a = 1\n", "", ""}, "a = 10\n"), "a = 10\n");
    EXPECT_EQ(apply_merged_code({"a = 1", "", ""}, "```python\na = 10\n```\n"), "a = 10");
    EXPECT_EQ(apply_merged_code({"a = 1", "", ""}, ""), "");
}

// a file without a final newline: its last line may be written anywhere a line may, with or without
// the newline at the very end (CanItEdit's files end so)
TEST(apply_constraint, unterminated_last_line) {
    auto m = test::load_or_fail(k_shipped);
    ASSERT_TRUE(m);
    const std::string code = "alpha = 1\nbeta = 2\nprint(alpha + beta)";
    const apply_input in{code, "alpha = 10\n# ... existing code ...\nprint(alpha + beta)", ""};
    bool end = false;
    apply_constraint c1(*m, in);
    const std::string merged = "alpha = 10\nbeta = 2\nprint(alpha + beta)";
    EXPECT_EQ(allowed_prefix(*m, c1, merged, true, &end), m->tokenize(merged, false, false).size());
    EXPECT_TRUE(end);
    apply_constraint c2(*m, in);
    EXPECT_EQ(allowed_prefix(*m, c2, merged + "\n", true, &end), m->tokenize(merged + "\n", false, false).size());
    EXPECT_TRUE(end);
}

// speculative decoding under the constraint equals constrained autoregressive decoding, and every
// output line is a line of the file or of the snippet
// n_max: the most tokens generated (-1: twice the file and 64; random models never stop on their own)
static void lossless_on(const std::string & model_path, int32_t threads, int32_t n_max = -1,
                        apply_view view = APPLY_VIEW_FILE) {
    runner_params rp;
    rp.model_path = model_path;
    rp.n_ctx = 2048;
    rp.n_threads = threads;
    runner rn;
    std::string err;
    ASSERT_TRUE(runner_open(rp, rn, &err)) << err;
    const model & m = *rn.target.model;
    std::vector<apply_input> inputs = {{k_code, k_update, ""}};
    for (const char * name : {"inventory", "retry", "wordstats"}) {
        inputs.push_back({test::read_text(k_examples + name + ".py"), test::read_text(k_examples + name + ".update.py"), ""});
        ASSERT_FALSE(inputs.back().code.empty()) << k_examples << name << ".py";
    }
    for (const apply_input & in : inputs) {
        request rq;
        request_apply_tokens(m, in, rq, true, PROMPT_LAYOUT_INSTRUCTION_FIRST, view);
        rq.gen.n_predict = n_max > 0 ? n_max : 2 * (int32_t) rq.original.size() + 64;
        generate_result ar;
        method_spec ms_ar;
        ASSERT_TRUE(method_parse("ar", ms_ar, &err)) << err;
        ASSERT_TRUE(runner_generate(rn, ms_ar, rq, ar, &err)) << err;
        ASSERT_NE(ar.stop, STOP_REASON_ERROR) << ar.error;
        // every complete line comes from the sources, or is the fence the constraint allows around them
        const std::string lines_ok = in.code + in.update;
        for (size_t at = 0, nl; (nl = ar.text.find('\n', at)) != std::string::npos; at = nl + 1) {
            const std::string line = ar.text.substr(at, nl + 1 - at);
            if (apply_is_fence(line)) continue;
            EXPECT_NE(lines_ok.find(line), std::string::npos) << "line not from the sources: " << line;
        }
        for (const char * method : {"reuse@16", "reuse+lookup-longest@24", "lookup@4", "lookup+reuse@32"}) {
            method_spec ms;
            ASSERT_TRUE(method_parse(method, ms, &err)) << err;
            generate_result r;
            ASSERT_TRUE(runner_generate(rn, ms, rq, r, &err)) << err;
            ASSERT_NE(r.stop, STOP_REASON_ERROR) << r.error;
            EXPECT_EQ(r.tokens, ar.tokens) << model_path << " " << method << " t=" << threads << " view "
                                           << apply_view_name(view);
        }
    }
}

// a fence's language tag is as long as a language's name: a random model wrote a 500-character "tag"
// through the constraint (the long tier, q4_k_m)
TEST(apply_constraint, a_fence_tag_is_bounded) {
    EXPECT_TRUE(apply_is_fence("```\n"));
    EXPECT_TRUE(apply_is_fence("```python\n"));
    EXPECT_TRUE(apply_is_fence("```" + std::string(APPLY_FENCE_TAG_MAX, 'a') + "\n"));
    EXPECT_FALSE(apply_is_fence("```" + std::string(APPLY_FENCE_TAG_MAX + 1, 'a') + "\n"));
    EXPECT_TRUE(apply_is_fence("```pyth", true));
    EXPECT_FALSE(apply_is_fence("```" + std::string(APPLY_FENCE_TAG_MAX + 1, 'a'), true));
}

TEST(apply_constraint, lossless_shipped_model_one_and_two_threads) {
    lossless_on(k_shipped, 1);
    lossless_on(k_shipped, 2);
}

// a prompt that shows less of the file (issue 59) changes what the model writes, never that the
// methods agree: Reuse and the constraint still have the whole file
TEST(apply_constraint, lossless_with_less_of_the_file_in_the_prompt) {
    lossless_on(k_shipped, 2, -1, APPLY_VIEW_WINDOWS);
    lossless_on(k_shipped, 1, -1, APPLY_VIEW_NONE);
}

// the views' text; tools/train/test_pipeline.py checks data.apply_windows and apply_prompt_render on
// the same cases, so the training data and the product's prompts stay the same bytes
TEST(apply_view, windows_and_the_snippet_alone) {
    std::string code;
    for (int i = 0; i < 20; i++) code += "line_" + std::to_string(i) + " = " + std::to_string(i) + "\n";
    const std::string update = "# ... existing code ...\nline_9 = 9  \nline_10 = 100\n# ... existing code ...\n";
    EXPECT_EQ(apply_windows(code, update, 2),
              "... lines left out ...\nline_7 = 7\nline_8 = 8\nline_9 = 9\nline_10 = 10\nline_11 = 11\n"
              "... lines left out ...\n");
    EXPECT_EQ(apply_windows("ab\n  xy = 1\nend", "  xy = 1\n", 5), "ab\n  xy = 1\nend\n"); // no gap; a last line without '\n'
    EXPECT_EQ(apply_windows(code, "x\n", 3), "... lines left out ...\n"); // nothing quoted (lines under 4 characters)
    apply_view v;
    EXPECT_TRUE(apply_view_parse("none", v) && v == APPLY_VIEW_NONE);
    EXPECT_FALSE(apply_view_parse("snippet", v));
    EXPECT_EQ(apply_view_names(), "auto, cached, file, windows, none");
    EXPECT_EQ(apply_view_for(APPLY_VIEW_CACHED, true), APPLY_VIEW_NONE);
    EXPECT_EQ(apply_view_for(APPLY_VIEW_AUTO, true), APPLY_VIEW_NONE);
    EXPECT_EQ(apply_view_for(APPLY_VIEW_AUTO, false), APPLY_VIEW_FILE);
    EXPECT_EQ(apply_view_for(APPLY_VIEW_WINDOWS, false), APPLY_VIEW_WINDOWS);
    const apply_input in{"a = 1\n", "a = 2\n", ""};
    EXPECT_EQ(apply_message(in, PROMPT_LAYOUT_INSTRUCTION_FIRST, APPLY_VIEW_NONE), "<update>a = 2\n</update>");
    EXPECT_EQ(apply_message({"a = 1\n", "a = 2\n", "why"}, PROMPT_LAYOUT_FILE_FIRST, APPLY_VIEW_NONE),
              "<update>a = 2\n</update>\n<instruction>why</instruction>");
}

TEST(apply_view, plain_prompts) {
    const std::unique_ptr<model> m = test::load_or_fail(k_shipped, true);
    ASSERT_NE(m, nullptr);
    ASSERT_FALSE(apply_prompt_parse_special(*m));
    const apply_input in{"C\n", "U\n", ""};
    EXPECT_EQ(apply_prompt(*m, in, PROMPT_LAYOUT_INSTRUCTION_FIRST, APPLY_VIEW_NONE),
              "### Instruction:\nApply the update to the code.\n### Update:\nU\n### Edited code:\n");
    EXPECT_EQ(apply_prompt(*m, in, PROMPT_LAYOUT_INSTRUCTION_FIRST, APPLY_VIEW_FILE),
              "### Instruction:\nApply the update to the code.\n### Update:\nU\n### Original code:\nC\n\n### Edited code:\n");
}

// a K-quant, the type most users download, to 160 tokens; the long tier runs every type to the end
TEST(apply_constraint, lossless_q4_k_m_random_model) {
    lossless_on(test::typed_model_path("q4_k_m"), 1, 160);
}

TEST(apply_constraint, long_lossless_quantized_random_models) {
    for (const char * type : {"q4_k_m", "q8_0", "f16"}) lossless_on(test::typed_model_path(type), 1);
}

TEST(apply_constraint, needs_greedy_decoding) {
    runner_params rp;
    rp.model_path = k_shipped;
    rp.n_ctx = 2048;
    rp.n_threads = 1;
    runner rn;
    std::string err;
    ASSERT_TRUE(runner_open(rp, rn, &err)) << err;
    request rq;
    request_apply_tokens(*rn.target.model, {k_code, k_update, ""}, rq, true);
    rq.gen.n_predict = 16;
    rq.gen.sampling.temp = 0.7f;
    method_spec ms;
    ASSERT_TRUE(method_parse("ar", ms, &err));
    generate_result r;
    ASSERT_TRUE(runner_generate(rn, ms, rq, r, &err));
    EXPECT_EQ(r.stop, STOP_REASON_ERROR);
    EXPECT_NE(r.error.find("temperature"), std::string::npos) << r.error;
    rq.gen.sampling.temp = 0.0f;
    ASSERT_TRUE(method_parse("reuse@8:entropy", ms, &err)) << err;
    ASSERT_TRUE(runner_generate(rn, ms, rq, r, &err));
    EXPECT_EQ(r.stop, STOP_REASON_ERROR);
    EXPECT_NE(r.error.find("greedily"), std::string::npos) << r.error;
}
