// The test that matters most: at temperature 0, speculative output equals greedy autoregressive
// output token for token, whatever the drafts. Flash attention off (docs/results/design-notes/engine-notes.md).
#include "common/test-util.h"
#include "editspec/decoder.h"

#include <gtest/gtest.h>

#include <random>

using namespace editspec;

namespace {

// Proposes adversarial trees around a known reference continuation (the autoregressive output):
// right paths, wrong paths, branches, repeats, drafts past EOS and past the context.
struct adversarial_drafter : drafter_i {
    const token_vec & ref;      // autoregressive output for this prompt
    size_t n_prompt = 0;
    std::mt19937 rng;
    int32_t mode;               // which kind of draft to make (see propose)
    int32_t n_vocab;
    llama_token eos;

    adversarial_drafter(const token_vec & ref, uint32_t seed, int32_t mode, int32_t n_vocab, llama_token eos)
        : ref(ref), rng(seed), mode(mode), n_vocab(n_vocab), eos(eos) {}

    const char * name() const override { return "adversarial"; }
    uint8_t source() const override { return DRAFT_SOURCE_TEST; }
    void begin(std::span<const llama_token> prompt) override { n_prompt = prompt.size(); }
    void accept(std::span<const llama_token>) override {}

    llama_token random_token() { return (llama_token) (rng() % n_vocab); }

    // the reference from output position i on, n tokens (EOS and garbage past its end)
    token_vec truth(size_t i, int32_t n) {
        token_vec out;
        for (int32_t k = 0; k < n; k++) {
            const size_t j = i + k;
            out.push_back(j < ref.size() ? ref[j] : (j == ref.size() ? eos : random_token()));
        }
        return out;
    }

    void propose(std::span<const llama_token> history, draft_tree & tree, int32_t budget) override {
        const size_t i = history.size() - n_prompt; // output tokens so far
        const int32_t m = mode >= 0 ? mode : (int32_t) (rng() % 8);
        switch (m) {
            case 0: // nothing
                break;
            case 1: { // all wrong: a random chain
                token_vec t(1 + rng() % 16);
                for (auto & x : t) x = random_token();
                tree.add_path(-1, t, source(), budget);
                break;
            }
            case 2: { // all right, long (runs past EOS and often past the context)
                tree.add_path(-1, truth(i, 64), source(), budget);
                break;
            }
            case 3: { // right for a while, then wrong
                token_vec t = truth(i, 1 + rng() % 24);
                t.back() = (t.back() + 1) % n_vocab;
                tree.add_path(-1, t, source(), budget);
                break;
            }
            case 4: { // 64 leaves: many wrong siblings at every level, the right one somewhere
                int32_t parent = -1;
                const token_vec t = truth(i, 8);
                for (int32_t d = 0; d < 8 && tree.size() < budget; d++) {
                    const int32_t right_at = rng() % 8;
                    int32_t next = -1;
                    for (int32_t s = 0; s < 8 && tree.size() < budget; s++) {
                        const llama_token tok = s == right_at ? t[d] : random_token();
                        const int32_t c = tree.add(parent, tok, source());
                        if (s == right_at) next = c;
                    }
                    if (next < 0) break;
                    parent = next;
                }
                break;
            }
            case 5: { // repeated tokens: the last token over and over, and the truth beside it
                token_vec rep(32, history.back());
                tree.add_path(-1, rep, source(), budget);
                tree.add_path(-1, truth(i, 8), source(), budget);
                break;
            }
            case 6: { // depth 64 chain that is right only at odd depths
                token_vec t = truth(i, 64);
                for (size_t k = 0; k < t.size(); k += 2) t[k] = random_token();
                tree.add_path(-1, t, source(), budget);
                break;
            }
            case 7: { // several partly right branches sharing prefixes
                for (int b = 0; b < 6; b++) {
                    token_vec t = truth(i, 2 + rng() % 20);
                    t[rng() % t.size()] = random_token();
                    tree.add_path(-1, t, source(), budget);
                }
                break;
            }
        }
    }
};

struct spec_fixture : public ::testing::Test {
    std::unique_ptr<model> m;
    std::unique_ptr<context> ctx;
    cost_model flat_cost; // every pass costs the same: the cost model keeps whole trees

