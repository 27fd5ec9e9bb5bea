// Model-native drafters (src/draft/llama-heads.cpp): llama.cpp's draft-mtp on a generated mimo2 model
// with one MTP block (make-model's tiny-mimo2), and draft-eagle3, draft-dflash, draft-dspark with
// generated head files over tiny-256 (random weights): the output equals ar's token for token on every
// weight type tested, 1 and 2 threads, alone and with Reuse in one tree, and each head stays in step
// with the target for the whole request (it drafts on every pass, what a fresh head would draft).
#include "common/test-util.h"
#include "editspec/decoder.h"
#include "editspec/drafters.h"
#include "editspec/make-model.h"
#include "editspec/methods.h"

#include <gtest/gtest.h>

#include <filesystem>

using namespace editspec;

namespace {

std::string mimo_model(const std::string & type) {
    const std::string path = std::string(EDITSPEC_TEST_MODEL_DIR) + "/tiny-mimo2-" + type + ".gguf";
    if (!std::filesystem::exists(path)) {
        make_model_params p;
        p.shape = "tiny-mimo2";
        p.out = path;
        p.type = make_model_type_from_name(type);
        if (p.type == GGML_TYPE_COUNT) {
            p.type = GGML_TYPE_F16;
            p.ftype = make_model_ftype_from_name(type);
        }
        p.seed = 7;
        p.n_threads = 2;
        std::string err;
        EXPECT_TRUE(make_model(p, &err)) << err;
    }
    return path;
}

// a head file for tiny-256 (make-model's tiny-256-eagle3, -dflash, -dspark)
std::string head_file(const std::string & kind) {
    const std::string path = std::string(EDITSPEC_TEST_MODEL_DIR) + "/tiny-256-" + kind + "-f16.gguf";
    if (!std::filesystem::exists(path)) {
        make_model_params p;
        p.shape = "tiny-256-" + kind;
        p.out = path;
        p.type = GGML_TYPE_F16;
        p.seed = 11;
        p.n_threads = 2;
        std::string err;
        EXPECT_TRUE(make_model(p, &err)) << err;
    }
    return path;
}

token_vec prompt_of(const model & m, int i) {
    static const char * texts[] = {
        "def fibonacci(n):\n    if n < 2:\n        return n\n",
        "import os\n\nclass Config:\n    def __init__(self, path):\n        self.path = path\n",
        "for (int i = 0; i < n; i++) {\n    sum += a[i] * b[i];\n}\n",
    };
    return m.tokenize(texts[i % 3], true, false);
}

// an original for Reuse: `tokens` with every `step`-th token from `first` changed (an edit the model writes)
token_vec spoiled(const token_vec & tokens, size_t first, size_t step, int32_t n_vocab) {
    token_vec out = tokens;
    for (size_t k = first; k < out.size(); k += step) out[k] = (out[k] + 7) % n_vocab;
    return out;
}

// the target's context for these tests: 512 tokens, a few sequences
std::unique_ptr<context> head_test_context(const model & m, int32_t threads) {
    context_params cp;
    cp.n_ctx = 512;
    cp.n_threads = threads;
    cp.n_seq_max = 8;
    return test::context_or_fail(m, cp);
}

std::unique_ptr<drafter_i> make_row(const char * name, const drafter_inputs & in) {
    const drafter_desc * d = drafter_find(name);
    EXPECT_NE(d, nullptr) << name;
    if (!d) return nullptr;
    std::string err;
    EXPECT_TRUE(drafter_inputs_meet(*d, in, &err)) << err;
    auto dr = d->make(*d, in, &err);
    EXPECT_TRUE(dr) << err;
    return dr;
}

// a drafter as it was called: every proposal's history length and the tokens it added
struct recording_drafter : drafter_i {
    drafter_i & inner;
    std::vector<std::pair<size_t, token_vec>> calls;
    explicit recording_drafter(drafter_i & d) : inner(d) {}
    const char * name() const override { return inner.name(); }
    uint8_t source() const override { return inner.source(); }
    void begin(std::span<const llama_token> prompt) override { inner.begin(prompt); }
    void accept(std::span<const llama_token> a) override { inner.accept(a); }
    bool follows_target() const override { return inner.follows_target(); }
    // (not told what was sent: a head whose drafts the sizing dropped would back off and skip passes,
    // and every pass's draft is what these tests compare)
    // the inner drafter proposes its whole draft (--head-max tokens) into a tree of its own, which
    // then joins the pass's tree as far as the budget goes
    void propose(std::span<const llama_token> history, draft_tree & tree, int32_t budget) override {
        draft_tree own;
        inner.propose(history, own, 64);
        const token_vec path = own.empty() ? token_vec() : own.path_to(own.size() - 1);
        calls.emplace_back(history.size(), path);
        if (!path.empty() && budget > 0) tree.add_path(-1, path, inner.source(), tree.size() + budget);
    }
};

// a head row beside Reuse of ar's answer with every 7th token spoiled (passes keep 0-6 rows, so the head's
// state is carried from every row of a pass), each of the head's proposals recorded
struct beside_reuse {
    generate_result ar, r;
    std::vector<std::pair<size_t, token_vec>> calls; // recording_drafter's
};

beside_reuse run_beside_reuse(const model & m, context & ctx, drafter_inputs in, const std::string & row,
                              const token_vec & prompt, int32_t n_predict, int32_t draft_max) {
    beside_reuse out;
    generate_params gp;
    gp.n_predict = n_predict;
    out.ar = generate_ar(ctx, prompt, gp);
    const token_vec original = spoiled(out.ar.tokens, 3, 7, m.facts().n_vocab);
    in.target = &m;
    in.target_ctx = &ctx;
    in.original = original;
    auto head = make_row(row.c_str(), in);
    auto reuse = make_row("reuse", in);
    if (!head || !reuse) return out;
    recording_drafter rec(*head);
    drafter_i * ds[] = {reuse.get(), &rec};
    spec_params sp;
    sp.draft_max = draft_max;
    out.r = generate_spec(ctx, prompt, gp, sp, ds);
    EXPECT_NE(out.r.stop, STOP_REASON_ERROR) << out.r.error;
    out.calls = rec.calls;
    return out;
}

// what a fresh head of `row` drafts first after `history`, encoded at once on a context of its own
token_vec fresh_draft(const model & m, drafter_inputs in, const std::string & row, std::span<const llama_token> history) {
    auto ctx = head_test_context(m, 2);
    in.target = &m;
    in.target_ctx = ctx.get();
    in.original = {};
    auto head = make_row(row.c_str(), in);
    if (!head) return {};
    recording_drafter rec(*head);
    drafter_i * ds[] = {&rec};
    generate_params one;
    one.n_predict = 1;
    spec_params sp;
    sp.draft_max = 8;
    const generate_result r = generate_spec(*ctx, history, one, sp, ds);
    EXPECT_NE(r.stop, STOP_REASON_ERROR) << r.error;
    EXPECT_FALSE(rec.calls.empty());
    if (rec.calls.empty()) return {};
    EXPECT_EQ(rec.calls[0].first, history.size());
    return rec.calls[0].second;
}

} // namespace

