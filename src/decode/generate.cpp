// Autoregressive generation and the output sink shared with the speculative decoder.
#include "editspec/generate.h"
#include "editspec/clock.h"
#include "editspec/log.h"

#include <algorithm>
#include <chrono>

namespace editspec {

const char * stop_reason_name(stop_reason r) {
    switch (r) {
        case STOP_REASON_NONE:       return "none";
        case STOP_REASON_EOG:        return "eog";
        case STOP_REASON_STRING:     return "stop_string";
        case STOP_REASON_MAX_TOKENS: return "max_tokens";
        case STOP_REASON_CONTEXT:    return "context_full";
        case STOP_REASON_CALLBACK:   return "callback";
        case STOP_REASON_LINE:       return "line_rule";
        case STOP_REASON_ERROR:      return "error";
    }
    return "unknown";
}

bool stop_reason_whole(stop_reason r) {
    return r == STOP_REASON_EOG || r == STOP_REASON_STRING;
}

// ----------------------------------------------------------------------------
// output_sink

output_sink::output_sink(const model & m, const generate_params & p, generate_result & r)
    : model_(m), params_(p), result_(r) {
    for (const std::string & s : p.stop) {
        max_stop_len_ = std::max(max_stop_len_, s.size());
    }
}

// bytes at the end of s that start an incomplete UTF-8 character
static size_t utf8_incomplete_tail(const std::string & s) {
    const size_t n = s.size();
    for (size_t back = 1; back <= std::min<size_t>(4, n); back++) {
        const unsigned char c = (unsigned char) s[n - back];
        if ((c & 0xC0) == 0x80) {
            continue; // continuation byte
        }
        size_t need = 1;
        if ((c & 0xE0) == 0xC0) need = 2;
        else if ((c & 0xF0) == 0xE0) need = 3;
        else if ((c & 0xF8) == 0xF0) need = 4;
        return need > back ? back : 0;
    }
    return 0;
}

bool output_sink::push(llama_token token) {
    if (!clock_started_) {
        // t_max_ms is generation time, as llama-server counts it: from the first token on, after the
        // pass that decoded the prompt's end (a long uncached prompt does not eat the budget)
        t0_ = std::chrono::steady_clock::now();
        clock_started_ = true;
    }
    if (model_.is_eog(token)) {
        result_.stop = STOP_REASON_EOG;
        return false;
    }
    result_.tokens.push_back(token);
    const std::string piece = model_.token_to_piece(token);
    const size_t text_before = result_.text.size();
    result_.text += piece;
    pending_ += piece;

    if (!params_.stop.empty()) {
        // a stop string may straddle pieces: search from where it could start
        const size_t from = text_before >= max_stop_len_ ? text_before - max_stop_len_ + 1 : 0;
        size_t cut = std::string::npos;
        for (const std::string & s : params_.stop) {
            if (s.empty()) continue;
            const size_t at = result_.text.find(s, from);
            if (at != std::string::npos) {
                cut = std::min(cut, at);
            }
        }
        if (cut != std::string::npos) {
            const size_t dropped = result_.text.size() - cut;
            result_.text.resize(cut);
            pending_.resize(pending_.size() >= dropped ? pending_.size() - dropped : 0);
            result_.stop = STOP_REASON_STRING;
            finish();
            return false;
        }
    }
    if ((params_.n_indent > 0 || params_.t_max_ms > 0.0) && !line_rules(text_before)) {
        finish();
        return false;
    }
    if (params_.on_text) {
        // hold back what could begin a stop string, and incomplete UTF-8
        size_t hold = utf8_incomplete_tail(pending_);
        if (max_stop_len_ > 0) {
            hold = std::max(hold, std::min(pending_.size(), max_stop_len_ - 1));
        }
        // ... and a new line's indentation until the line shows it is kept (n_indent)
        const size_t nl = pending_.rfind('\n');
        if (params_.n_indent > 0 && nl != std::string::npos && pending_.find_first_not_of(" \t", nl + 1) == std::string::npos) {
            hold = std::max(hold, pending_.size() - nl - 1);
        }
        if (pending_.size() > hold) {
            const std::string out = pending_.substr(0, pending_.size() - hold);
            pending_.erase(0, pending_.size() - hold);
            if (!params_.on_text(out)) {
                result_.stop = STOP_REASON_CALLBACK;
                return false;
            }
        }
    } else {
        pending_.clear();
    }
    if (params_.n_predict >= 0 && (int32_t) result_.tokens.size() >= params_.n_predict) {
        result_.stop = STOP_REASON_MAX_TOKENS;
        return false;
    }
    return true;
}

bool output_sink::line_rules(size_t text_before) {
    std::string & text = result_.text;
    if (params_.n_indent > 0) {
        // each line after a newline, once its first character that is not a space or tab is in
        for (size_t nl; (nl = text.find('\n', line_scan_)) != std::string::npos;) {
            const size_t first = text.find_first_not_of(" \t", nl + 1);
            if (first == std::string::npos) break; // only indentation so far: undecided
            if (text[first] != '\n' && (int64_t) (first - nl - 1) < params_.n_indent) {
                const size_t dropped = text.size() - (nl + 1);
                text.resize(nl + 1);
                pending_.resize(pending_.size() >= dropped ? pending_.size() - dropped : 0);
                result_.stop = STOP_REASON_LINE;
                return false;
            }
            line_scan_ = nl + 1;
        }
    }
    if (params_.t_max_ms > 0.0 && text.find('\n', text_before) != std::string::npos &&
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count() >= params_.t_max_ms) {
        result_.stop = STOP_REASON_LINE;
        return false;
    }
    return true;
}

void output_sink::finish() {
    if (params_.on_text && !pending_.empty()) {
        params_.on_text(pending_);
    }
    pending_.clear();
}

// ----------------------------------------------------------------------------
// autoregressive generation

bool generate_check_prompt(const context & ctx, std::span<const llama_token> prompt, generate_result & r,
                           const token_constraint * constraint, const sampling_params & sampling) {
    r.prompt_tokens = (int32_t) prompt.size();
    if (prompt.empty()) {
        r.stop = STOP_REASON_ERROR;
        r.error = "empty prompt";
        return false;
    }
    if ((int32_t) prompt.size() >= ctx.n_ctx()) {
        r.stop = STOP_REASON_ERROR;
        r.error = "prompt is " + std::to_string(prompt.size()) + " tokens, the context holds " +
                  std::to_string(ctx.n_ctx()) + " (raise --ctx-size)";
        return false;
    }
    if (constraint && sampling.temp > 0.0f) {
        r.stop = STOP_REASON_ERROR;
        r.error = "a constrained request decodes greedily: temperature 0 (it is " + std::to_string(sampling.temp) + ")";
        return false;
    }
    const int32_t n_vocab = ctx.owner().facts().n_vocab;
    for (llama_token t : prompt) {
        if (t < 0 || t >= n_vocab) {
            r.stop = STOP_REASON_ERROR;
            r.error = "prompt token " + std::to_string(t) + " outside the vocabulary [0, " + std::to_string(n_vocab) + ")";
            return false;
        }
    }
    return true;
}

bool generate_prefill(context & ctx, batch & b, std::span<const llama_token> prompt, const prompt_cache_params & pc,
                      generate_result & r, int32_t tail_max, int32_t * n_tail) {
    // the tail: the end of the prompt the cache does not hold (after its prefix or its last kept span)
    const std::span<const llama_token> but_last = prompt.first(prompt.size() - 1);
    const prompt_reuse_plan plan = prompt_reuse_plan_make(ctx.cached_prompt(), ctx.cached_stale(), but_last, prompt_cache_for(ctx, pc));
    int32_t reused_end = plan.n_prefix;
    for (const prompt_reuse_block & blk : plan.blocks) reused_end = std::max(reused_end, blk.to + blk.n);
    *n_tail = 1 + std::clamp<int32_t>((int32_t) but_last.size() - reused_end, 0, std::max(0, tail_max - 1));
    prefill_stats pst;
    const bool prefilled = context_prefill_cached(ctx, b, prompt.first(prompt.size() - (size_t) *n_tail), pc, &pst);
    r.prompt_cached = pst.cached + pst.shifted;
    r.prompt_shifted = pst.shifted;
    r.prompt_stale = pst.stale;
    if (!prefilled && ctx.cancelled()) {
        r.stop = STOP_REASON_CALLBACK; // the request was cancelled (context::set_cancel)
    } else if (!prefilled) {
        r.stop = STOP_REASON_ERROR;
        r.error = "prompt decode failed";
    }
    return prefilled;
}

generate_result generate_ar(context & ctx, std::span<const llama_token> prompt, const generate_params & p) {
    generate_result r;
    if (!generate_check_prompt(ctx, prompt, r, p.constraint, p.sampling)) {
        return r;
    }
    const model & m = ctx.owner();
    const int32_t n_vocab = m.facts().n_vocab;
    batch b(std::min<int32_t>(ctx.n_batch(), std::max<size_t>(prompt.size(), 1)), 1);

    // the prompt is prefill but for its uncached end, which the first pass decodes; every pass yields
    // one token (the speculative decoder leaves the same end, so both count and time the same passes)
    auto t0 = clock_type::now();
    int32_t n_tail = 1;
    if (!generate_prefill(ctx, b, prompt, p.prompt_cache, r, ctx.n_batch(), &n_tail)) {
        return r;
    }
    r.prompt_ms = ms_since(t0);

    rng_state rng(p.sampling.seed);
    output_sink sink(m, p, r);
    // the pass's argmax is all a greedy, unconstrained token needs (the decode's argmax outputs, when on)
    const bool greedy = p.sampling.temp <= 0.0f && !p.constraint;
    auto t1 = clock_type::now();
    token_vec pending(prompt.end() - n_tail, prompt.end()); // the next pass's tokens
    llama_pos pos = (llama_pos) prompt.size() - n_tail;
    if (p.n_predict == 0) {
        r.stop = STOP_REASON_MAX_TOKENS;
    }
    while (r.stop == STOP_REASON_NONE) {
        if (pos + (llama_pos) pending.size() - 1 >= ctx.n_ctx()) {
            r.stop = STOP_REASON_CONTEXT;
            break;
        }
        b.clear();
        for (size_t i = 0; i < pending.size(); i++) b.add(pending[i], pos + (llama_pos) i, {0}, i + 1 == pending.size());
        const auto tdec = clock_type::now();
        if (!ctx.decode(b, greedy)) {
            if (ctx.cancelled()) {
                r.stop = STOP_REASON_CALLBACK;
                break;
            }
            r.stop = STOP_REASON_ERROR;
            r.error = "decode failed at position " + std::to_string(pos);
            break;
        }
        r.decode_ms += ms_since(tdec);
        r.target_passes++;
        pos += (llama_pos) pending.size();
        const int32_t last = (int32_t) pending.size() - 1;
        const llama_token t = greedy        ? ctx.argmax(last)
                              : p.constraint ? constrained_argmax(ctx.logits(last), n_vocab, *p.constraint, r.tokens)
                                             : sampling_sample(ctx.logits(last), n_vocab, p.sampling, rng.coin());
        if (r.target_passes == 1) r.first_pass_ms = ms_since(t1);
        if (t < 0) {
            r.stop = STOP_REASON_ERROR;
            r.error = "the constraint allows no token after " + std::to_string(r.tokens.size()) + " tokens";
            break;
        }
        const bool more = sink.push(t);
        if (r.target_passes == 1) r.first_pass_tokens = (int32_t) r.tokens.size();
        if (!more) {
            break;
        }
        pending.assign(1, t);
    }
    sink.finish();
    r.gen_ms = ms_since(t1);
    if (r.stop != STOP_REASON_ERROR) {
        // sequence 0 holds the prompt and every generated token fed back: a next turn reuses them
        token_vec kv(prompt.begin(), prompt.end());
        const size_t n_fed = std::min(r.tokens.size(), (size_t) std::max<llama_pos>(0, pos - (llama_pos) prompt.size()));
        kv.insert(kv.end(), r.tokens.begin(), r.tokens.begin() + (ptrdiff_t) n_fed);
        ctx.set_cached_prompt(kv);
    }
    return r;
}

} // namespace editspec
