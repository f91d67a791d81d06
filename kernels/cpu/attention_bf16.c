// kernels/cpu/attention_bf16.c — causal self-attention whose products are bf16 GEMMs on oneDNN
// (AMX / AVX512-BF16), batched over the (b,h) planes: the function attention_forward_lp /
// attention_backward_lp compute with LP_ROUND_BF16 (every product operand rounded to bf16,
// products accumulated in fp32), at GEMM speed instead of the fp32 kernels'.
//
// The GEMMs cover each T x T plane whole (the causal half above the diagonal is computed and
// then masked): twice the multiply-adds of attention.c's triangle kernels, at several times
// their speed. q, k, v and dout are first gathered head by head into contiguous bf16 planes
// (B*NH, T, hs); the products' fp32 results per head are scattered back to (B,T,C) / (B,T,3C).
#pragma GCC optimize("fp-contract=fast")
#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/attention_rows.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/ops.h"

size_t attention_bf16_scratch_bytes(int B, int T, int C, int NH) {
    const size_t BTC = (size_t)B * T * C, planes = (size_t)B * NH * T * T;
    return 4 * BTC * sizeof(uint16_t)    // q, k, v, dout in bf16, head-contiguous
         + planes * sizeof(uint16_t)     // drop(att), then dS, in bf16
         + 3 * BTC * sizeof(float);      // per-head fp32 results (y; dq, dk, dv)
}

typedef struct {
    uint16_t *q, *k, *v, *dy;   // (B*NH, T, hs) each
    uint16_t *p;                // (B*NH, T, T)
    float *hq, *hk, *hv;        // (B*NH, T, hs) each
} Scratch;

static Scratch carve(void *mem, int B, int T, int C, int NH) {
    const size_t BTC = (size_t)B * T * C, planes = (size_t)B * NH * T * T;
    Scratch s;
    uint16_t *h = mem;
    s.q = h; s.k = h + BTC; s.v = h + 2 * BTC; s.dy = h + 3 * BTC; s.p = h + 4 * BTC;
    float *f = (float *)(void *)(s.p + planes + (planes & 1));   // keep fp32 4-byte aligned
    s.hq = f; s.hk = f + BTC; s.hv = f + 2 * BTC;
    return s;
}

// dst (B*NH, T, hs) bf16 = head h's columns [h*hs, (h+1)*hs) of src rows (B,T) with row stride ld.
static void gather_heads(uint16_t *dst, const float *src, long ld, int B, int T, int NH, int hs) {
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *row = src + ((long)b * T + t) * ld;
            for (int h = 0; h < NH; h++) {
                uint16_t *d = dst + (((long)b * NH + h) * T + t) * hs;
                for (int i = 0; i < hs; i++) d[i] = bf16_from_float(row[(long)h * hs + i]);
            }
        }
}

// dst rows (B,T) with row stride ld, head h's columns = src (B*NH, T, hs).
static void scatter_heads(float *dst, long ld, const float *src, int B, int T, int NH, int hs) {
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *row = dst + ((long)b * T + t) * ld;
            for (int h = 0; h < NH; h++) {
                const float *s = src + (((long)b * NH + h) * T + t) * hs;
                float *d = row + (long)h * hs;
                for (int i = 0; i < hs; i++) d[i] = s[i];
            }
        }
}

// p (B*NH, T, T) bf16 = drop(att) as the forward uses it: rows t hold columns 0..t, zeros after.
static void dropped_att_bf16(uint16_t *p, const float *att, int B, int T, int NH, float attn_p, DropoutKey dk) {
    const int use_drop = attn_p > 0.0f;
    const uint32_t thr = dropout_threshold(attn_p);
    const float keep_scale = use_drop ? 1.0f / (1.0f - attn_p) : 1.0f;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *a = att + ((long)b * NH + h) * T * T;
            uint16_t *o = p + ((long)b * NH + h) * T * T;
            const uint64_t idx_bh = dropout_global_index(dk, b, (int64_t)NH * T * T, (int64_t)h * T * T);
            float m[T];
            for (int t = 0; t < T; t++) {
                const float *ar = a + (long)t * T;
                uint16_t *or_ = o + (long)t * T;
                if (use_drop) {
                    drop_row(m, t + 1, dk.key, idx_bh + (uint64_t)t * T, thr, keep_scale);
                    for (int j = 0; j <= t; j++) or_[j] = bf16_from_float(m[j] * ar[j]);
                } else {
                    for (int j = 0; j <= t; j++) or_[j] = bf16_from_float(ar[j]);
                }
                for (int j = t + 1; j < T; j++) or_[j] = 0;
            }
        }
}

