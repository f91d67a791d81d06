// kernels/cpu/simd.h — portable short vectors (GCC/Clang vector extensions) and a
// vectorised expf for the CPU kernels.
//
// VF is VL floats: 16 with AVX-512, else 8 (AVX2, NEON pairs ...). The compiler lowers the
// generic vector operations to whatever the target has, so the kernels build everywhere
// and use the widest registers -march=native offers. Loads and stores go through memcpy:
// no alignment is assumed. Where one AVX / AVX-512 instruction does exactly what the generic
// code means and the compiler does not find it (vmax / vmin, vstore_n's masked store, vsum's
// pairwise order), that intrinsic is used, with the generic code for other targets: the same
// results either way (tests/test_simd.c).
//
// vexp: e^x by range reduction x = n ln2 + r, |r| <= ln2/2, and Cephes' degree-6
// polynomial for e^r (relative error < 2e-7, i.e. ~1-2 ulp), scaled by 2^n built in the
// exponent bits. Inputs are clamped to [-87.3, 88.7], so the result is always finite and
// e^x for x < -87.3 is ~1e-38 rather than 0 (callers only use it where that is exact
// enough: softmax terms and sigmoid denominators). The scalar expf_fast is the same
// arithmetic, lane for lane, for loop tails.
#ifndef MINGPT_CPU_SIMD_H
#define MINGPT_CPU_SIMD_H

#include <stdint.h>
#include <string.h>

#if defined(__AVX512F__)
#define VL 16
#else
#define VL 8
#endif

typedef float VF __attribute__((vector_size(VL * 4)));
typedef uint32_t VU __attribute__((vector_size(VL * 4)));

static inline VF vload(const float *p) { VF v; memcpy(&v, p, sizeof v); return v; }
static inline void vstore(float *p, VF v) { memcpy(p, &v, sizeof v); }
static inline VF vset1(float x) { return (VF){0} + x; }
// dst[0, n) = src[0, n) (not overlapping) as whole vectors, then a scalar tail. For short rows
// (hs or T floats) in files built with no-tree-loop-distribute-patterns, where it stays an inline
// loop: a memcpy call costs more than such a row.
static inline void vcopy_n(float *dst, const float *src, int n) {
    int i = 0;
    for (; i + VL <= n; i += VL) vstore(dst + i, vload(src + i));
    for (; i < n; i++) dst[i] = src[i];
}
// The first n lanes of v (0 <= n <= VL) to p[0, n); nothing else is written. A masked store where
// the ISA has one (a copy through memory compiles to `rep movs`, slow at these lengths).
static inline void vstore_n(float *p, VF v, int n);
// Lane-wise select: m is a comparison result (all ones / all zeros per lane).
typedef int32_t VI __attribute__((vector_size(VL * 4)));
static inline VF vselect(VI m, VF a, VF b) { return (VF)(((VU)m & (VU)a) | (~(VU)m & (VU)b)); }
// vmax(a, b) = a > b ? a : b and vmin(a, b) = a < b ? a : b lane by lane: b when either is a NaN
// and for two zeros, which is exactly what x86's maxps / minps do (one instruction where the
// generic select takes four).
#if VL == 16 && defined(__AVX512F__)
#include <immintrin.h>
static inline VF vmax(VF a, VF b) { return (VF)_mm512_max_ps((__m512)a, (__m512)b); }
static inline VF vmin(VF a, VF b) { return (VF)_mm512_min_ps((__m512)a, (__m512)b); }
#elif VL == 8 && defined(__AVX__)
#include <immintrin.h>
static inline VF vmax(VF a, VF b) { return (VF)_mm256_max_ps((__m256)a, (__m256)b); }
static inline VF vmin(VF a, VF b) { return (VF)_mm256_min_ps((__m256)a, (__m256)b); }
#else
static inline VF vmax(VF a, VF b) { return vselect(a > b, a, b); }
static inline VF vmin(VF a, VF b) { return vselect(a < b, a, b); }
#endif
// The lanes' sum in a fixed pairwise order (deterministic): t[i] += t[i + w] for i < w, w = VL/2,
// ..., 1. With AVX the halves are added as vectors in that very order (the same bits).
static inline float vsum(VF v);
static inline float vhmax(VF v) {
    float t[VL];
    memcpy(t, &v, sizeof v);
    float m = t[0];
    for (int i = 1; i < VL; i++) m = t[i] > m ? t[i] : m;
    return m;
}

