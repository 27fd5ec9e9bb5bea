#include "common/test-util.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <sys/wait.h>

namespace editspec::test {

const char * tiny_model_path() { return EDITSPEC_TEST_MODEL; }
const char * tiny_model_q8_path() { return EDITSPEC_TEST_MODEL_Q8; }

std::unique_ptr<model> load_or_fail(const std::string & path, bool vocab_only) {
    model_load_result r = model_load(path, vocab_only);
    EXPECT_TRUE(r.model) << r.error;
    return std::move(r.model);
}

std::string vocab_path(const std::string & name) {
    return std::string(EDITSPEC_VOCAB_DIR) + "/ggml-vocab-" + name + ".gguf";
}

int run_command(const std::string & cmd, std::string * out) {
    FILE * p = popen(cmd.c_str(), "r");
    if (!p) {
        return -1;
    }
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) {
        if (out) {
            out->append(buf.data(), n);
        }
    }
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

} // namespace editspec::test
