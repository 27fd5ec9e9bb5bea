// Google Benchmark of datastore retrieval (src/datastore/datastore.cpp): the suffix match FastCoder
// runs before a pass — the context's last 16 tokens, then 15, ... down to the first length that
// occurs — on a datastore built by `editspec index`. Queries are 16-token windows of the datastore's
// own stream with one token (at a random place) replaced by a random one, so most must back off to
// a shorter suffix, as a context that is new to the datastore does. Reports the mean (Google Benchmark) and p50 / p99 per query as counters.
//
//   EDITSPEC_DATASTORE=repo.eds build/bin/bench-datastore
#include "editspec/datastore.h"
#include "editspec/engine.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>

using namespace editspec;

namespace {

// the longest suffix of q (16 down to 1 tokens) that occurs; its length
int32_t longest_suffix(const datastore & ds, std::span<const llama_token> q) {
    for (size_t k = std::min<size_t>(16, q.size()); k > 0; k--) {
        if (ds.find(q.subspan(q.size() - k)).count() > 0) return (int32_t) k;
    }
    return 0;
}

void BM_datastore_suffix_match(benchmark::State & state) {
    const char * path = std::getenv("EDITSPEC_DATASTORE");
    datastore ds;
    std::string err;
    if (!path || !datastore_open(path, nullptr, ds, &err)) {
        state.SkipWithError(path ? err.c_str() : "set EDITSPEC_DATASTORE to a datastore built by `editspec index`");
        return;
    }
    std::mt19937 rng(5);
    const auto t = ds.tokens();
    std::vector<token_vec> queries(4096);
    for (auto & q : queries) {
        const size_t s = rng() % (t.size() - 16);
        q.assign(t.begin() + s, t.begin() + s + 16);
        q[rng() % 16] = (llama_token) (rng() % 8000);
    }
    std::vector<double> us;
    int64_t matched = 0;
    size_t i = 0;
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        matched += longest_suffix(ds, queries[i++ % queries.size()]);
        us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(us.begin(), us.end());
    state.counters["p50_us"] = us[us.size() / 2];
    state.counters["p99_us"] = us[us.size() * 99 / 100];
    state.counters["mean_matched"] = (double) matched / (double) us.size();
    state.counters["tokens_M"] = (double) ds.size() / 1e6;
}

} // namespace

BENCHMARK(BM_datastore_suffix_match)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
