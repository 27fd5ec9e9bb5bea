// editspec subcommands. Each file src/cli/cmd-<name>.cpp adds one subcommand to the app and
// returns how to run it; main() parses and runs the chosen one.
//
// Exit status: 0 ok, 1 runtime failure, 2 bad input (a clear one-line message on stderr).
#pragma once

#include "editspec/generate.h"
#include "editspec/methods.h"

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
command cmd_edit_add(CLI::App & app);

// "editspec <cmd>: error: <msg>" on stderr; returns 2
int fail_input(const char * cmd, const std::string & msg);
// same for runtime failures; returns 1
int fail_runtime(const char * cmd, const std::string & msg);

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
int check_draft_options(const char * cmd, const draft_model_params & dp);

// what a request of `complete` or `edit` runs on
struct request_models {
    method_spec       ms;
    std::string       model_path;  // -m, or the default model
    std::string       draft_path;  // --draft-model, or the default when the method needs one; "" = none
    model_load_result target;
    model_load_result draft;       // empty when the method drafts without a model
};

// checks --gamma / --draft-p-min, parses --method, loads the target and, when the method needs
// one, the draft model (checked against the target's vocabulary); returns an exit status
int load_request_models(const char * cmd, const std::string & method, const std::string & model_opt,
                        const std::string & draft_opt, const draft_model_params & dp, request_models & out);

// loads a draft model and checks that it can draft for the target; false with *error naming both
bool load_draft_model(const std::string & path, const model & target, const std::string & target_path,
                      model_load_result & out, std::string * error);

// runs the request with the method (measuring or loading the cost model when the method needs it);
// returns an exit status: 0, or 1/2 after printing the error
int generate_with_method(const char * cmd, context & ctx, std::span<const llama_token> prompt,
                         const generate_params & gp, const method_spec & ms, const method_inputs & in,
                         generate_result & r);

// the statistics every command's --json prints
nlohmann::json result_json(const generate_result & r, const context & ctx, const method_spec & ms);

} // namespace editspec::cli
