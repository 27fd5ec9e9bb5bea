// Cost model: the measured wall time of one target pass as a function of the tokens in it.
//
// On a CPU a pass over 64 tokens costs about 11.5 single-token passes (docs/results/design-notes/cost-curve-and-oracle.md), so drafts are
// sized by expected accepted tokens per unit of cost, not by how much a drafter can offer.
//
//     editspec::cost_model cm;
//     if (!editspec::cost_model_get(*ctx, cm, &err)) ...;   // cached per model file and thread count
//     double ms = cm.t(33);                                 // one pass of 33 tokens, ms
//
// The oracle replay (replay.h) costs passes on the same type, in units of one 1-token pass.
#pragma once

#include "editspec/engine.h"

#include <span>
#include <string>
#include <vector>

namespace editspec {

struct cost_model {
    std::vector<int32_t> n;  // [n_points] tokens per pass, ascending, n[0] = 1
    std::vector<double>  ms; // [n_points] wall time of that pass (fastest of the repetitions), milliseconds;
                             // for a table from elsewhere, any unit (relative to a 1-token pass)

    bool empty() const { return n.empty(); }
    // ms for a pass of n_tokens, linear between measured points, extrapolated past the last
    double t(int32_t n_tokens) const;
};

// a cost model from a table of relative costs, for replay studies and tests
cost_model cost_model_from_table(const std::vector<int32_t> & n, const std::vector<double> & rel);

// t(n) = n * tps(1) / tps(n) at the measured points: the cost of a pass of n tokens relative to a
// 1-token pass, from throughputs in tokens/s. Example: n {1, 2}, tps {10, 16} -> t(2) = 1.25.
cost_model cost_model_from_throughput(std::span<const int32_t> n_tokens, std::span<const double> tokens_per_s);

// docs/results/design-notes/cost-curve-and-oracle.md: DeepSeek-Coder-1.3B shape, Q8_0, 2 threads (llama-bench), from its tokens/s row:
//   n       1     2      4      8      16     32     64
//   tok/s   10.1  18.4   26.5   42.7   49.8   53.2   55.7
//   t(n)    1     1.098  1.525  1.892  3.245  6.075  11.605
// (that table prints t(n) rounded to 1.1, 1.5, 1.9, 3.2, 6.0, 11.5; its costed table was computed
// from the unrounded values: with the rounded ones fixed cap 48 gives 2.21x / 1.24x, not 2.20x / 1.23x)
// e.g. t(12) = 1.892 + (3.245 - 1.892) * 4/8 = 2.569
cost_model cost_model_design();

// the same curve in units of its 1-token pass (t(1) = 1)
cost_model cost_model_relative(const cost_model & cm);

// the pass sizes measured: every size to 8 (small passes step with the kernels' tiles, which a
// line between 4 and 8 hides), then steps of 1.5x and 4/3x (12, 16, 24, 32, 48, ...) and n_max
std::vector<int32_t> cost_model_sizes(int32_t n_max);

// times passes of cost_model_sizes(n_max) tokens after a 256-token prefix, reps times each (the fastest
// counts: interference from other processes only adds time); leaves the KV cache empty.
// all_logits false: only the last row's logits, as llama-bench's prompt passes compute them (a
// comparison on the same work; verification needs every row's, the cost model's figures)
bool cost_model_measure(context & ctx, cost_model & out, int32_t n_max, int32_t reps, std::string * error,
                        int32_t n_prefix = 256, bool all_logits = true);

// loads the cached model for this model file and thread count, or measures and caches it
// (~/.cache/editspec/cost/, EDITSPEC_CACHE overrides the root)
bool cost_model_get(context & ctx, cost_model & out, std::string * error);

// writes cm as the cached model for this context's model file and thread count
bool cost_model_save(const context & ctx, const cost_model & cm);

std::string cost_model_to_json(const cost_model & cm);
bool cost_model_from_json(const std::string & text, cost_model & out);

} // namespace editspec
