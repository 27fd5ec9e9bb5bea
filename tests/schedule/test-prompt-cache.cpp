// The prompt cache (src/engine/pie.cpp): the plan over cached and new tokens; PIE reuse in
// the request path read back from llama.cpp's cells (every cell at its new position, its layer-0 key
// that of the same token encoded there: layer 0's keys depend on the token and its position only);
// and the lossless mode, greedy output equal to a cold request's at every step of a real editing
// history (datasets/edit-histories). The prompt store (prompt-store.h): a prompt kept in RAM and
// loaded back answers as a cold request does; the budget, eviction and what a save replaces.
#include "common/test-util.h"
#include "editspec/pie.h"
#include "editspec/prompt-store.h"
#include "editspec/request.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <numeric>

using namespace editspec;

namespace {

token_vec iota_tokens(int32_t from, int32_t n) {
    token_vec t(n);
    std::iota(t.begin(), t.end(), from);
    return t;
}

token_vec cat(std::initializer_list<token_vec> parts) {
    token_vec out;
    for (const token_vec & p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
}

prompt_cache_params pie(int32_t min_block = 32, int32_t drift_max = -1) {
    prompt_cache_params p;
    p.mode = KV_REUSE_PIE;
    p.min_block = min_block;
    p.drift_max = drift_max;
    return p;
}

// the versions of one file in datasets/edit-histories, oldest first
std::vector<std::string> history(const std::string & name) {
    std::vector<std::string> out;
    std::ifstream f(std::string(EDITSPEC_DATASETS) + "/edit-histories/" + name + ".jsonl");
    for (std::string line; std::getline(f, line);) out.push_back(nlohmann::json::parse(line)["text"].get<std::string>());
    return out;
}

// the tiny Q8_0 model in a runner (its context keeps its cache between requests) and a second,
// cold context beside it
void open_with_cold_context(runner & rn, std::unique_ptr<context> & cold) {
    runner_params rp;
    rp.model_path = test::tiny_model_q8_path();
    rp.n_ctx = 2048;
    rp.n_threads = 1;
    std::string err;
    ASSERT_TRUE(runner_open(rp, rn, &err)) << err;
    cold = runner_new_context(rn, &err);
    ASSERT_TRUE(cold) << err;
}

} // namespace

TEST(prompt_cache_plan, mode_names_round_trip) {
    kv_reuse_mode m = KV_REUSE_PREFIX;
    EXPECT_TRUE(kv_reuse_parse("pie", m));
    EXPECT_EQ(m, KV_REUSE_PIE);
    EXPECT_STREQ(kv_reuse_name(m), "pie");
    EXPECT_FALSE(kv_reuse_parse("PIE", m));
    EXPECT_EQ(m, KV_REUSE_PIE); // untouched
    EXPECT_EQ(kv_reuse_names(), "prefix, recompute, pie, conflict");
    EXPECT_TRUE(kv_reuse_parse("recompute", m)); // a session's name for the exact mode
    EXPECT_EQ(m, KV_REUSE_PREFIX);
    EXPECT_STREQ(kv_reuse_name(m), "prefix");
}

TEST(prompt_cache_plan, prefix_mode_keeps_the_common_prefix_only) {
    const token_vec a = iota_tokens(100, 200);
    token_vec b = a;
    b[50] = 7;
    const prompt_reuse_plan plan = prompt_reuse_plan_make(a, {}, b, {});
    EXPECT_EQ(plan.n_prefix, 50);
    EXPECT_TRUE(plan.blocks.empty());
    // a prompt that extends the cache keeps it all; an empty cache keeps nothing
    EXPECT_EQ(prompt_reuse_plan_make(a, {}, cat({a, iota_tokens(1, 5)}), {}).n_prefix, 200);
    EXPECT_EQ(prompt_reuse_plan_make({}, {}, a, pie()).n_prefix, 0);
}

TEST(prompt_cache_plan, pie_finds_the_spans_around_insertions_deletions_and_replacements) {
    const token_vec head = iota_tokens(1000, 40), mid = iota_tokens(2000, 100), tail = iota_tokens(3000, 60);
    const token_vec cached = cat({head, iota_tokens(5000, 10), mid, tail, iota_tokens(6000, 20)});
    // replaced 10 tokens by 3, inserted 5 between mid and tail, a new instruction at the end
    const token_vec prompt = cat({head, iota_tokens(7000, 3), mid, iota_tokens(8000, 5), tail, iota_tokens(9000, 12)});
    const prompt_reuse_plan plan = prompt_reuse_plan_make(cached, {}, prompt, pie());
    EXPECT_EQ(plan.n_prefix, 40);
    ASSERT_EQ(plan.blocks.size(), 2u);
    EXPECT_EQ(plan.blocks[0].from, 50);
    EXPECT_EQ(plan.blocks[0].to, 43);
    EXPECT_EQ(plan.blocks[0].n, 100);
    EXPECT_EQ(plan.blocks[1].from, 150);
    EXPECT_EQ(plan.blocks[1].to, 148);
    EXPECT_EQ(plan.blocks[1].n, 60);
    EXPECT_EQ(plan.n_shifted(), 160);
    // spans shorter than min_block stay encoded
    EXPECT_EQ(prompt_reuse_plan_make(cached, {}, prompt, pie(80)).n_shifted(), 100);
    // moved code is not reordered: the spans keep their order in both, the longer one kept
    const token_vec swapped = cat({head, tail, mid});
    const prompt_reuse_plan sw = prompt_reuse_plan_make(cat({head, mid, tail}), {}, swapped, pie());
    ASSERT_EQ(sw.blocks.size(), 1u);
    EXPECT_EQ(sw.blocks[0].to, 100);
    EXPECT_EQ(sw.blocks[0].n, 100);
    // overlapping matches: a repeated run is shared by two spans, the second cut to fit
    const token_vec rep = iota_tokens(4000, 40);
    const token_vec c2 = cat({head, mid, rep, tail}), p2 = cat({head, iota_tokens(7000, 2), mid, rep, rep, tail});
    const prompt_reuse_plan ov = prompt_reuse_plan_make(c2, {}, p2, pie());
    EXPECT_EQ(ov.n_shifted(), 200) << ov.blocks.size();
}

// an apply after an edit of the same file: the snippet before the file holds lines of the file; the
// spans chosen are the file's, not the snippet's
TEST(prompt_cache_plan, pie_prefers_the_spans_that_cover_most) {
    const token_vec f1 = iota_tokens(1000, 300), f2 = iota_tokens(2000, 300);
    const token_vec cached = cat({iota_tokens(1, 10), f1, f2, iota_tokens(50, 20)});
    const token_vec snippet = token_vec(f2.begin() + 100, f2.begin() + 150);
    const token_vec prompt = cat({iota_tokens(1, 5), iota_tokens(80, 5), snippet, iota_tokens(90, 5), f1, f2, iota_tokens(60, 9)});
    const prompt_reuse_plan plan = prompt_reuse_plan_make(cached, {}, prompt, pie());
    EXPECT_EQ(plan.n_prefix, 5);
    EXPECT_EQ(plan.n_shifted(), 600);
    ASSERT_EQ(plan.blocks.size(), 1u);
    EXPECT_EQ(plan.blocks[0].from, 10);
    EXPECT_EQ(plan.blocks[0].to, 65);
}

TEST(prompt_cache_plan, drift_max_drops_the_spans_then_cuts_the_prefix_at_its_first_stale_token) {
    const token_vec head = iota_tokens(1000, 40), mid = iota_tokens(2000, 100);
    const token_vec cached = cat({head, iota_tokens(5000, 10), mid});
    const token_vec prompt = cat({head, iota_tokens(7000, 3), mid});
    EXPECT_EQ(prompt_reuse_plan_make(cached, {}, prompt, pie(32, 100)).n_shifted(), 100);
    EXPECT_EQ(prompt_reuse_plan_make(cached, {}, prompt, pie(32, 99)).n_shifted(), 0);
    std::vector<uint8_t> stale(cached.size(), 0);
    stale[30] = stale[31] = 1;
    const prompt_reuse_plan p1 = prompt_reuse_plan_make(cached, stale, prompt, pie(32, 1));
    EXPECT_EQ(p1.n_shifted(), 0);
    EXPECT_EQ(p1.n_prefix, 30);
    EXPECT_EQ(prompt_reuse_plan_make(cached, stale, prompt, pie(32, 2)).n_prefix, 40);
}

namespace {

// one sequence: PIE's gaps go in at their own positions, before the spans already in place
std::unique_ptr<context> small_context(const model & m) {
    context_params cp;
    cp.n_ctx = 1024;
    cp.n_threads = 1;
    return test::context_or_fail(m, cp);
}

// every cell of sequence 0 holds one position of 0 .. n-1 and, at layer `layer`, the key of the token
// there encoded cold (within two F16 roundings), for the positions [check0, check1) (all by default)
void expect_cells_match_cold(context & ctx, context & cold, int32_t n, size_t layer = 0, int32_t check0 = 0,
                             int32_t check1 = -1) {
    const test::kv_cells got = test::read_kv_cells(ctx), want = test::read_kv_cells(cold);
    ASSERT_LT(layer, got.k.size());
    ASSERT_EQ((int32_t) got.pos.size(), n);
    ASSERT_EQ((int32_t) want.pos.size(), n);
    std::vector<int32_t> at(n, -1);
    for (size_t j = 0; j < want.pos.size(); j++) at[want.pos[j]] = (int32_t) j;
    std::vector<int32_t> seen(n, 0);
    for (size_t i = 0; i < got.pos.size(); i++) {
        ASSERT_GE(got.pos[i], 0);
        ASSERT_LT(got.pos[i], n);
        seen[got.pos[i]]++;
        if (got.pos[i] < check0 || (check1 >= 0 && got.pos[i] >= check1)) continue;
        const auto a = test::f16_row(got.k[layer][i]), b = test::f16_row(want.k[layer][at[got.pos[i]]]);
        for (size_t e = 0; e < a.size(); e++) {
            const double tol = 2.0 * std::ldexp(std::max(std::fabs(a[e]), std::fabs(b[e])), -10) + 1e-3;
            ASSERT_LE(std::fabs(a[e] - b[e]), tol) << "cell at position " << got.pos[i] << ", layer " << layer << ", element " << e;
        }
    }
    for (int32_t p = 0; p < n; p++) ASSERT_EQ(seen[p], 1) << "position " << p;
}

const std::string FILE_V1 =
    std::string(test::k_read_config_py) +
    "def write_config(path, values):\n"
    "    with open(path, 'w') as f:\n"
    "        for key, value in sorted(values.items()):\n"
    "            f.write(f'{key}={value}\\n')\n\n"
    "def main():\n"
    "    config = read_config(os.environ['CONFIG'])\n"
    "    print(config)\n";

// PIE's cells against a cold encoding: the Q8_0 test model, a context that reuses and one that encodes
// cold; skipped where the model's cache cannot shift
struct prompt_cache_pie : public test::two_contexts_test<small_context> {
    std::unique_ptr<context> & cold = other;
    void SetUp() override {
        two_contexts_test::SetUp();
        if (HasFatalFailure()) return;
        if (!ctx->can_shift()) GTEST_SKIP() << "this model's cache cannot shift";
    }
};

} // namespace

TEST_F(prompt_cache_pie, reuse_puts_every_cell_at_its_new_position_and_encodes_only_the_changes) {
    // version 2: a line replaced early, a line deleted, a comment inserted; a different request text last
    std::string v2 = FILE_V1;
    v2.replace(v2.find("    values = {}"), 15, "    values: dict[str, str] = {}");
    v2.erase(v2.find("    print(config)\n"), 18);
    v2.insert(v2.find("def write_config"), "# the inverse of read_config\n");
    const token_vec p1 = m->tokenize(FILE_V1 + "\n### Task: add type hints\n", true, false);
    const token_vec p2 = m->tokenize(v2 + "\n### Task: write a docstring for main\n", true, false);
    batch b(512, 1);
    prefill_stats st;
    ASSERT_TRUE(context_prefill_cached(*ctx, b, p1, pie(16), &st));
    EXPECT_EQ(st.encoded, (int32_t) p1.size());
    ASSERT_TRUE(context_prefill_cached(*ctx, b, p2, pie(16), &st));
    EXPECT_GT(st.cached, 10);
    EXPECT_GT(st.shifted, (int32_t) p2.size() / 2);
    EXPECT_EQ(st.cached + st.shifted + st.encoded, (int32_t) p2.size());
    EXPECT_LT(st.encoded, (int32_t) p2.size() / 3);
    EXPECT_EQ(st.stale, st.shifted);
    EXPECT_EQ(ctx->cached_prompt(), p2);
    EXPECT_EQ(std::count(ctx->cached_stale().begin(), ctx->cached_stale().end(), 1), st.stale);
    ASSERT_TRUE(context_prefill_cached(*cold, b, p2, {}, nullptr));
    // llama.cpp applies the shift at the next decode: decode one more token in both
    const token_vec one = m->tokenize("x", false, false);
    const token_vec p3 = cat({p2, one});
    ASSERT_TRUE(context_prefill_cached(*ctx, b, p3, pie(16), &st));
    EXPECT_EQ(st.encoded, 1);
    ASSERT_TRUE(context_prefill_cached(*cold, b, p3, {}, nullptr));
    expect_cells_match_cold(*ctx, *cold, (int32_t) p3.size());
    // drift control: a limit below the stale count encodes from the first stale token again
    prompt_cache_params strict = pie(16, 0);
    const token_vec p4 = cat({p3, one});
    ASSERT_TRUE(context_prefill_cached(*ctx, b, p4, strict, &st));
    EXPECT_EQ(st.stale, 0);
    EXPECT_EQ(st.shifted, 0);
    EXPECT_LT(st.cached, (int32_t) p2.size() / 2);
}

// an edit's first gap goes in before the spans PIE keeps after it, which are already in place: its
// tokens attend to the prefix and themselves only (the mask is by position), so their keys in the
// last layer are a cold encoding's; a gap that saw the later spans would not be
TEST_F(prompt_cache_pie, a_gap_attends_only_to_what_precedes_it) {
    const token_vec p1 = m->tokenize(FILE_V1 + "\n# one\n", true, false);
    std::string v2 = FILE_V1;
    v2.insert(v2.find("def write_config"), "# the inverse of read_config, one key=value a line, sorted by key\n");
    const token_vec p2 = m->tokenize(v2 + "\n# one\n", true, false);
    batch b(512, 1);
    prefill_stats st;
    ASSERT_TRUE(context_prefill_cached(*ctx, b, p1, pie(16), &st));
    const prompt_reuse_plan plan = prompt_reuse_plan_make(ctx->cached_prompt(), ctx->cached_stale(), p2, pie(16));
    ASSERT_FALSE(plan.blocks.empty());
    const int32_t gap0 = plan.n_prefix, gap1 = plan.blocks[0].to;
    ASSERT_GT(gap1 - gap0, 4) << "the inserted comment is the first gap";
    ASSERT_TRUE(context_prefill_cached(*ctx, b, p2, pie(16), &st));
    EXPECT_GT(st.shifted, (int32_t) p2.size() / 3);
    ASSERT_TRUE(context_prefill_cached(*cold, b, p2, {}, nullptr));
    const size_t last_layer = test::read_kv_cells(*ctx).k.size() - 1;
    ASSERT_GT(last_layer, 0u);
    expect_cells_match_cold(*ctx, *cold, (int32_t) p2.size(), last_layer, gap0, gap1);
}

// every step of a real history (each version edited into the next, as an edit request with the
// file as the prediction), in one context that keeps its cache between requests, answers as a cold
// context does: token for token, autoregressive and speculative
TEST(prompt_cache, prefix_mode_is_lossless_over_a_real_editing_history) {
    runner rn;
    std::unique_ptr<context> cold;
    ASSERT_NO_FATAL_FAILURE(open_with_cold_context(rn, cold));
    std::string err;
    int32_t steps = 0, reused = 0;
    for (const char * name : {"json", "encoding"}) {
        const std::vector<std::string> versions = history(name);
        ASSERT_GE(versions.size(), 5u) << name;
        for (size_t k = 1; k < versions.size(); k++) {
            for (const char * method : {"ar", "reuse+lookup-longest@16"}) {
                method_spec ms;
                ASSERT_TRUE(method_parse(method, ms, &err)) << err;
                request rq;
                // the same instruction every step: the file is what changes
                request_edit_tokens(*rn.target.model, "Apply the next commit.", versions[k - 1], rq);
                rq.gen.n_predict = 24;
                generate_result warm, fresh;
                ASSERT_TRUE(runner_generate_in(rn, *rn.ctx, ms, rq, warm, &err)) << err;
                cold->kv_clear();
                ASSERT_TRUE(runner_generate_in(rn, *cold, ms, rq, fresh, &err)) << err;
                ASSERT_EQ(warm.tokens, fresh.tokens) << name << " step " << k << " " << method;
                EXPECT_EQ(fresh.prompt_cached, 0);
                reused += warm.prompt_cached;
                steps++;
            }
        }
    }
    EXPECT_GT(steps, 10);
    EXPECT_GT(reused, 0); // the common prefix (the instruction and the file's unchanged start) was kept
}

namespace {

// an edit request of the shipped prompt shape over `file`
request edit_request(const model & m, const std::string & instruction, const std::string & file) {
    request rq;
    request_edit_tokens(m, instruction, file, rq);
    rq.gen.n_predict = 24;
    return rq;
}

} // namespace

// a slot moves on to another file and back: the first file's state, kept in RAM, is loaded back, and
// the answer equals a cold request's token for token (the loaded cells are the saved bytes)
TEST(prompt_store, a_prompt_loaded_back_answers_as_a_cold_request) {
    runner rn;
    std::unique_ptr<context> cold;
    ASSERT_NO_FATAL_FAILURE(open_with_cold_context(rn, cold));
    std::string err;
    const model & m = *rn.target.model;
    const std::vector<std::string> a = history("json"), other = history("encoding");
    ASSERT_FALSE(a.empty());
    ASSERT_FALSE(other.empty());
    prompt_store store(size_t(1) << 30);
    method_spec ms;
    ASSERT_TRUE(method_parse("reuse+lookup-longest@16", ms, &err)) << err;
    generate_result r;
    request first = edit_request(m, "Add type hints.", a[0]);
    EXPECT_EQ(store.prepare(*rn.ctx, first.prompt, {}), 0); // nothing held yet
    ASSERT_TRUE(runner_generate_in(rn, *rn.ctx, ms, first, r, &err)) << err;
    request moved = edit_request(m, "Add type hints.", other[0]);
    EXPECT_EQ(store.prepare(*rn.ctx, moved.prompt, {}), 0);
    EXPECT_EQ(store.stats().saved, 1);
    ASSERT_TRUE(runner_generate_in(rn, *rn.ctx, ms, moved, r, &err)) << err;
    // the first file again, another instruction: the stored prompt holds the file (its prefix)
    for (const char * method : {"ar", "reuse+lookup-longest@16"}) {
        ASSERT_TRUE(method_parse(method, ms, &err)) << err;
        request back = edit_request(m, "Add type hints.", a[0]);
        const int32_t loaded = store.prepare(*rn.ctx, back.prompt, {});
        if (std::string(method) == "ar") {
            EXPECT_GT(loaded, (int32_t) back.prompt.size() / 2) << method;
        }
        generate_result warm, fresh;
        ASSERT_TRUE(runner_generate_in(rn, *rn.ctx, ms, back, warm, &err)) << err;
        cold->kv_clear();
        ASSERT_TRUE(runner_generate_in(rn, *cold, ms, back, fresh, &err)) << err;
        EXPECT_EQ(warm.tokens, fresh.tokens) << method;
        EXPECT_GT(warm.prompt_cached, (int32_t) back.prompt.size() / 2) << method;
        // back on the other file: the first one is kept (or held already), the other loaded back
        store.prepare(*rn.ctx, moved.prompt, {});
        ASSERT_TRUE(runner_generate_in(rn, *rn.ctx, ms, moved, r, &err)) << err;
    }
    EXPECT_GE(store.stats().restored, 3);
    EXPECT_EQ(store.stats().entries, 2);
}

namespace {

// the tiny model on a small context, and prompts over FILE_V1: a, a2 (a's length), c (another file)
struct store_case {
    std::unique_ptr<model> m;
    std::unique_ptr<context> ctx;
    batch b{512, 1};
    token_vec a, a2, c;
    void open() {
        m = test::load_or_fail(test::tiny_model_q8_path());
        ASSERT_TRUE(m);
        ctx = small_context(*m);
        ASSERT_TRUE(ctx);
        a = m->tokenize(FILE_V1 + "\n# one\n", true, false);
        a2 = m->tokenize(FILE_V1 + "\n# two\n", true, false);
        c = m->tokenize("# an unrelated file\n" + FILE_V1, true, false);
    }
};

} // namespace

TEST(prompt_store, the_budget_evicts_the_least_recently_used_and_an_extended_prompt_replaces_its_prefix) {
    store_case sc;
    ASSERT_NO_FATAL_FAILURE(sc.open());
    auto & m = sc.m;
    auto & ctx = sc.ctx;
    batch & b = sc.b;
    const token_vec & a = sc.a, & c = sc.c;
    const token_vec longer = cat({a, m->tokenize(FILE_V1, false, false)});
    ASSERT_TRUE(context_prefill_cached(*ctx, b, a));
    const size_t one = llama_state_seq_get_size(ctx->get(), 0);
    // room for one state: keeping the second evicts the first
    prompt_store small(one + one / 2);
    small.prepare(*ctx, c, {});
    ASSERT_TRUE(context_prefill_cached(*ctx, b, c));
    EXPECT_EQ(small.stats().entries, 1);
    small.prepare(*ctx, a, {});
    EXPECT_EQ(small.stats().saved, 2);
    EXPECT_EQ(small.stats().entries, 1);
    EXPECT_LE(small.stats().bytes, (int64_t) (one + one / 2));
    EXPECT_TRUE(ctx->cached_prompt().empty() || ctx->cached_prompt() == c); // a was evicted: not loaded
    // a budget below one state keeps nothing
    prompt_store tiny(one / 2);
    tiny.prepare(*ctx, a, {});
    EXPECT_EQ(tiny.stats().entries, 0);
    // a prompt that extends a stored one replaces it
    prompt_store big(size_t(1) << 30);
    ASSERT_TRUE(context_prefill_cached(*ctx, b, a));
    big.prepare(*ctx, c, {});
    ASSERT_TRUE(context_prefill_cached(*ctx, b, longer));
    EXPECT_EQ(big.prepare(*ctx, c, {}), 0);
    EXPECT_EQ(big.stats().saved, 2);
    EXPECT_EQ(big.stats().entries, 1);
    // and holds a's tokens: a request for a loads it
    ASSERT_TRUE(context_prefill_cached(*ctx, b, c));
    EXPECT_EQ(big.prepare(*ctx, a, {}), (int32_t) longer.size());
    EXPECT_EQ(ctx->cached_prompt(), longer);
}

// an evicted state's buffer (its pages written) holds the next state that fits it, and that state loads
// back as the same bytes a cold prefill makes
TEST(prompt_store, an_evicted_states_buffer_holds_the_next_state) {
    store_case sc;
    ASSERT_NO_FATAL_FAILURE(sc.open());
    auto & ctx = sc.ctx;
    batch & b = sc.b;
    const token_vec & a = sc.a, & a2 = sc.a2, & c = sc.c;
    ASSERT_EQ(a.size(), a2.size());
    ASSERT_TRUE(context_prefill_cached(*ctx, b, a2));
    std::vector<uint8_t> cold(ctx->state_size());
    ASSERT_EQ(ctx->state_get(cold.data(), cold.size()), cold.size());
    ctx->kv_clear();
    ASSERT_TRUE(context_prefill_cached(*ctx, b, a));
    prompt_store store(cold.size() + cold.size() / 2); // room for one state
    store.prepare(*ctx, c, {});                         // keeps a
    EXPECT_EQ(store.stats().recycled, 0);
    ASSERT_TRUE(context_prefill_cached(*ctx, b, a2));
    store.prepare(*ctx, c, {}); // keeps a2: a is evicted, and its buffer holds a2's state
    EXPECT_EQ(store.stats().saved, 2);
    EXPECT_EQ(store.stats().entries, 1);
    EXPECT_EQ(store.stats().recycled, 1);
    EXPECT_LE(store.stats().bytes, (int64_t) (cold.size() + cold.size() / 2));
    ctx->kv_clear(); // nothing to keep (keeping c would evict a2: room for one state)
    EXPECT_EQ(store.prepare(*ctx, a2, {}), (int32_t) a2.size());
    std::vector<uint8_t> loaded(ctx->state_size());
    ASSERT_EQ(ctx->state_get(loaded.data(), loaded.size()), loaded.size());
    EXPECT_TRUE(loaded == cold);
}

// PIE's stale marks travel with the state: drift control counts them after a load as before
TEST(prompt_store, a_pie_prompt_keeps_its_stale_marks) {
    auto m = test::load_or_fail(test::tiny_model_q8_path());
    ASSERT_TRUE(m);
    auto ctx = small_context(*m);
    ASSERT_TRUE(ctx);
    if (!ctx->can_shift()) GTEST_SKIP() << "this model's cache cannot shift";
    batch b(512, 1);
    std::string v2 = FILE_V1;
    v2.insert(v2.find("def write_config"), "# the inverse of read_config\n");
    const token_vec p1 = m->tokenize(FILE_V1 + "\n# one\n", true, false);
    const token_vec p2 = m->tokenize(v2 + "\n# two\n", true, false);
    std::string unrelated; // nothing of the file: its spans do not match (PIE would shift them in)
    for (int i = 0; i < 40; i++) unrelated += "value_" + std::to_string(i) + " = " + std::to_string(i * 7) + "\n";
    const token_vec other = m->tokenize(unrelated, true, false);
    prefill_stats st;
    ASSERT_TRUE(context_prefill_cached(*ctx, b, p1, pie(16), &st));
    ASSERT_TRUE(context_prefill_cached(*ctx, b, p2, pie(16), &st));
    ASSERT_GT(st.stale, 0);
    const std::vector<uint8_t> marks = ctx->cached_stale();
    prompt_store store(size_t(1) << 30);
    store.prepare(*ctx, other, pie(16));
    ASSERT_TRUE(context_prefill_cached(*ctx, b, other, {}, &st));
    EXPECT_EQ(store.prepare(*ctx, cat({p2, p2}), pie(16)), (int32_t) p2.size());
    EXPECT_EQ(ctx->cached_prompt(), p2);
    EXPECT_EQ(ctx->cached_stale(), marks);
}
