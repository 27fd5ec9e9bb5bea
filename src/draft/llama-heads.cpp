// llama.cpp's model-native drafters (common/speculative.cpp at the pin) as editspec drafters: a model's
// own multi-token-prediction head (its nextn layers; llama-server --spec-type draft-mtp).
//
//     method name        llama.cpp type   defaults (llama-server's)
//     llama-draft-mtp    draft-mtp        --head-max 3 tokens a pass, --head-p-min 0
//     efficientedit-mtp  EfficientEdit with the head as its draft model: Reuse where the original holds,
//                        the head where Reuse is rejected, verified greedily
//
// The head reads the target's hidden state of every token it decoded, so it is driven as llama-server
// drives it: a second llama_context on the same model (LLAMA_CONTEXT_TYPE_MTP, its KV holds the nextn
// layers) that sees every batch the target decodes (context::set_decode_hook), prompt chunks included.
// Its KV mirrors the target's sequence 0: the draft region is removed after each draft, the rejected
// rows after each pass. It needs a context of its own (not a batched server's view) and chains on
// sequence 0, which greedy verification sends; a batch it cannot follow (a tree, another sequence, a
// gap) ends its drafting for the request, which costs speed and never an answer.
#include "editspec/clock.h"
#include "editspec/drafters.h"
#include "editspec/efficientedit.h"
#include "editspec/log.h"
#include "editspec/reuse.h"

#if EDITSPEC_HAVE_LLAMA_COMMON
#include "common.h"
#include "speculative.h"

// llama.cpp's staging API (src/llama-ext.h, not installed): common_speculative turns the target's
// hidden-state output on and nothing turns it off; a context that outlives the head turns it off
LLAMA_API void llama_set_embeddings_nextn(struct llama_context * ctx, bool value, bool masked);
#endif

#include <algorithm>

namespace editspec {

#if EDITSPEC_HAVE_LLAMA_COMMON

namespace {

class mtp_drafter : public drafter_i {
public:
    mtp_drafter(context & tgt, llama_context * dft, common_speculative * spec)
        : tgt_(tgt), dft_(dft), spec_(spec) {
        tgt_.set_decode_hook([this](const llama_batch & b) { seen(b); });
    }
    ~mtp_drafter() override {
        // what llama-server's common_speculative_print_stats says as dur(g): beside it, the same head's cost
        ES_LOG_INFO("llama-draft-mtp: %lld drafts in %.3f ms (%.3f ms a draft), %lld target batches followed in %.3f ms\n",
                    (long long) n_drafts_, t_draft_ms_, n_drafts_ ? t_draft_ms_ / (double) n_drafts_ : 0.0,
                    (long long) n_seen_, t_seen_ms_);
        tgt_.set_decode_hook({});
        common_speculative_free(spec_);
        llama_free(dft_);
        llama_set_embeddings_nextn(tgt_.get(), false, false);
    }

    const char * name() const override { return "llama-draft-mtp"; }
    uint8_t source() const override { return DRAFT_SOURCE_MODEL; }

    void begin(std::span<const llama_token> prompt) override {
        const size_t n = prompt.empty() ? 0 : prompt.size() - 1;
        common_speculative_begin(spec_, 0, llama_tokens(prompt.begin(), prompt.begin() + n));
        // common_speculative_accept takes a kept row only once the head has drafted; draft once here,
        // after the prompt, so that a pass whose tokens came from another drafter (Reuse) can be kept
        if (!prompt.empty() && !broken_) draft_at(prompt.back(), (llama_pos) prompt.size() - 1, 1, nullptr);
    }

    void propose(std::span<const llama_token> history, draft_tree & tree, int32_t budget) override {
        if (broken_ || history.empty() || budget < 1 || backoff_.skip()) return;
        // the head drafts after the last token the target's KV holds: one pending token, as a chain
        // pass leaves it
        const llama_pos pos0 = (llama_pos) history.size() - 1;
        if (pos0 != kv_end()) return;
        prompt_.assign(history.begin(), history.end() - 1);
        draft_at(history.back(), pos0, budget, &prompt_);
        const int32_t before = tree.size();
        if (!draft_.empty()) {
            const int32_t max_nodes = (int32_t) std::min<int64_t>((int64_t) tree.size() + budget, INT32_MAX);
            tree.add_path(-1, draft_, DRAFT_SOURCE_MODEL, max_nodes);
        }
        backoff_.proposed(tree.size() > before);
    }

