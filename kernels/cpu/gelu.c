// kernels/cpu/gelu.c — GELU, tanh approximation (minGPT NewGELU): the forward over an array
// and the backward. The forward formula itself is kernels/cpu/gelu.h's, shared with the fused
// matmul + GELU (fused.c) so that both give the same bits.
#pragma GCC optimize("fp-contract=fast")
#include <math.h>

#include "kernels/cpu/gelu.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/simd.h"

// Elements per OpenMP task: large enough to amortise scheduling, small enough to split.
#define GELU_CHUNK 4096

// gelu'(x) = s + 2 x s (1 - s) k (1 + 3 a x^2), s = sigmoid(2u); 1 - s = e s, e = exp(-2u)
// (no cancellation when s ~ 1). e is clamped at exp(80) so e * s * s stays finite.
static inline VF dgelu_v(VF x) {
    const VF u = GELU_K * (x + GELU_A * x * x * x);
    const VF e = vexp(vmin(-2.0f * u, vset1(80.0f)));
    const VF s = 1.0f / (1.0f + e);
    return s + 2.0f * x * (e * s * s) * GELU_K * (1.0f + 3.0f * GELU_A * x * x);
}
static inline float dgelu_s(float x) {
    const float u = GELU_K * (x + GELU_A * x * x * x);
    const float e = expf_fast(fminf(-2.0f * u, 80.0f));
    const float s = 1.0f / (1.0f + e);
    return s + 2.0f * x * (e * s * s) * GELU_K * (1.0f + 3.0f * GELU_A * x * x);
}

// out[i0:i1] = gelu(inp[i0:i1]).
static void gelu_forward_range(float *out, const float *inp, long i0, long i1) {
    long i = i0;
    for (; i + VL <= i1; i += VL) vstore(out + i, gelu_v(vload(inp + i)));
    for (; i < i1; i++) out[i] = gelu_s(inp[i]);
}

// out (N,) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
void gelu_forward(float *out, const float *inp, long N) {
    const long nchunk = (N + GELU_CHUNK - 1) / GELU_CHUNK;
    if (nchunk == 1) { gelu_forward_range(out, inp, 0, N); return; }   // no one-thread team
    #pragma omp parallel for schedule(static)
    for (long c = 0; c < nchunk; c++) {
        const long i0 = c * GELU_CHUNK, i1 = i0 + GELU_CHUNK < N ? i0 + GELU_CHUNK : N;
        gelu_forward_range(out, inp, i0, i1);
    }
}

// dinp (N,) += gelu'(inp) * dout.
void gelu_backward(float *dinp, const float *inp, const float *dout, long N) {
    const long nchunk = (N + GELU_CHUNK - 1) / GELU_CHUNK;
    #pragma omp parallel for schedule(static)
    for (long c = 0; c < nchunk; c++) {
        const long i0 = c * GELU_CHUNK, i1 = i0 + GELU_CHUNK < N ? i0 + GELU_CHUNK : N;
        long i = i0;
        for (; i + VL <= i1; i += VL)
            vstore(dinp + i, dgelu_v(vload(inp + i)) * vload(dout + i));
        for (; i < i1; i++) dinp[i] = dgelu_s(inp[i]) * dout[i];
    }
}
