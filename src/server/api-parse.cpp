// Request bodies of the OpenAI and llama.cpp endpoints into one api_request, with errors that name
// the field. Pure: no model, no I/O (the fuzz target, fuzz/fuzz-api.cpp, runs this file alone).
//
// ref: OpenAI API reference (chat, completions, Predicted Outputs); llama.cpp tools/server/README.md
//      (/completion, /infill)
#include "editspec/server.h"

#include <algorithm>

namespace editspec {

namespace {

using json = nlohmann::json;

// optional fields of a given JSON type; absent or null leaves the value as it is
bool get_string(const json & j, const char * key, std::string & out, api_error & err) {
    if (!j.contains(key) || j[key].is_null()) return true;
    if (!j[key].is_string()) return api_fail(err, key, std::string("'") + key + "' must be a string");
    out = j[key].get<std::string>();
    return true;
}

bool get_int(const json & j, const char * key, int32_t lo, int32_t hi, int32_t & out, api_error & err) {
    if (!j.contains(key) || j[key].is_null()) return true;
    int64_t v = 0;
    if (!api_json_int(j[key], lo, hi, v)) {
        return api_fail(err, key, std::string("'") + key + "' must be an integer in [" + std::to_string(lo) + ", " +
                                  std::to_string(hi) + "]");
    }
    out = (int32_t) v;
    return true;
}

bool get_number(const json & j, const char * key, double lo, double hi, double & out, api_error & err) {
    if (!j.contains(key) || j[key].is_null()) return true;
    if (!j[key].is_number()) return api_fail(err, key, std::string("'") + key + "' must be a number");
    const double v = j[key].get<double>();
    if (!(v >= lo && v <= hi)) {
        return api_fail(err, key, std::string("'") + key + "' is " + std::to_string(v) + ", outside [" + std::to_string(lo) +
                                  ", " + std::to_string(hi) + "]");
    }
    out = v;
    return true;
}

bool get_bool(const json & j, const char * key, bool & out, api_error & err) {
    if (!j.contains(key) || j[key].is_null()) return true;
    if (!j[key].is_boolean()) return api_fail(err, key, std::string("'") + key + "' must be true or false");
    out = j[key].get<bool>();
    return true;
}

// a string, or OpenAI's content parts [{type: "text", text}] joined
bool get_text(const json & v, const std::string & param, std::string & out, api_error & err) {
    if (v.is_string()) {
        out = v.get<std::string>();
        return true;
    }
    if (!v.is_array()) return api_fail(err, param, "'" + param + "' must be a string or an array of text parts");
    out.clear();
    for (const json & part : v) {
        if (!part.is_object() || !part.contains("text") || !part["text"].is_string() ||
            (part.contains("type") && part["type"] != "text")) {
            return api_fail(err, param, "'" + param + "' parts must be {\"type\": \"text\", \"text\": string}");
        }
        out += part["text"].get<std::string>();
    }
    return true;
}

bool get_stop(const json & j, api_request & out, api_error & err) {
    if (!j.contains("stop") || j["stop"].is_null()) return true;
    const json & s = j["stop"];
    const std::string what = "'stop' must be a string or an array of at most " + std::to_string(API_STOP_MAX) +
                             " strings, each of 1 to " + std::to_string(API_STOP_BYTES_MAX) + " bytes";
    const json list = s.is_string() ? json::array({s}) : s;
    if (!list.is_array() || list.size() > API_STOP_MAX) return api_fail(err, "stop", what);
    for (const json & x : list) {
        if (!x.is_string()) return api_fail(err, "stop", what);
        std::string text = x.get<std::string>();
        if (text.size() > API_STOP_BYTES_MAX) return api_fail(err, "stop", what);
        if (!text.empty()) out.stop.push_back(std::move(text)); // "" stops nothing (OpenAI ignores it too)
    }
    return true;
}

// the sampling fields every endpoint shares
bool get_sampling(const json & j, api_request & out, api_error & err) {
    double temp = 0.0, top_p = 1.0;
    int32_t top_k = 0;
    if (!get_number(j, "temperature", 0.0, 100.0, temp, err) || !get_number(j, "top_p", 0.0, 1.0, top_p, err) ||
        !get_int(j, "top_k", 0, 1 << 20, top_k, err)) {
        return false;
    }
    // any 64-bit integer, folded to the sampler's 32 bits: Tabby sends the time in milliseconds
    uint64_t seed = 0;
    if (j.contains("seed") && !j["seed"].is_null()) {
        const json & v = j["seed"];
        if (v.is_number_unsigned()) seed = v.get<uint64_t>();
        else if (v.is_number_integer()) seed = (uint64_t) v.get<int64_t>();
        else return api_fail(err, "seed", "'seed' must be an integer");
    }
    if (top_p <= 0.0) return api_fail(err, "top_p", "'top_p' must be above 0");
    out.sampling.temp = (float) temp;
    out.sampling.top_p = (float) top_p;
    out.sampling.top_k = top_k;
    out.sampling.seed = (uint32_t) (seed ^ (seed >> 32));
    if (!get_string(j, "session", out.session, err)) return false;
    if (out.session.size() > 64) return api_fail(err, "session", "'session' is not a session id (POST /v1/sessions returns one)");
    if (!get_string(j, "prompt_cache_key", out.cache_key, err)) return false;
    if (out.cache_key.empty() && !get_string(j, "user", out.cache_key, err)) return false;
    if (!api_cache_key_ok(out.cache_key)) {
        return api_fail(err, "prompt_cache_key", "'prompt_cache_key' and 'user' take at most " +
                                                      std::to_string(API_CACHE_KEY_BYTES_MAX) + " printable bytes");
    }
    return get_stop(j, out, err) && get_bool(j, "stream", out.stream, err) && get_string(j, "model", out.model, err);
}

// "constrain" as sent, if it was (api_apply_constrained decides otherwise)
bool get_constrain(const json & j, api_request & out, api_error & err) {
    out.constrain_given = j.contains("constrain") && !j["constrain"].is_null();
    return get_bool(j, "constrain", out.constrain, err);
}

// OpenAI's function: {"name": string, "description"?: string, "parameters"?: object}; `param` names it
bool get_function(const json & f, const std::string & param, std::string & name, std::string * description,
                  std::string * parameters, api_error & err) {
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string() || f["name"].get<std::string>().empty()) {
        return api_fail(err, param, "'" + param + "' must be an object with a non-empty string 'name'");
    }
    name = f["name"].get<std::string>();
    if (description && !get_string(f, "description", *description, err)) return false;
    if (parameters && f.contains("parameters") && !f["parameters"].is_null()) {
        if (!f["parameters"].is_object()) return api_fail(err, param + ".parameters", "'parameters' must be a JSON schema object");
        *parameters = f["parameters"].dump();
    }
    return true;
}

// an assistant message's tool_calls: [{"id", "type": "function", "function": {"name", "arguments": string}}]
bool get_tool_calls(const json & m, api_message & msg, api_error & err) {
    if (!m.contains("tool_calls") || m["tool_calls"].is_null()) return true;
    const json & calls = m["tool_calls"];
    if (!calls.is_array() || calls.size() > API_TOOLS_MAX) {
        return api_fail(err, "messages.tool_calls", "'tool_calls' must be an array of at most " + std::to_string(API_TOOLS_MAX) + " calls");
    }
    for (const json & c : calls) {
        if (!c.is_object() || (c.contains("type") && c["type"] != "function") || !c.contains("function")) {
            return api_fail(err, "messages.tool_calls", "each tool call must be {\"type\": \"function\", \"function\": {name, arguments}}");
        }
        chat_tool_call tc;
        if (!get_function(c["function"], "messages.tool_calls.function", tc.name, nullptr, nullptr, err) ||
            !get_string(c, "id", tc.id, err)) {
            return false;
        }
        const json & f = c["function"];
        if (f.contains("arguments") && !f["arguments"].is_null()) {
            // OpenAI sends the arguments as JSON text; an object is taken as what that text says
            tc.arguments = f["arguments"].is_string() ? f["arguments"].get<std::string>() : f["arguments"].dump();
        }
        msg.tool_calls.push_back(std::move(tc));
    }
    return true;
}

// "tools", "tool_choice", "parallel_tool_calls"
bool get_tools(const json & j, api_request & out, api_error & err) {
    if (j.contains("tools") && !j["tools"].is_null()) {
        const json & tools = j["tools"];
        if (!tools.is_array() || tools.size() > API_TOOLS_MAX) {
            return api_fail(err, "tools", "'tools' must be an array of at most " + std::to_string(API_TOOLS_MAX) + " tools");
        }
        for (const json & t : tools) {
            if (!t.is_object() || !t.contains("type") || t["type"] != "function" || !t.contains("function")) {
                return api_fail(err, "tools", "each tool must be {\"type\": \"function\", \"function\": {name, description, parameters}}");
            }
            chat_tool tool;
            if (!get_function(t["function"], "tools.function", tool.name, &tool.description, &tool.parameters, err)) return false;
            out.tools.push_back(std::move(tool));
        }
    }
    if (!get_bool(j, "parallel_tool_calls", out.parallel_tool_calls, err)) return false;
    if (j.contains("tool_choice") && !j["tool_choice"].is_null()) {
        const json & c = j["tool_choice"];
        const std::string what = "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}";
        if (c.is_string()) {
            const std::string v = c.get<std::string>();
            if (v == "auto") out.tool_choice = CHAT_TOOL_CHOICE_AUTO;
            else if (v == "none") out.tool_choice = CHAT_TOOL_CHOICE_NONE;
            else if (v == "required") out.tool_choice = CHAT_TOOL_CHOICE_REQUIRED;
            else return api_fail(err, "tool_choice", what);
        } else if (c.is_object() && c.contains("function")) {
            std::string name;
            if (!get_function(c["function"], "tool_choice.function", name, nullptr, nullptr, err)) return false;
            // the named function is the only one offered, and a call is required
            auto keep = std::find_if(out.tools.begin(), out.tools.end(), [&](const chat_tool & t) { return t.name == name; });
            if (keep == out.tools.end()) return api_fail(err, "tool_choice", "'tool_choice' names '" + name + "', which is not in 'tools'");
            out.tools = {*keep};
            out.tool_choice = CHAT_TOOL_CHOICE_REQUIRED;
        } else {
            return api_fail(err, "tool_choice", what);
        }
    }
    out.uses_tools = out.uses_tools || !out.tools.empty();
    return true;
}

// OpenAI's "response_format": {"type": "text"}, {"type": "json_object"} or {"type": "json_schema", "json_schema":
// {"name", "schema", "strict"}}; a JSON answer follows the schema's grammar (grammar.h)
bool get_response_format(const json & j, api_request & out, api_error & err) {
    if (!j.contains("response_format") || j["response_format"].is_null()) return true;
    const json & f = j["response_format"];
    const std::string what = "'response_format' must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or "
                             "{\"type\": \"json_schema\", \"json_schema\": {\"name\": ..., \"schema\": {...}}}";
    if (!f.is_object() || !f.contains("type") || !f["type"].is_string()) return api_fail(err, "response_format", what);
    const std::string type = f["type"].get<std::string>();
    if (type == "text") return true;
    if (type == "json_object") {
        out.json_schema = f.contains("schema") && f["schema"].is_object() ? f["schema"].dump() : "{\"type\": \"object\"}";
    } else if (type == "json_schema") {
        if (!f.contains("json_schema") || !f["json_schema"].is_object()) return api_fail(err, "response_format", what);
        const json & w = f["json_schema"];
        if (w.contains("schema") && !w["schema"].is_null() && !w["schema"].is_object()) {
            return api_fail(err, "response_format.json_schema.schema", "'schema' must be a JSON schema object");
        }
        out.json_schema = w.contains("schema") && w["schema"].is_object() ? w["schema"].dump() : "{}";
    } else {
        return api_fail(err, "response_format", what);
    }
    out.uses_tools = true;
    return true;
}

bool parse_chat(const json & j, api_request & out, api_error & err) {
    if (!j.contains("messages") || !j["messages"].is_array() || j["messages"].empty() ||
        j["messages"].size() > API_MESSAGES_MAX) {
        return api_fail(err, "messages", "'messages' must be a non-empty array of at most " + std::to_string(API_MESSAGES_MAX) +
                                         " messages");
    }
    for (const json & m : j["messages"]) {
        api_message msg;
        if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
            return api_fail(err, "messages", "each message needs a string 'role'");
        }
        msg.role = m["role"].get<std::string>();
        if (m.contains("content") && !m["content"].is_null() && !get_text(m["content"], "messages.content", msg.content, err)) {
            return false;
        }
        if (!get_tool_calls(m, msg, err) || !get_string(m, "tool_call_id", msg.tool_call_id, err) ||
            !get_string(m, "name", msg.name, err)) {
            return false;
        }
        out.uses_tools = out.uses_tools || !msg.tool_calls.empty() || msg.role == "tool";
        out.messages.push_back(std::move(msg));
    }
    if (!get_tools(j, out, err) || !get_response_format(j, out, err)) return false;
    if (!get_int(j, "max_tokens", 0, INT32_MAX, out.n_predict, err) ||
        !get_int(j, "max_completion_tokens", 0, INT32_MAX, out.n_predict, err)) {
        return false;
    }
    if (j.contains("stream_options") && !j["stream_options"].is_null()) {
        if (!j["stream_options"].is_object()) return api_fail(err, "stream_options", "'stream_options' must be an object");
        if (!get_bool(j["stream_options"], "include_usage", out.include_usage, err)) return false;
    }
    if (j.contains("prediction") && !j["prediction"].is_null()) {
        const json & p = j["prediction"];
        if (!p.is_object() || !p.contains("type") || !p["type"].is_string() || p["type"] != "content" ||
            !p.contains("content")) {
            return api_fail(err, "prediction", "'prediction' must be {\"type\": \"content\", \"content\": ...}");
        }
        if (!get_text(p["content"], "prediction.content", out.prediction, err)) return false;
        if (out.prediction.size() > API_PREDICTION_BYTES_MAX) {
            return api_fail(err, "prediction", "'prediction' is " + std::to_string(out.prediction.size()) +
                                               " bytes, over the server's limit of " + std::to_string(API_PREDICTION_BYTES_MAX));
        }
        out.has_prediction = true;
        // what OpenAI refuses with Predicted Outputs
        int32_t n = 1;
        double pres = 0.0, freq = 0.0;
        bool logprobs = false;
        if (!get_int(j, "n", 1, 128, n, err) || !get_number(j, "presence_penalty", -2.0, 2.0, pres, err) ||
            !get_number(j, "frequency_penalty", -2.0, 2.0, freq, err) || !get_bool(j, "logprobs", logprobs, err)) {
            return false;
        }
        const char * refused = n > 1 ? "n" : logprobs ? "logprobs" : pres > 0.0 ? "presence_penalty"
                             : freq > 0.0 ? "frequency_penalty" : (j.contains("tools") && j["tools"].is_array() && !j["tools"].empty()) ? "tools"
                                                                                                             : nullptr;
        if (refused) {
            err.code = "invalid_request_error";
            return api_fail(err, refused, std::string("'") + refused + "' is not supported with predicted outputs");
        }
    }
    int32_t n = 1;
    if (!get_int(j, "n", 1, 1, n, err)) return false;
    if (!get_constrain(j, out, err)) return false;
    // fast-apply models' message format: the code is the prediction unless one was sent
    for (auto it = out.messages.rbegin(); it != out.messages.rend(); ++it) {
        if (it->role != "user") continue;
        if (apply_message_parse(it->content, out.apply)) {
            out.is_apply = true;
            if (!out.has_prediction) {
                out.has_prediction = true;
                out.prediction = out.apply.code;
            }
        }
        break;
    }
    return get_sampling(j, out, err);
}

