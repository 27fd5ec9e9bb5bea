// KV cache operations: removal + re-decode and RoPE shifts match fresh decoding.
// Flash attention off (docs/results/design-notes/engine-notes.md: with it on, batched and single-token logits differ).
#include "common/test-util.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace editspec;

namespace {

double rel_diff(const std::vector<float> & a, const std::vector<float> & b) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < a.size(); i++) {
        num += ((double) a[i] - b[i]) * ((double) a[i] - b[i]);
        den += (double) b[i] * b[i];
    }
    return std::sqrt(num / std::max(den, 1e-30));
}

struct kv_fixture : public ::testing::Test {
    std::unique_ptr<model> m;
    void SetUp() override {
        m = test::load_or_fail(test::tiny_model_path());
        ASSERT_TRUE(m);
    }
    std::unique_ptr<context> make_ctx(ggml_type kv_type = GGML_TYPE_F16) {
        context_params cp;
        cp.n_ctx = 512;
        cp.n_threads = 1; // a tiny model gains nothing from threads, and spinning threads stall on a busy machine
        cp.type_k = kv_type;
        cp.type_v = kv_type;
        std::string err;
        auto c = context_create(*m, cp, &err);
        EXPECT_TRUE(c) << err;
        return c;
    }
    // decodes tokens at pos0.. in seq 0 and returns the last row's logits
    std::vector<float> feed(context & c, const token_vec & toks, llama_pos pos0) {
        batch b(512, 1);
        EXPECT_TRUE(context_prefill(c, b, toks, pos0, 0));
        const float * l = c.logits(b.size() - 1);
        return std::vector<float>(l, l + m->facts().n_vocab);
    }
};

TEST_F(kv_fixture, remove_then_redecode_equals_fresh_decode) {
    const token_vec prefix = m->tokenize("def area(r):\n    return 3.14159 * r", true, false);
    const token_vec wrong = m->tokenize(" ** 3 + 17 # nonsense that gets rolled back", false, false);
    const token_vec right = m->tokenize(" * r\n\nprint(area(2))", false, false);
    const llama_pos p = (llama_pos) prefix.size();

    auto c1 = make_ctx();
    feed(*c1, prefix, 0);
    feed(*c1, wrong, p);
    ASSERT_TRUE(c1->kv_rm(0, p, -1));
    EXPECT_EQ(c1->kv_pos_max(0), p - 1);
    const std::vector<float> after_rm = feed(*c1, right, p);

    token_vec all = prefix;
    all.insert(all.end(), right.begin(), right.end());
    auto c2 = make_ctx();
    const std::vector<float> fresh = feed(*c2, all, 0);
    EXPECT_LT(rel_diff(after_rm, fresh), 1e-4);
}

// a recurrent state (tiny-qwen35) takes back the tail of its last decode (a snapshot of each of its last 16
// tokens), and nothing older: libllama's seq_rm would go back to a snapshot an older decode took (a wrong
// state), so kv_rm refuses it; a span in the middle stays too
TEST_F(kv_fixture, a_recurrent_state_goes_back_within_its_last_decode_only) {
    m = test::load_or_fail(test::typed_model_path("q8_0", "tiny-qwen35"));
    ASSERT_TRUE(m);
    const token_vec prefix = m->tokenize("def area(r):\n    return 3.14159 * r", true, false);
    const token_vec wrong = m->tokenize(" ** 3 + 17 # rolled back", false, false);
    const token_vec right = m->tokenize(" * r\n\nprint(area(2))", false, false);
    ASSERT_LE(wrong.size(), 16u);
    const llama_pos p = (llama_pos) prefix.size();

    auto c1 = make_ctx();
    feed(*c1, prefix, 0);
    feed(*c1, wrong, p);
    EXPECT_FALSE(c1->kv_rm(0, 1, 3));     // a span the state has read
    EXPECT_FALSE(c1->kv_rm(0, p, -1));    // the whole decode: its snapshots are of the states after its tokens
    ASSERT_TRUE(c1->kv_rm(0, p + 1, -1)); // all of the decode's tokens but its first
    EXPECT_EQ(c1->kv_pos_max(0), p);
    const std::vector<float> after_rm = feed(*c1, right, p + 1);

    token_vec all = prefix;
    all.push_back(wrong[0]);
    all.insert(all.end(), right.begin(), right.end());
    auto c2 = make_ctx();
    const std::vector<float> fresh = feed(*c2, all, 0);
    EXPECT_LT(rel_diff(after_rm, fresh), 1e-4);

    // tokens decoded one a pass: none can go (libllama's seq_rm took them back, to an older decode's snapshot)
    const llama_pos q = (llama_pos) all.size();
    feed(*c1, {right[0]}, q);
    feed(*c1, {right[1]}, q + 1);
    EXPECT_FALSE(c1->kv_rm(0, q + 1, -1));
    EXPECT_FALSE(c1->kv_rm(0, q, -1));
    // and one rollback a decode
    feed(*c1, wrong, q + 2);
    EXPECT_TRUE(c1->kv_rm(0, q + 2 + (llama_pos) wrong.size() - 1, -1));
    EXPECT_FALSE(c1->kv_rm(0, q + 3, -1));
}

