// Clearing the vector registers' upper halves after ggml's compute, on the thread that called it.
#pragma once

namespace editspec {

// Some of ggml-cpu's x86 kernels return with the upper halves of the YMM/ZMM registers dirty: a
// wrapper tail-calls a kernel that takes a __m256i argument, and GCC emits no vzeroupper in
// either (repack.cpp's Q4_0, IQ4_NL and MXFP4 gemv/gemm at llama.cpp de3ff815). editspec's own code
// is built for baseline x86-64 (SSE), and on this project's Zen 5 every SSE instruction after that
// pays for the dirty state: a draft model's softmax over 32,256 logits took 4.8 ms instead of
// 0.1 ms after a Q4_0 pass. Call after each llama_decode; a no-op off x86 and without AVX.
inline void clear_upper_state() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    static const bool has_avx = __builtin_cpu_supports("avx");
    if (has_avx) {
        __asm__ volatile("vzeroupper" ::: "memory");
    }
#endif
}

} // namespace editspec
