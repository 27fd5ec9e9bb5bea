#include <immintrin.h>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>
static double run(long iters) {
    __m512 a[12]; for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(1.0f + i * 1e-3f);
    const __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    for (long k = 0; k < iters; ++k) {
        #pragma GCC unroll 12
        for (int i = 0; i < 12; ++i) a[i] = _mm512_fmadd_ps(a[i], b, c);
    }
    float s = 0; for (int i = 0; i < 12; ++i) s += _mm512_reduce_add_ps(a[i]);
    return s;
}
int main(int argc, char **) {
    const long iters = 200000000;
    for (int nth = 1; nth <= 2; ++nth) {
        auto t0 = std::chrono::steady_clock::now();
        std::vector<std::thread> th; double sink[2];
        for (int t = 0; t < nth; ++t) th.emplace_back([&, t] { sink[t] = run(iters); });
        for (auto & x : th) x.join();
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        printf("%d threads: %.1f G zmm-FMA/s total (%.2f per thread), sink %g\n", nth, nth * iters * 12 / s / 1e9, iters * 12 / s / 1e9, sink[0]);
    }
}
