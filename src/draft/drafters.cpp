// The table of drafters (drafters.h).
#include "editspec/drafters.h"

#include <cstdio>
#include <vector>

namespace editspec {

// the drafter files, in --help order: each defines NAME_drafters() beside its drafter
#define EDITSPEC_DRAFTER_FILES(X) \
    X(lookup) X(copy) X(reuse) X(efficientedit) X(model) X(retrieval) X(fastcoder) X(llama_common) X(llama_heads) X(null)

#define EDITSPEC_DECLARE(f) std::span<const drafter_desc> f##_drafters();
EDITSPEC_DRAFTER_FILES(EDITSPEC_DECLARE)
#undef EDITSPEC_DECLARE

namespace {

std::vector<drafter_desc> & table() {
    static std::vector<drafter_desc> rows = [] {
        std::vector<drafter_desc> v;
#define EDITSPEC_APPEND(f) for (const drafter_desc & d : f##_drafters()) v.push_back(d);
        EDITSPEC_DRAFTER_FILES(EDITSPEC_APPEND)
#undef EDITSPEC_APPEND
        return v;
    }();
    return rows;
}

} // namespace

std::span<const drafter_desc> drafter_table() {
    return table();
}

const drafter_desc * drafter_find(const std::string & name) {
    for (const drafter_desc & d : table()) {
        if (name == d.name) return &d;
    }
    return nullptr;
}

bool drafter_table_add(const drafter_desc & d) {
    if (!d.name || !d.make || drafter_find(d.name)) return false;
    table().push_back(d);
    return true;
}

std::string drafter_names_list() {
    std::string out;
    for (const drafter_desc & d : table()) out += (out.empty() ? "" : ", ") + std::string(d.name);
    return out;
}

std::string method_settings_check(const method_settings & s) {
    auto out_of = [](const char * opt, double v, double lo, double hi) {
        char buf[160];
        snprintf(buf, sizeof(buf), "%s %g out of range [%g, %g]", opt, v, lo, hi);
        return std::string(buf);
    };
    if (s.copy_gamma < 1 || s.copy_gamma > 64) return out_of("--copy-gamma", s.copy_gamma, 1, 64);
    if (s.copy_len < 1 || s.copy_len > 255) return out_of("--copy-len", s.copy_len, 1, 255);
    if (!(s.alpha >= 0.0f && s.alpha <= 1000.0f)) return out_of("--alpha", s.alpha, 0, 1000);
    if (!(s.beta >= 0.0f && s.beta <= 1000.0f)) return out_of("--beta", s.beta, 0, 1000);
    if (!(s.skip_p >= 0.0f && s.skip_p <= 1.0f)) return out_of("--skip-p", s.skip_p, 0, 1);
    if (s.cache_min < 0 || s.cache_min > 1000000) return out_of("--cache-min", s.cache_min, 0, 1000000);
    if (s.retrieve_max < 2 || s.retrieve_max > 64) return out_of("--retrieve-max", s.retrieve_max, 2, 64);
    if (s.top_k < 1 || s.top_k > 100) return out_of("--accept-top-k", s.top_k, 1, 100);
    if (s.entropy_k < 1 || s.entropy_k > 100) return out_of("--entropy-k", s.entropy_k, 1, 100);
    if (s.head_max < 1 || s.head_max > 64) return out_of("--head-max", s.head_max, 1, 64);
    if (!(s.head_p_min >= 0.0f && s.head_p_min <= 1.0f)) return out_of("--head-p-min", s.head_p_min, 0, 1);
    return "";
}

bool drafter_inputs_meet(const drafter_desc & d, const drafter_inputs & in, std::string * error) {
    auto fail = [&](const std::string & what) {
        if (error) *error = "drafter '" + std::string(d.name) + "' needs " + what;
        return false;
    };
    if ((d.needs & DRAFTER_NEEDS_ORIGINAL) && in.original.empty()) {
        return fail("the original code (an edit or apply request, or a prediction), and there is none");
    }
    if ((d.needs & DRAFTER_NEEDS_DRAFT_MODEL) && (!in.draft_model || !in.target)) {
        return fail(!in.draft_model ? "a draft model (--draft-model)" : "the target model");
    }
    if (std::string why; (d.needs & DRAFTER_NEEDS_HEAD) && drafter_head_missing(d.name, in, &why)) {
        return fail(why);
    }
    if ((d.needs & DRAFTER_NEEDS_DATASTORE) && in.datastores.empty() && in.repo_datastores.empty()) {
        return fail("a datastore (--datastore FILE for a common one, --repo-datastore FILE for the repository's; "
                    "built by `editspec index`)");
    }
    return true;
}

} // namespace editspec
