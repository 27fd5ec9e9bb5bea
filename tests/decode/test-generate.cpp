// Autoregressive generation: determinism, stop conditions, streaming, bad input; the cost model's cache.
#include "common/test-util.h"
#include "editspec/cost.h"
#include "editspec/decoder.h"
#include "editspec/generate.h"
#include "editspec/lookup.h"
#include "editspec/sampling.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

using namespace editspec;

namespace {

struct generate_fixture : public ::testing::Test {
    std::unique_ptr<model> m;
    std::unique_ptr<context> ctx;
    void SetUp() override {
        m = test::load_or_fail(test::tiny_model_path());
        ASSERT_TRUE(m);
        context_params cp;
        cp.n_ctx = 256;
        cp.n_threads = 1; // a tiny model gains nothing from threads, and spinning threads stall on a busy machine
        std::string err;
        ctx = context_create(*m, cp, &err);
        ASSERT_TRUE(ctx) << err;
    }
    generate_result run(const std::string & prompt, generate_params gp) {
        return generate_ar(*ctx, m->tokenize(prompt, true, false), gp);
    }
};

// speculative decoding from a cleared cache, drafted by a noisy copy of the reference answer `ref`
// (right drafts, wrong ones and branches: accepted and rejected paths in every run)
generate_result spec_from_reference(context & ctx, std::span<const llama_token> prompt, const generate_params & gp,
                                    const token_vec & ref, uint32_t seed, int32_t draft_max) {
    test::noisy_reference_drafter d(ref, seed, ctx.owner().facts().n_vocab);
    drafter_i * ds[] = {&d};
    spec_params spp;
    spp.draft_max = draft_max;
    ctx.kv_clear();
    return generate_spec(ctx, prompt, gp, spp, ds);
}

// streams gp's text into out (out must outlive the generation)
void stream_into(generate_params & gp, std::string & out) {
    gp.on_text = [&out](std::string_view s) {
        out += s;
        return true;
    };
}

TEST_F(generate_fixture, greedy_is_deterministic) {
    generate_params gp;
    gp.n_predict = 24;
    const generate_result a = run("def fib(n):", gp);
    const generate_result b = run("def fib(n):", gp);
    ASSERT_EQ(a.stop, STOP_REASON_MAX_TOKENS);
    EXPECT_EQ(a.tokens.size(), 24u);
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_EQ(a.target_passes, 24);
}

// llama-server's timings count the pass that reads the prompt's end as prompt time; the server reports
// prompt_ms + first_pass_ms there, so the first pass must be timed on its own, inside gen_ms
TEST_F(generate_fixture, the_first_pass_is_timed_inside_generation) {
    generate_params gp;
    gp.n_predict = 16;
    const token_vec prompt = m->tokenize(std::string(40, ' ') + "def fib(n):\n    return", true, false);
    const generate_result ar = generate_ar(*ctx, prompt, gp);
    ASSERT_EQ(ar.tokens.size(), 16u);
    EXPECT_GT(ar.first_pass_ms, 0.0);
    EXPECT_LT(ar.first_pass_ms, ar.gen_ms);
    const generate_result spec = spec_from_reference(*ctx, prompt, gp, ar.tokens, 3, 8);
    EXPECT_EQ(spec.tokens, ar.tokens);
    EXPECT_GT(spec.first_pass_ms, 0.0);
    EXPECT_LE(spec.first_pass_ms, spec.gen_ms);
}

TEST_F(generate_fixture, seeded_sampling_is_deterministic_per_seed) {
    generate_params gp;
    gp.n_predict = 32;
    gp.sampling = {.temp = 1.5f, .top_k = 0, .top_p = 1.0f, .seed = 7};
    const generate_result a = run("import numpy as np\n", gp);
    const generate_result b = run("import numpy as np\n", gp);
    EXPECT_EQ(a.tokens, b.tokens);
    int differing_seeds = 0;
    for (uint32_t seed = 8; seed < 12; seed++) {
        gp.sampling.seed = seed;
        differing_seeds += run("import numpy as np\n", gp).tokens != a.tokens;
    }
    // a random-weight model at temperature 1.5 is near uniform: other seeds give other text
    EXPECT_GE(differing_seeds, 3);
}

TEST_F(generate_fixture, streaming_pieces_concatenate_to_the_text) {
    generate_params gp;
    gp.n_predict = 40;
    std::string streamed;
    stream_into(gp, streamed);
    const generate_result r = run("for i in range(3):", gp);
    EXPECT_EQ(streamed, r.text);
    EXPECT_EQ(r.text, m->detokenize(r.tokens));
}

TEST_F(generate_fixture, stop_string_cuts_the_text) {
    generate_params gp;
    gp.n_predict = 40;
    const generate_result full = run("while True:", gp);
    ASSERT_GE(full.text.size(), 12u);
    // stop at a piece of what greedy decoding produces anyway
    const std::string stop = full.text.substr(full.text.size() / 2, 3);
    gp.stop = {stop};
    std::string streamed;
    stream_into(gp, streamed);
    const generate_result cut = run("while True:", gp);
    EXPECT_EQ(cut.stop, STOP_REASON_STRING);
    EXPECT_EQ(cut.text, full.text.substr(0, full.text.find(stop)));
    EXPECT_EQ(streamed, cut.text); // the stop string never reaches the stream
}

// llama.cpp's infill limits on a known text, token by token through the sink
TEST_F(generate_fixture, line_rules_end_the_text_at_a_line) {
    const std::string text = "def f(x):\n    y = x\n\n    return y\nz = f(1)\n";
    const token_vec toks = m->tokenize(text, false, false);
    auto sink_text = [&](const generate_params & gp, generate_result & r) {
        output_sink sink(*m, gp, r);
        for (llama_token t : toks) {
            if (!sink.push(t)) return;
        }
        sink.finish();
    };
    // n_indent 4: the blank line is kept, the first line back at column 0 is not (nor streamed)
    generate_params gp;
    gp.n_indent = 4;
    std::string streamed;
    stream_into(gp, streamed);
    generate_result r;
    sink_text(gp, r);
    EXPECT_EQ(r.stop, STOP_REASON_LINE);
    EXPECT_EQ(r.text, "def f(x):\n    y = x\n\n    return y\n");
    EXPECT_EQ(streamed, r.text);
    // indented enough throughout: nothing cut
    gp.n_indent = 0;
    generate_result whole;
    streamed.clear();
    sink_text(gp, whole);
    EXPECT_EQ(whole.stop, STOP_REASON_NONE);
    EXPECT_EQ(whole.text, text);
    // t_max_ms already spent: the text ends at the first newline, never inside a line
    gp.t_max_ms = 1e-6;
    generate_result timed;
    streamed.clear();
    sink_text(gp, timed);
    EXPECT_EQ(timed.stop, STOP_REASON_LINE);
    const size_t nl = timed.text.find('\n');
    ASSERT_NE(nl, std::string::npos) << timed.text;
    EXPECT_EQ(text.rfind(timed.text, 0), 0u) << timed.text; // a prefix
    // at most the next line's indentation after the newline (a token may carry both)
    EXPECT_EQ(timed.text.find_first_not_of(" \t", nl + 1), std::string::npos) << timed.text;
    EXPECT_EQ(streamed, timed.text);
}

TEST_F(generate_fixture, callback_can_stop) {
    generate_params gp;
    gp.n_predict = 40;
    int calls = 0;
    gp.on_text = [&](std::string_view) { return ++calls < 3; };
    const generate_result r = run("x = ", gp);
    EXPECT_EQ(r.stop, STOP_REASON_CALLBACK);
    EXPECT_EQ(calls, 3);
}

TEST_F(generate_fixture, prompt_longer_than_context_is_an_error) {
    std::string prompt;
    for (int i = 0; i < 400; i++) prompt += "token ";
    generate_params gp;
    const generate_result r = run(prompt, gp);
    EXPECT_EQ(r.stop, STOP_REASON_ERROR);
    EXPECT_NE(r.error.find("context holds 256"), std::string::npos) << r.error;
    EXPECT_TRUE(r.tokens.empty());
}

TEST_F(generate_fixture, generation_stops_when_the_context_is_full) {
    generate_params gp;
    gp.n_predict = -1;
    const token_vec prompt = m->tokenize("a", true, false);
    const generate_result r = generate_ar(*ctx, prompt, gp);
    // a random model rarely says EOS: it fills the cache
    if (r.stop != STOP_REASON_EOG) {
        EXPECT_EQ(r.stop, STOP_REASON_CONTEXT);
        EXPECT_EQ((int) (prompt.size() + r.tokens.size()), ctx->n_ctx() + 1);
    }
}

TEST_F(generate_fixture, zero_tokens) {
    generate_params gp;
    gp.n_predict = 0;
    const generate_result r = run("x", gp);
    EXPECT_TRUE(r.tokens.empty());
    EXPECT_EQ(r.stop, STOP_REASON_MAX_TOKENS);
}

} // namespace

