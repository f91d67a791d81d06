// kernels/cpu/layernorm.c — torch.nn.LayerNorm(C, eps=1e-5) forward and backward.
#include <math.h>
#include <stddef.h>

#include "kernels/cpu/ops.h"

#define LN_EPS 1e-5
// Channels per task for the dweight/dbias reduction over rows (see layernorm_backward).
#define LN_CH_BLOCK 32

// out (N,C) = (inp - mean) * rstd * weight + bias; mean (N,), rstd (N,) saved.
void layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                       const float *weight, const float *bias, int N, int C) {
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *o = out + (size_t)n * C;
        // Two passes in double: mean, then variance of the deviations (no cancellation).
        double s = 0.0;
        for (int c = 0; c < C; c++) s += x[c];
        const double m = s / C;
        double v = 0.0;
        for (int c = 0; c < C; c++) {
            const double d = x[c] - m;
            v += d * d;
        }
        const float mf = (float)m;
        const float rs = (float)(1.0 / sqrt(v / C + LN_EPS));
        // Normalise with the double mean: the fp32 mean's rounding would dominate the
        // deviations of a nearly constant row with a large offset.
        for (int c = 0; c < C; c++) o[c] = (float)((x[c] - m) * rs) * weight[c] + bias[c];
        mean[n] = mf;
        rstd[n] = rs;
    }
}

// dinp (N,C), dweight (C,), dbias (C,) += gradients given dout (N,C) and the saved mean/rstd.
void layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, const float *mean,
                        const float *rstd, int N, int C) {
    // dinp: rows are independent.
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        const float *d = dout + (size_t)n * C;
        float *dx = dinp + (size_t)n * C;
        const float m = mean[n], rs = rstd[n];
        // dnorm = weight * dout; dx = rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)).
        double s1 = 0.0, s2 = 0.0;
        for (int c = 0; c < C; c++) {
            const float norm = (x[c] - m) * rs;
            const float dn = weight[c] * d[c];
            s1 += dn;
            s2 += (double)dn * norm;
        }
        const float mdn = (float)(s1 / C), mdnn = (float)(s2 / C);
        for (int c = 0; c < C; c++) {
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
        const int c1 = c0 + LN_CH_BLOCK < C ? c0 + LN_CH_BLOCK : C;
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C;
            const float *d = dout + (size_t)n * C;
            const float m = mean[n], rs = rstd[n];
            for (int c = c0; c < c1; c++) {
                dweight[c] += (x[c] - m) * rs * d[c];
                dbias[c] += d[c];
            }
        }
    }
}
