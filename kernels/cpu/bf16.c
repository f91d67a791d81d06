// kernels/cpu/bf16.c — fp32 -> bf16 arrays (the operands of the bf16 GEMMs, kernels/cpu/gemm.h).
#include "kernels/cpu/bf16.h"

#include <omp.h>

#include "kernels/cpu/simd.h"

void bf16_from_floats(uint16_t *dst, const float *src, size_t n) {
    if (n < 65536) { bf16_from_floats_row(dst, src, n); return; }
    #pragma omp parallel
    {
        const size_t t = (size_t)omp_get_thread_num(), T = (size_t)omp_get_num_threads();
        const size_t chunk = (n / T + VL - 1) / VL * VL;
        const size_t lo = t * chunk < n ? t * chunk : n, hi = lo + chunk < n ? lo + chunk : n;
        bf16_from_floats_row(dst + lo, src + lo, hi - lo);
    }
}
