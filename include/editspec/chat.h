// Chat templates: the model's own, through llama.cpp (the engine owns this call), with a plain
// fallback.
//
//     std::vector<editspec::chat_message> msgs = {{"user", "Write a stack class."}};
//     std::string text = editspec::chat_render(model, msgs);   // ends where the assistant speaks
#pragma once

#include "editspec/engine.h"

#include <string>
#include <vector>

namespace editspec {

struct chat_message {
    std::string role;    // "system", "user", "assistant"
    std::string content;
};

// The model's chat template when it has one llama.cpp knows, else a plain
// "### User:\n...\n### Assistant:\n" layout; opens the assistant's turn at the end.
std::string chat_render(const model & m, const std::vector<chat_message> & messages);

// true when the model has a chat template llama.cpp's built-in matcher knows (chat_render uses it,
// and its special tokens must be parsed when the text is tokenized)
bool chat_template_known(const model & m);

} // namespace editspec
