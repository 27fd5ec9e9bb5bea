// Method names → drafters (the table in drafters.h), sizing and acceptance policy.
#include "editspec/methods.h"

#include <algorithm>
#include <sstream>

namespace editspec {

std::vector<std::string> method_drafter_names() {
    std::vector<std::string> v;
    for (const drafter_desc & d : drafter_table()) v.push_back(d.name);
    return v;
}

namespace {

bool any_needs(const method_spec & spec, uint8_t need) {
    return std::any_of(spec.drafters.begin(), spec.drafters.end(), [&](const std::string & n) {
        const drafter_desc * d = drafter_find(n);
        return d && (d->needs & need);
    });
}

} // namespace

bool method_spec::uses_draft_model() const {
    return any_needs(*this, DRAFTER_NEEDS_DRAFT_MODEL);
}

bool method_spec::uses_head() const {
    return any_needs(*this, DRAFTER_NEEDS_HEAD);
}

bool method_spec::uses_original() const {
    return is_auto || any_needs(*this, DRAFTER_NEEDS_ORIGINAL);
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
    if (method_name_is_ar(body)) {
        if (ms.draft_max > 0) return fail("'ar' takes no draft cap");
        out = ms;
        return true;
    }
    if (body == "auto") {
        ms.is_auto = true;
        out = ms;
        return true;
    }
    std::stringstream ss(body);
    std::string part;
    while (std::getline(ss, part, '+')) {
        const drafter_desc * d = drafter_find(part);
        if (!d) {
            return fail("unknown drafter '" + part + "' (ar, auto, " + drafter_names_list() + ")");
        }
        if (std::find(ms.drafters.begin(), ms.drafters.end(), part) != ms.drafters.end()) {
            return fail("drafter '" + part + "' named twice");
        }
        // the first drafter with a policy of its own sets the method's (EfficientEdit's entropy check)
        if (!ms.policy_set && ms.policy == VERIFY_POLICY_GREEDY) ms.policy = d->policy;
        ms.drafters.push_back(part);
    }
    out = ms;
    return true;
}

std::vector<std::string> method_auto_drafters(const drafter_inputs & in) {
    // the table's rows with an auto_rank whose needs are met and that want to join, by rank (why each
    // row has its place: beside the row)
    std::vector<const drafter_desc *> rows;
    for (const drafter_desc & d : drafter_table()) {
        if (d.auto_rank > 0 && drafter_inputs_meet(d, in, nullptr) && (!d.auto_when || d.auto_when(in))) rows.push_back(&d);
    }
    std::stable_sort(rows.begin(), rows.end(),
                     [](const drafter_desc * a, const drafter_desc * b) { return a->auto_rank < b->auto_rank; });
    std::vector<std::string> v;
    for (const drafter_desc * d : rows) v.push_back(d->name);
    return v;
}

bool method_make_drafters(const method_spec & spec, const drafter_inputs & in,
                          std::vector<std::unique_ptr<drafter_i>> & out, std::string * error) {
    out.clear();
    const std::vector<std::string> names = spec.is_auto ? method_auto_drafters(in) : spec.drafters;
    drafter_inputs rest = in; // a lent draft-model context goes to the first drafter that drafts with it
    for (const std::string & name : names) {
        const drafter_desc * d = drafter_find(name);
        if (!d) {
            if (error) *error = "no drafter named '" + name + "'";
            return false;
        }
        std::string why;
        if (!drafter_inputs_meet(*d, in, &why)) {
            if (error) *error = "method '" + spec.name + "': " + why;
            return false;
        }
        std::unique_ptr<drafter_i> dr = d->make(*d, rest, &why);
        if (!dr) {
            if (error) *error = "method '" + spec.name + "': " + why;
            return false;
        }
        if (d->needs & DRAFTER_NEEDS_DRAFT_MODEL) {
            rest.draft_ctx = nullptr; // a second one (sd+copyspec) makes a context of its own
            rest.draft_kept = nullptr;
        }
        out.push_back(std::move(dr));
    }
    return true;
}

method_spec method_with_original(const method_spec & spec) {
    if (spec.uses_original()) return spec;
    method_spec out = spec;
    // where `auto` places it: after the text drafters, before one that runs a model (a draft model or a
    // head). First, Reuse's long runs of the original took nodes the others would have placed with more
    // accepted tokens (docs/results/issue38-auto: HumanEval 9.87 -> 10.87 tokens a pass placed after)
    const auto runs_model = [](const std::string & n) {
        const drafter_desc * d = drafter_find(n);
        return d && (d->needs & (DRAFTER_NEEDS_DRAFT_MODEL | DRAFTER_NEEDS_HEAD));
    };
    out.drafters.insert(std::find_if(out.drafters.begin(), out.drafters.end(), runs_model), "reuse");
    std::string name;
    for (const std::string & n : out.drafters) name += (name.empty() ? "" : "+") + n;
    const size_t suffix = spec.name.find_first_of("@:"); // the cap and policy as written
    out.name = suffix == std::string::npos ? name : name + spec.name.substr(suffix);
    return out;
}

std::function<bool(const draft_node &)> method_lossy_ok(const method_spec & spec) {
    if (!verify_policy_is_lossy(spec.policy)) {
        return nullptr;
    }
    for (const std::string & n : spec.drafters) {
        const drafter_desc * d = drafter_find(n);
        if (d && d->lossy == DRAFTER_LOSSY_MODEL_ONLY) {
            return [](const draft_node & nd) { return nd.source == DRAFT_SOURCE_MODEL; };
        }
    }
    // Reuse's drafts are verified greedily (EfficientEdit §III-A, eq. 7), also where another drafter
    // placed the same token first
    return [](const draft_node & nd) {
        return nd.source != DRAFT_SOURCE_REUSE && !(nd.proposers & (1u << DRAFT_SOURCE_REUSE));
    };
}

} // namespace editspec
