// Cost model of one target pass: measured t(n), cached per model file and thread count.
#include "editspec/clock.h"
#include "editspec/cost.h"
#include "editspec/log.h"
#include "editspec/rpc.h"

#include <ggml-cpu.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>
#include <unistd.h>
#include <sys/stat.h>

namespace editspec {

// a curve's time for n_tokens: linear between its points, the last segment's slope past the last
// (throughput has levelled off)
static double curve_t(std::span<const int32_t> n, std::span<const double> ms, int32_t n_tokens) {
    if (n_tokens <= n.front()) {
        return ms.front();
    }
    for (size_t i = 1; i < n.size(); i++) {
        if (n_tokens <= n[i]) {
            const double f = (double) (n_tokens - n[i - 1]) / (n[i] - n[i - 1]);
            return ms[i - 1] + f * (ms[i] - ms[i - 1]);
        }
    }
    if (n.size() == 1) {
        return ms.back() * n_tokens / n.back();
    }
    const size_t k = n.size() - 1;
    const double slope = (ms[k] - ms[k - 1]) / (n[k] - n[k - 1]);
    return ms[k] + slope * (n_tokens - n[k]);
}

double cost_model::t(int32_t n_tokens) const {
    ES_ASSERT(!n.empty());
    return curve_t(n, ms, n_tokens);
}

// a deeper curve's time for n_tokens: it may cover the first sizes only (the drafts' range); past its
// last, the base curve's time scaled by their ratio there
static double deep_t(const cost_model & cm, const cost_depth_curve & c, int32_t n_tokens) {
    const size_t k = c.ms.size();
    if (k == cm.n.size() || n_tokens <= cm.n[k - 1]) {
        return curve_t(std::span<const int32_t>(cm.n).first(k), c.ms, n_tokens); // (no copy: sizing calls this per node)
    }
    return curve_t(cm.n, cm.ms, n_tokens) * c.ms[k - 1] / cm.ms[k - 1];
}

double cost_model::t(int32_t n_tokens, int32_t depth) const {
    ES_ASSERT(!n.empty());
    const double t0 = curve_t(n, ms, n_tokens);
    if (deeper.empty() || depth <= depth0) {
        return t0;
    }
    // the two curves around depth (past the deepest: the last two), linear in depth between them
    int32_t d_lo = depth0;
    double t_lo = t0;
    for (size_t k = 0; k < deeper.size(); k++) {
        const double t_hi = deep_t(*this, deeper[k], n_tokens);
        if (depth <= deeper[k].depth || k + 1 == deeper.size()) {
            const double f = (double) (depth - d_lo) / (deeper[k].depth - d_lo);
            // never below the shallower curve: a deeper pass does not cost less (noise between two
            // measurements must not make depth look free)
            return std::max(t_lo, t_lo + f * (t_hi - t_lo));
        }
        d_lo = deeper[k].depth;
        t_lo = t_hi;
    }
    return t0; // not reached
}

double cost_model::t_depth_extra(std::span<const pass_part> parts) const {
    double extra = 0.0;
    for (const pass_part & p : parts) {
        if (p.tokens > 0 && p.depth > depth0 && !deeper.empty()) extra += t(p.tokens, p.depth) - t(p.tokens);
    }
    return extra;
}

double cost_model::t_step(std::span<const pass_part> parts) const {
    int32_t n_tokens = 0;
    for (const pass_part & p : parts) n_tokens += p.tokens;
    return t(std::max(1, n_tokens)) + t_depth_extra(parts);
}

cost_model cost_model_from_table(const std::vector<int32_t> & n, const std::vector<double> & rel) {
    cost_model cm;
    cm.n = n;
    cm.ms = rel;
    return cm;
}

cost_model cost_model_from_throughput(std::span<const int32_t> n_tokens, std::span<const double> tokens_per_s) {
    cost_model cm;
    const size_t n = std::min(n_tokens.size(), tokens_per_s.size());
    for (size_t i = 0; i < n; i++) {
        cm.n.push_back(n_tokens[i]);
        cm.ms.push_back((double) n_tokens[i] * tokens_per_s[0] / tokens_per_s[i]);
    }
    return cm;
}

cost_model cost_model_design() {
    static const int32_t n[]   = {1, 2, 4, 8, 16, 32, 64};
    static const double  tps[] = {10.1, 18.4, 26.5, 42.7, 49.8, 53.2, 55.7};
    return cost_model_from_throughput(n, tps);
}

cost_model cost_model_relative(const cost_model & cm) {
    cost_model r = cm;
    for (double & t : r.ms) t /= cm.ms.front();
    for (cost_depth_curve & c : r.deeper) {
        for (double & t : c.ms) t /= cm.ms.front();
    }
    return r;
}

int32_t cost_depth_bucket(int32_t depth) {
    return depth < 512 ? 0 : depth < 1024 ? 1 : depth < 2048 ? 2 : depth < 4096 ? 3 : 4;
}

const char * cost_depth_bucket_name(int32_t bucket) {
    static const char * names[COST_DEPTH_BUCKETS] = {"0-511", "512-1023", "1024-2047", "2048-4095", "4096+"};
    return bucket >= 0 && bucket < COST_DEPTH_BUCKETS ? names[bucket] : "?";
}

std::vector<int32_t> cost_model_depths(int32_t n_prefix, int32_t n_max, int32_t n_ctx) {
    std::vector<int32_t> v;
    for (int32_t d : {1024, 3072}) {
        if (d > n_prefix && d + n_max <= n_ctx) v.push_back(d);
    }
    return v;
}


std::vector<int32_t> cost_model_sizes(int32_t n_max) {
    std::vector<int32_t> v;
    for (int32_t n = 1; n <= n_max; n = n < 8 ? n + 1 : n % 3 == 0 ? n / 3 * 4 : n / 2 * 3) v.push_back(n);
    if (v.back() != n_max) v.push_back(n_max);
    return v;
}

// the fastest of `rounds` timings of each size after the cache's n_prefix tokens (sizes to 8 every
// round, larger ones `reps` rounds); round 0 warms up. false when a decode fails.
static bool time_sizes(context & ctx, batch & b, const std::vector<int32_t> & sizes, int32_t n_prefix, int32_t rounds,
                       int32_t reps, bool all_logits, const std::function<llama_token(int32_t)> & tok,
                       std::vector<double> & best, std::string * error) {
    best.assign(sizes.size(), 0.0);
    seq_restart start(ctx, 0, n_prefix);
    double warm_ms = 0.0, left_ms = 0.0; // round 0's time, and what the later rounds will take by it
    for (int32_t r = 0; r <= rounds; r++) {
        if (r == 1 && isatty(STDERR_FILENO) && warm_ms > 2000.0) {
            // a person waits: say for how long (a 7B model's first measurement takes minutes on a laptop)
            ES_SAY("cost", "measuring %zu pass sizes after %d cached tokens, %d times each at most: about %.0f s more\n",
                   sizes.size(), n_prefix, rounds, left_ms / 1000.0);
        }
        for (size_t k = 0; k < sizes.size(); k++) {
            const int32_t n = sizes[k];
            if (r > (n <= 8 ? rounds : reps)) continue;
            b.clear();
            for (int32_t i = 0; i < n; i++) {
                b.add(tok(n_prefix + i), n_prefix + i, {0}, all_logits || i == n - 1);
            }
            const auto t0 = clock_type::now();
            // as greedy verification decodes (argmax outputs, when on)
            if (!ctx.decode(b, true)) {
                if (error) *error = "cost model: decode of " + std::to_string(n) + " tokens after " + std::to_string(n_prefix) + " failed";
                return false;
            }
            const double ms = ms_since(t0);
            if (r == 0) {
                warm_ms += ms;
                left_ms += ms * (n <= 8 ? rounds : reps);
            }
            if (!start.restore()) {
                if (error) *error = "cost model: the model's cache cannot drop a pass (kv_rm)";
                return false;
            }
            // the fastest repetition: other work on a shared machine only ever adds time
            if (r > 0 && (best[k] == 0.0 || ms < best[k])) best[k] = ms;
        }
    }
    return true;
}

// a bigger pass never costs less (noise must not invite longer drafts), nor more than its tokens decoded
// one by one (a stall that outlived every repetition must not forbid drafting)
static void curve_clamp(const std::vector<int32_t> & n, std::vector<double> & ms) {
    for (size_t i = 1; i < ms.size(); i++) {
        ms[i] = std::min(std::max(ms[i], ms[i - 1]), ms[0] * n[i]);
    }
}

bool cost_model_measure(context & ctx, cost_model & out, int32_t n_max, int32_t reps, std::string * error,
                        int32_t n_prefix, bool all_logits, const std::vector<int32_t> & depths) {
    const model & m = ctx.owner();
    n_prefix = std::max(1, std::min(n_prefix, ctx.n_ctx() / 4 * 3));
    if (n_max + n_prefix > ctx.n_ctx()) {
        n_max = std::max(1, ctx.n_ctx() - n_prefix);
    }
    n_max = std::min(n_max, ctx.n_batch());
    // token ids do not change the cost; use a spread of ordinary ones
    const int32_t n_vocab = m.facts().n_vocab;
    // (past the first ids, where the special tokens sit; a small vocabulary has fewer than 1000)
    const int32_t base = std::min(1000, n_vocab / 4);
    auto tok = [&](int32_t i) { return (llama_token) (base + (i * 7919) % std::max(1, n_vocab - base)); };

    ctx.kv_clear();
    batch b(std::max(n_prefix, n_max), 1);
    // the prefix grows depth by depth: tokens [from, to) go in as prompt chunks
    auto extend = [&](int32_t from, int32_t to) {
        token_vec chunk;
        for (int32_t i = from; i < to; i++) chunk.push_back(tok(i));
        return context_prefill(ctx, b, chunk, from, 0);
    };
    if (!extend(0, n_prefix)) {
        if (error) *error = "cost model: prefix decode failed";
        return false;
    }
    out = cost_model();
    out.depth0 = n_prefix;
    // rounds over every size, not every size's repetitions in a row: a burst of other work (on a
    // shared machine OpenMP's threads then wait a time slice at each barrier: a 2 ms pass took
    // 1.1 s) spoils one round of all sizes instead of every repetition of one size, and the
    // fastest repetition of each size survives it. Small passes (the unit of the whole curve, and
    // the sizes most drafts have) ten times at least: noise moved t(4)/t(1) from 1.54 to 1.91
    // between two runs of three.
    const std::vector<int32_t> sizes = cost_model_sizes(n_max);
    std::vector<double> best;
    if (!time_sizes(ctx, b, sizes, n_prefix, std::max(reps, 10), reps, all_logits, tok, best, error)) {
        ctx.kv_clear();
        return false;
    }
    out.n = sizes;
    out.ms = best;
    for (size_t k = 0; k < sizes.size(); k++) ES_LOG_INFO("cost model: %3d tokens: %8.2f ms\n", sizes[k], best[k]);
    curve_clamp(out.n, out.ms);
    int32_t have = n_prefix;
    for (int32_t d : depths) {
        if (d <= have || d + n_max > ctx.n_ctx()) continue;
        if (isatty(STDERR_FILENO) && d >= 2048) {
            ES_SAY("cost", "reading %d more tokens to time passes deep in a file\n", d - have);
        }
        if (!extend(have, d)) {
            if (error) *error = "cost model: prefix decode to depth " + std::to_string(d) + " failed";
            ctx.kv_clear();
            return false;
        }
        have = d;
        // the drafts' sizes (to 64) only: larger passes are prompt chunks, priced by the base curve's
        // shape (deep_t); timing them deep took the shipped model's first measurement from 4 s to 21
        std::vector<int32_t> deep_sizes;
        for (int32_t n : sizes) {
            if (n <= 64) deep_sizes.push_back(n);
        }
        if (!time_sizes(ctx, b, deep_sizes, d, 2, 2, all_logits, tok, best, error)) {
            ctx.kv_clear();
            return false;
        }
        cost_depth_curve c;
        c.depth = d;
        c.ms = best;
        curve_clamp(deep_sizes, c.ms);
        // not below the shallower curve, size by size (see cost_model::t)
        const std::vector<double> & above = out.deeper.empty() ? out.ms : out.deeper.back().ms;
        for (size_t k = 0; k < c.ms.size(); k++) c.ms[k] = std::max(c.ms[k], above[k]);
        ES_LOG_INFO("cost model: at depth %d: 1 token %.2f ms, %d tokens %.2f ms\n", d, c.ms.front(), sizes.back(), c.ms.back());
        out.deeper.push_back(std::move(c));
    }
    ctx.kv_clear();
    out.probe_ms = std::max(0.0, cost_model_probe(ctx));
    out.probe_wide_ms = std::max(0.0, cost_model_probe(ctx, 3, COST_PROBE_WIDE));
    return true;
}

double cost_model_probe(context & ctx, int32_t reps, int32_t n_tokens) {
    const int32_t n_vocab = ctx.owner().facts().n_vocab;
    const llama_token t0 = (llama_token) std::min(1000, n_vocab / 4), t1 = (llama_token) std::min(1001, n_vocab / 4 + 1);
    batch b(std::max(1, n_tokens), 1);
    ctx.kv_clear();
    b.add(t0, 0, {0}, true);
    double best = 0.0;
    if (!ctx.decode(b, true)) return -1.0;
    seq_restart start(ctx, 0, 1);
    for (int32_t r = 0; r <= reps; r++) { // round 0 warms up
        b.clear();
        for (int32_t i = 0; i < std::max(1, n_tokens); i++) b.add(t1, 1 + i, {0}, true);
        const auto t_start = clock_type::now();
        if (!ctx.decode(b, true)) {
            ctx.kv_clear();
            return -1.0;
        }
        const double ms = ms_since(t_start);
        if (!start.restore()) {
            ctx.kv_clear();
            return -1.0;
        }
        if (r > 0 && (best == 0.0 || ms < best)) best = ms;
    }
    ctx.kv_clear();
    return best;
}

std::string cost_model_to_json(const cost_model & cm) {
    nlohmann::json j = {{"n", cm.n}, {"ms", cm.ms}, {"depth0", cm.depth0}};
    nlohmann::json deeper = nlohmann::json::array();
    for (const cost_depth_curve & c : cm.deeper) deeper.push_back({{"depth", c.depth}, {"ms", c.ms}});
    j["deeper"] = deeper;
    if (cm.probe_ms > 0) j["probe_ms"] = cm.probe_ms;
    if (cm.probe_wide_ms > 0) j["probe_wide_ms"] = cm.probe_wide_ms;
    return j.dump();
}

bool cost_model_from_json(const std::string & text, cost_model & out) {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.contains("n") || !j.contains("ms") || !j["n"].is_array() || !j["ms"].is_array()) {
        return false;
    }
    cost_model cm;
    for (const auto & v : j["n"]) {
        if (!v.is_number_integer()) return false;
        cm.n.push_back(v.get<int32_t>());
    }
    for (const auto & v : j["ms"]) {
        if (!v.is_number()) return false;
        cm.ms.push_back(v.get<double>());
    }
    if (cm.n.empty() || cm.n.size() != cm.ms.size() || cm.n[0] != 1) {
        return false;
    }
    for (size_t i = 0; i < cm.n.size(); i++) {
        if (cm.ms[i] <= 0 || (i > 0 && cm.n[i] <= cm.n[i - 1])) return false;
    }
    // the probe: optional (0: a curve from before it, or from elsewhere, is never checked)
    if (j.contains("probe_ms")) {
        if (!j["probe_ms"].is_number() || j["probe_ms"].get<double>() < 0) return false;
        cm.probe_ms = j["probe_ms"].get<double>();
    }
    if (j.contains("probe_wide_ms")) {
        if (!j["probe_wide_ms"].is_number() || j["probe_wide_ms"].get<double>() < 0) return false;
        cm.probe_wide_ms = j["probe_wide_ms"].get<double>();
    }
    // depth curves: optional (a file of one curve costs every depth alike), each over the same sizes
    if (j.contains("depth0")) {
        if (!j["depth0"].is_number_integer() || j["depth0"].get<int64_t>() < 0) return false;
        cm.depth0 = j["depth0"].get<int32_t>();
    }
    if (j.contains("deeper")) {
        if (!j["deeper"].is_array()) return false;
        int32_t last = cm.depth0;
        for (const auto & c : j["deeper"]) {
            if (!c.is_object() || !c.contains("depth") || !c["depth"].is_number_integer() || !c.contains("ms") ||
                !c["ms"].is_array() || c["ms"].empty() || c["ms"].size() > cm.n.size()) {
                return false;
            }
            cost_depth_curve dc;
            dc.depth = c["depth"].get<int32_t>();
            if (dc.depth <= last) return false;
            last = dc.depth;
            for (const auto & v : c["ms"]) {
                if (!v.is_number() || v.get<double>() <= 0) return false;
                dc.ms.push_back(v.get<double>());
            }
            cm.deeper.push_back(std::move(dc));
        }
    }
    out = cm;
    return true;
}

