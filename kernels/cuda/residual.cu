// kernels/cuda/residual.cu — residual add, out = a + b (element-wise; out may alias a or b).
#include "kernels/cuda/cuda_ops.cuh"

__global__ void residual_forward_kernel(float *out, const float *a, const float *b, size_t n) {
    GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

void cuda_residual_forward(CudaCtx *c, float *out, const float *a, const float *b, long N) {
    if (N <= 0) return;
    LAUNCH(residual_forward_kernel, grid_for(c, (size_t)N), BLOCK, 0, c->stream)(out, a, b, (size_t)N);
    LAUNCH_CHECK();
}
