// Document sessions (src/session/session.cpp): the token diff of an edit, the three KV strategies, drift
// control; and PIE's promise about the cache, read back from llama.cpp's sequence state: the cells
// before an edit are untouched, and a shifted key equals the key of the same token encoded at the
// new position (layer 0, where a key depends on the token and its position only) within F16 rounding.
#include "common/test-util.h"
#include "editspec/session.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace editspec;

namespace {

std::unique_ptr<context> session_context(const model & m) { return test::make_two_seq_context(m, 512); }

const std::string DOC =
    std::string(test::k_read_config_py) +
    "def main():\n"
    "    config = read_config(os.environ['CONFIG'])\n";

// the tiny model, a session's context and one for a fresh session to compare with
struct session_test : public test::two_contexts_test<session_context> {
    std::unique_ptr<context> & fresh_ctx = other;
};

} // namespace

TEST(session, first_code_line) {
    EXPECT_EQ(session_first_code_line("\n  # a comment\n\n    x = 1  \ny = 2\n"), "x = 1");
    EXPECT_EQ(session_first_code_line("// c\n"), "");
    EXPECT_EQ(session_first_code_line("return a"), "return a");
}

TEST_F(session_test, recompute_equals_a_fresh_session_and_errors_name_the_edit) {
    doc_session s(*ctx, {KV_REUSE_PREFIX});
    std::string err;
    ASSERT_TRUE(s.open(DOC, &err)) << err;
    const size_t at = DOC.find("values = {}");
    edit_stats st;
    ASSERT_TRUE(s.edit({at, 6, "result"}, &st, &err)) << err;
    EXPECT_EQ(s.text().substr(at, 11), "result = {}");
    EXPECT_GT(st.first, 0);
    EXPECT_GE(st.n_inserted, 1);
    EXPECT_EQ(st.n_stale, 0);
    doc_session fresh(*fresh_ctx, {KV_REUSE_PREFIX});
    ASSERT_TRUE(fresh.open(s.text(), &err)) << err;
    EXPECT_EQ(s.tokens(), fresh.tokens());
    EXPECT_EQ(s.predict_line(32), fresh.predict_line(32));
    // a prediction leaves the cache as it was: the same again
    EXPECT_EQ(s.predict_line(32), fresh.predict_line(32));
    EXPECT_FALSE(s.edit({DOC.size() + 10, 0, "x"}, &st, &err));
    EXPECT_NE(err.find("outside the document"), std::string::npos) << err;
}

TEST_F(session_test, pie_keeps_the_prefix_and_shifts_keys_to_the_new_positions) {
    if (!ctx->can_shift()) GTEST_SKIP() << "this model's cache cannot shift";
    doc_session s(*ctx, {KV_REUSE_PIE});
    std::string err;
    ASSERT_TRUE(s.open(DOC, &err)) << err;
    const test::kv_cells before = test::read_kv_cells(*ctx);
    ASSERT_EQ(before.k_type, (int32_t) GGML_TYPE_F16);
    // a line inserted in the middle: the later tokens move by the inserted tokens' count
    const size_t at = DOC.find("    values = {}");
    edit_stats st;
    ASSERT_TRUE(s.edit({at, 0, "    # parse every line as key=value\n"}, &st, &err)) << err;
    const int32_t delta = st.n_inserted - st.n_removed;
    ASSERT_GT(delta, 0);
    EXPECT_GT(st.n_stale, 0);
    EXPECT_EQ(st.n_encoded, st.n_inserted);
    // read after a decode (llama.cpp applies the shift at the next decode: the edit's own encoding)
    const test::kv_cells after = test::read_kv_cells(*ctx);
    ASSERT_EQ(after.pos.size(), s.tokens().size() - 1);
    // the cells before the edit: untouched, every layer, byte for byte
    for (size_t l = 0; l < before.k.size(); l++) {
        for (int32_t i = 0; i < st.first; i++) {
            ASSERT_EQ(after.pos[i], before.pos[i]);
            ASSERT_EQ(after.k[l][i], before.k[l][i]) << "layer " << l << " cell " << i;
        }
    }
    // the later cells: their layer-0 keys are those of the same tokens encoded at the new positions
    doc_session fresh(*fresh_ctx, {KV_REUSE_PREFIX});
    ASSERT_TRUE(fresh.open(s.text(), &err)) << err;
    const test::kv_cells want = test::read_kv_cells(*fresh_ctx);
    ASSERT_EQ(want.pos.size(), after.pos.size());
    const int32_t from = st.first + st.n_inserted;
    int32_t checked = 0;
    double max_err = 0.0;
    for (size_t i = 0; i < after.pos.size(); i++) {
        // cells are stored in slot order: match them by position
        if (after.pos[i] < from) continue;
        size_t j = 0;
        while (j < want.pos.size() && want.pos[j] != after.pos[i]) j++;
        ASSERT_LT(j, want.pos.size());
        const auto a = test::f16_row(after.k[0][i]), b = test::f16_row(want.k[0][j]);
        for (size_t e = 0; e < a.size(); e++) {
            // one F16 rounding of the stored key and one of the rotation's result
            const double tol = 2.0 * std::ldexp(std::max(std::fabs(a[e]), std::fabs(b[e])), -10) + 1e-3;
            max_err = std::max(max_err, std::fabs((double) a[e] - b[e]));
            ASSERT_LE(std::fabs(a[e] - b[e]), tol) << "cell at position " << after.pos[i] << ", element " << e;
        }
        checked++;
    }
    EXPECT_GT(checked, 10);
    RecordProperty("max_abs_key_error", std::to_string(max_err));
    // conflict fast encoding keeps the later cells as they were: old positions, keys not re-rotated
    auto conflict_ctx = session_context(*m);
    ASSERT_TRUE(conflict_ctx);
    doc_session c(*conflict_ctx, {KV_REUSE_CONFLICT});
    ASSERT_TRUE(c.open(DOC, &err)) << err;
    ASSERT_TRUE(c.edit({at, 0, "    # parse every line as key=value\n"}, &st, &err)) << err;
    EXPECT_EQ(c.text(), s.text());
    const test::kv_cells kept = test::read_kv_cells(*conflict_ctx);
    int32_t same = 0;
    for (size_t i = 0; i < before.pos.size(); i++) {
        if (before.pos[i] < st.first + st.n_removed) continue;
        for (size_t j = 0; j < kept.pos.size(); j++) {
            if (kept.pos[j] == before.pos[i] && kept.k[0][j] == before.k[0][i]) {
                same++;
                break;
            }
        }
    }
    EXPECT_EQ(same, (int32_t) before.pos.size() - (st.first + st.n_removed));
}

