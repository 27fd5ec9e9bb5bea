// A parsed request's prompt tokens on the served model: chat template, edit template, FIM tokens.
#include "editspec/server.h"
#include "editspec/chat.h"
#include "editspec/edit.h"

namespace editspec {

// the last user message: its text outside fenced code blocks (the instruction of an edit) and the
// last fenced block's lines (the code it edits; has_code false when it holds none)
struct user_edit {
    std::string instruction;
    std::string code;
    bool has_code = false;
};

static user_edit last_user_edit(const std::vector<api_message> & messages) {
    std::string text;
    for (const api_message & x : messages) {
        if (x.role == "user") text = x.content;
    }
    user_edit out;
    std::string outside, block;
    bool in_fence = false;
    size_t at = 0;
    while (at < text.size()) {
        size_t nl = text.find('\n', at);
        if (nl == std::string::npos) nl = text.size();
        const std::string_view line = std::string_view(text).substr(at, nl - at);
        if (line.substr(0, 3) == "```") {
            if (in_fence) {
                out.code = block;
                out.has_code = true;
            }
            block.clear();
            in_fence = !in_fence;
        } else if (in_fence) {
            block.append(line).append("\n");
        } else {
            outside.append(line).append("\n");
        }
        at = nl + 1;
    }
    const size_t b = outside.find_first_not_of(" \t\r\n"), e = outside.find_last_not_of(" \t\r\n");
    out.instruction = b == std::string::npos ? "" : outside.substr(b, e - b + 1);
    return out;
}

bool api_apply_constrained(const api_request & rq, const model & m) {
    if (rq.constrain_given) return rq.constrain;
    // the default: an apply decoded greedily on editspec's apply prompt merges right constrained (README);
    // a sampled one is the model's own output, and a chat template's answer may hold more than code
    return rq.is_apply && api_uses_apply_prompt(rq, m) && rq.sampling.temp <= 0.0f;
}

bool api_uses_apply_prompt(const api_request & rq, const model & m) {
    return rq.endpoint == API_APPLY || rq.endpoint == API_CODE_APPLY ||
           (rq.endpoint == API_CHAT && rq.is_apply && !chat_template_known(m));
}

bool api_prompt_tokens(const model & m, const api_request & rq, std::vector<llama_token> & out, api_error & err,
                       size_t n_max, prompt_layout layout, apply_view view) {
    const model_facts & f = m.facts();
    out.clear();
    // The prompt never depends on `prediction`: a prediction is a speed hint, and the same messages
    // give the same greedy answer with or without one.
    const user_edit ue = rq.endpoint == API_CHAT && !chat_template_known(m) ? last_user_edit(rq.messages) : user_edit();
    if (api_uses_apply_prompt(rq, m)) {
        out = m.tokenize(apply_prompt(m, rq.apply, layout, view), true, apply_prompt_parse_special(m));
    } else if (rq.endpoint == API_CHAT && rq.jinja.parser) {
        // rendered by the model's template with its tools (generation_prepare); the template writes the
        // special tokens as text, and its BOS is left to the tokenizer
        out = m.tokenize(rq.jinja.text, true, true);
    } else if (ue.has_code) {
        // a model without a chat template (editspec's own) was trained on the edit template: a last
        // user message holding fenced code is the edit of that code that the rest of the message asks
        // for, prompted as `editspec edit` prompts
        out = m.tokenize(edit_prompt(m, ue.instruction, ue.code, layout), true, false);
    } else if (rq.endpoint == API_CHAT) {
        // turn by turn (chat.h): a request that extends an earlier conversation extends its tokens
        std::vector<chat_message> msgs;
        for (const api_message & x : rq.messages) msgs.push_back({x.role, x.content});
        out = chat_tokens(m, msgs, n_max);
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
        if (f.fim_spm) {
            out.push_back(f.fim_suf);
            append(rq.suffix);
            out.push_back(f.fim_pre);
            append(rq.prefix);
        } else {
            out.push_back(f.fim_pre);
            append(rq.prefix);
            out.push_back(f.fim_suf);
            append(rq.suffix);
        }
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
        // special tokens written as text are the tokens, as llama-server reads a prompt: a client
        // formats its own fill-in-the-middle prompt with the model's FIM tokens (Zed's edit predictions)
        out = m.tokenize(rq.prompt, true, /*parse_special=*/true);
    }
    if (out.empty()) return api_fail(err, "prompt", "the prompt is empty");
    return true;
}

} // namespace editspec
