// Tokenizer round trips on llama.cpp's real vocabularies (vocab-only loads, no weights).
#include "common/test-util.h"

#include <gtest/gtest.h>

using namespace editspec;

namespace {

const char * k_texts[] = {
    "def add(a, b):\n    return a + b\n",
    "    if x is None:\n        raise ValueError(\"x must not be None\")\n",
    "for (int i = 0; i < n; ++i) { sum += v[i]; }",
    "unicode: naïve café — λx. x ∘ f 日本語 🙂",
    "   leading spaces and trailing tabs\t\t",
    "",
};

class tokenizer_test : public ::testing::TestWithParam<const char *> {};

TEST_P(tokenizer_test, round_trip_without_special) {
    auto m = test::load_or_fail(test::vocab_path(GetParam()), /*vocab_only=*/true);
    ASSERT_TRUE(m);
    for (const char * text : k_texts) {
        const token_vec toks = m->tokenize(text, /*add_special=*/false, /*parse_special=*/false);
        // detokenizing what we tokenized gives the text back, byte for byte
        EXPECT_EQ(m->detokenize(toks), std::string(text)) << GetParam() << ": " << text;
        for (llama_token t : toks) {
            EXPECT_GE(t, 0);
            EXPECT_LT(t, m->facts().n_vocab);
        }
    }
}

TEST_P(tokenizer_test, add_special_prepends_bos_when_the_model_asks) {
    auto m = test::load_or_fail(test::vocab_path(GetParam()), true);
    ASSERT_TRUE(m);
    const token_vec plain = m->tokenize("x = 1", false, false);
    const token_vec with = m->tokenize("x = 1", true, false);
    if (m->facts().add_bos) {
        ASSERT_EQ(with.size(), plain.size() + 1);
        EXPECT_EQ(with[0], m->facts().bos);
    } else {
        EXPECT_EQ(with, plain);
    }
}

INSTANTIATE_TEST_SUITE_P(vocabs, tokenizer_test,
                         ::testing::Values("deepseek-coder", "qwen2", "llama-bpe", "starcoder"));

// bytes no UTF-8 text holds: llama.cpp's tokenizers threw, uncaught, on a sequence above U+10FFFF (an
// `editspec apply` of a file holding one aborted); every other invalid byte they make U+FFFD themselves
TEST(tokenizer, any_bytes_tokenize) {
    const std::string bad[] = {
        "x = \"\xF5\x80\x80\x80\"\n",   // F5: above U+10FFFF whatever follows
        "\xF4\x90\x80\x80 tail",         // U+110000
        "caf\xE9 \xFF\xFE \xC0\x80 \xED\xA0\x80 \xF4\x8F\xBF\xBF \xF7\xBF\xBF", // invalid but never thrown on
    };
    for (const char * vocab : {"deepseek-coder", "qwen2", "llama-bpe", "starcoder", "llama-spm", "gpt-2"}) {
        auto m = test::load_or_fail(test::vocab_path(vocab), true);
        ASSERT_TRUE(m);
        for (const std::string & text : bad) {
            token_vec toks;
            EXPECT_NO_THROW(toks = m->tokenize(text, false, false)) << vocab;
            EXPECT_FALSE(toks.empty()) << vocab;
        }
    }
}

TEST(tokenizer, safe_text_replaces_only_what_llama_cpp_throws_on) {
    std::string out = "untouched";
    // valid text, a truncated sequence, U+10FFFF itself, F8 (never a lead byte), a lone continuation: as they are
    for (const char * t : {"def f(): pass", "\xF5\x80\x80", "\xF4\x8F\xBF\xBF", "\xF8\x80\x80\x80", "\x80\xF4"}) {
        EXPECT_FALSE(tokenizer_safe_text(t, out)) << t;
        EXPECT_EQ(out, "untouched");
    }
    // above U+10FFFF: the lead byte becomes U+FFFD, its continuation bytes stay (llama.cpp makes each one U+FFFD)
    ASSERT_TRUE(tokenizer_safe_text("a\xF5\x80\x80\x80" "b\xF4\x90\x80\x80", out));
    EXPECT_EQ(out, "a\xEF\xBF\xBD\x80\x80\x80" "b\xEF\xBF\xBD\x90\x80\x80");
    ASSERT_TRUE(tokenizer_safe_text(std::string_view("\xF7\xBF\xBF\xBF\0z", 6), out));
    EXPECT_EQ(out, std::string("\xEF\xBF\xBD\xBF\xBF\xBF\0z", 8));
}

// parse_special turns control-token text into the control token; without it the text stays text
TEST(tokenizer, parse_special_controls_control_tokens) {
    auto m = test::load_or_fail(test::vocab_path("qwen2"), true);
    ASSERT_TRUE(m);
    const std::string eot_text = "<|im_end|>";
    const token_vec parsed = m->tokenize(eot_text, false, true);
    ASSERT_EQ(parsed.size(), 1u);
    EXPECT_TRUE(m->is_eog(parsed[0]));
    const token_vec literal = m->tokenize(eot_text, false, false);
    EXPECT_GT(literal.size(), 1u);
    // rendering a control token gives its text only when asked to
    EXPECT_EQ(m->token_to_piece(parsed[0], /*special=*/true), eot_text);
    EXPECT_EQ(m->token_to_piece(parsed[0], /*special=*/false), "");
}

TEST(tokenizer, deepseek_facts) {
    auto m = test::load_or_fail(test::vocab_path("deepseek-coder"), true);
    ASSERT_TRUE(m);
    EXPECT_EQ(m->facts().n_vocab, 32256);
    EXPECT_TRUE(m->facts().add_bos);
    EXPECT_NE(m->facts().eos, LLAMA_TOKEN_NULL);
    EXPECT_TRUE(m->is_eog(m->facts().eos));
    EXPECT_NE(m->facts().fim_pre, LLAMA_TOKEN_NULL); // DeepSeek-Coder has FIM tokens
}

TEST(vocab, compatibility_check_names_the_difference) {
    auto a = test::load_or_fail(test::vocab_path("deepseek-coder"), true);
    auto b = test::load_or_fail(test::vocab_path("deepseek-coder"), true);
    auto c = test::load_or_fail(test::vocab_path("qwen2"), true);
    ASSERT_TRUE(a && b && c);
    std::string why;
    EXPECT_TRUE(model_vocab_compatible(*a, *b, &why)) << why;
    EXPECT_FALSE(model_vocab_compatible(*a, *c, &why));
    EXPECT_FALSE(why.empty());
}

} // namespace
