// Method names → drafters, sizing and acceptance policy.
#include "editspec/methods.h"
#include "editspec/copy.h"
#include "editspec/decoder.h"
#include "editspec/llama-common.h"
#include "editspec/lookup.h"
#include "editspec/efficientedit.h"
#include "editspec/fastcoder.h"
#include "editspec/retrieval.h"
#include "editspec/reuse.h"

#include <algorithm>
#include <sstream>

namespace editspec {

// never proposes: measures the speculative loop's own overhead against plain decoding
struct null_drafter : drafter_i {
    const char * name() const override { return "none"; }
    uint8_t source() const override { return DRAFT_SOURCE_TEST; }
    void begin(std::span<const llama_token>) override {}
    void propose(std::span<const llama_token>, draft_tree &, int32_t) override {}
    void accept(std::span<const llama_token>) override {}
};

// the copy drafters' variants by name (copy.h)
static copy_params copy_params_for(const std::string & name) {
    copy_params cp;
    if (name == "copy-recent") cp.match = COPY_MATCH_RECENT;
    if (name == "copy-tree") cp.match = COPY_MATCH_BRANCHES;
    if (name == "copy-ext") cp.extend = true;
    return cp;
}

const std::vector<std::string> & method_drafter_names() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> v = {"lookup", "lookup-longest", "none", "reuse", "efficientedit", "sd",
                                       "copy", "copy-recent", "copy-tree", "copy-ext", "copyspec", "rest",
                                       "fastcoder", "fastcoder-no-repo", "fastcoder-no-cache", "fastcoder-no-timing",
                                       "fastcoder-no-context"};
        for (const std::string & n : llama_common_drafter_names()) v.push_back(n);
        return v;
    }();
    return names;
}

bool method_spec::uses_draft_model() const {
    for (const std::string & d : drafters) {
        if (d == "sd" || d == "efficientedit" || d == "copyspec") return true;
    }
    return false;
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
        if (part == "efficientedit" && !ms.policy_set) {
            ms.policy = VERIFY_POLICY_ENTROPY; // seed 000 §III-B; applies to the draft model's nodes only
        }
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

// the draft model inside a composite drafter (efficientedit, copyspec); null with *error
static std::unique_ptr<model_drafter> composite_draft_model(const method_spec & spec, const method_inputs & in,
                                                            const std::string & name, std::string * error) {
    if (!in.draft_model || !in.target) {
        if (error) *error = "method '" + spec.name + "' needs a draft model (--draft-model)";
        return nullptr;
    }
    std::string why;
    auto sd = model_drafter_create(*in.target, *in.draft_model, in.draft_params, &why);
    if (!sd && error) *error = name + ": " + why;
    return sd;
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
        } else if (name.rfind("copy", 0) == 0 && name != "copyspec") {
            out.push_back(std::make_unique<copy_drafter>(copy_params_for(name)));
        } else if (name == "copyspec") {
            // seed 003 §3.3: copy where the last γ tokens match, the draft model otherwise
            auto sd = composite_draft_model(spec, in, name, error);
            if (!sd) return false;
            out.push_back(std::make_unique<copy_fallback_drafter>(std::make_unique<copy_drafter>(copy_params_for("copy")),
                                                                  std::move(sd)));
        } else if (name == "rest") {
            if (in.datastores.empty()) {
                if (error) *error = "method '" + spec.name + "' needs a datastore (--datastore FILE, built by `editspec index`)";
                return false;
            }
            out.push_back(std::make_unique<retrieval_drafter>(in.datastores));
        } else if (name.rfind("fastcoder", 0) == 0) {
            if (in.datastores.empty() && in.repo_datastores.empty()) {
                if (error) *error = "method '" + spec.name + "' needs a datastore (--datastore FILE for the common one, " +
                                    "--repo-datastore FILE for the repository's; built by `editspec index`)";
                return false;
            }
            if (!in.target) {
                if (error) *error = "method '" + spec.name + "' needs the target model (its vocabulary)";
                return false;
            }
            // the paper's Table II ablations: each part off in turn
            fastcoder_params fp;
            fp.use_repo = name != "fastcoder-no-repo";
            fp.use_cache = name != "fastcoder-no-cache";
            fp.use_timing = name != "fastcoder-no-timing";
            fp.use_context = name != "fastcoder-no-context";
            out.push_back(std::make_unique<fastcoder_drafter>(*in.target, in.repo_datastores, in.datastores,
                                                              in.cache, fp));
        } else if (name == "sd") {
            if (!in.draft_model || !in.target) {
                if (error) *error = !in.draft_model ? "method 'sd' needs --draft-model" : "method 'sd' needs the target model";
                return false;
            }
            std::unique_ptr<model_drafter> d = model_drafter_create(*in.target, *in.draft_model, in.draft_params, error);
            if (!d) return false;
            out.push_back(std::move(d));
        } else if (name.rfind("llama-", 0) == 0) {
            // llama-ngram-cache: a static cache from the same corpus as the retrieval methods'
            std::vector<const datastore *> corpus(in.repo_datastores.begin(), in.repo_datastores.end());
            corpus.insert(corpus.end(), in.datastores.begin(), in.datastores.end());
            std::unique_ptr<drafter_i> d = llama_common_drafter_create(name, error, corpus);
            if (!d) return false;
            out.push_back(std::move(d));
        } else if (name == "none") {
            out.push_back(std::make_unique<null_drafter>());
        } else if (name == "reuse" || name == "efficientedit") {
            if (in.original.empty()) {
                if (error) *error = "drafter '" + name + "' needs the original code (an edit request), and there is none";
                return false;
            }
            auto reuse = std::make_unique<reuse_drafter>(in.original);
            if (name == "reuse") {
                out.push_back(std::move(reuse));
                continue;
            }
            // EfficientEdit: Reuse, and the draft model only in the Generate phase
            auto sd = composite_draft_model(spec, in, name, error);
            if (!sd) return false;
            out.push_back(std::make_unique<efficientedit_drafter>(std::move(reuse), std::move(sd)));
        } else {
            if (error) *error = "no drafter named '" + name + "'";
            return false;
        }
    }
    return true;
}

std::function<bool(const draft_node &)> method_lossy_ok(const method_spec & spec) {
    if (!verify_policy_is_lossy(spec.policy)) {
        return nullptr;
    }
    if (std::find(spec.drafters.begin(), spec.drafters.end(), "efficientedit") != spec.drafters.end()) {
        return [](const draft_node & nd) { return nd.source == DRAFT_SOURCE_MODEL; };
    }
    // Reuse's drafts are verified greedily (seed 000 §III-A, eq. 7)
    return [](const draft_node & nd) { return nd.source != DRAFT_SOURCE_REUSE; };
}

} // namespace editspec
