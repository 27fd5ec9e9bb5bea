// llama.cpp's model-native drafters (common/speculative.cpp at the pin) as editspec drafters: a model's
// own multi-token-prediction head, or a head file trained for it (EAGLE-3, DFlash, DSpark).
//
//     method name          llama.cpp type (llama-server --spec-type)  the head
//     llama-draft-mtp      draft-mtp       the model's nextn layers (MiMo, Qwen3.5, DeepSeek-V3, GLM-4.5 ...)
//     llama-draft-eagle3   draft-eagle3    --head-model FILE, an eagle3 GGUF (llama-server -md)
//     llama-draft-dflash   draft-dflash    --head-model FILE, a dflash GGUF
//     llama-draft-dspark   draft-dspark    --head-model FILE, a dflash GGUF with a Markov head
//     efficientedit-mtp    EfficientEdit with the MTP head as its draft model: Reuse where the original
//                          holds, the head where Reuse is rejected, verified greedily
//
// Defaults as llama-server's: --head-max 3 tokens a pass (--spec-draft-n-max), --head-p-min 0.
//
// A head reads the target's states of every token it decoded, so it is driven as llama-server drives
// it: a second llama_context (on the same model, LLAMA_CONTEXT_TYPE_MTP, for MTP; on the head file,
// with the target's as ctx_other, for the others) that sees every batch the target decodes
// (context::set_decode_hook), prompt chunks included. Its KV follows the target's sequence 0: the
// draft region is removed after each draft, the rejected rows after each pass. It needs a context of
// its own (not a batched server's view) and chains on sequence 0, which greedy verification sends; a
// batch it cannot follow (a tree, another sequence, a gap) ends its drafting for the request, which
// costs speed and never an answer.
#include "editspec/clock.h"
#include "editspec/drafters.h"
#include "editspec/efficientedit.h"
#include "editspec/log.h"
#include "editspec/reuse.h"

#if EDITSPEC_HAVE_LLAMA_COMMON
#include "common.h"
#include "speculative.h"

// llama.cpp's staging API (src/llama-ext.h, not installed): common_speculative turns the target's
// state outputs on and nothing turns them off; a context that outlives the head turns them off
LLAMA_API void llama_set_embeddings_nextn(struct llama_context * ctx, bool value, bool masked);
LLAMA_API void llama_set_embeddings_layer_inp(struct llama_context * ctx, uint32_t lid, bool value);
#endif

#include <algorithm>
#include <cstring>

