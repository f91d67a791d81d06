// kernels/cpu/layernorm.c — torch.nn.LayerNorm(C, eps=1e-5) forward and backward, and the
// fused residual add + LayerNorm forward.
//
// Rows are independent and split across threads; within a row every pass runs on short
// vectors (kernels/cpu/simd.h) with fixed-order partial sums, so results are deterministic.
// Statistics are fp32 with two passes (mean, then the variance of the deviations: no
// cancellation), as torch's CPU kernel computes them.
#pragma GCC optimize("fp-contract=fast")
#include <math.h>
#include <stddef.h>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/simd.h"

#define LN_EPS 1e-5f
// Channels per task for the dweight/dbias reduction over rows (see layernorm_backward).
#define LN_CH_BLOCK (2 * VL)

// One row: out = (x - mean) * rstd * w + b; returns mean and rstd.
static inline void ln_row(float *o, const float *x, const float *w, const float *b, int C,
                          float *mean, float *rstd) {
    VF s = vset1(0.0f);
    int c = 0;
    for (; c + VL <= C; c += VL) s += vload(x + c);
    float sum = vsum(s);
    for (; c < C; c++) sum += x[c];
    const float m = sum / (float)C;
    VF v = vset1(0.0f);
    const VF vm = vset1(m);
    for (c = 0; c + VL <= C; c += VL) { const VF d = vload(x + c) - vm; v += d * d; }
    float var = vsum(v);
    for (; c < C; c++) var += (x[c] - m) * (x[c] - m);
    const float rs = 1.0f / sqrtf(var / (float)C + LN_EPS);
    const VF vrs = vset1(rs);
    for (c = 0; c + VL <= C; c += VL)
        vstore(o + c, (vload(x + c) - vm) * vrs * vload(w + c) + vload(b + c));
    for (; c < C; c++) o[c] = (x[c] - m) * rs * w[c] + b[c];
    *mean = m;
    *rstd = rs;
}

// out (N,C) = (inp - mean) * rstd * weight + bias; mean (N,), rstd (N,) saved.
void layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                       const float *weight, const float *bias, int N, int C) {
    if (N == 1) { ln_row(out, inp, weight, bias, C, mean, rstd); return; }   // a token of inference: no thread team
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        ln_row(out + (size_t)n * C, inp + (size_t)n * C, weight, bias, C, &mean[n], &rstd[n]);
}

// res (N,C) = a + b, then out/mean/rstd = layernorm(res): one pass over the residual stream,
// each row normalised while it is still in L1.
static inline void residual_ln_row(float *r, float *o, const float *ar, const float *br, const float *weight,
                                   const float *bias, int C, float *mean, float *rstd) {
    int c = 0;
    for (; c + VL <= C; c += VL) vstore(r + c, vload(ar + c) + vload(br + c));
    for (; c < C; c++) r[c] = ar[c] + br[c];
    ln_row(o, r, weight, bias, C, mean, rstd);
}

void residual_layernorm_forward(float *res, float *out, float *mean, float *rstd,
                                const float *a, const float *b, const float *weight,
                                const float *bias, int N, int C) {
    if (N == 1) { residual_ln_row(res, out, a, b, weight, bias, C, mean, rstd); return; }   // no thread team
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const size_t o = (size_t)n * C;
        residual_ln_row(res + o, out + o, a + o, b + o, weight, bias, C, &mean[n], &rstd[n]);
    }
}

// dinp (N,C), dweight (C,), dbias (C,) += gradients given dout (N,C) and the saved mean/rstd.
void layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, const float *mean,
                        const float *rstd, int N, int C) {
    // dinp: rows are independent.
    // dnorm = weight * dout; dx = rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)).
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        const float *d = dout + (size_t)n * C;
        float *dx = dinp + (size_t)n * C;
        const float m = mean[n], rs = rstd[n];
        const VF vm = vset1(m), vrs = vset1(rs);
        VF a1 = vset1(0.0f), a2 = vset1(0.0f);
        int c = 0;
        for (; c + VL <= C; c += VL) {
            const VF norm = (vload(x + c) - vm) * vrs, dn = vload(weight + c) * vload(d + c);
            a1 += dn;
            a2 += dn * norm;
        }
        float s1 = vsum(a1), s2 = vsum(a2);
        for (; c < C; c++) {
            const float norm = (x[c] - m) * rs, dn = weight[c] * d[c];
            s1 += dn;
            s2 += dn * norm;
        }
        const float mdn = s1 / (float)C, mdnn = s2 / (float)C;
        const VF vmdn = vset1(mdn), vmdnn = vset1(mdnn);
        for (c = 0; c + VL <= C; c += VL) {
            const VF norm = (vload(x + c) - vm) * vrs;
            vstore(dx + c, vload(dx + c) + vrs * (vload(weight + c) * vload(d + c) - vmdn - norm * vmdnn));
        }
        for (; c < C; c++) {
            const float norm = (x[c] - m) * rs;
            dx[c] += rs * (weight[c] * d[c] - mdn - norm * mdnn);
        }
    }
    // dweight/dbias reduce over rows: each thread owns a channel block and sums rows in
    // order, so no two threads write one element and the result ignores thread count.
    const int nblk = (C + LN_CH_BLOCK - 1) / LN_CH_BLOCK;
    #pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
        const int c0 = blk * LN_CH_BLOCK;
        if (c0 + LN_CH_BLOCK <= C) {
            VF w0 = vset1(0.0f), w1 = vset1(0.0f), b0 = vset1(0.0f), b1 = vset1(0.0f);
            for (int n = 0; n < N; n++) {
                const float *x = inp + (size_t)n * C + c0, *d = dout + (size_t)n * C + c0;
                const VF vm = vset1(mean[n]), vrs = vset1(rstd[n]);
                const VF d0 = vload(d), d1 = vload(d + VL);
                w0 += (vload(x) - vm) * vrs * d0;
                w1 += (vload(x + VL) - vm) * vrs * d1;
                b0 += d0;
                b1 += d1;
            }
            vstore(dweight + c0, vload(dweight + c0) + w0);
            vstore(dweight + c0 + VL, vload(dweight + c0 + VL) + w1);
            vstore(dbias + c0, vload(dbias + c0) + b0);
            vstore(dbias + c0 + VL, vload(dbias + c0 + VL) + b1);
        } else {
            for (int n = 0; n < N; n++) {
                const float *x = inp + (size_t)n * C;
                const float *d = dout + (size_t)n * C;
                const float m = mean[n], rs = rstd[n];
                for (int c = c0; c < C; c++) {
                    dweight[c] += (x[c] - m) * rs * d[c];
                    dbias[c] += d[c];
                }
            }
        }
    }
}
