// Context (KV cache + compute) and batch owners over libllama.
#include "editspec/engine.h"
#include "editspec/log.h"
#include "editspec/sampling.h"
#include "upper-state.h"

#include <algorithm>
#include <atomic>
#include <thread>

namespace editspec {

// ----------------------------------------------------------------------------
// batch

batch::batch(int32_t n_tokens_max, int32_t n_seq_max)
    : b_(llama_batch_init(n_tokens_max, 0, n_seq_max)), n_tokens_max_(n_tokens_max), n_seq_max_(n_seq_max) {
    b_.n_tokens = 0;
}

batch::~batch() {
    llama_batch_free(b_);
}

bool batch::add(llama_token token, llama_pos pos, std::span<const llama_seq_id> seq_ids, bool logits) {
    if (b_.n_tokens >= n_tokens_max_ || (int32_t) seq_ids.size() > n_seq_max_ || seq_ids.empty()) {
        return false;
    }
    const int32_t i = b_.n_tokens;
    b_.token[i] = token;
    b_.pos[i] = pos;
    b_.n_seq_id[i] = (int32_t) seq_ids.size();
    for (size_t s = 0; s < seq_ids.size(); s++) {
        b_.seq_id[i][s] = seq_ids[s];
    }
    b_.logits[i] = logits ? 1 : 0;
    b_.n_tokens++;
    return true;
}

// ----------------------------------------------------------------------------
// context

bool kv_cache_type_parse(const std::string & name, ggml_type & out, std::string * error) {
    if (name == "f16") {
        out = GGML_TYPE_F16;
    } else if (name == "q8_0") {
        out = GGML_TYPE_Q8_0;
    } else {
        if (error) *error = "--cache-type '" + name + "': choose f16 (the default) or q8_0 (half the memory)";
        return false;
    }
    return true;
}

std::unique_ptr<context> context_create(const model & m, const context_params & p, std::string * error) {
    engine_init();
    auto fail = [&](const std::string & msg) -> std::unique_ptr<context> {
        if (error) *error = msg;
        return nullptr;
    };
    if (p.n_ctx < 0 || p.n_ctx > (1 << 24)) {
        return fail("context size " + std::to_string(p.n_ctx) + " out of range [0, 16777216]");
    }
    if (p.n_seq_max < 1 || p.n_seq_max > 256) {
        return fail("n_seq_max " + std::to_string(p.n_seq_max) + " out of range [1, 256]");
    }
    if (p.n_ctx > 0 && p.n_seq_max > p.n_ctx) {
        // libllama aborts on this instead of returning an error
        return fail("n_seq_max " + std::to_string(p.n_seq_max) + " exceeds the context size " + std::to_string(p.n_ctx));
    }
    if (p.n_batch < 1 || p.n_ubatch < 1) {
        return fail("batch sizes must be positive (n_batch " + std::to_string(p.n_batch) + ", n_ubatch " +
                    std::to_string(p.n_ubatch) + ")");
    }
    if (p.n_threads < 0 || p.n_threads > 1024) {
        return fail("thread count " + std::to_string(p.n_threads) + " out of range [0, 1024]");
    }
    if (p.type_k != p.type_v && (ggml_is_quantized(p.type_k) || ggml_is_quantized(p.type_v))) {
        return fail(std::string("KV cache types ") + ggml_type_name(p.type_k) + " and " + ggml_type_name(p.type_v) +
                    ": a quantized cache takes one type for K and V (the kernels that keep it exact)");
    }
    if (ggml_is_quantized(p.type_k)) {
        // libllama needs flash attention for a quantized V; the exactness of a Q8_0 cache is the patched
        // CPU kernels' (docs/exactness.md), not measured on a GPU's
        if (!p.flash_attn) {
            return fail(std::string("a ") + ggml_type_name(p.type_k) + " KV cache needs flash attention (drop --no-flash-attn)");
        }
        if (engine_offloads()) {
            return fail(std::string("a ") + ggml_type_name(p.type_k) + " KV cache is exact on the CPU only: use --cache-type f16 "
                        "with GPU layers");
        }
    }
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = p.n_ctx;
    cp.n_batch = p.n_batch;
    cp.n_ubatch = std::min(p.n_ubatch, p.n_batch);
    cp.n_seq_max = p.n_seq_max;
    const int32_t n_threads = p.n_threads > 0 ? p.n_threads : (int32_t) std::max(1u, std::thread::hardware_concurrency());
    cp.n_threads = n_threads;
    cp.n_threads_batch = n_threads;
    // on the CPU flash attention breaks exactness; on the GPU in the exact mode it is what keeps it
    const bool flash_attn = p.flash_attn || engine_gpu_exact_attention();
    cp.flash_attn_type = flash_attn ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.kv_unified = p.kv_unified;
    cp.type_k = p.type_k;
    cp.type_v = p.type_v;
    cp.no_perf = true;
    cp.embeddings = false;
    // a recurrent state drops a rejected draft by going back to a snapshot (libllama clamps this to 0 for
    // an architecture it cannot roll back: context::rollback_max)
    if (m.facts().recurrent) cp.n_rs_seq = (uint32_t) std::clamp(p.rs_snapshots, 0, CONTEXT_RS_ROLLBACK);

    std::unique_ptr<context> c(new context(m));
    // a cancel flag cuts a long decode short (between graph nodes)
    cp.abort_callback = [](void * data) { return static_cast<const context *>(data)->cancelled(); };
    cp.abort_callback_data = c.get();
    c->ctx_ = llama_init_from_model(m.get(), cp);
    if (!c->ctx_) {
        return fail("failed to create a context for '" + m.path() + "' (n_ctx " + std::to_string(p.n_ctx) +
                    "); EDITSPEC_LOG=info shows libllama's reason");
    }
    c->n_vocab_ = m.facts().n_vocab;
    c->params_ = p;
    c->params_.flash_attn = flash_attn; // what runs (reports, the cost model's cache key)
    return c;
}

context::~context() {
    if (step_) {
        step_->view_forget(view_out_);
    } else if (ctx_) {
        llama_free(ctx_);
    }
}

std::unique_ptr<context> context_view(context & shared, view_host & host, llama_seq_id seq, int32_t n_ctx,
                                      const context_params & per_view) {
    std::unique_ptr<context> c(new context(shared.owner()));
    c->ctx_ = shared.get();
    c->step_ = &host;
    c->seq_ = seq;
    c->n_vocab_ = shared.n_vocab_;
    c->n_ctx_view_ = n_ctx;
    c->params_ = per_view;
    c->params_.n_ctx = n_ctx;
    c->params_.n_seq_max = 1;
    c->params_.kv_unified = false;
    c->params_.flash_attn = shared.params().flash_attn;
    return c;
}

step_load context::step_others() const {
    return step_ ? step_->view_others(seq_) : step_load{};
}

llama_seq_id context::seq_of(llama_seq_id seq) const {
    if (!step_) return seq;
    ES_ASSERT(seq <= 0 && "a view of a step engine has sequence 0 only");
    return seq_;
}

std::unique_lock<std::mutex> context::lock_kv() const {
    return step_ ? std::unique_lock<std::mutex>(step_->view_kv_mutex()) : std::unique_lock<std::mutex>();
}

bool context::decode(const batch & b, bool argmax) {
    if (b.size() == 0) {
        return true;
    }
    if (cancelled()) {
        return false;
    }
    // a token written into sequence 0 inside the cached prompt ends the cache there
    const llama_batch & lb = b.get();
    for (int32_t i = 0; i < lb.n_tokens && !cached_.empty(); i++) {
        for (int32_t k = 0; k < lb.n_seq_id[i]; k++) {
            if (lb.seq_id[i][k] == 0 && lb.pos[i] < (llama_pos) cached_.size()) {
                cached_.resize(lb.pos[i]);
                stale_.resize(lb.pos[i]);
            }
        }
    }
    argmax_last_ = false;
    if (model_.facts().recurrent) {
        std::vector<int32_t> n((size_t) std::max(n_seq_max(), 1), 0);
        for (int32_t i = 0; i < lb.n_tokens; i++) {
            for (int32_t k = 0; k < lb.n_seq_id[i]; k++) {
                if (lb.seq_id[i][k] >= 0 && lb.seq_id[i][k] < (llama_seq_id) n.size()) n[lb.seq_id[i][k]]++;
            }
        }
        rs_last_.resize(n.size(), 0);
        for (size_t q = 0; q < n.size(); q++) {
            if (n[q] > 0) rs_last_[q] = n[q]; // (set before the decode: a failed one leaves no state to go back to)
        }
    }
    if (step_) {
        const bool ok = step_->view_decode(seq_, b.get(), cancel_, view_out_, argmax && engine_argmax_outputs());
        argmax_last_ = ok && !view_out_.top.empty();
        return ok;
    }
    // llama_decode returns once a GPU's kernels are queued; a pass with outputs ends where they are read,
    // which its caller does next. Waiting here puts the device's time in the decode's: a caller's timing of
    // decode() is the pass's, and the time between decodes the host's own (bench's "other ms"). A prompt
    // chunk without outputs does not wait: the next chunk's launch overlaps it
    bool outputs = lb.logits == nullptr;
    for (int32_t i = 0; i < lb.n_tokens && !outputs; i++) outputs = lb.logits[i] != 0;
    // set for every decode (a flag in libllama's context: a step engine's decodes set it too)
    const bool am = argmax && outputs && engine_argmax_outputs();
    llama_set_output_argmax(ctx_, am);
    int32_t ret = 0;
    auto run = [&] {
        ret = llama_decode(ctx_, b.get());
        if (ret == 0 && outputs) llama_synchronize(ctx_);
        clear_upper_state();
    };
    if (compute_) {
        compute_(run);
    } else {
        run();
    }
    if (ret == 2 && cancelled()) {
        return false; // aborted: the request was cancelled
    }
    if (ret != 0) {
        ES_LOG_ERROR("%s: llama_decode failed with status %d (%d tokens; 1 = no KV slot, context full)\n",
                     __func__, ret, b.size());
        return false;
    }
    if (hook_) hook_(b.get());
    argmax_last_ = am;
    return true;
}

const float * context::logits(int32_t i) const {
    ES_ASSERT(!argmax_last_ && "the last decode handed back argmax outputs, not logits");
    if (step_) {
        ES_ASSERT(i >= 0 && i < (int32_t) view_out_.row.size() && view_out_.row[i]);
        return view_out_.row[i];
    }
    return llama_get_logits_ith(ctx_, i);
}

llama_token context::argmax(int32_t i) const {
    if (!argmax_last_) return sampling_argmax(logits(i), n_vocab_);
    if (step_) {
        ES_ASSERT(i >= 0 && i < (int32_t) view_out_.top.size() && view_out_.top[i] >= 0);
        return view_out_.top[i];
    }
    const llama_token t = llama_get_argmax_ith(ctx_, i);
    ES_ASSERT(t >= 0 && "a row without outputs");
    return t;
}

// the cached prompt (sequence 0, positions 0 .. n-1) loses what an operation on sequence 0 touches
void context::cache_cut(llama_seq_id seq, llama_pos p0) {
    if (seq == 0 || seq < 0) {
        cached_.resize(std::min(cached_.size(), (size_t) std::max<llama_pos>(p0, 0)));
        stale_.resize(cached_.size());
    }
}

void context::set_cached_prompt(std::span<const llama_token> t, std::span<const uint8_t> stale) {
    if (stale.size() == t.size()) {
        stale_.assign(stale.begin(), stale.end());
    } else {
        size_t common = 0;
        while (common < cached_.size() && common < t.size() && cached_[common] == t[common]) common++;
        stale_.resize(common);
        stale_.resize(t.size(), 0);
    }
    cached_.assign(t.begin(), t.end());
}

bool context::kv_rm(llama_seq_id seq, llama_pos p0, llama_pos p1) {
    if (model_.facts().recurrent && seq >= 0) {
        // a recurrent state holds every token it read: only its last tokens leave it, and only those of
        // the last decode that carried this sequence (its snapshots)
        const llama_pos pm = kv_pos_max(seq);
        if (p0 > 0 && p0 <= pm) {
            const int32_t last = (size_t) seq < rs_last_.size() ? rs_last_[seq] : 0;
            if ((p1 >= 0 && p1 <= pm) || pm - p0 + 1 >= last) return false;
            rs_last_[seq] = 0; // one rollback a decode
        }
    }
    cache_cut(seq, p0);
    auto lock = lock_kv();
    return llama_memory_seq_rm(llama_get_memory(ctx_), seq_of(seq), p0, p1);
}

void context::kv_add(llama_seq_id seq, llama_pos p0, llama_pos p1, llama_pos delta) {
    cache_cut(seq, p0);
    auto lock = lock_kv();
    llama_memory_seq_add(llama_get_memory(ctx_), seq_of(seq), p0, p1, delta);
}

void context::kv_cp(llama_seq_id src, llama_seq_id dst, llama_pos p0, llama_pos p1) {
    cache_cut(dst, p0);
    auto lock = lock_kv();
    llama_memory_seq_cp(llama_get_memory(ctx_), seq_of(src), seq_of(dst), p0, p1);
}

void context::kv_keep(llama_seq_id seq) {
    if (seq != 0) cached_.clear(), stale_.clear();
    if (step_) {
        seq_of(seq); // a view's stream holds its sequence alone
        return;
    }
    llama_memory_seq_keep(llama_get_memory(ctx_), seq);
}

void context::kv_clear() {
    cached_.clear();
    stale_.clear();
    auto lock = lock_kv();
    if (step_) {
        llama_memory_seq_rm(llama_get_memory(ctx_), seq_, -1, -1);
        return;
    }
    llama_memory_clear(llama_get_memory(ctx_), true);
}

seq_restart::seq_restart(context & ctx, llama_seq_id seq, llama_pos n_prefix) : ctx(ctx), seq(seq), n_prefix(n_prefix) {
    if (!ctx.owner().facts().recurrent || n_prefix == 0) return;
    const llama_state_seq_flags partial = LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY; // the attention's cells stay
    saved.resize(llama_state_seq_get_size_ext(ctx.get(), seq, partial));
    saved.resize(llama_state_seq_get_data_ext(ctx.get(), saved.data(), saved.size(), seq, partial));
}

bool seq_restart::restore() {
    if (!saved.empty() && llama_state_seq_set_data_ext(ctx.get(), saved.data(), saved.size(), seq,
                                                       LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY) != saved.size()) {
        return false;
    }
    return ctx.kv_rm(seq, n_prefix, -1); // (a restored recurrent state holds nothing past the prefix)
}

bool context_warm_up(context & ctx) {
    const llama_vocab * vocab = ctx.owner().vocab();
    llama_token t = llama_vocab_bos(vocab);
    if (t == LLAMA_TOKEN_NULL) t = 0;
    batch b(1, 1);
    b.add(t, 0, {0}, true);
    const bool ok = ctx.decode(b);
    ctx.kv_clear();
    return ok;
}

llama_pos context::kv_pos_max(llama_seq_id seq) const {
    auto lock = lock_kv();
    return llama_memory_seq_pos_max(llama_get_memory(ctx_), seq_of(seq));
}

bool context::can_shift() const {
    return llama_memory_can_shift(llama_get_memory(ctx_));
}

size_t context::state_size(bool partial) {
    auto lock = lock_kv();
    return llama_state_seq_get_size_ext(ctx_, seq_of(0), partial ? LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY : 0);
}

size_t context::state_get(uint8_t * dst, size_t size, bool partial) {
    auto lock = lock_kv();
    return llama_state_seq_get_data_ext(ctx_, dst, size, seq_of(0), partial ? LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY : 0);
}

size_t context::state_set(const uint8_t * src, size_t size, bool partial) {
    auto lock = lock_kv();
    return llama_state_seq_set_data_ext(ctx_, src, size, seq_of(0), partial ? LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY : 0);
}

int32_t context::n_ctx() const { return step_ ? n_ctx_view_ : (int32_t) llama_n_ctx(ctx_); }

int32_t context::rollback_max() const {
    return model_.facts().recurrent ? (int32_t) llama_n_rs_seq(ctx_) : INT32_MAX;
}
int32_t context::n_batch() const { return step_ ? params_.n_batch : (int32_t) llama_n_batch(ctx_); }
int32_t context::n_seq_max() const { return step_ ? 1 : (int32_t) llama_n_seq_max(ctx_); }
int32_t context::n_threads() const { return llama_n_threads(ctx_); }

bool context_prefill(context & ctx, batch & b, std::span<const llama_token> tokens, llama_pos pos0, llama_seq_id seq) {
    const int32_t n = (int32_t) tokens.size();
    const int32_t chunk = std::min(ctx.n_batch(), b.capacity());
    for (int32_t i0 = 0; i0 < n; i0 += chunk) {
        b.clear();
        const int32_t i1 = std::min(n, i0 + chunk);
        for (int32_t i = i0; i < i1; i++) {
            b.add(tokens[i], pos0 + i, {seq}, i == n - 1);
        }
        if (!ctx.decode(b)) {
            return false;
        }
    }
    return true;
}

// ----------------------------------------------------------------------------
// tree passes

tree_pass context_tree_batch(context & ctx, batch & b, std::span<const llama_token> pending, llama_pos n_past,
                             std::span<const llama_token> tokens, std::span<const int32_t> parents) {
    tree_pass tp;
    tp.n_past = n_past;
    tp.n_pending = (int32_t) pending.size();
    tp.n_nodes = (int32_t) tokens.size();
    const int32_t n = tp.n_nodes;
    std::vector<bool> has_child(n, false);
    std::vector<int32_t> depth(n, 0);
    for (int32_t i = 0; i < n; i++) {
        depth[i] = parents[i] < 0 ? 1 : depth[parents[i]] + 1;
        if (parents[i] >= 0) has_child[parents[i]] = true;
    }
    // sequence ids per row: 0 alone for a chain; else path j (leaf j-1) is sequence j
    std::vector<std::vector<llama_seq_id>> seqs(n, std::vector<llama_seq_id>{0});
    std::vector<llama_seq_id> root_seqs = {0};
    for (int32_t i = 0; i < n; i++) tp.n_leaves += has_child[i] ? 0 : 1;
    if (tp.n_leaves > 1) {
        for (auto & s : seqs) s.clear();
        llama_seq_id s = 0;
        for (int32_t leaf = 0; leaf < n; leaf++) {
            if (has_child[leaf]) continue;
            s++;
            root_seqs.push_back(s);
            for (int32_t i = leaf; i >= 0; i = parents[i]) seqs[i].push_back(s);
            ctx.kv_cp(0, s, -1, -1);
        }
    }
    b.clear();
    for (int32_t i = 0; i < tp.n_pending; i++) {
        ES_ASSERT(b.add(pending[i], n_past + i, root_seqs, i == tp.n_pending - 1));
    }
    for (int32_t i = 0; i < n; i++) {
        ES_ASSERT(b.add(tokens[i], tp.root_pos() + depth[i], seqs[i], true));
    }
    return tp;
}

bool context_tree_keep(context & ctx, const tree_pass & tp, int32_t n_kept) {
    if (tp.n_leaves > 1) {
        // rows 0 .. n_kept-1 are the first path's, sequence 1
        if (n_kept > 0) ctx.kv_cp(1, 0, tp.root_pos() + 1, tp.root_pos() + 1 + n_kept);
        for (llama_seq_id s = 1; s <= tp.n_leaves; s++) ctx.kv_rm(s, -1, -1);
        return true;
    }
    return tp.n_nodes <= n_kept || ctx.kv_rm(0, tp.root_pos() + 1 + n_kept, -1);
}

} // namespace editspec
