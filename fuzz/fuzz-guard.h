// The fuzz targets' rule: an exception that escapes a parser is a crash, named on stderr.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>

// runs check(); aborts (libFuzzer's crash) when it throws
template <typename F> int fuzz_guard(const char * target, F && check) {
    try {
        check();
    } catch (const std::exception & e) {
        fprintf(stderr, "%s: an exception escaped: %s\n", target, e.what());
        abort();
    }
    return 0;
}
