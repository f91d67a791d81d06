// kernels/cuda/dropout.cu — inverted dropout with the counter-based masks of
// kernels/dropout_rng.h: element i (local row j = i / row_len, column e = i % row_len) is kept
// iff dropout_keep(k.key, dropout_global_index(k, j, row_len, e), threshold), the same
// function the CPU backend evaluates, so both draw identical masks, the backward pass
// recomputes the mask instead of storing it, and N data-parallel ranks draw the masks of one
// process with N times the batch (the global index, not the rank-local one, keys the mask).
#include "kernels/cuda/cuda_ops.cuh"

// out = inp * keep(i) / (1 - p); out may alias inp (element-wise, read before write).
__global__ void dropout_forward_kernel(float *out, const float *inp, size_t n, size_t row_len, DropoutKey kin,
                                       uint32_t thr, float scale) {
    const DropoutKey k = dropout_key_at(kin);
    GRID_STRIDE(i, n) out[i] = dropout_keep(k.key, dropout_global_elem(k, i, row_len), thr) ? inp[i] * scale : 0.0f;
}

// dinp = dout * keep(i) / (1 - p), overwritten: the product rounded (__fmul_rn), as the CPU
// backend computes it, so both give the same bits
__global__ void dropout_backward_kernel(float *__restrict__ dinp, const float *__restrict__ dout,
                                        size_t n, size_t row_len, DropoutKey kin, uint32_t thr, float scale) {
    const DropoutKey k = dropout_key_at(kin);
    GRID_STRIDE(i, n) dinp[i] = dropout_keep(k.key, dropout_global_elem(k, i, row_len), thr) ? __fmul_rn(dout[i], scale) : 0.0f;
}

// N must be a positive multiple of row_len (a caller bug otherwise: the masks would not be
// those of the CPU backend), reported like a failed CUDA call.
static void check_rows(const char *op, long N, long row_len) {
    if (row_len <= 0 || N % row_len != 0) {
        char detail[128];
        snprintf(detail, sizeof detail, "N = %ld is not a positive multiple of row_len = %ld", N, row_len);
        cuda_fatal(op, detail, __FILE__, __LINE__);
    }
}

void cuda_dropout_forward(CudaCtx *c, float *out, const float *inp, long N, long row_len, float p,
                          DropoutKey k) {
    if (N <= 0) return;
    if (p <= 0.0f) {
        if (out != inp)
            CUDA_CHECK(cudaMemcpyAsync(out, inp, (size_t)N * sizeof(float), cudaMemcpyDeviceToDevice, c->stream));
        return;
    }
    check_rows("dropout_forward", N, row_len);
    LAUNCH(dropout_forward_kernel, grid_for(c, (size_t)N), BLOCK, 0, c->stream)(
        out, inp, (size_t)N, (size_t)row_len, k, dropout_threshold(p), 1.0f / (1.0f - p));
    LAUNCH_CHECK();
}

void cuda_dropout_backward(CudaCtx *c, float *dinp, const float *dout, long N, long row_len, float p,
                           DropoutKey k) {
    if (N <= 0) return;
    if (p <= 0.0f) {   // the identity: dinp = dout
        if (dinp != dout)
            CUDA_CHECK(cudaMemcpyAsync(dinp, dout, (size_t)N * sizeof(float), cudaMemcpyDeviceToDevice, c->stream));
        return;
    }
    check_rows("dropout_backward", N, row_len);
    LAUNCH(dropout_backward_kernel, grid_for(c, (size_t)N), BLOCK, 0, c->stream)(
        dinp, dout, (size_t)N, (size_t)row_len, k, dropout_threshold(p), 1.0f / (1.0f - p));
    LAUNCH_CHECK();
}