    void sized(const draft_tree & sent) override { backoff_.sized(sent, DRAFT_SOURCE_MODEL); }

    void accept(std::span<const llama_token>) override {
        if (broken_ || last_pos0_ < 0) return;
        // the h row of the last token the target kept pairs with the next batch's first token; the
        // head's KV keeps what the target's does
        const llama_pos end = kv_end();
        const int32_t row = end - 1 - last_pos0_;
        if (row < 0 || row >= last_rows_) return stop("the target kept a row outside the last batch");
        common_speculative_accept(spec_, 0, (uint16_t) std::min<int32_t>(row, UINT16_MAX));
        llama_memory_seq_rm(llama_get_memory(dft_), 0, end, -1);
    }

private:
    // the target's sequence 0 holds positions [0, kv_end())
    llama_pos kv_end() const { return tgt_.kv_pos_max(0) + 1; }

    void draft_at(llama_token last, llama_pos pos0, int32_t n_max, const llama_tokens * prompt) {
        const auto t0 = clock_type::now();
        draft_.clear();
        static const llama_tokens none;
        common_speculative_get_draft_params(spec_, 0) = {
            /* .drafting = */ true,
            /* .n_max    = */ n_max,
            /* .pos0     = */ pos0,
            /* .id_last  = */ last,
            /* .prompt   = */ prompt ? prompt : &none,
            /* .result   = */ &draft_,
        };
        common_speculative_draft(spec_);
        // the draft's cells go: the target's pass decodes those positions again, with its real states
        llama_memory_seq_rm(llama_get_memory(dft_), 0, pos0, -1);
        t_draft_ms_ += ms_since(t0);
        n_drafts_++;
    }

    // every batch the target decoded: the head decodes the same tokens beside the target's states
    void seen(const llama_batch & b) {
        if (broken_ || b.n_tokens <= 0 || !b.token) return;
        const llama_pos start = llama_memory_seq_pos_max(llama_get_memory(dft_), 0) + 1;
        for (int32_t i = 0; i < b.n_tokens; i++) {
            if (b.n_seq_id[i] != 1 || b.seq_id[i][0] != 0 || b.pos[i] != start + i) {
                return stop("a batch it cannot follow (a tree, another sequence or a gap in positions)");
            }
        }
        // on a GPU llama_decode returns before the pass ends, and the head reads its states: the wait for
        // the target's pass is not the head's time
        llama_synchronize(tgt_.get());
        const auto t0 = clock_type::now();
        if (!common_speculative_process(spec_, b)) return stop("its context failed to decode");
        t_seen_ms_ += ms_since(t0);
        n_seen_++;
        last_pos0_ = b.pos[0];
        last_rows_ = b.n_tokens;
    }

    void stop(const char * why) {
        if (!broken_) ES_LOG_INFO("llama-draft-mtp: %s; no more drafts for this request\n", why);
        broken_ = true;
    }

