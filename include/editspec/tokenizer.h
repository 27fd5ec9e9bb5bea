// A tokenizer as the layers that must not speak to libllama see one (the datastore): the engine's
// model is one (class model : public tokenizer), and a test may write its own.
//
//     bool datastore_build(const editspec::tokenizer & tok, ...);   // called with a model
//     for (int32_t t = 0; t < tok.vocab_size(); t++) use(tok.token_text(t));
//     std::vector<int32_t> ids = tok.tokenize_plain("def f():\n");    // no BOS, no control tokens
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace editspec {

struct tokenizer {
    virtual ~tokenizer() = default;
    // tokens in the vocabulary; ids are 0 .. vocab_size() - 1 (a llama_token is an int32_t)
    virtual int32_t vocab_size() const = 0;
    // token t's text as the vocabulary stores it (not rendered as a piece); valid while the tokenizer lives
    virtual std::string_view token_text(int32_t t) const = 0;
    // text as tokens, without BOS and with "<|...|>" left as text
    virtual std::vector<int32_t> tokenize_plain(std::string_view text) const = 0;
    // what the tokenizer came from (a model's path), for messages
    virtual const std::string & tokenizer_source() const = 0;
};

} // namespace editspec
