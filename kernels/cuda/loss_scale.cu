// kernels/cuda/loss_scale.cu — loss-scaling helpers: x *= s (unscale / clip the gradients)
// and the overflow check of the dynamic loss scaler (1 when every element is finite). The
// check tests exponent bits, so it holds under any fast-math setting; per block
// __syncthreads_or, then one integer atomicOr per block that found a bad value (integer
// atomics only: the result is a flag, so it is order-independent).
#include "kernels/cuda/cuda_ops.cuh"

__global__ void scale_kernel(float *__restrict__ x, size_t n, float s) {
    GRID_STRIDE(i, n) x[i] *= s;
}

__global__ void nonfinite_kernel(int *__restrict__ flag, const float *__restrict__ x, size_t n) {
    int bad = 0;
    GRID_STRIDE(i, n) bad |= (__float_as_uint(x[i]) & 0x7f800000u) == 0x7f800000u;
    bad = __syncthreads_or(bad);
    if (bad && threadIdx.x == 0) atomicOr(flag, 1);
}

void cuda_scale(CudaCtx *c, float *x, size_t n, float s) {
    if (!n) return;
    LAUNCH(scale_kernel, grid_for(c, n), BLOCK, 0, c->stream)(x, n, s);
    LAUNCH_CHECK();
}

int cuda_all_finite(CudaCtx *c, const float *x, size_t n) {
    if (!n) return 1;
    int *flag = (int *)cuda_scratch(c, SCR_RED, (256 + 1) * sizeof(double));
    CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(int), c->stream));
    LAUNCH(nonfinite_kernel, grid_for(c, n), BLOCK, 0, c->stream)(flag, x, n);
    LAUNCH_CHECK();
    int bad = 0;
    CUDA_CHECK(cudaMemcpyAsync(&bad, flag, sizeof bad, cudaMemcpyDeviceToHost, c->stream));
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
    return !bad;
}
