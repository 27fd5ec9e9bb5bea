// Code editing: the edit prompt, the model's answer turned back into code, and a unified diff.
//
//     std::string prompt = editspec::edit_prompt(model, "Rename x to count.", code);
//     token_vec p = model.tokenize(prompt, true, editspec::edit_prompt_parse_special(model));
//     ... generate (method reuse+lookup-longest: drafter_inputs.original = edit_original_tokens(model, code))
//     std::string edited = editspec::edit_extract_code(result.text);
//     fputs(editspec::edit_unified_diff(code, edited, "a/f.py", "b/f.py").c_str(), stdout);
//
// The prompt format (training data for the draft and target models is rendered exactly so):
//
//   a model with a chat template: chat_render(model, {{"user", U}}) with
//       U = INSTRUCTION + "\n\n```\n" + CODE + ["\n" unless CODE ends in "\n"] + "```"
//     and the answer expected as the edited code, perhaps inside a ``` fence, then end of turn.
//
//   otherwise the plain edit template (edit_prompt_plain), byte for byte:
//       "### Instruction:\n" + INSTRUCTION + "\n### Original code:\n" + CODE + "\n### Edited code:\n"
//     followed in training data by EDITED_CODE and the EOS token (nothing else: no fence, no
//     trailing text). INSTRUCTION and CODE are inserted verbatim (CODE's own final newline, if
//     any, stays, so a file ending in "\n" gives a blank line before "### Edited code:").
//     The prompt is tokenized with BOS (add_special) and without parsing special tokens.
//
// PROMPT_LAYOUT_FILE_FIRST puts the code first, so that requests about one file share its tokens
// as a prefix and a second request reuses the whole file's KV exactly (pie.h):
//       plain: "### Original code:\n" + CODE + "\n### Instruction:\n" + INSTRUCTION + "\n### Edited code:\n"
//       chat:  U = "```\n" + CODE + ["\n" unless CODE ends in "\n"] + "```\n\n" + INSTRUCTION
// The shipped models were trained on the instruction first; they merge as well with the file first
// (docs/results/issue37-workflow) but edit from an instruction far worse (53 % of held-out edits
// exactly right against 23 %, docs/results/issue40-fim). PROMPT_LAYOUT_AUTO, the commands' and the
// server's default (--prompt-layout), takes the file first for applies and for models with a chat
// template, the instruction first for edits on a model without one (prompt_layout_for_edit).
//
// Pure functions; thread-safe.
#pragma once

#include "editspec/engine.h"

#include <string>
#include <vector>

namespace editspec {

enum prompt_layout {
    PROMPT_LAYOUT_INSTRUCTION_FIRST = 0, // as the shipped models were trained
    PROMPT_LAYOUT_FILE_FIRST        = 1, // the file a prefix of every request about it
    PROMPT_LAYOUT_AUTO              = 2, // per request: prompt_layout_for_edit, prompt_layout_for_apply
};

const char * prompt_layout_name(prompt_layout l);                      // "auto" | "file-first" | "instruction-first"
bool prompt_layout_parse(const std::string & name, prompt_layout & out); // false on another name
std::string prompt_layout_names();                                      // "auto, file-first, instruction-first"

// the layout an edit prompt for m takes: AUTO is the instruction first on a model without a chat
// template (editspec's plain template, trained so), the file first with one; others as given
prompt_layout prompt_layout_for_edit(const model & m, prompt_layout layout);

// the layout an apply prompt takes: AUTO is the file first (the shipped models merge as well so)
prompt_layout prompt_layout_for_apply(prompt_layout layout);

// the plain template above, independent of any model (AUTO: the instruction first)
std::string edit_prompt_plain(const std::string & instruction, const std::string & code,
                              prompt_layout layout = PROMPT_LAYOUT_INSTRUCTION_FIRST);

// the prompt for this model: its chat template when it has one, else edit_prompt_plain; the layout
// as prompt_layout_for_edit says
std::string edit_prompt(const model & m, const std::string & instruction, const std::string & code,
                        prompt_layout layout = PROMPT_LAYOUT_INSTRUCTION_FIRST);

// true when edit_prompt(m, ...) used a chat template, whose special tokens must be parsed
bool edit_prompt_parse_special(const model & m);

// the tokens of the code being edited, as Reuse drafts them (no BOS, no special tokens)
token_vec edit_original_tokens(const model & m, const std::string & code);

// The edited code in a model's answer: when the first non-blank line opens a code fence ("```" or
// "```python"), the text between it and the last closing "```" line (or the end); otherwise the
// answer unchanged.
//   "```python\nx = 1\n```\nDone." -> "x = 1\n"
//   "x = 1\n"                       -> "x = 1\n"
std::string edit_extract_code(const std::string & answer);

// Unified diff of two texts by lines (Myers' O((N+M)D) algorithm after trimming the common head and
// tail), `context` lines around each change, headers "--- name_a" / "+++ name_b". Empty when the
// texts are equal. A last line without "\n" is marked "\ No newline at end of file", as GNU diff
// does, so `patch` applies the result exactly.
std::string edit_unified_diff(const std::string & a, const std::string & b, const std::string & name_a,
                              const std::string & name_b, int32_t context = 3);

} // namespace editspec
