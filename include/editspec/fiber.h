// A fiber: a function that runs on a stack of its own, on the thread that resumes it, and hands the
// thread back whenever it parks. The step engine (step.h) runs each request's job as a fiber on its
// own thread: the job's code stays the blocking decoder it is (draft, decode, verify, keep, commit),
// and a decode parks the fiber until the step that carries its batch is done. One thread then owns
// every request, runs each one's host work between steps and knows when all of them have sent their
// batch, with no thread per request, no wake-ups across threads and one OpenMP team (ggml's team
// belongs to the thread that computes).
//
//     fiber f([] { ...; fiber::park(); ...; });
//     f.resume();           // runs to the park
//     f.resume();           // runs to the end
//     ES_ASSERT(f.finished());
//
// ucontext (glibc) switches the stacks; under AddressSanitizer each switch is announced to it.
#pragma once

#include <cstddef>
#include <exception>
#include <functional>
#include <memory>

namespace editspec {

class fiber {
public:
    // f runs at the first resume(); an exception it lets out is rethrown by the resume() it ends in.
    // stack_bytes: reserved, not committed (pages are touched as the stack grows; a guard page below)
    explicit fiber(std::function<void()> f, size_t stack_bytes = 8u << 20);
    ~fiber(); // a fiber that started must have finished (its stack holds live frames otherwise)
    fiber(const fiber &) = delete;
    fiber & operator=(const fiber &) = delete;

    // runs the fiber until it parks or ends; from a thread, not from inside another fiber
    void resume();
    bool finished() const { return finished_; }

    // from inside a fiber: back to the resume() that ran it; returns when it is resumed again
    static void park();
    // the fiber running on this thread, null outside one
    static fiber * current();

private:
    struct state; // the saved contexts (ucontext_t), kept out of this header
    static void entry();

    std::function<void()> f_;
    std::unique_ptr<state> st_;
    void * stack_ = nullptr;   // the mapping, guard page first
    size_t stack_bytes_ = 0;
    bool started_ = false, finished_ = false;
    std::exception_ptr error_;
    // AddressSanitizer's record of the stacks on either side of a switch
    void * asan_fake_ = nullptr;
    const void * caller_bottom_ = nullptr;
    size_t caller_size_ = 0;
};

} // namespace editspec
