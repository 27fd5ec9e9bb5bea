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

// A pass deep in a file costs more: its attention reads every cached token (issue 71: a 1-token pass of
// ds13 Q4_K_M costs 3.8x at 3,072 cached tokens what it costs at 256, and the curve's shape changes), so
// the model holds curves at a few depths and interpolates between them, linearly in depth (attention's
// work grows linearly with the cache), extrapolating past the deepest from the last two.
struct cost_depth_curve {
    int32_t             depth = 0; // tokens in the KV cache before the pass
    std::vector<double> ms;        // [the first n_points of the model's n, at least 1] the pass's time at
                                   // this depth; past them, the base curve scaled by the last one's ratio
};

struct cost_model {
    std::vector<int32_t> n;  // [n_points] tokens per pass, ascending, n[0] = 1
    std::vector<double>  ms; // [n_points] wall time of that pass (fastest of the repetitions), milliseconds;
                             // for a table from elsewhere, any unit (relative to a 1-token pass)
    int32_t depth0 = 256;    // the cache depth `ms` was measured at
    std::vector<cost_depth_curve> deeper; // ascending depths > depth0 (empty: cost does not depend on depth)
    // the probes (cost_model_probe) timed right after the curve, ms; 0 = none. A cached curve is only as
    // good as the machine was quiet while it was measured: cost_model_get times the probes again and
    // measures anew when the machine is now much faster than the curve says (a first start beside other work)
    double probe_ms = 0.0;      // a 1-token pass
    double probe_wide_ms = 0.0; // a COST_PROBE_WIDE-token pass (beside other work a 1-token pass came out
                                // 1.2x, an 8-token one 2x: the threads' barriers wait for a descheduled one)

    bool empty() const { return n.empty(); }
    // ms for a pass of n_tokens at depth0, linear between measured points, extrapolated past the last
    double t(int32_t n_tokens) const;
    // ms for a pass of n_tokens after `depth` cached tokens; at or below depth0 (or without deeper
    // curves) the same as t(n_tokens)
    double t(int32_t n_tokens, int32_t depth) const;
    // ms for one pass holding several requests' parts (a step, step.h), each at its own depth: the
    // weights are read once for all their tokens, t(sum of tokens), and each part's rows attend to its
    // own cells, adding t(tokens, depth) - t(tokens) (the regions' kernel skips other requests' cells).
    // One part: t(tokens, depth)
    double t_step(std::span<const pass_part> parts) const;
    // what parts' depths add to a pass over pricing them at depth0: t_step's second term
    double t_depth_extra(std::span<const pass_part> parts) const;
};

// depth ranges, for comparing the model with measured decode time deep in a file (bench reports)
inline constexpr int32_t COST_DEPTH_BUCKETS = 5;
int32_t      cost_depth_bucket(int32_t depth); // 0: under 512, 1: under 1,024, 2: under 2,048, 3: under 4,096, 4: more
const char * cost_depth_bucket_name(int32_t bucket);

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

// the depths past n_prefix a curve is measured at: 1,024 and 3,072 where the context holds them with a
// pass of n_max behind (an apply of a 3,000-token file decodes its last passes near 3,400)
std::vector<int32_t> cost_model_depths(int32_t n_prefix, int32_t n_max, int32_t n_ctx);

// times passes of cost_model_sizes(n_max) tokens after an n_prefix-token prefix, reps times each (the
// fastest counts: interference from other processes only adds time), then, with `depths`, the same sizes
// after each deeper prefix, the sizes to 64 only (twice each: a deep pass is long, and its noise small
// beside it); leaves the KV cache empty.
// all_logits false: only the last row's logits, as llama-bench's prompt passes compute them (a
// comparison on the same work; verification needs every row's, the cost model's figures)
bool cost_model_measure(context & ctx, cost_model & out, int32_t n_max, int32_t reps, std::string * error,
                        int32_t n_prefix = 256, bool all_logits = true, const std::vector<int32_t> & depths = {});

// a short timing that compares like with like across runs: a pass of n_tokens (every row's logits) after
// one cached token, the fastest of `reps`, each pass alone (the curve's t(1) is timed between larger
// passes and comes out ~1.8x a pass timed alone, so the probe, not t(1), is what a later run compares).
// ms; <= 0 when a decode fails. Leaves the KV cache empty.
double cost_model_probe(context & ctx, int32_t reps = 5, int32_t n_tokens = 1);

// the wide probe's tokens: a pass that uses every thread (1-4 token passes barely slow down beside other work)
inline constexpr int32_t COST_PROBE_WIDE = 8;
// a cached curve whose probe (either) took more than this times the probe now was measured on a busier machine
inline constexpr double COST_PROBE_STALE = 1.5;

// loads the cached model for this model file and thread count, or measures and caches it, with the
// depths of cost_model_depths (~/.cache/editspec/cost/, EDITSPEC_CACHE overrides the root). A cached
// curve whose 1-token or wide probe is COST_PROBE_STALE times slower than the same probe now is measured
// again, and the faster of the two (by their probes) is kept: a curve measured beside other work does not stay.
bool cost_model_get(context & ctx, cost_model & out, std::string * error);

// writes cm as the cached model for this context's model file and thread count
bool cost_model_save(const context & ctx, const cost_model & cm);

std::string cost_model_to_json(const cost_model & cm);
bool cost_model_from_json(const std::string & text, cost_model & out);

} // namespace editspec