// /v1/apply {code, update, instruction?, constrain?, max_tokens?, temperature?, ...} and Relace's
// /v1/code/apply {initial_code, edit_snippet, instruction?, stream?, ...}: the same request
bool parse_apply(const json & j, api_request & out, api_error & err) {
    const bool relace = out.endpoint == API_CODE_APPLY;
    const char * code_key = relace ? "initial_code" : "code";
    const char * update_key = relace ? "edit_snippet" : "update";
    for (const char * key : {code_key, update_key}) {
        if (!j.contains(key) || !j[key].is_string()) return api_fail(err, key, std::string("'") + key + "' must be a string");
    }
    out.apply.code = j[code_key].get<std::string>();
    out.apply.update = j[update_key].get<std::string>();
    if (!get_string(j, "instruction", out.apply.instruction, err)) return false;
    if (out.apply.update.find_first_not_of(" \t\r\n") == std::string::npos) {
        return api_fail(err, update_key, std::string("'") + update_key + "' is empty");
    }
    bool stream = false;
    if (!get_bool(j, "stream", stream, err)) return false;
    if (stream) return api_fail(err, "stream", "apply answers whole; stream the chat endpoint with the same message");
    if (!get_constrain(j, out, err)) return false;
    out.is_apply = true;
    out.has_prediction = true;
    out.prediction = out.apply.code;
    return get_int(j, "max_tokens", 0, INT32_MAX, out.n_predict, err) && get_sampling(j, out, err);
}

