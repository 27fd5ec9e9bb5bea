#include "common/test-util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace editspec::test {

const char * tiny_model_path() { return EDITSPEC_TEST_MODEL; }
const char * tiny_model_q8_path() { return EDITSPEC_TEST_MODEL_Q8; }
const char * tiny_qwen2_path() { return EDITSPEC_TEST_MODEL_QWEN2; }

std::unique_ptr<model> load_or_fail(const std::string & path, bool vocab_only) {
    model_load_result r = model_load(path, vocab_only);
    EXPECT_TRUE(r.model) << r.error;
    return std::move(r.model);
}

std::string vocab_path(const std::string & name) {
    return std::string(EDITSPEC_VOCAB_DIR) + "/ggml-vocab-" + name + ".gguf";
}

std::string typed_model_path(const std::string & type, const std::string & shape) {
    return std::string(EDITSPEC_TEST_MODEL_DIR) + "/" + shape + "-" + type + ".gguf";
}

::testing::AssertionResult model_and_two_contexts(const std::string & path, std::unique_ptr<model> & m,
                                                  std::unique_ptr<context> & a, std::unique_ptr<context> & b,
                                                  std::unique_ptr<context> (*make)(const model &)) {
    m = load_or_fail(path);
    if (!m) return ::testing::AssertionFailure() << path << " did not load";
    a = make(*m);
    b = make(*m);
    if (!a || !b) return ::testing::AssertionFailure() << "a context of " << path << " was not made";
    return ::testing::AssertionSuccess();
}

std::unique_ptr<context> context_or_fail(const model & m, const context_params & cp) {
    std::string err;
    auto ctx = context_create(m, cp, &err);
    EXPECT_TRUE(ctx) << err;
    return ctx;
}

std::unique_ptr<context> make_spec_context(const model & m, int32_t n_ctx, int32_t n_threads, int32_t rs_snapshots) {
    context_params cp;
    cp.n_ctx = n_ctx;
    cp.n_threads = n_threads;
    cp.n_seq_max = 65;
    cp.n_batch = 512;
    cp.rs_snapshots = rs_snapshots;
    return context_or_fail(m, cp);
}

void noisy_reference_drafter::propose(std::span<const llama_token> history, draft_tree & tree, int32_t budget) {
    const size_t i = history.size() - n_prompt; // output tokens so far
    for (int32_t b = 0; b < n_branches; b++) {
        token_vec t;
        const size_t n = 1 + rng() % 12;
        for (size_t k = i; k < ref.size() && t.size() < n; k++) t.push_back(ref[k]);
        if (t.empty()) return;
        if (rng() % 2) t[rng() % t.size()] = (llama_token) (rng() % n_vocab);
        tree.add_path(-1, t, source(), budget);
    }
}

token_vec random_code_prompt(const model & m, std::mt19937 & rng) {
    static const char * words[] = {"def", " x", " =", " return", "(", ")", ":", "\n", "    ", " for", " in",
                                   " range", " if", " self", ".", " None", " 0", " 1", "+", " import"};
    std::string s;
    const int n = 1 + rng() % 30;
    for (int i = 0; i < n; i++) s += words[rng() % 20];
    return m.tokenize(s, true, false);
}

kv_cells read_kv_cells(context & ctx) {
    kv_cells out;
    std::vector<uint8_t> buf(llama_state_seq_get_size(ctx.get(), 0));
    buf.resize(llama_state_seq_get_data(ctx.get(), buf.data(), buf.size(), 0));
    size_t at = 0;
    auto rd = [&](void * dst, size_t n) {
        EXPECT_LE(at + n, buf.size());
        if (at + n <= buf.size()) memcpy(dst, buf.data() + at, n);
        at += n;
    };
    uint32_t magic = 0, n_stream = 0, n_cells = 0, v_trans = 0, n_layer = 0;
    int32_t seq = 0;
    rd(&magic, 4);
    rd(&seq, 4);
    rd(&n_stream, 4);
    EXPECT_EQ(n_stream, 1u);
    rd(&n_cells, 4);
    for (uint32_t i = 0; i < n_cells; i++) {
        llama_pos p = 0;
        uint32_t n_seq = 0;
        rd(&p, 4);
        rd(&n_seq, 4);
        at += 4 * n_seq;
        out.pos.push_back(p);
    }
    rd(&v_trans, 4);
    rd(&n_layer, 4);
    out.k.resize(n_layer);
    for (uint32_t l = 0; l < n_layer; l++) {
        uint64_t row = 0;
        rd(&out.k_type, 4);
        rd(&row, 8);
        for (uint32_t i = 0; i < n_cells; i++) {
            out.k[l].emplace_back(buf.begin() + (ptrdiff_t) at, buf.begin() + (ptrdiff_t) (at + row));
            at += row;
        }
    }
    return out;
}

std::vector<float> f16_row(const std::vector<uint8_t> & row) {
    std::vector<float> out(row.size() / 2);
    for (size_t i = 0; i < out.size(); i++) {
        uint16_t h;
        memcpy(&h, row.data() + 2 * i, 2);
        out[i] = ggml_fp16_to_fp32(h);
    }
    return out;
}

std::unique_ptr<context> make_two_seq_context(const model & m, int32_t n_ctx) {
    context_params cp;
    cp.n_ctx = n_ctx;
    cp.n_seq_max = 2;
    cp.n_threads = 1;
    return context_or_fail(m, cp);
}

std::string read_text(const std::filesystem::path & path) {
    std::ifstream f(path, std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

int run_command(const std::string & cmd, std::string * out) {
    if (out) {
        out->clear();
    }
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

std::vector<ar_case> ar_cases(context & ctx, std::mt19937 & rng, int32_t n, int32_t n_predict) {
    std::vector<ar_case> out;
    for (int32_t i = 0; i < n; i++) {
        ar_case c;
        c.prompt = random_code_prompt(ctx.owner(), rng);
        generate_params gp;
        gp.n_predict = n_predict;
        c.ar = generate_ar(ctx, c.prompt, gp);
        c.text = ctx.owner().detokenize(c.prompt) + c.ar.text;
        out.push_back(std::move(c));
    }
    return out;
}

bool index_texts(const model & m, const std::filesystem::path & dir, const std::string & name,
                 const std::vector<std::string> & texts, datastore & ds, std::string * error) {
    datastore_build_params bp;
    for (size_t i = 0; i < texts.size(); i++) {
        const auto f = dir / (name + std::to_string(i) + ".py");
        std::ofstream(f) << texts[i];
        bp.files.push_back(f.string());
    }
    const std::string path = (dir / (name + ".eds")).string();
    return datastore_build(m, bp, path, nullptr, error) && datastore_open(path, &m, ds, error);
}

temp_dir::temp_dir() {
    char tmpl[] = "/tmp/editspec-test-XXXXXX";
    const char * p = mkdtemp(tmpl);
    EXPECT_NE(p, nullptr) << "mkdtemp failed";
    path = p ? p : "/tmp";
}

temp_dir::~temp_dir() {
    if (path != "/tmp") std::filesystem::remove_all(path);
}

std::vector<std::string> temp_dir::names() const {
    std::vector<std::string> out;
    for (const auto & e : std::filesystem::directory_iterator(path)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
}

} // namespace editspec::test
