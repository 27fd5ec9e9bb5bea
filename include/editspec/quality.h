// Quality of a produced program: its similarity to another output and whether the item's own
// tests pass on it (issue 5: pass@1 of greedy against entropy-aware modes, as EfficientEdit's
// Tables I-III).
//
//     editspec::test_options o;                     // python3, 10 s, network cut off
//     editspec::test_outcome t = editspec::run_python_tests(code, item.tests, o);
//     if (!t.ran) fprintf(stderr, "%s\n", t.error.c_str());     // python3 missing, ...
//     double s = editspec::edit_similarity(greedy_text, lossy_text); // 1 = identical
//
// Tests run as `python3 -I -B prog.py` in a fresh temporary folder, with standard input from
// /dev/null, in a new network namespace (no network: unshare(CLONE_NEWNET), or a user namespace
// plus one for users without the capability), a memory limit, and killed with its process group
// at the timeout. Thread-safe; forks, so call it between decodes, not from a drafter.
#pragma once

#include <string>

namespace editspec {

struct test_options {
    std::string python    = "python3";
    double      timeout_s = 10.0;
    bool        no_network = true;   // refuse to run when the network cannot be cut off
    long        memory_mb = 4096;    // RLIMIT_AS of the test process
};

struct test_outcome {
    bool        ran       = false;   // the program started (false: error says why)
    bool        passed    = false;   // exit status 0 within the timeout
    bool        timed_out = false;
    int         exit_code = -1;      // or 128 + signal
    double      ms        = 0.0;
    std::string error;               // when !ran: why; else the end of the program's output
};

// CODE + "\n\n" + TESTS as one program (CanItEdit's tests and HumanEval's check() both expect
// that); HumanEval callers append "check(ENTRY_POINT)" to TESTS.
test_outcome run_python_tests(const std::string & code, const std::string & tests, const test_options & o);

// 1 - Levenshtein(a, b) / max(|a|, |b|) over bytes; 1 for two empty texts.
double edit_similarity(const std::string & a, const std::string & b);

} // namespace editspec
