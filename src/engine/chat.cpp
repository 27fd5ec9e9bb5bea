// Chat templates through llama_chat_apply_template, with a plain fallback.
#include "editspec/chat.h"

namespace editspec {

static std::string chat_render_plain(const std::vector<chat_message> & messages) {
    std::string out;
    for (const chat_message & msg : messages) {
        std::string role = msg.role;
        if (!role.empty()) role[0] = (char) toupper((unsigned char) role[0]);
        out += "### " + role + ":\n" + msg.content + "\n";
    }
    out += "### Assistant:\n";
    return out;
}

std::string chat_render(const model & m, const std::vector<chat_message> & messages) {
    const std::string & tmpl = m.facts().chat_template;
    if (tmpl.empty()) {
        return chat_render_plain(messages);
    }
    std::vector<llama_chat_message> msgs;
    size_t total = 0;
    for (const chat_message & msg : messages) {
        msgs.push_back({msg.role.c_str(), msg.content.c_str()});
        total += msg.content.size() + msg.role.size();
    }
    std::string buf(2 * total + 1024, '\0');
    int32_t n = llama_chat_apply_template(tmpl.c_str(), msgs.data(), msgs.size(), true, buf.data(), (int32_t) buf.size());
    if (n > (int32_t) buf.size()) {
        buf.resize(n);
        n = llama_chat_apply_template(tmpl.c_str(), msgs.data(), msgs.size(), true, buf.data(), (int32_t) buf.size());
    }
    if (n < 0) {
        // a template llama.cpp's built-in matcher does not know (it is not a Jinja engine)
        return chat_render_plain(messages);
    }
    buf.resize(n);
    return buf;
}

bool chat_template_known(const model & m) {
    const std::string & tmpl = m.facts().chat_template;
    if (tmpl.empty()) {
        return false;
    }
    const llama_chat_message probe = {"user", "x"};
    return llama_chat_apply_template(tmpl.c_str(), &probe, 1, true, nullptr, 0) >= 0;
}

} // namespace editspec
