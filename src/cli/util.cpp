#include "cli/commands.h"

#include <cstdio>
#include <cstdlib>
#include <sys/stat.h>

namespace editspec::cli {

int fail_input(const char * cmd, const std::string & msg) {
    fprintf(stderr, "editspec %s: error: %s\n", cmd, msg.c_str());
    return 2;
}

int fail_runtime(const char * cmd, const std::string & msg) {
    fprintf(stderr, "editspec %s: error: %s\n", cmd, msg.c_str());
    return 1;
}

std::string default_model_path() {
    if (const char * env = std::getenv("EDITSPEC_MODEL"); env && *env) {
        return env;
    }
    // the shipped model, then the generated stand-in the README's main command makes
    const std::string shipped = std::string(EDITSPEC_SOURCE_DIR) + "/models/editspec-target.gguf";
    struct stat st;
    if (stat(shipped.c_str(), &st) == 0) {
        return shipped;
    }
    return std::string(EDITSPEC_SOURCE_DIR) + "/build/models/default.gguf";
}

} // namespace editspec::cli
