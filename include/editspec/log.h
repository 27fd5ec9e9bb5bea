// editspec logging: one family of macros that shares llama.cpp's log callback.
//
//     ES_LOG_INFO("%s: loaded %s (%d tokens)\n", __func__, path.c_str(), n_vocab);
//
// The level shown on stderr is set by log_set_level() or the EDITSPEC_LOG environment variable
// (error, warn, info, debug; default warn). llama.cpp's own messages go through the same filter.
//
// A command's own lines for its user (what it listens on, an error in its set-up, a signal) go
// through ES_SAY with the command's name as prefix; they are shown at every level but none:
//
//     ES_SAY("serve", "listening on http://%s:%d\n", host, port);   // "editspec serve: listening on ..."
#pragma once

#include <cstdarg>

namespace editspec {

enum log_level : int {
    LOG_LEVEL_DEBUG = 0,
    LOG_LEVEL_INFO  = 1,
    LOG_LEVEL_WARN  = 2,
    LOG_LEVEL_ERROR = 3,
    LOG_LEVEL_NONE  = 4,
};

void log_set_level(log_level level);
log_level log_get_level();

// routes llama.cpp / ggml logs through editspec's filter; call once at start-up
void log_install_llama_callback();

void log_write(log_level level, const char * fmt, ...) __attribute__((format(printf, 2, 3)));
// "editspec MODULE: " and the message, unless the level is LOG_LEVEL_NONE
void log_say(const char * module, const char * fmt, ...) __attribute__((format(printf, 2, 3)));

} // namespace editspec

#define ES_LOG_DEBUG(...) ::editspec::log_write(::editspec::LOG_LEVEL_DEBUG, __VA_ARGS__)
#define ES_LOG_INFO(...)  ::editspec::log_write(::editspec::LOG_LEVEL_INFO,  __VA_ARGS__)
#define ES_LOG_WARN(...)  ::editspec::log_write(::editspec::LOG_LEVEL_WARN,  __VA_ARGS__)
#define ES_LOG_ERROR(...) ::editspec::log_write(::editspec::LOG_LEVEL_ERROR, __VA_ARGS__)
#define ES_SAY(module, ...) ::editspec::log_say(module, __VA_ARGS__)

// invariants only: bad input gets an error return, never an assert
#define ES_ASSERT(x)                                                                            \
    do {                                                                                        \
        if (!(x)) {                                                                             \
            ::editspec::log_write(::editspec::LOG_LEVEL_ERROR, "%s:%d: assertion failed: %s\n", \
                                  __FILE__, __LINE__, #x);                                      \
            __builtin_trap();                                                                   \
        }                                                                                       \
    } while (0)
