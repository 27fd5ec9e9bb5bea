// Fast apply prompts: the <code>/<update> message and the plain edit template around an update.
#include "editspec/apply.h"
#include "editspec/chat.h"
#include "editspec/edit.h"

namespace editspec {

std::string apply_message(const apply_input & in) {
    std::string s;
    if (!in.instruction.empty()) {
        s += "<instruction>" + in.instruction + "</instruction>\n";
    }
    return s + "<code>" + in.code + "</code>\n<update>" + in.update + "</update>";
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
    if (!between(text, "<update>", "</update>", s, in.update, nullptr)) return false;
    between(text.substr(0, text.find("<code>")), "<instruction>", "</instruction>", 0, in.instruction, nullptr);
    out = in;
    return true;
}

bool apply_prompt_parse_special(const model & m) {
    return chat_template_known(m);
}

std::string apply_prompt(const model & m, const apply_input & in) {
    if (apply_prompt_parse_special(m)) {
        return chat_render(m, {{"user", apply_message(in)}});
    }
    std::string update = in.update;
    while (!update.empty() && update.back() == '\n') update.pop_back();
    const std::string what = in.instruction.empty() ? "Apply the update to the code." : in.instruction;
    return edit_prompt_plain(what + "\n### Update:\n" + update, in.code);
}

} // namespace editspec
