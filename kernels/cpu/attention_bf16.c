// kernels/cpu/attention_bf16.c — causal self-attention whose products are bf16 GEMMs on oneDNN
// (AMX / AVX512-BF16), batched over the (b,h) planes: the function attention_forward_lp /
// attention_backward_lp compute with LP_ROUND_BF16 (every product operand rounded to bf16,
// products accumulated in fp32), at GEMM speed instead of the fp32 kernels'.
//
// The T x T planes are cut into row blocks (causal_tb): the products of query block i read and
// write key columns [0, end of block i) only, so the tiles above the diagonal blocks are neither
// computed nor read (T 256: 10 of 16 tiles computed); within a diagonal block the causal half is
// computed and then masked (zeros in the probabilities). Each product is one batched GEMM per
// block. q, k, v (in one pass over qkv) and dout are first gathered head by head into contiguous
// bf16 planes (B*NH, T, hs); the products' fp32 results per head are scattered back to (B,T,C) /
// (B,T,3C) (dq, dk, dv in one pass).
// The softmax and the dropout's mask run row by row between the products: one pass per row in the
// forward (softmax, then drop(att) in bf16), one in the backward (drop(att) and dS from one mask).
// Short rows are zeroed and copied by inline loops, not memset / memcpy calls (see attention.c).
#pragma GCC optimize("fp-contract=fast", "no-tree-loop-distribute-patterns")
#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/attention_rows.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/simd.h"

size_t attention_bf16_scratch_bytes(int B, int T, int C, int NH) {
    const size_t BTC = (size_t)B * T * C, planes = (size_t)B * NH * T * T;
    return 4 * BTC * sizeof(uint16_t)    // q, k, v, dout in bf16, head-contiguous
         + 2 * planes * sizeof(uint16_t) // drop(att) and dS, in bf16
         + 3 * BTC * sizeof(float);      // per-head fp32 results (y; dq, dk, dv)
}

typedef struct {
    uint16_t *q, *k, *v, *dy;   // (B*NH, T, hs) each
    uint16_t *p, *pd;           // (B*NH, T, T) each: drop(att) in the forward, dS and drop(att) in the backward
    float *hq, *hk, *hv;        // (B*NH, T, hs) each
} Scratch;

static Scratch carve(void *mem, int B, int T, int C, int NH) {
    const size_t BTC = (size_t)B * T * C, planes = (size_t)B * NH * T * T;
    Scratch s;
    uint16_t *h = mem;
    s.q = h; s.k = h + BTC; s.v = h + 2 * BTC; s.dy = h + 3 * BTC; s.p = h + 4 * BTC; s.pd = s.p + planes;
    float *f = (float *)(void *)(s.pd + planes + (planes & 1));   // keep fp32 4-byte aligned
    s.hq = f; s.hk = f + BTC; s.hv = f + 2 * BTC;
    return s;
}

// Up to three (B*NH, T, hs) bf16 planes gathered in one pass over src's rows (B,T) of stride ld:
// dst[p] = head h's columns [p*C + h*hs, p*C + (h+1)*hs) (C = NH*hs), for p < np (q, k, v of
// qkv, or dout alone). Converted a head's hs floats at a time by the vectorised converter.
static void gather_heads(uint16_t *const dst[3], int np, const float *src, long ld, int B, int T, int NH, int hs) {
    const long C = (long)NH * hs;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *row = src + ((long)b * T + t) * ld;
            for (int p = 0; p < np; p++)
                for (int h = 0; h < NH; h++)
                    bf16_from_floats_row(dst[p] + (((long)b * NH + h) * T + t) * hs, row + p * C + (long)h * hs,
                                            (size_t)hs);
        }
}

// dst rows (B,T) with row stride ld: columns [p*C + h*hs, p*C + (h+1)*hs) = head h of src[p]
// (B*NH, T, hs), for p < np (y into out; dq, dk, dv into dqkv). One pass over dst's rows.
static void scatter_heads(float *dst, long ld, const float *const src[3], int np, int B, int T, int NH, int hs) {
    const long C = (long)NH * hs;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *row = dst + ((long)b * T + t) * ld;
            for (int p = 0; p < np; p++)
                for (int h = 0; h < NH; h++)
                    vcopy_n(row + p * C + (long)h * hs, src[p] + (((long)b * NH + h) * T + t) * hs, hs);
        }
}

