// Batch invariance of a model's passes on its backend (exactness.h).
#include "editspec/exactness.h"
#include "editspec/sampling.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>

namespace editspec {

std::vector<int32_t> exactness_batch_sizes(int32_t n_max) {
    static const int32_t edges[] = {17, 23, 24, 31, 32, 33, 47, 48, 63, 64, 65, 100, 127, 128, 129, 200, 255, 256,
                                    257, 384, 511, 512};
    std::vector<int32_t> v;
    for (int32_t n = 1; n <= std::min(16, n_max); n++) v.push_back(n);
    for (int32_t n : edges) {
        if (n <= n_max) v.push_back(n);
    }
    return v;
}

namespace {

// random tokens of the vocabulary's ordinary range, the same for a given seed
token_vec random_tokens(int32_t n_vocab, uint32_t seed, int32_t n) {
    std::mt19937 rng(seed);
    const uint32_t lo = std::min(100, n_vocab - 1), span = (uint32_t) std::max(1, std::min(30000, n_vocab - (int32_t) lo));
    token_vec toks(n);
    for (auto & t : toks) t = (llama_token) (lo + rng() % span);
    return toks;
}

// a row that differs from the reference: how far, and whether its greedy token differs
void describe_difference(const float * got, const float * ref, int32_t n_vocab, exactness_result & r) {
    double d2 = 0, r2 = 0;
    int32_t a = 0, g = 0;
    for (int32_t v = 0; v < n_vocab; v++) {
        d2 += (double) (got[v] - ref[v]) * (got[v] - ref[v]);
        r2 += (double) ref[v] * ref[v];
        if (got[v] > got[a]) a = v;
        if (ref[v] > ref[g]) g = v;
    }
    r.rel = std::sqrt(d2 / std::max(r2, 1e-30));
    r.argmax_differs = a != g;
}

context_params single_params(const exactness_params & p, int32_t n_ctx) {
    context_params cp;
    cp.n_ctx = std::max(1024, n_ctx);
    cp.n_threads = p.n_threads;
    cp.n_batch = 512;
    cp.flash_attn = p.flash_attn;
    cp.type_k = p.kv_type;
    cp.type_v = p.kv_type;
    cp.rs_snapshots = p.rs_snapshots;
    return cp;
}

// a request's rows decoded alone, one token at a time after its prefix, in a context of its own
bool decode_alone(context & ctx, batch & b, const token_vec & toks, int32_t n_prefix, int32_t n,
                  const std::function<void(int32_t, const float *)> & row, std::string & error) {
    ctx.kv_clear();
    if (n_prefix > 0 && !context_prefill(ctx, b, token_vec(toks.begin(), toks.begin() + n_prefix), 0, 0)) {
        error = "exactness: prefill of " + std::to_string(n_prefix) + " tokens failed";
        return false;
    }
    for (int32_t i = 0; i < n; i++) {
        b.clear();
        b.add(toks[n_prefix + i], n_prefix + i, {0}, true);
        if (!ctx.decode(b)) {
            error = "exactness: one-token decode " + std::to_string(i) + " failed";
            return false;
        }
        row(i, ctx.logits(0));
    }
    return true;
}

uint64_t row_hash(const float * x, int32_t n) {
    uint64_t h = 1469598103934665603ull; // FNV-1a over the row's bytes
    const auto * c = (const unsigned char *) x;
    for (size_t i = 0; i < (size_t) n * sizeof(float); i++) h = (h ^ c[i]) * 1099511628211ull;
    return h;
}

// a recurrent model's passes are at most CONTEXT_RS_PASS_MAX tokens (a chain and, with checkpoints, the
// tokens a rejection left to decode again); a KV cache's any length
int32_t pass_bound(const model & m) {
    return m.facts().recurrent ? CONTEXT_RS_PASS_MAX : INT32_MAX;
}

// exactness_params::n_requests > 1: the server's step (exactness.h)
exactness_result check_requests(const model & m, const exactness_params & p) {
    exactness_result r;
    const int32_t n_req = p.n_requests, n_max = std::min({p.n_max, 64, pass_bound(m)});
    r.n_max = n_max;
    if (n_max == 0) return r;
    const int32_t n_vocab = m.facts().n_vocab;
    auto prefix = [&](int32_t s) { return p.n_prefix + 13 * s; };
    if (prefix(n_req - 1) + n_max + 1 > p.layout.n_ctx / n_req) {
        r.error = "exactness: a request's prefix and passes (" + std::to_string(prefix(n_req - 1) + n_max) +
                  " tokens) exceed its " + std::to_string(p.layout.n_ctx / n_req) + " cells";
        return r;
    }
    if ((int64_t) n_req * n_max > p.layout.n_batch) {
        r.error = "exactness: " + std::to_string(n_req) + " requests x " + std::to_string(n_max) +
                  " tokens exceed the step's batch of " + std::to_string(p.layout.n_batch);
        return r;
    }
    std::vector<token_vec> toks;
    for (int32_t s = 0; s < n_req; s++) toks.push_back(random_tokens(n_vocab, 2000 + 31 * s + p.n_prefix, prefix(s) + n_max));

    // the references, alone: a hash of each row's bytes (n_req x n_max rows of the vocabulary would not fit)
    auto alone = context_create(m, single_params(p, prefix(n_req - 1) + n_max + 16), &r.error);
    if (!alone) return r;
    batch b1(512, 1);
    std::vector<std::vector<uint64_t>> ref((size_t) n_req);
    for (int32_t s = 0; s < n_req; s++) {
        auto keep = [&](int32_t, const float * x) { ref[s].push_back(row_hash(x, n_vocab)); };
        if (!decode_alone(*alone, b1, toks[s], prefix(s), n_max, keep, r.error)) return r;
    }

    context_params cp = p.layout;
    cp.n_threads = p.n_threads;
    cp.flash_attn = p.flash_attn;
    cp.type_k = p.kv_type;
    cp.type_v = p.kv_type;
    cp.rs_snapshots = p.rs_snapshots;
    auto ctx = context_create(m, cp, &r.error);
    if (!ctx) return r;
    if (p.regions && !llama_memory_set_seq_regions(llama_get_memory(ctx->get()), true)) {
        r.error = "exactness: the KV cache of " + std::to_string(cp.n_ctx) + " cells takes no regions";
        return r;
    }
    batch b(cp.n_batch, 1);
    std::vector<seq_restart> starts;
    for (int32_t s = 0; s < n_req; s++) {
        if (prefix(s) > 0 && !context_prefill(*ctx, b, token_vec(toks[s].begin(), toks[s].begin() + prefix(s)), 0, s)) {
            r.error = "exactness: request " + std::to_string(s) + "'s prefill of " + std::to_string(prefix(s)) + " tokens failed";
            return r;
        }
        starts.emplace_back(*ctx, s, prefix(s));
    }
    for (int32_t n : exactness_batch_sizes(n_max)) {
        for (bool mixed : {false, true}) {
            r.n_sizes++;
            b.clear();
            std::vector<int32_t> first(n_req); // each request's first row in the batch
            for (int32_t s = 0; s < n_req; s++) {
                if (!starts[s].restore()) {
                    r.error = "exactness: the model's cache cannot drop a pass (kv_rm)";
                    return r;
                }
                const int32_t n_s = mixed ? 1 + (n - 1) * (s + 1) / n_req : n;
                first[s] = b.size();
                for (int32_t i = 0; i < n_s; i++) b.add(toks[s][prefix(s) + i], prefix(s) + i, {s}, true);
            }
            if (!ctx->decode(b)) {
                r.error = "exactness: a step of " + std::to_string(n_req) + " requests (" + std::to_string(b.size()) +
                          " tokens) failed";
                return r;
            }
            for (int32_t s = 0; s < n_req; s++) {
                const int32_t n_s = (s + 1 < n_req ? first[s + 1] : b.size()) - first[s];
                for (int32_t i = 0; i < n_s; i++) {
                    const float * got = ctx->logits(first[s] + i);
                    if (row_hash(got, n_vocab) == ref[s][i]) continue;
                    r.n = n;
                    r.row = i;
                    r.request = s;
                    r.mixed = mixed;
                    // the reference row again, for how far it is
                    std::vector<float> want;
                    auto keep = [&](int32_t k, const float * x) { if (k == i) want.assign(x, x + n_vocab); };
                    const std::vector<float> row(got, got + n_vocab); // the alone context decodes next
                    if (!decode_alone(*alone, b1, toks[s], prefix(s), i + 1, keep, r.error)) return r;
                    describe_difference(row.data(), want.data(), n_vocab, r);
                    return r;
                }
            }
        }
    }
    return r;
}

} // namespace

exactness_result exactness_check(const model & m, const exactness_params & p) {
    exactness_result r;
    if (p.n_max < 1 || p.n_max > 512 || p.n_prefix < 0 || p.n_prefix > 4096 || p.n_requests < 1 || p.n_requests > 64) {
        r.error = "exactness: n_max " + std::to_string(p.n_max) + " (1..512), prefix " + std::to_string(p.n_prefix) +
                  " (0..4096) or requests " + std::to_string(p.n_requests) + " (1..64) out of range";
        return r;
    }
    if (p.n_requests > 1) return check_requests(m, p);
    auto ctx = context_create(m, single_params(p, p.n_prefix + p.n_max + 16), &r.error);
    if (!ctx) return r;
    r.n_max = std::min(p.n_max, pass_bound(m));
    const int32_t n_vocab = m.facts().n_vocab;
    const token_vec toks = random_tokens(n_vocab, 1000 + p.n_prefix, p.n_prefix + r.n_max);

    batch b(512, 1);
    if (m.facts().recurrent && p.n_prefix > 0 && !decode_alone(*ctx, b, toks, p.n_prefix, 0, nullptr, r.error)) return r;
    seq_restart start(*ctx, 0, p.n_prefix); // (a recurrent state: saved after the prefix, above)
    std::vector<std::vector<float>> ref;
    auto keep = [&](int32_t, const float * x) { ref.emplace_back(x, x + n_vocab); };
    if (!decode_alone(*ctx, b, toks, p.n_prefix, r.n_max, keep, r.error)) return r;
    for (int32_t n : exactness_batch_sizes(r.n_max)) {
        r.n_sizes++;
        if (!start.restore()) {
            r.error = "exactness: the model's cache cannot drop a pass (kv_rm)";
            return r;
        }
        b.clear();
        for (int32_t i = 0; i < n; i++) b.add(toks[p.n_prefix + i], p.n_prefix + i, {0}, true);
        if (!ctx->decode(b)) {
            r.error = "exactness: a pass of " + std::to_string(n) + " tokens failed";
            return r;
        }
        for (int32_t i = 0; i < n; i++) {
            const float * got = ctx->logits(i);
            if (memcmp(got, ref[i].data(), n_vocab * sizeof(float)) == 0) continue;
            r.n = n;
            r.row = i;
            describe_difference(got, ref[i].data(), n_vocab, r);
            return r;
        }
    }
    return r;
}

argmax_check_result exactness_check_argmax(int32_t n_vocab, bool gpu) {
    argmax_check_result r;
    ggml_backend_dev_t dev = nullptr;
    for (size_t i = 0; i < ggml_backend_dev_count() && !dev && gpu; i++) {
        if (ggml_backend_dev_type(ggml_backend_dev_get(i)) == GGML_BACKEND_DEVICE_TYPE_GPU) dev = ggml_backend_dev_get(i);
    }
    if (!dev) dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    ggml_backend_t be = dev ? ggml_backend_dev_init(dev, nullptr) : nullptr;
    if (!be) {
        r.error = "argmax check: no backend to run it on";
        return r;
    }
    r.backend = ggml_backend_dev_name(dev);
    // rows of few distinct values (ties), with NaNs, infinities, signed zeros and denormals here and there (a
    // GPU's fast-math compares flush denormals); a third of them all denormal; some with a NaN first, some all
    // -inf or all NaN
    const int64_t n = std::max<int32_t>(n_vocab, 1), n_rows = 256;
    std::vector<float> l((size_t) (n * n_rows));
    std::mt19937 rng(11);
    const float nan = NAN, inf = INFINITY;
    for (int64_t row = 0; row < n_rows; row++) {
        float * x = l.data() + row * n;
        const int32_t levels = 1 + (int32_t) (rng() % 6);
        const float scale = row % 3 == 1 ? 1e-40f : 1.0f;
        for (int64_t i = 0; i < n; i++) x[i] = ((float) (rng() % levels) - 2.0f) * scale;
        for (int32_t k = (int32_t) (rng() % 6); k > 0; k--) {
            const float special[] = {nan, -inf, inf, -0.0f, 0.0f, 1e-40f, -1e-40f, 1.4e-45f};
            x[rng() % n] = special[rng() % 8];
        }
        if (row % 11 == 3) x[0] = nan;
        if (row % 13 == 5) std::fill(x, x + n, row % 2 ? -inf : nan);
    }
    ggml_init_params ip = {4 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
    ggml_context * ctx = ggml_init(ip);
    ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n, n_rows);
    ggml_tensor * out = ggml_argmax(ctx, x);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, be);
    std::vector<int32_t> got((size_t) n_rows, -1);
    if (!buf) {
        r.error = "argmax check: no buffer on " + r.backend;
    } else {
        ggml_backend_tensor_set(x, l.data(), 0, ggml_nbytes(x));
        ggml_cgraph * gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, out);
        if (ggml_backend_graph_compute(be, gf) != GGML_STATUS_SUCCESS) {
            r.error = "argmax check: the graph failed on " + r.backend;
        } else {
            ggml_backend_tensor_get(out, got.data(), 0, ggml_nbytes(out));
        }
        ggml_backend_buffer_free(buf);
    }
    ggml_free(ctx);
    ggml_backend_free(be);
    if (!r.error.empty()) return r;
    r.rows = (int32_t) n_rows;
    for (int64_t row = 0; row < n_rows && r.row < 0; row++) {
        const llama_token want = sampling_argmax(l.data() + row * n, (int32_t) n);
        if (got[(size_t) row] != want) r.row = (int32_t) row, r.got = got[(size_t) row], r.want = want;
    }
    return r;
}

} // namespace editspec
