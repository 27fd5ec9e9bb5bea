// Tool calls through llama.cpp's chat library (common/chat.h): its Jinja engine renders the model's own
// template with the tools, and the parser it derives from that template reads the reply back.
//
// ref: llama.cpp tools/server/server-common.cpp (oaicompat_chat_params_parse) and server-task.cpp
//      (task_result_state::update_chat_msg): the same calls, in the same order
#include "editspec/chat-tools.h"

#if EDITSPEC_HAVE_LLAMA_COMMON
// llama.cpp's common library (include/llama-common); its Jinja headers define static helpers they do not all use
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "chat.h"
#pragma GCC diagnostic pop
#endif

#include <cctype>

namespace editspec {

#if EDITSPEC_HAVE_LLAMA_COMMON

bool chat_tools_available() { return true; }

static const common_chat_templates * templates_of(const chat_templates & t) {
    return static_cast<const common_chat_templates *>(t.impl.get());
}

bool chat_templates_load(const model & m, const std::string & override_src, chat_templates & out, std::string & err) {
    try {
        common_chat_templates_ptr p = common_chat_templates_init(m.get(), override_src);
        if (!p) {
            err = "the chat template does not compile (llama.cpp's Jinja engine said why, above)";
            return false;
        }
        out.source = common_chat_templates_source(p.get());
        out.owner = &m;
        out.impl = std::shared_ptr<const void>(p.release(), [](const void * x) {
            common_chat_templates_free(const_cast<common_chat_templates *>(static_cast<const common_chat_templates *>(x)));
        });
        return true;
    } catch (const std::exception & e) {
        err = std::string("the chat template does not compile: ") + e.what();
        return false;
    }
}

static common_chat_msg to_common(const chat_message & x) {
    common_chat_msg c;
    c.role = x.role;
    c.content = x.content;
    for (const chat_tool_call & tc : x.tool_calls) c.tool_calls.push_back({tc.name, tc.arguments, tc.id});
    c.tool_call_id = x.tool_call_id;
    c.tool_name = x.name;
    return c;
}

// cp's grammar and its triggers as llama-server hands them to common_sampler (server-schema.cpp's
// grammar_triggers, sampling.cpp's common_sampler_init): a trigger word that is one token triggers on
// that token, a full pattern is anchored, and a grammar that is not lazy first reads the turn's opening
static void grammar_of(const model & m, const common_chat_params & cp, chat_grammar & g) {
    g.gbnf = cp.grammar;
    g.lazy = cp.grammar_lazy;
    for (const common_grammar_trigger & tr : cp.grammar_triggers) {
        switch (tr.type) {
            case COMMON_GRAMMAR_TRIGGER_TYPE_WORD: {
                const token_vec ids = m.tokenize(tr.value, false, true);
                if (ids.size() == 1) g.trigger_tokens.push_back(ids[0]);
                else g.trigger_patterns.push_back(regex_escape(tr.value));
                break;
            }
            case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN: g.trigger_patterns.push_back(tr.value); break;
            case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN_FULL: {
                const std::string & p = tr.value;
                g.trigger_patterns.push_back(p.empty() ? "^$" : (p.front() != '^' ? "^" : "") + p + (p.back() != '$' ? "$" : ""));
                break;
            }
            case COMMON_GRAMMAR_TRIGGER_TYPE_TOKEN: g.trigger_tokens.push_back(tr.token); break;
        }
    }
    if (!g.lazy && !cp.generation_prompt.empty()) {
        const token_vec ids = m.tokenize(cp.generation_prompt, false, true);
        for (size_t i = 0; i < ids.size(); ++i) {
            // some tokenizers put a space before a first special token: not the prompt's
            const std::string piece = m.token_to_piece(ids[i], true);
            if (i == 0 && !piece.empty() && std::isspace((unsigned char) piece[0]) && !std::isspace((unsigned char) cp.generation_prompt[0])) continue;
            g.prefill.push_back(ids[i]);
        }
    }
}

bool chat_tools_render(const chat_templates & t, const chat_tools_input & in, chat_tools_prompt & out, std::string & err) {
    if (!t.impl) {
        err = "no chat template is loaded";
        return false;
    }
    common_chat_templates_inputs ci;
    for (const chat_message & x : in.messages) ci.messages.push_back(to_common(x));
    for (const chat_tool & tool : in.tools) ci.tools.push_back({tool.name, tool.description, tool.parameters.empty() ? "{}" : tool.parameters});
    ci.tool_choice = in.tool_choice == CHAT_TOOL_CHOICE_REQUIRED ? COMMON_CHAT_TOOL_CHOICE_REQUIRED
                   : in.tool_choice == CHAT_TOOL_CHOICE_NONE     ? COMMON_CHAT_TOOL_CHOICE_NONE
                                                                 : COMMON_CHAT_TOOL_CHOICE_AUTO;
    ci.parallel_tool_calls = in.parallel_tool_calls;
    ci.json_schema = in.json_schema;
    ci.add_generation_prompt = true;
    ci.use_jinja = true;
    // llama-server's default: a thinking model's reasoning goes to reasoning_content
    ci.reasoning_format = COMMON_REASONING_FORMAT_DEEPSEEK;
    try {
        const common_chat_params cp = common_chat_templates_apply(templates_of(t), ci);
        auto parser = std::make_shared<common_chat_parser_params>(cp);
        parser->reasoning_format = COMMON_REASONING_FORMAT_DEEPSEEK;
        parser->parse_tool_calls = !in.tools.empty() && in.tool_choice != CHAT_TOOL_CHOICE_NONE;
        if (!cp.parser.empty()) parser->parser.load(cp.parser);
        out.text = cp.prompt;
        out.stops = cp.additional_stops;
        out.grammar = chat_grammar();
        if (!cp.grammar.empty() && (parser->parse_tool_calls || !in.json_schema.empty()) && t.owner) {
            grammar_of(*t.owner, cp, out.grammar);
        }
        out.format = common_chat_format_name(cp.format);
        out.parser = parser;
        return true;
    } catch (const std::exception & e) {
        err = std::string("the model's chat template refused the conversation: ") + e.what();
        return false;
    }
}

static chat_reply from_common(const common_chat_msg & c) {
    chat_reply r;
    r.content = c.content;
    r.reasoning_content = c.reasoning_content;
    for (const common_chat_tool_call & tc : c.tool_calls) r.tool_calls.push_back({tc.id, tc.name, tc.arguments});
    return r;
}

static common_chat_msg reply_to_common(const chat_reply & r) {
    common_chat_msg c;
    c.role = "assistant";
    c.content = r.content;
    c.reasoning_content = r.reasoning_content;
    for (const chat_tool_call & tc : r.tool_calls) c.tool_calls.push_back({tc.name, tc.arguments, tc.id});
    return c;
}

chat_reply chat_tools_parse(const chat_tools_prompt & p, const std::string & text, bool partial) {
    const auto * params = static_cast<const common_chat_parser_params *>(p.parser.get());
    if (!params) {
        chat_reply r;
        r.content = text;
        return r;
    }
    try {
        return from_common(common_chat_parse(text, partial, *params));
    } catch (const std::exception &) {
        // the parser refused what the model wrote (a final reply it cannot read): the text as it is
        chat_reply r;
        r.content = text;
        return r;
    }
}

std::vector<chat_reply_delta> chat_reply_diff(const chat_reply & prev, const chat_reply & next) {
    std::vector<chat_reply_delta> out;
    std::vector<common_chat_msg_diff> diffs;
    try {
        diffs = common_chat_msg_diff::compute_diffs(reply_to_common(prev), reply_to_common(next));
    } catch (const std::exception &) {
        return out; // `next` does not extend `prev` (a parser that read the text otherwise): nothing to add
    }
    for (const common_chat_msg_diff & d : diffs) {
        chat_reply_delta x;
        x.content = d.content_delta;
        x.reasoning_content = d.reasoning_content_delta;
        if (d.tool_call_index != std::string::npos) {
            x.tool_index = (int32_t) d.tool_call_index;
            x.tool_call = {d.tool_call_delta.id, d.tool_call_delta.name, d.tool_call_delta.arguments};
        }
        out.push_back(std::move(x));
    }
    return out;
}

#else // no llama.cpp common library in this build

static const char * k_no_common = "this editspec was built without llama.cpp's common library, which renders tools "
                                  "into the model's chat template (scripts/setup-llama.sh installs it)";

bool chat_tools_available() { return false; }

bool chat_templates_load(const model &, const std::string &, chat_templates &, std::string & err) {
    err = k_no_common;
    return false;
}

bool chat_tools_render(const chat_templates &, const chat_tools_input &, chat_tools_prompt &, std::string & err) {
    err = k_no_common;
    return false;
}

chat_reply chat_tools_parse(const chat_tools_prompt &, const std::string & text, bool) {
    chat_reply r;
    r.content = text;
    return r;
}

std::vector<chat_reply_delta> chat_reply_diff(const chat_reply & prev, const chat_reply & next) {
    std::vector<chat_reply_delta> out;
    if (next.content.size() > prev.content.size()) out.push_back({next.content.substr(prev.content.size()), "", -1, {}});
    return out;
}

#endif

} // namespace editspec
