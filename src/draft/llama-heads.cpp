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
// with the target's as ctx_other, for the others) that sees every batch the target decodes, prompt
// chunks included: a context of its own's (context::set_decode_hook), or every step of a server's step
// engine (step_engine::set_step_hook: one head context for all its views, a sequence each; the drafts
// of the requests that ask at once in one call: llama-heads.h). Its KV follows the target's: the
// draft region is removed after each draft, the rejected rows after each pass. It chains on the
// request's one sequence, which greedy verification sends; a batch it cannot follow (a tree, a gap)
// ends its drafting for the request, which costs speed and never an answer.
#include "editspec/clock.h"
#include "editspec/drafters.h"
#include "editspec/efficientedit.h"
#include "editspec/llama-heads.h"
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
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <vector>

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

// A head's context and llama.cpp's driver of it (common_speculative), beside one target context (its
// sequence 0) or a step engine's (a sequence per view). It sees every batch the target decodes
// (process: the head decodes the same tokens beside the target's states), drafts for the requests
// that ask, and keeps what the target kept. With an engine, everything that touches the head's
// context runs on the engine's thread (the step hook, and run_on_thread for the rest): never during
// a step's other work, in the process's one OpenMP team; a request's thread only records what it
// kept, and the next draft or step applies it.
class head_driver : public shared_head {
public:
    head_driver(const head_kind & kind, llama_context * tgt, llama_context * dft, common_speculative * spec, int32_t n_seq,
                step_engine * engine)
        : kind_(kind), tgt_(tgt), dft_(dft), spec_(spec), engine_(engine), seqs_((size_t) n_seq) {
        // EAGLE-3 keeps the last position's pair pending: its KV ends one behind the target's
        kv_lag_ = std::strcmp(kind.llama_type, "draft-eagle3") == 0 ? 1 : 0;
    }
    ~head_driver() override {
        ES_LOG_INFO("%s: %lld target batches followed in %.3f ms; %lld draft calls for %lld drafts in %.3f ms\n", kind_.row,
                    (long long) n_seen_, t_seen_ms_, (long long) n_calls_, (long long) n_drafts_, t_draft_ms_);
        run([this] {
            if (engine_) engine_->set_step_hook({});
            common_speculative_free(spec_);
            llama_free(dft_);
            // common_speculative turns the target's state outputs on and nothing turns them off
            llama_set_embeddings_nextn(tgt_, false, false);
            for (int32_t il = 0; il < llama_model_n_layer(llama_get_model(tgt_)); il++) {
                llama_set_embeddings_layer_inp(tgt_, (uint32_t) il, false);
            }
        });
    }

    const char * row() const override { return kind_.row; }
    const head_kind & kind() const { return kind_; }
    shared_head_stats stats() const override {
        std::lock_guard<std::mutex> lock(mu_);
        return {n_seen_, n_calls_, n_drafts_, t_seen_ms_, t_draft_ms_};
    }

    // the head follows the target: every batch its context (or the engine's steps) decodes
    void follow(context * owned) {
        if (owned) {
            owned->set_decode_hook([this](const llama_batch & b) { seen(b); });
        } else {
            engine_->set_step_hook([this](const llama_batch & b) { seen(b); });
        }
    }

    // a request starts on sequence s (before its prompt is decoded): the head's cells of the last go
    void reset(llama_seq_id s) {
        run([&] {
            std::lock_guard<std::mutex> lock(mu_);
            seqs_[(size_t) s] = seq_state();
            seqs_[(size_t) s].attached = true;
            llama_memory_seq_rm(llama_get_memory(dft_), s, -1, -1);
        });
    }

    void begin(llama_seq_id s, const llama_tokens & prompt) {
        run([&] { common_speculative_begin(spec_, s, prompt); });
    }

