// kernels/cpu/gemm_dnnl.h — oneDNN behind kernels/cpu/gemm.c (internal to kernels/cpu/).
#ifndef MINGPT_CPU_GEMM_DNNL_H
#define MINGPT_CPU_GEMM_DNNL_H

#include <stddef.h>

#include "kernels/cpu/gemm.h"

// 0 when oneDNN's CPU engine could be created (once; thread-safe); else non-zero.
int onednn_init(void);

// Row-major C (M,N) = op(A) op(B) + beta C through dnnl_sgemm. Returns 0 or oneDNN's status.
int onednn_sgemm(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                 float beta, float *C, int ldc);

// The same through a matmul primitive with A and B of type t (fp32 or bf16), fp32 C; beta is a
// sum post-op. Primitives are created once per (type, shape, strides, beta) and reused. Returns 0
// or oneDNN's status (e.g. unimplemented for bf16 on a CPU without the ISA).
int onednn_matmul(GemmType t, int ta, int tb, int M, int N, int K, const void *A, int lda, const void *B,
                  int ldb, float beta, float *C, int ldc);

// batch products at once: operand i of product b starts at A + b*sa, B + b*sb, C + b*sc (elements).
int onednn_matmul_batched(GemmType t, int batch, int ta, int tb, int M, int N, int K, const void *A, int lda,
                          long sa, const void *B, int ldb, long sb, float beta, float *C, int ldc, long sc);

// "2.6.3" and the ISA oneDNN dispatches to ("avx512_core_amx", ...).
void onednn_version(char *buf, size_t len);
const char *onednn_isa(void);

#endif
