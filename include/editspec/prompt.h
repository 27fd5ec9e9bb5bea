// Prompt rendering: chat templates (the model's own, through llama.cpp) with a plain fallback.
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

} // namespace editspec
