// libFuzzer target: fast apply's parsing of a file and a snippet (src/request/apply.cpp) and the
// constraint built from them (src/request/apply-constraint.cpp), driven by tokens as a decoder would
// drive it, on the shipped target's vocabulary (loaded once, vocab only). An exception escaping is a
// crash. Input: code, a 0 byte, the snippet, a 0 byte, then token ids (2 bytes each).
// Run: scripts/fuzz.sh 1000000 fuzz-apply
#include "editspec/apply.h"
#include "editspec/constraint.h"
#include "editspec/engine.h"

#include "fuzz-guard.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

static std::unique_ptr<editspec::model> g_model;

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    const char * env = getenv("EDITSPEC_FUZZ_MODEL");
    const std::string path = env && *env ? env : EDITSPEC_FUZZ_MODEL;
    editspec::model_load_result r = editspec::model_load(path, true);
    if (!r.model) {
        fprintf(stderr, "fuzz-apply: %s: %s\n", path.c_str(), r.error.c_str());
        exit(1);
    }
    g_model = std::move(r.model);
    return 0;
}

static void check(const uint8_t * data, size_t size) {
    const std::string in((const char *) data, size);
    const size_t a = in.find('\0');
    const size_t b = a == std::string::npos ? std::string::npos : in.find('\0', a + 1);
    editspec::apply_input ai;
    ai.code = in.substr(0, a);
    ai.update = a == std::string::npos ? "" : in.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1);
    // the message format round-trips
    editspec::apply_input back;
    if (!editspec::apply_message_parse(editspec::apply_message(ai), back)) abort();
    (void) editspec::apply_merged_code(ai, ai.update);
    (void) editspec::apply_lines(ai.code);
    editspec::apply_constraint c(*g_model, ai);
    // a decoder's walk: each token is kept when the constraint allows it
    const int32_t n_vocab = g_model->facts().n_vocab;
    std::vector<llama_token> out;
    for (size_t i = b == std::string::npos ? size : b + 1; i + 1 < size && out.size() < 256; i += 2) {
        const llama_token t = (llama_token) (((uint32_t) data[i] << 8 | data[i + 1]) % (uint32_t) n_vocab);
        if (c.allows(out, t)) out.push_back(t);
    }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    return fuzz_guard("fuzz-apply", [&] { check(data, size); });
}
