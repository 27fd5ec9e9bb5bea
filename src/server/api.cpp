// A parsed request's prompt tokens on the served model: chat template, edit template, FIM tokens.
#include "editspec/server.h"
#include "editspec/chat.h"
#include "editspec/edit.h"

namespace editspec {

// the last user message without its fenced code blocks: the instruction of an edit
static std::string edit_instruction(const std::vector<api_message> & messages) {
    std::string text;
    for (const api_message & x : messages) {
        if (x.role == "user") text = x.content;
    }
    std::string out;
    bool in_fence = false;
    size_t at = 0;
    while (at < text.size()) {
        size_t nl = text.find('\n', at);
        if (nl == std::string::npos) nl = text.size();
        const std::string line = text.substr(at, nl - at);
        if (line.rfind("```", 0) == 0) {
            in_fence = !in_fence;
        } else if (!in_fence) {
            out += line + "\n";
        }
        at = nl + 1;
    }
    const size_t b = out.find_first_not_of(" \t\r\n"), e = out.find_last_not_of(" \t\r\n");
    return b == std::string::npos ? "" : out.substr(b, e - b + 1);
}

bool api_prompt_tokens(const model & m, const api_request & rq, std::vector<llama_token> & out, api_error & err) {
    const model_facts & f = m.facts();
    out.clear();
    if (rq.endpoint == API_APPLY || (rq.endpoint == API_CHAT && rq.is_apply && !chat_template_known(m))) {
        out = m.tokenize(apply_prompt(m, rq.apply), true, apply_prompt_parse_special(m));
    } else if (rq.endpoint == API_CHAT && rq.has_prediction && !chat_template_known(m)) {
        // a model without a chat template (editspec's own) was trained on the edit template: the
        // request is the edit of the prediction that the last user message asks for (editspec edit)
        out = m.tokenize(edit_prompt(m, edit_instruction(rq.messages), rq.prediction), true, false);
    } else if (rq.endpoint == API_CHAT) {
        // turn by turn (chat.h): a request that extends an earlier conversation extends its tokens
        std::vector<chat_message> msgs;
        for (const api_message & x : rq.messages) msgs.push_back({x.role, x.content});
        out = chat_tokens(m, msgs);
    } else if (rq.has_suffix) {
        if (f.fim_pre == LLAMA_TOKEN_NULL || f.fim_suf == LLAMA_TOKEN_NULL || f.fim_mid == LLAMA_TOKEN_NULL) {
            return api_fail(err, "suffix", "this model has no fill-in-the-middle tokens (FIM_PRE, FIM_SUF, FIM_MID); "
                                       "send a prompt without a suffix, or serve a model trained for infill");
        }
        if (f.add_bos && f.bos != LLAMA_TOKEN_NULL) out.push_back(f.bos);
        auto append = [&](const std::string & text) {
            const token_vec t = m.tokenize(text, false, false);
            out.insert(out.end(), t.begin(), t.end());
        };
        out.push_back(f.fim_pre);
        append(rq.prefix);
        out.push_back(f.fim_suf);
        append(rq.suffix);
        out.push_back(f.fim_mid);
        append(rq.prompt);
    } else if (!rq.prompt_tokens.empty()) {
        for (llama_token t : rq.prompt_tokens) {
            if (t < 0 || t >= f.n_vocab) {
                return api_fail(err, "prompt", "token " + std::to_string(t) + " outside the vocabulary [0, " +
                                               std::to_string(f.n_vocab) + ")");
            }
        }
        out = rq.prompt_tokens;
    } else {
        out = m.tokenize(rq.prompt, true, false);
    }
    if (out.empty()) return api_fail(err, "prompt", "the prompt is empty");
    return true;
}

} // namespace editspec