// after passes of kept and rejected drafts, the head drafts from the target's states what a fresh head
// drafts after the same history encoded at once (its KV and its carried state follow the target's)
TEST(heads, draft_mtp_drafts_as_a_fresh_head_would) {
    auto m = test::load_or_fail(mimo_model("q8_0"));
    ASSERT_TRUE(m);
    auto ctx = head_test_context(*m, 2);
    ASSERT_TRUE(ctx);
    const token_vec prompt = prompt_of(*m, 1);
    const beside_reuse run = run_beside_reuse(*m, *ctx, {}, "llama-draft-mtp", prompt, 40, 12);
    ASSERT_EQ(run.r.tokens, run.ar.tokens);
    ASSERT_GT(run.r.accepted, 10) << "Reuse's drafts were kept: passes of several rows";
    ASSERT_GE(run.calls.size(), 4u);
    token_vec history = prompt;
    history.insert(history.end(), run.r.tokens.begin(), run.r.tokens.end());
    for (size_t c : {(size_t) 1, run.calls.size() / 2, run.calls.size() - 1}) {
        const auto & [n, draft] = run.calls[c];
        SCOPED_TRACE("proposal " + std::to_string(c) + " after " + std::to_string(n) + " tokens");
        EXPECT_FALSE(draft.empty()) << "the head stopped drafting";
        EXPECT_EQ(fresh_draft(*m, {}, "llama-draft-mtp", std::span<const llama_token>(history).first(n)), draft);
    }
}