// a prompt whose prefix an earlier request left in the KV cache decodes only its new tokens, and
// gives exactly what a fresh cache gives (Q8_0 and Q4_K_M: batch-invariant kernels), both decoders
TEST(prompt_cache, reused_prefix_gives_the_fresh_output) {
    for (const std::string & path : {std::string(test::tiny_model_q8_path()), test::typed_model_path("q4_k_m")}) {
        auto m = test::load_or_fail(path);
        ASSERT_TRUE(m);
        auto ctx = test::make_spec_context(*m, 256, 1);
        ASSERT_TRUE(ctx);
        const token_vec a = m->tokenize("def add(a, b):\n    return a + b\n\ndef sub(a, b):\n", true, false);
        const token_vec b = m->tokenize("def add(a, b):\n    return a + b\n\ndef mul(a, b):\n    return", true, false);
        generate_params gp;
        gp.n_predict = 24;
        ctx->kv_clear();
        const generate_result fresh = generate_ar(*ctx, b, gp);
        EXPECT_EQ(fresh.prompt_cached, 0);
        generate_ar(*ctx, a, gp);
        const generate_result reused = generate_ar(*ctx, b, gp);
        size_t common = 0;
        while (a[common] == b[common]) common++;
        EXPECT_EQ(reused.prompt_cached, (int32_t) common) << path;
        EXPECT_EQ(reused.tokens, fresh.tokens) << path;
        // the same prompt again: all but its last token come from the cache
        const generate_result again = generate_ar(*ctx, b, gp);
        EXPECT_EQ(again.prompt_cached, (int32_t) b.size() - 1);
        EXPECT_EQ(again.tokens, fresh.tokens);
        // the speculative decoder after another prompt
        generate_ar(*ctx, a, gp);
        lookup_drafter lookup{lookup_params{}};
        drafter_i * ds[] = {&lookup};
        spec_params sp;
        sp.draft_max = 8;
        const generate_result spec = generate_spec(*ctx, b, gp, sp, ds);
        EXPECT_EQ(spec.prompt_cached, (int32_t) common);
        EXPECT_EQ(spec.tokens, fresh.tokens) << path;
    }
}