bool parse_completions(const json & j, api_request & out, api_error & err) {
    if (!j.contains("prompt") || !j["prompt"].is_string()) return api_fail(err, "prompt", "'prompt' must be a string");
    out.prompt = j["prompt"].get<std::string>();
    if (j.contains("suffix") && !j["suffix"].is_null()) {
        if (!get_string(j, "suffix", out.suffix, err)) return false;
        out.has_suffix = true;
        out.prefix = out.prompt;
        out.prompt.clear();
    }
    int32_t n = 1;
    return get_int(j, "max_tokens", 0, INT32_MAX, out.n_predict, err) && get_int(j, "n", 1, 1, n, err) &&
           get_sampling(j, out, err);
}

// llama.cpp's fields: prompt as text or tokens, n_predict, response_fields, t_max_predict_ms, n_indent, n_cmpl
bool parse_llama(const json & j, api_request & out, api_error & err) {
    if (j.contains("prompt") && !j["prompt"].is_null()) {
        const json & p = j["prompt"];
        if (p.is_string()) {
            out.prompt = p.get<std::string>();
        } else if (p.is_array() && !p.empty() && p[0].is_number_integer()) {
            for (const json & t : p) {
                int64_t id = 0;
                if (!api_json_int(t, 0, INT32_MAX, id)) {
                    return api_fail(err, "prompt", "'prompt' tokens must be integers in [0, " + std::to_string(INT32_MAX) + "]");
                }
                out.prompt_tokens.push_back((llama_token) id);
            }
        } else if (out.endpoint == API_COMPLETION || !p.is_array()) {
            return api_fail(err, "prompt", "'prompt' must be a string or an array of token ids");
        }
    } else if (out.endpoint == API_COMPLETION) {
        return api_fail(err, "prompt", "'prompt' is required");
    }
    if (!get_int(j, "n_predict", -1, INT32_MAX, out.n_predict, err) ||
        !get_number(j, "t_max_predict_ms", 0.0, 1e9, out.t_max_predict_ms, err) ||
        !get_int(j, "n_indent", 0, 1 << 20, out.n_indent, err) ||
        !get_int(j, j.contains("n_cmpl") ? "n_cmpl" : "n", 1, API_N_CMPL_MAX, out.n_cmpl, err)) {
        return false;
    }
    if (j.contains("response_fields") && !j["response_fields"].is_null()) {
        const json & fields = j["response_fields"];
        if (!fields.is_array() || fields.size() > 64) {
            return api_fail(err, "response_fields", "'response_fields' must be an array of at most 64 strings");
        }
        for (const json & f : fields) {
            if (!f.is_string()) return api_fail(err, "response_fields", "'response_fields' must hold strings");
            out.response_fields.push_back(f.get<std::string>());
        }
    }
    if (!get_sampling(j, out, err)) return false;
    if (out.n_cmpl > 1 && out.stream) {
        return api_fail(err, "n_cmpl", "'n_cmpl' over 1 is answered whole: send \"stream\": false");
    }
    return true;
}

