// The table of drafters (drafters.h).
#include "editspec/drafters.h"

#include <vector>

namespace editspec {

// the drafter files, in --help order: each defines NAME_drafters() beside its drafter
#define EDITSPEC_DRAFTER_FILES(X) \
    X(lookup) X(copy) X(reuse) X(efficientedit) X(model) X(retrieval) X(fastcoder) X(llama_common) X(null)

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
    if ((d.needs & DRAFTER_NEEDS_DATASTORE) && in.datastores.empty() && in.repo_datastores.empty()) {
        return fail("a datastore (--datastore FILE for a common one, --repo-datastore FILE for the repository's; "
                    "built by `editspec index`)");
    }
    return true;
}

} // namespace editspec