    // up to n_max tokens after `last` at pos0 into *out (empty: none); the drafts other sequences
    // wait for go in the same call
    void draft(llama_seq_id s, llama_token last, llama_pos pos0, int32_t n_max, const llama_tokens * prompt, llama_tokens * out) {
        out->clear();
        {
            std::lock_guard<std::mutex> lock(mu_);
            seq_state & st = seqs_[(size_t) s];
            if (st.broken) return;
            st.want = {true, n_max, pos0, last, prompt, out};
            st.due = false;
        }
        cv_.notify_all();
        run([this] { draft_waiting(); });
    }

    // the target kept `row` of sequence s's last batch (row < 0: a request that never drafted kept
    // its last row) and its KV ends at `end`; false (and the head stops for s) when row lies outside
    // that batch
    bool keep(llama_seq_id s, bool drafted, llama_pos end, const char ** why) {
        std::lock_guard<std::mutex> lock(mu_);
        seq_state & st = seqs_[(size_t) s];
        if (st.broken || st.last_pos0 < 0) return true; // nothing to keep
        const int32_t row = end - 1 - st.last_pos0;
        if (row < 0 || row >= st.last_rows) {
            *why = "the target kept a row outside the last batch";
            return false;
        }
        if (!drafted && row != st.last_rows - 1) {
            *why = "rows were kept before it ever drafted"; // (llama.cpp takes no row then)
            return false;
        }
        st.keep = {true, drafted, std::min<int32_t>(row, UINT16_MAX), end};
        st.next_pos = end;
        return true;
    }

    // sequence s's request asks no draft this pass (a draft call waits for it no longer), or ends (detach)
    void pass(llama_seq_id s, bool detach = false) {
        {
            std::lock_guard<std::mutex> lock(mu_);
            seq_state & st = seqs_[(size_t) s];
            st.attached = st.attached && !detach;
            if (!st.due) return;
            st.due = false;
        }
        cv_.notify_all();
    }

    // sequence s drafts no more in this request
    void stop(llama_seq_id s, const char * why) {
        std::lock_guard<std::mutex> lock(mu_);
        stop_locked(s, why);
    }
    bool broken(llama_seq_id s) const {
        std::lock_guard<std::mutex> lock(mu_);
        return seqs_[(size_t) s].broken;
    }

private:
    struct seq_state {
        llama_pos next_pos = 0;    // the position the target's next batch starts at
        llama_pos last_pos0 = -1;  // first position of the last batch the head saw
        int32_t last_rows = 0;
        bool broken = false;
        bool attached = false;     // a request's drafter drafts on it
        bool due = false;          // its request got logits from the last step, and has neither asked for a
                                   // draft nor passed since
        struct {
            bool waiting = false;
            bool accept = false; // common_speculative_accept (once the request drafted)
            int32_t row = 0;
            llama_pos end = 0;   // the target's KV end: the head's cells from there go
        } keep;
        struct {
            bool waiting = false;
            int32_t n_max = 0;
            llama_pos pos0 = 0;
            llama_token last = 0;
            const llama_tokens * prompt = nullptr;
            llama_tokens * out = nullptr;
        } want;
    };

    void run(const std::function<void()> & f) {
        if (engine_) {
            engine_->run_on_thread(f);
        } else {
            f();
        }
    }

    void stop_locked(llama_seq_id s, const char * why) {
        seq_state & st = seqs_[(size_t) s];
        if (!st.broken) ES_LOG_INFO("%s: %s; no more drafts for this request (sequence %d)\n", kind_.row, why, (int) s);
        st.broken = true;
        st.want.waiting = false;
        st.keep.waiting = false;
        st.due = false;
    }

    // what requests kept since the head last ran (mu_ held, the engine's thread)
    void apply_keeps() {
        for (size_t s = 0; s < seqs_.size(); s++) {
            seq_state & st = seqs_[s];
            if (!st.keep.waiting) continue;
            if (st.keep.accept) common_speculative_accept(spec_, (llama_seq_id) s, (uint16_t) st.keep.row);
            llama_memory_seq_rm(llama_get_memory(dft_), (llama_seq_id) s, st.keep.end - kv_lag_, -1);
            st.keep.waiting = false;
        }
    }

