// editspec-train-eval: held-out measurements of trained GGUF models, through stock llama.cpp.
//
//     editspec-train-eval acc  -m model.gguf -t tokens.bin [--ctx 512] [--stride 256] [--doc-tokens N] [--max-tokens N]
//     editspec-train-eval dump -m model.gguf -t tokens.bin -o logits.f32 [--ctx 64]
//     editspec-train-eval spec -m target.gguf [-d draft.gguf] (-t tokens.bin | -p prompts.jsonl)
//                              [--gamma 7] [--prompt-len 128] [--gen 64] [--n-prompts 50] [-o out.jsonl]
//
// acc:  greedy next-token accuracy and mean cross-entropy over documents (tokens.bin as written by
//       editspec-train-tokenize; each document gets BOS when the model adds one; --doc-tokens keeps
//       the first N tokens of each). Windows of --ctx tokens with --stride (default ctx/2); every token
//       is scored once, with at least ctx - stride tokens of context (except near a document's start):
//
//           doc   B t1 t2 ............................................ tn
//           win0  [ scored ................. )
//           win1            [ context     | scored ........ )
//
// spec: greedy generation from prompts, optionally with greedy draft-model speculation (γ = --gamma):
//       each target pass verifies [last committed, d1 .. dγ] in one llama_decode, keeps the longest
//       prefix of drafts equal to the target's argmax, and adds the target's own next token (bonus).
//       Prompts are document prefixes (-t: --prompt-len tokens at offsets 0, 1024, ... of each doc)
//       or texts (-p: JSONL {"text": ...}, tokenized with BOS as `editspec` does). Generation stops at
//       --gen tokens or an end-of-generation token. Reports tokens per target pass (accepted + 1) and
//       accepted draft tokens per pass; -o writes each generation as JSONL {"text", "n_gen", "passes"}.
//       Flash attention is off, so batched verification gives the logits of one-at-a-time decoding.
//
// dump: the logits of the first document's first --ctx tokens (BOS included when the model adds one),
//       float32 [n][n_vocab] to -o: tests compare them with the trainer's (train.py --check-export).
//
// One JSON line of results goes to stdout; progress to stderr.
#include "llama.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

using json = nlohmann::json;

