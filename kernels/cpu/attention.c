// kernels/cpu/attention.c — causal multi-head self-attention with attention dropout.
//
// Parallel over (b,h); each (b,h) owns its att / scratch plane and its hs-wide column
// slices of out and dqkv, so no two threads write one element and the result does not
// depend on the thread count. Work is O(T^2 hs) per (b,h) and only the causal triangle is
// computed. Small tiles live on the stack; each thread's (T, hs) copies (below) and, in the
// backward with dropout, a byte per element of its plane's mask (hashed once there instead of
// twice) live in the caller's work memory (attention_work_bytes), so a training step allocates
// nothing. Without work memory a thread allocates its own, and without that it reads in place
// and hashes again.
//
// Three register-blocked kernels on short vectors (kernels/cpu/simd.h) do all the
// products, each on up to ROWS rows at a time (8 with AVX-512's 32 registers, else 4):
//   scores : S[t][j] = a[t] . b[j] over a key chunk, with b transposed into a stack tile
//            (q k^T in the forward, dout v^T in the backward);
//   rowmix : Y[t] (+)= sum_j W[t][j] X[j]   (att v, dS k);
//   colmix : Y[j] += sum_t W[t][j] X[t]     (drop(att)^T dout, dS^T q).
// rowmix and colmix stream the rows of X once per row block: X is first copied into a
// per-thread contiguous (T, hs) tile, since its rows in qkv lie 3C floats apart and a page
// apart at C >= 342, where neither the prefetcher nor the L1 TLB follows them (25% of the
// backward at T 256, hs 64). The copy changes no arithmetic: the results are the same bits.
// Short rows (hs or T floats) are zeroed and copied by inline loops: GCC would otherwise turn those
// loops into memset / memcpy calls, tens of thousands per step, whose call costs more than the row.
#pragma GCC optimize("fp-contract=fast", "no-tree-loop-distribute-patterns")
#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/attention_rows.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/simd.h"   // and <immintrin.h> with AVX (transpose8x8)
#include "kernels/dropout_rng.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

// Rows per block and vectors per column chunk in rowmix/colmix: ROWS x NV accumulators (and
// scores' ROWS x 2) stay in registers, 16 of AVX-512's 32 or 8 of AVX2's 16.
#if VL == 16
#define ROWS 8
#else
#define ROWS 4
#endif
#define NV 2
// f(r, ...) with the row count r of a block (1..ROWS) as a compile-time constant, so each count
// gets its own copy of the always-inlined kernel with its accumulators in registers.
#define CASE_ROWS(r, f, ...) case r: f(r, __VA_ARGS__); break;
#if ROWS == 8
#define BY_ROWS(R, f, ...) switch (R) { CASE_ROWS(8, f, __VA_ARGS__) CASE_ROWS(7, f, __VA_ARGS__) \
    CASE_ROWS(6, f, __VA_ARGS__) CASE_ROWS(5, f, __VA_ARGS__) CASE_ROWS(4, f, __VA_ARGS__) \
    CASE_ROWS(3, f, __VA_ARGS__) CASE_ROWS(2, f, __VA_ARGS__) default: f(1, __VA_ARGS__); }
#else
#define BY_ROWS(R, f, ...) switch (R) { CASE_ROWS(4, f, __VA_ARGS__) CASE_ROWS(3, f, __VA_ARGS__) \
    CASE_ROWS(2, f, __VA_ARGS__) default: f(1, __VA_ARGS__); }
#endif
// Floats of the transposed key tile (hs x KC) on the stack.
#define KT_FLOATS 8192
// attention_forward_cached runs serially up to this many score multiply-adds.
#define CACHED_SERIAL_WORK (1L << 16)


