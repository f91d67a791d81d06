// kernels/cuda/gelu.cu — GELU, tanh approximation (minGPT NewGELU), and the fused
// c_fc epilogue: matmul_gelu_forward = one cuBLASLt GEMM with the GELU_AUX_BIAS epilogue (the
// bias added to the fp32 accumulator, the pre-activation kept as its aux output for backward,
// gelu(pre) written as D: fp32, or with out_lp only the bf16/fp16 copy that mlp.c_proj multiplies,
// rounded in the epilogue's store from the fp32 value); where cuBLASLt cannot (matmul.cu:
// cuda_lt_matmul, e.g. OC not a multiple of 8, or no bias) the GEMM without bias then one kernel
// that adds the bias, keeps the pre-activation and writes gelu(pre) (or its rounded copy).
//
// Same formulas as kernels/cpu/gelu.c: 0.5 x (1 + tanh u) = x * sigmoid(2u), u = k (x + a x^3);
// gelu'(x) = s + 2 x s (1 - s) k (1 + 3 a x^2) with s = sigmoid(2u) and 1 - s = e s.
#include "kernels/cuda/cuda_ops.cuh"

#define GELU_K 0.7978845608028654f  // sqrt(2/pi)
#define GELU_A 0.044715f

static __device__ __forceinline__ float gelu_f(float x) {
    const float u = GELU_K * (x + GELU_A * x * x * x);
    return x / (1.0f + expf(-2.0f * u));
}

// pre (N,OC) += bias (when given); out = gelu(pre), in fp32 (out_lp NULL) or rounded into out_lp
template <class T>
__global__ void bias_gelu_kernel(float *__restrict__ pre, float *__restrict__ out, T *__restrict__ out_lp,
                                 const float *__restrict__ bias, int OC, size_t total) {
    GRID_STRIDE(i, total) {
        float x = pre[i];
        if (bias) {
            x += bias[i % OC];
            pre[i] = x;
        }
        if (out_lp) store_as(out_lp + i, gelu_f(x));
        else out[i] = gelu_f(x);
    }
}

static __device__ __forceinline__ float dgelu_f(float x) {
    const float u = GELU_K * (x + GELU_A * x * x * x);
    const float e = expf(fminf(-2.0f * u, 80.0f));
    const float s = 1.0f / (1.0f + e);
    return s + 2.0f * x * (e * s * s) * GELU_K * (1.0f + 3.0f * GELU_A * x * x);
}

// dinp = gelu'(inp) * dout (overwritten)
__global__ void gelu_backward_kernel(float *__restrict__ dinp, const float *__restrict__ inp,
                                     const float *__restrict__ dout, size_t n) {
    GRID_STRIDE(i, n) dinp[i] = dgelu_f(inp[i]) * dout[i];
}

// d = gelu'(inp) * d, in place (matmul_backward_dgelu without cuBLASLt)
__global__ void gelu_backward_inplace_kernel(float *d, const float *__restrict__ inp, size_t n) {
    GRID_STRIDE(i, n) d[i] = dgelu_f(inp[i]) * d[i];
}

void cuda_matmul_gelu_forward(CudaCtx *c, float *pre, float *out, void *out_lp, const float *inp,
                              const void *inp_lp, const float *weight, const float *bias, int N, int C, int OC) {
    if (N <= 0 || OC <= 0) return;
    if (c->dtype == DTYPE_FP32 && out_lp && !out) out = (float *)out_lp;   // fp32 mode: the copy is fp32
    if (c->dtype == DTYPE_FP32) out_lp = nullptr;
    const void *A = cuda_weight_operand(c, weight, (size_t)OC * C);
    const void *B = inp_lp ? inp_lp : cuda_gemm_operand(c, SCR_IN_LP, inp, (size_t)N * C);
    // out_lp: D is the copy, gelu(pre) rounded in the epilogue's store
    if (bias && cuda_lt_matmul(c, true, false, OC, N, C, A, C, B, C, 0.0f, out_lp ? out_lp : (void *)out, OC,
                               CUBLASLT_EPILOGUE_GELU_AUX_BIAS, (float *)bias, pre, OC, out_lp != nullptr))
        return;
    cuda_gemm(c, true, false, OC, N, C, A, C, 0, B, C, 0, 1.0f, 0.0f, pre, OC, 0, 1);
    const size_t total = (size_t)N * OC;
    const unsigned g = grid_for(c, total);
    if (out_lp && c->dtype == DTYPE_BF16)
        LAUNCH((bias_gelu_kernel<__nv_bfloat16>), g, BLOCK, 0, c->stream)(pre, out, (__nv_bfloat16 *)out_lp, bias, OC, total);
    else if (out_lp)
        LAUNCH((bias_gelu_kernel<__half>), g, BLOCK, 0, c->stream)(pre, out, (__half *)out_lp, bias, OC, total);
    else
        LAUNCH((bias_gelu_kernel<float>), g, BLOCK, 0, c->stream)(pre, out, (float *)nullptr, bias, OC, total);
    LAUNCH_CHECK();
}

void cuda_gelu_backward(CudaCtx *c, float *dinp, const float *inp, const float *dout, long N) {
    if (N <= 0) return;
    if (dinp == dout) {
        LAUNCH(gelu_backward_inplace_kernel, grid_for(c, (size_t)N), BLOCK, 0, c->stream)(dinp, inp, (size_t)N);
    } else {
        LAUNCH(gelu_backward_kernel, grid_for(c, (size_t)N), BLOCK, 0, c->stream)(dinp, inp, dout, (size_t)N);
    }
    LAUNCH_CHECK();
}
