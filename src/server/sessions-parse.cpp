// Request bodies of /v1/sessions (server-sessions.h) into plain structs, with errors that name the
// field. Pure: no model, no I/O (the fuzz target, fuzz/fuzz-sessions.cpp, runs this file alone).
#include "server-sessions.h"

namespace editspec {

using json = nlohmann::json;

bool session_parse_create(const std::string & body, const session_store_params & defaults, session_create_request & out,
                          api_error & err) {
    out = session_create_request();
    out.params.drift_max = defaults.drift_max;
    json in;
    if (!api_parse_json(body.empty() ? "{}" : body, in, err)) return false;
    if (!in.contains("text") || !in["text"].is_string()) return api_fail(err, "text", "a session needs \"text\": the document (a string)");
    out.text = in["text"].get<std::string>();
    if (in.contains("strategy") && !in["strategy"].is_null()) {
        if (!in["strategy"].is_string() || !kv_reuse_parse(in["strategy"].get<std::string>(), out.params.strategy)) {
            return api_fail(err, "strategy", "\"strategy\" must be \"recompute\" (or \"prefix\"), \"conflict\" or \"pie\"");
        }
    }
    if (in.contains("drift_max") && !in["drift_max"].is_null()) {
        int64_t v = 0;
        if (!api_json_int(in["drift_max"], -1, INT32_MAX, v)) {
            return api_fail(err, "drift_max", "\"drift_max\" must be an integer in [-1, " + std::to_string(INT32_MAX) + "]");
        }
        out.params.drift_max = (int32_t) v;
    }
    return true;
}

bool session_parse_edits(const std::string & body, std::vector<text_edit> & out, api_error & err) {
    out.clear();
    json in;
    if (!api_parse_json(body.empty() ? "{}" : body, in, err)) return false;
    // one edit, or {"edits": [...]}
    const bool listed = in.contains("edits");
    const json & list = listed ? in["edits"] : in;
    const size_t n = listed ? (list.is_array() ? list.size() : 0) : 1;
    if (n == 0 || n > API_EDITS_MAX) {
        return api_fail(err, "edits", "\"edits\" must be a non-empty array of at most " + std::to_string(API_EDITS_MAX) + " edits");
    }
    const std::string what = "an edit is {\"offset\": bytes, \"delete\": bytes, \"insert\": text}";
    for (size_t i = 0; i < n; i++) {
        const json & e = listed ? list[i] : in;
        text_edit te;
        int64_t offset = 0, n_delete = 0;
        if (!e.is_object() || !e.contains("offset") || !api_json_int(e["offset"], 0, INT64_MAX, offset) ||
            (e.contains("delete") && !e["delete"].is_null() && !api_json_int(e["delete"], 0, INT64_MAX, n_delete)) ||
            (e.contains("insert") && !e["insert"].is_null() && !e["insert"].is_string())) {
            return api_fail(err, "edits", what);
        }
        te.offset = (size_t) offset;
        te.n_delete = (size_t) n_delete;
        if (e.contains("insert") && e["insert"].is_string()) te.insert = e["insert"].get<std::string>();
        out.push_back(std::move(te));
    }
    return true;
}

bool session_parse_complete(const std::string & body, int32_t & n_max, api_error & err) {
    n_max = 64;
    json in;
    if (!api_parse_json(body.empty() ? "{}" : body, in, err)) return false;
    if (in.contains("max_tokens") && !in["max_tokens"].is_null()) {
        int64_t v = 0;
        if (!api_json_int(in["max_tokens"], 1, SESSION_COMPLETE_MAX, v)) {
            return api_fail(err, "max_tokens", "\"max_tokens\" must be an integer in [1, " + std::to_string(SESSION_COMPLETE_MAX) + "]");
        }
        n_max = (int32_t) v;
    }
    return true;
}

} // namespace editspec