TEST_F(session_test, drift_control_reencodes_the_stale_tokens) {
    session_params sp;
    sp.strategy = KV_REUSE_PIE;
    sp.drift_max = 0;
    doc_session s(*ctx, sp);
    std::string err;
    ASSERT_TRUE(s.open(DOC, &err)) << err;
    edit_stats st;
    ASSERT_TRUE(s.edit({DOC.find("text = f.read()"), 4, "data"}, &st, &err)) << err;
    ASSERT_GT(s.n_stale(), 0);
    EXPECT_GT(s.refresh(), 0);
    EXPECT_EQ(s.n_stale(), 0);
    EXPECT_EQ(s.refresh(), 0);
    // refreshed, the session predicts what a fresh one does
    doc_session fresh(*fresh_ctx, {KV_REUSE_PREFIX});
    ASSERT_TRUE(fresh.open(s.text(), &err)) << err;
    EXPECT_EQ(s.predict_line(32), fresh.predict_line(32));
}

// A pure insertion before the first token, on a model without BOS (Qwen2.5-Coder's vocabulary): the
// changed span is empty at token 0, so nothing is removed and every later cell moves by the inserted
// count. (The span's end used to be read at pos_[-1]: the garbage became the end of a KV removal.)
TEST(session_no_bos, pie_insertion_before_the_first_token) {
    auto m = test::load_or_fail(test::tiny_qwen2_path());
    ASSERT_TRUE(m);
    ASSERT_FALSE(m->facts().add_bos);
    auto ctx = session_context(*m), fresh_ctx = session_context(*m);
    ASSERT_TRUE(ctx && fresh_ctx);
    if (!ctx->can_shift()) GTEST_SKIP() << "this model's cache cannot shift";
    doc_session s(*ctx, {KV_REUSE_PIE});
    std::string err;
    ASSERT_TRUE(s.open(DOC, &err)) << err;
    const size_t n_before = s.tokens().size();
    edit_stats st;
    ASSERT_TRUE(s.edit({0, 0, "# settings\n"}, &st, &err)) << err;
    ASSERT_EQ(st.first, 0);      // the document's first token changed ...
    ASSERT_EQ(st.n_removed, 0);  // ... and no old token did: a pure insertion at token 0
    ASSERT_GT(st.n_inserted, 0);
    ASSERT_EQ(s.tokens().size(), n_before + (size_t) st.n_inserted);
    // every token but the last has exactly one cell, at positions 0 .. n-2
    test::kv_cells cells = test::read_kv_cells(*ctx);
    std::sort(cells.pos.begin(), cells.pos.end());
    ASSERT_EQ(cells.pos.size(), s.tokens().size() - 1);
    for (size_t i = 0; i < cells.pos.size(); i++) ASSERT_EQ(cells.pos[i], (llama_pos) i);
    // and its tokens are those of a session opened on the edited text
    doc_session fresh(*fresh_ctx, {KV_REUSE_PREFIX});
    ASSERT_TRUE(fresh.open(s.text(), &err)) << err;
    EXPECT_EQ(s.tokens(), fresh.tokens());
}
