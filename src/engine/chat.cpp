// Chat templates through llama_chat_apply_template, with a plain fallback.
#include "editspec/chat.h"

namespace editspec {

static std::string chat_render_plain(const std::vector<chat_message> & messages, bool add_assistant) {
    std::string out;
    for (const chat_message & msg : messages) {
        std::string role = msg.role;
        if (!role.empty()) role[0] = (char) toupper((unsigned char) role[0]);
        out += "### " + role + ":\n" + msg.content + "\n";
    }
    if (add_assistant) out += "### Assistant:\n";
    return out;
}

static std::string chat_render_any(const model & m, const std::vector<chat_message> & messages, bool add_assistant) {
    const std::string & tmpl = m.facts().chat_template;
    if (tmpl.empty()) {
        return chat_render_plain(messages, add_assistant);
    }
    std::vector<llama_chat_message> msgs;
    size_t total = 0;
    for (const chat_message & msg : messages) {
        msgs.push_back({msg.role.c_str(), msg.content.c_str()});
        total += msg.content.size() + msg.role.size();
    }
    std::string buf(2 * total + 1024, '\0');
    int32_t n = llama_chat_apply_template(tmpl.c_str(), msgs.data(), msgs.size(), add_assistant, buf.data(), (int32_t) buf.size());
    if (n > (int32_t) buf.size()) {
        buf.resize(n);
        n = llama_chat_apply_template(tmpl.c_str(), msgs.data(), msgs.size(), add_assistant, buf.data(), (int32_t) buf.size());
    }
    if (n < 0) {
        // a template llama.cpp's built-in matcher does not know (it is not a Jinja engine)
        return chat_render_plain(messages, add_assistant);
    }
    buf.resize(n);
    return buf;
}

std::string chat_render(const model & m, const std::vector<chat_message> & messages) {
    return chat_render_any(m, messages, true);
}

std::string chat_render_closed(const model & m, const std::vector<chat_message> & messages) {
    return chat_render_any(m, messages, false);
}

// the conversation's text becomes `text`: the tokens of what it adds, or of all of it when the
// template rendered the earlier part otherwise (then nothing is shared)
static void chat_extend(const model & m, chat_conversation & c, const std::string & text) {
    const bool special = chat_template_known(m);
    if (!c.tokens.empty() && text.compare(0, c.rendered.size(), c.rendered) == 0) {
        const token_vec t = m.tokenize(std::string_view(text).substr(c.rendered.size()), false, special);
        c.tokens.insert(c.tokens.end(), t.begin(), t.end());
    } else {
        c.tokens = m.tokenize(text, true, special);
    }
    c.rendered = text;
}

// a conversation whose assistant turn is open: the tokens that opened it go
static void chat_close_open_turn(chat_conversation & c) {
    if (c.n_closed >= 0) {
        c.tokens.resize((size_t) c.n_closed);
        c.rendered.resize(c.closed_chars);
        c.n_closed = -1;
    }
}

void chat_add(const model & m, chat_conversation & c, const chat_message & msg) {
    chat_close_open_turn(c);
    c.messages.push_back(msg);
    chat_extend(m, c, chat_render_closed(m, c.messages));
    c.n_closed = (int32_t) c.tokens.size();
    c.closed_chars = c.rendered.size();
    const std::string open = chat_render(m, c.messages);
    if (open.compare(0, c.rendered.size(), c.rendered) == 0) {
        chat_extend(m, c, open);
    } else {
        c.tokens = m.tokenize(open, true, chat_template_known(m)); // no closed prefix to keep
        c.rendered = open;
        c.n_closed = -1;
    }
}

void chat_add_answer(const model & m, chat_conversation & c, std::span<const llama_token> answer, const std::string & text) {
    c.messages.push_back({"assistant", text});
    const std::string closed = chat_render_closed(m, c.messages);
    const std::string written = c.rendered + text;
    c.n_closed = -1;
    if (c.tokens.empty() || closed.compare(0, written.size(), written) != 0) {
        chat_extend(m, c, closed); // the template changed the answer (e.g. trimmed it): its text's tokens
        return;
    }
    c.tokens.insert(c.tokens.end(), answer.begin(), answer.end());
    c.rendered = written;
    chat_extend(m, c, closed);
}

token_vec chat_tokens(const model & m, const std::vector<chat_message> & messages, size_t n_max) {
    chat_conversation c;
    for (const chat_message & msg : messages) {
        if (c.tokens.size() > n_max) return c.tokens; // over the caller's limit already
        if (msg.role == "assistant") {
            chat_add_answer(m, c, m.tokenize(msg.content, false, false), msg.content);
        } else {
            chat_add(m, c, msg);
        }
    }
    if (!messages.empty() && messages.back().role == "assistant") {
        chat_extend(m, c, chat_render(m, messages)); // the assistant speaks again, as chat_render renders it
    }
    return c.tokens;
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
