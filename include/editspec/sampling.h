// Token distributions and sampling, shared by autoregressive decoding and the acceptance
// policies (a sampled token and a verified draft must come from the same distribution).
//
//     editspec::sampling_params sp{.temp = 0.8f, .top_k = 40, .top_p = 0.95f, .seed = 42};
//     editspec::rng_state rng(sp.seed);
//     llama_token t = editspec::sampling_sample(logits, n_vocab, sp, rng.coin());
#pragma once

#include "llama.h"

#include <cstdint>
#include <random>
#include <vector>

namespace editspec {

struct sampling_params {
    float    temp  = 0.0f; // <= 0: greedy (argmax)
    int32_t  top_k = 0;    // 0 = all tokens
    float    top_p = 1.0f; // nucleus mass, 1 = off
    uint32_t seed  = 0;    // RNG seed for sampling
};

struct token_prob {
    llama_token token;
    float       p;
};

// a seeded source of coins in [0, 1); randomness comes in as an argument (llama2.c's habit)
struct rng_state {
    std::mt19937_64 gen;
    explicit rng_state(uint64_t seed) : gen(seed) {}
    float coin() { return std::uniform_real_distribution<float>(0.0f, 1.0f)(gen); }
};

// index of the largest logit; ties go to the lowest token id
llama_token sampling_argmax(const float * logits, int32_t n_vocab);

// the distribution sampling draws from: softmax(logits / temp) restricted to top-k and then to the
// smallest set with mass >= top_p, renormalised; sorted by p descending (ties by token id).
// temp <= 0 gives the argmax with p = 1.
std::vector<token_prob> sampling_dist(const float * logits, int32_t n_vocab, const sampling_params & p);

// draws from a distribution with a coin in [0, 1)
llama_token sampling_draw(const std::vector<token_prob> & dist, float coin);

// argmax when temp <= 0, else a draw from sampling_dist
llama_token sampling_sample(const float * logits, int32_t n_vocab, const sampling_params & p, float coin);

} // namespace editspec
