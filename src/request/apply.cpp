// Fast apply prompts: the <code>/<update> message and the plain edit template around an update.
#include "editspec/apply.h"
#include "editspec/chat.h"
#include "editspec/edit.h"
#include "editspec/names.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <vector>

namespace editspec {

static constexpr named<apply_view> VIEWS[] = {
    {APPLY_VIEW_AUTO, "auto"}, {APPLY_VIEW_CACHED, "cached"}, {APPLY_VIEW_FILE, "file"},
    {APPLY_VIEW_WINDOWS, "windows"}, {APPLY_VIEW_NONE, "none"}};

const char * apply_view_name(apply_view v) { return name_of(VIEWS, v); }
bool apply_view_parse(const std::string & name, apply_view & out) { return name_parse(VIEWS, name, out); }
std::string apply_view_names() { return names_list(VIEWS); }

apply_view apply_view_for(apply_view v, bool cold) {
    if (v != APPLY_VIEW_AUTO && v != APPLY_VIEW_CACHED) return v;
    return cold ? APPLY_VIEW_NONE : APPLY_VIEW_FILE;
}

std::string apply_windows(const std::string & code, const std::string & update, int32_t window) {
    auto trimmed = [](std::string l) {
        while (!l.empty() && (l.back() == '\n' || l.back() == '\r' || l.back() == ' ' || l.back() == '\t')) l.pop_back();
        return l;
    };
    std::set<std::string> quoted;
    for (const std::string & l : apply_lines(update)) {
        std::string t = trimmed(l);
        if (std::count_if(t.begin(), t.end(), [](char c) { return c != ' ' && c != '\t'; }) >= 4) quoted.insert(std::move(t));
    }
    const std::vector<std::string> lines = apply_lines(code);
    const size_t w = (size_t) std::max(0, window);
    std::vector<uint8_t> keep(lines.size(), 0);
    for (size_t i = 0; i < lines.size(); i++) {
        if (!quoted.count(trimmed(lines[i]))) continue;
        for (size_t k = i >= w ? i - w : 0; k < lines.size() && k <= i + w; k++) keep[k] = 1;
    }
    std::string out;
    bool gap = false;
    for (size_t i = 0; i < lines.size(); i++) {
        if (!keep[i]) {
            gap = true;
            continue;
        }
        if (gap) out += std::string(APPLY_WINDOW_GAP) + "\n";
        gap = false;
        out += lines[i];
        if (lines[i].back() != '\n') out += "\n";
    }
    if (gap) out += std::string(APPLY_WINDOW_GAP) + "\n";
    return out;
}

// the code an apply prompt shows for this view
static std::string apply_view_code(const apply_input & in, apply_view view) {
    view = apply_view_for(view, false); // asked without a request: the whole file
    return view == APPLY_VIEW_WINDOWS ? apply_windows(in.code, in.update) : view == APPLY_VIEW_NONE ? "" : in.code;
}

std::string apply_message(const apply_input & in, prompt_layout layout, apply_view view) {
    layout = prompt_layout_for_apply(layout);
    view = apply_view_for(view, false);
    const std::string instruction = in.instruction.empty() ? "" : "<instruction>" + in.instruction + "</instruction>";
    const std::string code = view == APPLY_VIEW_NONE ? "" : "<code>" + apply_view_code(in, view) + "</code>\n";
    const std::string body = code + "<update>" + in.update + "</update>";
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

std::string apply_prompt(const model & m, const apply_input & in, prompt_layout layout, apply_view view) {
    view = apply_view_for(view, false);
    if (apply_prompt_parse_special(m)) {
        return chat_render(m, {{"user", apply_message(in, layout, view)}});
    }
    std::string update = in.update;
    while (!update.empty() && update.back() == '\n') update.pop_back();
    const std::string what = in.instruction.empty() ? "Apply the update to the code." : in.instruction;
    if (view == APPLY_VIEW_NONE) return "### Instruction:\n" + what + "\n### Update:\n" + update + "\n### Edited code:\n";
    return edit_prompt_plain(what + "\n### Update:\n" + update, apply_view_code(in, view), prompt_layout_for_apply(layout));
}

} // namespace editspec