// A cost curve cached while the machine was busy (a first start beside other work) says every pass is
// slower than it is; its probes, stored with it and timed again at each fetch, tell: a curve whose 1-token
// or wide probe is far slower than the same probe now is measured again and replaced, one whose probes
// agree stays, and a curve from before the probes is taken as it is
TEST_F(generate_fixture, a_cost_curve_cached_on_a_busier_machine_is_measured_again) {
    const std::string dir = ::testing::TempDir() + "editspec-probe-" + std::to_string(getpid());
    std::filesystem::remove_all(dir);
    setenv("EDITSPEC_CACHE", dir.c_str(), 1);
    cost_model first;
    std::string err;
    ASSERT_TRUE(cost_model_get(*ctx, first, &err)) << err;
    ASSERT_GT(first.probe_ms, 0.0);
    ASSERT_GT(first.probe_wide_ms, 0.0);
    std::vector<std::filesystem::path> files;
    for (const auto & e : std::filesystem::directory_iterator(dir + "/cost")) files.push_back(e.path());
    ASSERT_EQ(files.size(), 1u);
    // the cached curve, every pass 100x slower than measured, with the probes given
    auto cache = [&](double probe_ms, double probe_wide_ms) {
        cost_model c = first;
        for (double & v : c.ms) v *= 100.0;
        c.probe_ms = probe_ms;
        c.probe_wide_ms = probe_wide_ms;
        std::ofstream(files[0]) << cost_model_to_json(c);
    };
    auto fetched = [&] {
        cost_model c;
        EXPECT_TRUE(cost_model_get(*ctx, c, &err)) << err;
        return c;
    };
    auto saved = [&] {
        std::ifstream f(files[0]);
        std::stringstream ss;
        ss << f.rdbuf();
        cost_model c;
        EXPECT_TRUE(cost_model_from_json(ss.str(), c));
        return c;
    };
    cache(1e-6, 1e-6); // its probes as fast as any now: it stays
    EXPECT_DOUBLE_EQ(fetched().ms[0], first.ms[0] * 100.0);
    cache(0.0, 0.0); // no probe (a curve from before it): taken as it is
    EXPECT_DOUBLE_EQ(fetched().ms[0], first.ms[0] * 100.0);
    cache(1e-6, 0.0); // a 1-token probe that agrees and no wide one (a curve from before it): it stays
    EXPECT_DOUBLE_EQ(fetched().ms[0], first.ms[0] * 100.0);
    // its 1-token probe 1,000 s: measured beside other work, measured again and replaced
    cache(1e6, 0.0);
    cost_model again = fetched();
    EXPECT_LT(again.ms[0], first.ms[0] * 10.0);
    EXPECT_LT(again.probe_ms, 1e3);
    EXPECT_GT(again.probe_wide_ms, 0.0);
    EXPECT_DOUBLE_EQ(saved().probe_ms, again.probe_ms);
    EXPECT_DOUBLE_EQ(saved().probe_wide_ms, again.probe_wide_ms);
    // its 1-token probe agrees, the wide one 1,000 s (beside other work a 1-token pass barely slows down, a
    // pass that uses every thread does): measured again and replaced
    cache(1e-6 + again.probe_ms, 1e6);
    again = fetched();
    EXPECT_LT(again.ms[0], first.ms[0] * 10.0);
    EXPECT_LT(again.probe_wide_ms, 1e3);
    EXPECT_DOUBLE_EQ(saved().probe_wide_ms, again.probe_wide_ms);
    unsetenv("EDITSPEC_CACHE");
    std::filesystem::remove_all(dir);
}