bool parse_infill(const json & j, api_request & out, api_error & err) {
    std::string extra;
    if (j.contains("input_extra") && !j["input_extra"].is_null()) {
        if (!j["input_extra"].is_array() || j["input_extra"].size() > API_INPUT_EXTRA_MAX) {
            return api_fail(err, "input_extra", "'input_extra' must be an array of at most " +
                                                    std::to_string(API_INPUT_EXTRA_MAX) + " {filename, text} chunks");
        }
        for (const json & c : j["input_extra"]) {
            if (!c.is_object() || (c.contains("text") && !c["text"].is_string()) ||
                (c.contains("filename") && !c["filename"].is_string())) {
                return api_fail(err, "input_extra", "'input_extra' chunks must be {\"filename\": string, \"text\": string}");
            }
            // other files of the project first, each behind its name (llama.cpp's layout without FIM_REP)
            extra += c.value("filename", "") + "\n" + c.value("text", "") + "\n";
        }
    }
    out.has_suffix = true;
    if (!get_string(j, "input_prefix", out.prefix, err) || !get_string(j, "input_suffix", out.suffix, err)) return false;
    out.prefix = extra + out.prefix;
    return parse_llama(j, out, err);
}

} // namespace

bool api_json_int(const json & v, int64_t lo, int64_t hi, int64_t & out) {
    if (v.is_number_unsigned()) {
        const uint64_t u = v.get<uint64_t>();
        if (u > (uint64_t) INT64_MAX) return false; // 2^64 - 1 is not -1
        out = (int64_t) u;
    } else if (v.is_number_integer()) {
        out = v.get<int64_t>();
    } else {
        return false;
    }
    return out >= lo && out <= hi;
}

