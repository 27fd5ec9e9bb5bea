// Tool calls (chat-tools.h): real model templates (llama.cpp's models/templates/, installed by the set-up)
// render a conversation's tools, calls and results through llama.cpp's Jinja engine, and the parser it
// picks for each template reads a reply's calls back, whole and as a stream's deltas; the template's call
// grammar (grammar.h) makes even a random-weight model write a call that parses, speculative decoding
// under it equal to autoregressive decoding under it.
#include "common/test-util.h"
#include "editspec/chat-tools.h"
#include "editspec/copy.h"
#include "editspec/decoder.h"
#include "editspec/grammar.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>

using namespace editspec;
using json = nlohmann::json;

namespace {

// a template of llama.cpp's tests, beside the vocabularies the set-up installs
std::string template_text(const std::string & name) {
    const std::filesystem::path p = std::filesystem::path(EDITSPEC_VOCAB_DIR) / ".." / "templates" / name;
    return test::read_text(p);
}

const chat_tool k_weather = {"get_weather", "The weather in a city now",
                             R"({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})"};

struct chat_tools_test : public ::testing::Test {
    std::unique_ptr<model> m;
    void SetUp() override {
        if (!chat_tools_available()) GTEST_SKIP() << "built without llama.cpp's common library";
        m = test::load_or_fail(test::tiny_qwen2_path(), true);
        ASSERT_TRUE(m);
    }
    // the prompt of one user message with the weather tool, on template `name`
    chat_tools_prompt render(const std::string & name, const std::vector<chat_message> & msgs, bool tools = true) {
        chat_templates t;
        std::string err;
        EXPECT_TRUE(chat_templates_load(*m, template_text(name), t, err)) << err;
        chat_tools_input in;
        in.messages = msgs;
        if (tools) in.tools = {k_weather};
        chat_tools_prompt p;
        EXPECT_TRUE(chat_tools_render(t, in, p, err)) << err;
        return p;
    }
};

const std::vector<chat_message> k_ask = {{"user", "What is the weather in Paris?"}};

// the reply `text` fed a byte at a time as a stream sees it: its deltas joined must give what the whole
// text parses to
void expect_stream_equals_whole(const chat_tools_prompt & p, const std::string & text) {
    const chat_reply whole = chat_tools_parse(p, text, false);
    chat_reply prev;
    std::string content, reasoning;
    std::vector<chat_tool_call> calls;
    auto take = [&](const chat_reply & next) {
        for (const chat_reply_delta & d : chat_reply_diff(prev, next)) {
            content += d.content;
            reasoning += d.reasoning_content;
            if (d.tool_index >= 0) {
                if ((size_t) d.tool_index >= calls.size()) calls.resize(d.tool_index + 1);
                if (!d.tool_call.name.empty()) calls[d.tool_index].name = d.tool_call.name;
                calls[d.tool_index].arguments += d.tool_call.arguments;
            }
        }
        prev = next;
    };
    for (size_t n = 1; n <= text.size(); ++n) take(chat_tools_parse(p, text.substr(0, n), true));
    take(whole);
    EXPECT_EQ(content, whole.content);
    EXPECT_EQ(reasoning, whole.reasoning_content);
    ASSERT_EQ(calls.size(), whole.tool_calls.size());
    for (size_t i = 0; i < calls.size(); ++i) {
        EXPECT_EQ(calls[i].name, whole.tool_calls[i].name);
        EXPECT_EQ(json::parse(calls[i].arguments), json::parse(whole.tool_calls[i].arguments)) << calls[i].arguments;
    }
}

} // namespace

TEST_F(chat_tools_test, qwen25_renders_the_tools_and_reads_a_call_back) {
    const chat_tools_prompt p = render("Qwen-Qwen2.5-7B-Instruct.jinja", k_ask);
    EXPECT_NE(p.text.find("<tools>"), std::string::npos) << p.text;
    EXPECT_NE(p.text.find("get_weather"), std::string::npos) << p.text;
    EXPECT_NE(p.text.find("What is the weather in Paris?"), std::string::npos);
    EXPECT_TRUE(p.text.ends_with("<|im_start|>assistant\n")) << p.text;
    const std::string reply = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    const chat_reply r = chat_tools_parse(p, reply, false);
    ASSERT_EQ(r.tool_calls.size(), 1u) << r.content;
    EXPECT_EQ(r.tool_calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(r.tool_calls[0].arguments), json({{"city", "Paris"}}));
    EXPECT_EQ(r.content, "");
    expect_stream_equals_whole(p, "Let me look that up.\n" + reply);
    // a reply without a call is its text, and streams as it
    EXPECT_EQ(chat_tools_parse(p, "It is sunny.", false).content, "It is sunny.");
    EXPECT_TRUE(chat_tools_parse(p, "It is sunny.", false).tool_calls.empty());
    expect_stream_equals_whole(p, "It is sunny, 21 degrees.");
}