// ---------------------------------------------------------------- scores
// S[r*lds + j] = scale * sum_i A[r*lda + i] * kT[i*ldk + j], r < R, j < nk. kT is (hs, ldk).
ALWAYS_INLINE void scores_r(int R, float *S, long lds, const float *A, long lda, const float *kT,
                            int ldk, int nk, int hs, float scale) {
    int j = 0;
    for (; j + 2 * VL <= nk; j += 2 * VL) {
        VF acc[ROWS][2];
        for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = vset1(0.0f);
        for (int i = 0; i < hs; i++) {
            const VF k0 = vload(kT + (long)i * ldk + j), k1 = vload(kT + (long)i * ldk + j + VL);
            for (int r = 0; r < R; r++) {
                const float a = A[r * lda + i];
                acc[r][0] += a * k0;
                acc[r][1] += a * k1;
            }
        }
        for (int r = 0; r < R; r++) {
            vstore(S + r * lds + j, acc[r][0] * scale);
            vstore(S + r * lds + j + VL, acc[r][1] * scale);
        }
    }
    for (; j < nk; j += VL) {   // last partial group: compute VL lanes, store the valid ones
        const int w = nk - j < VL ? nk - j : VL;
        VF acc[ROWS];
        for (int r = 0; r < R; r++) acc[r] = vset1(0.0f);
        for (int i = 0; i < hs; i++) {
            const VF k0 = vload(kT + (long)i * ldk + j);   // kT rows are padded to ldk >= j + VL
            for (int r = 0; r < R; r++) acc[r] += A[r * lda + i] * k0;
        }
        for (int r = 0; r < R; r++) vstore_n(S + r * lds + j, acc[r] * scale, w);
    }
}
static void scores(int R, float *S, long lds, const float *A, long lda, const float *kT, int ldk,
                   int nk, int hs, float scale) {
    BY_ROWS(R, scores_r, S, lds, A, lda, kT, ldk, nk, hs, scale)
}

