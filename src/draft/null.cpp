// A drafter that never proposes: the speculative loop's own overhead against plain decoding.
#include "editspec/drafters.h"

namespace editspec {

namespace {

struct null_drafter : drafter_i {
    const char * name() const override { return "none"; }
    uint8_t source() const override { return DRAFT_SOURCE_TEST; }
    void begin(std::span<const llama_token>) override {}
    void propose(std::span<const llama_token>, draft_tree &, int32_t) override {}
    void accept(std::span<const llama_token>) override {}
};

} // namespace

std::span<const drafter_desc> null_drafters() {
    static const drafter_desc rows[] = {
        {"none", "never proposes (measures the speculative loop's overhead)", 0, VERIFY_POLICY_GREEDY,
         DRAFTER_LOSSY_NOT_REUSE,
         [](const drafter_desc &, const drafter_inputs &, std::string *) -> std::unique_ptr<drafter_i> {
             return std::make_unique<null_drafter>();
         }},
    };
    return rows;
}

} // namespace editspec
