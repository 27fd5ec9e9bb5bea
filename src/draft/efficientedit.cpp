// EfficientEdit's two phases: Reuse, else Generate.
//
// ref: Wang et al., "EfficientEdit: Accelerating Code Editing via Edit-Oriented Speculative Decoding"
// §III-A (Reuse), §III-B (Generate)
#include "editspec/drafters.h"
#include "editspec/draft-model.h"
#include "editspec/efficientedit.h"

namespace editspec {

void efficientedit_drafter::propose(std::span<const llama_token> history, draft_tree & tree, int32_t budget) {
    if (budget <= 0) {
        return;
    }
    if (reuse().synced()) {
        const int32_t before = tree.size();
        reuse().propose(history, tree, budget);
        if (tree.size() > before) {
            return;
        }
    }
    // Generate phase: the draft model first, then Reuse's re-sync candidates as siblings, then with
    // what is left the original's continuation below the deepest node of the draft model's path
    // that re-joins it (the paper's return to Reuse once the edit is written, inside one pass)
    const int32_t before = tree.size();
    second_->propose(history, tree, budget);
    const int32_t gen_end = tree.size();
    if (reuse().synced()) {
        return;
    }
    int32_t left = budget - (tree.size() - before);
    if (left > 0) {
        reuse().propose(history, tree, left);
        left = budget - (tree.size() - before);
    }
    if (left > 0 && gen_end > before) {
        reuse().propose_after(history, tree, before, gen_end, left);
    }
}

// the table's row (drafters.h): entropy-aware verification by default (§III-B), on the draft
// model's nodes only
std::span<const drafter_desc> efficientedit_drafters() {
    static const drafter_desc rows[] = {
        {"efficientedit",
         "EfficientEdit: Reuse, and the draft model in the Generate phase only (after a rejection until Reuse "
         "re-syncs); entropy-aware verification of the draft model's nodes by default",
         DRAFTER_NEEDS_ORIGINAL | DRAFTER_NEEDS_DRAFT_MODEL, VERIFY_POLICY_ENTROPY, DRAFTER_LOSSY_MODEL_ONLY,
         [](const drafter_desc & self, const drafter_inputs & in, std::string * error) -> std::unique_ptr<drafter_i> {
             auto sd = model_drafter_create(*in.target, *in.draft_model, in.draft_params, error, in.draft_ctx, in.draft_kept);
             if (!sd) {
                 if (error) *error = std::string(self.name) + ": " + *error;
                 return nullptr;
             }
             return std::make_unique<efficientedit_drafter>(std::make_unique<reuse_drafter>(in.original), std::move(sd));
         }},
    };
    return rows;
}

} // namespace editspec
