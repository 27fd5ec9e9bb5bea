// Google Benchmark of the greedy verifier's host work per row (issue 73 item 5): sampling_argmax
// (src/engine/sampling.cpp: 16 lanes of compares and selects) against a running best from token 0 (what
// it replaced, the same answer), over vocabularies of 4k (the shipped models), 32k (DeepSeek-Coder) and
// 152k (Qwen2.5-Coder). A benchmark, not a test: timings on a shared 2-core machine are noisy.
//
//   build/bin/bench-argmax
#include "editspec/sampling.h"

#include <benchmark/benchmark.h>

#include <random>
#include <vector>

using namespace editspec;

namespace {

int32_t running_best(const float * l, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++) {
        if (l[i] > l[best]) best = i;
    }
    return best;
}

std::vector<float> logits_of(int32_t n) {
    std::vector<float> v((size_t) n);
    std::mt19937 rng(1);
    std::normal_distribution<float> d(0.0f, 3.0f);
    for (float & x : v) x = d(rng);
    return v;
}

template <int32_t (*F)(const float *, int32_t)>
void run(benchmark::State & state) {
    const int32_t n = (int32_t) state.range(0);
    std::vector<float> v = logits_of(n);
    int32_t k = 0;
    for (auto _ : state) {
        v[(size_t) (k++ * 7919) % n] += 1e-3f; // a row changes between passes
        benchmark::DoNotOptimize(F(v.data(), n));
    }
}

int32_t lanes(const float * l, int32_t n) { return sampling_argmax(l, n); }

} // namespace

BENCHMARK(run<running_best>)->Name("running_best")->Arg(4099)->Arg(32256)->Arg(151936);
BENCHMARK(run<lanes>)->Name("sampling_argmax")->Arg(4099)->Arg(32256)->Arg(151936);
BENCHMARK_MAIN();
