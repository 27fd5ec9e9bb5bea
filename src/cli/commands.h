// editspec subcommands. Each file src/cli/cmd-<name>.cpp adds one subcommand to the app and
// returns how to run it; main() parses and runs the chosen one.
//
// Exit status: 0 ok, 1 runtime failure, 2 bad input (a clear one-line message on stderr).
#pragma once

#include "editspec/generate.h"
#include "editspec/methods.h"
#include "editspec/request.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <functional>

namespace editspec::cli {

struct command {
    CLI::App * sub = nullptr;
    std::function<int()> run; // returns the exit status
};

command cmd_complete_add(CLI::App & app);
command cmd_make_model_add(CLI::App & app);
command cmd_bench_add(CLI::App & app);
command cmd_cost_add(CLI::App & app);
command cmd_check_exact_add(CLI::App & app);
command cmd_edit_add(CLI::App & app);
command cmd_apply_add(CLI::App & app);
command cmd_serve_add(CLI::App & app);
command cmd_chat_add(CLI::App & app);
command cmd_index_add(CLI::App & app);
command cmd_session_add(CLI::App & app);
command cmd_rpc_server_add(CLI::App & app);

// "editspec <cmd>: error: <msg>" on stderr; returns 2
int fail_input(const char * cmd, const std::string & msg);
// every method and drafter of the table, for --help (drafters.h)
std::string methods_footer();
// --prompt-layout's help: edit and apply prompts with the file first (the default) or the instruction first
std::string prompt_layout_help();
// --prompt-layout's value into out; an exit status (2 with the names on another value)
int parse_prompt_layout(const char * cmd, const std::string & value, prompt_layout & out);
// same for runtime failures; returns 1
int fail_runtime(const char * cmd, const std::string & msg);

// a file's whole text into out; false with *error naming the file and why (unreadable, or not UTF-8:
// not_utf8_reason)
bool read_text_file(const std::string & path, std::string & out, std::string & error);
// why `text` (what: "'FILE'", "stdin") is not UTF-8 text a merge may write back: a UTF-16 or UTF-32
// byte-order mark; "" when none. Other bytes are the file's own: they tokenize and come back as they were.
std::string not_utf8_reason(std::string_view text, const std::string & what);

// a warning on stderr when the prompt and the answer expected after it (n_answer tokens; 0 = unknown)
// go past the context the model was trained on (the shipped models: 512 tokens)
void warn_past_train_ctx(const char * cmd, const model & m, int32_t n_prompt, int32_t n_answer);

// the model used when -m is not given: $EDITSPEC_MODEL, else the shipped default
std::string default_model_path();

// the draft model used when --draft-model is not given: $EDITSPEC_DRAFT_MODEL, else the shipped
// draft model when the target is the shipped target; "" when there is none
std::string default_draft_model_path(const std::string & target_path);

// --gamma and --draft-p-min into `dp` (the draft model's proposals); --draft-model stays per command
void add_draft_options(CLI::App * sub, draft_model_params & dp);
// checks them; returns an exit status
// the papers' settings (drafters.h: method_settings), checked by method_settings_check
void add_method_settings(CLI::App * sub, method_settings & s);
int check_draft_options(const char * cmd, const draft_model_params & dp);

// the options of a command that runs requests (complete, edit): models, method, threads, context
struct request_opts {
    std::string model;           // -m, "" = default_model_path()
    std::string draft_model;     // --draft-model, "" = default_draft_model_path() when the method needs one
    std::string head_model;      // --head-model: an EAGLE-3 or DFlash head file over the target
    draft_model_params draft;    // --gamma, --draft-p-min
    method_settings settings;    // --copy-gamma, --alpha, --entropy-k, ...
    std::string method = "auto"; // --method (methods.h)
    int32_t threads = 0;
    int32_t n_ctx = 4096;
    bool flash_attn = true;
    std::string cache_type = "f16";           // --cache-type (kv_cache_type_parse)
    int32_t rs_snapshots = CONTEXT_RS_ROLLBACK; // --rs-snapshots (context_params::rs_snapshots)
    std::vector<std::string> datastores;      // --datastore (rest, fastcoder: common)
    std::vector<std::string> repo_datastores; // --repo-datastore (fastcoder: the repository's)
};
// --cache-type: the target's KV cache type (f16, q8_0), into `type`
void add_cache_type_option(CLI::App * sub, std::string & type);
// --rs-snapshots: a recurrent model's snapshots (context_params::rs_snapshots), into `n`
void add_rs_snapshots_option(CLI::App * sub, int32_t & n);

// registers them; `methods` is the --method help text
void add_request_options(CLI::App * sub, request_opts & o, const std::string & methods);

// checks the options (the one set of checks every request command and the server make), parses
// --method and resolves the default models into rp: the draft model when the method needs one, or
// with draft_always the shipped one where there is one; returns an exit status
int request_runner_params(const char * cmd, const request_opts & o, method_spec & ms, bool draft_always, runner_params & rp);
// request_runner_params, then opens the runner (target, draft model, context); returns an exit status
int open_request_runner(const char * cmd, const request_opts & o, method_spec & ms, runner & rn);

// runs the request with the method; returns an exit status: 0, or 1/2 after printing the error
int run_request(const char * cmd, runner & rn, const method_spec & ms, const request & rq, generate_result & r);

// the statistics every command's --json prints
nlohmann::json result_json(const generate_result & r, const context & ctx, const method_spec & ms);

} // namespace editspec::cli