    void load(const std::string & path, int32_t n_ctx = 192, int32_t n_threads = 1,
              int32_t rs_snapshots = CONTEXT_RS_ROLLBACK) {
        m = test::load_or_fail(path);
        ASSERT_TRUE(m);
        ctx = test::make_spec_context(*m, n_ctx, n_threads, rs_snapshots);
        ASSERT_TRUE(ctx);
        // (a second a pass: what a checkpoint's save and load take, which the sizing adds to a drafted pass
        // of a model with checkpoints, is nothing beside it, so the trees do not depend on the machine's speed)
        flat_cost = cost_model_from_table({1, 512}, {1000.0, 1000.0});
    }

    token_vec random_prompt(std::mt19937 & rng) { return test::random_code_prompt(*m, rng); }

    int64_t ar_passes = 0, spec_passes = 0; // over the check_lossless calls

    void check_lossless(int n_prompts, uint32_t seed) {
        std::mt19937 rng(seed);
        for (int p = 0; p < n_prompts; p++) {
            const token_vec prompt = random_prompt(rng);
            generate_params gp;
            gp.n_predict = (p % 5 == 0) ? -1 : 8 + rng() % 48; // -1 runs into the context limit
            const generate_result ar = generate_ar(*ctx, prompt, gp);
            ASSERT_NE(ar.stop, STOP_REASON_ERROR) << ar.error;

            adversarial_drafter d(ar.tokens, rng(), -1, m->facts().n_vocab, m->facts().eos);
            drafter_i * ds[] = {&d};
            spec_params sp;
            if (p % 2 == 0) {
                sp.draft_max = 1 + rng() % 96; // fixed caps, up to trees larger than 64 nodes
            } else {
                sp.cost = &flat_cost;
            }
            const generate_result spec = generate_spec(*ctx, prompt, gp, sp, ds);
            ASSERT_NE(spec.stop, STOP_REASON_ERROR) << spec.error << " (prompt " << p << ", draft_max " << sp.draft_max << ")";
            size_t first_diff = 0;
            while (first_diff < std::min(spec.tokens.size(), ar.tokens.size()) && spec.tokens[first_diff] == ar.tokens[first_diff]) first_diff++;
            ASSERT_EQ(spec.tokens, ar.tokens) << "prompt " << p << " draft_max " << sp.draft_max << " first difference at "
                                              << first_diff << " of " << ar.tokens.size() << " (prompt " << prompt.size() << " tokens)";
            EXPECT_EQ(spec.stop, ar.stop) << "prompt " << p;
            if (!ctx->checkpoints()) EXPECT_LE(spec.target_passes, ar.target_passes); // (a checkpoint's replay may add a pass)
            ar_passes += ar.target_passes;
            spec_passes += spec.target_passes;
        }
    }
};

TEST_F(spec_fixture, greedy_lossless_q8_0_random_and_adversarial_drafts) {
    load(test::tiny_model_q8_path());
    check_lossless(120, 11);
}

TEST_F(spec_fixture, greedy_lossless_f32_random_and_adversarial_drafts) {
    load(test::tiny_model_path());
    check_lossless(100, 12);
}

// the type most users download, and the batch-invariant kernels' two paths for it (repacked Q4_K
// gemv and gemm, vec_dot Q6_K); 2 threads split the rows differently from 1
TEST_F(spec_fixture, greedy_lossless_q4_k_m_random_and_adversarial_drafts) {
    load(test::typed_model_path("q4_k_m"), 192, 2);
    check_lossless(60, 13);
}

TEST_F(spec_fixture, greedy_lossless_q8_0_wide_two_threads) {
    load(test::typed_model_path("q8_0"), 192, 2);
    check_lossless(40, 14);
}

// a mixture of experts (Qwen3-Coder-30B-A3B's layout at toy size): each pass's rows grouped by expert
TEST_F(spec_fixture, greedy_lossless_mixture_of_experts) {
    load(test::typed_model_path("q4_k_m", "tiny-qwen3moe"), 192, 2);
    check_lossless(20, 17);
}

// the recurrent layouts at toy size: Qwen3.5's (a gated delta net beside the KV cache), Qwen3-Next's (the
// same with experts and a shared one; llama.cpp rolls it back with our patches/llama-rs-rollback.patch) and
// Mamba-2's (recurrent layers alone, also by that patch)
static const char * const k_recurrent_models[] = {"tiny-qwen35:q8_0",    "tiny-qwen35:q4_k_m", "tiny-qwen3next:q8_0",
                                                  "tiny-qwen3next:q4_k_m", "tiny-mamba2:q8_0",   "tiny-mamba2:q4_k_m"};

static std::string recurrent_model_path(const std::string & model) {
    const std::string shape = model.substr(0, model.find(':'));
    return test::typed_model_path(model.substr(shape.size() + 1), shape);
}

// a chain's rejected tail goes back to a snapshot of the state (CONTEXT_RS_ROLLBACK tokens at most, and
// fewer with fewer snapshots), trees are not offered to it
TEST_F(spec_fixture, greedy_lossless_hybrid_recurrent) {
    for (const char * model : k_recurrent_models) {
        // (3 snapshots: chains of 3 at most, on one model of each of the two ops)
        for (const int32_t snapshots : {CONTEXT_RS_ROLLBACK, 3}) {
            if (snapshots == 3 && model != std::string("tiny-qwen3next:q4_k_m") && model != std::string("tiny-mamba2:q8_0")) continue;
            SCOPED_TRACE(std::string(model) + " snapshots " + std::to_string(snapshots));
            load(recurrent_model_path(model), 192, 2, snapshots);
            ASSERT_TRUE(m->facts().recurrent);
            EXPECT_EQ(ctx->rollback_max(), snapshots);
            check_lossless(8, 18);
        }
    }
    // and the drafts that were right were kept: fewer passes than tokens
    EXPECT_LT(spec_passes * 10, ar_passes * 7) << spec_passes << " passes against ar's " << ar_passes;
}

// without snapshots (--rs-snapshots 0, and the models llama.cpp cannot roll back: Granite 4's hybrid,
// Falcon-H1, Jamba, RWKV): a pass with drafts saves the state first and goes back to it after a
// rejection, its accepted tokens decoded again in the next pass
TEST_F(spec_fixture, greedy_lossless_recurrent_checkpoints) {
    for (const char * model : k_recurrent_models) {
        if (std::string(model).starts_with("tiny-qwen35")) continue; // (Qwen3-Next's ops, without the experts)
        SCOPED_TRACE(model);
        load(recurrent_model_path(model), 192, 2, 0);
        ASSERT_TRUE(m->facts().recurrent);
        ASSERT_TRUE(ctx->checkpoints());
        check_lossless(8, 19);
    }
    EXPECT_LT(spec_passes * 10, ar_passes * 7) << spec_passes << " passes against ar's " << ar_passes;
}

TEST_F(spec_fixture, greedy_lossless_q5_k_m) {
    load(test::typed_model_path("q5_k_m"));
    check_lossless(30, 15);
}

// each draft kind alone, so a failure names the kind
TEST_F(spec_fixture, greedy_lossless_per_draft_kind) {
    load(test::tiny_model_q8_path());
    std::mt19937 rng(5);
    for (int32_t mode = 0; mode < 8; mode++) {
        for (int p = 0; p < 6; p++) {
            const token_vec prompt = random_prompt(rng);
            generate_params gp;
            gp.n_predict = 40;
            const generate_result ar = generate_ar(*ctx, prompt, gp);
            adversarial_drafter d(ar.tokens, rng(), mode, m->facts().n_vocab, m->facts().eos);
            drafter_i * ds[] = {&d};
            spec_params sp;
            sp.draft_max = 128;
            const generate_result spec = generate_spec(*ctx, prompt, gp, sp, ds);
            ASSERT_EQ(spec.tokens, ar.tokens) << "mode " << mode << " prompt " << p;
            if (mode == 2) {
                // all-right drafts: the whole output in very few passes
                EXPECT_LE(spec.target_passes, 3) << "mode 2 prompt " << p;
            }
        }
    }
}

// a drafter that never proposes: one token per pass, same output
TEST_F(spec_fixture, empty_drafts_behave_like_autoregressive) {
    load(test::tiny_model_q8_path());
    std::mt19937 rng(3);
    const token_vec prompt = random_prompt(rng);
    generate_params gp;
    gp.n_predict = 30;
    const generate_result ar = generate_ar(*ctx, prompt, gp);
    adversarial_drafter d(ar.tokens, 1, 0, m->facts().n_vocab, m->facts().eos);
    drafter_i * ds[] = {&d};
    spec_params sp;
    sp.draft_max = 16;
    const generate_result spec = generate_spec(*ctx, prompt, gp, sp, ds);
    EXPECT_EQ(spec.tokens, ar.tokens);
    EXPECT_EQ(spec.target_passes, ar.target_passes);
    EXPECT_EQ(spec.draft_tokens, 0);
}

// forced choices (replay): the reference is the output whatever the model says, and right drafts
// are accepted
TEST_F(spec_fixture, forced_choices_follow_the_reference) {
    load(test::tiny_model_q8_path());
    const token_vec prompt = m->tokenize("def f(x):\n", true, false);
    const token_vec ref = m->tokenize("    return x * 2\n", false, false);
    generate_params gp;
    gp.n_predict = -1;
    const verify_forced forced{ref, m->facts().eos};
    spec_params sp;
    sp.verify.forced = &forced;
    const generate_result ar = generate_spec(*ctx, prompt, gp, sp, {});
    EXPECT_EQ(ar.tokens, ref);
    EXPECT_EQ(ar.stop, STOP_REASON_EOG);
    EXPECT_EQ(ar.target_passes, (int32_t) ref.size() + 1);
    adversarial_drafter d(ref, 1, 2, m->facts().n_vocab, m->facts().eos);
    drafter_i * ds[] = {&d};
    sp.draft_max = 64;
    const generate_result spec = generate_spec(*ctx, prompt, gp, sp, ds);
    EXPECT_EQ(spec.tokens, ref);
    EXPECT_EQ(spec.target_passes, 1); // one pass accepts everything, EOS included
}

// logits of every tree node equal the logits of decoding that node's path linearly
void check_tree_logits(const model & m, context & ctx, const draft_tree & tree, const token_vec & prompt, double tol) {
    const int32_t n_vocab = m.facts().n_vocab;

    // tree pass, laid out as generate_spec does
    ctx.kv_clear();
    batch b(512, 65);
    ASSERT_TRUE(context_prefill(ctx, b, token_vec(prompt.begin(), prompt.end() - 1), 0, 0));
    token_vec tokens;
    std::vector<int32_t> parents;
    for (const draft_node & nd : tree.nodes) {
        tokens.push_back(nd.token);
        parents.push_back(nd.parent);
    }
    const tree_pass tp = context_tree_batch(ctx, b, token_vec{prompt.back()}, (llama_pos) prompt.size() - 1, tokens, parents);
    EXPECT_EQ(tp.n_leaves, (int32_t) tree.leaves().size());
    ASSERT_TRUE(ctx.decode(b));
    std::vector<std::vector<float>> tree_logits;
    for (int32_t i = 0; i <= tree.size(); i++) {
        const float * l = ctx.logits(i);
        tree_logits.emplace_back(l, l + n_vocab);
    }
    // each node's path, one token at a time, in a fresh cache
    for (int32_t i = 0; i < tree.size(); i++) {
        token_vec path(prompt.begin(), prompt.end());
        const token_vec p = tree.path_to(i);
        path.insert(path.end(), p.begin(), p.end());
        ctx.kv_clear();
        batch one(1, 1);
        for (size_t k = 0; k < path.size(); k++) {
            one.clear();
            one.add(path[k], (llama_pos) k, {0}, true);
            ASSERT_TRUE(ctx.decode(one));
        }
        const float * l = ctx.logits(0);
        double num = 0, den = 0;
        for (int32_t v = 0; v < n_vocab; v++) {
            num += (l[v] - tree_logits[1 + i][v]) * (l[v] - tree_logits[1 + i][v]);
            den += (double) l[v] * l[v];
        }
        EXPECT_LE(std::sqrt(num / den), tol) << "node " << i << " depth " << tree.depth(i);
    }
}

TEST_F(spec_fixture, tree_node_logits_equal_linear_decoding) {
    load(test::tiny_model_path());
    const token_vec prompt = m->tokenize("import os\nprint(os.getcwd())\n", true, false);
    std::mt19937 rng(9);
    draft_tree tree;
    for (int b = 0; b < 12; b++) {
        token_vec t(1 + rng() % 6);
        for (auto & x : t) x = 100 + rng() % 5; // few distinct tokens: many shared prefixes
        tree.add_path(-1, t, DRAFT_SOURCE_TEST, 64);
    }
    ASSERT_GT(tree.leaves().size(), 2u);
    check_tree_logits(*m, *ctx, tree, prompt, 1e-3);
}

// 8 levels of 8 siblings (57 leaves): every node sees exactly its own path (F32: rounding-level
// rounding only), and the first chain is bit-identical (Q8_0)
TEST_F(spec_fixture, wide_tree_node_logits_equal_linear_decoding) {
    std::mt19937 rng(4);
    draft_tree tree;
    int32_t parent = -1;
    for (int d = 0; d < 8 && tree.size() < 64; d++) {
        int32_t next = -1;
        for (int s = 0; s < 8 && tree.size() < 64; s++) {
            const int32_t c = tree.add(parent, 100 + rng() % 30000, DRAFT_SOURCE_TEST);
            if (s == 3) next = c;
        }
        parent = next;
    }
    ASSERT_GT(tree.leaves().size(), 50u);
    // the decoder lays trees out depth-first: deeper nodes come before later shallow siblings
    accept_stats stats;
    const draft_tree dfs = tree_order_dfs(tree, tree_node_probs(tree, stats));
    load(test::tiny_model_path());
    const token_vec prompt = m->tokenize("def f(x):\n    return x", true, false);
    check_tree_logits(*m, *ctx, tree, prompt, 1e-3);
    check_tree_logits(*m, *ctx, dfs, prompt, 1e-3);
    load(test::tiny_model_q8_path());
    check_tree_logits(*m, *ctx, tree_first_chain(dfs), prompt, 0.0);
}

// which of two siblings the chain takes does not matter: either chain is bit-identical
TEST_F(spec_fixture, first_chain_is_exact_whichever_sibling_it_takes) {
    load(test::tiny_model_q8_path());
    const token_vec prompt = {32013, 327, 207, 15, 207, 15, 3160};
    draft_tree small;
    small.add_path(-1, token_vec{16257, 24568}, DRAFT_SOURCE_TEST, 8);
    small.add_path(-1, token_vec{16257, 23687}, DRAFT_SOURCE_TEST, 8);
    check_tree_logits(*m, *ctx, tree_first_chain(small), prompt, 0.0);
    draft_tree swapped;
    swapped.add_path(-1, token_vec{16257, 23687}, DRAFT_SOURCE_TEST, 8);
    check_tree_logits(*m, *ctx, tree_first_chain(swapped), prompt, 0.0);
}

} // namespace

