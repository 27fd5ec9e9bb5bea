// A GBNF grammar as a token constraint (grammar.h), on llama.cpp's grammar sampler: its state after
// each prefix of the output, cloned token by token, so that a draft tree's paths (prefixes of one
// output) roll back to their common prefix instead of replaying the output.
#include "editspec/grammar.h"

#include "llama.h"

#include <cmath>
#include <stdexcept>

namespace editspec {

// states kept behind the path's end: a tree's paths branch within its depth; a rollback past them
// replays from the start
constexpr size_t GRAMMAR_STATES_KEPT = 512;
// tokens tested one by one at a path before the whole vocabulary is (constrained_argmax asks the likeliest
// first, then the 64 next): one token through the grammar takes ~10-20 us, the vocabulary ~28 ms on Qwen's
// 152k (docs/results/tools)
constexpr int32_t GRAMMAR_ONE_BY_ONE = 65;

std::unique_ptr<grammar_constraint> grammar_constraint::create(const model & m, const chat_grammar & g, std::string & err) {
    const llama_vocab * vocab = llama_model_get_vocab(m.get());
    std::vector<const char *> patterns;
    for (const std::string & p : g.trigger_patterns) patterns.push_back(p.c_str());
    llama_sampler * s = nullptr;
    try {
        s = g.lazy ? llama_sampler_init_grammar_lazy_patterns(vocab, g.gbnf.c_str(), "root", patterns.data(), patterns.size(),
                                                              g.trigger_tokens.data(), g.trigger_tokens.size())
                   : llama_sampler_init_grammar(vocab, g.gbnf.c_str(), "root");
    } catch (const std::exception & e) {
        err = std::string("the tool-call grammar does not parse: ") + e.what();
        return nullptr;
    }
    if (!s) {
        err = "the tool-call grammar does not parse (llama.cpp's grammar parser said why, in the log)";
        return nullptr;
    }
    std::unique_ptr<grammar_constraint> c(new grammar_constraint());
    c->initial_ = s;
    c->n_vocab_ = llama_vocab_n_tokens(vocab);
    try {
        for (llama_token t : g.prefill) llama_sampler_accept(s, t);
    } catch (const std::exception & e) {
        err = std::string("the tool-call grammar does not begin with the turn's opening: ") + e.what();
        return nullptr;
    }
    c->states_.push_back(llama_sampler_clone(s));
    return c;
}

grammar_constraint::~grammar_constraint() {
    for (llama_sampler * s : states_) {
        if (s) llama_sampler_free(s);
    }
    if (initial_) llama_sampler_free(initial_);
}

void grammar_constraint::follow(std::span<const llama_token> out) {
    size_t k = 0;
    while (k < path_.size() && k < out.size() && path_[k] == out[k]) k++;
    if (k == path_.size() && k == out.size()) return;
    asks_ = 0;
    mask_.clear();
    if (k < base_) { // behind the states kept: from the start
        for (llama_sampler * s : states_) {
            if (s) llama_sampler_free(s);
        }
        states_.assign(1, llama_sampler_clone(initial_));
        base_ = 0;
        k = 0;
    }
    while (base_ + states_.size() - 1 > k) {
        if (states_.back()) llama_sampler_free(states_.back());
        states_.pop_back();
    }
    path_.resize(k);
    for (size_t j = k; j < out.size(); ++j) {
        llama_sampler * next = nullptr;
        if (const llama_sampler * prev = states_.back()) {
            next = llama_sampler_clone(prev);
            try {
                llama_sampler_accept(next, out[j]);
            } catch (const std::exception &) {
                llama_sampler_free(next); // a token the grammar refuses: nothing follows it
                next = nullptr;
            }
        }
        states_.push_back(next);
        path_.push_back(out[j]);
    }
    while (states_.size() > GRAMMAR_STATES_KEPT) {
        if (states_.front()) llama_sampler_free(states_.front());
        states_.pop_front();
        base_++;
    }
}

bool grammar_constraint::allows(std::span<const llama_token> out, llama_token t) {
    if (t < 0 || t >= n_vocab_) return false;
    follow(out);
    llama_sampler * s = states_.back();
    if (!s) return false;
    if (asks_++ < GRAMMAR_ONE_BY_ONE) {
        // the likeliest tokens first, one at a time through the grammar
        llama_token_data one = {t, 0.0f, 0.0f};
        llama_token_data_array a = {&one, 1, -1, false};
        llama_sampler_apply(s, &a);
        return std::isfinite(one.logit);
    }
    if (mask_.empty()) {
        cand_.resize((size_t) n_vocab_);
        for (llama_token i = 0; i < n_vocab_; ++i) cand_[(size_t) i] = {i, 0.0f, 0.0f};
        llama_token_data_array a = {cand_.data(), cand_.size(), -1, false};
        llama_sampler_apply(s, &a);
        mask_.assign((size_t) n_vocab_, 0);
        for (size_t i = 0; i < a.size; ++i) {
            if (std::isfinite(a.data[i].logit)) mask_[(size_t) a.data[i].id] = 1;
        }
    }
    return mask_[(size_t) t] != 0;
}

} // namespace editspec