static std::string cache_path(const context & ctx) {
    const char * root_env = std::getenv("EDITSPEC_CACHE");
    std::string root = root_env && *root_env ? root_env : std::string(std::getenv("HOME") ? std::getenv("HOME") : "/tmp") + "/.cache/editspec";
    const std::string & path = ctx.owner().path();
    struct stat st;
    long long size = 0, mtime = 0;
    if (stat(path.c_str(), &st) == 0) {
        size = (long long) st.st_size;
        mtime = (long long) st.st_mtime;
    }
    std::ostringstream key;
    key << std::filesystem::path(path).filename().string() << "-" << size << "-" << mtime << "-t" << ctx.n_threads()
        << "-fa" << (ctx.params().flash_attn ? 1 : 0)
        // the sgemm kernels (EDITSPEC_LLAMAFILE=ON) have a different curve from the exact build's
        << (ggml_cpu_has_llamafile() ? "-sgemm" : "")
        // v2: every size to 8 measured (cost_model_sizes); a v1 curve's line from 4 to 8 hid a step at 5.
        // v3: rounds over the sizes and a pass capped at its tokens one by one (a v2 curve measured on
        // a busy machine could say 4 tokens cost 460 one-token passes, and nothing was ever drafted)
        // v4: editspec's Q8_0 kernel (the ggml patch's item 5) halves a batched pass's cost on AVX512-VNNI
        // v5: its flash attention reads the cache once for a pass's rows (item 6): passes deep in a file cost less
        // v6: curves at deeper caches too (cost_model_depths)
        // v7: items 7-8's Q4_K, Q5_K and Q6_K kernels: a K-quant model's batched passes cost less on AVX512-VNNI
        // v8: item 6's attention packs a head's block and chains in 8 registers: passes deep in a file cost less
        // v9: Q5_0 through item 5's VNNI kernel: a Q4_K_M file's Q5_0 ffn_down passes cost less
        // v10: item 5's decoding tiles take up to 8 columns: Q8_0 and Q5_0 passes of 5-8 tokens cost less
        // v11: item 9: Q8_0, Q5_0 and Q4_0 repacked 16 rows at a time: their passes of 7+ tokens cost less
        // v12: item 10 (Q4_K repacked 16 rows) and item 9's prefetch: batched passes cost about half
        // v13: item 6 packs a head's block for 9+ rows only: passes of 2-8 tokens deep in a file cost less
        // v14: item 6 takes 4 rows of a head over a block together, chunks of a tile: passes deep in a file cost less
        // v15: item 11, Q6_K repacked 16 rows: Q4_K_M passes of several tokens cost less
        // v16: item 12, Q5_K repacked 16 rows: Q5_K_M passes of several tokens cost about half
        // v17: item 6 sums a row's cells in segments and splits a small pass's cells over the threads:
        // 1-2 token passes deep in a file cost less
        // v18: item 13, Q5_K and Q6_K repacked 16 rows on AVX2 too: their batched passes there cost less
        // v19: item 6 finds a block's kept cells 16 at a time: passes deep in a file cost a few percent less
        // v20: item 14, the activations' Q8_K quantization 16 lanes at a time: K-quant passes cost a little less
        // v21: item 6 loads a row's Q chunk once for its 4 cells: passes of 4+ tokens deep in a file cost 5-11% less
        // v22: on AVX2, item 6's scores 4 cells at a time and 2-4 rows of a head together: passes deep in a file cost less
        // v23: on AVX2, item 6 reads a decode's block in the cache's order: 1-2 token passes deep in a file cost less
        // v24: the wide probe (COST_PROBE_WIDE): a curve measured beside other work, which the 1-token probe
        // passed (1.2x; its passes of 8+ tokens 1.6-2x), is measured again
        << "-v24"
        // a quantized KV cache (--cache-type q8_0) reads other bytes through other loads
        << (ctx.params().type_k != GGML_TYPE_F16 ? std::string("-kv") + ggml_type_name(ctx.params().type_k) : "");
    // a GPU build's curve depends on the layers offloaded; layers on RPC workers pay a round trip
    if (engine_offloads()) key << "-ngl" << engine_gpu_layers();
    // a GPU's exact and stock kernels have curves of their own (--kernels)
    if (engine_has_gpu()) key << (engine_cuda_exact() ? "-exact" : "-stock");
    // argmax outputs leave the rows' logits where they are computed (EDITSPEC_DEVICE_ARGMAX)
    if (engine_argmax_outputs()) key << "-argmax";
    if (!engine_rpc_servers().empty()) key << "-rpc" << engine_rpc_servers().size();
    // a recurrent model's pass writes a snapshot of its state a token (--rs-snapshots), or none (checkpoints)
    if (ctx.owner().facts().recurrent) key << "-rs" << ctx.rollback_max();
    key << ".json";
    return root + "/cost/" + key.str();
}

