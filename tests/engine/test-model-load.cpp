// Bad model files get one clear error naming the file; nothing crashes.
#include "common/test-util.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

using namespace editspec;

namespace {

std::string temp_file(const std::string & name, const std::string & bytes) {
    const std::string path = ::testing::TempDir() + name;
    std::ofstream f(path, std::ios::binary);
    f << bytes;
    return path;
}

TEST(model_load, missing_file) {
    model_load_result r = model_load("/nonexistent/model.gguf");
    EXPECT_FALSE(r.model);
    EXPECT_NE(r.error.find("/nonexistent/model.gguf"), std::string::npos) << r.error;
}

TEST(model_load, not_gguf) {
    const std::string path = temp_file("not-gguf.bin", "PK\x03\x04 this is a zip, not a model");
    model_load_result r = model_load(path);
    EXPECT_FALSE(r.model);
    EXPECT_NE(r.error.find("not a GGUF file"), std::string::npos) << r.error;
}

TEST(model_load, empty_file) {
    const std::string path = temp_file("empty.gguf", "");
    model_load_result r = model_load(path);
    EXPECT_FALSE(r.model);
    EXPECT_NE(r.error.find(path), std::string::npos) << r.error;
}

TEST(model_load, directory) {
    model_load_result r = model_load(::testing::TempDir());
    EXPECT_FALSE(r.model);
    EXPECT_NE(r.error.find("directory"), std::string::npos) << r.error;
}

// a real model cut in half: header fine, tensor data missing
TEST(model_load, truncated) {
    std::ifstream in(test::tiny_model_path(), std::ios::binary);
    ASSERT_TRUE(in) << test::tiny_model_path();
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string path = temp_file("truncated.gguf", bytes.substr(0, bytes.size() / 2));
    model_load_result r = model_load(path);
    EXPECT_FALSE(r.model);
    EXPECT_NE(r.error.find(path), std::string::npos) << r.error;
}

TEST(model_load, tiny_model_facts) {
    auto m = test::load_or_fail(test::tiny_model_path());
    ASSERT_TRUE(m);
    EXPECT_EQ(m->facts().arch, "llama");
    EXPECT_EQ(m->facts().n_vocab, 32256);
    EXPECT_GT(m->facts().n_params, 0u);
}

TEST(context, rejects_absurd_parameters) {
    auto m = test::load_or_fail(test::tiny_model_path());
    ASSERT_TRUE(m);
    std::string err;
    context_params cp;
    cp.n_seq_max = 1000;
    EXPECT_FALSE(context_create(*m, cp, &err));
    EXPECT_NE(err.find("1000"), std::string::npos) << err;
    cp = context_params();
    cp.n_ctx = -5;
    EXPECT_FALSE(context_create(*m, cp, &err));
    EXPECT_NE(err.find("-5"), std::string::npos) << err;
}

} // namespace

// a model of a size libllama has no label for is described by its parameter count (issue 72: the bench
// report said "llama ?B" of the shipped 15.0M model)
TEST(model_load, desc_names_the_size) {
    auto m = test::load_or_fail(test::tiny_model_path());
    ASSERT_TRUE(m);
    EXPECT_EQ(m->facts().desc.find("?B"), std::string::npos) << m->facts().desc;
    const std::string shipped = std::string(EDITSPEC_MODELS) + "/editspec-target.gguf";
    if (!std::filesystem::exists(shipped)) return;
    auto t = test::load_or_fail(shipped);
    ASSERT_TRUE(t);
    EXPECT_NE(t->facts().desc.find("15.0M"), std::string::npos) << t->facts().desc;
}
