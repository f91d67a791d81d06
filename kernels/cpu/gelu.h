// kernels/cpu/gelu.h — the GELU forward (tanh approximation, minGPT NewGELU) on a vector and
// on a scalar, the one definition used by gelu_forward (gelu.c) and by the fused
// matmul + bias + GELU (fused.c). Activation recomputation in the backward pass runs one and
// the forward the other, so both must produce the same bits: they share this code, and
// both files compile it under #pragma GCC optimize("fp-contract=fast") (an includer must too,
// since the FMA contraction decides the last bit).
//
// Uses the identity 0.5 (1 + tanh u) = sigmoid(2u) = 1 / (1 + exp(-2u)): the same function
// as torch.nn.GELU(approximate='tanh'), no 1 + tanh cancellation for negative x, and one
// exponential, computed by the vectorised vexp of kernels/cpu/simd.h (VL lanes at a time;
// the scalar version, for loop tails, uses the same arithmetic through expf_fast).
#ifndef MINGPT_CPU_GELU_H
#define MINGPT_CPU_GELU_H

#include "kernels/cpu/simd.h"

#define GELU_K 0.7978845608028654f  // sqrt(2/pi)
#define GELU_A 0.044715f

// x / (1 + exp(-2u)), u = k (x + a x^3). The exponent is clamped (vexp clamps to 88.7):
// x -> -inf gives x / (1 + 1.6e38) ~ -0, the exact limit to fp32 precision.
static inline VF gelu_v(VF x) {
    const VF u = GELU_K * (x + GELU_A * x * x * x);
    return x / (1.0f + vexp(-2.0f * u));
}
static inline float gelu_s(float x) {
    const float u = GELU_K * (x + GELU_A * x * x * x);
    return x / (1.0f + expf_fast(-2.0f * u));
}

#endif
