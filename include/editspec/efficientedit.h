// EfficientEdit's edit mode as one drafter (§III): Reuse drafts the original code while it
// is in step with the output; after a rejection (an edit) the Generate phase's drafter (a draft
// model) writes the edit until Reuse re-syncs.
//
//     auto d = std::make_unique<editspec::efficientedit_drafter>(
//         std::make_unique<editspec::reuse_drafter>(original), std::move(model_drafter));
#pragma once

#include "editspec/reuse.h"

#include <memory>

namespace editspec {

// EfficientEdit's two phases as one drafter: Reuse while it has a draft, else `generate` (the
// Generate phase, e.g. a draft model) proposes, with Reuse's re-sync candidates beside its path and
// the original's continuation below it where the path re-joins the original (propose_after). Both
// hear every accept(). Nodes keep their own sources, so spec_params::lossy_ok can pick the
// generated ones (DRAFT_SOURCE_MODEL).
//
// What the continuation below the path gains: docs/results/design-notes/efficientedit-continuation.md.
class efficientedit_drafter : public drafter_i {
public:
    efficientedit_drafter(std::unique_ptr<reuse_drafter> reuse, std::unique_ptr<drafter_i> generate);

    const char * name() const override { return "efficientedit"; }
    // the source of its costlier part: the nodes it adds carry their own (Reuse's, the draft model's)
    uint8_t source() const override { return generate_->source(); }
    void begin(std::span<const llama_token> prompt) override;
    void propose(std::span<const llama_token> history, draft_tree & tree, int32_t budget) override;
    void accept(std::span<const llama_token> accepted) override;
    // both parts hear what was sent, so the Generate phase's draft model backs off on its own
    // (draft_backoff) while the sizing drops its nodes, and Reuse keeps drafting meanwhile
    void sized(const draft_tree & sent) override;

    reuse_drafter & reuse() { return *reuse_; }

private:
    std::unique_ptr<reuse_drafter> reuse_;
    std::unique_ptr<drafter_i> generate_;
};

} // namespace editspec
