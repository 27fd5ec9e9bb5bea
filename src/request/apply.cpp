// Fast apply prompts: the <code>/<update> message and the plain edit template around an update.
#include "editspec/apply.h"
#include "editspec/chat.h"
#include "editspec/edit.h"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace editspec {

std::string apply_message(const apply_input & in, prompt_layout layout) {
    layout = prompt_layout_for_apply(layout);
    const std::string instruction = in.instruction.empty() ? "" : "<instruction>" + in.instruction + "</instruction>";
    const std::string body = "<code>" + in.code + "</code>\n<update>" + in.update + "</update>";
    if (layout == PROMPT_LAYOUT_FILE_FIRST) return instruction.empty() ? body : body + "\n" + instruction;
    return instruction.empty() ? body : instruction + "\n" + body;
}

// the text between open and the last close after it; false when either is missing
static bool between(const std::string & text, const std::string & open, const std::string & close, size_t from,
                    std::string & out, size_t * end) {
    const size_t a = text.find(open, from);
    if (a == std::string::npos) return false;
    const size_t b = text.rfind(close);
    if (b == std::string::npos || b < a + open.size()) return false;
    out = text.substr(a + open.size(), b - a - open.size());
    if (end) *end = b + close.size();
    return true;
}

bool apply_message_parse(const std::string & text, apply_input & out) {
    apply_input in;
    // the code may hold anything but "</code>\n<update>": split there, not at the first "</code>"
    const std::string sep = "</code>\n<update>";
    const size_t s = text.find(sep);
    if (s == std::string::npos) return false;
    size_t end = 0;
    if (!between(text.substr(0, s + 7), "<code>", "</code>", 0, in.code, &end)) return false;
    // the instruction before the code, or after the update (the file-first layout)
    const size_t u_end = text.rfind("</update>");
    const size_t i_after = u_end == std::string::npos ? std::string::npos : text.find("\n<instruction>", u_end);
    const bool after = i_after != std::string::npos && text.compare(text.size() - 14, 14, "</instruction>") == 0 &&
                       text.find("</update>", i_after) == std::string::npos;
    const size_t update_end = after ? i_after : text.size();
    if (!between(text.substr(0, update_end), "<update>", "</update>", s, in.update, nullptr)) return false;
    if (after) between(text.substr(i_after), "<instruction>", "</instruction>", 0, in.instruction, nullptr);
    else between(text.substr(0, text.find("<code>")), "<instruction>", "</instruction>", 0, in.instruction, nullptr);
    out = in;
    return true;
}

std::string apply_merged_code(const apply_input & in, const std::string & answer) {
    std::string code = edit_extract_code(answer);
    if (code.empty() || in.code.empty()) return code;
    const bool crlf = in.code.size() >= 2 && in.code.compare(in.code.size() - 2, 2, "\r\n") == 0;
    if (in.code.back() != '\n') {
        if (code.back() == '\n') code.pop_back();
        if (!code.empty() && code.back() == '\r') code.pop_back();
    } else if (code.back() != '\n') {
        code += crlf ? "\r\n" : "\n";
    }
    return code;
}

std::vector<std::string> apply_lines(const std::string & text) {
    std::vector<std::string> out;
    for (size_t i = 0; i < text.size();) {
        const size_t nl = text.find('\n', i);
        const size_t end = nl == std::string::npos ? text.size() : nl + 1;
        out.push_back(text.substr(i, end - i));
        i = end;
    }
    return out;
}

std::string apply_snippet(const std::string & before, const std::string & after, const std::string & marker,
                          int32_t context) {
    // the new side of each hunk of the unified diff: "@@ -a,b +c,d @@" covers after's lines c .. c+d-1
    const std::string diff = edit_unified_diff(before, after, "a", "b", context);
    const std::vector<std::string> lines = apply_lines(after);
    std::string out;
    size_t next = 0; // first line of `after` not yet shown or elided
    for (size_t at = diff.find("\n@@ "); at != std::string::npos; at = diff.find("\n@@ ", at + 1)) {
        const size_t plus = diff.find(" +", at);
        long c = 0, d = 1;
        if (plus == std::string::npos || sscanf(diff.c_str() + plus + 2, "%ld,%ld", &c, &d) < 1) continue;
        // "+c,0": an empty new range sits after line c
        const size_t first = d == 0 ? (size_t) c : (size_t) std::max(1L, c) - 1;
        const size_t last = std::min(lines.size(), first + (size_t) d);
        if (first > next) out += marker + "\n";
        for (size_t i = std::max(first, next); i < last; i++) {
            out += lines[i];
            if (lines[i].back() != '\n') out += "\n";
        }
        next = std::max(next, last);
    }
    if (diff.empty()) return "";
    if (next < lines.size()) out += marker + "\n";
    return out;
}

bool apply_prompt_parse_special(const model & m) {
    return chat_template_known(m);
}

std::string apply_prompt(const model & m, const apply_input & in, prompt_layout layout) {
    if (apply_prompt_parse_special(m)) {
        return chat_render(m, {{"user", apply_message(in, layout)}});
    }
    std::string update = in.update;
    while (!update.empty() && update.back() == '\n') update.pop_back();
    const std::string what = in.instruction.empty() ? "Apply the update to the code." : in.instruction;
    return edit_prompt_plain(what + "\n### Update:\n" + update, in.code, prompt_layout_for_apply(layout));
}

} // namespace editspec
