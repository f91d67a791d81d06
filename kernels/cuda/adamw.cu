// kernels/cuda/adamw.cu — one torch.optim.AdamW element update on fp32 master weights
// (the host computes decay_factor, step_size and bc2_sqrt; see kernels/backend.h). The
// expression order is the CPU backend's, and each product and sum is rounded on its own
// (__fmul_rn/__fadd_rn are never contracted into FMAs; sqrtf and / are IEEE without
// --use_fast_math), so both backends give the same bits: on an H100 nvcc's contraction of
// p * decay - step put p hundreds of ulp from the CPU's where the two terms cancel.
#include "kernels/cuda/cuda_ops.cuh"

__global__ void adamw_kernel(float *__restrict__ p, const float *__restrict__ g, float *__restrict__ m,
                             float *__restrict__ v, size_t n, float beta1, float beta2, float eps,
                             float decay_factor, float step_size, float bc2_sqrt) {
    GRID_STRIDE(i, n) {
        const float gi = g[i];
        const float mi = __fadd_rn(__fmul_rn(beta1, m[i]), __fmul_rn(1.0f - beta1, gi));
        const float vi = __fadd_rn(__fmul_rn(beta2, v[i]), __fmul_rn(__fmul_rn(1.0f - beta2, gi), gi));
        m[i] = mi;
        v[i] = vi;
        const float denom = __fadd_rn(sqrtf(vi) / bc2_sqrt, eps);
        p[i] = __fadd_rn(__fmul_rn(p[i], decay_factor), -(__fmul_rn(step_size, mi) / denom));
    }
}

void cuda_adamw_update(CudaCtx *c, float *p, const float *g, float *m, float *v, size_t n,
                       float beta1, float beta2, float eps, float decay_factor, float step_size,
                       float bc2_sqrt) {
    if (!n) return;
    LAUNCH(adamw_kernel, grid_for(c, n), BLOCK, 0, c->stream)(p, g, m, v, n, beta1, beta2, eps,
                                                              decay_factor, step_size, bc2_sqrt);
    LAUNCH_CHECK();
}