int32_t api_json_depth(std::string_view text) {
    int32_t depth = 0, max_depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < text.size(); i++) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\') i++;
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            max_depth = std::max(max_depth, ++depth);
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    return max_depth;
}

bool api_parse_json(const std::string & body, json & out, api_error & err) {
    // nesting is refused before the parser sees it: copying, dumping or destroying a value 600,000
    // arrays deep recurses once per level and overflows a thread's stack
    if (const int32_t depth = api_json_depth(body); depth > API_JSON_DEPTH_MAX) {
        return api_fail(err, "", "the body nests " + std::to_string(depth) + " levels deep; at most " +
                                     std::to_string(API_JSON_DEPTH_MAX) + " are accepted");
    }
    out = json::parse(body, nullptr, false);
    if (out.is_discarded()) return api_fail(err, "", "the body is not valid JSON (or not valid UTF-8)");
    if (!out.is_object()) return api_fail(err, "", "the body must be a JSON object");
    return true;
}

bool api_fail(api_error & err, const std::string & param, const std::string & message) {
    err.status = 400;
    err.param = param;
    err.message = message;
    return false;
}

bool api_cache_key_ok(const std::string & key) {
    if (key.size() > API_CACHE_KEY_BYTES_MAX) return false;
    for (unsigned char c : key) {
        if (c < 0x20 || c == 0x7f) return false; // it goes back in a header
    }
    return true;
}

bool api_parse(api_endpoint endpoint, const std::string & body, api_request & out, api_error & err) {
    out = api_request();
    out.endpoint = endpoint;
    json j;
    if (!api_parse_json(body, j, err)) return false;
    switch (endpoint) {
        case API_CHAT:        return parse_chat(j, out, err);
        case API_COMPLETIONS:
        case API_FIM:         return parse_completions(j, out, err);
        case API_COMPLETION:  return parse_llama(j, out, err);
        case API_INFILL:      return parse_infill(j, out, err);
        case API_APPLY:
        case API_CODE_APPLY:  return parse_apply(j, out, err);
    }
    return api_fail(err, "", "unknown endpoint");
}

json api_error_json(const api_error & err) {
    json e = {{"message", err.message}, {"type", err.type}, {"param", nullptr}, {"code", nullptr}};
    if (!err.param.empty()) e["param"] = err.param;
    if (!err.code.empty()) e["code"] = err.code;
    return {{"error", e}};
}

const char * api_finish_reason(stop_reason r) {
    return r == STOP_REASON_MAX_TOKENS || r == STOP_REASON_CONTEXT ? "length" : "stop";
}

} // namespace editspec
