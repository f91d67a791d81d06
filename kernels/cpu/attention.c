// kernels/cpu/attention.c — causal multi-head self-attention with attention dropout.
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/ops.h"
#include "kernels/dropout_rng.h"

// Dot product a (n,) . b (n,) with 8 independent partial sums: lets the compiler vectorise
// without -ffast-math, and the summation order is fixed by the code (deterministic).
static inline float dot_f32(const float *a, const float *b, int n) {
    float acc[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += a[i + j] * b[i + j];
    float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

// Multiplier dropout applies to att element idx: 0 (dropped) or 1/(1-p) (kept); 1 when p = 0.
static inline float drop_mult(int use_drop, uint64_t key, uint64_t idx, uint32_t thr,
                              float keep_scale) {
    if (!use_drop) return 1.0f;
    return dropout_keep(key, idx, thr) ? keep_scale : 0.0f;
}

// qkv (B,T,3C) -> att (B,NH,T,T) causal softmax (zeros above the diagonal), out (B,T,C) =
// dropout(att) @ v with heads concatenated. Parallel over (b,h): each writes its own att
// plane and its own hs-wide column slice of out.
void attention_forward(float *out, float *att, const float *qkv, int B, int T, int C, int NH,
                       float attn_p, uint64_t key) {
    const int hs = C / NH;
    const size_t C3 = (size_t)3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    const int use_drop = attn_p > 0.0f;
    const uint32_t thr = dropout_threshold(attn_p);
    const float keep_scale = use_drop ? 1.0f / (1.0f - attn_p) : 1.0f;

    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const float *base = qkv + (size_t)b * T * C3 + (size_t)h * hs;
            float *att_bh = att + ((size_t)b * NH + h) * T * T;
            const uint64_t idx_bh = ((uint64_t)b * NH + h) * T * T;
            for (int t = 0; t < T; t++) {
                const float *q = base + (size_t)t * C3;
                float *row = att_bh + (size_t)t * T;
                // Scores and running max over the visible keys t2 <= t.
                float maxv = -INFINITY;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float s = dot_f32(q, base + (size_t)t2 * C3 + C, hs) * scale;
                    row[t2] = s;
                    maxv = s > maxv ? s : maxv;
                }
                // Max-subtracted exponentials: no overflow.
                float sum = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float e = expf(row[t2] - maxv);
                    row[t2] = e;
                    sum += e;
                }
                const float inv = 1.0f / sum;
                for (int t2 = 0; t2 <= t; t2++) row[t2] *= inv;
                for (int t2 = t + 1; t2 < T; t2++) row[t2] = 0.0f;

                // out[t] = sum_t2 drop(att)[t,t2] v[t2]: axpy over hs (vectorises, no reduction).
                float *o = out + ((size_t)b * T + t) * C + (size_t)h * hs;
                for (int i = 0; i < hs; i++) o[i] = 0.0f;
                const uint64_t idx_row = idx_bh + (uint64_t)t * T;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float a = row[t2] * drop_mult(use_drop, key, idx_row + t2, thr, keep_scale);
                    const float *v = base + (size_t)t2 * C3 + 2 * (size_t)C;
                    for (int i = 0; i < hs; i++) o[i] += a * v[i];
                }
            }
        }
    }
}

// dqkv (B,T,3C) += gradient given dout (B,T,C), the saved att (B,NH,T,T) and qkv; the mask
// is recomputed from key. scratch (B,NH,T,T) holds datt then dpreatt (lower triangle only).
// Each (b,h) touches only its own hs-wide slices of dq/dk/dv and its own scratch plane.
void attention_backward(float *dqkv, float *scratch, const float *dout, const float *qkv,
                        const float *att, int B, int T, int C, int NH, float attn_p,
                        uint64_t key) {
    const int hs = C / NH;
    const size_t C3 = (size_t)3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    const int use_drop = attn_p > 0.0f;
    const uint32_t thr = dropout_threshold(attn_p);
    const float keep_scale = use_drop ? 1.0f / (1.0f - attn_p) : 1.0f;

    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const float *base = qkv + (size_t)b * T * C3 + (size_t)h * hs;
            float *dbase = dqkv + (size_t)b * T * C3 + (size_t)h * hs;
            const float *att_bh = att + ((size_t)b * NH + h) * T * T;
            float *ds_bh = scratch + ((size_t)b * NH + h) * T * T;
            const uint64_t idx_bh = ((uint64_t)b * NH + h) * T * T;
            for (int t = 0; t < T; t++) {
                const float *arow = att_bh + (size_t)t * T;
                float *drow = ds_bh + (size_t)t * T;
                const float *dout_t = dout + ((size_t)b * T + t) * C + (size_t)h * hs;
                const uint64_t idx_row = idx_bh + (uint64_t)t * T;

                // Through out = drop(att) @ v: dv += drop(att)^T dout, and
                // datt = dropout_backward(dout v^T) (same mask, same 1/(1-p)).
                for (int t2 = 0; t2 <= t; t2++) {
                    const float m = drop_mult(use_drop, key, idx_row + t2, thr, keep_scale);
                    drow[t2] = dot_f32(dout_t, base + (size_t)t2 * C3 + 2 * (size_t)C, hs) * m;
                    const float a = arow[t2] * m;
                    float *dv = dbase + (size_t)t2 * C3 + 2 * (size_t)C;
                    for (int i = 0; i < hs; i++) dv[i] += a * dout_t[i];
                }

                // Softmax backward over the visible keys; fold in the 1/sqrt(hs) score scale.
                float s = 0.0f;
                for (int t2 = 0; t2 <= t; t2++) s += arow[t2] * drow[t2];
                for (int t2 = 0; t2 <= t; t2++) drow[t2] = arow[t2] * (drow[t2] - s) * scale;

                // Through scores = q k^T: dq[t] += dpre k[t2], dk[t2] += dpre q[t].
                const float *q = base + (size_t)t * C3;
                float *dq = dbase + (size_t)t * C3;
                for (int t2 = 0; t2 <= t; t2++) {
                    const float g = drow[t2];
                    const float *k = base + (size_t)t2 * C3 + C;
                    float *dk = dbase + (size_t)t2 * C3 + C;
                    for (int i = 0; i < hs; i++) {
                        dq[i] += g * k[i];
                        dk[i] += g * q[i];
                    }
                }
            }
        }
    }
}