TEST_F(chat_tools_test, qwen3_coder_reads_its_xml_calls) {
    const chat_tools_prompt p = render("Qwen3-Coder.jinja", k_ask);
    EXPECT_NE(p.text.find("get_weather"), std::string::npos) << p.text;
    const std::string reply = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>";
    const chat_reply r = chat_tools_parse(p, reply, false);
    ASSERT_EQ(r.tool_calls.size(), 1u) << p.format << ": " << r.content;
    EXPECT_EQ(r.tool_calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(r.tool_calls[0].arguments), json({{"city", "Paris"}}));
    expect_stream_equals_whole(p, reply);
}

TEST_F(chat_tools_test, a_call_and_its_result_render_in_the_next_turn) {
    std::vector<chat_message> msgs = k_ask;
    chat_message call{"assistant", ""};
    call.tool_calls = {{"call_1", "get_weather", R"({"city": "Paris"})"}};
    chat_message result{"tool", "sunny, 21 C"};
    result.tool_call_id = "call_1";
    result.name = "get_weather";
    msgs.push_back(call);
    msgs.push_back(result);
    const chat_tools_prompt p = render("Qwen-Qwen2.5-7B-Instruct.jinja", msgs);
    EXPECT_NE(p.text.find("<tool_response>\nsunny, 21 C\n</tool_response>"), std::string::npos) << p.text;
    EXPECT_NE(p.text.find("\"city\": \"Paris\""), std::string::npos) << p.text;
    EXPECT_TRUE(p.text.ends_with("<|im_start|>assistant\n")) << p.text;
}

TEST_F(chat_tools_test, without_tools_a_reply_is_text_and_a_bad_template_is_an_error) {
    // tool_choice none / no tools: a reply shaped as a call is not read as one
    const chat_tools_prompt p = render("Qwen-Qwen2.5-7B-Instruct.jinja", k_ask, false);
    EXPECT_EQ(p.text.find("<tools>"), std::string::npos);
    const std::string reply = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>";
    EXPECT_TRUE(chat_tools_parse(p, reply, false).tool_calls.empty());
    // the GGUF's own template (none in the test model: ChatML, as llama-server) loads
    chat_templates t;
    std::string err;
    EXPECT_TRUE(chat_templates_load(*m, "", t, err)) << err;
    chat_tools_input in;
    in.messages = k_ask;
    chat_tools_prompt q;
    ASSERT_TRUE(chat_tools_render(t, in, q, err)) << err;
    EXPECT_NE(q.text.find("<|im_start|>user\nWhat is the weather in Paris?"), std::string::npos) << q.text;
    // a template that does not compile: false with the engine's message
    chat_templates bad;
    err.clear();
    EXPECT_FALSE(chat_templates_load(*m, "{% if %}", bad, err));
    EXPECT_FALSE(err.empty());
}

namespace {

// a tool whose every argument the grammar fixes up to a choice: a random-weight model's call ends
const chat_tool k_units = {"set_units", "Set the units", R"({"type": "object", "properties": {"unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["unit"], "additionalProperties": false})"};

} // namespace

TEST_F(chat_tools_test, a_required_calls_grammar_takes_the_call_and_refuses_the_rest) {
    // the calls of each template's format, and what the grammar must refuse where the call's text begins
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"Qwen-Qwen2.5-7B-Instruct.jinja", "<tool_call>\n{\"name\": \"set_units\", \"arguments\": {\"unit\": \"celsius\"}}\n</tool_call>"},
        {"Qwen3-Coder.jinja", "<tool_call>\n<function=set_units>\n<parameter=unit>\ncelsius\n</parameter>\n</function>\n</tool_call>"},
    };
    for (const auto & [name, call] : cases) {
        SCOPED_TRACE(name);
        chat_templates t;
        std::string err;
        ASSERT_TRUE(chat_templates_load(*m, template_text(name), t, err)) << err;
        chat_tools_input in;
        in.messages = {{"user", "Use celsius."}};
        in.tools = {k_units};
        in.tool_choice = CHAT_TOOL_CHOICE_REQUIRED;
        chat_tools_prompt p;
        ASSERT_TRUE(chat_tools_render(t, in, p, err)) << err;
        ASSERT_FALSE(p.grammar.gbnf.empty());
        EXPECT_FALSE(p.grammar.lazy);
        auto c = grammar_constraint::create(*m, p.grammar, err);
        ASSERT_TRUE(c) << err;
        // a call must come: the turn cannot end first
        const llama_token end = m->facts().eot != LLAMA_TOKEN_NULL ? m->facts().eot : m->facts().eos;
        EXPECT_FALSE(c->allows({}, end));
        // the call, token by token, then the end of the turn
        const token_vec toks = m->tokenize(call, false, true);
        for (size_t i = 0; i < toks.size(); ++i) {
            EXPECT_TRUE(c->allows(std::span(toks).first(i), toks[i])) << "token " << i << " '" << m->token_to_piece(toks[i], true) << "'";
        }
        EXPECT_TRUE(c->allows(toks, end));
        EXPECT_EQ(chat_tools_parse(p, call, false).tool_calls.size(), 1u);
        // another tool's name (and in JSON arguments, a unit the schema does not list): refused on the way
        auto refused_on_the_way = [&](const std::string & from, const std::string & wrong) {
            const size_t at = call.find(from);
            token_vec path = m->tokenize(call.substr(0, at), false, true);
            for (llama_token x : m->tokenize(wrong, false, false)) {
                if (!c->allows(path, x)) return true;
                path.push_back(x);
            }
            return false;
        };
        EXPECT_TRUE(refused_on_the_way("set_units", "get_time"));
        if (call.find("\"unit\": ") != std::string::npos) EXPECT_TRUE(refused_on_the_way("\"celsius", "\"kelvin\"}}"));
        // paths that branch and come back (a draft tree's): the same answers
        EXPECT_TRUE(c->allows(std::span(toks).first(3), toks[3]));
        EXPECT_TRUE(c->allows(toks, end));
    }
}

