// Fast apply: merge an edit snippet into a file. An LLM proposes a change as a snippet that elides
// unchanged code with comments such as "# ... existing code ..."; a model writes the whole merged
// file, decoded with the original file as the prediction (Reuse drafts it), so the copied parts
// cost almost nothing.
//
//     editspec::apply_input in{code, snippet, ""};
//     std::string prompt = editspec::apply_prompt(model, in);   // parse special tokens: apply_prompt_parse_special
//     ... generate with method reuse+lookup-longest, drafter_inputs.original = edit_original_tokens(model, code)
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
//   PROMPT_LAYOUT_FILE_FIRST (edit.h): the code first, so that an apply after a chat about the file
//   reuses the file's KV: the message "<code>" + CODE + "</code>\n" + ["<instruction>" + INSTRUCTION
//   + "</instruction>\n"] + "<update>" + UPDATE + "</update>"; the plain template
//       "### Original code:\n" + CODE + "\n### Instruction:\n" + (INSTRUCTION or "Apply the update to
//       the code.") + "\n### Update:\n" + UPDATE + "\n### Edited code:\n"
//
// Pure functions; thread-safe.
#pragma once

#include "editspec/constraint.h"
#include "editspec/edit.h"
#include "editspec/engine.h"

#include <map>
#include <string>
#include <vector>

