// Retrieval datastores (src/datastore/datastore.cpp): the suffix array is sorted and complete,
// find() equals a brute-force scan, matches never cross files, and bad files (truncated, not a
// datastore, another tokenizer, another version) are refused with errors that name them.
#include "common/test-util.h"
#include "editspec/datastore.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

using namespace editspec;

namespace {

// occurrences of pattern in the stream, by scanning
int64_t scan_count(std::span<const llama_token> s, std::span<const llama_token> pattern) {
    int64_t c = 0;
    for (size_t i = 0; i + pattern.size() <= s.size(); i++) {
        c += std::equal(pattern.begin(), pattern.end(), s.begin() + i);
    }
    return c;
}

struct ds_fixture : public ::testing::Test {
    test::temp_dir dir;
    std::unique_ptr<model> m;
    std::string path;

    void SetUp() override {
        m = test::load_or_fail(test::tiny_model_q8_path(), true);
        ASSERT_TRUE(m);
        // a small repository: repeated code, so patterns occur several times
        std::filesystem::create_directories(dir.path / "repo" / "pkg");
        std::filesystem::create_directories(dir.path / "repo" / ".git");
        std::ofstream(dir.path / "repo" / "a.py") << "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n";
        std::ofstream(dir.path / "repo" / "pkg" / "b.py") << "import os\n\n\ndef add(x, y):\n    return x + y\n";
        std::ofstream(dir.path / "repo" / "notes.txt") << "not indexed";
        std::ofstream(dir.path / "repo" / ".git" / "c.py") << "hidden";
        path = (dir.path / "repo.eds").string();
    }

    void build() {
        datastore_build_params bp;
        bp.files = datastore_list_files((dir.path / "repo").string(), {".py"});
        ASSERT_EQ(bp.files.size(), 2u);
        datastore_build_stats st;
        std::string err;
        ASSERT_TRUE(datastore_build(*m, bp, path, &st, &err)) << err;
        EXPECT_EQ(st.files, 2u);
        EXPECT_GT(st.tokens, 20u);
        EXPECT_EQ(st.file_bytes, std::filesystem::file_size(path));
    }
};

} // namespace

TEST_F(ds_fixture, suffix_array_sorted_and_find_equals_a_scan) {
    build();
    datastore ds;
    std::string err;
    ASSERT_TRUE(datastore_open(path, m.get(), ds, &err)) << err;
    const auto t = ds.tokens();
    const auto sa = ds.suffixes();
    ASSERT_EQ((int64_t) sa.size(), ds.size());
    // a permutation, in lexicographic order
    std::vector<int32_t> sorted(sa.begin(), sa.end());
    std::sort(sorted.begin(), sorted.end());
    for (int64_t i = 0; i < ds.size(); i++) ASSERT_EQ(sorted[i], i);
    for (int64_t i = 1; i < ds.size(); i++) {
        ASSERT_TRUE(std::lexicographical_compare(t.begin() + sa[i - 1], t.end(), t.begin() + sa[i], t.end(),
                                                 [](llama_token a, llama_token b) { return (uint32_t) a < (uint32_t) b; }))
            << "suffixes " << i - 1 << ", " << i;
    }
    // every pattern of length 1..6 from the stream, and some absent ones
    for (int64_t s = 0; s < ds.size(); s++) {
        for (int64_t len = 1; len <= 6 && s + len <= ds.size(); len++) {
            const auto p = t.subspan(s, len);
            const datastore_range r = ds.find(p);
            ASSERT_EQ(r.count(), scan_count(t, p)) << "at " << s << " length " << len;
            for (int64_t i = r.lo; i < r.hi; i++) ASSERT_TRUE(std::equal(p.begin(), p.end(), t.begin() + sa[i]));
        }
    }
    EXPECT_EQ(ds.find(token_vec{m->facts().n_vocab - 1, 0, 0}).count(), 0);
    // "def add(" occurs in both files; a pattern that would cross the file boundary does not
    const token_vec def_add = m->tokenize("def add(", false, false);
    EXPECT_EQ(ds.find(def_add).count(), 2);
    EXPECT_EQ(ds.files(), 2u);
}

TEST_F(ds_fixture, bad_files_are_refused_by_name) {
    build();
    std::string err;
    datastore ds;
    // truncated
    const std::string cut = (dir.path / "cut.eds").string();
    std::filesystem::copy_file(path, cut);
    std::filesystem::resize_file(cut, std::filesystem::file_size(path) - 4);
    EXPECT_FALSE(datastore_open(cut, m.get(), ds, &err));
    EXPECT_NE(err.find("cut.eds"), std::string::npos) << err;
    EXPECT_NE(err.find("truncated"), std::string::npos) << err;
    // not a datastore
    const std::string junk = (dir.path / "junk.eds").string();
    std::ofstream(junk) << std::string(100, 'x');
    EXPECT_FALSE(datastore_open(junk, m.get(), ds, &err));
    EXPECT_NE(err.find("not a datastore"), std::string::npos) << err;
    EXPECT_FALSE(datastore_open((dir.path / "none.eds").string(), m.get(), ds, &err));
    EXPECT_NE(err.find("none.eds"), std::string::npos) << err;
    // another tokenizer: both named
    std::unique_ptr<model> other = test::load_or_fail(test::vocab_path("qwen2"), true);
    ASSERT_TRUE(other);
    EXPECT_FALSE(datastore_open(path, other.get(), ds, &err));
    EXPECT_NE(err.find("another tokenizer"), std::string::npos) << err;
    EXPECT_NE(err.find("qwen2"), std::string::npos) << err;
    // another format version
    {
        std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(8);
        const uint32_t v = 99;
        f.write((const char *) &v, 4);
    }
    EXPECT_FALSE(datastore_open(path, m.get(), ds, &err));
    EXPECT_NE(err.find("version 99"), std::string::npos) << err;
}

TEST_F(ds_fixture, index_command) {
    std::string out;
    const std::string eds = (dir.path / "cli.eds").string();
    ASSERT_EQ(test::run_command(std::string(EDITSPEC_BIN) + " index -m " + test::tiny_model_q8_path() + " --repo " +
                                    (dir.path / "repo").string() + " -o " + eds + " 2>&1", &out), 0) << out;
    EXPECT_NE(out.find("2 files"), std::string::npos) << out;
    datastore ds;
    std::string err;
    EXPECT_TRUE(datastore_open(eds, m.get(), ds, &err)) << err;
    // errors: no such folder, no matching files, missing option
    EXPECT_EQ(test::run_command(std::string(EDITSPEC_BIN) + " index --repo /nonexistent -o " + eds + " 2>&1", &out), 2) << out;
    EXPECT_NE(out.find("/nonexistent"), std::string::npos) << out;
    EXPECT_NE(test::run_command(std::string(EDITSPEC_BIN) + " index --repo " + (dir.path / "repo").string() +
                                    " --ext .rs -o " + eds + " 2>&1", &out), 0) << out;
    EXPECT_NE(out.find("no files"), std::string::npos) << out;
}
