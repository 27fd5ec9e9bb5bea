// Issue 73, twenty-eighth session: the patched CUDA argmax kernel's reduction (ggml-cuda-batch-invariant.patch item 9),
// emulated on the host, against a running best. Rerun: g++ -O2 -o /tmp/sim item5-argmax-sim.cpp && /tmp/sim
// (printed 2026-11-30: "4000 rows, 0 differ"). The kernel itself runs in check-exact on a GPU.
// host simulation of the patched CUDA argmax kernel (block per row, warps of 32, xor butterflies, shared reduce)
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <climits>
#include <cmath>
#include <random>
#include <vector>
#include <algorithm>
static unsigned key_of(float v) { unsigned u; memcpy(&u, &v, 4); if ((u & 0x7fffffffu) > 0x7f800000u) return 0u; if ((u & 0x7fffffffu) == 0u) u = 0u; return (u & 0x80000000u) ? ~u : (u | 0x80000000u); }
static void keep(unsigned & mk, int & am, unsigned k, int c) { if (k > mk || (k == mk && k != 0u && c < am)) { mk = k; am = c; } }
static int kernel(const float * x, int n) {
    const int nt = std::min(1024, (n + 31) / 32 * 32), nw = nt / 32;
    std::vector<unsigned> mk(nt, 0u); std::vector<int> am(nt, INT_MAX);
    for (int t = 0; t < nt; t++) for (int c = t; c < n; c += nt) keep(mk[t], am[t], key_of(x[c]), c);
    auto butterfly = [&](int w0) { for (int off = 16; off > 0; off >>= 1) { std::vector<unsigned> k2(mk.begin()+w0, mk.begin()+w0+32); std::vector<int> a2(am.begin()+w0, am.begin()+w0+32);
        for (int l = 0; l < 32; l++) keep(mk[w0+l], am[w0+l], k2[l ^ off], a2[l ^ off]); } };
    for (int w = 0; w < nw; w++) butterfly(w * 32);
    if (nw > 1) { std::vector<unsigned> sk(nw); std::vector<int> sa(nw); for (int w = 0; w < nw; w++) sk[w] = mk[w*32], sa[w] = am[w*32];
        for (int l = 0; l < 32; l++) if (l < nw) mk[l] = sk[l], am[l] = sa[l];
        butterfly(0); }
    return am[0] == INT_MAX || key_of(x[0]) == 0u ? 0 : am[0];
}
static int running(const float * l, int n) { int b = 0; for (int i = 1; i < n; i++) if (l[i] > l[b]) b = i; return b; }
int main() {
    std::mt19937 rng(7); const float nan = NAN, inf = INFINITY; int bad = 0, rows = 0;
    for (int trial = 0; trial < 4000; trial++) {
        const int n = 1 + rng() % (trial % 5 == 0 ? 5000 : 100);
        std::vector<float> l(n); const int levels = 1 + rng() % 6;
        for (float & v : l) v = (float) (rng() % levels) - 2.0f;
        if (trial % 3 == 0) for (float & v : l) v *= 1e-40f; // denormals
        for (int k = rng() % 6; k > 0; k--) { const float sp[] = {nan, -inf, inf, -0.0f, 0.0f, 1e-40f, -1e-40f, 1.4e-45f}; l[rng() % n] = sp[rng() % 8]; }
        if (trial % 11 == 0) l[0] = nan;
        if (trial % 13 == 0) std::fill(l.begin(), l.end(), trial % 2 ? -inf : nan);
        rows++; if (kernel(l.data(), n) != running(l.data(), n)) { if (bad++ < 5) printf("trial %d n %d: kernel %d running %d\n", trial, n, kernel(l.data(), n), running(l.data(), n)); }
    }
    printf("%d rows, %d differ\n", rows, bad); return bad != 0;
}
