// Document sessions (PIE): a document whose tokens and KV cache follow the user's text
// edits instead of being encoded again.
//
//     editspec::doc_session s(ctx, {editspec::KV_REUSE_PIE});
//     s.open(text, &err);                              // encodes the document once
//     s.edit({offset, n_delete, "inserted"}, &st, &err); // the KV follows the edit
//     std::string line = s.predict_line(64);           // greedy, the next non-comment line
//
// An edit re-tokenizes the document and diffs the tokens (an edit tokenized alone differs from
// the same text tokenized in place), so the changed span is the smallest token span that differs:
// old tokens [a, old_end) became new tokens [a, new_end). The KV then follows one of three
// strategies (§3 of the paper), pie.h's modes:
//
//   KV_REUSE_PREFIX    "recompute": drop every cell from a on and encode the new tokens from a (exact;
//                      the reference)
//   KV_REUSE_CONFLICT  drop the span's cells, encode the new tokens, keep the later cells at their old
//                      positions (the paper's "conflict fast encoding", its failing baseline)
//   KV_REUSE_PIE       drop the span's cells, shift the later cells by Δ = new_end - old_end so that RoPE
//                      re-rotates their keys to the new positions, encode the new tokens at theirs: the
//                      plan of one span that pie_apply carries out, as for a request
//
// The later cells keep KV computed against the old text: they are "stale" (counted per token);
// drift control re-encodes them once more than drift_max are stale (refresh()).
//
// Sequence 0 holds every document token but the last, at positions 0 .. n-2: the last one is
// decoded when a prediction needs its logits. New tokens go in through a spare sequence (1) that
// holds the prefix, since llama.cpp requires a sequence's new positions to follow its last one;
// they are then copied into sequence 0. The context needs n_seq_max >= 2.
#pragma once

#include "editspec/engine.h"
#include "editspec/pie.h"

#include <cstdint>
#include <string>
#include <vector>

namespace editspec {

struct text_edit {
    size_t offset = 0;    // bytes into the document
    size_t n_delete = 0;  // bytes removed from offset
    std::string insert;   // text inserted at offset
};

struct session_params {
    kv_reuse_mode strategy = KV_REUSE_PIE; // pie.h: prefix ("recompute"), pie or conflict
    int32_t drift_max = -1; // refresh() re-encodes the stale tokens once more than this many; -1 = never
};

struct edit_stats {
    int32_t first = 0;        // a: the first token that changed
    int32_t n_removed = 0;    // old tokens in the changed span
    int32_t n_inserted = 0;   // new tokens in it
    int32_t n_encoded = 0;    // tokens the KV update encoded
    int32_t n_stale = 0;      // stale tokens after the edit
    double  kv_ms = 0.0;      // the KV update: removal, shift, encoding
    bool    fallback = false; // PIE asked, the cache cannot shift: recomputed
};

class doc_session {
public:
    doc_session(context & ctx, const session_params & params = {});

    // tokenizes and encodes the document (everything the cache held is dropped). False with *error
    // (a document longer than the context).
    bool open(const std::string & text, std::string * error);
    // applies the edit to the text and the KV cache. False with *error for an edit outside the
    // document, a document that would not fit, or a decode failure (the session is then closed).
    bool edit(const text_edit & e, edit_stats * st, std::string * error);
    // drift control: when more than drift_max tokens are stale, re-encodes from the first stale one.
    // Returns the tokens re-encoded (0: nothing to do), -1 on a decode failure.
    int32_t refresh();
    // greedy continuation of the document, at most n_max tokens, cut after its first line that is
    // neither blank nor a comment; that line, stripped ("" when none). The KV is left as it was.
    std::string predict_line(int32_t n_max);

    // A request on the document (an apply, a chat about it) runs on the session's context and starts
    // from the document's KV: lend() makes the document the context's cached prompt, with its stale
    // marks, and says how the request may reuse it (KV_REUSE_PIE: the document's spans shifted into
    // the prompt; else its exact prefix). False for a KV_REUSE_CONFLICT session (its cells are not at their
    // tokens' positions).
    bool lend(prompt_cache_params & reuse);
    // after the request: the document's KV again, rebuilt from what the request left (its spans
    // shifted back, the rest encoded, pie.h). False on a decode failure: the session is
    // then closed.
    bool take_back(prefill_stats * st);

    const std::string & text() const { return text_; }
    const token_vec & tokens() const { return tokens_; }
    int32_t n_stale() const;
    const session_params & params() const { return params_; }

private:
    bool encode(std::span<const llama_token> t, llama_pos pos0, bool spare);
    bool recompute_from(int32_t a);
    bool keep_around(kv_reuse_mode how, int32_t a, int32_t old_end, int32_t new_end, edit_stats & s);
    bool fail(std::string * error, const std::string & msg);

    context & ctx_;
    session_params params_;
    std::string text_;
    token_vec tokens_;
    std::vector<uint8_t> stale_; // per token: KV computed against an older text
    std::vector<llama_pos> pos_; // per token: its cell's position (i, except after KV_REUSE_CONFLICT edits)
    batch b_;
};

// the first line of `text` that is neither blank nor a comment ("#", "//"), stripped; "" when none
std::string session_first_code_line(const std::string & text);

} // namespace editspec
