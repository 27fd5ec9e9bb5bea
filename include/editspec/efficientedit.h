// EfficientEdit's edit mode as one drafter (§III): Reuse drafts the original code while it
// is in step with the output; after a rejection (an edit) the Generate phase's drafter (a draft
// model) writes the edit until Reuse re-syncs.
//
//     auto d = std::make_unique<editspec::efficientedit_drafter>(
//         std::make_unique<editspec::reuse_drafter>(original), std::move(model_drafter));
//
// EfficientEdit (Wang et al., "EfficientEdit: Accelerating Code Editing via Edit-Oriented
// Speculative Decoding") in this code, part by part:
//   Reuse, self-editing positioning, re-sync (§III-A)   reuse.h, src/draft/reuse.cpp
//   the two phases (§III-A/B)                           this drafter, src/draft/efficientedit.cpp
//   entropy-aware verification (§III-B, eq. 9-10)       VERIFY_POLICY_ENTROPY (verify.h), src/verify/entropy.cpp
//   the Top-k and Direct baselines (§V-C, Table III)     src/verify/topk.cpp, src/verify/direct.cpp
//   edit-oriented fine-tuning (§III-B, eq. 8)           tools/train (labels.py, run.py; README "draft")
//   the method's row and its settings (--entropy-k)      efficientedit_drafters(), method_settings (drafters.h)
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
class efficientedit_drafter : public drafter_pair<reuse_drafter> {
public:
    using drafter_pair::drafter_pair; // (Reuse, the Generate phase's drafter)

    const char * name() const override { return "efficientedit"; }
    void propose(std::span<const llama_token> history, draft_tree & tree, int32_t budget) override;

    reuse_drafter & reuse() { return *first_; }
};

} // namespace editspec