// a costly drafter (a draft model's stand-in) whose nodes the cost model always drops is asked
// less and less often (1, 2, 4, ... 32 passes apart); a cheap one is asked every pass; output
// stays autoregressive either way
struct counting_drafter : drafter_i {
    bool is_costly;
    int32_t n_asked = 0;
    draft_backoff backoff;
    explicit counting_drafter(bool costly) : is_costly(costly) {}
    const char * name() const override { return "counting"; }
    uint8_t source() const override { return DRAFT_SOURCE_TEST; }
    void begin(std::span<const llama_token>) override { n_asked = 0; }
    void accept(std::span<const llama_token>) override {}
    void sized(const draft_tree & sent) override {
        if (is_costly) backoff.sized(sent, source());
    }
    void propose(std::span<const llama_token>, draft_tree & tree, int32_t budget) override {
        if (is_costly && backoff.skip()) return;
        n_asked++;
        tree.add_path(-1, token_vec(4, 7), source(), budget);
        backoff.proposed(true);
    }
};

TEST_F(spec_fixture, costly_drafter_backs_off_while_its_nodes_are_dropped) {
    load(test::tiny_model_q8_path());
    // one extra token costs 1000 passes: the sizing keeps no draft node
    const cost_model steep = cost_model_from_table({1, 2, 512}, {1.0, 1000.0, 1000.0});
    std::mt19937 rng(21);
    const token_vec prompt = random_prompt(rng);
    generate_params gp;
    gp.n_predict = 100;
    const generate_result ar = generate_ar(*ctx, prompt, gp);
    for (bool costly : {false, true}) {
        counting_drafter d(costly);
        drafter_i * ds[] = {&d};
        spec_params sp;
        sp.cost = &steep;
        const generate_result spec = generate_spec(*ctx, prompt, gp, sp, ds);
        ASSERT_EQ(spec.tokens, ar.tokens);
        if (costly) {
            // asked at passes 1, 3, 6, 11, 20, 37, 70: 7 of 100
            EXPECT_LE(d.n_asked, 10) << "costly drafter asked every pass";
            EXPECT_GE(d.n_asked, 5);
        } else {
            EXPECT_EQ(d.n_asked, spec.target_passes);
        }
    }
}
