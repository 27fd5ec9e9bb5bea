// Generation: the request-level loop shared by autoregressive and speculative decoding.
//
//     editspec::generate_params gp;
//     gp.n_predict = 128;
//     gp.on_text = [](std::string_view s) { fwrite(s.data(), 1, s.size(), stdout); return true; };
//     editspec::generate_result r = editspec::generate_ar(*ctx, prompt_tokens, gp);
//
// Sequence 0 keeps what generate_params::prompt_cache says of the prompt an earlier request left in
// the context (pie.h: the longest common prefix, exact, by default); everything else goes.
#pragma once

#include "editspec/constraint.h"
#include "editspec/cost.h"
#include "editspec/draft.h"
#include "editspec/engine.h"
#include "editspec/pie.h"
#include "editspec/sampling.h"

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace editspec {

enum stop_reason {
    STOP_REASON_NONE,       // still running
    STOP_REASON_EOG,        // the model produced an end-of-generation token
    STOP_REASON_STRING,     // a stop string appeared in the text
    STOP_REASON_MAX_TOKENS, // n_predict tokens were produced
    STOP_REASON_CONTEXT,    // the KV cache is full
    STOP_REASON_CALLBACK,   // on_text returned false
    STOP_REASON_LINE,       // a line rule: n_indent or t_max_ms (generate_params)
    STOP_REASON_ERROR,      // decode failed or bad input; see generate_result::error
};

const char * stop_reason_name(stop_reason r);

// true when the answer ended on its own: the model's end (EOG) or a stop string the request named.
// Every other stop (n_predict, a full context, a time limit, a cancel or shutdown, an error) cut the
// answer short: an edit's or an apply's output is then not a whole file, and is never handed back as one
bool stop_reason_whole(stop_reason r);

struct generate_params {
    int32_t n_predict = 256;          // most tokens to generate, -1 = until EOG or the context is full
    sampling_params sampling;          // temp 0 = greedy
    std::vector<std::string> stop;     // stop strings; the text ends before the first one
    // llama.cpp's infill limits, checked line by line: the text ends before a line (after the
    // first) indented by fewer than n_indent spaces or tabs (the block being completed has ended),
    // and at the first newline generated after t_max_ms of generation (no half line; counted from the
    // first token, as llama-server counts t_max_predict_ms). 0 = off
    int32_t n_indent = 0;
    double  t_max_ms = 0.0;
    // streaming: called with each new piece of text (whole UTF-8 characters, held back while it
    // could still be the start of a stop string); return false to stop
    std::function<bool(std::string_view)> on_text;
    // constrained greedy decoding (constraint.h): each token is the likeliest the constraint allows;
    // temperature 0 only (a sampled request with a constraint is an error). Not owned.
    token_constraint * constraint = nullptr;
    // what the prompt reuses of the context's KV cache (prefix: exact; pie: lossy, opt-in)
    prompt_cache_params prompt_cache;
};

// per-drafter counters (vLLM / common_speculative style)
struct source_stats {
    int64_t n_drafted  = 0; // draft nodes this source proposed that went to the target
    int64_t n_accepted = 0; // of those, accepted
    int64_t n_offered  = 0; // passes in which this source offered nodes (before sizing): for a draft
                            // model, its proposals (each costs up to gamma draft-model passes)
};

struct generate_result {
    token_vec   tokens;             // generated tokens; an EOG token ends generation and is not included
    std::string text;               // detokenized tokens, cut at a stop string
    int32_t     prompt_tokens = 0;
    int32_t     prompt_cached = 0;   // of those, tokens whose KV an earlier request left in the context
                                     // (in place or, prompt_shifted of them, moved)
    int32_t     prompt_shifted = 0;  // of those, tokens it left at another position (PIE reuse)
    int32_t     prompt_stale  = 0;   // prompt tokens whose KV was computed against another text (PIE)
    double      prompt_ms     = 0.0; // prefill wall time
    double      gen_ms        = 0.0; // generation wall time (after the prompt)
    double      first_pass_ms = 0.0; // of gen_ms: until the first pass's tokens are known; that pass
                                     // decodes the prompt's uncached end, which llama-server's timings
                                     // count as prompt time (prompt_ms + first_pass_ms ~ time to first token)
    int32_t     first_pass_tokens = 0; // of tokens: those the first pass gave (1 without drafts)
    int32_t     target_passes = 0;   // target passes that yielded tokens, the prompt pass included
    int64_t     draft_tokens  = 0;   // draft nodes sent to the target
    int64_t     accepted      = 0;   // draft tokens accepted
    double      draft_ms      = 0.0; // time spent in drafters
    double      decode_ms     = 0.0; // time in the target's batch decodes (generation passes)
    double      decode_model_ms = 0.0; // the cost model's figure for those decodes (sized modes only)
    double      checkpoint_ms = 0.0; // a recurrent state's checkpoints saved and loaded (context::checkpoints)
    // both by the pass's depth (cost_depth_bucket of the tokens cached before it)
    double      decode_ms_at[COST_DEPTH_BUCKETS] = {};
    double      decode_model_ms_at[COST_DEPTH_BUCKETS] = {};
    source_stats by_source[DRAFT_SOURCE_COUNT]; // indexed by draft_source
    // the same nodes counted for every drafter that proposed them, placed or agreed (n_offered unused):
    // a prediction's accepted and rejected tokens are Reuse's here
    source_stats by_proposer[DRAFT_SOURCE_COUNT];
    std::string drafters;            // the drafters that ran, "+"-joined ("" = autoregressive; `auto` resolved)
    std::string policy;              // the acceptance policy that verified them (sampling when a method's
                                     // own policy was not named and the temperature is above 0)
    stop_reason stop = STOP_REASON_NONE;
    std::string error;               // when stop == STOP_REASON_ERROR

    double tokens_per_s() const { return gen_ms > 0 ? 1000.0 * (double) tokens.size() / gen_ms : 0.0; }
    // tokens produced per target pass, a final EOG included (1 for autoregressive decoding)
    double tokens_per_pass() const {
        const double n = (double) tokens.size() + (stop == STOP_REASON_EOG ? 1 : 0);
        return target_passes > 0 ? n / target_passes : 0.0;
    }
};

// One token at a time: the reference every speculative mode must equal at temperature 0.
generate_result generate_ar(context & ctx, std::span<const llama_token> prompt, const generate_params & p);

// ----------------------------------------------------------------------------
// output_sink: turns committed tokens into text, applies EOG, stop strings, n_predict and
// streaming. Both decoders feed it token by token.
class output_sink {
public:
    output_sink(const model & m, const generate_params & p, generate_result & r);
    // false once generation must stop (r.stop says why); the token is recorded unless it is EOG
    bool push(llama_token token);
    // flush held-back text at the end
    void finish();

private:
    const model & model_;
    const generate_params & params_;
    generate_result & result_;
    // false when a line rule (n_indent, t_max_ms) ends the text; text_before: its length before
    // the last piece
    bool line_rules(size_t text_before);

    std::string pending_; // text not yet streamed
    size_t max_stop_len_ = 0;
    size_t line_scan_ = 0; // n_indent: lines that begin after text_[line_scan_, ...) newlines are undecided
    std::chrono::steady_clock::time_point t0_; // t_max_ms counts from here: the first token's push
    bool clock_started_ = false;
};

// checks a prompt against the context (and a constraint against the sampling) before decoding;
// false with r.error set
bool generate_check_prompt(const context & ctx, std::span<const llama_token> prompt, generate_result & r,
                           const token_constraint * constraint = nullptr, const sampling_params & sampling = {});

// decodes the prompt through the prompt cache but for its last *n_tail tokens, which the first pass
// decodes with its draft (their last is the draft's root): one llama_decode fewer a request than a
// prefill of the whole prompt before it. *n_tail is at least 1 and at most tail_max, and never reaches
// into what the cache holds (those are not decoded again). Counts the tokens it reused in r; false
// with r.error set
bool generate_prefill(context & ctx, batch & b, std::span<const llama_token> prompt, const prompt_cache_params & pc,
                      generate_result & r, int32_t tail_max, int32_t * n_tail);

} // namespace editspec
