// Document sessions (He et al., "Let the Code LLM Edit Itself When You Edit the Code"): text edits ->
// token diff -> the KV strategy (recompute, conflict fast encoding, PIE: engine/pie.cpp carries out
// PIE's plan, as for requests) -> next-line prediction.
//
// ref: "Positional Integrity Encoding" §3 (the three strategies); llama.cpp K-shift (llama_memory_seq_add)
#include "editspec/clock.h"
#include "editspec/session.h"
#include "editspec/log.h"

#include <algorithm>
#include <chrono>

namespace editspec {

std::string session_first_code_line(const std::string & text) {
    size_t at = 0;
    while (at <= text.size()) {
        size_t e = text.find('\n', at);
        if (e == std::string::npos) e = text.size();
        std::string line = text.substr(at, e - at);
        const size_t b = line.find_first_not_of(" \t\r");
        if (b != std::string::npos) {
            line = line.substr(b, line.find_last_not_of(" \t\r") + 1 - b);
            if (line.rfind("#", 0) != 0 && line.rfind("//", 0) != 0) return line;
        }
        at = e + 1;
    }
    return "";
}

doc_session::doc_session(context & ctx, const session_params & params)
    : ctx_(ctx), params_(params), b_(ctx.n_batch(), 2) {}

bool doc_session::fail(std::string * error, const std::string & msg) {
    if (error) *error = msg;
    return false;
}

int32_t doc_session::n_stale() const {
    return (int32_t) std::count(stale_.begin(), stale_.end(), (uint8_t) 1);
}

// t at positions pos0 .. into sequence 0; spare: through sequence 1, which holds sequence 0's
// cells before pos0 (llama.cpp wants a sequence's new positions right after its last one)
bool doc_session::encode(std::span<const llama_token> t, llama_pos pos0, bool spare) {
    if (t.empty()) return true;
    const llama_seq_id seq = spare ? 1 : 0;
    if (spare) {
        ctx_.kv_rm(1, -1, -1);
        ctx_.kv_cp(0, 1, 0, pos0);
    }
    for (size_t i = 0; i < t.size();) {
        b_.clear();
        for (; i < t.size() && b_.size() < b_.capacity(); i++) b_.add(t[i], pos0 + (llama_pos) i, {seq}, false);
        if (!ctx_.decode(b_)) return false;
    }
    if (spare) {
        ctx_.kv_cp(1, 0, pos0, pos0 + (llama_pos) t.size());
        ctx_.kv_rm(1, -1, -1);
    }
    return true;
}

bool doc_session::recompute_from(int32_t a) {
    // every cell from token a's on, then the tokens a .. n-2 at their own positions. After a
    // KV_REUSE_CONFLICT edit cells are not at their tokens' positions (they may even share positions), so
    // no position range holds exactly the later tokens: then everything is encoded again
    for (size_t i = 0; i < pos_.size(); i++) {
        if (pos_[i] != (llama_pos) i) {
            a = 0;
            break;
        }
    }
    if (a > 0 && !ctx_.kv_rm(0, a, -1)) a = 0; // a cache that cannot drop a tail: everything again
    if (a == 0) ctx_.kv_clear();
    const int32_t n = (int32_t) tokens_.size();
    pos_.resize(n);
    for (int32_t i = 0; i < n; i++) pos_[i] = i;
    stale_.assign(n, 0);
    if (n - 1 <= a) return true;
    return encode(std::span<const llama_token>(tokens_).subspan(a, n - 1 - a), a, false);
}

bool doc_session::open(const std::string & text, std::string * error) {
    const token_vec t = ctx_.owner().tokenize(text, true, false);
    if ((int32_t) t.size() + 64 > ctx_.n_ctx()) {
        return fail(error, "the document is " + std::to_string(t.size()) + " tokens; the context holds " +
                               std::to_string(ctx_.n_ctx()) + " (with 64 for a prediction)");
    }
    if (ctx_.n_seq_max() < 2) return fail(error, "a document session needs a context with 2 sequences");
    ctx_.kv_clear();
    text_ = text;
    tokens_ = t;
    pos_.clear();
    if (!recompute_from(0)) return fail(error, "decoding the document failed");
    return true;
}

// after an edit of tokens a .. old_end (now a .. new_end), tokens_ already the new ones: removes the
// span's cells, keeps the later ones (re-rotated by PIE, left at their old positions by the
// conflict baseline, stale either way) and encodes the new span
bool doc_session::keep_around(kv_reuse_mode how, int32_t a, int32_t old_end, int32_t new_end, edit_stats & s) {
    const int32_t n_new = (int32_t) tokens_.size(), n_old = n_new - (new_end - old_end);
    s.n_encoded = new_end - a;
    if (how == KV_REUSE_PIE) {
        // PIE's plan of one span: the later cells (old_end .. n_old-2; sequence 0 holds every token
        // but the last) shifted by new_end - old_end; the cells are at their tokens' positions
        prompt_reuse_plan plan;
        plan.n_prefix = a;
        if (n_old - 1 > old_end) plan.blocks.push_back({old_end, new_end, n_old - 1 - old_end});
        std::vector<uint8_t> stale;
        if (!pie_apply(ctx_, b_, std::span<const llama_token>(tokens_).first(n_new - 1), plan, stale_, stale)) return false;
        stale.push_back(1); // the last token (no cell yet) follows the edit: counted stale, as the span
        stale_ = std::move(stale);
        pos_.resize(n_new);
        for (int32_t i = 0; i < n_new; i++) pos_[i] = i;
        return true;
    }
    // the conflict baseline: the cells of the changed span go (none for a pure insertion: old_end ==
    // a, which may be token 0 on a model without BOS); the later ones stay where they are. b > 0, so
    // a later token exists and later_p0 is its position.
    if (old_end > a && !ctx_.kv_rm(0, pos_[a], pos_[old_end - 1] + 1)) {
        s.fallback = true; // a cache that cannot drop a span (recurrent): the document again
        s.n_encoded = n_new - 1;
        pos_.assign(1, -1);
        return recompute_from(0);
    }
    std::vector<llama_pos> pos(n_new);
    std::vector<uint8_t> stale(n_new);
    for (int32_t i = 0; i < a; i++) pos[i] = pos_[i], stale[i] = stale_[i];
    for (int32_t i = a; i < new_end; i++) pos[i] = (a > 0 ? pos_[a - 1] + 1 : 0) + (i - a), stale[i] = 0;
    const llama_pos delta = (llama_pos) (new_end - old_end);
    for (int32_t i = new_end; i < n_new; i++) pos[i] = pos_[i - delta], stale[i] = 1;
    pos_ = std::move(pos);
    stale_ = std::move(stale);
    bool ok = encode(std::span<const llama_token>(tokens_).subspan(a, new_end - a), pos_[a], true);
    if (!ok) {
        // llama.cpp refuses the batch when earlier conflict edits left the prefix's positions out
        // of order: the baseline cannot go on, so the document is encoded again (reported)
        s.fallback = true;
        s.n_encoded = n_new - 1;
        pos_.assign(1, -1); // not the identity: recompute_from clears and starts at 0
        ok = recompute_from(0);
    }
    return ok;
}

bool doc_session::edit(const text_edit & e, edit_stats * st, std::string * error) {
    if (e.offset > text_.size() || e.n_delete > text_.size() - e.offset) {
        return fail(error, "edit at " + std::to_string(e.offset) + " deleting " + std::to_string(e.n_delete) +
                               " bytes is outside the document (" + std::to_string(text_.size()) + " bytes)");
    }
    std::string text = text_;
    text.replace(e.offset, e.n_delete, e.insert);
    const token_vec t = ctx_.owner().tokenize(text, true, false);
    if ((int32_t) t.size() + 64 > ctx_.n_ctx()) {
        return fail(error, "after the edit the document is " + std::to_string(t.size()) + " tokens; the context holds " +
                               std::to_string(ctx_.n_ctx()));
    }
    // the smallest changed token span: common prefix a, common suffix b (not overlapping the prefix)
    const int32_t n_old = (int32_t) tokens_.size(), n_new = (int32_t) t.size();
    int32_t a = 0;
    while (a < n_old && a < n_new && tokens_[a] == t[a]) a++;
    int32_t b = 0;
    while (b < n_old - a && b < n_new - a && tokens_[n_old - 1 - b] == t[n_new - 1 - b]) b++;
    const int32_t old_end = n_old - b, new_end = n_new - b;
    edit_stats s;
    s.first = a;
    s.n_removed = old_end - a;
    s.n_inserted = new_end - a;
    const auto t0 = std::chrono::steady_clock::now();
    kv_reuse_mode how = params_.strategy;
    if (how == KV_REUSE_PIE && !ctx_.can_shift()) {
        ES_LOG_WARN("session: this model's KV cache cannot shift positions: PIE falls back to recomputing\n");
        how = KV_REUSE_PREFIX;
        s.fallback = true;
    }
    if (how == KV_REUSE_CONFLICT && b > 0 && old_end > a) {
        // cells are removed by position: after an earlier conflict insertion other tokens may share
        // the span's positions, and removing them too would corrupt the cache; recompute instead
        const llama_pos p0 = pos_[a], p1 = pos_[old_end - 1] + 1;
        for (int32_t i = 0; i < n_old - 1 && !s.fallback; i++) {
            if ((i < a || i >= old_end) && pos_[i] >= p0 && pos_[i] < p1) {
                how = KV_REUSE_PREFIX;
                s.fallback = true;
            }
        }
    }
    tokens_ = t;
    text_ = std::move(text);
    bool ok = true;
    if (how == KV_REUSE_PREFIX || b == 0) {
        // b == 0: the edit reaches the last token, nothing after it to keep
        s.n_encoded = std::max(0, n_new - 1 - a);
        ok = recompute_from(a);
    } else {
        ok = keep_around(how, a, old_end, new_end, s);
    }
    s.kv_ms = ms_since(t0);
    s.n_stale = n_stale();
    if (st) *st = s;
    if (!ok) {
        ctx_.kv_clear();
        tokens_.clear();
        text_.clear();
        pos_.clear();
        stale_.clear();
        return fail(error, "decoding the edit failed; the session is closed");
    }
    return true;
}

bool doc_session::lend(prompt_cache_params & reuse) {
    if (tokens_.empty()) return false;
    for (size_t i = 0; i < pos_.size(); i++) {
        if (pos_[i] != (llama_pos) i) return false; // KV_REUSE_CONFLICT
    }
    const size_t n = tokens_.size() - 1; // sequence 0 holds every token but the last
    ctx_.set_cached_prompt(std::span<const llama_token>(tokens_).first(n), std::span<const uint8_t>(stale_).first(n));
    reuse = prompt_cache_params();
    if (params_.strategy == KV_REUSE_PIE) reuse.mode = KV_REUSE_PIE;
    reuse.drift_max = params_.drift_max;
    return true;
}

bool doc_session::take_back(prefill_stats * st) {
    const size_t n = tokens_.size() - 1;
    prompt_cache_params back;
    back.mode = params_.strategy == KV_REUSE_PIE ? KV_REUSE_PIE : KV_REUSE_PREFIX;
    if (!context_prefill_cached(ctx_, b_, std::span<const llama_token>(tokens_).first(n), back, st)) {
        tokens_.clear();
        text_.clear();
        pos_.clear();
        stale_.clear();
        return false;
    }
    // shifted back cells count as stale: their KV was computed in the request or before it
    stale_.assign(ctx_.cached_stale().begin(), ctx_.cached_stale().end());
    stale_.push_back(0);
    for (size_t i = 0; i < pos_.size(); i++) pos_[i] = (llama_pos) i;
    return true;
}

int32_t doc_session::refresh() {
    if (params_.drift_max < 0 || n_stale() <= params_.drift_max) return 0;
    const int32_t first = (int32_t) (std::find(stale_.begin(), stale_.end(), (uint8_t) 1) - stale_.begin());
    const int32_t n = std::max(0, (int32_t) tokens_.size() - 1 - first);
    return recompute_from(first) ? n : -1;
}

std::string doc_session::predict_line(int32_t n_max) {
    if (tokens_.empty()) return "";
    const model & m = ctx_.owner();
    // the last token goes right after the sequence's last cell (its own position but for
    // KV_REUSE_CONFLICT, whose cells may run past it), then the output
    const llama_pos end = ctx_.kv_pos_max(0) + 1;
    llama_token tok = tokens_.back();
    std::string out;
    for (int32_t i = 0; i < n_max; i++) {
        b_.clear();
        b_.add(tok, end + i, {0}, true);
        if (!ctx_.decode(b_)) break;
        const float * lg = ctx_.logits(0);
        tok = (llama_token) (std::max_element(lg, lg + m.facts().n_vocab) - lg);
        if (m.is_eog(tok)) break;
        out += m.token_to_piece(tok);
        // done once a code line is complete
        const size_t nl = out.rfind('\n');
        if (nl != std::string::npos && !session_first_code_line(out.substr(0, nl)).empty()) break;
    }
    // the document's KV as it was: every token but the last (a cache that cannot drop the tail is
    // encoded again)
    if (!ctx_.kv_rm(0, end, -1)) recompute_from(0);
    return session_first_code_line(out);
}

} // namespace editspec
