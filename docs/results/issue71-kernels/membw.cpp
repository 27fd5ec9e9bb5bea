// membw: how fast two threads read ds13's F16 KV cache after 3,072 cells (24 layers, K and V of 128 x 16
// heads x 3,072 cells, a cell's heads side by side: 4 KB a cell) in the orders an attention kernel can
// take, each 32 bytes of F16 converted and added (no other arithmetic). Build and run:
//   g++ -O2 -march=native -o membw membw.cpp -lpthread && ./membw
// Modes (main runs 0, 2, 8, 4, 12 twice; edit its list for the others): 0 heads split between the threads, per block of 32 cells head by
// head (the kernel before the twentieth session); 2 a flat stream, each thread half of each layer's
// bytes; 3 as 0 with the next block's rows prefetched; 4 cells split between the threads, per block head
// by head; 5 as 4 with a prefetch; 6, 7 as 0 with the next blocks prefetched at the block's start; 8
// cells split, cell by cell and each cell's heads in turn (the twentieth session's order); 9 as 4 with
// the next block prefetched in address order; 10 as 0 with that; 12, 13, 14 cells split, groups of 4,
// 8, 2 cells with the heads inner. Twentieth session: 0 17.3-18.8 ms, 2 8.0-10.3, 8 8.1-8.8 (13.7 in a
// slow spell), 4 15.9-19.8, 12-14 13.6-18.5.
#include <immintrin.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
#include <algorithm>
#ifndef PFH
#define PFH 3
#endif
const int L = 24, H = 16, D = 128, C = 3072, B = 32;
const size_t row = (size_t) H*D*2; // 4 KB a cell
const size_t lay = row*C;
static char * buf;
static float sink[64];
// mode 0: per block, per head, cells (current); 1: per block, per cell, heads; 2: flat stream of the thread's half; 3: mode 0 + prefetch next block
static void work(int th, int mode, float * out) {
    __m512 acc = _mm512_setzero_ps();
    for (int l = 0; l < L; ++l) {
        for (int kv = 0; kv < 2; ++kv) {
            const char * base = buf + (size_t)(2*l + kv)*lay;
            if (mode == 2) {
                const size_t half = lay/2;
                const char * p = base + th*half;
                for (size_t o = 0; o < half; o += 64) acc = _mm512_add_ps(acc, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + o))));
                continue;
            }
            if (mode >= 12) { // cells split, groups of G cells, heads inner
                const int G = mode == 12 ? 4 : mode == 13 ? 8 : 2;
                for (int g = th*C/2; g < (th + 1)*C/2; g += G) for (int h = 0; h < H; ++h) for (int c = g; c < g + G; ++c) {
                    const char * p = base + c*row + h*D*2;
                    for (int o = 0; o < D*2; o += 64) acc = _mm512_add_ps(acc, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + o))));
                }
                continue;
            }
            if (mode == 8) { // cells split, cell-major: each thread one stream
                for (int c = th*C/2; c < (th + 1)*C/2; ++c) for (int h = 0; h < H; ++h) {
                    const char * p = base + c*row + h*D*2;
                    for (int o = 0; o < D*2; o += 64) acc = _mm512_add_ps(acc, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + o))));
                }
                continue;
            }
            if (mode == 9) { // cells split, head-major within a block, the next block prefetched in address order
                for (int b0 = th*C/2; b0 < (th + 1)*C/2; b0 += B) {
                    const char * nb = base + (size_t)(b0 + B)*row; int pf = 0; const bool more = b0 + B < (th + 1)*C/2;
                    for (int h = 0; h < H; ++h) for (int c = b0; c < b0 + B; ++c) {
                        const char * p = base + c*row + h*D*2;
                        if (more) { for (int o = 0; o < 4; ++o) __builtin_prefetch(nb + (size_t)(pf++)*64, 0, PFH); }
                        for (int o = 0; o < D*2; o += 64) acc = _mm512_add_ps(acc, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + o))));
                    }
                }
                continue;
            }
            if (mode == 10) { // heads split (as now), the thread's half of the next block's rows prefetched in address order
                for (int b0 = 0; b0 < C; b0 += B) {
                    const bool more = b0 + B < C; int pf = 0;
                    for (int h = th*8; h < th*8 + 8; ++h) for (int c = b0; c < b0 + B; ++c) {
                        const char * p = base + c*row + h*D*2;
                        if (more) for (int o = 0; o < 4; ++o, ++pf) __builtin_prefetch(base + (size_t)(b0 + B + pf/32)*row + th*8*D*2 + (pf%32)*64, 0, PFH);
                        for (int o = 0; o < D*2; o += 64) acc = _mm512_add_ps(acc, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + o))));
                    }
                }
                continue;
            }
            if (mode == 4 || mode == 5) { // cells split: thread th takes cells [th*C/2, (th+1)*C/2), all heads
                for (int b0 = th*C/2; b0 < (th + 1)*C/2; b0 += B) {
                    for (int h = 0; h < H; ++h) for (int c = b0; c < b0 + B; ++c) {
                        const char * p = base + c*row + h*D*2;
                        if (mode == 5 && b0 + B < (th + 1)*C/2) for (int o = 0; o < D*2; o += 64) __builtin_prefetch(p + B*row + o, 0, 3);
                        for (int o = 0; o < D*2; o += 64) acc = _mm512_add_ps(acc, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + o))));
                    }
                }
                continue;
            }
            for (int b0 = 0; b0 < C; b0 += B) {
                if (mode == 6 && b0 + 2*B < C) { // the block after next, the thread's heads, at block start, into L2
                    for (int c = b0 + 2*B; c < b0 + 3*B; ++c) for (int o = 0; o < 8*D*2; o += 64) __builtin_prefetch(base + c*row + th*8*D*2 + o, 0, 1);
                }
                if (mode == 7 && b0 + B < C) { // the next block, the thread's heads, at block start
                    for (int c = b0 + B; c < b0 + 2*B; ++c) for (int o = 0; o < 8*D*2; o += 64) __builtin_prefetch(base + c*row + th*8*D*2 + o, 0, 3);
                }
                if (mode == 1) {
                    for (int c = b0; c < b0 + B; ++c) for (int h = th*8; h < th*8 + 8; ++h) {
                        const char * p = base + c*row + h*D*2;
                        for (int o = 0; o < D*2; o += 64) acc = _mm512_add_ps(acc, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + o))));
                    }
                } else {
                    for (int h = th*8; h < th*8 + 8; ++h) for (int c = b0; c < b0 + B; ++c) {
                        const char * p = base + c*row + h*D*2;
                        if (mode == 3 && b0 + B < C) for (int o = 0; o < D*2; o += 64) __builtin_prefetch(p + B*row + o, 0, mode == 3 ? 3 : 1);
                        for (int o = 0; o < D*2; o += 64) acc = _mm512_add_ps(acc, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + o))));
                    }
                }
            }
        }
    }
    _mm512_storeu_ps(out, acc);
}
int main(int argc, char ** argv) {
    size_t n = (size_t) 2*L*lay;
    buf = (char *) aligned_alloc(4096, n);
    for (size_t i = 0; i < n; i += 2) { uint16_t v = 0x3c00 + (i & 0xff); memcpy(buf + i, &v, 2); }
    // a 900 MB buffer to flush caches between reps
    for (int mode : {0, 2, 8, 4, 12, 0, 2, 8, 4, 12}) {
        std::vector<double> ts;
        for (int rep = 0; rep < 7; ++rep) {
            auto t0 = std::chrono::steady_clock::now();
            std::thread t1(work, 1, mode, sink + 16);
            work(0, mode, sink);
            t1.join();
            ts.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
        std::sort(ts.begin(), ts.end());
        printf("mode %d: median %.2f ms min %.2f (%.1f GB/s)\n", mode, ts[3], ts[0], n/ts[3]/1e6);
    }
}
