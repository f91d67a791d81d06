// kernels/cpu/fused.c — fused ops: one pass where the unfused sequence makes several
// (tests/test_fused.c checks each against that sequence). residual_layernorm_forward is
// in layernorm.c, next to the row kernel it shares.
#pragma GCC optimize("fp-contract=fast")
#include <stddef.h>

#include "kernels/cpu/gelu.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/simd.h"

// pre (N,OC) = inp (N,C) @ weight^T + bias; out (N,OC) = gelu(pre). The GEMM writes pre
// without the bias (beta = 0, no bias-seeding pass); one pass per row then adds the bias
// and applies GELU while the row is in cache.
void matmul_gelu_forward(float *pre, float *out, const float *inp, const float *weight,
                         const float *bias, int N, int C, int OC) {
    matmul_gelu_forward_t(GEMM_F32, pre, out, inp, weight, bias, N, C, OC);
}

// One row: p (OC,) += bias (or no bias), o = gelu(p).
static void bias_gelu_row(float *p, float *o, const float *bias, int OC) {
    int c = 0;
    for (; c + VL <= OC; c += VL) {
        VF x = vload(p + c);
        if (bias) x += vload(bias + c);
        vstore(p + c, x);
        vstore(o + c, gelu_v(x));
    }
    for (; c < OC; c++) {
        const float x = p[c] + (bias ? bias[c] : 0.0f);
        p[c] = x;
        o[c] = gelu_s(x);
    }
}

void matmul_gelu_forward_t(GemmType t, float *pre, float *out, const void *inp, const void *weight,
                           const float *bias, int N, int C, int OC) {
    matmul_forward_t(t, pre, inp, weight, NULL, N, C, OC);   // beta = 0: the GEMM alone
    if (N == 1) { bias_gelu_row(pre, out, bias, OC); return; }   // a token of inference: no thread team
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) bias_gelu_row(pre + (size_t)n * OC, out + (size_t)n * OC, bias, OC);
}
