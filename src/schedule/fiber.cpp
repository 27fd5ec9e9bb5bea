// Fibers (fiber.h) on glibc's ucontext.
#include "editspec/fiber.h"
#include "editspec/log.h"

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

#if defined(__SANITIZE_ADDRESS__)
#define EDITSPEC_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EDITSPEC_ASAN 1
#endif
#endif
#ifdef EDITSPEC_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace editspec {

struct fiber::state {
    ucontext_t self;   // the fiber's, while it is parked
    ucontext_t caller; // the resume()'s, while the fiber runs
};

namespace {
thread_local fiber * t_current = nullptr;

// AddressSanitizer keeps one stack per thread unless told of each switch (else it takes a fiber's
// frames for overflows of the thread's stack)
void asan_start(void ** fake, const void * bottom, size_t size) {
#ifdef EDITSPEC_ASAN
    __sanitizer_start_switch_fiber(fake, bottom, size);
#else
    (void) fake, (void) bottom, (void) size;
#endif
}

void asan_finish(void * fake, const void ** bottom_old, size_t * size_old) {
#ifdef EDITSPEC_ASAN
    __sanitizer_finish_switch_fiber(fake, bottom_old, size_old);
#else
    (void) fake, (void) bottom_old, (void) size_old;
#endif
}
} // namespace

fiber::fiber(std::function<void()> f, size_t stack_bytes) : f_(std::move(f)), st_(std::make_unique<state>()) {
    const size_t page = (size_t) sysconf(_SC_PAGESIZE);
    stack_bytes_ = (stack_bytes + page - 1) / page * page + page;
    stack_ = mmap(nullptr, stack_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (stack_ == MAP_FAILED) {
        stack_ = nullptr;
        throw std::runtime_error("fiber: no memory for a stack of " + std::to_string(stack_bytes_) + " bytes");
    }
    mprotect(stack_, page, PROT_NONE); // an overflow faults instead of writing over another mapping
    if (getcontext(&st_->self) != 0) throw std::runtime_error("fiber: getcontext failed");
    st_->self.uc_stack.ss_sp = (char *) stack_ + page;
    st_->self.uc_stack.ss_size = stack_bytes_ - page;
    st_->self.uc_link = &st_->caller; // entry()'s return resumes the resume() that ran it last
    makecontext(&st_->self, &fiber::entry, 0);
}

fiber::~fiber() {
    ES_ASSERT((!started_ || finished_) && "a fiber destroyed while parked");
    if (stack_) munmap(stack_, stack_bytes_);
}

fiber * fiber::current() { return t_current; }

void fiber::entry() {
    fiber * self = t_current;
    asan_finish(nullptr, &self->caller_bottom_, &self->caller_size_);
    try {
        self->f_();
    } catch (...) {
        self->error_ = std::current_exception();
    }
    self->finished_ = true;
    self->f_ = nullptr; // what the job captured goes now, on the thread that ran it
    asan_start(nullptr, self->caller_bottom_, self->caller_size_); // this stack is done with
}

void fiber::resume() {
    ES_ASSERT(!t_current && "fiber::resume() from inside a fiber");
    ES_ASSERT(!finished_);
    started_ = true;
    t_current = this;
    void * caller_fake = nullptr;
    const size_t page = (size_t) sysconf(_SC_PAGESIZE);
    asan_start(&caller_fake, (char *) stack_ + page, stack_bytes_ - page);
    swapcontext(&st_->caller, &st_->self);
    asan_finish(caller_fake, nullptr, nullptr);
    t_current = nullptr;
    if (finished_ && error_) {
        std::exception_ptr e = error_;
        error_ = nullptr;
        std::rethrow_exception(e);
    }
}

void fiber::park() {
    fiber * self = t_current;
    ES_ASSERT(self && "fiber::park() outside a fiber");
    asan_start(&self->asan_fake_, self->caller_bottom_, self->caller_size_);
    swapcontext(&self->st_->self, &self->st_->caller);
    asan_finish(self->asan_fake_, &self->caller_bottom_, &self->caller_size_);
}

} // namespace editspec