    // every draft waiting, in one call (the engine's thread). The requests of one step get their logits
    // together and ask for their drafts within a fraction of a millisecond: the call waits for those
    // that have not yet asked or passed, at most half a draft call (and 1 ms), so that their drafts
    // share its decodes
    void draft_waiting() {
        static const llama_tokens none;
        std::vector<llama_seq_id> ids;
        {
            std::unique_lock<std::mutex> lock(mu_);
            auto none_due = [&] { return std::none_of(seqs_.begin(), seqs_.end(), [](const seq_state & st) { return st.due; }); };
            if (engine_ && fiber::current()) {
                // requests' jobs on the engine's thread (the server's): those of the step run to their
                // draft calls, or past them, before this call drafts for all that asked
                if (!none_due()) {
                    lock.unlock();
                    engine_->yield();
                    lock.lock();
                }
            } else if (engine_ && n_calls_ > 0) {
                const double wait_ms = std::min(1.0, 0.5 * t_draft_ms_ / (double) n_calls_);
                const auto deadline = clock_type::now() + std::chrono::microseconds((int64_t) (wait_ms * 1000.0));
                cv_.wait_until(lock, deadline, none_due);
            }
            apply_keeps();
            for (size_t s = 0; s < seqs_.size(); s++) {
                seq_state & st = seqs_[s];
                if (!st.want.waiting) continue;
                ids.push_back((llama_seq_id) s);
                common_speculative_get_draft_params(spec_, (llama_seq_id) s) = {
                    /* .drafting = */ true,
                    /* .n_max    = */ st.want.n_max,
                    /* .pos0     = */ st.want.pos0,
                    /* .id_last  = */ st.want.last,
                    /* .prompt   = */ st.want.prompt ? st.want.prompt : &none,
                    /* .result   = */ st.want.out,
                };
            }
        }
        if (ids.empty()) return; // an earlier call drafted this one's
        const auto t0 = clock_type::now();
        common_speculative_draft(spec_);
        std::lock_guard<std::mutex> lock(mu_);
        for (llama_seq_id s : ids) {
            // the draft's cells go: the target's pass decodes those positions again, with its real states
            llama_memory_seq_rm(llama_get_memory(dft_), s, seqs_[(size_t) s].want.pos0, -1);
            seqs_[(size_t) s].want.waiting = false;
        }
        t_draft_ms_ += ms_since(t0);
        n_calls_++;
        n_drafts_ += (int64_t) ids.size();
    }