// Rows per causal block of a T x T plane: whole planes up to 64 rows, else T cut into
// ceil(T / 64) blocks of a multiple of 16 rows (the bf16 kernels' tile), so that every block's
// GEMMs keep at least ~32 rows while the skipped tiles approach half the square.
static int causal_tb(int T) {
    if (T <= 64) return T;
    const int nb = (T + 63) / 64, tb = (T + nb - 1) / nb;
    return (tb + 15) / 16 * 16;
}

// Key columns row t's block reads: up to the end of its block.
static inline int block_end(int t, int T, int tb) {
    const int e = (t / tb + 1) * tb;
    return e < T ? e : T;
}

// The attention dropout's multipliers of row t of plane (b,h): m[0..t] = 0 or 1 / (1 - p)
// (kernels/dropout_rng.h; the same elements and bits as attention.c's kernels).
typedef struct { int use; uint32_t thr; float keep_scale; DropoutKey dk; } AttnDrop;

static AttnDrop attn_drop(float attn_p, DropoutKey dk) {
    const int use = attn_p > 0.0f;
    return (AttnDrop){ use, dropout_threshold(attn_p), use ? 1.0f / (1.0f - attn_p) : 1.0f, dk };
}

// The mask of row t of plane (b,h) into m (NULL: no dropout, m untouched).
static inline float *attn_mask_row(float *m, const AttnDrop *d, int b, int h, int t, int NH, int T) {
    if (!d->use) return NULL;
    const uint64_t idx_bh = dropout_global_index(d->dk, b, (int64_t)NH * T * T, (int64_t)h * T * T);
    drop_row(m, t + 1, d->dk.key, idx_bh + (uint64_t)t * T, d->thr, d->keep_scale);
    return m;
}

// o[0..e) bf16 = the row of drop(att) the products use: m[j] a[j] (a[j] without a mask) for
// j <= t, zeros after it up to e, the end of the row's block (the columns after it are never read).
// m, when given, is overwritten with the products.
static inline void dropped_row_bf16(uint16_t *o, const float *a, float *m, int t, int e) {
    if (m) {
        for (int j = 0; j <= t; j++) m[j] *= a[j];
        a = m;
    }
    bf16_from_floats_row(o, a, (size_t)t + 1);
    for (int j = t + 1; j < e; j++) o[j] = 0;
}

// The three product shapes of causal attention, per (b,h) plane, one batched GEMM per block:
// sc (B*NH, T, T) fp32 = x y^T, x and y (T, hs) bf16: query block [r0, e) gets the key columns
// [0, e) (the scores, dP); the columns after a row's block are not written.
static void causal_scores(int BN, int T, int hs, int tb, const uint16_t *x, const uint16_t *y, float *sc) {
    const long plane = (long)T * hs, sq = (long)T * T;
    for (int r0 = 0; r0 < T; r0 += tb) {
        const int e = block_end(r0, T, tb);
        cpu_gemm_bf16_batched(BN, 0, 1, e - r0, e, hs, x + (long)r0 * hs, hs, plane, y, hs, plane, 0.0f,
                              sc + (long)r0 * T, T, sq);
    }
}

// h (B*NH, T, hs) fp32 = p x, p (T, T) bf16 causal (zeros above the diagonal within each block),
// x (T, hs) bf16: query block [r0, e) sums over the key rows [0, e) (y = drop(att) v, dq = dS k).
static void causal_rows(int BN, int T, int hs, int tb, const uint16_t *p, const uint16_t *x, float *h) {
    const long plane = (long)T * hs, sq = (long)T * T;
    for (int r0 = 0; r0 < T; r0 += tb) {
        const int e = block_end(r0, T, tb);
        cpu_gemm_bf16_batched(BN, 0, 0, e - r0, hs, e, p + (long)r0 * T, T, sq, x, hs, plane, 0.0f,
                              h + (long)r0 * hs, hs, plane);
    }
}

// h (B*NH, T, hs) fp32 = p^T x, p and x as above: key block [c0, e) sums over the query rows
// [c0, T) only, the rows above it being zeros of p (dv = drop(att)^T dout, dk = dS^T q).
static void causal_cols(int BN, int T, int hs, int tb, const uint16_t *p, const uint16_t *x, float *h) {
    const long plane = (long)T * hs, sq = (long)T * T;
    for (int c0 = 0; c0 < T; c0 += tb) {
        const int e = block_end(c0, T, tb);
        cpu_gemm_bf16_batched(BN, 1, 0, e - c0, hs, T - c0, p + (long)c0 * T + c0, T, sq, x + (long)c0 * hs, hs,
                              plane, 0.0f, h + (long)c0 * hs, hs, plane);
    }
}