// Lane-wise IEEE square root (exact, like sqrtf).
#if VL == 16 && defined(__AVX512F__)
#include <immintrin.h>
static inline VF vsqrt(VF x) { return (VF)_mm512_sqrt_ps((__m512)x); }
#elif VL == 8 && defined(__AVX__)
#include <immintrin.h>
static inline VF vsqrt(VF x) { return (VF)_mm256_sqrt_ps((__m256)x); }
#else
static inline VF vsqrt(VF x) {
    float t[VL];
    memcpy(t, &x, sizeof x);
    for (int i = 0; i < VL; i++) t[i] = __builtin_sqrtf(t[i]);
    memcpy(&x, t, sizeof x);
    return x;
}
#endif

#if VL == 16 && defined(__AVX512F__)
static inline void vstore_n(float *p, VF v, int n) { _mm512_mask_storeu_ps(p, (__mmask16)((1u << n) - 1), (__m512)v); }
#elif VL == 8 && defined(__AVX2__)
static inline void vstore_n(float *p, VF v, int n) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    _mm256_maskstore_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane), (__m256)v);
}
#else
static inline void vstore_n(float *p, VF v, int n) {
    for (int i = 0; i < n; i++) p[i] = v[i];
}
#endif

#if VL == 16 && defined(__AVX512F__)
static inline float vsum(VF v) {
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd((__m512)v), 1));
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256((__m512)v), hi);
    const __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    const __m128 p = _mm_add_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_add_ss(p, _mm_movehdup_ps(p)));
}
#elif VL == 8 && defined(__AVX__)
static inline float vsum(VF v) {
    const __m128 q = _mm_add_ps(_mm256_castps256_ps128((__m256)v), _mm256_extractf128_ps((__m256)v, 1));
    const __m128 p = _mm_add_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_add_ss(p, _mm_movehdup_ps(p)));
}
#else
static inline float vsum(VF v) {
    float t[VL];
    memcpy(t, &v, sizeof v);
    for (int w = VL / 2; w >= 1; w /= 2)
        for (int i = 0; i < w; i++) t[i] += t[i + w];
    return t[0];
}
#endif

#define EXP_HI 88.7f
#define EXP_LO -87.3f
#define EXP_LOG2E 1.44269504088896341f
#define EXP_LN2_HI 0.693359375f
#define EXP_LN2_LO -2.12194440e-4f
#define EXP_SHIFTER 12582912.0f   // 1.5 * 2^23: adding it rounds to an integer in the low bits
#define EXP_P0 1.9875691500e-4f
#define EXP_P1 1.3981999507e-3f
#define EXP_P2 8.3334519073e-3f
#define EXP_P3 4.1665795894e-2f
#define EXP_P4 1.6666665459e-1f
#define EXP_P5 5.0000001201e-1f

static inline VF vexp(VF x) {
    x = vmin(vmax(x, vset1(EXP_LO)), vset1(EXP_HI));
    VF t = x * EXP_LOG2E + EXP_SHIFTER;
    VF n = t - EXP_SHIFTER;                       // round(x / ln2)
    VF r = x - n * EXP_LN2_HI;
    r = r - n * EXP_LN2_LO;
    VF p = vset1(EXP_P0);
    p = p * r + EXP_P1;
    p = p * r + EXP_P2;
    p = p * r + EXP_P3;
    p = p * r + EXP_P4;
    p = p * r + EXP_P5;
    VF r2 = r * r;
    p = p * r2 + r + 1.0f;
    VU ti;
    memcpy(&ti, &t, sizeof t);
    VU e = (ti - 0x4B400000u) << 23;              // n << 23 (bits of t minus bits of the shifter)
    VU pi;
    memcpy(&pi, &p, sizeof p);
    pi += e;
    memcpy(&p, &pi, sizeof p);
    return p;
}

static inline float expf_fast(float x) {
    x = x < EXP_LO ? EXP_LO : x;
    x = x > EXP_HI ? EXP_HI : x;
    float t = x * EXP_LOG2E + EXP_SHIFTER;
    float n = t - EXP_SHIFTER;
    float r = x - n * EXP_LN2_HI;
    r = r - n * EXP_LN2_LO;
    float p = EXP_P0;
    p = p * r + EXP_P1;
    p = p * r + EXP_P2;
    p = p * r + EXP_P3;
    p = p * r + EXP_P4;
    p = p * r + EXP_P5;
    p = p * (r * r) + r + 1.0f;
    uint32_t ti, pi;
    memcpy(&ti, &t, 4);
    memcpy(&pi, &p, 4);
    pi += (ti - 0x4B400000u) << 23;
    memcpy(&p, &pi, 4);
    return p;
}

#endif
