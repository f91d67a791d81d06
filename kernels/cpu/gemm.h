// kernels/cpu/gemm.h — the one sgemm every CPU op calls (kernels/cpu/matmul.c).
//
// OpenBLAS (cblas_sgemm, OpenMP build) by default; built with -DMINGPT_GEMM_DNNL (and linked
// with -ldnnl) it is oneDNN's dnnl_sgemm instead. `make bench` measures both where oneDNN is
// installed; see README "Performance" for the numbers behind the default.
#ifndef MINGPT_CPU_GEMM_H
#define MINGPT_CPU_GEMM_H

// Row-major C (M,N) = op(A) op(B) + beta C; op transposes when ta / tb is non-zero;
// lda, ldb, ldc are the row strides of A, B and C as stored.
void cpu_sgemm(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B,
               int ldb, float beta, float *C, int ldc);

// "openblas" or "onednn".
const char *cpu_sgemm_library(void);

#endif
