// Chat templates: the model's own, through llama.cpp (the engine owns this call), with a plain
// fallback.
//
//     std::vector<editspec::chat_message> msgs = {{"user", "Write a stack class."}};
//     std::string text = editspec::chat_render(model, msgs);   // ends where the assistant speaks
#pragma once

#include <cstdint>

#include "editspec/engine.h"

#include <span>
#include <string>
#include <vector>

namespace editspec {

// a call of a tool an assistant's message holds (chat-tools.h)
struct chat_tool_call {
    std::string id;
    std::string name;
    std::string arguments; // JSON text
};

struct chat_message {
    std::string role;    // "system", "user", "assistant", "tool"
    std::string content;
    std::vector<chat_tool_call> tool_calls = {}; // an assistant's calls (rendered by chat-tools.h only)
    std::string tool_call_id = {};               // a "tool" message: the call it answers
    std::string name = {};                       // ... and the tool's name
};

// The model's chat template when it has one llama.cpp knows, else a plain
// "### User:\n...\n### Assistant:\n" layout; opens the assistant's turn at the end.
std::string chat_render(const model & m, const std::vector<chat_message> & messages);

// the same without opening the assistant's turn (add_assistant = false): a conversation that ends
// with the assistant's message, closed as the template closes it
std::string chat_render_closed(const model & m, const std::vector<chat_message> & messages);

// A conversation in token space, turn by turn: each message adds the tokens of the text it adds to
// the rendered conversation, and the assistant's answers are the tokens the model wrote. A turn's
// prompt therefore extends the previous turn's prompt and answer token for token, so a context that
// still holds them decodes only the new turn (context_prefill_cached), and the copy drafter finds
// earlier answers exactly as they were written. (Tokenizing the whole rendered text again can merge
// tokens across a message boundary, or tokenize an answer otherwise than the model wrote it.)
//
//     editspec::chat_conversation c;
//     editspec::chat_add(m, c, {"user", "Write fib."});        // c.tokens: the prompt of turn 1
//     ... generate r from c.tokens ...
//     editspec::chat_add_answer(m, c, r.tokens, r.text);
//     editspec::chat_add(m, c, {"user", "Now memoize it."});   // the prompt of turn 2
struct chat_conversation {
    std::vector<chat_message> messages;
    token_vec tokens;     // the conversation so far; after a user message, it ends where the assistant speaks
    std::string rendered; // the text whose tokens these are (the template's rendering)
    int32_t n_closed = -1;   // while the assistant's turn is open: tokens before the text that opened it
    size_t closed_chars = 0; // ... and that text's offset in `rendered`
};

// appends a system or user message and opens the assistant's turn
void chat_add(const model & m, chat_conversation & c, const chat_message & msg);
// appends the assistant's answer: `answer` (the tokens the model wrote, its end-of-turn token left
// out) and the text with which the template closes the turn; text = the answer's text
void chat_add_answer(const model & m, chat_conversation & c, std::span<const llama_token> answer, const std::string & text);
// a whole conversation given as text (a chat request's messages), the answers tokenized as text,
// ending with the assistant's turn open: the same tokens as chat_add / chat_add_answer produce when
// each answer's text tokenizes to the tokens the model wrote. Rendering turn by turn costs the
// conversation's length once per message: it stops once more than n_max tokens are out (the caller's
// context check then refuses them), so a long hostile conversation costs no more than a full context.
token_vec chat_tokens(const model & m, const std::vector<chat_message> & messages, size_t n_max = SIZE_MAX);

// true when the model has a chat template llama.cpp's built-in matcher knows (chat_render uses it,
// and its special tokens must be parsed when the text is tokenized)
bool chat_template_known(const model & m);

} // namespace editspec
