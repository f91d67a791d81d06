// kernels/cpu/matmul.c — nn.Linear forward and backward on OpenBLAS sgemm.
#include <cblas.h>
#include <stddef.h>
#include <string.h>

#include "kernels/cpu/ops.h"

// Output channels per task in the dbias reduction over rows.
#define MM_CH_BLOCK 64

// out (N,OC) = inp (N,C) @ weight (OC,C)^T + bias (OC,) (bias may be NULL).
void matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                    int N, int C, int OC) {
    float beta = 0.0f;
    if (bias) {
        // Seed every row with the bias and let sgemm accumulate onto it (beta = 1).
        #pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++) memcpy(out + (size_t)n * OC, bias, (size_t)OC * sizeof(float));
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, weight, C,
                beta, out, OC);
}

// dinp (N,C) += dout (N,OC) @ weight (OC,C); dweight (OC,C) += dout^T @ inp (N,C);
// dbias (OC,) += sum_n dout. dinp, dweight and dbias may each be NULL (skipped).
void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                     const float *inp, const float *weight, int N, int C, int OC) {
    if (dinp)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC,
                    weight, C, 1.0f, dinp, C);
    if (dweight)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C,
                    1.0f, dweight, C);
    if (dbias) {
        // Column sums: each thread owns a block of output channels and walks rows in order
        // (contiguous reads, no shared writes, same result for any thread count).
        const int nblk = (OC + MM_CH_BLOCK - 1) / MM_CH_BLOCK;
        #pragma omp parallel for schedule(static)
        for (int blk = 0; blk < nblk; blk++) {
            const int o0 = blk * MM_CH_BLOCK;
            const int o1 = o0 + MM_CH_BLOCK < OC ? o0 + MM_CH_BLOCK : OC;
            for (int n = 0; n < N; n++) {
                const float *d = dout + (size_t)n * OC;
                for (int o = o0; o < o1; o++) dbias[o] += d[o];
            }
        }
    }
}
