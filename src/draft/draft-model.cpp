// Draft-model drafter: greedy γ-token drafts from a small model with the target's vocabulary.
//
// ref: EfficientEdit §III-B, Generate phase; Leviathan et al., "Fast Inference from
//      Transformers via Speculative Decoding" (2023); llama.cpp examples/speculative-simple and
//      common/speculative.cpp (common_speculative_gen_draft), pinned commit de3ff81.
//
// The draft cache (sequence 0 of the drafter's own context) and its record, after a proposal of
// γ = 4 from a history of H tokens (keep_drafts on):
//
//   pos     0 .. H-2   H-1      H    H+1   H+2
//   cache   t0 .. ...  t(H-1)   d1   d2    d3          d4 is never decoded
//   pred    -  .. -    d1       d2   d3    d4          greedy prediction after the row, when read
//
// Next step the target committed, say, d1 d2 x: the common prefix of record and history ends after
// d2, so d3 goes (seq_rm from H+2) and only x is decoded (its logits give the next first draft).
#include "editspec/clock.h"
#include "editspec/drafters.h"
#include "editspec/draft-model.h"
#include "editspec/log.h"
#include "editspec/sampling.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>

namespace editspec {

// the greedy choice after a decoded row and its softmax probability (outside the anonymous namespace:
// model_drafter::impl, which has external linkage, holds a vector of them)
struct greedy_prediction {
    llama_token token = LLAMA_TOKEN_NULL; // LLAMA_TOKEN_NULL = the row's logits were not read
    float       p     = 0.0f;
};

static greedy_prediction predict_greedy(const float * logits, int32_t n_vocab) {
    greedy_prediction r;
    if (!logits || n_vocab <= 0) {
        return r;
    }
    const int32_t best = sampling_argmax(logits, n_vocab);
    // softmax probability of the argmax: 1 / sum exp(l - max), summed in 8 float lanes (each term
    // <= 1; glibc expf: a vectorised polynomial was no faster)
    const float mx = logits[best];
    float lanes[8] = {};
    int32_t v = 0;
    for (; v + 8 <= n_vocab; v += 8) {
        for (int32_t k = 0; k < 8; k++) lanes[k] += std::exp(logits[v + k] - mx);
    }
    double sum = 0.0;
    for (; v < n_vocab; v++) sum += std::exp(logits[v] - mx);
    for (float x : lanes) sum += x;
    r.token = best;
    r.p     = (float) (1.0 / sum);
    return r;
}

struct model_drafter::impl {
    const model & draft_model;
    std::unique_ptr<context> owned; // the drafter's own context, null when it decodes in a lent one
    context * ctx = nullptr;
    batch b;
    int32_t n_vocab = 0;

    token_vec               cached; // [n_cached] token at each position of the draft cache
    std::vector<greedy_prediction> pred;   // [n_cached] greedy prediction after each position

    // a recurrent draft model (Qwen3.5's small ones): its state cannot drop the drafts it decoded one
    // pass each, so the state after the committed history is saved (checkpoint) and loaded back
    // (truncate) before the tokens the target committed since are decoded in one pass
    const bool recurrent;
    std::vector<uint8_t> ckpt; // the state after cached[0 .. ckpt_n)
    size_t ckpt_n = 0;         // 0 = none

    impl(const model & m, std::unique_ptr<context> own, context * c)
        : draft_model(m), owned(std::move(own)), ctx(owned ? owned.get() : c), b(ctx->n_batch(), 1),
          n_vocab(m.facts().n_vocab), recurrent(m.facts().recurrent) {}

    void checkpoint() {
        if (!recurrent) return;
        ckpt.resize(ctx->state_size(true));
        ckpt.resize(ctx->state_get(ckpt.data(), ckpt.size(), true));
        ckpt_n = ckpt.empty() ? 0 : cached.size();
    }