void attention_forward_bf16(float *out, float *att, const float *qkv, int B, int T, int C, int NH, float attn_p,
                            DropoutKey dk, void *scratch) {
    const int hs = C / NH, BN = B * NH;
    const long C3 = 3L * C;
    const float scale = 1.0f / sqrtf((float)hs);
    Scratch s = carve(scratch, B, T, C, NH);
    gather_heads((uint16_t *const[3]){ s.q, s.k, s.v }, 3, qkv, C3, B, T, NH, hs);
    const int tb = causal_tb(T);
    causal_scores(BN, T, hs, tb, s.q, s.k, att);   // scores (b,h) = q k^T
    // per row, in one pass: the scaled scores' causal softmax into att (zeros above the diagonal,
    // the whole row: att is the backward's input), then drop(att) in bf16 into p
    const AttnDrop d = attn_drop(attn_p, dk);
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            float m[T];
            for (int t = 0; t < T; t++) {
                const long r = ((long)b * NH + h) * T + t;
                float *row = att + r * T;
                for (int j = 0; j <= t; j++) row[j] *= scale;
                softmax_row(row, t + 1, T);
                dropped_row_bf16(s.p + r * T, row, attn_mask_row(m, &d, b, h, t, NH, T), t, block_end(t, T, tb));
            }
        }
    // y (b,h) = drop(att) v, then heads concatenated into out
    causal_rows(BN, T, hs, tb, s.p, s.v, s.hq);
    scatter_heads(out, C, (const float *const[3]){ s.hq }, 1, B, T, NH, hs);
}

void attention_backward_bf16(float *dqkv, float *dsbuf, const float *dout, const float *qkv, const float *att,
                             int B, int T, int C, int NH, float attn_p, DropoutKey dk, void *scratch) {
    const int hs = C / NH, BN = B * NH;
    const long C3 = 3L * C;
    const float scale = 1.0f / sqrtf((float)hs);
    Scratch s = carve(scratch, B, T, C, NH);
    gather_heads((uint16_t *const[3]){ s.q, s.k, s.v }, 3, qkv, C3, B, T, NH, hs);
    gather_heads((uint16_t *const[3]){ s.dy }, 1, dout, C, B, T, NH, hs);
    const int tb = causal_tb(T);
    causal_scores(BN, T, hs, tb, s.dy, s.v, dsbuf);   // dP = dout v^T
    // per row, with one mask: drop(att) in bf16 into pd (as the forward used it); dP *= mask,
    // dS = att (dP - sum(att dP)) scale in bf16 into p
    const AttnDrop d = attn_drop(attn_p, dk);
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            float mbuf[T];
            for (int t = 0; t < T; t++) {
                const long r = ((long)b * NH + h) * T + t;
                float *row = dsbuf + r * T;
                const float *a = att + r * T;
                const int n = t + 1, e = block_end(t, T, tb);
                float *m = attn_mask_row(mbuf, &d, b, h, t, NH, T);
                if (m)
                    for (int j = 0; j < n; j++) row[j] *= m[j];
                dropped_row_bf16(s.pd + r * T, a, m, t, e);   // m overwritten
                int j = 0;
                VF vs = vset1(0.0f);
                for (; j + VL <= n; j += VL) vs += vload(a + j) * vload(row + j);
                float sum = vsum(vs);
                for (; j < n; j++) sum += a[j] * row[j];
                // dS into row (free after the sum), then converted by the vectorised converter
                const VF vsum_ = vset1(sum);
                for (j = 0; j + VL <= n; j += VL) vstore(row + j, vload(a + j) * (vload(row + j) - vsum_) * scale);
                for (; j < n; j++) row[j] = a[j] * (row[j] - sum) * scale;
                uint16_t *o = s.p + r * T;
                bf16_from_floats_row(o, row, (size_t)n);
                for (j = n; j < e; j++) o[j] = 0;
            }
        }
    causal_cols(BN, T, hs, tb, s.pd, s.dy, s.hv);   // dv = drop(att)^T dout
    causal_rows(BN, T, hs, tb, s.p, s.k, s.hq);     // dq = dS k
    causal_cols(BN, T, hs, tb, s.p, s.q, s.hk);     // dk = dS^T q
    scatter_heads(dqkv, C3, (const float *const[3]){ s.hq, s.hk, s.hv }, 3, B, T, NH, hs);   // dqkv overwritten
}
