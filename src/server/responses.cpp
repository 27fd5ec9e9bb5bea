// The response shapes of `editspec serve` (server-state.h): OpenAI's chat and text completions,
// Mistral's FIM, llama.cpp's /completion, Relace's /v1/code/apply and ours, whole or as stream events.
#include "server-state.h"
#include "editspec/apply.h"

#include <algorithm>
#include <random>

namespace editspec {

using json = nlohmann::json;

json usage_json(const served_request & g) {
    // Reuse drafts the prediction: the nodes it proposed, whichever drafter placed them first
    const source_stats & reuse = g.r.by_proposer[DRAFT_SOURCE_REUSE];
    json u = {{"prompt_tokens", g.r.prompt_tokens},
              // cached: kept in place (exact); shifted: kept from an earlier request at another
              // position (--kv-reuse pie); encoded: decoded for this request
              {"prompt_tokens_details", {{"cached_tokens", g.r.prompt_cached - g.r.prompt_shifted},
                                         {"shifted_tokens", g.r.prompt_shifted},
                                         {"encoded_tokens", g.r.prompt_tokens - g.r.prompt_cached},
                                         {"stale_tokens", g.r.prompt_stale}}},
              {"completion_tokens", (int64_t) g.r.tokens.size()},
              {"total_tokens", g.r.prompt_tokens + (int64_t) g.r.tokens.size()}};
    if (g.rq.has_prediction) {
        // accepted: prediction tokens the target kept; rejected: prediction tokens it verified and
        // turned down (they cost a pass's work, as OpenAI bills them)
        u["completion_tokens_details"] = {{"accepted_prediction_tokens", reuse.n_accepted},
                                          {"rejected_prediction_tokens", reuse.n_drafted - reuse.n_accepted}};
    }
    return u;
}

json timings_json(const generate_result & r) {
    // llama-server's fields, counted as it counts them: the pass that reads the prompt's end (and gives
    // the first token) is prompt time, generation the passes after it
    const double prompt_ms = r.prompt_ms + r.first_pass_ms;
    const double gen_ms    = std::max(0.0, r.gen_ms - r.first_pass_ms);
    // its rates leave out the first token, which came with the prompt's pass; ours the first pass's tokens
    const double n_gen     = (double) std::max<int64_t>(0, (int64_t) r.tokens.size() - r.first_pass_tokens);
    // prompt_n: the tokens decoded; cache_n: those the cache held (in place or moved)
    const int32_t n_encoded = r.prompt_tokens - r.prompt_cached;
    return {{"cache_n", r.prompt_cached},
            {"prompt_n", n_encoded},
            {"prompt_ms", prompt_ms},
            {"prompt_per_token_ms", n_encoded > 0 ? prompt_ms / n_encoded : 0.0},
            {"prompt_per_second", prompt_ms > 0 ? 1000.0 * n_encoded / prompt_ms : 0.0},
            {"predicted_n", (int64_t) r.tokens.size()},
            {"predicted_ms", gen_ms},
            {"predicted_per_token_ms", n_gen > 0 ? gen_ms / n_gen : 0.0},
            {"predicted_per_second", gen_ms > 0 ? 1000.0 * n_gen / gen_ms : 0.0},
            {"draft_n", r.draft_tokens},
            {"draft_n_accepted", r.accepted},
            {"drafters", r.drafters},  // editspec's: which drafters ran (`auto` resolved)
            {"policy", r.policy}};     // and the acceptance policy that verified them
}

// "call_" and 24 letters and digits, as OpenAI's ids look
static std::string tool_call_id() {
    static const char k_chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    thread_local std::mt19937_64 rng{std::random_device{}()};
    std::string id = "call_";
    for (int i = 0; i < 24; ++i) id += k_chars[rng() % (sizeof(k_chars) - 1)];
    return id;
}

chat_reply chat_reply_reader::read(const served_request & g, const std::string & text, bool partial) {
    chat_reply r = chat_tools_parse(g.rq.jinja, text, partial);
    for (size_t i = 0; i < r.tool_calls.size(); ++i) {
        if (ids.size() <= i) ids.push_back(r.tool_calls[i].id.empty() ? tool_call_id() : r.tool_calls[i].id);
        r.tool_calls[i].id = ids[i];
    }
    return r;
}

json tool_calls_json(const std::vector<chat_tool_call> & calls) {
    json out = json::array();
    for (const chat_tool_call & c : calls) {
        out.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
    return out;
}

const char * chat_finish_reason(const served_request & g, const chat_reply & reply) {
    const bool own_end = g.r.stop == STOP_REASON_EOG || g.r.stop == STOP_REASON_STRING;
    return !reply.tool_calls.empty() && own_end ? "tool_calls" : api_finish_reason(g.r.stop);
}

// a chat's message: the text, or with a template's parser its content, reasoning and tool calls
static json chat_message_json(const served_request & g, const char ** finish) {
    const generate_result & r = g.r;
    *finish = api_finish_reason(r.stop);
    if (g.rq.is_apply && g.rq.constrain) {
        // a constrained apply message is answered with the merged file, as fast-apply APIs answer
        return {{"role", "assistant"}, {"content", apply_merged_code(g.rq.apply, r.text)}};
    }
    if (!g.rq.jinja.parser) return {{"role", "assistant"}, {"content", r.text}};
    chat_reply_reader reader;
    const chat_reply reply = reader.read(g, r.text, false);
    json m = {{"role", "assistant"}, {"content", reply.content.empty() && !reply.tool_calls.empty() ? json(nullptr) : json(reply.content)}};
    if (!reply.reasoning_content.empty()) m["reasoning_content"] = reply.reasoning_content;
    if (!reply.tool_calls.empty()) m["tool_calls"] = tool_calls_json(reply.tool_calls);
    *finish = chat_finish_reason(g, reply);
    return m;
}

json response_json(server_state & s, const served_request & g, const std::string & id) {
    const generate_result & r = g.r;
    const std::string model = g.rq.model.empty() ? s.model_id : g.rq.model;
    const char * finish = nullptr;
    switch (g.rq.endpoint) {
        case API_CHAT:
        {
            json message = chat_message_json(g, &finish);
            json out = {{"id", id}, {"object", "chat.completion"}, {"created", unix_now()}, {"model", model},
                    {"choices", json::array({{{"index", 0},
                                              {"message", std::move(message)},
                                              {"logprobs", nullptr},
                                              {"finish_reason", finish}}})},
                    {"usage", usage_json(g)},
                    {"timings", timings_json(r)}}; // llama-server's extension, same fields
            // labelled: tool calls held to the template's grammar may differ from the model's free output
            if (g.rq.jinja.parser && !g.rq.is_apply) out["constrained"] = g.req.constraint != nullptr;
            return out;
        }
        case API_FIM: // Mistral's: the completion as a chat message
            return {{"id", id}, {"object", "chat.completion"}, {"created", unix_now()}, {"model", model},
                    {"choices", json::array({{{"index", 0},
                                              {"message", {{"role", "assistant"}, {"content", r.text}}},
                                              {"finish_reason", api_finish_reason(r.stop)}}})},
                    {"usage", usage_json(g)}};
        case API_COMPLETIONS:
            return {{"id", id}, {"object", "text_completion"}, {"created", unix_now()}, {"model", model},
                    {"choices", json::array({{{"index", 0}, {"text", r.text}, {"logprobs", nullptr},
                                              {"finish_reason", api_finish_reason(r.stop)}}})},
                    {"usage", usage_json(g)},
                    {"timings", timings_json(r)}};
        case API_CODE_APPLY: // Relace's fields; "constrained" is ours
            return {{"mergedCode", apply_merged_code(g.rq.apply, r.text)},
                    {"constrained", g.rq.constrain},
                    {"usage", usage_json(g)},
                    {"timings", timings_json(r)}};
        case API_APPLY:
            return {{"id", id}, {"object", "editspec.apply"}, {"created", unix_now()}, {"model", model},
                    {"merged_code", apply_merged_code(g.rq.apply, r.text)},
                    // labelled: constrained output may differ from the model's free greedy output
                    {"constrained", g.rq.constrain},
                    {"finish_reason", api_finish_reason(r.stop)},
                    {"usage", usage_json(g)},
                    {"timings", timings_json(r)}};
        default: break;
    }
    json j = {{"content", r.text},
              {"id_slot", 0},
              {"stop", true},
              {"model", model},
              {"tokens_predicted", (int64_t) r.tokens.size()},
              {"tokens_evaluated", r.prompt_tokens},
              {"stop_type", r.stop == STOP_REASON_EOG ? "eos" : r.stop == STOP_REASON_STRING ? "word" : "limit"},
              {"timings", timings_json(r)},
              {"tokens_cached", r.prompt_cached},
              {"truncated", false}};
    if (g.rq.response_fields.empty()) return j;
    // llama.cpp: only the named fields, flat, "a/b" read from nested objects
    json out = json::object();
    for (const std::string & f : g.rq.response_fields) {
        const json * v = &j;
        size_t at = 0;
        while (v && at <= f.size()) {
            const size_t slash = f.find('/', at);
            const std::string key = f.substr(at, slash == std::string::npos ? std::string::npos : slash - at);
            v = v->is_object() && v->contains(key) ? &(*v)[key] : nullptr;
            if (slash == std::string::npos) break;
            at = slash + 1;
        }
        if (v) out[f] = *v;
    }
    return out;
}

json stream_delta_chunk(server_state & s, const served_request & g, const std::string & id, const json & delta,
                        const char * finish) {
    const std::string model = g.rq.model.empty() ? s.model_id : g.rq.model;
    return {{"id", id}, {"object", "chat.completion.chunk"}, {"created", unix_now()}, {"model", model},
            {"choices", json::array({{{"index", 0}, {"delta", delta}, {"logprobs", nullptr},
                                      {"finish_reason", finish ? json(finish) : json(nullptr)}}})}};
}

json stream_chunk(server_state & s, const served_request & g, const std::string & id, const std::string & text,
                  const char * finish) {
    const std::string model = g.rq.model.empty() ? s.model_id : g.rq.model;
    const json fin = finish ? json(finish) : json(nullptr);
    switch (g.rq.endpoint) {
        case API_CHAT:
        case API_FIM:
            return stream_delta_chunk(s, g, id, finish ? json::object() : json{{"role", "assistant"}, {"content", text}}, finish);
        case API_COMPLETIONS:
            return {{"id", id}, {"object", "text_completion"}, {"created", unix_now()}, {"model", model},
                    {"choices", json::array({{{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", fin}}})}};
        default:
            return {{"content", text}, {"stop", false}};
    }
}

std::string sse(const json & j) {
    return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

} // namespace editspec