namespace editspec {

namespace {

// the rows' llama.cpp types, by name
struct head_kind {
    const char * row;
    const char * llama_type; // llama-server --spec-type
    const char * file_arch;  // the head file's general.architecture, null = the model's own layers
    bool markov;             // DSpark: a dflash file with a Markov head (markov_w1)
};

const head_kind KINDS[] = {
    {"llama-draft-mtp", "draft-mtp", nullptr, false},
    {"llama-draft-eagle3", "draft-eagle3", "eagle3", false},
    {"llama-draft-dflash", "draft-dflash", "dflash", false},
    {"llama-draft-dspark", "draft-dspark", "dflash", true},
};

const head_kind * kind_of(const std::string & row) {
    for (const head_kind & k : KINDS) {
        if (row == k.row) return &k;
    }
    return &KINDS[0]; // efficientedit-mtp
}

std::string meta_str(const llama_model * m, const char * key) {
    char buf[256];
    const int32_t n = llama_model_meta_val_str(m, key, buf, sizeof(buf));
    return n < 0 ? std::string() : std::string(buf);
}

bool head_file_is_dspark(const std::string & path); // below: llama.cpp's own look at a head file

// "" when `in` holds what kind k drafts with, else what is missing
std::string head_missing(const head_kind & k, const drafter_inputs & in) {
    if (!k.file_arch) {
        if (in.target && llama_model_n_layer_nextn(in.target->get()) > 0) return "";
        return "a model with multi-token-prediction layers (GGUF key <arch>.nextn_predict_layers: MiMo, Qwen3.5, "
               "Qwen3-Next, DeepSeek-V3, GLM-4.5, ...)" +
               (in.target ? ", and '" + in.target->path() + "' has none" : std::string());
    }
    const std::string want = std::string("a ") + k.file_arch + (k.markov ? " head file with a Markov head (DSpark)" : " head file") +
                             " for the target (--head-model FILE)";
    if (!in.head_model) return want;
    const bool markov = std::strcmp(k.file_arch, "dflash") == 0 && head_file_is_dspark(in.head_model->path());
    if (meta_str(in.head_model->get(), "general.architecture") != k.file_arch || markov != k.markov) {
        return want + ", and '" + in.head_model->path() + "' is not one";
    }
    return "";
}

} // namespace

#if EDITSPEC_HAVE_LLAMA_COMMON

namespace {

class head_drafter : public drafter_i {
public:
    head_drafter(const head_kind & kind, context & tgt, llama_context * dft, common_speculative * spec)
        : kind_(kind), tgt_(tgt), dft_(dft), spec_(spec) {
        // EAGLE-3 keeps the last position's pair pending: its KV ends one behind the target's
        kv_lag_ = std::strcmp(kind.llama_type, "draft-eagle3") == 0 ? 1 : 0;
        tgt_.set_decode_hook([this](const llama_batch & b) { seen(b); });
    }
    ~head_drafter() override {
        // what llama-server's common_speculative_print_stats says as dur(g): beside it, the same head's cost
        ES_LOG_INFO("%s: %lld drafts in %.3f ms (%.3f ms a draft), %lld target batches followed in %.3f ms\n", kind_.row,
                    (long long) n_drafts_, t_draft_ms_, n_drafts_ ? t_draft_ms_ / (double) n_drafts_ : 0.0,
                    (long long) n_seen_, t_seen_ms_);
        tgt_.set_decode_hook({});
        common_speculative_free(spec_);
        llama_free(dft_);
        llama_context * t = tgt_.get();
        llama_set_embeddings_nextn(t, false, false);
        for (int32_t il = 0; il < llama_model_n_layer(llama_get_model(t)); il++) llama_set_embeddings_layer_inp(t, (uint32_t) il, false);
    }

    const char * name() const override { return kind_.row; }
    uint8_t source() const override { return DRAFT_SOURCE_MODEL; }

    void begin(std::span<const llama_token> prompt) override {
        const size_t n = prompt.empty() ? 0 : prompt.size() - 1;
        common_speculative_begin(spec_, 0, llama_tokens(prompt.begin(), prompt.begin() + n));
        // common_speculative_accept takes a kept row only once the head has drafted; draft once here,
        // after the prompt, so that a pass whose tokens came from another drafter (Reuse) can be kept
        if (prompt.size() >= 2 && !broken_) draft_at(prompt.back(), (llama_pos) prompt.size() - 1, 1, nullptr);
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
        // the target's state of the last token it kept pairs with the next batch's first token; the
        // head's KV keeps what the target's does
        const llama_pos end = kv_end();
        const int32_t row = end - 1 - last_pos0_;
        if (row < 0 || row >= last_rows_) return stop("the target kept a row outside the last batch");
        if (drafted_) {
            common_speculative_accept(spec_, 0, (uint16_t) std::min<int32_t>(row, UINT16_MAX));
        } else if (row != last_rows_ - 1) {
            return stop("rows were kept before it ever drafted"); // (llama.cpp takes no row then)
        }
        llama_memory_seq_rm(llama_get_memory(dft_), 0, end - kv_lag_, -1);
        next_pos_ = end;
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
        drafted_ = drafted_ || !draft_.empty();
        // the draft's cells go: the target's pass decodes those positions again, with its real states
        llama_memory_seq_rm(llama_get_memory(dft_), 0, pos0, -1);
        t_draft_ms_ += ms_since(t0);
        n_drafts_++;
    }

