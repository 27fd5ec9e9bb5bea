// editspec chat: a multi-turn conversation. The conversation keeps its KV cache between turns, so a
// turn decodes only its own new tokens, and the copy drafter (the default method) drafts from every
// earlier turn: a request for a variation of an earlier answer is mostly copied.
#include "cli/commands.h"
#include "editspec/clock.h"
#include "editspec/chat.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <unistd.h>

namespace editspec::cli {

namespace {

struct chat_opts {
    request_opts req;       // -m, --method, --draft-model, -t, -c, ...
    std::string file;       // turns; "" or "-" = standard input
    std::string system;
    int32_t n_predict = 512;
    bool json = false;
    bool no_prompt_cache = false; // every turn decodes its whole prompt (to measure what the cache saves)
};

// the next user turn: from a terminal, one line; else the lines up to a line "---" (or the end)
bool read_turn(std::istream & in, bool interactive, std::string & turn) {
    turn.clear();
    std::string line;
    bool any = false;
    if (interactive) {
        fprintf(stderr, "> ");
        fflush(stderr);
        if (!std::getline(in, line)) return false;
        turn = line;
        return true;
    }
    while (std::getline(in, line)) {
        if (line == "---") {
            if (any) return true;
            continue; // a separator before any text
        }
        turn += (any ? "\n" : "") + line;
        any = true;
    }
    return any;
}

int run_chat(const chat_opts & o) {
    const char * cmd = "chat";
    if (o.n_predict < -1 || o.n_predict > 1000000) {
        return fail_input(cmd, "-n " + std::to_string(o.n_predict) + " out of range [-1, 1000000]");
    }
    std::ifstream file;
    std::istream * in = &std::cin;
    if (!o.file.empty() && o.file != "-") {
        file.open(o.file, std::ios::binary);
        if (!file) return fail_input(cmd, "cannot read '" + o.file + "'");
        in = &file;
    }
    const bool interactive = in == &std::cin && isatty(STDIN_FILENO);
    method_spec ms;
    runner rn;
    if (const int status = open_request_runner(cmd, o.req, ms, rn); status != 0) {
        return status;
    }
    const model & m = *rn.target.model;
    chat_conversation conv;
    if (!o.system.empty()) chat_add(m, conv, {"system", o.system}); // the first turn closes its open assistant turn
    std::string turn;
    for (int32_t n_turn = 1; read_turn(*in, interactive, turn); n_turn++) {
        chat_add(m, conv, {"user", turn});
        request rq;
        rq.prompt = conv.tokens;
        rq.gen.n_predict = o.n_predict;
        // time to first token: from the request to the first text (prefill and the first pass)
        const auto t0 = std::chrono::steady_clock::now();
        double ttft_ms = -1.0;
        rq.gen.on_text = [&](std::string_view s) {
            if (ttft_ms < 0) ttft_ms = ms_since(t0);
            if (!o.json) {
                fwrite(s.data(), 1, s.size(), stdout);
                fflush(stdout);
            }
            return true;
        };
        warn_past_train_ctx(cmd, m, (int32_t) rq.prompt.size(), 0);
        if (o.no_prompt_cache) rn.ctx->kv_clear();
        generate_result r;
        if (const int status = run_request(cmd, rn, ms, rq, r); status != 0) {
            return status;
        }
        chat_add_answer(m, conv, r.tokens, r.text);
        const int64_t copied = r.by_source[DRAFT_SOURCE_COPY].n_accepted;
        if (o.json) {
            nlohmann::json j = result_json(r, *rn.ctx, ms);
            j["turn"] = n_turn;
            j["prompt_cached"] = r.prompt_cached;
            j["ttft_ms"] = ttft_ms;
            j["copied"] = copied;
            printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
        } else {
            printf("\n");
            fprintf(stderr, "[turn %d: %zu tokens, %.1f tok/s, %.2f tokens per pass, %.0f%% copied; prompt %d tokens, "
                            "%d decoded (the rest cached), first token after %.0f ms]\n",
                    n_turn, r.tokens.size(), r.tokens_per_s(), r.tokens_per_pass(),
                    r.tokens.empty() ? 0.0 : 100.0 * (double) copied / (double) r.tokens.size(), r.prompt_tokens,
                    r.prompt_tokens - r.prompt_cached, ttft_ms);
        }
        fflush(stdout);
    }
    return 0;
}

} // namespace

command cmd_chat_add(CLI::App & app) {
    auto o = std::make_shared<chat_opts>();
    CLI::App * sub = app.add_subcommand(
        "chat", "a multi-turn conversation: each turn reuses the KV cache of the earlier ones and copies from them");
    add_request_options(sub, o->req, "decoding method (below)");
    sub->footer("Turns come from FILE (or standard input): separated by lines '---'; from a terminal, one line each.\n"
                "Example:  printf 'Write fib in Python.\\n---\\nNow add a docstring.\\n' | editspec chat\n\n" +
                methods_footer());
    sub->add_option("-f,--file", o->file, "read the turns from a file ('-' = standard input)");
    sub->add_option("--system", o->system, "a system message before the first turn");
    sub->add_option("-n,--n-predict", o->n_predict, "most tokens per answer (-1 = until end of text)")->capture_default_str();
    sub->add_flag("--json", o->json, "print one JSON object per turn (the answer and its statistics)");
    sub->add_flag("--no-prompt-cache", o->no_prompt_cache,
                  "decode every turn's whole conversation again instead of only its new tokens (for comparison)");
    return {sub, [o] { return run_chat(*o); }};
}

} // namespace editspec::cli
