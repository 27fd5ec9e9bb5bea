// A grammar (llama.cpp's GBNF, as chat-tools.h derives one from a chat template's call format) as a
// token constraint (constraint.h): each output token is the likeliest the grammar allows after the
// output so far; a lazy grammar allows everything until its trigger (a call's opening) appears.
//
//     auto c = editspec::grammar_constraint::create(model, prompt.grammar, err); // null + err: no parse
//     req.constraint = std::move(c);                                             // greedy only
//
// Lossless against constrained autoregressive decoding, as every constraint (the verifier picks
// constrained_argmax at each node); against the model's free output it is lossy where the model would
// have written what the grammar refuses, and the server labels such answers ("constrained": true).
#pragma once

#include "editspec/chat-tools.h"
#include "editspec/constraint.h"

#include <deque>
#include <memory>
#include <string>
#include <vector>

struct llama_sampler;

namespace editspec {

class grammar_constraint final : public token_constraint {
public:
    // null with err (llama.cpp's parser's complaint goes to the log) when g.gbnf does not parse or
    // g.prefill is not what the grammar begins with
    static std::unique_ptr<grammar_constraint> create(const model & m, const chat_grammar & g, std::string & err);
    ~grammar_constraint() override;
    grammar_constraint(const grammar_constraint &) = delete;
    grammar_constraint & operator=(const grammar_constraint &) = delete;

    bool allows(std::span<const llama_token> out, llama_token t) override;

private:
    grammar_constraint() = default;
    // the states follow `out`: kept from the longest common prefix, extended by accepting the rest
    void follow(std::span<const llama_token> out);

    int32_t n_vocab_ = 0;
    llama_sampler * initial_ = nullptr;  // after the prefill
    std::deque<llama_sampler *> states_; // states_[i]: after path_[0 .. base_ + i); null past a token it refused
    size_t base_ = 0;                    // the depth of states_.front() (older ones are freed)
    std::vector<llama_token> path_;
    // the tokens allowed at path_'s end: the first asks there test one token each; past them, every token
    // is tested (one pass of the grammar over the vocabulary) and kept until the path moves
    int32_t asks_ = 0;
    std::vector<uint8_t> mask_;
    std::vector<llama_token_data> cand_;
};

} // namespace editspec
