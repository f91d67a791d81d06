// kernels/cpu/matmul.c — nn.Linear forward and backward on the GEMM of kernels/cpu/gemm.h,
// with fp32 or bf16 operands.
#include <cblas.h>
#include <stddef.h>
#include <string.h>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/simd.h"

// Output channels per task in the dbias reduction over rows (a multiple of VL).
#define MM_CH_BLOCK 64

void matmul_forward_t(GemmType t, float *out, const void *inp, const void *weight, const float *bias, int N,
                      int C, int OC) {
    float beta = 0.0f;
    if (bias) {
        // Seed every row with the bias and let the GEMM accumulate onto it (beta = 1).
        if (N == 1) {
            memcpy(out, bias, (size_t)OC * sizeof(float));   // no thread team for one row
        } else {
            #pragma omp parallel for schedule(static)
            for (int n = 0; n < N; n++) memcpy(out + (size_t)n * OC, bias, (size_t)OC * sizeof(float));
        }
        beta = 1.0f;
    }
    // One row (a token of incremental inference) is a matrix-vector product: OpenBLAS's sgemv.
    if (N == 1 && t == GEMM_F32)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, OC, C, 1.0f, weight, C, inp, 1, beta, out, 1);
    else
        cpu_gemm(t, 0, 1, N, OC, C, inp, C, weight, C, beta, out, OC);
}

void matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC) {
    matmul_forward_t(GEMM_F32, out, inp, weight, bias, N, C, OC);
}

// dinp (N,C) = 0, by all threads when it is large (one core's stores reach about half of what
// two reach).
#define ZERO_ROWS_MIN (1L << 18)   // elements
static void zero_rows(float *x, int N, int C) {
    if ((long)N * C < ZERO_ROWS_MIN) {
        memset(x, 0, (size_t)N * C * sizeof(float));
        return;
    }
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) memset(x + (size_t)n * C, 0, (size_t)C * sizeof(float));
}

void matmul_backward_t(GemmType t, float *dinp, float *dweight, const void *dout, const void *inp,
                       const void *weight, int N, int C, int OC) {
    // dinp is overwritten, computed as 0 + the product (beta 1 onto zeros) rather than with
    // beta 0: a beta-0 product is a GEMM class of its own, for which OpenBLAS and oneDNN run other
    // kernels (other bits, even with MINGPT_GEMM forcing one library), so this keeps the CPU's
    // gradients bitwise those of the model that zeroed dinp before an accumulating op.
    if (dinp) {
        zero_rows(dinp, N, C);
        cpu_gemm(t, 0, 0, N, C, OC, dout, OC, weight, C, 1.0f, dinp, C);
    }
    if (dweight) cpu_gemm(t, 1, 0, OC, C, N, dout, OC, inp, C, 1.0f, dweight, C);
}

// Column sums: each thread owns a block of output channels and walks rows in order
// (contiguous reads, no shared writes, same result for any thread count). A block's sums stay in
// registers over the rows (written back once; the additions, in row order onto dbias's value,
// are those of adding each row to dbias in memory, bit for bit, without a store and reload per row).
#define MM_CH_VECS (MM_CH_BLOCK / VL)
static void bias_block(float *dbias, const float *dout, int N, int OC, int o0, int o1) {
    int o = o0;
    if (o1 - o0 == MM_CH_BLOCK) {
        VF acc[MM_CH_VECS];
        for (int k = 0; k < MM_CH_VECS; k++) acc[k] = vload(dbias + o0 + k * VL);
        for (int n = 0; n < N; n++) {
            const float *d = dout + (size_t)n * OC + o0;
            for (int k = 0; k < MM_CH_VECS; k++) acc[k] += vload(d + k * VL);
        }
        for (int k = 0; k < MM_CH_VECS; k++) vstore(dbias + o0 + k * VL, acc[k]);
        return;
    }
    for (; o + VL <= o1; o += VL) {   // a narrower last block: a vector, then single channels
        VF acc = vload(dbias + o);
        for (int n = 0; n < N; n++) acc += vload(dout + (size_t)n * OC + o);
        vstore(dbias + o, acc);
    }
    for (; o < o1; o++) {
        float acc = dbias[o];
        for (int n = 0; n < N; n++) acc += dout[(size_t)n * OC + o];
        dbias[o] = acc;
    }
}
void bias_backward(float *dbias, const float *dout, int N, int OC) {
    const int nblk = (OC + MM_CH_BLOCK - 1) / MM_CH_BLOCK;
    #pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
        const int o0 = blk * MM_CH_BLOCK;
        bias_block(dbias, dout, N, OC, o0, o0 + MM_CH_BLOCK < OC ? o0 + MM_CH_BLOCK : OC);
    }
}

void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                     const float *weight, int N, int C, int OC) {
    matmul_backward_t(GEMM_F32, dinp, dweight, dout, inp, weight, N, C, OC);
    if (dbias) bias_backward(dbias, dout, N, OC);
}
