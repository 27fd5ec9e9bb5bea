// Google Benchmark of CopySpec's γ-gram index (src/draft/copy.cpp): the per-token work of the copy
// drafter — index one committed token, then find the last γ tokens' match — on a 32k-token context.
// Seed 003 §3.1: O(γ) per token, independent of the context's length. A benchmark, not a test:
// timings on a shared 2-core machine are noisy.
//
//   build/bin/bench-copy [--benchmark_filter=32k]
#include "editspec/copy.h"

#include "bench-tokens.h"

#include <benchmark/benchmark.h>

#include <random>

using namespace editspec;

namespace {

using bench::code_like;

// per iteration: one token appended to an index that already holds `context` tokens, then one match
// of each kind; the index is rebuilt (untimed) when the appended tokens run out
void run(benchmark::State & state, copy_match match) {
    const int32_t context = (int32_t) state.range(0);
    const token_vec prompt = code_like(context, 7);
    const token_vec more = code_like(1 << 16, 8);
    copy_params p;
    p.match = match;
    copy_index ix(p.gamma);
    ix.append(prompt);
    size_t next = 0;
    for (auto _ : state) {
        if (next == more.size()) {
            state.PauseTiming();
            ix.clear();
            ix.append(prompt);
            next = 0;
            state.ResumeTiming();
        }
        ix.append(std::span<const llama_token>(&more[next++], 1));
        benchmark::DoNotOptimize(copy_sources(ix, p));
    }
    state.SetItemsProcessed(state.iterations());
}

void BM_copy_first(benchmark::State & s) { run(s, COPY_MATCH_FIRST); }
void BM_copy_recent(benchmark::State & s) { run(s, COPY_MATCH_RECENT); }
void BM_copy_tree(benchmark::State & s) { run(s, COPY_MATCH_BRANCHES); }

// the whole prompt indexed at a request's start (begin()): what a new turn pays before drafting
void BM_copy_index_prompt(benchmark::State & state) {
    const token_vec prompt = code_like((int32_t) state.range(0), 7);
    for (auto _ : state) {
        copy_index ix(3);
        ix.append(prompt);
        benchmark::DoNotOptimize(ix.first_match());
    }
    state.SetItemsProcessed(state.iterations() * state.range(0));
}

} // namespace

BENCHMARK(BM_copy_first)->Arg(1 << 10)->Arg(32 << 10)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_copy_recent)->Arg(32 << 10)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_copy_tree)->Arg(32 << 10)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_copy_index_prompt)->Arg(2 << 10)->Arg(32 << 10)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