    // every batch the target decoded: the head decodes the same tokens beside the target's states.
    // Each sequence's rows are contiguous; one it cannot follow (another sequence id, a gap in
    // positions) stops drafting for its request, and its rows, which share the batch, go into cells
    // the head holds for nothing
    void seen(const llama_batch & b) {
        if (b.n_tokens <= 0 || !b.token) return;
        std::lock_guard<std::mutex> lock(mu_);
        apply_keeps();
        llama_memory_t mem = llama_get_memory(dft_);
        bool any = false;
        runs_.clear();
        for (int32_t i = 0; i < b.n_tokens;) {
            if (b.n_seq_id[i] != 1 || b.seq_id[i][0] < 0 || b.seq_id[i][0] >= (llama_seq_id) seqs_.size()) {
                // (not from a decoder: trees and other sequences never reach a head)
                for (size_t s = 0; s < seqs_.size(); s++) stop_locked((llama_seq_id) s, "a batch it cannot follow (a tree)");
                return;
            }
            const llama_seq_id s = b.seq_id[i][0];
            int32_t j = i + 1;
            while (j < b.n_tokens && b.n_seq_id[j] == 1 && b.seq_id[j][0] == s) j++;
            seq_state & st = seqs_[(size_t) s];
            bool follows = b.pos[i] == st.next_pos;
            for (int32_t k = i + 1; k < j; k++) follows = follows && b.pos[k] == b.pos[k - 1] + 1;
            for (const auto & r : runs_) follows = follows && r.first != s; // one run a sequence
            if (!follows) stop_locked(s, "a batch it cannot follow (a gap in positions)");
            if (st.broken) {
                llama_memory_seq_rm(mem, s, -1, -1); // so that its rows go in wherever they start
            } else {
                llama_memory_seq_rm(mem, s, b.pos[i], -1);
                any = true;
            }
            runs_.push_back({s, i});
            i = j;
        }
        if (!any) return;
        // on a GPU llama_decode returns before the pass ends, and the head reads its states: the wait for
        // the target's pass is not the head's time
        llama_synchronize(tgt_);
        const auto t0 = clock_type::now();
        const bool ok = common_speculative_process(spec_, b);
        for (size_t r = 0; r < runs_.size(); r++) {
            const auto [s, i] = runs_[r];
            const int32_t n = (r + 1 < runs_.size() ? runs_[r + 1].second : b.n_tokens) - i;
            seq_state & st = seqs_[(size_t) s];
            if (!ok) {
                stop_locked(s, "its context failed to decode");
                llama_memory_seq_rm(mem, s, -1, -1);
            } else if (!st.broken) {
                st.last_pos0 = b.pos[i];
                st.last_rows = n;
                st.next_pos = b.pos[i] + n;
                // a pass (or a prompt's last chunk): its request drafts next, or passes
                bool logits = false;
                for (int32_t k = i; k < i + n && b.logits; k++) logits = logits || b.logits[k] != 0;
                st.due = engine_ && st.attached && logits;
            }
        }
        t_seen_ms_ += ms_since(t0);
        n_seen_++;
    }

    const head_kind & kind_;
    llama_context * tgt_;
    llama_context * dft_;
    common_speculative * spec_;
    step_engine * engine_;
    llama_pos kv_lag_ = 0;
    mutable std::mutex mu_;      // seqs_
    std::condition_variable cv_; // a sequence asked for a draft or passed
    std::vector<seq_state> seqs_;
    std::vector<std::pair<llama_seq_id, int32_t>> runs_; // seen(): each sequence's first row
    int64_t n_seen_ = 0, n_calls_ = 0, n_drafts_ = 0;
    double t_seen_ms_ = 0.0, t_draft_ms_ = 0.0;
};

// a request's drafter on a head: its own (a context of its own) or a step engine's shared one
class head_drafter : public drafter_i {
public:
    head_drafter(head_driver & head, context & tgt, std::unique_ptr<head_driver> owned)
        : head_(head), tgt_(tgt), seq_(tgt.view_seq()), owned_(std::move(owned)) {
        head_.reset(seq_);
    }
    ~head_drafter() override {
        ES_LOG_INFO("%s: %lld drafts in %.3f ms (%.3f ms a draft)\n", head_.row(), (long long) n_drafts_, t_draft_ms_,
                    n_drafts_ ? t_draft_ms_ / (double) n_drafts_ : 0.0);
        head_.pass(seq_, /*detach=*/true);
        if (owned_) tgt_.set_decode_hook({});
    }

    const char * name() const override { return head_.row(); }
    uint8_t source() const override { return DRAFT_SOURCE_MODEL; }
    bool follows_target() const override { return true; } // llama.cpp's begin() wants the prompt's states

    void begin(std::span<const llama_token> prompt) override {
        const size_t n = prompt.empty() ? 0 : prompt.size() - 1;
        head_.begin(seq_, llama_tokens(prompt.begin(), prompt.begin() + n));
        // common_speculative_accept takes a kept row only once the head has drafted; draft once here,
        // after the prompt, so that a pass whose tokens came from another drafter (Reuse) can be kept
        if (prompt.size() >= 2) draft_at(prompt.back(), (llama_pos) prompt.size() - 1, 1, nullptr);
    }

