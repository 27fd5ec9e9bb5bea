// Method names → drafters, sizing and acceptance policy.
#include "editspec/methods.h"
#include "editspec/lookup.h"

#include <algorithm>
#include <sstream>

namespace editspec {

const std::vector<std::string> & method_drafter_names() {
    static const std::vector<std::string> names = {"lookup", "lookup-longest"};
    return names;
}

bool method_parse(const std::string & text, method_spec & out, std::string * error) {
    auto fail = [&](const std::string & msg) {
        if (error) *error = "method '" + text + "': " + msg;
        return false;
    };
    method_spec ms;
    ms.name = text;
    std::string body = text;
    if (const size_t colon = body.find(':'); colon != std::string::npos) {
        if (!verify_policy_from_name(body.substr(colon + 1), &ms.policy)) {
            return fail("unknown policy '" + body.substr(colon + 1) + "' (greedy, sampling, topk, entropy, direct)");
        }
        ms.policy_set = true;
        body = body.substr(0, colon);
    }
    if (const size_t at = body.find('@'); at != std::string::npos) {
        const std::string n = body.substr(at + 1);
        char * end = nullptr;
        const long v = std::strtol(n.c_str(), &end, 10);
        if (n.empty() || *end != '\0' || v < 1 || v > 255) {
            return fail("draft cap '" + n + "' must be an integer in [1, 255]");
        }
        ms.draft_max = (int32_t) v;
        body = body.substr(0, at);
    }
    if (body.empty()) {
        return fail("empty name");
    }
    if (body == "ar") {
        if (ms.draft_max > 0) return fail("'ar' takes no draft cap");
        out = ms;
        return true;
    }
    std::stringstream ss(body);
    std::string part;
    while (std::getline(ss, part, '+')) {
        const auto & known = method_drafter_names();
        if (std::find(known.begin(), known.end(), part) == known.end()) {
            std::string list;
            for (const auto & k : known) list += (list.empty() ? "" : ", ") + k;
            return fail("unknown drafter '" + part + "' (ar, " + list + ")");
        }
        if (std::find(ms.drafters.begin(), ms.drafters.end(), part) != ms.drafters.end()) {
            return fail("drafter '" + part + "' named twice");
        }
        ms.drafters.push_back(part);
    }
    out = ms;
    return true;
}

bool method_make_drafters(const method_spec & spec, const method_inputs & in,
                          std::vector<std::unique_ptr<drafter_i>> & out, std::string * error) {
    out.clear();
    for (const std::string & name : spec.drafters) {
        if (name == "lookup") {
            lookup_params lp;
            lp.mode = LOOKUP_MODE_NGRAM_SIMPLE;
            out.push_back(std::make_unique<lookup_drafter>(lp));
        } else if (name == "lookup-longest") {
            lookup_params lp;
            lp.mode = LOOKUP_MODE_LONGEST;
            out.push_back(std::make_unique<lookup_drafter>(lp));
        } else {
            if (error) *error = "no drafter named '" + name + "'";
            return false;
        }
    }
    return true;
}

} // namespace editspec