void attention_forward_bf16(float *out, float *att, const float *qkv, int B, int T, int C, int NH, float attn_p,
                            DropoutKey dk, void *scratch) {
    const int hs = C / NH, BN = B * NH;
    const long C3 = 3L * C, plane = (long)T * hs, sq = (long)T * T;
    const float scale = 1.0f / sqrtf((float)hs);
    Scratch s = carve(scratch, B, T, C, NH);
    gather_heads(s.q, qkv, C3, B, T, NH, hs);
    gather_heads(s.k, qkv + C, C3, B, T, NH, hs);
    gather_heads(s.v, qkv + 2L * C, C3, B, T, NH, hs);
    // scores (b,h) = q k^T (the whole square), then scale, causal softmax, zeros above the diagonal
    cpu_gemm_bf16_batched(BN, 0, 1, T, T, hs, s.q, hs, plane, s.k, hs, plane, 0.0f, att, T, sq);
    #pragma omp parallel for schedule(static)
    for (long r = 0; r < (long)BN * T; r++) {
        float *row = att + r * T;
        const int t = (int)(r % T);
        for (int j = 0; j <= t; j++) row[j] *= scale;
        softmax_row(row, t + 1, T);
    }
    // y (b,h) = drop(att) v, then heads concatenated into out
    dropped_att_bf16(s.p, att, B, T, NH, attn_p, dk);
    cpu_gemm_bf16_batched(BN, 0, 0, T, hs, T, s.p, T, sq, s.v, hs, plane, 0.0f, s.hq, hs, plane);
    scatter_heads(out, C, s.hq, B, T, NH, hs);
}

void attention_backward_bf16(float *dqkv, float *dsbuf, const float *dout, const float *qkv, const float *att,
                             int B, int T, int C, int NH, float attn_p, DropoutKey dk, void *scratch) {
    const int hs = C / NH, BN = B * NH;
    const long C3 = 3L * C, plane = (long)T * hs, sq = (long)T * T;
    const float scale = 1.0f / sqrtf((float)hs);
    const int use_drop = attn_p > 0.0f;
    const uint32_t thr = dropout_threshold(attn_p);
    const float keep_scale = use_drop ? 1.0f / (1.0f - attn_p) : 1.0f;
    Scratch s = carve(scratch, B, T, C, NH);
    gather_heads(s.q, qkv, C3, B, T, NH, hs);
    gather_heads(s.k, qkv + C, C3, B, T, NH, hs);
    gather_heads(s.v, qkv + 2L * C, C3, B, T, NH, hs);
    gather_heads(s.dy, dout, C, B, T, NH, hs);
    // dv = drop(att)^T dout
    dropped_att_bf16(s.p, att, B, T, NH, attn_p, dk);
    cpu_gemm_bf16_batched(BN, 1, 0, T, hs, T, s.p, T, sq, s.dy, hs, plane, 0.0f, s.hv, hs, plane);
    // dP = dout v^T (the square); per row: dP *= mask, dS = att (dP - sum(att dP)) scale, in bf16
    cpu_gemm_bf16_batched(BN, 0, 1, T, T, hs, s.dy, hs, plane, s.v, hs, plane, 0.0f, dsbuf, T, sq);
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const long bh = (long)b * NH + h;
            const uint64_t idx_bh = dropout_global_index(dk, b, (int64_t)NH * T * T, (int64_t)h * T * T);
            float m[T];
            for (int t = 0; t < T; t++) {
                float *row = dsbuf + (bh * T + t) * T;
                const float *a = att + (bh * T + t) * T;
                uint16_t *o = s.p + (bh * T + t) * T;
                const int n = t + 1;
                if (use_drop) {
                    drop_row(m, n, dk.key, idx_bh + (uint64_t)t * T, thr, keep_scale);
                    for (int j = 0; j < n; j++) row[j] *= m[j];
                }
                int j = 0;
                VF vs = vset1(0.0f);
                for (; j + VL <= n; j += VL) vs += vload(a + j) * vload(row + j);
                float sum = vsum(vs);
                for (; j < n; j++) sum += a[j] * row[j];
                for (j = 0; j < n; j++) o[j] = bf16_from_float(a[j] * (row[j] - sum) * scale);
                for (; j < T; j++) o[j] = 0;
            }
        }
    // dq = dS k, dk = dS^T q
    cpu_gemm_bf16_batched(BN, 0, 0, T, hs, T, s.p, T, sq, s.k, hs, plane, 0.0f, s.hq, hs, plane);
    cpu_gemm_bf16_batched(BN, 1, 0, T, hs, T, s.p, T, sq, s.q, hs, plane, 0.0f, s.hk, hs, plane);
    scatter_heads(dqkv, C3, s.hq, B, T, NH, hs);   // dqkv overwritten
    scatter_heads(dqkv + C, C3, s.hk, B, T, NH, hs);
    scatter_heads(dqkv + 2L * C, C3, s.hv, B, T, NH, hs);
}