// A grammar that leaves one call to choose (its unit): the random-weight model's answer is that call,
// and speculative decoding under the grammar answers as decoding one token at a time under it
TEST_F(chat_tools_test, decoding_under_a_grammar_is_lossless_and_parses) {
    auto full = test::load_or_fail(test::tiny_qwen2_path());
    ASSERT_TRUE(full);
    chat_templates t;
    std::string err;
    ASSERT_TRUE(chat_templates_load(*full, template_text("Qwen-Qwen2.5-7B-Instruct.jinja"), t, err)) << err;
    chat_tools_input in;
    in.messages = {{"user", "Use celsius."}};
    in.tools = {k_units};
    chat_tools_prompt p;
    ASSERT_TRUE(chat_tools_render(t, in, p, err)) << err;
    chat_grammar g;
    g.gbnf = R"(root ::= "<tool_call>\n{\"name\": \"set_units\", \"arguments\": {\"unit\": " ("\"celsius\"" | "\"fahrenheit\"") "}}\n</tool_call>")";
    const token_vec prompt = full->tokenize(p.text, true, true);
    auto run = [&](bool spec) {
        auto c = grammar_constraint::create(*full, g, err);
        EXPECT_TRUE(c) << err;
        auto ctx = test::make_spec_context(*full, 1024);
        generate_params gp;
        gp.n_predict = 64;
        gp.constraint = c.get();
        if (!spec) return generate_ar(*ctx, prompt, gp);
        copy_drafter d;
        drafter_i * ds[] = {&d};
        spec_params sp;
        sp.draft_max = 8;
        return generate_spec(*ctx, prompt, gp, sp, ds);
    };
    const generate_result ar = run(false), sd = run(true);
    EXPECT_EQ(ar.tokens, sd.tokens);
    EXPECT_EQ(ar.stop, STOP_REASON_EOG) << ar.text;
    const chat_reply r = chat_tools_parse(p, ar.text, false);
    ASSERT_EQ(r.tool_calls.size(), 1u) << ar.text;
    EXPECT_EQ(r.tool_calls[0].name, "set_units");
    const json args = json::parse(r.tool_calls[0].arguments);
    EXPECT_TRUE(args["unit"] == "celsius" || args["unit"] == "fahrenheit") << args.dump();
}

TEST_F(chat_tools_test, an_auto_calls_grammar_waits_for_its_trigger) {
    chat_templates t;
    std::string err;
    ASSERT_TRUE(chat_templates_load(*m, template_text("Qwen-Qwen2.5-7B-Instruct.jinja"), t, err)) << err;
    chat_tools_input in;
    in.messages = {{"user", "Use celsius."}};
    in.tools = {k_units};
    chat_tools_prompt p;
    ASSERT_TRUE(chat_tools_render(t, in, p, err)) << err;
    ASSERT_TRUE(p.grammar.lazy);
    auto c = grammar_constraint::create(*m, p.grammar, err);
    ASSERT_TRUE(c) << err;
    const token_vec hello = m->tokenize("Hello there", false, false);
    for (size_t i = 0; i < hello.size(); ++i) EXPECT_TRUE(c->allows(std::span(hello).first(i), hello[i]));
    // after the trigger, the call's JSON: '{' is allowed, a word is not
    const token_vec open = m->tokenize("<tool_call>\n", false, true);
    const token_vec brace = m->tokenize("{", false, false), word = m->tokenize("Hello", false, false);
    EXPECT_TRUE(c->allows(open, brace[0]));
    EXPECT_FALSE(c->allows(open, word[0]));
    // asked many times at one path, the grammar's mask of the vocabulary answers alike
    const token_vec vocab_probe = m->tokenize("{ \"name\" Hello world [1, 2] </tool_call> x = 3", false, false);
    std::vector<bool> one_by_one;
    for (llama_token x : vocab_probe) one_by_one.push_back(c->allows(open, x));
    for (int i = 0; i < 80; ++i) c->allows(open, word[0]);
    for (size_t i = 0; i < vocab_probe.size(); ++i) EXPECT_EQ(c->allows(open, vocab_probe[i]), one_by_one[i]) << i;
    EXPECT_TRUE(c->allows(open, brace[0]));
}
