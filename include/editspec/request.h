// Requests: the one path from "a model file, a method and a prompt" to a generate_result, shared by
// `editspec complete`, `editspec edit`, `editspec bench` and the server's slots.
//
//     editspec::runner_params rp;
//     rp.model_path = "target.gguf";
//     rp.draft_model_path = "draft.gguf";          // "" = none; its vocabulary is checked here
//     editspec::runner rn;
//     if (!editspec::runner_open(rp, rn, &err)) ...;
//     editspec::request rq;
//     editspec::request_edit_tokens(*rn.target.model, "Rename x to count.", code, rq);
//     editspec::method_spec ms;
//     editspec::method_parse("reuse+lookup-longest", ms, &err);
//     editspec::generate_result r;
//     if (!editspec::runner_generate(rn, ms, rq, r, &err)) ...;
//
// A runner owns the target, the draft model, one context sized for speculative trees, and the cost
// model (measured or loaded from the cache the first time a method sizes drafts with it). It runs
// one request at a time.
#pragma once

#include "editspec/cost.h"
#include "editspec/datastore.h"
#include "editspec/draft-model.h"
#include "editspec/apply.h"
#include "editspec/engine.h"
#include "editspec/generate.h"
#include "editspec/methods.h"
#include "editspec/sizing.h"
#include "editspec/verify.h"

#include <memory>
#include <string>

