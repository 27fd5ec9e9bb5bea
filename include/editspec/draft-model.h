// Draft-model drafter: a small model with the target's vocabulary proposes the next γ tokens
// greedily (EfficientEdit's Generate phase, §III-B; classic speculative decoding,
// Leviathan et al. 2023; llama.cpp examples/speculative-simple).
//
//     std::string err;
//     editspec::draft_model_params dp;                 // γ = 7, greedy, p_min 0
//     auto d = editspec::model_drafter_create(target, draft, dp, &err);   // null + err on mismatch
//     std::vector<editspec::drafter_i *> ds = {d.get()};
//     generate_spec(*ctx, prompt, gp, sp, ds);
//
// The drafter decodes in a context on the draft model (sequence 0: its own, or one lent by the caller,
// e.g. a server slot's stream of a step engine over the draft model, so that every request's draft
// passes share one llama_decode) and keeps a record of the tokens that cache holds, position by position:
//
//   cache   t0 t1 ... t(H-2) t(H-1) d1 d2 ... d(γ-1)      (dγ is never decoded)
//           └──── committed (history) ───┘ └─ kept drafts ─┘
//
// Each call compares the history with that record, removes the cache from the first differing
// position on (llama_memory_seq_rm), decodes the committed tokens the cache lacks in one batch
// (logits of the last row give the first draft token), then decodes the drafts one at a time
// (γ-1 single-token passes). With keep_drafts (the default) the drafts stay in the cache: next step
// the accepted ones already match the new history and are not decoded again, the rejected ones are
// removed then. With keep_drafts off, the cache is rolled back to the committed tokens at once.
// The greedy prediction after every decoded row whose logits were read is remembered, so drafting
// again from a history the cache already covers costs no pass.
//
// Errors: a failed llama_decode logs once and disables the drafter until the next begin(); it then
// proposes nothing (generation goes on without drafts). A history longer than the draft context
// proposes nothing.
//
// Threading: one drafter serves one request at a time, on one thread (begin() resets it); the draft
// model itself may be shared by several drafters.
#pragma once

#include "editspec/draft.h"
#include "editspec/engine.h"

#include <memory>
#include <string>
#include <vector>

namespace editspec {

struct draft_model_params {
    int32_t gamma       = 7;     // draft tokens per proposal (EfficientEdit §IV-E)
    int32_t n_ctx       = 4096;  // the draft model's KV cache, tokens (0 = from the model)
    int32_t n_threads   = 0;     // 0 = all cores
    float   p_min       = 0.0f;  // stop drafting when the draft's top probability falls below this
    float   chain_p_min = 0.0f;  // decode no further once the product of the drafted tokens' probabilities
                                 // is below this: the chain is then unlikely to be accepted far enough to
                                 // repay a pass (runners set it to the draft pass's cost over the target's)
    bool    keep_drafts = true;  // leave drafted tokens in the cache until the next call shows
                                 // which were accepted (saves re-decoding accepted drafts)
};

// a draft token's confidence class (draft_node::conf) from the draft model's probability of it:
// 0 below 0.3, 1 below 0.6, 2 below 0.9, 3 from 0.9; the sizing learns each class's acceptance
uint8_t draft_model_conf(float p);

class model_drafter : public drafter_i {
public:
    ~model_drafter() override;
    const char * name() const override { return "model"; }
    uint8_t source() const override { return DRAFT_SOURCE_MODEL; }
    // clears the draft cache; the prompt is decoded with the first proposal's history (a request that
    // never asks the draft model never pays for its prefill)
    void begin(std::span<const llama_token> prompt) override;
    // adds min(gamma, budget) greedy draft tokens under the root as one path (fewer at p_min or
    // after an end-of-generation token), each in the confidence class of the draft model's softmax
    // probability of it (draft_model_conf)
    void propose(std::span<const llama_token> history, draft_tree & tree, int32_t budget) override;
    // nothing: the history passed to propose() is the truth
    void accept(std::span<const llama_token> accepted) override;
    // backs off while the sizing sends none of its nodes (draft_backoff)
    void sized(const draft_tree & sent) override { backoff_.sized(sent, source()); }

    // drafts up to n tokens after `history` (greedy), for callers that place them in the tree
    // themselves (e.g. EfficientEdit's Generate phase under a chosen parent). p_out gets the draft
    // model's probability of each token when given.
    token_vec draft(std::span<const llama_token> history, int32_t n, std::vector<float> * p_out = nullptr);

    const draft_model_params & params() const { return params_; }
    double  draft_ms()  const { return draft_ms_; }  // time spent in the draft model (begin() included)
    int64_t n_decoded() const { return n_decoded_; } // draft-model tokens decoded (prefill included)
    int64_t n_passes()  const { return n_passes_; }  // llama_decode calls on the draft model
    int64_t n_drafted() const { return n_drafted_; } // draft tokens returned by propose() and draft()
    bool    failed()    const { return failed_; }    // a decode failed since the last begin()
    int32_t n_cached()  const;                       // tokens the draft cache holds (by its record)
    llama_pos cache_pos_max() const;                 // the cache's own view: last position, -1 = empty
    int32_t n_ctx()     const;                       // the draft context's size (libllama may round params.n_ctx up)

private:
    friend std::unique_ptr<model_drafter> model_drafter_create(const model &, const model &, const draft_model_params &,
                                                               std::string *, context *, token_vec *);
    model_drafter() = default;
    void draft_into(std::span<const llama_token> history, int32_t n, token_vec & out, std::vector<float> & p);
    bool prefill(std::span<const llama_token> tokens);
    bool catch_up(std::span<const llama_token> history);
    void draft_greedy(size_t n_history, int32_t n, token_vec & out, std::vector<float> & p);
    void fail(const char * what, int64_t n_history); // logs once, stops drafting until begin()

    struct impl;
    std::unique_ptr<impl> impl_;
    draft_model_params params_;
    double  draft_ms_  = 0.0;
    int64_t n_decoded_ = 0;
    int64_t n_passes_  = 0;
    int64_t n_drafted_ = 0;
    bool    failed_    = false;
    bool    logged_    = false; // a decode failure was logged (once per drafter)
    draft_backoff backoff_;
    token_vec * kept_ = nullptr; // the lent context's record across drafters (model_drafter_create), or null
};

// null with *error set when the vocabularies differ (model_vocab_compatible: the error names both
// files and the first difference) or the draft context cannot be created. `lent`: a context on
// `draft` to decode in instead of a new one (its sequence 0 is cleared at each begin(); it must outlive
// the drafter and serve no one else meanwhile); params.n_ctx and n_threads are then its own. `kept`
// (with `lent`): the tokens the lent context's sequence 0 holds, position by position, as the last
// drafter on it left them; the drafter starts from them (a request that repeats an earlier prompt
// decodes only what differs) and writes its own back when it is destroyed. Null: the context is cleared.
std::unique_ptr<model_drafter> model_drafter_create(const model & target, const model & draft,
                                                    const draft_model_params & params, std::string * error,
                                                    context * lent = nullptr, token_vec * kept = nullptr);

} // namespace editspec
