// Google Benchmark of the prompt-lookup scan on 8k-token histories: the lookup runs before every
// target pass, so it must stay far below one pass (~100 ms on the ds13 shape, ~3 ms on the shipped
// model). A benchmark, not a test: timings on a shared 2-core machine are noisy.
//
//   build/bin/bench-lookup [--benchmark_filter=longest]
#include "editspec/lookup.h"

#include "bench-tokens.h"

#include <benchmark/benchmark.h>

#include <random>

using namespace editspec;

namespace {

constexpr int L = 8192;

token_vec code_like() { return bench::code_like(L, 7); }

// adversarial: runs of 11 equal tokens, each after a different token, tail [99, 1 x 11]: every
// position inside a run matches the tail's last token and is compared up to 11 deep, and no match
// reaches n_max = 12 (which would end the scan)
token_vec adversarial() {
    token_vec adv;
    const token_vec motif(11, 1);
    for (llama_token x = 100; (int) adv.size() < L - 12; x++) {
        adv.push_back(x);
        adv.insert(adv.end(), motif.begin(), motif.end());
    }
    adv.push_back(99);
    adv.insert(adv.end(), motif.begin(), motif.end());
    return adv;
}

// few matches: uniform random tokens
token_vec random_tokens() {
    std::mt19937 rng(8);
    token_vec rnd(L);
    for (auto & t : rnd) t = (llama_token) (rng() % 32000);
    return rnd;
}

void run(benchmark::State & state, const token_vec & h, lookup_mode mode) {
    lookup_params p; // n = 12 .. 1, m = 48: the lookup methods' defaults
    p.mode = mode;
    for (auto _ : state) {
        benchmark::DoNotOptimize(lookup_draft(h, p));
    }
}

void BM_longest_code(benchmark::State & s) { run(s, code_like(), LOOKUP_MODE_LONGEST); }
void BM_longest_adversarial(benchmark::State & s) { run(s, adversarial(), LOOKUP_MODE_LONGEST); }
void BM_longest_random(benchmark::State & s) { run(s, random_tokens(), LOOKUP_MODE_LONGEST); }
void BM_simple_random(benchmark::State & s) { run(s, random_tokens(), LOOKUP_MODE_NGRAM_SIMPLE); }

} // namespace

BENCHMARK(BM_longest_code)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_longest_adversarial)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_longest_random)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_simple_random)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
