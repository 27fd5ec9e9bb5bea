// Greedy speculative output equals autoregressive output only if every row of an n-token pass is
// bit-identical to decoding that token alone (docs/exactness.md). This checks it for every weight
// type a user downloads (tiny-256 models: rows wide enough for K-quants and the repacked kernels; and
// tiny-qwen3moe, a mixture of experts),
// passes of 1 to 256 tokens, after prefixes of several lengths, with 1, 2 and 3 threads, flash
// attention on (the default; the patch gives it one per-row kernel) and off, the F16 KV cache
// editspec uses and the Q8_0 one --cache-type q8_0 picks.
#include "common/test-util.h"
#include "editspec/exactness.h"
#include "editspec/step.h"

#include <ggml-cpu.h>
#include <gtest/gtest.h>

#include <cstdlib>

using namespace editspec;

namespace {

// passes of 1..256 tokens after a prefix against one-token decoding (exactness.h)
exactness_result first_mismatch(const model & m, int32_t n_threads, int32_t n_prefix, bool flash_attn, ggml_type kv_type) {
    exactness_params p;
    p.flash_attn = flash_attn;
    p.kv_type = kv_type;
    p.n_threads = n_threads;
    p.n_prefix = n_prefix;
    p.n_max = 256;
    exactness_result r = exactness_check(m, p);
    EXPECT_EQ(r.error, "");
    return r;
}

// "q8_0": tiny-256's; "tiny-qwen3moe:q8_0": that shape's
std::string param_model_path(const std::string & param) {
    const size_t colon = param.find(':');
    return colon == std::string::npos ? test::typed_model_path(param)
                                      : test::typed_model_path(param.substr(colon + 1), param.substr(0, colon));
}

class batch_exact : public ::testing::TestWithParam<std::string> {};

TEST_P(batch_exact, rows_match_single_token_decoding) {
    auto m = test::load_or_fail(param_model_path(GetParam()));
    ASSERT_TRUE(m);
    struct setting { bool flash_attn; int32_t n_threads; int32_t n_prefix; ggml_type kv_type = GGML_TYPE_F16; };
    std::vector<setting> settings;
    for (int32_t n_threads : {1, 2}) {
        for (int32_t n_prefix : {0, 37, 300}) settings.push_back({true, n_threads, n_prefix});
    }
    // the mixture of experts and the hybrid: their own layers at 1 and 2 threads (the attention's settings
    // below are the dense models')
    const bool own_layers_only = GetParam().find(':') != std::string::npos;
    if (own_layers_only) std::erase_if(settings, [](const setting & st) { return st.n_prefix == 37; });
    if (!own_layers_only) {
        settings.push_back({true, 3, 300}); // a thread count that splits rows, tiles and segments unevenly
        // flash attention off (--no-flash-attn): the unfused KQ, softmax, KQV
        for (int32_t n_prefix : {0, 300}) settings.push_back({false, 2, n_prefix});
        // a Q8_0 cache (--cache-type q8_0; flash attention only)
        for (int32_t n_threads : {1, 2}) settings.push_back({true, n_threads, 300, GGML_TYPE_Q8_0});
    }
    for (const setting & st : settings) {
        const exactness_result r = first_mismatch(*m, st.n_threads, st.n_prefix, st.flash_attn, st.kv_type);
        EXPECT_EQ(r.row, -1) << GetParam() << ", flash attention " << (st.flash_attn ? "on" : "off") << ", "
                             << ggml_type_name(st.kv_type) << " cache, "
                             << st.n_threads << " threads, prefix " << st.n_prefix << ": a pass of " << r.n
                             << " tokens differs first at row " << r.row << " (relative L2 " << r.rel
                             << (r.argmax_differs ? ", argmax differs" : "") << ")";
    }
}

// the server's step (check-exact --requests): 4 requests after their own prefixes, passes of equal and
// mixed sizes in one decode, in the step engine's two layouts (a region of one cache each, the CPU's
// default; a stream each, a GPU's), every row against the request decoded alone
exactness_result step_mismatch(const model & m, int32_t n_threads, bool regions, int32_t n_prefix) {
    step_params sp;
    sp.n_seq = 4;
    sp.regions = regions;
    sp.recurrent = m.facts().recurrent;
    sp.per_seq.n_ctx = n_prefix + 13 * 3 + 64 + 16;
    sp.per_seq.n_threads = n_threads;
    const step_layout l = step_layout_of(sp);
    EXPECT_EQ(l.regions, regions);
    exactness_params p;
    p.n_threads = n_threads;
    p.n_prefix = n_prefix;
    p.n_max = 64;
    p.n_requests = 4;
    p.layout = l.cp;
    p.regions = l.regions;
    exactness_result r = exactness_check(m, p);
    EXPECT_EQ(r.error, "");
    return r;
}

TEST(batch_exact_step, rows_match_each_request_alone) {
    for (const char * type : {"q8_0", "q4_k_m", "f16", "tiny-qwen3moe:q4_k_m", "tiny-qwen35:q8_0", "tiny-qwen3next:q8_0"}) {
        auto m = test::load_or_fail(param_model_path(type));
        ASSERT_TRUE(m);
        for (bool regions : {true, false}) {
            for (int32_t n_threads : {1, 2}) {
                if (!regions && n_threads == 1) continue; // (streams: the GPU's layout; 2 threads split the rows)
                if (regions && m->facts().recurrent) continue; // (a stream each: libllama splits it by sequence)
                const exactness_result r = step_mismatch(*m, n_threads, regions, 37);
                EXPECT_EQ(r.row, -1) << type << (regions ? ", regions" : ", streams") << ", " << n_threads
                                     << " threads: a step of " << r.n << " tokens a request" << (r.mixed ? " (mixed)" : "")
                                     << " differs at request " << r.request << ", row " << r.row << " (relative L2 "
                                     << r.rel << ")";
                EXPECT_EQ(r.n_sizes, 2 * (int32_t) exactness_batch_sizes(64).size());
            }
        }
    }
}

// the check can fail: one unified cache without regions interleaves the requests' cells, and a row's
// attention then groups its cells otherwise than alone (llama-kv-regions.patch)
TEST(batch_exact_step, interleaved_cells_are_seen) {
    auto m = test::load_or_fail(test::typed_model_path("q8_0"));
    ASSERT_TRUE(m);
    step_params sp;
    sp.n_seq = 4;
    sp.per_seq.n_ctx = 37 + 13 * 3 + 64 + 16;
    exactness_params p;
    p.n_threads = 2;
    p.n_prefix = 37;
    p.n_max = 64;
    p.n_requests = 4;
    p.layout = step_layout_of(sp).cp;
    p.layout.kv_unified = true;
    p.regions = false;
    const exactness_result r = exactness_check(*m, p);
    EXPECT_EQ(r.error, "");
    EXPECT_GE(r.request, 0);
    EXPECT_GE(r.row, 0);
}

// test-batch-exact-avx2 (tests/CMakeLists.txt: the AVX2 ggml-cpu preloaded) must run that library's
// paths: a preload that did not take would pass every test here on the native kernels
TEST(batch_exact_paths, the_avx2_library_when_asked) {
    if (!getenv("EDITSPEC_EXPECT_AVX2")) GTEST_SKIP() << "for test-batch-exact-avx2 (EDITSPEC_EXPECT_AVX2=1)";
    EXPECT_TRUE(ggml_cpu_has_avx2());
    EXPECT_FALSE(ggml_cpu_has_avx512());
    EXPECT_FALSE(ggml_cpu_has_avx512_vnni());
}

// every type editspec promises exactness for; the K-quant mixes are llama-quantize's
INSTANTIATE_TEST_SUITE_P(types, batch_exact,
                         ::testing::Values("f32", "f16", "bf16", "q8_0", "q4_0", "q5_0", "iq4_nl", "q4_k_m",
                                           "q4_k_s", "q5_k_m", "q6_k"));
// a mixture of experts: each expert's rows through MUL_MAT_ID (ggml groups a pass's rows by expert, so
// an expert sees 1 row alone and up to the pass's in a batch), the router's top-k, per-head Q/K norms
INSTANTIATE_TEST_SUITE_P(moe, batch_exact,
                         ::testing::Values("tiny-qwen3moe:q8_0", "tiny-qwen3moe:q4_0", "tiny-qwen3moe:q4_k_m",
                                           "tiny-qwen3moe:q6_k"));
// recurrent models: passes to 64 tokens (CONTEXT_RS_PASS_MAX), writing a snapshot of the state per token
// (CONTEXT_RS_ROLLBACK of them): Qwen3.5's layout, Qwen3-Next's (experts, a shared one; rolled back by our
// patches/llama-rs-rollback.patch) and Mamba-2's (recurrent layers alone, ggml's SSM_SCAN; that patch too)
INSTANTIATE_TEST_SUITE_P(hybrid, batch_exact, ::testing::Values("tiny-qwen35:q8_0", "tiny-qwen35:q4_k_m",
                                                                "tiny-qwen3next:q8_0", "tiny-qwen3next:q4_k_m",
                                                                "tiny-mamba2:q8_0", "tiny-mamba2:q4_k_m"));

} // namespace
