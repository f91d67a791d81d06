// kernels/cpu/fused.c — fused forward ops (compositions of the single ops for now;
// tests/test_fused.c checks them against the unfused sequence).
#include "kernels/cpu/ops.h"

// res (N,C) = a + b; out, mean, rstd (N,C),(N),(N) = layernorm(res).
void residual_layernorm_forward(float *res, float *out, float *mean, float *rstd,
                                const float *a, const float *b, const float *weight,
                                const float *bias, int N, int C) {
    residual_forward(res, a, b, (long)N * C);
    layernorm_forward(out, mean, rstd, res, weight, bias, N, C);
}

// pre (N,OC) = inp (N,C) @ weight^T + bias; out (N,OC) = gelu(pre).
void matmul_gelu_forward(float *pre, float *out, const float *inp, const float *weight,
                         const float *bias, int N, int C, int OC) {
    matmul_forward(pre, inp, weight, bias, N, C, OC);
    gelu_forward(out, pre, (long)N * OC);
}