// a recurrent model's pass writes a snapshot of its state a token (--rs-snapshots) or none (0: checkpoints):
// a curve of its own for each, so that switching does not take the other's
TEST(cost_cache, a_recurrent_models_curve_is_keyed_by_its_snapshots) {
    const std::string dir = ::testing::TempDir() + "editspec-rs-key-" + std::to_string(getpid());
    std::filesystem::remove_all(dir);
    setenv("EDITSPEC_CACHE", dir.c_str(), 1);
    auto m = test::load_or_fail(test::typed_model_path("q8_0", "tiny-qwen3next"));
    ASSERT_TRUE(m);
    for (const int32_t snapshots : {CONTEXT_RS_ROLLBACK, 0}) {
        auto ctx = test::make_spec_context(*m, 256, 1, snapshots);
        ASSERT_TRUE(ctx);
        cost_model cm;
        std::string err;
        ASSERT_TRUE(cost_model_get(*ctx, cm, &err)) << err;
    }
    std::vector<std::string> names;
    for (const auto & e : std::filesystem::directory_iterator(dir + "/cost")) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    ASSERT_EQ(names.size(), 2u);
    EXPECT_NE(names[0].find("-rs0."), std::string::npos) << names[0];
    EXPECT_NE(names[1].find("-rs16."), std::string::npos) << names[1];
    unsetenv("EDITSPEC_CACHE");
    std::filesystem::remove_all(dir);
}

