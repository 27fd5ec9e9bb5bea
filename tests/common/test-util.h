// Shared helpers for the test executables.
#pragma once

#include "editspec/datastore.h"
#include "editspec/draft.h"
#include "editspec/engine.h"
#include "editspec/generate.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace editspec::test {

// a drafter that proposes the reference continuation (e.g. the greedy output) from the current
// position: n_branches chains of 1-12 tokens, each spoiled at a random place half the time, so
// passes of many lengths, accepted and rejected, reach the target
struct noisy_reference_drafter : drafter_i {
    const token_vec & ref;
    size_t n_prompt = 0;
    std::mt19937 rng;
    int32_t n_vocab;
    int32_t n_branches;
    noisy_reference_drafter(const token_vec & ref, uint32_t seed, int32_t n_vocab, int32_t n_branches = 1)
        : ref(ref), rng(seed), n_vocab(n_vocab), n_branches(n_branches) {}
    const char * name() const override { return "noisy-reference"; }
    uint8_t source() const override { return DRAFT_SOURCE_TEST; }
    void begin(std::span<const llama_token> prompt) override { n_prompt = prompt.size(); }
    void accept(std::span<const llama_token>) override {}
    void propose(std::span<const llama_token> history, draft_tree & tree, int32_t budget) override;
};

// the tiny random-weight models made by the ctest fixture (make-test-models)
const char * tiny_model_path();     // F32 weights
const char * tiny_model_q8_path();  // Q8_0 weights
const char * tiny_qwen2_path();     // Qwen2.5-Coder's vocabulary (no BOS), F32 weights

// a test's model and two contexts of it made alike by `make`: the one it works in and the one it compares
// with (a fresh or cold encoding); a failure says which did not load
::testing::AssertionResult model_and_two_contexts(const std::string & path, std::unique_ptr<model> & m,
                                                  std::unique_ptr<context> & a, std::unique_ptr<context> & b,
                                                  std::unique_ptr<context> (*make)(const model &));

// a fixture: the Q8_0 test model and two contexts of it made by Make, `ctx` the one a test works in and
// `other` the one it compares with (derived fixtures name it: fresh, cold)
template <std::unique_ptr<context> (*Make)(const model &)>
struct two_contexts_test : public ::testing::Test {
    std::unique_ptr<model> m;
    std::unique_ptr<context> ctx, other;
    void SetUp() override { ASSERT_TRUE(model_and_two_contexts(tiny_model_q8_path(), m, ctx, other, Make)); }
};

// loads a model or fails the calling test with the loader's message
std::unique_ptr<model> load_or_fail(const std::string & path, bool vocab_only = false);

// argmax outputs (engine_argmax_outputs) set for a scope, off again after it (a failed assertion too)
struct argmax_outputs_on {
    explicit argmax_outputs_on(bool on = true) { engine_set_argmax_outputs(on); }
    ~argmax_outputs_on() { engine_set_argmax_outputs(false); }
    argmax_outputs_on(const argmax_outputs_on &) = delete;
    argmax_outputs_on & operator=(const argmax_outputs_on &) = delete;
};

// path of llama.cpp's ggml-vocab-<name>.gguf (e.g. "deepseek-coder")
std::string vocab_path(const std::string & name);

// a context with these parameters, or null with the calling test failed by context_create's error
std::unique_ptr<context> context_or_fail(const model & m, const context_params & cp);

// a context for speculative tests: n_ctx tokens, one thread by default (a tiny model gains
// nothing from threads, and spinning threads stall on a busy machine), 65 sequences, batches of 512;
// a recurrent model's snapshots (0: checkpoints)
std::unique_ptr<context> make_spec_context(const model & m, int32_t n_ctx, int32_t n_threads = 1,
                                           int32_t rs_snapshots = CONTEXT_RS_ROLLBACK);

// a small Python module (imports and read_config), the start of the test documents of KV edits
inline constexpr const char * k_read_config_py =
    "import os\n\n"
    "def read_config(path):\n"
    "    with open(path) as f:\n"
    "        text = f.read()\n"
    "    values = {}\n"
    "    for line in text.splitlines():\n"
    "        key, _, value = line.partition('=')\n"
    "        values[key.strip()] = value.strip()\n"
    "    return values\n\n";

// a context of n_ctx tokens with 2 sequences (a spare one for KV edits), one thread
std::unique_ptr<context> make_two_seq_context(const model & m, int32_t n_ctx);

// the model of a weight type made by the ctest fixture (make-typed-test-models), e.g. "q4_k_m": tiny-256's
// (every type), or tiny-qwen3moe's (a mixture of experts: q8_0, q4_0, q4_k_m, q6_k)
std::string typed_model_path(const std::string & type, const std::string & shape = "tiny-256");

// a random prompt of 1-30 code-like words, BOS first
token_vec random_code_prompt(const model & m, std::mt19937 & rng);

// a fresh folder under /tmp, removed with everything in it at scope exit
struct temp_dir {
    std::filesystem::path path;
    temp_dir();
    ~temp_dir();
    temp_dir(const temp_dir &) = delete;
    temp_dir & operator=(const temp_dir &) = delete;
    // file names in the folder, sorted
    std::vector<std::string> names() const;
};

// n random code prompts and their greedy (ar) outputs of n_predict tokens; text = the prompt and
// the output as text (what a datastore of "the model's own outputs" holds)
struct ar_case {
    token_vec prompt;
    generate_result ar;
    std::string text;
};
std::vector<ar_case> ar_cases(context & ctx, std::mt19937 & rng, int32_t n, int32_t n_predict);

// a datastore of the texts (one file each: dir/NAME0.py, ...) at dir/NAME.eds, opened into ds;
// false with *error
bool index_texts(const model & m, const std::filesystem::path & dir, const std::string & name,
                 const std::vector<std::string> & texts, datastore & ds, std::string * error);

// sequence 0's cells as llama_state_seq_get_data writes them (one stream, no cell extension):
// positions in cell order, and every layer's key row per cell
struct kv_cells {
    std::vector<llama_pos> pos;
    std::vector<std::vector<std::vector<uint8_t>>> k; // [layer][cell] row bytes
    int32_t k_type = -1;
};
kv_cells read_kv_cells(context & ctx);

// F16 bytes -> floats
std::vector<float> f16_row(const std::vector<uint8_t> & row);

// a file's bytes ("" when it cannot be read)
std::string read_text(const std::filesystem::path & path);

// runs a shell command, returns its exit status; *out (when given) becomes its standard output
int run_command(const std::string & cmd, std::string * out = nullptr);

} // namespace editspec::test