namespace editspec {

struct runner_params {
    std::string model_path;        // the target GGUF
    std::string draft_model_path;  // a draft model with the target's vocabulary, "" = none
    std::string head_model_path;   // a head file over the target (EAGLE-3, DFlash; --head-model), "" = none
    int32_t n_ctx      = 4096;     // the target's KV cache, tokens (the draft model's too)
    int32_t n_threads  = 0;        // 0 = all cores
    bool    flash_attn = true;
    ggml_type kv_type  = GGML_TYPE_F16; // the target's KV cache, K and V (--cache-type; a draft model's stays F16)
    int32_t rs_snapshots = CONTEXT_RS_ROLLBACK; // a recurrent target's snapshots, 0 = checkpoints (--rs-snapshots)
    // one sequence per leaf of a draft tree (up to 64 leaves); false: one sequence, autoregressive only
    bool    trees      = true;
    draft_model_params draft;      // gamma, p_min (n_ctx and n_threads follow the above)
    method_settings settings;      // the papers' settings (drafters.h)
    std::vector<std::string> datastore_paths; // common retrieval datastores ("rest", "fastcoder"), checked against the target's tokenizer
    std::vector<std::string> repo_datastore_paths; // the repository's ("fastcoder")
};

struct runner {
    runner_params params;
    model_load_result target;
    model_load_result draft;       // empty without a draft model
    model_load_result head;        // empty without a head file
    std::unique_ptr<context> ctx;
    cost_model cost;               // empty until a method needs it
    cost_model draft_cost;         // the draft model's, fetched with `cost` (empty without a draft model)
    std::vector<std::unique_ptr<datastore>> datastores; // memory-mapped, shared read-only by slots
    std::vector<const datastore *> datastore_ptrs;     // the same, as drafters take them
    std::vector<const datastore *> repo_datastore_ptrs; // the repository's, after them in `datastores`
};

// n_seq_max for a context of n_ctx tokens: 1 without trees, else one per leaf of up to 64 leaves
// and sequence 0 (libllama aborts when n_seq_max > n_ctx). 1 for a recurrent model, whose drafts are
// chains: libllama keeps a recurrent state (and each of its snapshots) per sequence, 65 of them
// Qwen3-Coder-Next's 76 MB each (4.9 GB), with snapshots 17 times that
int32_t runner_n_seq_max(bool trees, bool recurrent, int32_t n_ctx);

// Loads the target and the draft model (checked against the target's vocabulary) and creates the
// context. False with *error naming the file and what is wrong; out.target / out.draft then hold
// the models that loaded and fit (so a caller can tell bad input from a context the machine refused).
bool runner_open(const runner_params & p, runner & out, std::string * error);

// the cost model: cached per model file and thread count, measured the first time (seconds); with a
// draft model its cost model too (a draft chain stops where a pass costs more than it likely saves)
bool runner_cost(runner & rn, std::string * error);

struct request {
    token_vec prompt;
    token_vec original;                     // edit requests: the code being edited (Reuse), else empty
    generate_params gen;
    const verify_forced * forced = nullptr; // replay benchmarks: the target's choices (verify.h)
    accept_stats * stats = nullptr;         // acceptance statistics carried across requests, null = per request
    std::span<const datastore * const> repo_datastores; // "fastcoder": this request's repository, else the runner's
    retrieval_cache * cache = nullptr;      // "fastcoder": a cache carried across requests, null = per request
    context * draft_ctx = nullptr;          // a context on the draft model lent to the request's draft-model
                                            // drafter (drafters.h), null = it makes its own
    token_vec * draft_kept = nullptr;       // with draft_ctx: the tokens it holds from the last request
    shared_head * head = nullptr;           // the step engine's head a head row drafts through (llama-heads.h),
                                            // null = it makes its own (a context of its own)
    std::shared_ptr<token_constraint> constraint; // constrained decoding (constraint.h), null = none; gen.constraint is set from it
    // edits and applies: the fewest tokens their whole answer takes (request_answer_tokens), 0 = unknown
    // (a completion); a request whose prompt and answer cannot fit is refused before it decodes
    int32_t n_answer = 0;
};

// edit requests: the prompt (the model's chat template, else the plain edit template; edit.h) and
// the original code's tokens
void request_edit_tokens(const model & m, const std::string & instruction, const std::string & code, request & rq,
                         prompt_layout layout = PROMPT_LAYOUT_INSTRUCTION_FIRST);

// apply requests (apply.h): the prompt (showing the file as `view` says) and the whole original code's
// tokens, as for an edit; with constrain, an apply_constraint on the output
void request_apply_tokens(const model & m, const apply_input & in, request & rq, bool constrain = false,
                          prompt_layout layout = PROMPT_LAYOUT_INSTRUCTION_FIRST, apply_view view = APPLY_VIEW_FILE);

// a request's `prediction` (OpenAI's Predicted Outputs: the text the answer is expected to repeat)
// as Reuse's original, tokenized as an edit's code is (edit_original_tokens); an empty one leaves
// rq.original empty
void request_prediction_tokens(const model & m, const std::string & prediction, request & rq);

// "" when the prompt leaves room for a token in a context of n_ctx; else the error saying both sizes
std::string request_over_context(const request & rq, int32_t n_ctx);

// The tokens an apply's whole answer takes, about: the merged file's (`original`: the file's tokens,
// less the lines the snippet deletes, plus the snippet's lines that are not the file's; markers and
// fences left out), a chat model's fence and the end. A changed line counts as new while its old line
// still counts, so this errs high by the changed lines, never by the file. When the file alone takes
// more than `limit` tokens (0 = none), the file's count: too many either way, and the snippet is not
// aligned (a megabyte's file is refused in the time its tokenization takes).
int32_t request_apply_answer_tokens(const model & m, const apply_input & in, std::span<const llama_token> original,
                                    int32_t limit = 0);

// The context an edit or apply needs to finish: its prompt, its whole answer (rq.n_answer) and one
// token; rq.prompt.size() + 1 for other requests
int32_t request_ctx_needed(const request & rq);

// What stops an edit or apply with its whole answer before it decodes: "" when it fits a context of
// n_ctx and n_predict (-1 = no limit); else which limit, with the sizes, for the caller to name its
// flag after. over_ctx: the context is the limit (else n_predict).
std::string request_answer_room(const request & rq, int32_t n_ctx, int32_t n_predict, bool * over_ctx);

// Runs the request with the method: autoregressive for "ar", else the speculative decoder with the
// method's drafters, policy and sizing (the cost model is fetched when the method sizes by it).
// False with *error for a request the method cannot run (e.g. "reuse" without original code);
// decoding errors come back in r.stop / r.error.
bool runner_generate(runner & rn, const method_spec & ms, const request & rq, generate_result & r, std::string * error);

// the same in another context on the runner's target (a server slot's); the cost model must have
// been fetched already when the method sizes by it (runner_cost), so that slots share it read-only
bool runner_generate_in(const runner & rn, context & ctx, const method_spec & ms, const request & rq,
                        generate_result & r, std::string * error);

// another context on the runner's target with the runner's parameters (a server slot's)
std::unique_ptr<context> runner_new_context(const runner & rn, std::string * error);

} // namespace editspec
