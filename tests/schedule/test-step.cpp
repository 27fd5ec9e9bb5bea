// The step engine (step.h): requests decoding together in one batched pass a step answer exactly
// as each would alone, greedy and speculative, whatever runs beside them; a cancelled request
// stops and leaves the others' answers alone.
#include "common/test-util.h"
#include "editspec/decoder.h"
#include "editspec/step.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <initializer_list>
#include <memory>
#include <random>
#include <thread>

using namespace editspec;

namespace {

struct job {
    token_vec prompt;
    int32_t n_predict = 0;
    generate_result alone; // greedy, on a context of its own
    generate_result ar;    // greedy, on a view
    generate_result spec;  // speculative, on a view
};

// every job alone, then all of them at once on the views of an engine of n_seq streams (threads
// start at staggered times, so prompt chunks mix with generating passes)
// hosted: the engine's decodes run on another engine's thread (a draft model's engine on the
// target's), that engine decoding a request of its own meanwhile
// regions: the engine's default layout (a region of one unified cache per view, every step one ubatch);
// false: a KV stream per view
// as_jobs: each stream's share runs as a job on the engine's thread (step_engine::spawn; hosted: on the
// host's, decoding on the guest's views, as the server's requests use the draft model's engine), not on
// a thread of its own
// argmax_outputs: the views decode with argmax outputs (engine_argmax_outputs), the answers alone without
void check_batched_equals_alone(const std::string & type, int32_t n_threads, uint32_t seed, bool hosted = false,
                                bool regions = true, bool as_jobs = false, bool argmax_outputs = false) {
    auto m = test::load_or_fail(test::typed_model_path(type));
    ASSERT_TRUE(m);
    std::mt19937 rng(seed);
    const int32_t n_seq = 4, n_ctx = 512;
    std::vector<job> jobs(8);
    for (job & j : jobs) {
        j.prompt = test::random_code_prompt(*m, rng);
        // some long prompts: chunks of several passes
        if (rng() % 3 == 0) {
            const token_vec more = test::random_code_prompt(*m, rng);
            for (int r = 0; r < 8; r++) j.prompt.insert(j.prompt.end(), more.begin() + 1, more.end());
        }
        j.n_predict = 8 + (int32_t) (rng() % 40);
        context_params cp;
        cp.n_ctx = n_ctx;
        cp.n_threads = n_threads;
        cp.n_batch = 64;
        auto own = test::context_or_fail(*m, cp);
        ASSERT_TRUE(own);
        generate_params gp;
        gp.n_predict = j.n_predict;
        j.alone = generate_ar(*own, j.prompt, gp);
        ASSERT_NE(j.alone.stop, STOP_REASON_ERROR) << j.alone.error;
    }
    test::argmax_outputs_on argmax_on(argmax_outputs);

    step_params sp;
    sp.n_seq = n_seq;
    sp.per_seq.n_ctx = n_ctx;
    sp.per_seq.n_threads = n_threads;
    sp.per_seq.n_batch = 64; // prompt chunks of 64: long prompts take several steps
    sp.n_step_tokens = 128;
    sp.regions = regions;
    std::string err;
    std::unique_ptr<step_engine> host;
    if (hosted) {
        step_params hp = sp;
        hp.n_seq = 1;
        host = step_engine::create(*m, hp, &err);
        ASSERT_TRUE(host) << err;
    }
    auto eng = step_engine::create(*m, sp, &err, host.get());
    ASSERT_TRUE(eng) << err;
    ASSERT_EQ(eng->regions(), regions);
    std::unique_ptr<context> host_view = host ? host->view(0) : nullptr;
    generate_result host_answer;
    std::thread host_thread;
    if (host) {
        host_thread = std::thread([&] {
            host->enter(0);
            generate_params gp;
            gp.n_predict = jobs[0].n_predict;
            for (int r = 0; r < 3; r++) host_answer = generate_ar(*host_view, jobs[0].prompt, gp);
            host->leave(0);
        });
    }
    std::vector<std::unique_ptr<context>> views;
    for (int32_t s = 0; s < n_seq; s++) views.push_back(eng->view(s));
    EXPECT_EQ(views[0]->n_ctx(), n_ctx);
    EXPECT_EQ(views[0]->n_seq_max(), 1);

    // each stream runs its share of the jobs, greedy then speculative, one after another
    auto run_stream = [&](int32_t s) {
            std::mt19937 r(seed + 100 + s);
            for (size_t k = s; k < jobs.size(); k += n_seq) {
                job & j = jobs[k];
                if (!as_jobs) std::this_thread::sleep_for(std::chrono::milliseconds(r() % 20));
                eng->enter(s);
                generate_params gp;
                gp.n_predict = j.n_predict;
                j.ar = generate_ar(*views[s], j.prompt, gp);
                test::noisy_reference_drafter d(j.alone.tokens, r(), m->facts().n_vocab);
                drafter_i * ds[] = {&d};
                spec_params spp;
                spp.draft_max = 16;
                j.spec = generate_spec(*views[s], j.prompt, gp, spp, ds);
                eng->leave(s);
            }
    };
    std::vector<std::thread> threads;
    if (!as_jobs) {
        for (int32_t s = 0; s < n_seq; s++) threads.emplace_back([&, s] { run_stream(s); });
    } else {
        step_engine * owner = host ? host.get() : eng.get();
        std::atomic<int32_t> running{n_seq};
        std::promise<void> all_done;
        std::mt19937 r(seed);
        for (int32_t s = 0; s < n_seq; s++) {
            owner->spawn([&, s] {
                // work that must not overlap a step runs at once from a job: it is on the engine's thread
                std::thread::id ran_on;
                owner->run_on_thread([&] { ran_on = std::this_thread::get_id(); });
                EXPECT_EQ(ran_on, std::this_thread::get_id());
                run_stream(s);
                if (--running == 0) all_done.set_value();
            });
            std::this_thread::sleep_for(std::chrono::milliseconds(r() % 20)); // staggered: prompts meet passes
        }
        all_done.get_future().wait();
    }
    for (auto & t : threads) t.join();
    if (host_thread.joinable()) host_thread.join();
    if (host) EXPECT_EQ(host_answer.tokens, jobs[0].alone.tokens) << "the host engine's own request";
    for (size_t k = 0; k < jobs.size(); k++) {
        const job & j = jobs[k];
        EXPECT_EQ(j.ar.tokens, j.alone.tokens) << type << ", " << n_threads << " threads, job " << k << " (prompt "
                                               << j.prompt.size() << " tokens): greedy on a view differs from alone";
        EXPECT_EQ(j.spec.tokens, j.alone.tokens) << type << ", " << n_threads << " threads, job " << k
                                                 << ": speculative on a view differs from greedy alone";
        EXPECT_EQ(j.ar.stop, j.alone.stop) << "job " << k;
    }
    const step_stats st = eng->stats();
    EXPECT_GT(st.steps, 0);
    // the point of the engine: steps carried several requests' batches
    EXPECT_GT(st.batches, st.steps) << "no step carried two requests";
    EXPECT_GT(st.layout_ms, 0.0) << "the steps' layout was not timed";
    EXPECT_LT(st.layout_ms, st.decode_ms) << "the layout is inside the steps' time";
    // argmax outputs: steps of greedy passes alone hand back tokens (prompt chunks' last rows are logits)
    if (argmax_outputs) {
        EXPECT_GT(st.steps_argmax, 0) << "no step handed back argmax outputs";
        EXPECT_LT(st.steps_argmax, st.steps) << "prompts' last rows asked for logits";
    } else {
        EXPECT_EQ(st.steps_argmax, 0);
    }
    // a job reads its rows in place; a view's own thread gets them copied
    if (argmax_outputs) {
    } else if (as_jobs) {
        EXPECT_GT(st.rows_lent, 0);
    } else {
        EXPECT_EQ(st.rows_lent, 0);
        EXPECT_GT(st.rows_copied, 0);
    }
    if (regions) {
        EXPECT_EQ(st.ubatches, st.steps) << "a step of regions is one ubatch";
    } else {
        EXPECT_GE(st.ubatches, st.steps);
    }
}

// the logits of a prompt's last token, decoded on a context of its own (256 cells, one thread)
std::vector<float> last_row_alone(const model & m, const token_vec & prompt) {
    context_params cp;
    cp.n_ctx = 256;
    cp.n_threads = 1;
    auto own = test::context_or_fail(m, cp);
    batch b(256, 1);
    if (!own || !context_prefill(*own, b, prompt, 0, 0)) {
        ADD_FAILURE() << "a prompt of " << prompt.size() << " tokens alone";
        return {};
    }
    return std::vector<float>(own->logits(b.size() - 1), own->logits(b.size() - 1) + m.facts().n_vocab);
}

// libllama's sequential split_equal, as step_ubatches counts it: a ubatch per run of consecutive
// streams with tokens, the fewest tokens of the run from each
TEST(step_ubatches, sizes_of_each_ubatch) {
    EXPECT_EQ(step_ubatch_sizes({1, 5, 9, 17}, 512), (std::vector<int32_t>{4, 12, 8, 8}));
    EXPECT_EQ(step_ubatch_sizes({3, 0, 3}, 512), (std::vector<int32_t>{3, 3}));
    EXPECT_EQ(step_ubatch_sizes({4, 4}, 4), (std::vector<int32_t>{4, 4}));
    EXPECT_TRUE(step_ubatch_sizes({0, 0}, 512).empty());
}

TEST(step_ubatches, as_libllama_splits_a_multi_stream_batch) {
    EXPECT_EQ(step_ubatches({1, 5, 9, 17}, 512), 4);  // four lengths: four ubatches
    EXPECT_EQ(step_ubatches({4, 4, 4, 4}, 512), 1);   // padded: one
    EXPECT_EQ(step_ubatches({4, 0, 4, 0}, 512), 2);   // streams 0 and 2: an idle one between splits them
    EXPECT_EQ(step_ubatches({0, 4, 4, 0}, 512), 1);
    EXPECT_EQ(step_ubatches({3, 3, 3}, 4), 3);        // at most n_ubatch tokens: one from each, three times
    EXPECT_EQ(step_ubatches({8}, 4), 2);
    EXPECT_EQ(step_ubatches({0, 0}, 512), 0);
}

// an engine of n_seq streams of 512 tokens, one thread (null, with the error printed, on failure)
// the answer of a request served alone, on a context of its own (small_engine's per-stream settings)
generate_result generate_alone(const model & m, const token_vec & prompt, const generate_params & gp) {
    context_params cp;
    cp.n_ctx = 512;
    cp.n_threads = 1;
    auto own = test::context_or_fail(m, cp);
    return generate_ar(*own, prompt, gp);
}

// N random code prompts for m, from a seed; prompt k cut to at most max_tokens[k] tokens where given
template <size_t N>
void random_prompts(const model & m, uint32_t seed, token_vec (&prompts)[N], std::initializer_list<size_t> max_tokens = {}) {
    std::mt19937 rng(seed);
    for (token_vec & p : prompts) p = test::random_code_prompt(m, rng);
    size_t k = 0;
    for (size_t n : max_tokens) {
        if (k < N) prompts[k].resize(std::min(prompts[k].size(), n));
        k++;
    }
}

// each prompt's answer served alone
template <size_t N>
void answers_alone(const model & m, const token_vec (&prompts)[N], const generate_params & gp, generate_result (&alone)[N]) {
    for (size_t k = 0; k < N; k++) alone[k] = generate_alone(m, prompts[k], gp);
}

// requests on the given streams at once, each on its own thread, entered before and left after
void run_together(step_engine & eng, std::vector<std::unique_ptr<context>> & views, const token_vec * prompts,
                  const generate_params & gp, std::initializer_list<int32_t> streams, generate_result * got) {
    for (int32_t s : streams) eng.enter(s);
    std::vector<std::thread> threads;
    for (int32_t s : streams) {
        threads.emplace_back([&, s] { got[s] = generate_ar(*views[s], prompts[s], gp); eng.leave(s); });
    }
    for (std::thread & t : threads) t.join();
}

std::unique_ptr<step_engine> small_engine(const model & m, int32_t n_seq, bool regions = true) {
    step_params sp;
    sp.n_seq = n_seq;
    sp.regions = regions;
    sp.per_seq.n_ctx = 512;
    sp.per_seq.n_threads = 1;
    std::string err;
    auto eng = step_engine::create(m, sp, &err);
    if (!eng) ADD_FAILURE() << err;
    return eng;
}

class step_exact : public ::testing::TestWithParam<std::string> {};

TEST_P(step_exact, batched_answers_equal_answers_alone) {
    for (int32_t n_threads : {1, 2}) check_batched_equals_alone(GetParam(), n_threads, 7);
}

// the K-quants and the repacked kernels included
INSTANTIATE_TEST_SUITE_P(types, step_exact, ::testing::Values("f32", "f16", "q8_0", "q4_0", "q4_k_m", "q6_k"));

// regions where their masks stay small: a cache past regions_max_cells cells takes a stream per view
TEST(step_engine, regions_only_up_to_their_cells) {
    auto m = test::load_or_fail(test::typed_model_path("q8_0"));
    ASSERT_TRUE(m);
    step_params sp;
    sp.n_seq = 4;
    sp.per_seq.n_ctx = 300; // regions of 512 cells: 2,048 in all
    sp.per_seq.n_threads = 1;
    std::string err;
    for (const int32_t max_cells : {2048, 2047}) {
        sp.regions_max_cells = max_cells;
        auto eng = step_engine::create(*m, sp, &err);
        ASSERT_TRUE(eng) << err;
        EXPECT_EQ(eng->regions(), max_cells == 2048) << max_cells;
        EXPECT_EQ(eng->view(1)->n_ctx(), 512) << max_cells; // libllama pads a stream's cells to 256 too
    }
}

// a KV stream per view (the layout without regions: a GPU, flash attention off): the same answers
TEST(step_engine, streams_answer_as_alone) {
    check_batched_equals_alone("q8_0", 2, 7, false, false);
    check_batched_equals_alone("q4_k_m", 1, 9, false, false);
}

// a guest engine (the server's draft model) decodes on its host's thread between the host's own steps:
// both answer as alone
TEST(step_engine, a_guest_engine_decodes_on_its_hosts_thread) {
    check_batched_equals_alone("q8_0", 2, 11, true);
}

// each request's job on the engine's thread (the server's slots): parked at each decode, resumed when
// its step is done; the answers as alone, 1 and 2 threads, regions and streams
TEST(step_engine, jobs_on_the_engines_thread_answer_as_alone) {
    check_batched_equals_alone("q8_0", 2, 13, false, true, true);
    check_batched_equals_alone("q4_k_m", 1, 15, false, false, true);
}

// argmax outputs (patches/llama-output-argmax.patch): steps whose every request verifies or generates
// greedily hand back each row's argmax; the answers equal those decoded alone from logits, threads and jobs
TEST(step_engine, argmax_outputs_answer_as_alone) {
    check_batched_equals_alone("q8_0", 2, 17, false, true, false, true);
    check_batched_equals_alone("q4_k_m", 1, 19, false, true, true, true);
}

// jobs on the host's thread decoding on a guest engine's views (the server's draft model): the guest's
// steps run on the host's thread between the host's own, and resume the host's jobs
TEST(step_engine, jobs_of_the_host_decode_on_a_guest_engine) {
    check_batched_equals_alone("q8_0", 2, 17, true, true, true);
}

// a fiber runs to each park and on from it on the thread that resumes it; what it throws comes out of
// the resume() it ends in
TEST(fiber, parks_resumes_and_rethrows) {
    std::vector<int> seen;
    fiber f([&] {
        seen.push_back(1);
        EXPECT_EQ(fiber::current(), &f);
        fiber::park();
        seen.push_back(2);
    });
    EXPECT_EQ(fiber::current(), nullptr);
    f.resume();
    EXPECT_EQ(seen, std::vector<int>({1}));
    EXPECT_FALSE(f.finished());
    f.resume();
    EXPECT_EQ(seen, std::vector<int>({1, 2}));
    EXPECT_TRUE(f.finished());
    fiber g([] { throw std::runtime_error("from the fiber"); });
    EXPECT_THROW(g.resume(), std::runtime_error);
    EXPECT_TRUE(g.finished());
}

// (streams) requests on streams 0 and 2 with stream 1 idle between them: the step fills stream 1 with throwaway
// tokens after its own cells (removed after the pass) so the step is one ubatch, not two. Every answer
// equals its answer alone, the idle stream's included when it goes on from its cached prompt afterwards
TEST(step_engine, an_idle_stream_between_requests_is_filled_and_left_as_it_was) {
    auto m = test::load_or_fail(test::typed_model_path("q8_0"));
    ASSERT_TRUE(m);
    token_vec prompts[3];
    random_prompts(*m, 11, prompts);
    // equal prompt lengths on streams 0 and 2: their steps pad to one length
    const size_t n = std::min(prompts[0].size(), prompts[2].size());
    prompts[0].resize(n), prompts[2].resize(n);
    generate_params gp;
    gp.n_predict = 24;
    generate_result alone[3];
    answers_alone(*m, prompts, gp, alone);
    auto eng = small_engine(*m, 4, false);
    ASSERT_TRUE(eng);
    std::vector<std::unique_ptr<context>> views;
    for (int32_t s = 0; s < 4; s++) views.push_back(eng->view(s));
    // stream 1 holds a prompt (a slot's cached one) while 0 and 2 decode
    generate_params one = gp;
    one.n_predict = 1;
    eng->enter(1);
    ASSERT_NE(generate_ar(*views[1], prompts[1], one).stop, STOP_REASON_ERROR);
    eng->leave(1);
    generate_result got[3];
    int64_t steps = 0, batches = 0, ubatches = 0;
    for (int attempt = 0; attempt < 5; attempt++) {
        const step_stats before = eng->stats();
        run_together(*eng, views, prompts, gp, {0, 2}, got);
        const step_stats st = eng->stats();
        EXPECT_EQ(got[0].tokens, alone[0].tokens);
        EXPECT_EQ(got[2].tokens, alone[2].tokens);
        steps = st.steps - before.steps, batches = st.batches - before.batches, ubatches = st.ubatches - before.ubatches;
        // a loaded machine (CI's parallel tests) may start one thread after the other's 24 steps are
        // nearly done: a run with too few shared steps to judge goes again (from the cached prompts)
        if (batches - steps >= 8) break;
    }
    // steps that carried both requests took one ubatch, not two (unfilled, each took two: ubatches ==
    // batches); a step where one request's prompt met the other's generation (threads start at their own
    // times) may still take two where padding would cost more than it saves
    ASSERT_GT(batches, steps) << "no step carried both requests";
    EXPECT_LE(4 * (ubatches - steps), batches - steps) << steps << " steps carrying " << batches << " batches took "
                                                       << ubatches << " ubatches";
    // the idle stream goes on from its cached prompt as it would have alone
    eng->enter(1);
    got[1] = generate_ar(*views[1], prompts[1], gp);
    eng->leave(1);
    EXPECT_EQ(got[1].tokens, alone[1].tokens);
    EXPECT_GE(got[1].prompt_cached, (int64_t) prompts[1].size() - 1) << "stream 1's prompt was not kept";
}

// (streams) the padding's choice by the pass cost (step_params::pad_ratio < 0): where a padded pass costs no more
// than the split's ubatches (a flat cost), every step is one ubatch; answers equal each served alone either way
TEST(step_engine, the_pass_cost_decides_the_padding) {
    auto m = test::load_or_fail(test::typed_model_path("q8_0"));
    ASSERT_TRUE(m);
    token_vec prompts[2];
    // unequal lengths: a step holding both prompts, or one prompt beside the other's generation, splits
    random_prompts(*m, 5, prompts, {120, 40});
    generate_params gp;
    gp.n_predict = 12;
    generate_result alone[2];
    answers_alone(*m, prompts, gp, alone);
    for (const bool flat : {true, false}) {
        auto eng = small_engine(*m, 2, false);
        ASSERT_TRUE(eng);
        // the deepest part any step's pass cost was asked about (the engine's own thread calls it)
        auto deepest = std::make_shared<std::atomic<int32_t>>(0);
        if (flat) {
            eng->set_pass_cost([deepest](std::span<const pass_part> parts) {
                for (const pass_part & p : parts) deepest->store(std::max(deepest->load(), p.depth));
                return 1.0;
            });
        } else {
            eng->set_pass_cost([deepest](std::span<const pass_part> parts) { // padding never pays
                double n = 0;
                for (const pass_part & p : parts) n += p.tokens, deepest->store(std::max(deepest->load(), p.depth));
                return n * n;
            });
        }
        std::vector<std::unique_ptr<context>> views;
        for (int32_t s = 0; s < 2; s++) views.push_back(eng->view(s));
        generate_result got[2];
        run_together(*eng, views, prompts, gp, {0, 1}, got);
        EXPECT_EQ(got[0].tokens, alone[0].tokens) << flat;
        EXPECT_EQ(got[1].tokens, alone[1].tokens) << flat;
        const step_stats st = eng->stats();
        if (flat) {
            EXPECT_EQ(st.ubatches, st.steps) << st.batches << " batches";
            EXPECT_NEAR(st.model_ms, (double) st.steps, 1e-9); // the model's figure for every step
        } else {
            EXPECT_GE(st.ubatches, st.steps);
        }
        EXPECT_EQ(st.modelled, st.steps);
        EXPECT_NEAR(st.modelled_decode_ms, st.decode_ms, 1e-6);
        // each request's part at its own depth: the last passes of the 120-token prompt's request
        // attend to its prompt and answer
        EXPECT_GE(deepest->load(), (int32_t) prompts[0].size() + gp.n_predict - 2);
    }
}

// a cold prompt that fits one batch takes no pass of its own: its end goes into the first pass with the
// draft (generate_prefill's tail), so greedy decoding of n tokens costs n llama_decode calls (as
// llama-server's prompt pass yields the first token) and a speculative request one per pass; each
// answer equal to the request alone
TEST(step_engine, a_request_of_n_tokens_is_n_steps) {
    auto m = test::load_or_fail(test::typed_model_path("q8_0"));
    ASSERT_TRUE(m);
    token_vec prompts[1];
    random_prompts(*m, 21, prompts, {60}); // one batch
    generate_params gp;
    gp.n_predict = 10;
    generate_result alone[1];
    answers_alone(*m, prompts, gp, alone);
    ASSERT_EQ(alone[0].tokens.size(), 10u) << "(an end of generation would shorten the count)";
    for (const bool spec : {false, true}) {
        auto eng = small_engine(*m, 1);
        ASSERT_TRUE(eng);
        auto view = eng->view(0);
        const int64_t warm = eng->stats().steps;
        eng->enter(0);
        generate_result r;
        if (spec) {
            test::noisy_reference_drafter d(alone[0].tokens, 5, m->facts().n_vocab);
            drafter_i * ds[] = {&d};
            spec_params spp;
            spp.draft_max = 4;
            r = generate_spec(*view, prompts[0], gp, spp, ds);
        } else {
            r = generate_ar(*view, prompts[0], gp);
        }
        eng->leave(0);
        EXPECT_EQ(r.tokens, alone[0].tokens) << spec;
        // every step a pass that yields tokens: none for the prompt alone
        EXPECT_EQ(eng->stats().steps - warm, r.target_passes) << (spec ? "generate_spec" : "generate_ar") << ": a prompt pass of its own";
        if (!spec) EXPECT_EQ(r.target_passes, 10);
    }
}

// a cancelled request stops at once (before any pass once cancelled), and the request beside it
// still answers as it would alone
TEST(step_engine, cancelled_request_stops_and_spares_the_others) {
    auto m = test::load_or_fail(test::typed_model_path("q8_0"));
    ASSERT_TRUE(m);
    std::mt19937 rng(3);
    const token_vec prompt = test::random_code_prompt(*m, rng);
    context_params cp;
    cp.n_ctx = 512;
    cp.n_threads = 1;
    auto own = test::context_or_fail(*m, cp);
    generate_params gp;
    gp.n_predict = 200;
    const generate_result alone = generate_ar(*own, prompt, gp);
    ASSERT_GT(alone.tokens.size(), 20u) << "the reference ends too early to show a cancellation";

    auto eng = small_engine(*m, 2);
    ASSERT_TRUE(eng);
    auto a = eng->view(0), b = eng->view(1);
    std::atomic<bool> cancel{false};
    a->set_cancel(&cancel);
    generate_result ra, rb;
    std::thread ta([&] {
        eng->enter(0);
        generate_params g = gp;
        g.on_text = [&](std::string_view) {
            cancel = true; // the client leaves after its first text
            return true;
        };
        ra = generate_ar(*a, prompt, g);
        eng->leave(0);
    });
    std::thread tb([&] {
        eng->enter(1);
        rb = generate_ar(*b, prompt, gp);
        eng->leave(1);
    });
    ta.join();
    tb.join();
    EXPECT_EQ(ra.stop, STOP_REASON_CALLBACK);
    EXPECT_LT(ra.tokens.size(), 4u) << "the cancelled request went on";
    EXPECT_EQ(rb.tokens, alone.tokens);
    // a cancelled flag set before the request fails its first decode at once
    a->set_cancel(&cancel);
    eng->enter(0);
    const generate_result again = generate_ar(*a, prompt, gp);
    eng->leave(0);
    EXPECT_EQ(again.stop, STOP_REASON_CALLBACK);
    EXPECT_TRUE(again.tokens.empty());
}

// a step that libllama cannot place (one request's region is full) is decoded again request by
// request: that request's pass fails alone and leaves its cells as they were, the request beside it
// gets the logits it gets alone, and the full one goes on where it fits
TEST(step_engine, a_failed_step_is_retried_request_by_request) {
    auto m = test::load_or_fail(test::typed_model_path("q8_0"));
    ASSERT_TRUE(m);
    std::mt19937 rng(5);
    token_vec filler, prompt_b = test::random_code_prompt(*m, rng);
    while (filler.size() < 253) {
        const token_vec more = test::random_code_prompt(*m, rng);
        filler.insert(filler.end(), more.begin(), more.end());
    }
    filler.resize(253); // of a region of 256 cells: 3 left
    if (prompt_b.size() > 40) prompt_b.resize(40); // one chunk
    const std::vector<float> alone = last_row_alone(*m, prompt_b);
    step_params sp;
    sp.n_seq = 2;
    sp.per_seq.n_ctx = 256;
    sp.per_seq.n_threads = 1;
    sp.per_seq.n_batch = 64;
    sp.wait_ms = 1000; // a step waits for both requests' batches
    std::string err;
    auto eng = step_engine::create(*m, sp, &err);
    ASSERT_TRUE(eng) << err;
    ASSERT_TRUE(eng->regions());
    auto a = eng->view(0), b = eng->view(1);
    batch ba(64, 1), bb(64, 1);
    eng->enter(0);
    ASSERT_TRUE(context_prefill(*a, ba, filler, 0, 0));
    eng->enter(1); // the next step waits for both
    bool ok_a = true, ok_b = false;
    std::thread ta([&] {
        ba.clear();
        for (int32_t i = 0; i < 8; i++) ba.add(filler[i], 253 + i, {0}, i == 7); // 8 tokens, 3 cells free
        ok_a = a->decode(ba);
    });
    std::thread tb([&] { ok_b = context_prefill(*b, bb, prompt_b, 0, 0); });
    ta.join();
    tb.join();
    EXPECT_FALSE(ok_a) << "8 tokens went into 3 free cells";
    ASSERT_TRUE(ok_b) << "the request beside the full one failed with it";
    const float * l = b->logits(bb.size() - 1);
    EXPECT_EQ(std::vector<float>(l, l + m->facts().n_vocab), alone) << "the retried pass differs from the request alone";
    EXPECT_EQ(a->kv_pos_max(0), 252) << "the failed pass left cells behind";
    EXPECT_EQ(b->kv_pos_max(0), (llama_pos) prompt_b.size() - 1);
    const step_stats st = eng->stats();
    EXPECT_EQ(st.ubatches, st.steps + 2) << "the failed step's decode and its two retries";
    // the full request goes on where it fits
    ba.clear();
    for (int32_t i = 0; i < 3; i++) ba.add(filler[i], 253 + i, {0}, i == 2);
    EXPECT_TRUE(a->decode(ba));
    eng->leave(0);
    eng->leave(1);
}

// a job on the engine's thread reads its rows where the decode left them (no copy); a later step that
// does not carry its view copies them out first, so they read the same after it; a view that goes away
// leaves nothing lent behind (ASan)
TEST(step_engine, a_jobs_rows_are_read_in_place_and_kept_past_a_later_step) {
    auto m = test::load_or_fail(test::typed_model_path("q8_0"));
    ASSERT_TRUE(m);
    const int32_t n_vocab = m->facts().n_vocab;
    std::mt19937 rng(21);
    const token_vec prompt_a = test::random_code_prompt(*m, rng), prompt_b = test::random_code_prompt(*m, rng);
    const std::vector<float> alone_a = last_row_alone(*m, prompt_a), alone_b = last_row_alone(*m, prompt_b);
    step_params sp;
    sp.n_seq = 3;
    sp.per_seq.n_ctx = 256;
    sp.per_seq.n_threads = 1;
    sp.per_seq.n_batch = 256;
    std::string err;
    auto eng = step_engine::create(*m, sp, &err);
    ASSERT_TRUE(eng) << err;
    auto a = eng->view(0), b = eng->view(1), c = eng->view(2);
    batch ba(256, 1), bb(256, 1), bc(256, 1);
    const float * in_place = nullptr;
    std::vector<float> read_a;
    eng->spawn([&] {
        eng->enter(0);
        eng->enter(2);
        EXPECT_TRUE(context_prefill(*a, ba, prompt_a, 0, 0));
        in_place = a->logits(ba.size() - 1);
        read_a.assign(in_place, in_place + n_vocab);
        EXPECT_TRUE(context_prefill(*c, bc, prompt_b, 0, 0)); // c's rows stay lent as the job ends
        eng->leave(0);
        eng->leave(2);
    });
    eng->wait_jobs();
    EXPECT_EQ(read_a, alone_a) << "a job's rows read in place";
    step_stats st = eng->stats();
    EXPECT_GE(st.rows_lent, 2) << "the job's rows were copied";
    EXPECT_EQ(st.rows_copied, 1) << "a's rows, copied out by c's step";
    c.reset(); // c's lent rows go with it
    eng->enter(1);
    ASSERT_TRUE(context_prefill(*b, bb, prompt_b, 0, 0)); // a step of b alone, from this thread
    eng->leave(1);
    const float * kept = a->logits(ba.size() - 1);
    EXPECT_NE(kept, in_place) << "a's rows were not copied out before b's step";
    EXPECT_EQ(std::vector<float>(kept, kept + n_vocab), alone_a) << "a's rows after b's step";
    const float * lb = b->logits(bb.size() - 1);
    EXPECT_EQ(std::vector<float>(lb, lb + n_vocab), alone_b) << "a thread's rows";
    st = eng->stats();
    EXPECT_EQ(st.rows_copied, 2) << "b's own row (a's were copied once already)";
}

// settings that cannot work are refused with a message naming them
TEST(step_engine, refuses_bad_settings) {
    auto m = test::load_or_fail(test::typed_model_path("q8_0"));
    ASSERT_TRUE(m);
    step_params sp;
    sp.n_seq = 0;
    std::string err;
    EXPECT_FALSE(step_engine::create(*m, sp, &err));
    EXPECT_NE(err.find("out of range"), std::string::npos) << err;
    sp.n_seq = 65;
    EXPECT_FALSE(step_engine::create(*m, sp, &err));
}

} // namespace