    void propose(std::span<const llama_token> history, draft_tree & tree, int32_t budget) override {
        if (history.empty() || budget < 1 || backoff_.skip() || head_.broken(seq_)) return;
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

    void sized(const draft_tree & sent) override {
        backoff_.sized(sent, DRAFT_SOURCE_MODEL);
        head_.pass(seq_); // (a pass that drafted asked already)
    }

    void accept(std::span<const llama_token>) override {
        // the target's state of the last token it kept pairs with the next batch's first token; the
        // head's KV keeps what the target's does
        const char * why = nullptr;
        if (!head_.keep(seq_, drafted_, kv_end(), &why)) head_.stop(seq_, why);
    }

private:
    // the target's sequence (0 of the request's context) holds positions [0, kv_end())
    llama_pos kv_end() const { return tgt_.kv_pos_max(0) + 1; }

    void draft_at(llama_token last, llama_pos pos0, int32_t n_max, const llama_tokens * prompt) {
        const auto t0 = clock_type::now();
        head_.draft(seq_, last, pos0, n_max, prompt, &draft_);
        drafted_ = drafted_ || !draft_.empty();
        t_draft_ms_ += ms_since(t0);
        n_drafts_++;
    }

    head_driver & head_;
    context & tgt_;
    llama_seq_id seq_;
    std::unique_ptr<head_driver> owned_; // the head of a context of its own, else null
    llama_tokens prompt_;
    llama_tokens draft_;
    draft_backoff backoff_;
    bool drafted_ = false; // a draft came back (llama.cpp's accept takes rows only after one)
    int64_t n_drafts_ = 0;
    double t_draft_ms_ = 0.0;
};

// the head's context beside the target's, as common_speculative_init_result makes it: for one
// sequence (a context of its own) or n_seq (a step engine's views, a stream each)
std::unique_ptr<head_driver> head_open(const head_kind & k, const drafter_inputs & in, const context & tgt, int32_t n_seq,
                                       step_engine * engine, std::string * error) {
    if (const std::string missing = head_missing(k, in); !missing.empty()) {
        *error = missing;
        return nullptr;
    }
    const context_params & tp = tgt.params();
    llama_context * tctx = tgt.get();
    llama_context_params cp = llama_context_default_params();
    cp.ctx_type = k.file_arch ? LLAMA_CONTEXT_TYPE_DEFAULT : LLAMA_CONTEXT_TYPE_MTP;
    cp.ctx_other = tctx;
    cp.n_ctx = llama_n_ctx(tctx);
    cp.n_batch = llama_n_batch(tctx); // the head decodes every target batch (a step's) whole
    cp.n_ubatch = engine ? cp.n_batch : (uint32_t) tp.n_ubatch;
    cp.n_seq_max = (uint32_t) n_seq;
    cp.kv_unified = n_seq == 1; // a stream per view: a row attends to its request's cells only
    cp.n_rs_seq = 0;
    if (k.file_arch && std::strcmp(k.file_arch, "dflash") == 0) {
        // DFlash decodes its whole block with logits (the others one row a step: more costs them a third
        // of their draft step, measured on tiny-mimo2)
        cp.n_outputs_max_per_seq = (uint32_t) in.settings.head_max + 1;
    }
    cp.n_threads = cp.n_threads_batch = llama_n_threads(tctx);
    cp.flash_attn_type = tp.flash_attn ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k = tp.type_k;
    cp.type_v = tp.type_v;
    cp.no_perf = true;
    llama_model * hm = k.file_arch ? in.head_model->get() : tgt.owner().get();
    llama_context * dft = llama_init_from_model(hm, cp);
    if (!dft) {
        *error = std::string("its head's context (llama_init_from_model failed for '") +
                 (k.file_arch ? in.head_model->path() : tgt.owner().path()) + "', " + std::to_string(n_seq) + " sequences)";
        return nullptr;
    }
    common_params_speculative sp;
    sp.types = {common_speculative_type_from_name(k.llama_type)};
    sp.draft.ctx_tgt = tctx;
    sp.draft.ctx_dft = dft;
    sp.draft.n_max = in.settings.head_max;
    sp.draft.p_min = in.settings.head_p_min;
    common_speculative * spec = common_speculative_init(sp, (uint32_t) n_seq);
    if (!spec) {
        llama_free(dft);
        *error = std::string("llama.cpp's common_speculative_init for ") + k.llama_type;
        return nullptr;
    }
    return std::make_unique<head_driver>(k, tctx, dft, spec, n_seq, engine);
}

std::unique_ptr<drafter_i> head_create(const head_kind & k, const drafter_inputs & in, std::string * error) {
    context * tgt = in.target_ctx;
    if (!tgt) {
        *error = "the target's context";
        return nullptr;
    }
    if (tgt->is_view()) {
        auto * shared = static_cast<head_driver *>(in.head);
        if (!shared || &shared->kind() != &k) {
            *error = std::string("a context of its own, or its server's head of its kind (`serve --method` naming ") + k.row +
                     (shared ? std::string(": this server's is ") + shared->row() + ")" : std::string(")"));
            return nullptr;
        }
        // the head needs the target's state of every prompt token: the prompt is encoded whole, not
        // taken from the cache of an earlier request
        tgt->set_cached_prompt({});
        return std::make_unique<head_drafter>(*shared, *tgt, nullptr);
    }
    auto head = head_open(k, in, *tgt, 1, nullptr, error);
    if (!head) return nullptr;
    head->follow(tgt);
    tgt->set_cached_prompt({});
    head_driver & h = *head;
    return std::make_unique<head_drafter>(h, *tgt, std::move(head));
}

// a dflash file with a Markov head (markov_w1), as llama-server tells them apart
bool head_file_is_dspark(const std::string & path) {
    const auto types = common_speculative_types_from_gguf(path);
    return std::find(types.begin(), types.end(), COMMON_SPECULATIVE_TYPE_DRAFT_DSPARK) != types.end();
}

} // namespace

