// kernels/cuda/dropout.cu — inverted dropout with the counter-based masks of
// kernels/dropout_rng.h: element i of a site is kept iff dropout_keep(key, i, threshold),
// the same function the CPU backend evaluates, so both draw identical masks and backward
// recomputes the mask instead of storing it.
#include "kernels/cuda/cuda_ops.cuh"

// out = inp * keep(i) / (1 - p); out may alias inp (element-wise, read before write).
__global__ void dropout_forward_kernel(float *out, const float *inp, size_t n, uint64_t key,
                                       uint32_t thr, float scale) {
    GRID_STRIDE(i, n) out[i] = dropout_keep(key, (uint64_t)i, thr) ? inp[i] * scale : 0.0f;
}

// dinp += dout * keep(i) / (1 - p)
__global__ void dropout_backward_kernel(float *__restrict__ dinp, const float *__restrict__ dout,
                                        size_t n, uint64_t key, uint32_t thr, float scale) {
    GRID_STRIDE(i, n) if (dropout_keep(key, (uint64_t)i, thr)) dinp[i] += dout[i] * scale;
}

// p = 0: dinp += dout
__global__ void accumulate_kernel(float *__restrict__ dinp, const float *__restrict__ dout, size_t n) {
    GRID_STRIDE(i, n) dinp[i] += dout[i];
}

void cuda_dropout_forward(CudaCtx *c, float *out, const float *inp, long N, float p, uint64_t key) {
    if (N <= 0) return;
    if (p <= 0.0f) {
        if (out != inp)
            CUDA_CHECK(cudaMemcpyAsync(out, inp, (size_t)N * sizeof(float), cudaMemcpyDeviceToDevice, c->stream));
        return;
    }
    LAUNCH(dropout_forward_kernel, grid_for(c, (size_t)N), BLOCK, 0, c->stream)(
        out, inp, (size_t)N, key, dropout_threshold(p), 1.0f / (1.0f - p));
    LAUNCH_CHECK();
}

void cuda_dropout_backward(CudaCtx *c, float *dinp, const float *dout, long N, float p, uint64_t key) {
    if (N <= 0) return;
    if (p <= 0.0f)
        LAUNCH(accumulate_kernel, grid_for(c, (size_t)N), BLOCK, 0, c->stream)(dinp, dout, (size_t)N);
    else
        LAUNCH(dropout_backward_kernel, grid_for(c, (size_t)N), BLOCK, 0, c->stream)(
            dinp, dout, (size_t)N, key, dropout_threshold(p), 1.0f / (1.0f - p));
    LAUNCH_CHECK();
}
