// editspec subcommands. Each file src/cli/cmd-<name>.cpp adds one subcommand to the app and
// returns how to run it; main() parses and runs the chosen one.
//
// Exit status: 0 ok, 1 runtime failure, 2 bad input (a clear one-line message on stderr).
#pragma once

#include <CLI/CLI.hpp>

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

// the model used when -m is not given: $EDITSPEC_MODEL, else the shipped default
std::string default_model_path();

} // namespace editspec::cli
