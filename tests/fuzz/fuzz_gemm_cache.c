// tests/fuzz/fuzz_gemm_cache.c — libFuzzer target for the GEMM calibration cache's parser
// (cpu_gemm_cache_parse, kernels/cpu/gemm.h), the one reader of that file.
//
// Input: the file's bytes, for the fingerprint "fuzz". Checked: the result is -1 (with a reason)
// or a count within bounds, and every class it returns is one the dispatcher can use: transposes
// 0/1, sizes within their power-of-two class, a known implementation with a measured speed, finite
// non-negative GFLOP/s. A violated invariant aborts, which the fuzzer reports as a crash.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/gemm.h"

#define CHECK(cond) do { \
    if (!(cond)) { fprintf(stderr, "fuzz_gemm_cache: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); abort(); } \
} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    enum { MAX = 8 };
    GemmClass c[MAX];
    char why[64];
    const int n = cpu_gemm_cache_parse((const char *)data, size, "fuzz", c, MAX, why, sizeof why);
    if (n < 0) {
        CHECK(n == -1 && why[0] != 0);
        return 0;
    }
    CHECK(n <= MAX);
    for (int i = 0; i < n; i++) {
        CHECK((c[i].ta == 0 || c[i].ta == 1) && (c[i].tb == 0 || c[i].tb == 1) && (c[i].beta0 == 0 || c[i].beta0 == 1));
        CHECK(c[i].threads >= 1);
        CHECK(c[i].impl >= 0 && c[i].impl < GEMM_N_IMPL && c[i].gflops[c[i].impl] > 0);
        const int dims[3] = { c[i].m, c[i].n, c[i].k }, logs[3] = { c[i].m_log2, c[i].n_log2, c[i].k_log2 };
        for (int d = 0; d < 3; d++) CHECK(dims[d] >= 1 && logs[d] <= 31 && (double)dims[d] <= ldexp(1.0, logs[d]));
        for (int k = 0; k < GEMM_N_IMPL; k++) CHECK(isfinite(c[i].gflops[k]) && c[i].gflops[k] >= 0);
    }
    return 0;
}
