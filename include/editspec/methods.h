// Decoding methods by name: which drafters go into the tree, how drafts are sized, which policy
// verifies them. Used by `editspec complete/edit --method` and `editspec bench --methods`.
//
//   ar                      autoregressive, one token per pass (the reference)
//   lookup                  prompt lookup, llama.cpp's ngram-simple defaults (n = 12, m = 48)
//   lookup-longest          prompt lookup, longest match n = 12 .. 1, m = 48
//   sd                      a draft model (--draft-model) drafts gamma = 7 tokens greedily
//   rest                    retrieval (REST; FastCoder's baseline): the longest suffix of the context,
//                           16 tokens down, in the datastores (--datastore), the most frequent continuations
//   fastcoder               FastCoder / CodeSwift (seeds 002, 004): retrieval from the repository's
//                           datastore (--repo-datastore) and the common ones (--datastore) in parallel, a
//                           weighted trie, a cache of verified drafts searched first, retrieval timing
//                           (fastcoder.h); fastcoder-no-repo, -no-cache, -no-timing: one part off each
//   none                    a drafter that never proposes (the speculative loop's overhead)
//   reuse                   EfficientEdit's Reuse: the original code (edit requests only), re-synced
//                           after each edit (reuse.h)
//   efficientedit           Reuse, plus the draft model (--draft-model) in the Generate phase only
//                           (after a rejection until Reuse re-syncs); policy entropy by default,
//                           applied to the draft model's nodes only (method_lossy_ok)
//   copy                    CopySpec (seed 003): the tokens after the first earlier occurrence of the
//                           last 3 tokens, 10 at a time (copy.h); copy-recent, copy-tree, copy-ext: its variants
//   copyspec                CopySpec with a draft model (§3.3): copy where the last 3 tokens match, else
//                           the draft model (--draft-model); copy+sd puts both in one tree instead
//   llama-ngram-simple, llama-ngram-map-k, llama-ngram-mod, llama-ngram-cache
//                           llama.cpp's own drafters from its common library, in-process (llama-common.h)
//   a+b                     several drafters merged into one tree (first named, first placed)
//   NAME@N                  fixed cap of N draft tokens per pass instead of the cost model
//   NAME:POLICY             acceptance policy (greedy, sampling, topk, entropy, direct)
//
//     editspec::method_spec ms;
//     if (!editspec::method_parse("lookup-longest@48", ms, &err)) ...;
//     std::vector<std::unique_ptr<editspec::drafter_i>> ds;
//     editspec::method_make_drafters(ms, {}, ds, &err);
//
// A request runs a method through runner_generate (request.h).
#pragma once

#include "editspec/datastore.h"
#include "editspec/fastcoder.h"
#include "editspec/draft-model.h"
#include "editspec/draft.h"
#include "editspec/engine.h"
#include "editspec/generate.h"
#include "editspec/verify.h"

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace editspec {

struct method_spec {
    std::string name;                   // as written, e.g. "lookup-longest@48"
    std::vector<std::string> drafters;  // drafter names in tree order; empty = autoregressive
    int32_t draft_max = 0;              // "@N": fixed cap per pass, 0 = the cost model sizes drafts
    verify_policy policy = VERIFY_POLICY_GREEDY;
    bool policy_set = false;            // ":POLICY" given explicitly

    bool is_ar() const { return drafters.empty(); }
    // "sd", "efficientedit" or "copyspec" among the drafters: the request needs a draft model
    bool uses_draft_model() const;
};

// what a request offers the drafters
struct method_inputs {
    std::span<const llama_token> original; // the code being edited (Reuse), empty otherwise
    const model * target      = nullptr;   // the target model ("sd": its vocabulary is checked)
    const model * draft_model = nullptr;   // "sd": the draft model (--draft-model), null = none
    draft_model_params draft_params;       // "sd": gamma, the draft context, threads
    std::span<const datastore * const> datastores; // "rest", "fastcoder": the common datastores (--datastore)
    std::span<const datastore * const> repo_datastores; // "fastcoder": the repository's (--repo-datastore)
    retrieval_cache * cache = nullptr;             // "fastcoder": a cache kept across requests, null = per request
};

// names a method may combine with "+"
const std::vector<std::string> & method_drafter_names();

bool method_parse(const std::string & text, method_spec & out, std::string * error);

// one fresh drafter per name in spec.drafters (drafters hold per-request state)
bool method_make_drafters(const method_spec & spec, const method_inputs & in,
                          std::vector<std::unique_ptr<drafter_i>> & out, std::string * error);

// spec_params::lossy_ok for the method: null for a lossless policy (unused); efficientedit: the
// draft model's nodes only; otherwise every node but Reuse's (verified greedily, seed 000 §III-A)
std::function<bool(const draft_node &)> method_lossy_ok(const method_spec & spec);

} // namespace editspec
