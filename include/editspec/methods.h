// Decoding methods by name: which drafters go into the tree, how drafts are sized, which policy
// verifies them. Used by `editspec complete/edit/apply/serve --method` and `editspec bench --methods`.
//
//   ar          autoregressive, one token per pass (the reference)
//   auto        every drafter the request can feed, in one tree the cost model sizes per source,
//               placed in this order: prompt lookup (FastCoder when datastores are loaded) and
//               CopySpec's copy over the context, Reuse when there is code being edited, the draft
//               model when one is loaded and has at most a fifth of the target's parameters
//   NAME        one drafter of the table (drafters.h; `editspec --help` of a command lists them)
//   a+b         several drafters merged into one tree (first named, first placed)
//   NAME@N      fixed cap of N draft tokens per pass instead of the cost model
//   NAME:POLICY acceptance policy (greedy, sampling, topk, entropy, direct); by default the
//               drafters' own (EfficientEdit: entropy, on the draft model's nodes only), else greedy
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
#include "editspec/drafters.h"
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
    std::vector<std::string> drafters;  // drafter names in tree order (drafters.h); empty = autoregressive
    bool is_auto = false;               // "auto": the drafters are chosen per request (method_auto_drafters)
    int32_t draft_max = 0;              // "@N": fixed cap per pass, 0 = the cost model sizes drafts
    verify_policy policy = VERIFY_POLICY_GREEDY;
    bool policy_set = false;            // ":POLICY" given explicitly

    bool is_ar() const { return drafters.empty() && !is_auto; }
    // a drafter that cannot run without one (sd, efficientedit, copyspec); `auto` uses one when loaded
    bool uses_draft_model() const;
    // a drafter reads the target's hidden states (a model-native head): a context of its own, or a
    // server's head that follows its step engine (llama-heads.h)
    bool uses_head() const;
    // a drafter that drafts from the code being edited (reuse, efficientedit); `auto` when it has one
    bool uses_original() const;
};

// the reference method: one token per target pass, no drafts (the bench's baseline)
constexpr const char * METHOD_AR = "ar";
inline bool method_name_is_ar(const std::string & name) { return name == METHOD_AR; }

// names a method may combine with "+": the table's (drafters.h)
std::vector<std::string> method_drafter_names();

bool method_parse(const std::string & text, method_spec & out, std::string * error);

// the drafters `auto` runs for a request with these inputs, in tree order
std::vector<std::string> method_auto_drafters(const drafter_inputs & in);

// one fresh drafter per name in spec.drafters (or method_auto_drafters for auto; drafters hold
// per-request state); false with *error naming the drafter and what it lacks
bool method_make_drafters(const method_spec & spec, const drafter_inputs & in,
                          std::vector<std::unique_ptr<drafter_i>> & out, std::string * error);

// the method as a request with code being edited (a `prediction`) runs it: itself when it drafts
// from that code already, else with Reuse where `auto` places it, after the text drafters and before
// a model's ("lookup-longest+reuse", "reuse+sd"; "reuse" for ar)
method_spec method_with_original(const method_spec & spec);

// spec_params::lossy_ok for the method: null for a lossless policy (unused); else the nodes its
// drafters' rows allow a lossy policy to judge (efficientedit: the draft model's only; otherwise
// every node but Reuse's, verified greedily as EfficientEdit §III-A says)
std::function<bool(const draft_node &)> method_lossy_ok(const method_spec & spec);

} // namespace editspec