    context & tgt_;
    llama_context * dft_;
    common_speculative * spec_;
    llama_tokens prompt_;
    llama_tokens draft_;
    draft_backoff backoff_;
    llama_pos last_pos0_ = -1; // first position of the last batch the head saw
    int32_t last_rows_ = 0;
    bool broken_ = false;
    int64_t n_drafts_ = 0, n_seen_ = 0;
    double t_draft_ms_ = 0.0, t_seen_ms_ = 0.0;
};

// the head's context beside the target's, as common_speculative_init_result makes it for draft-mtp
std::unique_ptr<drafter_i> mtp_create(const drafter_inputs & in, std::string * error) {
    context * tgt = in.target_ctx;
    if (!tgt || tgt->is_view()) {
        *error = "a context of its own (a batched server's requests share one: `serve --method` naming a head's "
                 "row gives each slot its own)";
        return nullptr;
    }
    llama_model * m = tgt->owner().get();
    if (llama_model_n_layer_nextn(m) <= 0) {
        *error = "a model with multi-token-prediction layers (GGUF key <arch>.nextn_predict_layers), and '" +
                 tgt->owner().path() + "' has none";
        return nullptr;
    }
    const context_params & tp = tgt->params();
    llama_context_params cp = llama_context_default_params();
    cp.ctx_type = LLAMA_CONTEXT_TYPE_MTP;
    cp.ctx_other = tgt->get();
    cp.n_ctx = (uint32_t) tgt->n_ctx();
    cp.n_batch = (uint32_t) tgt->n_batch(); // the head decodes every target batch whole
    cp.n_ubatch = (uint32_t) tp.n_ubatch;
    cp.n_seq_max = 1;
    cp.n_rs_seq = 0;
    cp.n_threads = cp.n_threads_batch = tgt->n_threads();
    cp.flash_attn_type = tp.flash_attn ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k = tp.type_k;
    cp.type_v = tp.type_v;
    cp.no_perf = true;
    llama_context * dft = llama_init_from_model(m, cp);
    if (!dft) {
        *error = "its head's context (llama_init_from_model with LLAMA_CONTEXT_TYPE_MTP failed for '" +
                 tgt->owner().path() + "')";
        return nullptr;
    }
    common_params_speculative sp;
    sp.types = {COMMON_SPECULATIVE_TYPE_DRAFT_MTP};
    sp.draft.ctx_tgt = tgt->get();
    sp.draft.ctx_dft = dft;
    sp.draft.n_max = in.settings.head_max;
    sp.draft.p_min = in.settings.head_p_min;
    common_speculative * spec = common_speculative_init(sp, 1);
    if (!spec) {
        llama_free(dft);
        *error = "llama.cpp's common_speculative_init for draft-mtp";
        return nullptr;
    }
    // the head needs the target's state of every prompt token: the prompt is encoded whole, not
    // taken from the cache of an earlier request
    tgt->set_cached_prompt({});
    return std::make_unique<mtp_drafter>(*tgt, dft, spec);
}

} // namespace

#else

namespace {
std::unique_ptr<drafter_i> mtp_create(const drafter_inputs &, std::string * error) {
    *error = "llama.cpp's common library, which this build's llama.cpp does not have (scripts/setup-llama.sh installs it)";
    return nullptr;
}
} // namespace

#endif

namespace {

std::unique_ptr<drafter_i> make_mtp(const drafter_desc & self, const drafter_inputs & in, std::string * error) {
    std::string why;
    auto d = mtp_create(in, &why);
    if (!d && error) *error = std::string(self.name) + " needs " + why;
    return d;
}

bool has_head(const drafter_inputs & in) {
    return in.target && llama_model_n_layer_nextn(in.target->get()) > 0 && in.target_ctx && !in.target_ctx->is_view();
}

} // namespace

// the table's rows (drafters.h). `auto` takes the head where the model has one: after Reuse, lookup
// and copy (the head drafts from the root only, where those have nothing better), backing off while
// its drafts are dropped (draft_backoff)
std::span<const drafter_desc> llama_heads_drafters() {
    static const drafter_desc rows[] = {
        {"llama-draft-mtp",
         "llama.cpp's draft-mtp: the model's own multi-token-prediction head (its nextn layers), in-process, "
         "--head-max tokens a pass",
         DRAFTER_NEEDS_HEAD, VERIFY_POLICY_GREEDY, DRAFTER_LOSSY_NOT_REUSE, make_mtp, 4, has_head},
        {"efficientedit-mtp",
         "EfficientEdit with the model's MTP head as its draft model: Reuse, and the head where Reuse is "
         "rejected (until it re-syncs); greedy",
         DRAFTER_NEEDS_ORIGINAL | DRAFTER_NEEDS_HEAD, VERIFY_POLICY_GREEDY, DRAFTER_LOSSY_MODEL_ONLY,
         [](const drafter_desc & self, const drafter_inputs & in, std::string * error) -> std::unique_ptr<drafter_i> {
             auto head = make_mtp(self, in, error);
             if (!head) return nullptr;
             return std::make_unique<efficientedit_drafter>(std::make_unique<reuse_drafter>(in.original), std::move(head));
         }},
    };
    return rows;
}

} // namespace editspec
