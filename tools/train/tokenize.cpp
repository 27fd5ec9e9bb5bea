// editspec-train-tokenize: tokenize texts with llama.cpp's own tokenizer, keeping byte offsets.
//
//     editspec-train-tokenize -v vocab.gguf -i texts.jsonl -o tokens.bin
//
// Input: one JSON object per line, {"text": "..."}. Output (little-endian), per input line in order:
//
//     u32 n_tokens | i32 token[n_tokens] | u32 byte_start[n_tokens]
//
// byte_start[i] is where token i starts in the UTF-8 text: the sum of the lengths of the pieces before
// it (llama_token_to_piece). No BOS/EOS is added and special-token text is not parsed (training data is
// plain code). A text whose pieces do not add up to its length (a tokenizer that normalizes) is an
// error: the offsets would be wrong.
//
// The model file may be a vocabulary-only GGUF (only the tokenizer is loaded).
#include "llama.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

static void log_quiet(ggml_log_level level, const char * text, void *) {
    if (level >= GGML_LOG_LEVEL_ERROR) {
        fputs(text, stderr);
    }
}

static bool tokenize_text(const llama_vocab * vocab, const std::string & text, std::vector<llama_token> & out) {
    out.resize(text.size() + 16);
    int32_t n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), out.data(), (int32_t) out.size(), false, false);
    if (n < 0) {
        out.resize(-n);
        n = llama_tokenize(vocab, text.data(), (int32_t) text.size(), out.data(), (int32_t) out.size(), false, false);
    }
    if (n < 0) {
        return false;
    }
    out.resize(n);
    return true;
}

int main(int argc, char ** argv) {
    std::string vocab_path, in_path, out_path;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        if (a == "-v") { vocab_path = argv[i + 1]; }
        else if (a == "-i") { in_path = argv[i + 1]; }
        else if (a == "-o") { out_path = argv[i + 1]; }
    }
    if (vocab_path.empty() || in_path.empty() || out_path.empty()) {
        fprintf(stderr, "usage: %s -v vocab.gguf -i texts.jsonl -o tokens.bin\n", argv[0]);
        return 2;
    }
    llama_log_set(log_quiet, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model * model = llama_model_load_from_file(vocab_path.c_str(), mp);
    if (!model) {
        fprintf(stderr, "%s: %s: cannot load the vocabulary\n", __func__, vocab_path.c_str());
        return 1;
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);

    std::ifstream in(in_path);
    if (!in) {
        fprintf(stderr, "%s: %s: cannot open\n", __func__, in_path.c_str());
        return 1;
    }
    const std::string tmp = out_path + ".tmp";
    FILE * out = fopen(tmp.c_str(), "wb");
    if (!out) {
        fprintf(stderr, "%s: %s: cannot create\n", __func__, tmp.c_str());
        return 1;
    }
    std::string line;
    std::vector<llama_token> toks;
    std::vector<uint32_t> starts;
    char piece[512];
    size_t n_lines = 0, n_tokens = 0, n_bytes = 0;
    while (std::getline(in, line)) {
        if (line.empty()) {
            continue;
        }
        const std::string text = nlohmann::json::parse(line).at("text").get<std::string>();
        if (!tokenize_text(vocab, text, toks)) {
            fprintf(stderr, "%s: %s:%zu: tokenization failed\n", __func__, in_path.c_str(), n_lines + 1);
            return 1;
        }
        starts.resize(toks.size());
        uint32_t pos = 0;
        for (size_t i = 0; i < toks.size(); ++i) {
            starts[i] = pos;
            const int32_t n = llama_token_to_piece(vocab, toks[i], piece, sizeof(piece), 0, false);
            if (n < 0) {
                fprintf(stderr, "%s: token %d: piece longer than %zu bytes\n", __func__, toks[i], sizeof(piece));
                return 1;
            }
            pos += (uint32_t) n;
        }
        if (pos != text.size()) {
            fprintf(stderr, "%s: %s:%zu: pieces add up to %u bytes, the text has %zu: offsets would be wrong\n",
                    __func__, in_path.c_str(), n_lines + 1, pos, text.size());
            return 1;
        }
        const uint32_t n = (uint32_t) toks.size();
        fwrite(&n, sizeof(n), 1, out);
        fwrite(toks.data(), sizeof(llama_token), n, out);
        fwrite(starts.data(), sizeof(uint32_t), n, out);
        n_lines++;
        n_tokens += n;
        n_bytes += text.size();
    }
    if (fclose(out) != 0 || rename(tmp.c_str(), out_path.c_str()) != 0) {
        fprintf(stderr, "%s: %s: write failed\n", __func__, out_path.c_str());
        return 1;
    }
    fprintf(stderr, "tokenize: %zu texts, %zu tokens, %zu bytes (%.3f bytes/token)\n", n_lines, n_tokens, n_bytes,
            n_tokens ? (double) n_bytes / n_tokens : 0.0);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
