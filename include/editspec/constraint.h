// Constrained greedy decoding: the output token is the target's likeliest token among those a
// constraint allows (llama.cpp's grammars play this part for its samplers).
//
//     editspec::apply_constraint c(model, in);      // apply.h: lines of the original or the snippet
//     gp.constraint = &c;                            // generate_ar and generate_spec, temperature 0
//
// Speculative decoding under a constraint is lossless with respect to constrained autoregressive
// decoding: the verifier's choice at every node is constrained_argmax over that node's output, the
// choice generate_ar makes there. Against the model's free greedy output a constraint is lossy, and
// benchmarks report it as its own mode.
#pragma once

#include "llama.h"

#include <cstdint>
#include <span>

namespace editspec {

struct token_constraint {
    virtual ~token_constraint() = default;
    // may t follow `out` (the generated tokens so far, the prompt excluded)? Called with many
    // prefixes of one output (a draft tree's paths): implementations keep their state for the
    // longest prefix they saw and roll back from it.
    virtual bool allows(std::span<const llama_token> out, llama_token t) = 0;
};

// the likeliest token c allows after out (ties: lowest id, as sampling_argmax); -1 when c allows none
llama_token constrained_argmax(const float * logits, int32_t n_vocab, token_constraint & c,
                               std::span<const llama_token> out);

} // namespace editspec