// a generated text may end inside a UTF-8 sequence (byte-level tokens): such bytes become U+FFFD
// instead of an exception from the JSON writer
static std::string json_line(const json & j) {
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

static void log_quiet(ggml_log_level level, const char * text, void *) {
    if (level >= GGML_LOG_LEVEL_ERROR) {
        fputs(text, stderr);
    }
}

struct eval_args {
    std::string mode, model, draft, tokens, prompts, out;
    int32_t ctx = 512, max_tokens = 0, doc_tokens = 0, stride = 0, gamma = 7, prompt_len = 128, gen = 64, n_prompts = 50, threads = 1;
};

// documents of tokens.bin: u32 n | i32 tok[n] | u32 start[n]
static bool docs_read(const std::string & path, std::vector<std::vector<llama_token>> & docs) {
    FILE * f = fopen(path.c_str(), "rb");
    if (!f) {
        fprintf(stderr, "%s: %s: cannot open\n", __func__, path.c_str());
        return false;
    }
    uint32_t n;
    while (fread(&n, sizeof(n), 1, f) == 1) {
        std::vector<llama_token> t(n);
        std::vector<uint32_t> s(n);
        if (fread(t.data(), sizeof(llama_token), n, f) != n || fread(s.data(), sizeof(uint32_t), n, f) != n) {
            fprintf(stderr, "%s: %s: truncated\n", __func__, path.c_str());
            fclose(f);
            return false;
        }
        docs.push_back(std::move(t));
    }
    fclose(f);
    return true;
}

struct model_owner {
    llama_model   * model = nullptr;
    llama_context * ctx   = nullptr;
    ~model_owner() {
        if (ctx) { llama_free(ctx); }
        if (model) { llama_model_free(model); }
    }
};

static bool model_open(model_owner & mo, const std::string & path, int32_t n_ctx, int32_t n_batch, int32_t threads) {
    llama_model_params mp = llama_model_default_params();
    mo.model = llama_model_load_from_file(path.c_str(), mp);
    if (!mo.model) {
        fprintf(stderr, "%s: %s: cannot load\n", __func__, path.c_str());
        return false;
    }
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch;
    cp.n_ubatch = n_batch;
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    mo.ctx = llama_init_from_model(mo.model, cp);
    if (!mo.ctx) {
        fprintf(stderr, "%s: %s: cannot create a context\n", __func__, path.c_str());
        return false;
    }
    return true;
}

// decodes tokens[0..n) at positions pos0.. of sequence 0; logits for all rows when all_logits, else the last
static bool decode_tokens(llama_context * ctx, const llama_token * tokens, int32_t n, int32_t pos0, bool all_logits) {
    llama_batch b = llama_batch_init(n, 0, 1);
    for (int32_t i = 0; i < n; ++i) {
        b.token[i] = tokens[i];
        b.pos[i] = pos0 + i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = all_logits || i == n - 1;
    }
    b.n_tokens = n;
    const int32_t rc = llama_decode(ctx, b);
    llama_batch_free(b);
    if (rc != 0) {
        fprintf(stderr, "%s: llama_decode failed (%d) on %d tokens at %d\n", __func__, rc, n, pos0);
        return false;
    }
    return true;
}

static llama_token argmax(const float * logits, int32_t n_vocab) {
    return (llama_token) (std::max_element(logits, logits + n_vocab) - logits);
}

// ----------------------------------------------------------------------------
// acc: next-token accuracy

static int run_acc(const eval_args & a) {
    std::vector<std::vector<llama_token>> docs;
    if (!docs_read(a.tokens, docs)) {
        return 1;
    }
    model_owner m;
    if (!model_open(m, a.model, a.ctx, a.ctx, a.threads)) {
        return 1;
    }
    const llama_vocab * vocab = llama_model_get_vocab(m.model);
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    const bool add_bos = llama_vocab_get_add_bos(vocab);
    const int32_t W = a.ctx, S = a.stride > 0 ? std::min(a.stride, a.ctx) : a.ctx / 2;
    int64_t n_scored = 0, n_correct = 0;
    double nll = 0.0;
    for (size_t d = 0; d < docs.size(); ++d) {
        std::vector<llama_token> seq;
        if (add_bos) {
            seq.push_back(llama_vocab_bos(vocab));
        }
        seq.insert(seq.end(), docs[d].begin(), docs[d].end());
        if (a.doc_tokens > 0 && (int32_t) seq.size() > a.doc_tokens + 1) {
            seq.resize(a.doc_tokens + 1);
        }
        const int32_t n = (int32_t) seq.size();
        for (int32_t s = 0; s + 1 < n; s += S) {
            const int32_t len = std::min(W, n - s);
            llama_memory_clear(llama_get_memory(m.ctx), true);
            if (!decode_tokens(m.ctx, seq.data() + s, len, 0, true)) {
                return 1;
            }
            const int32_t first = s == 0 ? 0 : W - S;
            for (int32_t i = first; i < len && s + i + 1 < n; ++i) {
                const float * lg = llama_get_logits_ith(m.ctx, i);
                const llama_token want = seq[s + i + 1];
                n_correct += argmax(lg, n_vocab) == want;
                float mx = *std::max_element(lg, lg + n_vocab);
                double z = 0.0;
                for (int32_t v = 0; v < n_vocab; ++v) {
                    z += std::exp((double) lg[v] - mx);
                }
                nll += std::log(z) + mx - lg[want];
                n_scored++;
            }
            if (s + W >= n) {
                break;
            }
            if (a.max_tokens > 0 && n_scored >= a.max_tokens) {
                break;
            }
        }
        if (a.max_tokens > 0 && n_scored >= a.max_tokens) {
            break;
        }
    }
    json r = {{"mode", "acc"}, {"model", a.model}, {"n_docs", docs.size()}, {"n_scored", n_scored},
              {"n_correct", n_correct}, {"accuracy", n_scored ? (double) n_correct / n_scored : 0.0},
              {"nll_nats", n_scored ? nll / n_scored : 0.0}, {"ctx", a.ctx}};
    printf("%s\n", json_line(r).c_str());
    return 0;
}

static int run_dump(const eval_args & a) {
    std::vector<std::vector<llama_token>> docs;
    if (!docs_read(a.tokens, docs) || docs.empty()) {
        return 1;
    }
    model_owner m;
    if (!model_open(m, a.model, a.ctx, a.ctx, a.threads)) {
        return 1;
    }
    const llama_vocab * vocab = llama_model_get_vocab(m.model);
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    std::vector<llama_token> seq;
    if (llama_vocab_get_add_bos(vocab)) {
        seq.push_back(llama_vocab_bos(vocab));
    }
    seq.insert(seq.end(), docs[0].begin(), docs[0].end());
    seq.resize(std::min<size_t>(seq.size(), a.ctx));
    if (!decode_tokens(m.ctx, seq.data(), (int32_t) seq.size(), 0, true)) {
        return 1;
    }
    FILE * f = fopen(a.out.c_str(), "wb");
    if (!f) {
        fprintf(stderr, "%s: %s: cannot create\n", __func__, a.out.c_str());
        return 1;
    }
    for (size_t i = 0; i < seq.size(); ++i) {
        fwrite(llama_get_logits_ith(m.ctx, (int32_t) i), sizeof(float), n_vocab, f);
    }
    fclose(f);
    printf("{\"mode\": \"dump\", \"n\": %zu, \"n_vocab\": %d}\n", seq.size(), n_vocab);
    return 0;
}

// ----------------------------------------------------------------------------
// spec: greedy generation with optional greedy draft-model speculation

struct spec_stats {
    int64_t n_gen = 0, n_passes = 0, n_drafted = 0, n_accepted = 0;
};

// target/draft caches hold hist[0 .. n-1) (every committed token but the last) between steps
static bool spec_generate(llama_context * tctx, llama_context * dctx, const llama_vocab * vocab, std::vector<llama_token> hist,
                          int32_t gamma, int32_t max_gen, std::vector<llama_token> & out, spec_stats & st) {
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    llama_memory_clear(llama_get_memory(tctx), true);
    if (dctx) {
        llama_memory_clear(llama_get_memory(dctx), true);
    }
    if (hist.size() > 1 && !decode_tokens(tctx, hist.data(), (int32_t) hist.size() - 1, 0, false)) {
        return false;
    }
    int32_t d_cached = 0; // draft cache holds hist[0 .. d_cached)
    out.clear();
    while ((int32_t) out.size() < max_gen) {
        const int32_t h = (int32_t) hist.size();
        // draft: catch up on committed tokens, then γ greedy tokens one at a time
        std::vector<llama_token> drafts;
        const int32_t g = dctx ? std::min(gamma, max_gen - (int32_t) out.size() - 1) : 0;
        if (g > 0) {
            if (!decode_tokens(dctx, hist.data() + d_cached, h - d_cached, d_cached, false)) {
                return false;
            }
            d_cached = h;
            llama_token t = argmax(llama_get_logits_ith(dctx, -1), n_vocab);
            for (int32_t i = 0; i < g; ++i) {
                drafts.push_back(t);
                if (llama_vocab_is_eog(vocab, t) || i + 1 == g) {
                    break;
                }
                if (!decode_tokens(dctx, &t, 1, h + i, false)) {
                    return false;
                }
                t = argmax(llama_get_logits_ith(dctx, -1), n_vocab);
            }
            llama_memory_seq_rm(llama_get_memory(dctx), 0, h, -1);
        }
        // target: verify [last, d1 .. dk] in one pass
        std::vector<llama_token> batch = {hist.back()};
        batch.insert(batch.end(), drafts.begin(), drafts.end());
        if (!decode_tokens(tctx, batch.data(), (int32_t) batch.size(), h - 1, true)) {
            return false;
        }
        st.n_passes++;
        st.n_drafted += (int64_t) drafts.size();
        int32_t n_acc = 0;
        llama_token next = argmax(llama_get_logits_ith(tctx, 0), n_vocab);
        bool stop = false;
        while (true) {
            hist.push_back(next);
            out.push_back(next);
            if (llama_vocab_is_eog(vocab, next) || (int32_t) out.size() >= max_gen) {
                stop = true;
                break;
            }
            if (n_acc < (int32_t) drafts.size() && drafts[n_acc] == next) {
                n_acc++;
                next = argmax(llama_get_logits_ith(tctx, n_acc), n_vocab);
                continue;
            }
            break;
        }
        st.n_accepted += n_acc;
        // the target cache keeps hist[0 .. h-1+n_acc]: drop the rejected drafts
        llama_memory_seq_rm(llama_get_memory(tctx), 0, h + n_acc, -1);
        if (stop) {
            break;
        }
    }
    st.n_gen += (int64_t) out.size();
    return true;
}

static std::string detok(const llama_vocab * vocab, const std::vector<llama_token> & toks) {
    std::string s;
    char buf[512];
    for (llama_token t : toks) {
        if (llama_vocab_is_eog(vocab, t)) {
            break;
        }
        const int32_t n = llama_token_to_piece(vocab, t, buf, sizeof(buf), 0, false);
        if (n > 0) {
            s.append(buf, n);
        }
    }
    return s;
}

static int run_spec(const eval_args & a) {
    model_owner t, d;
    const int32_t n_ctx = 2048;
    if (!model_open(t, a.model, n_ctx, 1024, a.threads)) {
        return 1;
    }
    if (!a.draft.empty() && !model_open(d, a.draft, n_ctx, 1024, a.threads)) {
        return 1;
    }
    const llama_vocab * vocab = llama_model_get_vocab(t.model);
    if (d.model && llama_vocab_n_tokens(llama_model_get_vocab(d.model)) != llama_vocab_n_tokens(vocab)) {
        fprintf(stderr, "%s: draft and target vocabularies differ\n", __func__);
        return 1;
    }
    const bool add_bos = llama_vocab_get_add_bos(vocab);
    std::vector<std::vector<llama_token>> prompts;
    if (!a.tokens.empty()) {
        std::vector<std::vector<llama_token>> docs;
        if (!docs_read(a.tokens, docs)) {
            return 1;
        }
        for (size_t off = 0; (int32_t) prompts.size() < a.n_prompts && off < 100000; off += 1024) {
            bool any = false;
            for (const auto & doc : docs) {
                if ((int32_t) prompts.size() >= a.n_prompts) {
                    break;
                }
                if (doc.size() < off + a.prompt_len + a.gen) {
                    continue;
                }
                any = true;
                std::vector<llama_token> p;
                if (add_bos && off == 0) {
                    p.push_back(llama_vocab_bos(vocab));
                }
                p.insert(p.end(), doc.begin() + off, doc.begin() + off + a.prompt_len);
                prompts.push_back(std::move(p));
            }
            if (!any) {
                break;
            }
        }
    } else {
        std::ifstream in(a.prompts);
        if (!in) {
            fprintf(stderr, "%s: %s: cannot open\n", __func__, a.prompts.c_str());
            return 1;
        }
        std::string line;
        while (std::getline(in, line) && (a.n_prompts <= 0 || (int32_t) prompts.size() < a.n_prompts)) {
            if (line.empty()) {
                continue;
            }
            const std::string text = json::parse(line).at("text").get<std::string>();
            std::vector<llama_token> p(text.size() + 8);
            int32_t n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), p.data(), (int32_t) p.size(), true, false);
            if (n < 0) {
                fprintf(stderr, "%s: tokenization failed\n", __func__);
                return 1;
            }
            p.resize(n);
            prompts.push_back(std::move(p));
        }
    }
    FILE * out = a.out.empty() ? nullptr : fopen(a.out.c_str(), "w");
    spec_stats st;
    std::vector<llama_token> gen;
    const int64_t t0 = llama_time_us();
    for (size_t i = 0; i < prompts.size(); ++i) {
        spec_stats one;
        if (!spec_generate(t.ctx, d.ctx, vocab, prompts[i], a.gamma, a.gen, gen, one)) {
            return 1;
        }
        st.n_gen += one.n_gen;
        st.n_passes += one.n_passes;
        st.n_drafted += one.n_drafted;
        st.n_accepted += one.n_accepted;
        if (out) {
            json r = {{"text", detok(vocab, gen)}, {"n_gen", one.n_gen}, {"passes", one.n_passes}, {"accepted", one.n_accepted},
                      {"eos", !gen.empty() && llama_vocab_is_eog(vocab, gen.back())}};
            fprintf(out, "%s\n", json_line(r).c_str());
        }
        if ((i + 1) % 10 == 0) {
            fprintf(stderr, "spec: %zu/%zu prompts, %.2f tokens/pass\n", i + 1, prompts.size(),
                    st.n_passes ? (double) st.n_gen / st.n_passes : 0.0);
        }
    }
    if (out) {
        fclose(out);
    }
    const double secs = (llama_time_us() - t0) / 1e6;
    json r = {{"mode", "spec"}, {"model", a.model}, {"draft", a.draft}, {"gamma", a.gamma}, {"n_prompts", prompts.size()},
              {"n_gen", st.n_gen}, {"n_passes", st.n_passes}, {"n_drafted", st.n_drafted}, {"n_accepted", st.n_accepted},
              {"tokens_per_pass", st.n_passes ? (double) st.n_gen / st.n_passes : 0.0},
              {"accepted_per_pass", st.n_passes ? (double) st.n_accepted / st.n_passes : 0.0},
              {"acceptance_rate", st.n_drafted ? (double) st.n_accepted / st.n_drafted : 0.0},
              {"seconds", secs}, {"tokens_per_second", secs > 0 ? st.n_gen / secs : 0.0}};
    printf("%s\n", json_line(r).c_str());
    return 0;
}

