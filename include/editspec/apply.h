// Fast apply: merge an edit snippet into a file. An LLM proposes a change as a snippet that elides
// unchanged code with comments such as "# ... existing code ..."; a model writes the whole merged
// file, decoded with the original file as the prediction (Reuse drafts it), so the copied parts
// cost almost nothing.
//
//     editspec::apply_input in{code, snippet, ""};
//     std::string prompt = editspec::apply_prompt(model, in);   // parse special tokens: apply_prompt_parse_special
//     ... generate with method reuse+lookup-longest, method_inputs.original = edit_original_tokens(model, code)
//     std::string merged = editspec::edit_extract_code(result.text);
//
// The prompt format:
//
//   a model with a chat template: chat_render(model, {{"user", apply_message(in)}}), the message in
//   the format fast-apply models use:
//       ["<instruction>" + INSTRUCTION + "</instruction>\n"] + "<code>" + CODE + "</code>\n<update>" + UPDATE + "</update>"
//
//   otherwise edit_prompt_plain (edit.h) with the update inside the instruction, byte for byte:
//       "### Instruction:\n" + (INSTRUCTION or "Apply the update to the code.") + "\n### Update:\n" + UPDATE
//       + "\n### Original code:\n" + CODE + "\n### Edited code:\n"
//     followed in training data by the merged file and EOS.
//
// Pure functions; thread-safe.
#pragma once

#include "editspec/engine.h"

#include <string>

namespace editspec {

struct apply_input {
    std::string code;        // the file as it is
    std::string update;      // the snippet: changed code, unchanged code elided by comments
    std::string instruction; // optional: what the change is for ("" = none)
};

// the user message in the <code>/<update> format
std::string apply_message(const apply_input & in);

// reads a message in that format (the instruction optional); false when it has no <code> or <update>
bool apply_message_parse(const std::string & text, apply_input & out);

// the prompt for this model (see above)
std::string apply_prompt(const model & m, const apply_input & in);

// true when apply_prompt(m, ...) used a chat template, whose special tokens must be parsed
bool apply_prompt_parse_special(const model & m);

// The snippet an LLM would propose for the change before -> after: the changed lines of `after`
// with `context` unchanged lines around each change, and `marker` (e.g. "# ... existing code ...")
// on its own line wherever unchanged lines are left out (top, between changes, end). Removed lines
// show only by their missing place between context lines. "" when the texts are equal.
std::string apply_snippet(const std::string & before, const std::string & after, const std::string & marker,
                          int32_t context = 3);

} // namespace editspec
