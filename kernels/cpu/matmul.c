// kernels/cpu/matmul.c — nn.Linear forward and backward on sgemm (kernels/cpu/gemm.h).
#ifdef MINGPT_GEMM_DNNL
#include <oneapi/dnnl/dnnl.h>
#else
#include <cblas.h>
#endif
#include <omp.h>
#include <stddef.h>
#include <string.h>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/ops.h"

// One library call (the library threads it itself).
static void sgemm1(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B,
                   int ldb, float beta, float *Cm, int ldc) {
#ifdef MINGPT_GEMM_DNNL
    dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, 1.0f, A, lda, B, ldb, beta, Cm, ldc);
#else
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
                K, 1.0f, A, lda, B, ldb, beta, Cm, ldc);
#endif
}

#ifndef MINGPT_GEMM_DNNL
// OpenBLAS, small products (the S model's): the output is split into one block of rows (or
// columns) per OpenMP thread and each thread makes a single-threaded call (OpenBLAS runs
// serially inside a parallel region). Against OpenBLAS's own threading this skips its
// per-call job allocation (a malloc/free per threaded sgemm) and its spin/yield hand-offs,
// at the price of each thread packing the shared operand itself: measured 5% faster per
// training step on the S model, 3% slower on M, so large products (above SPLIT_MAX_MACS
// multiply-adds) keep OpenBLAS's threading. Either way each output element is computed by
// one thread (K is never split), so results are deterministic for a given thread count.
// Blocks are multiples of 16 rows/columns.
#define SPLIT_ALIGN 16
#define SPLIT_MAX_MACS 2e8
void cpu_sgemm(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B,
               int ldb, float beta, float *Cm, int ldc) {
    const int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
    const int split_m = M >= N;
    const int D = split_m ? M : N;
    if (nt <= 1 || D < 2 * SPLIT_ALIGN || (double)M * N * K > SPLIT_MAX_MACS) {
        sgemm1(ta, tb, M, N, K, A, lda, B, ldb, beta, Cm, ldc);
        return;
    }
    const int nb = (D + SPLIT_ALIGN - 1) / SPLIT_ALIGN;   // 16-wide blocks, dealt out evenly
    #pragma omp parallel num_threads(nt)
    {
        const int t = omp_get_thread_num(), T = omp_get_num_threads();
        const int d0 = (int)((long)nb * t / T) * SPLIT_ALIGN;
        int d1 = (int)((long)nb * (t + 1) / T) * SPLIT_ALIGN;
        if (d1 > D) d1 = D;
        if (d1 > d0) {
            if (split_m)   // rows d0..d1 of C and of op(A)
                sgemm1(ta, tb, d1 - d0, N, K, ta ? A + d0 : A + (size_t)d0 * lda, lda, B, ldb, beta,
                       Cm + (size_t)d0 * ldc, ldc);
            else           // columns d0..d1 of C and of op(B)
                sgemm1(ta, tb, M, d1 - d0, K, A, lda, tb ? B + (size_t)d0 * ldb : B + d0, ldb, beta,
                       Cm + d0, ldc);
        }
    }
}
#else
void cpu_sgemm(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B,
               int ldb, float beta, float *Cm, int ldc) {
    sgemm1(ta, tb, M, N, K, A, lda, B, ldb, beta, Cm, ldc);
}
#endif

const char *cpu_sgemm_library(void) {
#ifdef MINGPT_GEMM_DNNL
    return "onednn";
#else
    return "openblas";
#endif
}

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
    cpu_sgemm(0, 1, N, OC, C, inp, C, weight, C, beta, out, OC);
}

// dinp (N,C) += dout (N,OC) @ weight (OC,C); dweight (OC,C) += dout^T @ inp (N,C);
// dbias (OC,) += sum_n dout. dinp, dweight and dbias may each be NULL (skipped).
void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                     const float *inp, const float *weight, int N, int C, int OC) {
    if (dinp)
        cpu_sgemm(0, 0, N, C, OC, dout, OC, weight, C, 1.0f, dinp, C);
    if (dweight)
        cpu_sgemm(1, 0, OC, C, N, dout, OC, inp, C, 1.0f, dweight, C);
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