    // every batch the target decoded: the head decodes the same tokens beside the target's states
    void seen(const llama_batch & b) {
        if (broken_ || b.n_tokens <= 0 || !b.token) return;
        for (int32_t i = 0; i < b.n_tokens; i++) {
            if (b.n_seq_id[i] != 1 || b.seq_id[i][0] != 0 || b.pos[i] != next_pos_ + i) {
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
        next_pos_ = b.pos[0] + b.n_tokens;
    }

    void stop(const char * why) {
        if (!broken_) ES_LOG_INFO("%s: %s; no more drafts for this request\n", kind_.row, why);
        broken_ = true;
    }

    const head_kind & kind_;
    context & tgt_;
    llama_context * dft_;
    common_speculative * spec_;
    llama_pos kv_lag_ = 0;
    llama_tokens prompt_;
    llama_tokens draft_;
    draft_backoff backoff_;
    llama_pos next_pos_ = 0;   // the position the target's next batch starts at
    llama_pos last_pos0_ = -1; // first position of the last batch the head saw
    int32_t last_rows_ = 0;
    bool drafted_ = false;     // a draft came back (llama.cpp's accept takes rows only after one)
    bool broken_ = false;
    int64_t n_drafts_ = 0, n_seen_ = 0;
    double t_draft_ms_ = 0.0, t_seen_ms_ = 0.0;
};

// the head's context beside the target's, as common_speculative_init_result makes it
std::unique_ptr<drafter_i> head_create(const head_kind & k, const drafter_inputs & in, std::string * error) {
    context * tgt = in.target_ctx;
    if (!tgt || tgt->is_view()) {
        *error = "a context of its own (a batched server's requests share one: `serve --method` naming a head's "
                 "row gives each slot its own)";
        return nullptr;
    }
    if (const std::string missing = head_missing(k, in); !missing.empty()) {
        *error = missing;
        return nullptr;
    }
    const context_params & tp = tgt->params();
    llama_context_params cp = llama_context_default_params();
    cp.ctx_type = k.file_arch ? LLAMA_CONTEXT_TYPE_DEFAULT : LLAMA_CONTEXT_TYPE_MTP;
    cp.ctx_other = tgt->get();
    cp.n_ctx = (uint32_t) tgt->n_ctx();
    cp.n_batch = (uint32_t) tgt->n_batch(); // the head decodes every target batch whole
    cp.n_ubatch = (uint32_t) tp.n_ubatch;
    cp.n_seq_max = 1;
    cp.n_rs_seq = 0;
    if (k.file_arch && std::strcmp(k.file_arch, "dflash") == 0) {
        // DFlash decodes its whole block with logits (the others one row a step: more costs them a third
        // of their draft step, measured on tiny-mimo2)
        cp.n_outputs_max_per_seq = (uint32_t) in.settings.head_max + 1;
    }
    cp.n_threads = cp.n_threads_batch = tgt->n_threads();
    cp.flash_attn_type = tp.flash_attn ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k = tp.type_k;
    cp.type_v = tp.type_v;
    cp.no_perf = true;
    llama_model * hm = k.file_arch ? in.head_model->get() : tgt->owner().get();
    llama_context * dft = llama_init_from_model(hm, cp);
    if (!dft) {
        *error = std::string("its head's context (llama_init_from_model failed for '") +
                 (k.file_arch ? in.head_model->path() : tgt->owner().path()) + "')";
        return nullptr;
    }
    common_params_speculative sp;
    sp.types = {common_speculative_type_from_name(k.llama_type)};
    sp.draft.ctx_tgt = tgt->get();
    sp.draft.ctx_dft = dft;
    sp.draft.n_max = in.settings.head_max;
    sp.draft.p_min = in.settings.head_p_min;
    common_speculative * spec = common_speculative_init(sp, 1);
    if (!spec) {
        llama_free(dft);
        *error = std::string("llama.cpp's common_speculative_init for ") + k.llama_type;
        return nullptr;
    }
    // the head needs the target's state of every prompt token: the prompt is encoded whole, not
    // taken from the cache of an earlier request
    tgt->set_cached_prompt({});
    return std::make_unique<head_drafter>(k, *tgt, dft, spec);
}

// a dflash file with a Markov head (markov_w1), as llama-server tells them apart
bool head_file_is_dspark(const std::string & path) {
    const auto types = common_speculative_types_from_gguf(path);
    return std::find(types.begin(), types.end(), COMMON_SPECULATIVE_TYPE_DRAFT_DSPARK) != types.end();
}

} // namespace

#else

namespace {
std::unique_ptr<drafter_i> head_create(const head_kind &, const drafter_inputs &, std::string * error) {
    *error = "llama.cpp's common library, which this build's llama.cpp does not have (scripts/setup-llama.sh installs it)";
    return nullptr;
}
bool head_file_is_dspark(const std::string &) { return false; }
} // namespace

#endif

namespace {

std::unique_ptr<drafter_i> make_head(const drafter_desc & self, const drafter_inputs & in, std::string * error) {
    std::string why;
    auto d = head_create(*kind_of(self.name), in, &why);
    if (!d && error) *error = std::string(self.name) + " needs " + why;
    return d;
}

// auto takes a head where the request has one
bool has_head(const drafter_inputs & in, const char * row) {
    return in.target_ctx && !in.target_ctx->is_view() && head_missing(*kind_of(row), in).empty();
}

} // namespace

bool drafter_head_missing(const char * row, const drafter_inputs & in, std::string * why) {
    const std::string m = head_missing(*kind_of(row), in);
    if (why) *why = m;
    return !m.empty();
}

// the table's rows (drafters.h). `auto` takes the head where the request has one: after Reuse, lookup
// and copy (a head drafts from the root only, where those have nothing better), backing off while its
// drafts are dropped (draft_backoff)
std::span<const drafter_desc> llama_heads_drafters() {
    static const drafter_desc rows[] = {
        {"llama-draft-mtp",
         "llama.cpp's draft-mtp: the model's own multi-token-prediction head (its nextn layers), in-process, "
         "--head-max tokens a pass",
         DRAFTER_NEEDS_HEAD, VERIFY_POLICY_GREEDY, DRAFTER_LOSSY_NOT_REUSE, make_head, 4,
         [](const drafter_inputs & in) { return has_head(in, "llama-draft-mtp"); }},
        {"llama-draft-eagle3", "llama.cpp's draft-eagle3: an EAGLE-3 head file (--head-model) over the target's layers",
         DRAFTER_NEEDS_HEAD, VERIFY_POLICY_GREEDY, DRAFTER_LOSSY_NOT_REUSE, make_head, 4,
         [](const drafter_inputs & in) { return has_head(in, "llama-draft-eagle3"); }},
        {"llama-draft-dflash", "llama.cpp's draft-dflash: a DFlash head file (--head-model), a block of tokens a pass",
         DRAFTER_NEEDS_HEAD, VERIFY_POLICY_GREEDY, DRAFTER_LOSSY_NOT_REUSE, make_head, 4,
         [](const drafter_inputs & in) { return has_head(in, "llama-draft-dflash"); }},
        {"llama-draft-dspark", "llama.cpp's draft-dspark: a DSpark head file (--head-model: DFlash with a Markov head)",
         DRAFTER_NEEDS_HEAD, VERIFY_POLICY_GREEDY, DRAFTER_LOSSY_NOT_REUSE, make_head, 4,
         [](const drafter_inputs & in) { return has_head(in, "llama-draft-dspark"); }},
        {"efficientedit-mtp",
         "EfficientEdit with the model's MTP head as its draft model: Reuse, and the head where Reuse is "
         "rejected (until it re-syncs); greedy",
         DRAFTER_NEEDS_ORIGINAL | DRAFTER_NEEDS_HEAD, VERIFY_POLICY_GREEDY, DRAFTER_LOSSY_MODEL_ONLY,
         [](const drafter_desc & self, const drafter_inputs & in, std::string * error) -> std::unique_ptr<drafter_i> {
             auto head = make_head(self, in, error);
             if (!head) return nullptr;
             return std::make_unique<efficientedit_drafter>(std::make_unique<reuse_drafter>(in.original), std::move(head));
         }},
    };
    return rows;
}

} // namespace editspec
