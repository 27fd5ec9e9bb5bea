// The table of drafters: one row (drafter_desc) per name a method may use. Each drafter's file
// defines its rows beside the drafter (`std::span<const drafter_desc> NAME_drafters()`), and
// src/draft/drafters.cpp lists the files, one word each. The CLI, the server, the bench, --help,
// `auto` (a row's auto_rank and auto_when) and the lossless test sweeps read the table, so a new
// drafter is one file and one line there, and enters the lossless tests by itself
// (tests/cli/test-edit.cpp: a_drafter_added_as_one_row_...). Its nodes carry one of draft.h's
// source families (the statistics' slots: lookup, reuse, copy, retrieval, model, test).
//
//     const drafter_desc * d = drafter_find("lookup-longest");
//     std::string err;
//     std::unique_ptr<drafter_i> dr = d->make(inputs, &err);   // null with err when a need is missing
//
// Rows say what a drafter needs from a request (the code being edited, a draft model, a
// datastore), the acceptance policy its method verifies with unless one is named (EfficientEdit:
// entropy-aware), and which of its nodes a lossy policy may judge.
#pragma once

#include "editspec/datastore.h"
#include "editspec/draft-model.h"
#include "editspec/draft.h"
#include "editspec/engine.h"
#include "editspec/verify-policy.h"

#include <memory>
#include <span>
#include <string>

namespace editspec {

class retrieval_cache;
class shared_head; // llama-heads.h

// the papers' settings a user may change (--copy-gamma, ...; the papers' defaults): the drafters read
// theirs, the acceptance policies theirs (request.cpp)
struct method_settings {
    int32_t copy_gamma   = 3;    // CopySpec γ: tokens matched
    int32_t copy_len     = 10;   // CopySpec |S|: tokens copied per attempt
    float   alpha        = 1.0f; // FastCoder α: weight of a repository continuation
    float   beta         = 1.0f; // FastCoder β: weight of a common one
    float   skip_p       = 0.5f; // FastCoder p: retrieval probability at a line's first token
    int32_t cache_min    = 50;   // FastCoder l: the cache is searched once it holds this many sequences
    int32_t retrieve_max = 16;   // REST, FastCoder: the longest suffix looked up, tokens
    int32_t top_k        = 3;    // the topk policy: a draft among the target's top k is accepted
    int32_t entropy_k    = 5;    // EfficientEdit's entropy-aware policy: the base threshold k
    int32_t head_max     = 3;    // a model-native head's most tokens a pass (llama-server's --spec-draft-n-max)
    float   head_p_min   = 0.0f; // ... and the draft probability it stops below (--spec-draft-p-min)
};

// "" when every setting is in range, else the first one that is not, named as its option
std::string method_settings_check(const method_settings & s);

// what a request offers the drafters
struct drafter_inputs {
    std::span<const llama_token> original; // the code being edited (Reuse), empty otherwise
    const model * target      = nullptr;   // the target model (vocabulary checks, FastCoder's trie)
    context * target_ctx      = nullptr;   // the context the target decodes the request in (a model-native
                                           // head reads its hidden states: llama-heads.cpp), null = none
    const model * draft_model = nullptr;   // a draft model (--draft-model), null = none
    const model * head_model  = nullptr;   // a head file over the target (--head-model: EAGLE-3, DFlash), null = none
    draft_model_params draft_params;       // the draft model's gamma, context, threads
    context * draft_ctx       = nullptr;   // a context on the draft model to draft in (a server slot's stream of
                                           // the draft model's step engine), null = the drafter makes its own
    token_vec * draft_kept    = nullptr;   // with draft_ctx: the tokens it holds from the last request (model_drafter_create)
    std::span<const datastore * const> datastores;      // the common datastores (--datastore)
    std::span<const datastore * const> repo_datastores; // the repository's (--repo-datastore)
    retrieval_cache * cache = nullptr;     // FastCoder: a cache kept across requests, null = per request
    shared_head * head        = nullptr;   // a step engine's head (llama-heads.h) that a head row drafts through
                                           // on a view of that engine, null = none (a head row needs a context
                                           // of its own then)
    method_settings settings;
};

enum drafter_need : uint8_t {
    DRAFTER_NEEDS_ORIGINAL    = 1, // the code being edited (an edit or apply, or `prediction`)
    DRAFTER_NEEDS_DRAFT_MODEL = 2,
    DRAFTER_NEEDS_DATASTORE   = 4, // a common or repository datastore
    DRAFTER_NEEDS_HEAD        = 8, // a head: the target's multi-token-prediction layers, or a head file of
                                   // the row's kind (drafter_head_missing says which)
};

// the nodes a lossy acceptance policy (entropy, topk, ...) may judge; the others are verified greedily
enum drafter_lossy_scope : uint8_t {
    DRAFTER_LOSSY_NOT_REUSE  = 0, // every node but Reuse's (EfficientEdit §III-A verifies the
                                  // original code greedily)
    DRAFTER_LOSSY_MODEL_ONLY = 1, // the draft model's nodes only (EfficientEdit's entropy-aware check)
};

struct drafter_desc {
    const char * name;
    const char * help;  // one line for --help and the README
    uint8_t needs = 0;  // drafter_need bits
    verify_policy policy = VERIFY_POLICY_GREEDY; // the method's policy unless it names one
    drafter_lossy_scope lossy = DRAFTER_LOSSY_NOT_REUSE;
    // a fresh drafter for one request; null with *error naming the missing input
    std::unique_ptr<drafter_i> (*make)(const drafter_desc & self, const drafter_inputs & in, std::string * error) = nullptr;
    // `auto`'s use of it: the place of its drafts (lower first: a node is credited to the drafter that
    // placed it; 0 = auto leaves it out), and when it joins beyond its needs (null: whenever they are met)
    uint8_t auto_rank = 0;
    bool (*auto_when)(const drafter_inputs & in) = nullptr;
};

// every row, in --help order (the built-in rows, then any added)
std::span<const drafter_desc> drafter_table();
// the row named `name`, null when there is none
const drafter_desc * drafter_find(const std::string & name);
// adds a row (an embedder's or a test's drafter); false when the name is taken. Call before any
// request runs: the table is not locked.
bool drafter_table_add(const drafter_desc & d);
// "a, b, c": every name, for errors and --help
std::string drafter_names_list();
// true when `in` lacks the head the head row `row` drafts with (src/draft/llama-heads.cpp); *why says what
bool drafter_head_missing(const char * row, const drafter_inputs & in, std::string * why);
// whether `in` meets d's needs; false with *error naming what is missing
bool drafter_inputs_meet(const drafter_desc & d, const drafter_inputs & in, std::string * error);

} // namespace editspec