std::unique_ptr<shared_head> shared_head_create(const std::string & row, step_engine & engine, const drafter_inputs & in,
                                                std::string * error) {
    const head_kind & k = *kind_of(row);
    std::string why;
    std::unique_ptr<head_driver> head;
    // its context and the target's outputs are set on the engine's thread, between steps
    engine.run_on_thread([&] { head = head_open(k, in, engine.shared_context(), engine.n_seq(), &engine, &why); });
    if (!head) {
        if (error) *error = row + " needs " + why;
        return nullptr;
    }
    head->follow(nullptr);
    return head;
}

#else

namespace {
std::unique_ptr<drafter_i> head_create(const head_kind &, const drafter_inputs &, std::string * error) {
    *error = "llama.cpp's common library, which this build's llama.cpp does not have (scripts/setup-llama.sh installs it)";
    return nullptr;
}
bool head_file_is_dspark(const std::string &) { return false; }
} // namespace

std::unique_ptr<shared_head> shared_head_create(const std::string & row, step_engine &, const drafter_inputs &, std::string * error) {
    if (error) *error = row + " needs llama.cpp's common library, which this build's llama.cpp does not have";
    return nullptr;
}

#endif

namespace {

std::unique_ptr<drafter_i> make_head(const drafter_desc & self, const drafter_inputs & in, std::string * error) {
    std::string why;
    auto d = head_create(*kind_of(self.name), in, &why);
    if (!d && error) *error = std::string(self.name) + " needs " + why;
    return d;
}

// auto takes a head where the request has one: a context of its own, or its engine's head of the kind
bool has_head(const drafter_inputs & in, const char * row) {
    if (!in.target_ctx) return false;
    if (in.target_ctx->is_view() && (!in.head || std::strcmp(in.head->row(), kind_of(row)->row) != 0)) return false;
    return head_missing(*kind_of(row), in).empty();
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