// PIE's K <- R(delta) K: text encoded at p then shifted by delta equals text encoded at p + delta
TEST_F(kv_fixture, shift_equals_encoding_at_shifted_positions) {
    const token_vec text = m->tokenize("class Stack:\n    def push(self, x):\n        self.items.append(x)", true, false);
    const token_vec query = m->tokenize("\n    def pop", false, false);
    const llama_pos n = (llama_pos) text.size();
    for (llama_pos delta : {7, 40, 133}) {
        auto direct = make_ctx(GGML_TYPE_F32);
        feed(*direct, text, delta);
        const std::vector<float> want = feed(*direct, query, delta + n);

        auto shifted = make_ctx(GGML_TYPE_F32);
        ASSERT_TRUE(shifted->can_shift());
        feed(*shifted, text, 0);
        shifted->kv_add(0, 0, -1, delta);
        EXPECT_EQ(shifted->kv_pos_max(0), delta + n - 1);
        const std::vector<float> got = feed(*shifted, query, delta + n);
        EXPECT_LT(rel_diff(got, want), 1e-3) << "delta " << delta;

        // RoPE is relative, so a uniform shift is invisible to attention; shifting only the later
        // half changes the distance between the halves, and the logits must notice
        auto unshifted = make_ctx(GGML_TYPE_F32);
        feed(*unshifted, text, 0);
        const std::vector<float> plain = feed(*unshifted, query, n);
        auto half = make_ctx(GGML_TYPE_F32);
        feed(*half, text, 0);
        half->kv_add(0, n / 2, -1, delta);
        const std::vector<float> half_shifted = feed(*half, query, delta + n);
        EXPECT_GT(rel_diff(half_shifted, plain), 1e-3) << "delta " << delta;
    }
}

TEST_F(kv_fixture, copy_and_keep) {
    const token_vec text = m->tokenize("import os\nimport sys\n", true, false);
    auto c = make_ctx();
    feed(*c, text, 0);
    c->kv_cp(0, 0, 0, -1); // copying onto itself is a no-op
    EXPECT_EQ(c->kv_pos_max(0), (llama_pos) text.size() - 1);
    c->kv_clear();
    EXPECT_EQ(c->kv_pos_max(0), -1);
}

TEST_F(kv_fixture, sequences_share_a_prefix_after_copy) {
    context_params cp;
    cp.n_ctx = 512;
    cp.n_threads = 1; // a tiny model gains nothing from threads, and spinning threads stall on a busy machine
    cp.n_seq_max = 4;
    std::string err;
    auto c = context_create(*m, cp, &err);
    ASSERT_TRUE(c) << err;
    const token_vec text = m->tokenize("x = [i * i for i in range(10)]", true, false);
    batch b(64, 4);
    ASSERT_TRUE(context_prefill(*c, b, text, 0, 0));
    c->kv_cp(0, 2, -1, -1);
    EXPECT_EQ(c->kv_pos_max(2), (llama_pos) text.size() - 1);
    c->kv_keep(2);
    EXPECT_EQ(c->kv_pos_max(0), -1);
    EXPECT_EQ(c->kv_pos_max(2), (llama_pos) text.size() - 1);
    ASSERT_TRUE(c->kv_rm(2, -1, -1));
    EXPECT_EQ(c->kv_pos_max(2), -1);
}

} // namespace