// keeps the newest `keep` curves: every new model file (a test's, a training run's) adds one
static void cost_cache_prune(const std::filesystem::path & dir, size_t keep) {
    std::error_code ec;
    std::vector<std::pair<std::filesystem::file_time_type, std::filesystem::path>> files;
    for (const auto & e : std::filesystem::directory_iterator(dir, ec)) {
        if (e.path().extension() == ".json") {
            files.emplace_back(e.last_write_time(ec), e.path());
        }
    }
    if (files.size() <= keep) {
        return;
    }
    std::sort(files.begin(), files.end());
    for (size_t i = 0; i + keep < files.size(); i++) {
        std::filesystem::remove(files[i].second, ec);
    }
}

bool cost_model_save(const context & ctx, const cost_model & cm) {
    const std::string path = cache_path(ctx);
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    const std::string tmp = path + ".tmp";
    {
        std::ofstream f(tmp);
        if (!(f << cost_model_to_json(cm))) {
            ES_LOG_WARN("cost model: could not write %s\n", tmp.c_str());
            return false;
        }
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        ES_LOG_WARN("cost model: could not save %s\n", path.c_str());
        return false;
    }
    ES_LOG_INFO("cost model: saved %s\n", path.c_str());
    cost_cache_prune(std::filesystem::path(path).parent_path(), 256);
    return true;
}

