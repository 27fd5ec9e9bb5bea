#include "editspec/log.h"

#include "llama.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace editspec {

static log_level level_from_env() {
    const char * v = std::getenv("EDITSPEC_LOG");
    if (!v) {
        return LOG_LEVEL_WARN;
    }
    if (!strcmp(v, "debug")) return LOG_LEVEL_DEBUG;
    if (!strcmp(v, "info"))  return LOG_LEVEL_INFO;
    if (!strcmp(v, "warn"))  return LOG_LEVEL_WARN;
    if (!strcmp(v, "error")) return LOG_LEVEL_ERROR;
    if (!strcmp(v, "none"))  return LOG_LEVEL_NONE;
    return LOG_LEVEL_WARN;
}

static std::atomic<int> g_level{level_from_env()};

void log_set_level(log_level level) { g_level = level; }
log_level log_get_level() { return (log_level) g_level.load(); }

void log_write(log_level level, const char * fmt, ...) {
    if (level < g_level.load()) {
        return;
    }
    va_list args;
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
}

void log_say(const char * module, const char * fmt, ...) {
    if (g_level.load() >= LOG_LEVEL_NONE) return;
    // one write per line, so that lines of two threads do not interleave
    char line[2048];
    int n = snprintf(line, sizeof(line), "editspec %s: ", module);
    va_list args;
    va_start(args, fmt);
    if (n >= 0 && n < (int) sizeof(line)) vsnprintf(line + n, sizeof(line) - (size_t) n, fmt, args);
    va_end(args);
    fputs(line, stderr);
}

static void llama_log_callback(ggml_log_level level, const char * text, void * /*user*/) {
    // ggml continues a line with GGML_LOG_LEVEL_CONT; keep the level of the line it continues
    static thread_local log_level last = LOG_LEVEL_DEBUG;
    log_level l = last;
    switch (level) {
        case GGML_LOG_LEVEL_ERROR: l = LOG_LEVEL_ERROR; break;
        case GGML_LOG_LEVEL_WARN:  l = LOG_LEVEL_WARN;  break;
        case GGML_LOG_LEVEL_INFO:  l = LOG_LEVEL_INFO;  break;
        case GGML_LOG_LEVEL_DEBUG: l = LOG_LEVEL_DEBUG; break;
        case GGML_LOG_LEVEL_CONT:  break;
        default:                   l = LOG_LEVEL_DEBUG; break;
    }
    last = l;
    // llama.cpp's warnings are about its own internals (e.g. unused vocab keys): show them as info
    if (l == LOG_LEVEL_WARN) {
        l = LOG_LEVEL_INFO;
    }
    if (l >= g_level.load()) {
        fputs(text, stderr);
    }
}

void log_install_llama_callback() {
    llama_log_set(llama_log_callback, nullptr);
}

} // namespace editspec
