// kernels/cuda/loss_scale.cu — x *= s: unscaling and clipping the gradients (the dynamic loss
// scaler's overflow check is the non-finite global norm, kernels/cuda/global_norm.cu); and
// acc (+)= x: ZeRO stage 2 adding a reduced part of a bucket into the rank's gradient shard.
#include "kernels/cuda/cuda_ops.cuh"

__global__ void scale_kernel(float *__restrict__ x, size_t n, float s) {
    GRID_STRIDE(i, n) x[i] *= s;
}

void cuda_scale(CudaCtx *c, float *x, size_t n, float s) {
    if (!n) return;
    LAUNCH(scale_kernel, grid_for(c, n), BLOCK, 0, c->stream)(x, n, s);
    LAUNCH_CHECK();
}

__global__ void accumulate_kernel(float *__restrict__ acc, const float *__restrict__ x, size_t n, int copy) {
    if (copy) {
        GRID_STRIDE(i, n) acc[i] = x[i];
    } else {
        GRID_STRIDE(i, n) acc[i] += x[i];
    }
}

void cuda_accumulate(CudaCtx *c, float *acc, const float *x, size_t n, int copy) {
    if (!n) return;
    LAUNCH(accumulate_kernel, grid_for(c, n), BLOCK, 0, c->stream)(acc, x, n, copy);
    LAUNCH_CHECK();
}
