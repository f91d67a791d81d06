// kernels/cpu/bf16.h — bfloat16 (and float16 rounding) on the CPU. bf16: the upper 16 bits of an IEEE fp32, rounded to
// nearest even (torch's and CUDA's __float2bfloat16 rounding; inf and NaN are kept).
#ifndef MINGPT_CPU_BF16_H
#define MINGPT_CPU_BF16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/simd.h"

// fp32 -> bf16 bits, round to nearest even; inf/NaN pass through (a NaN stays a NaN).
static inline uint16_t bf16_from_float(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0x7f800000u) return (uint16_t)((u >> 16) | ((u & 0xffffu) ? 0x40u : 0u));
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float bf16_to_float(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

// x rounded to the nearest bf16, as an fp32.
static inline float bf16_round(float x) { return bf16_to_float(bf16_from_float(x)); }

// x rounded to the nearest IEEE half (fp16), as an fp32 (round to nearest even; overflow -> inf).
#if defined(__clang__) && __clang_major__ < 15
// clang 14 (the `make fuzz` build) has no _Float16 on x86; F16C's conversions round the same way
#include <immintrin.h>
static inline float fp16_round(float x) { return _cvtsh_ss(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT)); }
#else
static inline float fp16_round(float x) { return (float)(_Float16)x; }
#endif

// Rounding modes of the CPU ops' low-precision operands: none, bf16, fp16.
enum { LP_ROUND_NONE = 0, LP_ROUND_BF16 = 1, LP_ROUND_FP16 = 2 };
static inline float lp_round(float x, int mode) {
    return mode == LP_ROUND_BF16 ? bf16_round(x) : mode == LP_ROUND_FP16 ? fp16_round(x) : x;
}

// ---- VL lanes at a time, with bf16_from_float's integer arithmetic (the compiler vectorises it; no
// AVX512-BF16 instruction needed, so the same bits on every CPU).
typedef uint16_t VH __attribute__((vector_size(VL * 2)));
static inline VH bf16_from_vec(VF x) {
    VU u;
    memcpy(&u, &x, sizeof u);
    const VU special = (u & 0x7f800000u) == 0x7f800000u;   // all ones where inf/NaN
    const VU nan_bit = ((u & 0xffffu) != 0) & 0x40u;
    const VU rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    return __builtin_convertvector((special & ((u >> 16) | nan_bit)) | (~special & rounded), VH);
}
// dst (n,) = bf16 of src (n,) on the calling thread, inline for short rows (a head's hs values, a
// row of probabilities): whole vectors, then the last partial one masked where AVX-512 has masked
// 16-bit stores, else element by element.
static inline void bf16_from_floats_row(uint16_t *dst, const float *src, size_t n) {
    size_t i = 0;
    for (; i + VL <= n; i += VL) {
        const VH h = bf16_from_vec(vload(src + i));
        memcpy(dst + i, &h, sizeof h);
    }
    if (i == n) return;
#if VL == 16 && defined(__AVX512BW__) && defined(__AVX512VL__)
    const __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
    const VH h = bf16_from_vec((VF)_mm512_maskz_loadu_ps(k, src + i));
    _mm256_mask_storeu_epi16(dst + i, k, (__m256i)h);
#else
    for (; i < n; i++) dst[i] = bf16_from_float(src[i]);
#endif
}

// dst (n,) = bf16 of src (n,), OpenMP-parallel over large n; the same bits as bf16_from_float.
void bf16_from_floats(uint16_t *dst, const float *src, size_t n);

#endif
