// Tool calls in a chat: the model's own chat template run by llama.cpp's Jinja engine with the request's
// tools, and the model's reply read back into text, reasoning and tool calls by the parser llama.cpp
// picks for that template (common/chat.h, as `llama-server --jinja` does; the engine owns the call).
// Needs llama.cpp's common library (chat_tools_available()); without it every call fails with a message.
//
//     editspec::chat_templates t;
//     if (!editspec::chat_templates_load(model, "", t, err)) ...          // the GGUF's own template
//     editspec::chat_tools_input in = {msgs, {{"get_weather", "...", R"({"type":"object",...})"}}};
//     editspec::chat_tools_prompt p;
//     if (!editspec::chat_tools_render(t, in, p, err)) ...               // p.text: the prompt
//     ... generate text from p.text, stopping at p.stops too ...
//     editspec::chat_reply r = editspec::chat_tools_parse(p, text, false); // r.tool_calls
#pragma once

#include "editspec/chat.h"

#include <memory>
#include <string>
#include <vector>

namespace editspec {

// a tool the model may call: OpenAI's {"type": "function", "function": {name, description, parameters}}
struct chat_tool {
    std::string name;
    std::string description;
    std::string parameters; // a JSON schema, as JSON text ("" = no parameters)
};

enum chat_tool_choice {
    CHAT_TOOL_CHOICE_AUTO,     // the model decides
    CHAT_TOOL_CHOICE_REQUIRED, // the template is told a call is required (not enforced by a grammar)
    CHAT_TOOL_CHOICE_NONE,     // the tools are not offered
};

struct chat_tools_input {
    std::vector<chat_message> messages; // with their tool_calls, tool_call_id and name
    std::vector<chat_tool> tools;
    chat_tool_choice tool_choice = CHAT_TOOL_CHOICE_AUTO;
    bool parallel_tool_calls = false;
    std::string json_schema; // the answer's JSON schema, as JSON text (OpenAI's response_format; "" = free text)
};

// The model's chat templates (its default and, where it has one, its "tool_use" template), compiled
// once; read-only after loading, so one may serve every thread.
struct chat_templates {
    std::shared_ptr<const void> impl; // llama.cpp's common_chat_templates
    std::string source;               // the template's text
    const model * owner = nullptr;    // whose vocabulary the grammars' trigger words are tokens of
};

// The grammar (llama.cpp's GBNF) a reply with calls follows, as llama.cpp derives it from the template's
// call format; a lazy one applies from a trigger on (the call's opening), before which every token is
// allowed. grammar.h makes it a token constraint.
struct chat_grammar {
    std::string gbnf;                          // "" = none
    bool lazy = false;
    std::vector<std::string> trigger_patterns; // regexes over the reply's text, as llama.cpp's common_sampler builds them
    std::vector<llama_token> trigger_tokens;   // a trigger word that is one token
    token_vec prefill;                         // not lazy: the tokens that opened the turn, read first
};

// what the template rendered and how its reply is read back
struct chat_tools_prompt {
    std::string text;               // the prompt, ending where the assistant speaks
    std::vector<std::string> stops; // strings the template ends a turn with, beyond the model's end token
    std::string format;             // the parser llama.cpp chose ("peg-native", "Content-only", ...)
    std::shared_ptr<const void> parser; // llama.cpp's common_chat_parser_params
    chat_grammar grammar;           // what the calls follow, where there are tools to call
};

// the assistant's reply, read by the template's parser
struct chat_reply {
    std::string content;
    std::string reasoning_content;      // a thinking model's reasoning, where the template marks it
    std::vector<chat_tool_call> tool_calls; // ids as the model wrote them, else empty
};

// one step of a reply as it grows (a stream's delta): text added to content or reasoning, or a tool
// call begun (index, id, name) or its arguments grown
struct chat_reply_delta {
    std::string content;
    std::string reasoning_content;
    int32_t tool_index = -1;    // >= 0: this delta is about tool call tool_index
    chat_tool_call tool_call;   // its id and name when it begins, the arguments' new text
};

// false when this build has no llama.cpp common library (then the others fail with a message)
bool chat_tools_available();

// The model's templates; `override_src` (a --chat-template-file's text) in place of the GGUF's when not
// empty. A model without a template gets ChatML, as llama-server does. false + err when the template
// does not compile.
bool chat_templates_load(const model & m, const std::string & override_src, chat_templates & out, std::string & err);

// Renders the conversation with its tools (add_generation_prompt: the assistant's turn opened). false +
// err (the template's own message) when the template refuses the conversation.
bool chat_tools_render(const chat_templates & t, const chat_tools_input & in, chat_tools_prompt & out, std::string & err);

// The reply `text` read by p's parser; partial: more text may follow (a stream), so an unfinished
// tool call is not yet read as text. Never throws: a reply the parser cannot read is its text.
chat_reply chat_tools_parse(const chat_tools_prompt & p, const std::string & text, bool partial);

// what `next` adds to `prev` (both from chat_tools_parse of a growing text), in order
std::vector<chat_reply_delta> chat_reply_diff(const chat_reply & prev, const chat_reply & next);

} // namespace editspec