// dst[i*ldd + j] = src[j*lds + i] for j < nj, i < hs: the keys' (nj, hs) rows as the (hs, nj) tile
// the score kernel reads. 8x8 blocks in registers with AVX (whole rows read, whole rows written:
// a scalar copy writes a float to each of hs cache lines per key and took as long as the scores
// themselves at T 64); a plain copy elsewhere and for the edges. A copy: the same bits either way.
#if defined(__AVX__)
static inline void transpose8x8(float *dst, long ldd, const float *src, long lds) {
    const __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + lds),
                 r2 = _mm256_loadu_ps(src + 2 * lds), r3 = _mm256_loadu_ps(src + 3 * lds),
                 r4 = _mm256_loadu_ps(src + 4 * lds), r5 = _mm256_loadu_ps(src + 5 * lds),
                 r6 = _mm256_loadu_ps(src + 6 * lds), r7 = _mm256_loadu_ps(src + 7 * lds);
    // t: pairs of rows interleaved; u: columns c | c + 4 of four rows; then the two halves joined.
    const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1),
                 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3),
                 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
                 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
                 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
                 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
                 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps(dst, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(dst + ldd, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(dst + 2 * ldd, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(dst + 3 * ldd, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(dst + 4 * ldd, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(dst + 5 * ldd, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(dst + 6 * ldd, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(dst + 7 * ldd, _mm256_permute2f128_ps(u3, u7, 0x31));
}
#define TB 8
#else
#define TB 0
#endif
static void transpose_tile(float *dst, long ldd, const float *src, long lds, int nj, int hs) {
    int j8 = 0, i8 = 0;
#if TB
    j8 = nj / TB * TB;
    i8 = hs / TB * TB;
    for (int j = 0; j < j8; j += TB)
        for (int i = 0; i < i8; i += TB) transpose8x8(dst + (long)i * ldd + j, ldd, src + (long)j * lds + i, lds);
#endif
    for (int i = 0; i < hs; i++) {   // the edges: columns i8.. of every key, and keys j8.. of the rest
        const int jstart = i < i8 ? j8 : 0;
        for (int j = jstart; j < nj; j++) dst[(long)i * ldd + j] = src[(long)j * lds + i];
    }
}

// S rows [0,Tn) x keys [0,L), L = p0 + Tn: row t is the query at position p0 + t and sees keys
// [0, p0 + t] (the causal triangle, and a few entries past it, up to the last row of its ROWS-row
// block) = scale * A B^T, A (Tn, hs) and B (L, hs) with row strides lda, ldb; S has row stride L.
// p0 = 0 is the square (T, T) case of the training kernels; p0 > 0, new queries over a key/value
// cache. B is transposed chunk by chunk into a stack tile so the inner loop runs over keys.
static void scores_causal(float *S, int p0, int Tn, const float *A, long lda, const float *Bm, long ldb,
                          int hs, float scale) {
    const int L = p0 + Tn;
    int kc = KT_FLOATS / (hs > 0 ? hs : 1);
    kc = kc / (2 * VL) * (2 * VL);
    if (kc < 2 * VL) kc = 2 * VL;   // hs > KT_FLOATS / 32: bigger tile (still only 4 KiB x hs/128)
    // A short plane gets a tile just as wide as its keys (rounded up to VL for the partial group),
    // so the tile's rows lie close together.
    const int ldk = L < kc ? (L + VL - 1) / VL * VL : kc;
    float kT[hs * ldk > KT_FLOATS ? hs * ldk : KT_FLOATS];
    for (int j0 = 0; j0 < L; j0 += kc) {
        const int j1 = j0 + kc < L ? j0 + kc : L;
        transpose_tile(kT, ldk, Bm + (long)j0 * ldb, ldb, j1 - j0, hs);
        for (int i = 0; i < hs; i++)   // zero padding read by the partial key group
            for (int j = j1 - j0; j < ldk && j < j1 - j0 + VL; j++) kT[(long)i * ldk + j] = 0.0f;
        // Rows t with p0 + t >= j0 see keys [j0, min(j1, p0 + t + 1)); a ROWS-row block computes up to
        // its last row.
        const int first = j0 > p0 ? (j0 - p0) / ROWS * ROWS : 0;
        for (int t0 = first; t0 < Tn; t0 += ROWS) {
            const int R = Tn - t0 < ROWS ? Tn - t0 : ROWS;
            const int jend = p0 + t0 + R < j1 ? p0 + t0 + R : j1;
            if (jend <= j0) continue;
            scores(R, S + (long)t0 * L + j0, L, A + (long)t0 * lda, lda, kT, ldk, jend - j0, hs, scale);
        }
    }
}

// s[j] = scale * q . K[j] for keys j < n, K rows ldk apart: ONE query row (a token of sampling),
// where transposing the keys into a tile would cost as much as the products. Four keys at a time.
static void scores_row(float *s, const float *q, const float *K, long ldk, int n, int hs, float scale) {
    int j = 0;
    for (; j + 4 <= n; j += 4) {
        const float *k0 = K + (long)j * ldk, *k1 = k0 + ldk, *k2 = k1 + ldk, *k3 = k2 + ldk;
        VF a0 = vset1(0.0f), a1 = a0, a2 = a0, a3 = a0;
        int i = 0;
        for (; i + VL <= hs; i += VL) {
            const VF x = vload(q + i);
            a0 += x * vload(k0 + i);
            a1 += x * vload(k1 + i);
            a2 += x * vload(k2 + i);
            a3 += x * vload(k3 + i);
        }
        float s0 = vsum(a0), s1 = vsum(a1), s2 = vsum(a2), s3 = vsum(a3);
        for (; i < hs; i++) {
            s0 += q[i] * k0[i];
            s1 += q[i] * k1[i];
            s2 += q[i] * k2[i];
            s3 += q[i] * k3[i];
        }
        s[j] = s0 * scale;
        s[j + 1] = s1 * scale;
        s[j + 2] = s2 * scale;
        s[j + 3] = s3 * scale;
    }
    for (; j < n; j++) {
        const float *kj = K + (long)j * ldk;
        VF a = vset1(0.0f);
        int i = 0;
        for (; i + VL <= hs; i += VL) a += vload(q + i) * vload(kj + i);
        float t = vsum(a);
        for (; i < hs; i++) t += q[i] * kj[i];
        s[j] = t * scale;
    }
}

// ---------------------------------------------------------------- rowmix
// Y[r*ldy + c] (= or +=) sum_{j<n} W[r*ldw + j] X[j*ldx + c], r < R, c < hs.
ALWAYS_INLINE void rowmix_chunk(int R, int nv, float *Y, long ldy, const float *W, long ldw,
                                const float *X, long ldx, int n, int acc_out) {
    VF acc[ROWS][NV];
    for (int r = 0; r < R; r++)
        for (int v = 0; v < nv; v++) acc[r][v] = vset1(0.0f);
    for (int j = 0; j < n; j++) {
        VF x[NV];
        for (int v = 0; v < nv; v++) x[v] = vload(X + (long)j * ldx + v * VL);
        for (int r = 0; r < R; r++) {
            const float w = W[r * ldw + j];
            for (int v = 0; v < nv; v++) acc[r][v] += w * x[v];
        }
    }
    for (int r = 0; r < R; r++)
        for (int v = 0; v < nv; v++) {
            float *y = Y + r * ldy + v * VL;
            vstore(y, acc_out ? vload(y) + acc[r][v] : acc[r][v]);
        }
}
ALWAYS_INLINE void rowmix_r(int R, float *Y, long ldy, const float *W, long ldw, const float *X,
                            long ldx, int n, int hs, int acc_out) {
    int c = 0;
    for (; c + NV * VL <= hs; c += NV * VL) rowmix_chunk(R, NV, Y + c, ldy, W, ldw, X + c, ldx, n, acc_out);
    for (; c + VL <= hs; c += VL) rowmix_chunk(R, 1, Y + c, ldy, W, ldw, X + c, ldx, n, acc_out);
    for (; c < hs; c++)
        for (int r = 0; r < R; r++) {
            float s = 0.0f;
            for (int j = 0; j < n; j++) s += W[r * ldw + j] * X[(long)j * ldx + c];
            Y[r * ldy + c] = acc_out ? Y[r * ldy + c] + s : s;
        }
}
static void rowmix(int R, float *Y, long ldy, const float *W, long ldw, const float *X, long ldx,
                   int n, int hs, int acc_out) {
    BY_ROWS(R, rowmix_r, Y, ldy, W, ldw, X, ldx, n, hs, acc_out)
}

// ---------------------------------------------------------------- colmix
// Y[(j0+r)*ldy + c] += sum_{t in [j0, T)} W[t*ldw + j0+r] X[t*ldx + c], r < R, c < hs.
// W must be 0 above the diagonal within the block (t < j0 + r).
ALWAYS_INLINE void colmix_chunk(int R, int nv, float *Y, long ldy, const float *W, long ldw, const float *X,
                                long ldx, int j0, int T) {
    VF acc[ROWS][NV];
    for (int r = 0; r < R; r++)
        for (int v = 0; v < nv; v++) acc[r][v] = vset1(0.0f);
    for (int t = j0; t < T; t++) {
        VF x[NV];
        for (int v = 0; v < nv; v++) x[v] = vload(X + (long)t * ldx + v * VL);
        for (int r = 0; r < R; r++) {
            const float w = W[(long)t * ldw + j0 + r];
            for (int v = 0; v < nv; v++) acc[r][v] += w * x[v];
        }
    }
    for (int r = 0; r < R; r++)
        for (int v = 0; v < nv; v++) {
            float *y = Y + (long)(j0 + r) * ldy + v * VL;
            vstore(y, vload(y) + acc[r][v]);
        }
}
ALWAYS_INLINE void colmix_r(int R, float *Y, long ldy, const float *W, long ldw, const float *X, long ldx,
                            int j0, int T, int hs) {
    int c = 0;
    for (; c + NV * VL <= hs; c += NV * VL) colmix_chunk(R, NV, Y + c, ldy, W, ldw, X + c, ldx, j0, T);
    for (; c + VL <= hs; c += VL) colmix_chunk(R, 1, Y + c, ldy, W, ldw, X + c, ldx, j0, T);
    for (; c < hs; c++)
        for (int r = 0; r < R; r++) {
            float s = 0.0f;
            for (int t = j0; t < T; t++) s += W[(long)t * ldw + j0 + r] * X[(long)t * ldx + c];
            Y[(long)(j0 + r) * ldy + c] += s;
        }
}
static void colmix(int R, float *Y, long ldy, const float *W, long ldw, const float *X, long ldx, int j0, int T,
                   int hs) {
    BY_ROWS(R, colmix_r, Y, ldy, W, ldw, X, ldx, j0, T, hs)
}


// ---------------------------------------------------------------- per-thread work memory
// One thread's part: the (T, hs) copies of q, k and dout (the forward's first one holds v), then
// a byte per element of a (T, T) plane's dropout mask; a multiple of 64 bytes.
static size_t thread_work_bytes(int T, int hs) {
    const size_t b = 3 * (size_t)T * hs * sizeof(float) + (size_t)T * T;
    return (b + 63) / 64 * 64;
}
size_t attention_work_bytes(int T, int C, int NH) {
    return (size_t)omp_get_max_threads() * thread_work_bytes(T, C / NH);
}
// This thread's part of work (sized for `threads` threads), else memory of its own (*owned, for
// the caller to free; NULL when even that fails).
static char *thread_work(void *work, int threads, size_t bytes, char **owned) {
    const int tid = omp_get_thread_num();
    *owned = NULL;
    if (work && tid < threads) return (char *)work + (size_t)tid * bytes;
    return *owned = malloc(bytes);
}

// ---------------------------------------------------------------- contiguous tiles
// X rows ld floats apart -> tile (T, hs), rows hs apart. tile NULL (no memory): X as it is.
static const float *tile_rows(float *tile, const float *x, long ld, int T, int hs, long *ld_out) {
    if (!tile) {
        *ld_out = ld;
        return x;
    }
    for (int t = 0; t < T; t++) vcopy_n(tile + (long)t * hs, x + (long)t * ld, hs);
    *ld_out = hs;
    return tile;
}

// ---------------------------------------------------------------- forward
// qkv (B,T,3C) -> att (B,NH,T,T) causal softmax (zeros above the diagonal), out (B,T,C) =
// dropout(att) @ v with heads concatenated.
void attention_forward(float *out, float *att, const float *qkv, int B, int T, int C, int NH,
                       float attn_p, DropoutKey drop) {
    attention_forward_lp(out, att, qkv, B, T, C, NH, attn_p, drop, LP_ROUND_NONE, NULL);
}

void attention_forward_lp(float *out, float *att, const float *qkv, int B, int T, int C, int NH,
                          float attn_p, DropoutKey drop, int lp, void *work) {
    const int hs = C / NH, threads = omp_get_max_threads();
    const size_t work_bytes = thread_work_bytes(T, hs);
    const long C3 = 3L * C;
    const float scale = 1.0f / sqrtf((float)hs);
    const int use_drop = attn_p > 0.0f;
    const uint32_t thr = dropout_threshold(attn_p);
    const float keep_scale = use_drop ? 1.0f / (1.0f - attn_p) : 1.0f;
    const uint64_t key = drop.key;

    #pragma omp parallel
    {
    char *owned;
    float *tile = (float *)thread_work(work, threads, work_bytes, &owned);   // v of the current (b,h); NULL: in place
    #pragma omp for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const float *q = qkv + (long)b * T * C3 + (long)h * hs, *k = q + C;
            long ldv;
            const float *v = tile_rows(tile, q + 2L * C, C3, T, hs, &ldv);
            float *att_bh = att + ((long)b * NH + h) * T * T;
            const uint64_t idx_bh = dropout_global_index(drop, b, (int64_t)NH * T * T, (int64_t)h * T * T);
            // Scores into att, then softmax row by row (zeros above the diagonal).
            scores_causal(att_bh, 0, T, q, C3, k, C3, hs, scale);
            for (int t = 0; t < T; t++) softmax_row(att_bh + (long)t * T, t + 1, T);
            // out rows = drop(att rows) @ v; a ROWS-row block uses keys [0, t0 + R).
            float pd[ROWS * T];
            for (int t0 = 0; t0 < T; t0 += ROWS) {
                const int R = T - t0 < ROWS ? T - t0 : ROWS, n = t0 + R;
                const float *W = att_bh + (long)t0 * T;
                long ldw = T;
                if (use_drop || lp) {   // the rows of drop(att) as the product's operand
                    for (int r = 0; r < R; r++) {
                        float *p = pd + (long)r * n;
                        if (use_drop) {
                            drop_row(p, n, key, idx_bh + (uint64_t)(t0 + r) * T, thr, keep_scale);
                            for (int j = 0; j < n; j++) p[j] *= W[(long)r * T + j];
                        } else {
                            for (int j = 0; j < n; j++) p[j] = W[(long)r * T + j];
                        }
                        if (lp)
                            for (int j = 0; j < n; j++) p[j] = lp_round(p[j], lp);
                    }
                    W = pd;
                    ldw = n;
                }
                rowmix(R, out + ((long)b * T + t0) * C + (long)h * hs, C, W, ldw, v, ldv, n, hs, 0);
            }
        }
    }
    free(owned);
    }
}

// ---------------------------------------------------------------- forward over a key/value cache
// The keys and values of the Tn new positions p0 .. p0+Tn-1 go into the cache, then the last Tq of
// them attend to every cached position up to their own (ops.h). The same kernels as
// attention_forward, with the keys and values read from the cache: for p0 = 0 and Tq = Tn the very
// same operations.

// One (b,h) plane: the Tq queries at positions p0 .. p0+Tq-1, q (Tq, hs) stride 3C, over the keys
// and values 0 .. p0+Tq-1, k and v (p0+Tq, hs) stride C; att_bh (Tq, p0+Tq).
static void cached_plane(float *out, float *att_bh, const float *q, const float *k, const float *v, int p0, int Tq,
                         int C, int hs, float scale) {
    const int L = p0 + Tq;
    if (Tq == 1)   // one query (p0 = 0 too: a single score, whose softmax is exactly 1 either way)
        scores_row(att_bh, q, k, C, L, hs, scale);
    else
        scores_causal(att_bh, p0, Tq, q, 3L * C, k, C, hs, scale);
    for (int t = 0; t < Tq; t++) softmax_row(att_bh + (long)t * L, p0 + t + 1, L);
    for (int t0 = 0; t0 < Tq; t0 += ROWS) {   // a ROWS-row block uses keys [0, p0 + t0 + R)
        const int R = Tq - t0 < ROWS ? Tq - t0 : ROWS;
        rowmix(R, out + (long)t0 * C, C, att_bh + (long)t0 * L, L, v, C, p0 + t0 + R, hs, 0);
    }
}

void attention_forward_cached(float *out, float *att, float *kcache, float *vcache, const float *qkv, int B,
                              int p0, int Tn, int Tq, int T_max, int C, int NH) {
    const int hs = C / NH, L = p0 + Tn, q0 = Tn - Tq;   // q0: the first new row that attends
    const long C3 = 3L * C;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tn; t++) {
            const float *src = qkv + ((long)b * Tn + t) * C3;
            const long dst = ((long)b * T_max + p0 + t) * C;
            memcpy(kcache + dst, src + C, (size_t)C * sizeof(float));
            memcpy(vcache + dst, src + 2L * C, (size_t)C * sizeof(float));
        }
#define CACHED_PLANE(b, h) cached_plane(out + (long)(b) * Tq * C + (long)(h) * hs, \
        att + ((long)(b) * NH + (h)) * Tq * L, qkv + ((long)(b) * Tn + q0) * C3 + (long)(h) * hs, \
        kcache + (long)(b) * T_max * C + (long)(h) * hs, vcache + (long)(b) * T_max * C + (long)(h) * hs, \
        p0 + q0, Tq, C, hs, scale)
    // One new row (each step of sampling) is too little work for a thread team, whose start
    // costs as much as the row (libgomp starts one even under a false if clause).
    if ((long)B * NH * Tq * L * hs <= CACHED_SERIAL_WORK) {
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++) CACHED_PLANE(b, h);
        return;
    }
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) CACHED_PLANE(b, h);
#undef CACHED_PLANE
}

