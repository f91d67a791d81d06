// kernels/cpu/bf16.c — fp32 -> bf16 arrays (the operands of the bf16 GEMMs, kernels/cpu/gemm.h).
#include "kernels/cpu/bf16.h"

#include <omp.h>

#include "kernels/cpu/simd.h"

// VL lanes at a time with the scalar's integer arithmetic (the compiler vectorises it; no
// AVX512-BF16 instruction needed, so the same bits on every CPU).
static inline void convert_range(uint16_t *dst, const float *src, size_t lo, size_t hi) {
    size_t i = lo;
    for (; i + VL <= hi; i += VL) {
        VU u;
        memcpy(&u, src + i, sizeof u);
        const VU special = (u & 0x7f800000u) == 0x7f800000u;   // all ones where inf/NaN
        const VU nan_bit = ((u & 0xffffu) != 0) & 0x40u;
        const VU rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
        const VU r = (special & ((u >> 16) | nan_bit)) | (~special & rounded);
        for (int k = 0; k < VL; k++) dst[i + k] = (uint16_t)r[k];
    }
    for (; i < hi; i++) dst[i] = bf16_from_float(src[i]);
}

void bf16_from_floats_serial(uint16_t *dst, const float *src, size_t n) { convert_range(dst, src, 0, n); }

void bf16_from_floats(uint16_t *dst, const float *src, size_t n) {
    if (n < 65536) { convert_range(dst, src, 0, n); return; }
    #pragma omp parallel
    {
        const size_t t = (size_t)omp_get_thread_num(), T = (size_t)omp_get_num_threads();
        const size_t chunk = (n / T + VL - 1) / VL * VL;
        const size_t lo = t * chunk < n ? t * chunk : n, hi = lo + chunk < n ? lo + chunk : n;
        convert_range(dst, src, lo, hi);
    }
}