namespace {

// argmax outputs (patches/llama-output-argmax.patch, engine_argmax_outputs): each row's token from a decode's
// argmax outputs is the one the host takes from the same decode's logits, for every row of a pass, with 1 and 2
// threads, on quantized weights users download
TEST(argmax_outputs, tokens_equal_the_hosts_argmax_of_the_logits) {
    for (const char * type : {"q8_0", "q4_k_m"}) {
        auto m = test::load_or_fail(test::typed_model_path(type));
        ASSERT_TRUE(m);
        const int32_t n_vocab = m->facts().n_vocab;
        std::mt19937 rng(5);
        for (int32_t n_threads : {1, 2}) {
            auto ctx = test::make_spec_context(*m, 512, n_threads);
            ASSERT_TRUE(ctx);
            token_vec prompt = test::random_code_prompt(*m, rng);
            const token_vec more = test::random_code_prompt(*m, rng);
            prompt.insert(prompt.end(), more.begin() + 1, more.end());
            batch b(512, 1);
            for (size_t i = 0; i < prompt.size(); i++) b.add(prompt[i], (llama_pos) i, {0}, true);
            ASSERT_TRUE(ctx->decode(b, true)) << "argmax asked for, argmax outputs off";
            EXPECT_FALSE(ctx->argmax_only());
            std::vector<llama_token> host;
            for (int32_t i = 0; i < b.size(); i++) host.push_back(sampling_argmax(ctx->logits(i), n_vocab));
            ctx->kv_clear();
            test::argmax_outputs_on on;
            ASSERT_TRUE(ctx->decode(b, true));
            ASSERT_TRUE(ctx->argmax_only());
            for (int32_t i = 0; i < b.size(); i++) {
                EXPECT_EQ(ctx->argmax(i), host[i]) << type << ", " << n_threads << " threads, row " << i << " of " << b.size();
            }
            ctx->kv_clear();
            ASSERT_TRUE(ctx->decode(b)); // a decode that reads the logits gets them
            EXPECT_FALSE(ctx->argmax_only());
            EXPECT_EQ(sampling_argmax(ctx->logits(b.size() - 1), n_vocab), host.back());
        }
    }
}

// greedy and speculative answers with argmax outputs equal the answers from logits
TEST(argmax_outputs, greedy_and_speculative_answers_equal_the_logits_ones) {
    for (const char * type : {"q8_0", "q4_k_m"}) {
        auto m = test::load_or_fail(test::typed_model_path(type));
        ASSERT_TRUE(m);
        std::mt19937 rng(9);
        for (int32_t n_threads : {1, 2}) {
            auto ctx = test::make_spec_context(*m, 512, n_threads);
            ASSERT_TRUE(ctx);
            for (int k = 0; k < 3; k++) {
                const token_vec prompt = test::random_code_prompt(*m, rng);
                generate_params gp;
                gp.n_predict = 40;
                ctx->kv_clear();
                const generate_result ref = generate_ar(*ctx, prompt, gp);
                ASSERT_NE(ref.stop, STOP_REASON_ERROR) << ref.error;
                test::argmax_outputs_on on;
                ctx->kv_clear();
                const generate_result ar = generate_ar(*ctx, prompt, gp);
                EXPECT_EQ(ar.tokens, ref.tokens) << type << ", " << n_threads << " threads, prompt " << k << ": greedy";
                const generate_result spec = spec_from_reference(*ctx, prompt, gp, ref.tokens, rng(), 16);
                EXPECT_EQ(spec.tokens, ref.tokens) << type << ", " << n_threads << " threads, prompt " << k << ": speculative";
                EXPECT_GT(spec.accepted, 0);
            }
        }
    }
}

} // namespace
