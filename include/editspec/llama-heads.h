// A model-native head (llama.cpp's draft-mtp, -eagle3, -dflash, -dspark; src/draft/llama-heads.cpp)
// shared by every request of a step engine: one head context with a sequence per view. Its catch-up
// decode follows each step of the engine (the step's batch, every request's rows, in one decode: the
// step hook), and the drafts of the requests that want one at the same time go in one
// common_speculative_draft, on the engine's thread, as llama-server drives a head for its slots.
//
//     std::unique_ptr<editspec::shared_head> h = editspec::shared_head_create("llama-draft-mtp", *engine, in, &err);
//     in.target_ctx = view.get();  in.head = h.get();   // the row's drafter drafts through h
//
// A request's drafter on a view of `engine` takes h (drafters.h: drafter_inputs::head); without one,
// a head row needs a context of its own. Destroy it before the engine, with no request running.
#pragma once

#include "editspec/drafters.h"
#include "editspec/step.h"

#include <memory>
#include <string>

namespace editspec {

struct shared_head_stats {
    int64_t steps  = 0;    // the engine's steps the head followed (one catch-up decode each)
    int64_t calls  = 0;    // draft calls (common_speculative_draft)
    int64_t drafts = 0;    // requests' drafts they made (drafts per call: / calls)
    double  follow_ms = 0; // time in the catch-up decodes
    double  draft_ms  = 0; // time in the draft calls
};

class shared_head {
public:
    virtual ~shared_head() = default;
    // the table's row whose kind of head this is (llama-draft-mtp for efficientedit-mtp)
    virtual const char * row() const = 0;
    virtual shared_head_stats stats() const = 0; // any thread
};

// the head of `row`'s kind (a head row, or efficientedit-mtp) for every view of `engine`: in.target
// and in.head_model name the models, in.settings its draft length and p-min. Null with *error when
// the models hold no such head (drafter_head_missing) or its context cannot be made.
std::unique_ptr<shared_head> shared_head_create(const std::string & row, step_engine & engine, const drafter_inputs & in,
                                                std::string * error);

} // namespace editspec