// ---------------------------------------------------------------- backward
// dqkv (B,T,3C) = gradient given dout (B,T,C) (overwritten), the saved att and qkv; the
// dropout mask is recomputed from key. scratch (B,NH,T,T) holds dP (the gradient of
// drop(att)), then dS (the gradient of the scaled scores) in its lower triangle.
void attention_backward(float *dqkv, float *scratch, const float *dout, const float *qkv,
                        const float *att, int B, int T, int C, int NH, float attn_p,
                        DropoutKey drop) {
    attention_backward_lp(dqkv, scratch, dout, qkv, att, B, T, C, NH, attn_p, drop, LP_ROUND_NONE, NULL);
}

void attention_backward_lp(float *dqkv, float *scratch, const float *dout, const float *qkv,
                           const float *att, int B, int T, int C, int NH, float attn_p,
                           DropoutKey drop, int lp, void *work) {
    const int hs = C / NH, threads = omp_get_max_threads();
    const size_t work_bytes = thread_work_bytes(T, hs);
    const long C3 = 3L * C;
    const float scale = 1.0f / sqrtf((float)hs);
    const int use_drop = attn_p > 0.0f;
    const uint32_t thr = dropout_threshold(attn_p);
    const float keep_scale = use_drop ? 1.0f / (1.0f - attn_p) : 1.0f;
    const uint64_t key = drop.key;

    #pragma omp parallel
    {
    char *owned, *w = thread_work(work, threads, work_bytes, &owned);
    float *tiles = (float *)w;                                                   // q, k, dout of the current (b,h)
    uint8_t *kept = use_drop && w ? (uint8_t *)(w + 3 * (size_t)T * hs * sizeof(float)) : NULL;   // its mask
    #pragma omp for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const float *qkv_bh = qkv + (long)b * T * C3 + (long)h * hs, *v = qkv_bh + 2L * C;
            long ldq, ldk, ldy;
            const float *q = tile_rows(tiles, qkv_bh, C3, T, hs, &ldq);
            const float *k = tile_rows(tiles ? tiles + (long)T * hs : NULL, qkv_bh + C, C3, T, hs, &ldk);
            const float *dy = tile_rows(tiles ? tiles + 2L * T * hs : NULL, dout + (long)b * T * C + (long)h * hs, C,
                                        T, hs, &ldy);
            float *dq = dqkv + (long)b * T * C3 + (long)h * hs, *dk = dq + C, *dv = dq + 2L * C;
            const float *att_bh = att + ((long)b * NH + h) * T * T;
            float *ds = scratch + ((long)b * NH + h) * T * T;
            const uint64_t idx_bh = dropout_global_index(drop, b, (int64_t)NH * T * T, (int64_t)h * T * T);
            // dqkv is overwritten: this head's dq, dk, dv start at 0 here (in this thread's cache)
            // and the products below add to them
            for (int t = 0; t < T; t++)
                for (int i = 0; i < hs; i++) dq[(long)t * C3 + i] = dk[(long)t * C3 + i] = dv[(long)t * C3 + i] = 0.0f;

            // dv[j] += sum_t drop(att)[t][j] dout[t]. With dropout (or low precision) drop(att) is
            // first written, as the forward used it (rounded in low precision), into this plane's
            // scratch, free until dS below: the masks are hashed a row at a time (vectorised),
            // not once per product term.
            const float *pw = att_bh;
            if (use_drop || lp) {
                for (int t = 0; t < T; t++) {
                    float *row = ds + (long)t * T;
                    const float *a = att_bh + (long)t * T;
                    if (use_drop) {
                        drop_row(row, t + 1, key, idx_bh + (uint64_t)t * T, thr, keep_scale);
                        if (kept)
                            for (int j = 0; j <= t; j++) kept[(long)t * T + j] = row[j] != 0.0f;
                        for (int j = 0; j <= t; j++) row[j] *= a[j];
                    } else {
                        for (int j = 0; j <= t; j++) row[j] = a[j];
                    }
                    if (lp)
                        for (int j = 0; j <= t; j++) row[j] = lp_round(row[j], lp);
                    for (int j = t + 1; j < T; j++) row[j] = 0.0f;
                }
                pw = ds;
            }
            for (int j0 = 0; j0 < T; j0 += ROWS) {
                const int R = T - j0 < ROWS ? T - j0 : ROWS;
                colmix(R, dv, C3, pw, T, dy, ldy, j0, T, hs);
            }
            // dPd = dout v^T (lower triangle), then per row: dP = dPd * mask;
            // dS = att * (dP - sum(att * dP)) * scale; zero the rest of the row's ROWS-block.
            scores_causal(ds, 0, T, dy, ldy, v, C3, hs, 1.0f);
            float m[T];
            for (int t = 0; t < T; t++) {
                float *row = ds + (long)t * T;
                const float *a = att_bh + (long)t * T;
                const int n = t + 1;
                if (use_drop) {
                    if (kept)
                        for (int j = 0; j < n; j++) m[j] = kept[(long)t * T + j] ? keep_scale : 0.0f;
                    else
                        drop_row(m, n, key, idx_bh + (uint64_t)t * T, thr, keep_scale);
                    for (int j = 0; j < n; j++) row[j] *= m[j];
                }
                int j = 0;
                VF vs = vset1(0.0f);
                for (; j + VL <= n; j += VL) vs += vload(a + j) * vload(row + j);
                float s = vsum(vs);
                for (; j < n; j++) s += a[j] * row[j];
                const VF vsv = vset1(s);
                for (j = 0; j + VL <= n; j += VL) vstore(row + j, vload(a + j) * (vload(row + j) - vsv) * scale);
                for (; j < n; j++) row[j] = a[j] * (row[j] - s) * scale;
                if (lp)   // dS is the operand of the two products below
                    for (j = 0; j < n; j++) row[j] = lp_round(row[j], lp);
                const int end = (t / ROWS + 1) * ROWS < T ? (t / ROWS + 1) * ROWS : T;
                for (j = n; j < end; j++) row[j] = 0.0f;
            }
            // dq[t] += sum_j dS[t][j] k[j];  dk[j] += sum_t dS[t][j] q[t].
            for (int t0 = 0; t0 < T; t0 += ROWS) {
                const int R = T - t0 < ROWS ? T - t0 : ROWS;
                rowmix(R, dq + (long)t0 * C3, C3, ds + (long)t0 * T, T, k, ldk, t0 + R, hs, 1);
                colmix(R, dk, C3, ds, T, q, ldq, t0, T, hs);
            }
        }
    }
    free(owned);
    }
}