// every weight type, 1 and 2 threads: llama-draft-mtp's output is ar's, and the head drafts --head-max
// tokens on every pass but the last (a head that lost step with the target stops drafting)
TEST(heads, draft_mtp_is_lossless_and_stays_in_step) {
    for (const char * type : {"f16", "q8_0", "q4_k_m"}) {
        auto m = test::load_or_fail(mimo_model(type));
        ASSERT_TRUE(m);
        ASSERT_EQ(llama_model_n_layer_nextn(m->get()), 1);
        for (int32_t threads : {1, 2}) {
            auto ctx = head_test_context(*m, threads);
            ASSERT_TRUE(ctx);
            for (int i = 0; i < 3; i++) {
                SCOPED_TRACE(std::string(type) + ", " + std::to_string(threads) + " threads, prompt " + std::to_string(i));
                const token_vec prompt = prompt_of(*m, i);
                generate_params gp;
                gp.n_predict = 48;
                const generate_result ar = generate_ar(*ctx, prompt, gp);
                ASSERT_EQ(ar.stop, STOP_REASON_MAX_TOKENS) << ar.error;

                drafter_inputs in;
                in.target = m.get();
                in.target_ctx = ctx.get();
                auto head = make_row("llama-draft-mtp", in);
                ASSERT_TRUE(head);
                drafter_i * ds[] = {head.get()};
                spec_params sp;
                sp.draft_max = 3;
                const generate_result r = generate_spec(*ctx, prompt, gp, sp, ds);
                ASSERT_NE(r.stop, STOP_REASON_ERROR) << r.error;
                EXPECT_EQ(r.tokens, ar.tokens);
                // (the last two passes are shortened by n_predict)
                EXPECT_GE(r.draft_tokens, 3 * (r.target_passes - 2)) << r.target_passes << " passes";
            }
        }
    }
}

// every head file kind over tiny-256 of three weight types, 1 and 2 threads: ar's output, a draft on every
// pass; and after passes of kept and rejected rows, what a fresh head drafts after the same history
TEST(heads, head_files_are_lossless_and_stay_in_step) {
    for (const char * kind : {"eagle3", "dflash", "dspark"}) {
        auto head = test::load_or_fail(head_file(kind));
        ASSERT_TRUE(head);
        const std::string row = std::string("llama-draft-") + kind;
        for (const char * type : {"f16", "q8_0", "q4_k_m"}) {
            auto m = test::load_or_fail(test::typed_model_path(type));
            ASSERT_TRUE(m);
            for (int32_t threads : {1, 2}) {
                auto ctx = head_test_context(*m, threads);
                ASSERT_TRUE(ctx);
                for (int i = 0; i < 2; i++) {
                    SCOPED_TRACE(row + ", " + type + ", " + std::to_string(threads) + " threads, prompt " + std::to_string(i));
                    const token_vec prompt = prompt_of(*m, i);
                    drafter_inputs in;
                    in.head_model = head.get();
                    const beside_reuse run = run_beside_reuse(*m, *ctx, in, row, prompt, 40, 8);
                    EXPECT_EQ(run.r.tokens, run.ar.tokens);
                    EXPECT_GT(run.r.accepted, 10) << "Reuse's rows were kept";
                    size_t drafted = 0;
                    for (const auto & c : run.calls) drafted += !c.second.empty();
                    EXPECT_EQ(drafted, run.calls.size()) << "a pass without a draft: the head lost step";
                    if (threads == 2 && i == 1 && std::string(type) == "q8_0" && run.calls.size() > 4) {
                        token_vec history = prompt;
                        history.insert(history.end(), run.r.tokens.begin(), run.r.tokens.end());
                        const auto & [n, draft] = run.calls[run.calls.size() / 2];
                        EXPECT_EQ(fresh_draft(*m, in, row, std::span<const llama_token>(history).first(n)), draft)
                            << "after " << n << " tokens";
                    }
                }
            }
        }
    }
}

