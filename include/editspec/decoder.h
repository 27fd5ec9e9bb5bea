// The speculative decoder: drafters propose into one tree, the target scores the whole tree in one
// llama_decode, an acceptance policy keeps a path, the KV cache keeps exactly that path.
//
//     editspec::lookup_drafter lookup(lookup_params{});
//     std::vector<editspec::drafter_i *> drafters = {&lookup};
//     editspec::spec_params sp;                // cost model sizing, greedy verification
//     sp.cost = &cm;
//     editspec::generate_result r = editspec::generate_spec(*ctx, prompt, gp, sp, drafters);
//
// At temperature 0 with the greedy policy the output equals generate_ar's token for token.
// The context needs n_seq_max > 1 for trees with several leaves (one sequence id per leaf).
#pragma once

#include "editspec/cost.h"
#include "editspec/draft.h"
#include "editspec/generate.h"
#include "editspec/sizing.h"
#include "editspec/verify.h"

#include <functional>
#include <span>

namespace editspec {

// sizing (draft_sizing, sizing.h: a fixed cap or the cost model) and verification of one request
struct spec_params : draft_sizing {
    verify_params verify;         // acceptance policy; greedy = lossless
    accept_stats * stats = nullptr;    // running statistics to use and update (null: per request)
    // per node: may a lossy policy apply here (e.g. only to generated edit content); null = everywhere
    std::function<bool(const draft_node &)> lossy_ok;
};

// Runs prompt → tokens with the drafters. The drafters' begin() is called with the prompt.
generate_result generate_spec(context & ctx, std::span<const llama_token> prompt, const generate_params & gp,
                              const spec_params & sp, std::span<drafter_i * const> drafters);

} // namespace editspec