namespace editspec {

struct apply_input {
    std::string code;        // the file as it is
    std::string update;      // the snippet: changed code, unchanged code elided by comments
    std::string instruction; // optional: what the change is for ("" = none)
};

// How much of the file an apply prompt shows (issue 59: a cold apply reads the file twice, once as the
// prompt and once as the merged output). Reuse and the constraint always have the whole file.
enum apply_view {
    APPLY_VIEW_FILE    = 0, // the whole file (a file whose KV is cached: its prompt reuses it)
    APPLY_VIEW_WINDOWS = 1, // apply_windows: the file's lines near the lines the snippet quotes
    APPLY_VIEW_NONE    = 2, // no file: the instruction and the snippet; the model reads the file as it writes it
    APPLY_VIEW_AUTO    = 3, // per request (apply_view_for): none for a constrained apply, else file
    APPLY_VIEW_CACHED  = 4, // as auto, and file when a cache holds the file's prompt (serve: slots, prompt store)
};
const char * apply_view_name(apply_view v);                      // "file" | "windows" | "none" | "auto" | "cached"
bool apply_view_parse(const std::string & name, apply_view & out); // false on another name
std::string apply_view_names();                                  // "auto, cached, file, windows, none"

// the view a request gets: v itself, or for APPLY_VIEW_AUTO and APPLY_VIEW_CACHED none when `cold`,
// else the file. Cold: a constrained apply that does not run on a KV cache holding its file (a
// document session; with APPLY_VIEW_CACHED also a slot or stored prompt holding half of its file-view
// prompt). Such an apply reads the file once, as it writes it (issue 59: on a CPU the snippet-only
// request is 0.30-0.38x the whole-file one at 3k tokens, and attending over the file makes even a cached
// file's decoding slower than that; docs/results/issue59-apply-layout); a free apply copies the file
// from its prompt.
apply_view apply_view_for(apply_view v, bool cold);

// the lines of the file within APPLY_WINDOW lines of a line the snippet quotes (the same text up to
// trailing blanks, 4 or more characters other than blanks), a line APPLY_WINDOW_GAP for each run of lines
// left out; tools/train/data.py apply_windows is the same, byte for byte
constexpr int32_t APPLY_WINDOW = 3;
constexpr const char * APPLY_WINDOW_GAP = "... lines left out ...";
std::string apply_windows(const std::string & code, const std::string & update, int32_t window = APPLY_WINDOW);

// the user message in the <code>/<update> format; APPLY_VIEW_NONE leaves "<code>...</code>\n" out
std::string apply_message(const apply_input & in, prompt_layout layout = PROMPT_LAYOUT_INSTRUCTION_FIRST,
                          apply_view view = APPLY_VIEW_FILE);

// reads a message in that format (the instruction optional); false when it has no <code> or <update>
bool apply_message_parse(const std::string & text, apply_input & out);

// the prompt for this model (see above); with APPLY_VIEW_NONE the plain template has no
// "### Original code:" section: "### Instruction:\n" + ... + "\n### Update:\n" + UPDATE + "\n### Edited code:\n"
std::string apply_prompt(const model & m, const apply_input & in, prompt_layout layout = PROMPT_LAYOUT_INSTRUCTION_FIRST,
                         apply_view view = APPLY_VIEW_FILE);

// true when apply_prompt(m, ...) used a chat template, whose special tokens must be parsed
bool apply_prompt_parse_special(const model & m);

// The snippet an LLM would propose for the change before -> after: the changed lines of `after`
// with `context` unchanged lines around each change, and `marker` (e.g. "# ... existing code ...")
// on its own line wherever unchanged lines are left out (top, between changes, end). Removed lines
// show only by their missing place between context lines. "" when the texts are equal.
std::string apply_snippet(const std::string & before, const std::string & after, const std::string & marker,
                          int32_t context = 3);

// The merged file in a model's answer: the code inside the answer's fence when it has one
// (edit_extract_code), ending as the original does, with a final newline or without one (a model
// trained on files that end in one writes it everywhere).
std::string apply_merged_code(const apply_input & in, const std::string & answer);

// the text's lines, each with its '\n' (the last without one when the text does not end in one)
std::vector<std::string> apply_lines(const std::string & text);

// true for an elision marker line: a comment ("#", "//", "/*", "--", ";", "<!--") that says
// "...", "existing code", "unchanged" or "rest of"
bool apply_is_marker(const std::string & line);

// true for a fence line: "```" and at most a language tag ("```python", at most APPLY_FENCE_TAG_MAX
// characters), its newline aside; with `partial`, also for a prefix of one (a line still being
// written)
constexpr size_t APPLY_FENCE_TAG_MAX = 32;
bool apply_is_fence(const std::string & line, bool partial = false);

// How a snippet's lines stand to the file's: constrained apply's plan (below), computed once per
// request by apply_align.
struct apply_alignment {
    std::vector<std::string> code, update; // their lines, each ending in '\n' (the snippet's markers and fences left out)
    std::vector<uint8_t> marker_before;    // per update line: a marker stands before it (the first line: always)
    std::vector<int32_t> anchor;           // per update line: the code line it is, or -1
    std::vector<int32_t> code_anchor;      // per code line: the update line that is it, or -1
    std::vector<int32_t> place;            // per update line: the code line it is or replaces, or -1
    std::vector<uint8_t> dropped;          // per code line: deleted by the snippet
    std::vector<int32_t> kept_before;      // [i]: code lines before line i that must be written (size: lines + 1)
    std::vector<int32_t> next_place;       // [j]: code line of the first placed update line from j on (code.size(): none)
    bool marker_at_end = false;            // the snippet ends with a marker: the file goes on after its last line
};
apply_alignment apply_align(const apply_input & in);

// Constrained apply (`--constrain`): the merged file is the original's lines and the snippet's
// (markers and fences left out), each source used in its own order: every line of the output is a
// line of the original after the last one used from it, or the snippet's next line (a small set of
// such positions is tracked, as a line may come from either). Every line of the snippet is written.
// The snippet's lines that are unchanged lines of the original (its longest common subsequence with
// the original; of the longest, the one that also pairs the most changed lines with a like old line,
// then the one with the earliest code lines; lines of a few characters excepted, as new code repeats
// them, unless they stand right beside such a line in both, or end or start a block of the snippet
// next to one) are those lines: writing one uses both, so an unchanged line cannot be written twice.
// A changed line takes the place of its old version (the most alike line there: same indent and
// common prefix and suffix >= 70 % of their mean length, or the same text re-indented, with the short
// lines beside a re-indented one re-indented alike), which may then not be written. The output
// cannot pass an unchanged line or a changed line's place before writing it. The original's lines
// elided by a marker between two placed lines (or before the first, after the last) with no new line
// there must be written (and the file's last line, where new lines follow the last placed line and a
// marker ends the snippet); those between two placed lines with no marker between them are replaced by
// the snippet's lines there (deleted when it shows the two side by side); the output skips the
// original's lines only where the snippet deletes them or right after writing a new line (the lines it
// replaces), so a small model cannot drop lines here and there. New lines around a
// re-indented block (a "try:" and its "except" around a wrapped body) open and close the block that
// wraps it, and replace nothing.
// The model decides the rest: where lines the snippet does not place go, which old lines they
// replace. A fence line ("```" and a language tag; chat models fence their answer) only as the first
// line, and once more when the merge is complete, then only the end; the end only at the start of a
// line (or after an unterminated last line). A small model then cannot garble a name,
// split a character, loop or jump back: it only chooses which lines come next. Where every line the
// output can be writing is one text, known to its end, the output takes that source's own tokens
// (the file's or the snippet's, tokenized whole): the token that starts there when it ends within the
// line, else (the output is between them) tokens that do not pass the next one. A model that copies
// the file without seeing it (apply_view) then writes the tokens Reuse drafts (issue 59). Lossy with respect to
// the model's free greedy output (reported as its own mode); speculative decoding under it equals
// constrained autoregressive decoding token for token.
class apply_constraint : public token_constraint {
public:
    apply_constraint(const model & m, const apply_input & in);
    bool allows(std::span<const llama_token> out, llama_token t) override;

private:
    struct pos {
        int32_t i, j; // next usable line of the original, of the snippet
        // the last line written was a new line of the snippet: the original's next lines may be skipped
        // (those it replaces); otherwise only lines the snippet deletes are (a run of deleted lines
        // follows new lines, never a copied line)
        int32_t skip = 0;
    };
    struct state {
        std::vector<pos> at;     // the positions the output so far can be at (none dominating another)
        std::string      partial; // the line being written
        int32_t          fences = 0;  // fence lines written (a chat model's answer)
        int32_t          lines = 0;   // lines of code written
        // the one text every line the output can be writing is: its source (0 the file, 1 the
        // snippet, -1 none or several texts) and line; known = computed (determined())
        int8_t  src = -1, known = 0;
        int32_t line = -1;
        int8_t  run = -1; // the line after it is the source's next one, so the blanks between are its too (-1: not computed)
    };
    // the source's own tokens: per byte offset of the file's / the snippet's text, the token that
    // starts there or -1; per line of al_.code / al_.update its offset (-1: none)
    struct source_tokens {
        std::vector<llama_token> at;
        std::vector<int32_t> line_start;
    };
    const std::string & piece(llama_token t);
    pos from_code(pos p, int32_t i) const;   // p after writing code line i, or {-1, -1}
    pos from_update(pos p, int32_t j) const; // p after writing update line j, or {-1, -1}
    bool take_line(const std::string & line, state & st) const; // false when no position allows it
    bool prefix_ok(const state & st) const;
    bool extend(const std::string & text, state & st) const;
    bool end_ok(const state & st) const;
    bool complete(const state & st) const; // every required line written
    bool fence_ok(const state & st) const;
    void determined(state & st) const;      // sets st.src, st.line
    int8_t own_token(const state & st, llama_token t); // 1 / 0: the source's tokens allow t / not; -1 no rule here

    const model & m_;
    apply_alignment al_;
    std::vector<int32_t> dropped_before_;       // [i]: code lines before line i the snippet deletes
    std::map<std::string, std::vector<int32_t>> in_code_, in_update_; // line -> its indices
    std::vector<std::string> pieces_;          // per token, filled on first use
    std::vector<uint8_t> piece_known_;
    source_tokens own_[2];                      // the file's, the snippet's
    bool realign_ = false;                      // every byte of the sources is a token of its own
    token_vec done_;                            // the output prefix `states_.back()` is for
    std::vector<state> states_;                 // states_[k]: after done_'s first k tokens
};

} // namespace editspec