int main(int argc, char ** argv) {
    eval_args a;
    if (argc < 2) {
        fprintf(stderr, "usage: %s acc|spec -m MODEL [...] (see the header of tools/train/eval.cpp)\n", argv[0]);
        return 2;
    }
    a.mode = argv[1];
    for (int i = 2; i + 1 < argc; i += 2) {
        const std::string k = argv[i];
        const char * v = argv[i + 1];
        if (k == "-m") { a.model = v; }
        else if (k == "-d") { a.draft = v; }
        else if (k == "-t") { a.tokens = v; }
        else if (k == "-p") { a.prompts = v; }
        else if (k == "-o") { a.out = v; }
        else if (k == "--ctx") { a.ctx = atoi(v); }
        else if (k == "--max-tokens") { a.max_tokens = atoi(v); }
        else if (k == "--doc-tokens") { a.doc_tokens = atoi(v); }
        else if (k == "--stride") { a.stride = atoi(v); }
        else if (k == "--gamma") { a.gamma = atoi(v); }
        else if (k == "--prompt-len") { a.prompt_len = atoi(v); }
        else if (k == "--gen") { a.gen = atoi(v); }
        else if (k == "--n-prompts") { a.n_prompts = atoi(v); }
        else if (k == "--threads") { a.threads = atoi(v); }
        else {
            fprintf(stderr, "%s: unknown option %s\n", argv[0], k.c_str());
            return 2;
        }
    }
    llama_log_set(log_quiet, nullptr);
    llama_backend_init();
    int rc = 2;
    if (a.mode == "acc") {
        rc = run_acc(a);
    } else if (a.mode == "dump") {
        rc = run_dump(a);
    } else if (a.mode == "spec") {
        rc = run_spec(a);
    } else {
        fprintf(stderr, "%s: unknown mode '%s'\n", argv[0], a.mode.c_str());
    }
    llama_backend_free();
    return rc;
}
