// Cost model: the measured wall time of one target pass as a function of the tokens in it.
//
// On a CPU a pass over 64 tokens costs about 11.5 single-token passes (design.md §4), so drafts are
// sized by expected accepted tokens per unit of cost, not by how much a drafter can offer.
//
//     editspec::cost_model cm;
//     if (!editspec::cost_model_get(*ctx, cm, &err)) ...;   // cached per model file and thread count
//     double rel = cm.rel(33);                              // cost of 33 tokens / cost of 1
#pragma once

#include "editspec/engine.h"

#include <string>
#include <vector>

namespace editspec {

struct cost_model {
    std::vector<int32_t> n;  // [n_points] tokens per pass, ascending, n[0] = 1
    std::vector<double>  ms; // [n_points] wall time of that pass (fastest of the repetitions), milliseconds

    bool empty() const { return n.empty(); }
    // ms for a pass of n_tokens, linear between measured points, extrapolated past the last
    double t(int32_t n_tokens) const;
    // t(n_tokens) / t(1)
    double rel(int32_t n_tokens) const { return t(n_tokens) / t(1); }
};

// a cost model from a table of relative costs (e.g. design.md §4), for replay studies
cost_model cost_model_from_table(const std::vector<int32_t> & n, const std::vector<double> & rel);

// times passes of 1, 2, 4, ... n_max tokens after a 256-token prefix, reps times each (the fastest
// counts: interference from other processes only adds time); leaves the KV cache empty
bool cost_model_measure(context & ctx, cost_model & out, int32_t n_max, int32_t reps, std::string * error,
                        int32_t n_prefix = 256);

// loads the cached model for this model file and thread count, or measures and caches it
// (~/.cache/editspec/cost/, EDITSPEC_CACHE overrides the root)
bool cost_model_get(context & ctx, cost_model & out, std::string * error);

// writes cm as the cached model for this context's model file and thread count
bool cost_model_save(const context & ctx, const cost_model & cm);

std::string cost_model_to_json(const cost_model & cm);
bool cost_model_from_json(const std::string & text, cost_model & out);

} // namespace editspec