    // drops positions [p, n_cached) from the cache and the record; false when the cache refused a
    // partial removal (then it is cleared). A recurrent state goes back to its checkpoint where that is
    // at or before p: the record then ends there, before p, and the caller decodes the rest
    bool truncate(size_t p) {
        if (p >= cached.size()) {
            return true;
        }
        if (recurrent) {
            // the recurrent state back to the checkpoint, then the attention's cells past it
            const bool ok = ckpt_n > 0 && ckpt_n <= p && ctx->state_set(ckpt.data(), ckpt.size(), true) == ckpt.size() &&
                            ctx->kv_rm(0, (llama_pos) ckpt_n, -1);
            if (!ok) reset();
            cached.resize(std::min(cached.size(), ckpt_n));
            pred.resize(cached.size());
            return ok;
        }
        bool ok = ctx->kv_rm(0, (llama_pos) p, -1);
        if (!ok) {
            ctx->kv_clear();
            p = 0;
        }
        cached.resize(p);
        pred.resize(p);
        return ok;
    }

    void reset() {
        ctx->kv_clear();
        cached.clear();
        pred.clear();
        ckpt_n = 0;
    }
};

model_drafter::~model_drafter() {
    if (impl_ && kept_) *kept_ = impl_->cached; // what the lent context holds, for the next request's drafter
}

int32_t model_drafter::n_cached() const {
    return impl_ ? (int32_t) impl_->cached.size() : 0;
}

llama_pos model_drafter::cache_pos_max() const {
    return impl_ ? impl_->ctx->kv_pos_max(0) : -1;
}

int32_t model_drafter::n_ctx() const {
    return impl_ ? impl_->ctx->n_ctx() : 0;
}

std::unique_ptr<model_drafter> model_drafter_create(const model & target, const model & draft,
                                                    const draft_model_params & params, std::string * error,
                                                    context * lent, token_vec * kept) {
    auto fail = [&](const std::string & msg) -> std::unique_ptr<model_drafter> {
        if (error) *error = msg;
        return nullptr;
    };
    std::string why;
    if (!model_can_draft_for(target, draft, &why)) {
        return fail(why);
    }
    if (params.gamma < 1 || params.gamma > 255) {
        return fail("draft model: gamma " + std::to_string(params.gamma) + " out of range [1, 255]");
    }
    if (!(params.p_min >= 0.0f && params.p_min <= 1.0f)) {
        return fail("draft model: p_min " + std::to_string(params.p_min) + " out of range [0, 1]");
    }
    std::unique_ptr<context> ctx;
    if (lent) {
        if (&lent->owner() != &draft) {
            return fail("draft model '" + draft.path() + "': the context lent to the drafter is on '" +
                        lent->owner().path() + "'");
        }
    } else {
        context_params cp;
        cp.n_ctx      = params.n_ctx;
        cp.n_threads  = params.n_threads;
        cp.n_seq_max  = 1;
        cp.flash_attn = false;
        cp.kv_unified = true;
        std::string err;
        ctx = context_create(draft, cp, &err);
        if (!ctx) {
            return fail("draft model '" + draft.path() + "': " + err);
        }
    }
    std::unique_ptr<model_drafter> d(new model_drafter());
    d->impl_ = std::make_unique<model_drafter::impl>(draft, std::move(ctx), lent);
    if (lent && kept) {
        d->kept_ = kept;
        // a record that the context does not hold (longer than its cache) is dropped, and the context cleared
        if ((int64_t) kept->size() != (int64_t) lent->kv_pos_max(0) + 1) {
            kept->clear();
            lent->kv_clear();
        }
    } else if (lent) {
        lent->kv_clear();
    }
    d->params_ = params;
    ES_LOG_INFO("%s: draft model '%s' (%s), gamma %d, n_ctx %d, threads %d, p_min %.3f, keep_drafts %d%s\n", __func__,
                draft.path().c_str(), draft.facts().desc.c_str(), params.gamma, d->impl_->ctx->n_ctx(),
                d->impl_->ctx->n_threads(), params.p_min, params.keep_drafts ? 1 : 0, lent ? ", lent context" : "");
    return d;
}

// the prompt is decoded at the first proposal (catch_up), not here: EfficientEdit asks the draft model
// only after a rejection, and an edit that Reuse drafts to its end never needs it (its prefill was ~20 ms of
// a 190 ms edit on the shipped pair)
void model_drafter::begin(std::span<const llama_token> prompt) {
    (void) prompt;
    if (kept_ && !kept_->empty() && !failed_) {
        // the lent context holds an earlier request's tokens: the first proposal keeps their common
        // prefix with its history (catch_up); their predictions were not kept and are decoded again
        impl_->cached = *kept_;
        impl_->pred.assign(impl_->cached.size(), greedy_prediction{});
        kept_->clear(); // until this drafter ends, its record is the truth
    } else {
        impl_->reset();
        if (kept_) kept_->clear();
    }
    failed_ = false;
    backoff_ = {};
}

void model_drafter::accept(std::span<const llama_token> accepted) {}

// decodes tokens after the cached ones (logits on the last row only) and records them
bool model_drafter::prefill(std::span<const llama_token> tokens) {
    impl & s = *impl_;
    const int32_t chunk = std::min(s.ctx->n_batch(), s.b.capacity());
    n_passes_ += ((int64_t) tokens.size() + chunk - 1) / chunk;
    if (!context_prefill(*s.ctx, s.b, tokens, (llama_pos) s.cached.size(), 0)) {
        return false;
    }
    n_decoded_ += (int64_t) tokens.size();
    s.cached.insert(s.cached.end(), tokens.begin(), tokens.end());
    s.pred.resize(s.cached.size()); // predictions not read yet
    return true;
}

void model_drafter::fail(const char * what, int64_t n_history) {
    if (!logged_) {
        ES_LOG_WARN("model_drafter: draft model '%s': %s failed at history length %lld; no drafts until the "
                    "next request\n", impl_->draft_model.path().c_str(), what, (long long) n_history);
        logged_ = true;
    }
    failed_ = true;
    impl_->reset();
}

// Brings the cache in step with `history`: keeps the common prefix of the record and the history,
// decodes the rest; afterwards cached[0 .. H) == history and pred[H-1] is known (cached may run on
// with earlier drafts). False after a failed decode.
bool model_drafter::catch_up(std::span<const llama_token> history) {
    impl & s = *impl_;
    const size_t H = history.size();
    size_t q = 0;
    const size_t lim = std::min(s.cached.size(), H);
    while (q < lim && s.cached[q] == history[q]) q++;
    if (q == H && s.pred[H - 1].token == LLAMA_TOKEN_NULL) {
        q = H - 1; // the last committed row's logits were never read: decode it again
    }
    // a recurrent state holds no drafts past the history: what is drafted next is decoded from its end
    if (q == H && !(s.recurrent && s.cached.size() > H)) {
        return true;
    }
    // drop everything from the first difference and decode history[q .. H), logits on the last row
    s.truncate(q);
    q = s.cached.size(); // 0 when the cache refused a partial removal (a recurrent state: its checkpoint)
    if (q < H) {
        if (!prefill(history.subspan(q))) {
            fail("decode of the committed tokens", (int64_t) H);
            return false;
        }
        s.pred[H - 1] = predict_greedy(s.ctx->logits(s.b.size() - 1), s.n_vocab);
    }
    s.checkpoint();
    return true;
}

// Drafts greedily after history[0 .. H), one token per step, up to n; a kept draft that matches
// the next prediction costs no pass.
void model_drafter::draft_greedy(size_t H, int32_t n, token_vec & out, std::vector<float> & p) {
    impl & s = *impl_;
    size_t pos = H; // position of the next draft token
    float chain = 1.0f; // the drafted tokens' probabilities multiplied
    for (int32_t i = 0; i < n; i++) {
        const greedy_prediction & pr = s.pred[pos - 1];
        if (pr.token == LLAMA_TOKEN_NULL || pr.p < params_.p_min) {
            break;
        }
        out.push_back(pr.token);
        p.push_back(pr.p);
        chain *= pr.p;
        if (i + 1 == n || s.draft_model.is_eog(pr.token)) {
            break;
        }
        const bool known = pos < s.cached.size() && s.cached[pos] == pr.token && s.pred[pos].token != LLAMA_TOKEN_NULL;
        if (!known && chain < params_.chain_p_min) {
            break; // the next token costs a pass the chain is unlikely to repay
        }
        if (pos < s.cached.size() && s.cached[pos] == pr.token && s.pred[pos].token != LLAMA_TOKEN_NULL) {
            pos++; // decoded before, prediction known
            continue;
        }
        const llama_token t = pr.token; // pr refers into pred, which truncate() resizes
        s.truncate(pos);
        if (s.cached.size() != pos) {
            fail("partial KV removal", (int64_t) H);
            return;
        }
        s.b.clear();
        s.b.add(t, (llama_pos) pos, {0}, true);
        n_passes_++;
        if (!s.ctx->decode(s.b)) {
            fail("draft decode", (int64_t) H);
            return;
        }
        n_decoded_++;
        s.cached.push_back(t);
        s.pred.push_back(predict_greedy(s.ctx->logits(0), s.n_vocab));
        pos++;
    }
}

// Brings the cache in step with `history`, then drafts up to n tokens (p: their probabilities).
void model_drafter::draft_into(std::span<const llama_token> history, int32_t n, token_vec & out,
                               std::vector<float> & p) {
    out.clear();
    p.clear();
    if (failed_ || history.empty() || n <= 0) {
        return;
    }
    const int64_t H = (int64_t) history.size();
    // positions 0 .. H-1 hold the history, drafts 1 .. n-1 go to H .. H+n-2 (the last is not decoded)
    n = (int32_t) std::min<int64_t>(n, (int64_t) impl_->ctx->n_ctx() - H + 1);
    if (n <= 0) {
        return;
    }
    const auto t0 = clock_type::now();
    if (catch_up(history)) {
        draft_greedy((size_t) H, n, out, p);
    }
    if (failed_) {
        out.clear();
        p.clear();
    } else if (!params_.keep_drafts) {
        impl_->truncate((size_t) H);
    }
    n_drafted_ += (int64_t) out.size();
    draft_ms_ += ms_since(t0);
}

token_vec model_drafter::draft(std::span<const llama_token> history, int32_t n, std::vector<float> * p_out) {
    token_vec out;
    std::vector<float> p;
    draft_into(history, n, out, p);
    if (p_out) *p_out = std::move(p);
    return out;
}

void model_drafter::propose(std::span<const llama_token> history, draft_tree & tree, int32_t budget) {
    if (budget <= 0 || backoff_.skip()) {
        return;
    }
    token_vec out;
    std::vector<float> p;
    draft_into(history, std::min(params_.gamma, budget), out, p);
    backoff_.proposed(!out.empty());
    if (out.empty()) {
        return;
    }
    const int32_t max_nodes = (int32_t) std::min<int64_t>((int64_t) tree.size() + budget, INT32_MAX);
    int32_t at = -1;
    for (size_t i = 0; i < out.size(); i++) {
        if (tree.find_child(at, out[i]) < 0 && tree.size() >= max_nodes) break;
        at = tree.add(at, out[i], DRAFT_SOURCE_MODEL, draft_model_conf(p[i]));
    }
}

uint8_t draft_model_conf(float p) {
    return (uint8_t) (p >= 0.9f ? 3 : p >= 0.6f ? 2 : p >= 0.3f ? 1 : 0);
}

// the table's row (drafters.h)
std::span<const drafter_desc> model_drafters() {
    static const drafter_desc rows[] = {
        {"sd", "a draft model (--draft-model) drafts gamma = 7 tokens greedily", DRAFTER_NEEDS_DRAFT_MODEL,
         VERIFY_POLICY_GREEDY, DRAFTER_LOSSY_NOT_REUSE,
         [](const drafter_desc &, const drafter_inputs & in, std::string * error) -> std::unique_ptr<drafter_i> {
             return model_drafter_create(*in.target, *in.draft_model, in.draft_params, error, in.draft_ctx, in.draft_kept);
         },
         // auto's last, only when its pass is much cheaper than the target's: the shipped pair (a 4.5M
         // draft for a 17M target, 0.26) lost to no draft model on every task (sd 0.4-0.9x of ar on
         // CanItEdit edits, docs/results/issue38-auto); real pairs (0.5B for 7B) are near 0.07
         5, [](const drafter_inputs & in) { return 5 * in.draft_model->facts().n_params <= in.target->facts().n_params; }},
    };
    return rows;
}

} // namespace editspec