// EfficientEdit's split with the model's head: Reuse drafts the original where it holds, the head where
// Reuse is rejected; and reuse+llama-draft-mtp, both in one tree: both equal ar
TEST(heads, reuse_and_the_head_in_one_tree_are_lossless) {
    auto m = test::load_or_fail(mimo_model("q8_0"));
    ASSERT_TRUE(m);
    auto ctx = head_test_context(*m, 2);
    ASSERT_TRUE(ctx);
    for (int i = 0; i < 3; i++) {
        const token_vec prompt = prompt_of(*m, i);
        generate_params gp;
        gp.n_predict = 64;
        const generate_result ar = generate_ar(*ctx, prompt, gp);
        // the original: ar's answer with a few tokens changed (an edit the model writes), so both
        // phases run
        const token_vec original = spoiled(ar.tokens, 9, 17, m->facts().n_vocab);
        for (const char * method : {"efficientedit-mtp", "reuse+llama-draft-mtp"}) {
            SCOPED_TRACE(std::string(method) + ", prompt " + std::to_string(i));
            method_spec ms;
            std::string err;
            ASSERT_TRUE(method_parse(method, ms, &err)) << err;
            drafter_inputs in;
            in.target = m.get();
            in.target_ctx = ctx.get();
            in.original = original;
            std::vector<std::unique_ptr<drafter_i>> owned;
            ASSERT_TRUE(method_make_drafters(ms, in, owned, &err)) << err;
            std::vector<drafter_i *> ds;
            for (auto & d : owned) ds.push_back(d.get());
            spec_params sp;
            sp.draft_max = 8;
            const generate_result r = generate_spec(*ctx, prompt, gp, sp, ds);
            ASSERT_NE(r.stop, STOP_REASON_ERROR) << r.error;
            EXPECT_EQ(r.tokens, ar.tokens);
            EXPECT_GT(r.by_source[DRAFT_SOURCE_REUSE].n_offered, 0);
            EXPECT_GT(r.by_source[DRAFT_SOURCE_MODEL].n_offered, 0);
        }
    }
}

// a model without MTP layers: the rows are refused naming the file; the CLI lists them in --help and
// runs them to ar's output
TEST(heads, rows_refused_without_a_head_and_listed) {
    auto m = test::load_or_fail(test::tiny_model_q8_path());
    ASSERT_TRUE(m);
    drafter_inputs in;
    in.target = m.get();
    std::string err;
    EXPECT_FALSE(drafter_inputs_meet(*drafter_find("llama-draft-mtp"), in, &err));
    EXPECT_NE(err.find("multi-token-prediction"), std::string::npos) << err;
    EXPECT_NE(err.find(test::tiny_model_q8_path()), std::string::npos) << err;

    std::string help;
    ASSERT_EQ(test::run_command(std::string(EDITSPEC_BIN) + " complete --help", &help), 0) << help;
    EXPECT_NE(help.find("llama-draft-mtp"), std::string::npos);
    EXPECT_NE(help.find("--head-max"), std::string::npos);

    const std::string base = std::string(EDITSPEC_BIN) + " complete -m " + mimo_model("q8_0") +
                             " -t 1 -c 256 -n 32 -p 'def add(a, b):' ";
    std::string ar, head;
    ASSERT_EQ(test::run_command(base + "--method ar", &ar), 0) << ar;
    ASSERT_EQ(test::run_command(base + "--method llama-draft-mtp --head-max 2", &head), 0) << head;
    EXPECT_EQ(ar, head);
    std::string bad;
    EXPECT_EQ(test::run_command(std::string(EDITSPEC_BIN) + " complete -m " + test::tiny_model_q8_path() +
                                    " -t 1 -n 4 -p 'x' --method llama-draft-mtp 2>&1",
                                &bad),
              2)
        << bad;
    EXPECT_NE(bad.find("multi-token-prediction"), std::string::npos) << bad;

    // a head file through the CLI (--head-model, as llama-server's -md): ar's output; a file of another
    // kind is refused naming it
    const std::string t = std::string(EDITSPEC_BIN) + " complete -m " + test::typed_model_path("q8_0") +
                          " -t 1 -c 256 -n 24 -p 'def add(a, b):' ";
    ASSERT_EQ(test::run_command(t + "--method ar", &ar), 0) << ar;
    ASSERT_EQ(test::run_command(t + "--method llama-draft-eagle3 --head-model " + head_file("eagle3"), &head), 0) << head;
    EXPECT_EQ(ar, head);
    EXPECT_EQ(test::run_command(t + "--method llama-draft-eagle3 --head-model " + head_file("dflash") + " 2>&1", &bad), 2) << bad;
    EXPECT_NE(bad.find("is not one"), std::string::npos) << bad;
    EXPECT_NE(bad.find(head_file("dflash")), std::string::npos) << bad;
}