bool cost_model_get(context & ctx, cost_model & out, std::string * error) {
    const std::string path = cache_path(ctx);
    const std::vector<int32_t> depths = cost_model_depths(256, 256, ctx.n_ctx());
    cost_model cached; // a curve the probe found stale
    {
        std::ifstream f(path);
        if (f) {
            std::stringstream ss;
            ss << f.rdbuf();
            // a curve cached by a shallower context is measured again once a context can go deeper
            // (the cache is per model file, not per context size): at most once per depth
            if (cost_model_from_json(ss.str(), out) && out.deeper.size() >= depths.size()) {
                if (out.probe_ms <= 0) {
                    ES_LOG_INFO("cost model: cached %s\n", path.c_str());
                    return true;
                }
                const double now = cost_model_probe(ctx);
                const double now_wide = out.probe_wide_ms > 0 ? cost_model_probe(ctx, 3, COST_PROBE_WIDE) : 0.0;
                const bool stale = (now > 0 && out.probe_ms > COST_PROBE_STALE * now) ||
                                   (now_wide > 0 && out.probe_wide_ms > COST_PROBE_STALE * now_wide);
                if (!stale) {
                    ES_LOG_INFO("cost model: cached %s (probes %.3f / %.3f ms, now %.3f / %.3f ms)\n", path.c_str(), out.probe_ms,
                                out.probe_wide_ms, now, now_wide);
                    return true;
                }
                ES_LOG_INFO("cost model: %s was measured on a busier machine (probes %.3f / %.3f ms, now %.3f / %.3f ms): "
                            "measuring again\n", path.c_str(), out.probe_ms, out.probe_wide_ms, now, now_wide);
                cached = out;
            } else if (out.deeper.size() < depths.size()) {
                ES_LOG_INFO("cost model: %s holds %zu depths, this context can measure %zu\n", path.c_str(),
                            out.deeper.size(), depths.size());
            } else {
                ES_LOG_WARN("cost model: ignoring unreadable cache %s\n", path.c_str());
            }
        }
    }
    ES_LOG_INFO("cost model: measuring target passes (once per model file and thread count)\n");
    // the first run's wait, said where a person watches (a 7B model takes tens of seconds)
    if (isatty(STDERR_FILENO)) {
        ES_SAY("cost", "measuring what a target pass of 1 to 256 tokens costs on this machine%s, once per model file and "
                       "thread count (cached in %s)\n", depths.empty() ? "" : ", also deep in a file", path.c_str());
    }
    if (!cost_model_measure(ctx, out, 256, 5, error, 256, true, depths)) {
        return false;
    }
    // busy again while it measured: the faster curve stays (each measurement again needs a probe
    // COST_PROBE_STALE times faster than the last kept, so a machine that swings measures a few times at most)
    // (by both probes where both curves have them)
    const bool wide = cached.probe_wide_ms > 0 && out.probe_wide_ms > 0;
    if (!cached.empty() && cached.probe_ms + (wide ? cached.probe_wide_ms : 0.0) <= out.probe_ms + (wide ? out.probe_wide_ms : 0.0)) {
        ES_LOG_INFO("cost model: the new curve's probes (%.3f / %.3f ms) are no faster: keeping the cached one\n", out.probe_ms,
                    out.probe_wide_ms);
        out = cached;
        return true;
    }
    cost_model_save(ctx, out);
    return true;
}

} // namespace editspec
