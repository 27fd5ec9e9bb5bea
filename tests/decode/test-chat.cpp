// Multi-turn conversations (chat.h): a turn's prompt extends the previous turn's tokens, the context
// keeps the answer's KV, so the next turn decodes only its new tokens, and the output equals a fresh
// context's (ar and copy, Q8_0 and Q4_K_M); chat_tokens on text equals the turn-by-turn tokens.
#include "common/test-util.h"
#include "editspec/chat.h"
#include "editspec/copy.h"
#include "editspec/decoder.h"

#include <gtest/gtest.h>

using namespace editspec;

namespace {

const std::vector<std::string> k_turns = {
    "Write a function that adds two numbers.\ndef add(a, b):\n",
    "Now rename it to plus and keep the rest.\n",
    "Add a docstring.\n",
};

// the three turns, each answered with `method` (ar = nullptr drafter) on one context; returns the
// answers, and checks each turn's prompt reuse against the previous turn
std::vector<generate_result> converse(const model & m, context & ctx, bool copy, bool check_reuse) {
    chat_conversation conv;
    std::vector<generate_result> out;
    size_t kept = 0; // tokens the previous turn left in the cache: its prompt and the answer fed back
    for (const std::string & turn : k_turns) {
        chat_add(m, conv, {"user", turn});
        generate_params gp;
        gp.n_predict = 24;
        generate_result r;
        if (copy) {
            copy_drafter d;
            drafter_i * ds[] = {&d};
            spec_params sp;
            sp.draft_max = 16;
            r = generate_spec(ctx, conv.tokens, gp, sp, ds);
        } else {
            r = generate_ar(ctx, conv.tokens, gp);
        }
        EXPECT_NE(r.stop, STOP_REASON_ERROR) << r.error;
        if (check_reuse && !out.empty()) {
            // everything the previous turn decoded is reused; only the new turn is decoded
            EXPECT_GE((size_t) r.prompt_cached, kept) << "turn " << out.size() + 1;
            EXPECT_LE((size_t) (r.prompt_tokens - r.prompt_cached), conv.tokens.size() - kept + 2) << "turn " << out.size() + 1;
        }
        kept = ctx.cached_prompt().size();
        EXPECT_GE(kept, conv.tokens.size() - 1 + (r.tokens.empty() ? 0 : r.tokens.size() - 1));
        chat_add_answer(m, conv, r.tokens, r.text);
        out.push_back(r);
    }
    return out;
}

void check_model(const std::string & path, int32_t threads) {
    std::unique_ptr<model> m = test::load_or_fail(path);
    ASSERT_TRUE(m);
    auto ctx = test::make_spec_context(*m, 512, threads);
    ASSERT_TRUE(ctx);
    const std::vector<generate_result> ar = converse(*m, *ctx, false, true);
    const std::vector<generate_result> cp = converse(*m, *ctx, true, true);
    for (size_t t = 0; t < ar.size(); t++) {
        EXPECT_EQ(cp[t].tokens, ar[t].tokens) << "turn " << t + 1;
    }
    // a fresh context for every turn (nothing cached): the same answers
    chat_conversation conv;
    for (size_t t = 0; t < k_turns.size(); t++) {
        chat_add(*m, conv, {"user", k_turns[t]});
        auto fresh = test::make_spec_context(*m, 512, threads);
        generate_params gp;
        gp.n_predict = 24;
        const generate_result r = generate_ar(*fresh, conv.tokens, gp);
        EXPECT_EQ(r.prompt_cached, 0);
        EXPECT_EQ(r.tokens, ar[t].tokens) << "turn " << t + 1;
        chat_add_answer(*m, conv, r.tokens, r.text);
    }
}

} // namespace

TEST(chat, later_turns_decode_only_new_tokens_and_answer_alike_q8_0) {
    check_model(test::tiny_model_q8_path(), 1);
}

TEST(chat, later_turns_decode_only_new_tokens_and_answer_alike_q4_k_m_two_threads) {
    check_model(test::typed_model_path("q4_k_m"), 2);
}

TEST(chat, tokens_extend_turn_by_turn_and_text_gives_the_same) {
    std::unique_ptr<model> m = test::load_or_fail(test::tiny_model_q8_path());
    ASSERT_TRUE(m);
    chat_conversation conv;
    chat_add(*m, conv, {"system", "You write Python."});
    chat_add(*m, conv, {"user", "Write add."});
    const token_vec turn1 = conv.tokens;
    const token_vec answer = m->tokenize("def add(a, b):\n    return a + b", false, false);
    chat_add_answer(*m, conv, answer, "def add(a, b):\n    return a + b");
    chat_add(*m, conv, {"user", "Rename it."});
    ASSERT_GT(conv.tokens.size(), turn1.size() + answer.size());
    EXPECT_TRUE(std::equal(turn1.begin(), turn1.end(), conv.tokens.begin()));
    EXPECT_TRUE(std::equal(answer.begin(), answer.end(), conv.tokens.begin() + turn1.size()));
    // the same conversation as a request's messages
    EXPECT_EQ(chat_tokens(*m, {{"system", "You write Python."}, {"user", "Write add."},
                               {"assistant", "def add(a, b):\n    return a + b"}, {"user", "Rename it."}}),
              conv.tokens);
    // its text is the template's rendering (the plain one on this model)
    EXPECT_EQ(conv.rendered, chat_render(*m, conv.messages));
}
