// kernels/cuda/layernorm.cu — LayerNorm(C, eps=1e-5) forward (optionally fused with the
// residual add that precedes it) and backward.
//
// One warp per row: two passes over the row (mean, then the variance of the deviations, so
// no cancellation), butterfly shuffles for the reductions. Backward: dinp per row as in
// forward; dweight/dbias are column sums over rows, done deterministically in two stages
// (fixed chunks of rows, then the chunks summed in order; bias_grad.cu).
#include "kernels/cuda/cuda_ops.cuh"

#define LN_EPS 1e-5f

// FUSED: res = a + b, then normalise res; else normalise a. out NULL: no fp32 output; out_lp
// non-NULL: the output rounded to T too (the operand of the matmul that reads it: round_kernel's
// rounding, so the GEMM multiplies the same values; kernels/backend.h, layernorm_forward_lp).
template <bool FUSED, class T>
__global__ void layernorm_forward_kernel(float *res, float *__restrict__ out, T *__restrict__ out_lp,
                                         float *__restrict__ mean,
                                         float *__restrict__ rstd, const float *a, const float *b,
                                         const float *__restrict__ weight,
                                         const float *__restrict__ bias, int N, int C) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= N) return;  // warp-uniform: the whole warp leaves
    const size_t base = (size_t)row * C;
    const float *x = a + base;
    if (FUSED) {
        for (int c = lane; c < C; c += 32) res[base + c] = a[base + c] + b[base + c];
        x = res + base;  // each lane re-reads only what it wrote
    }
    float s = 0.0f;
    for (int c = lane; c < C; c += 32) s += x[c];
    const float m = warp_sum(s) / (float)C;
    float v = 0.0f;
    for (int c = lane; c < C; c += 32) {
        const float d = x[c] - m;
        v += d * d;
    }
    const float rs = rsqrtf(warp_sum(v) / (float)C + LN_EPS);
    for (int c = lane; c < C; c += 32) {
        const float y = ((x[c] - m) * rs) * weight[c] + bias[c];
        if (out) out[base + c] = y;
        if (out_lp) store_as(out_lp + base + c, y);
    }
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = rs;
    }
}

// dinp += rstd * (w*dout - mean(w*dout) - norm * mean(w*dout*norm)), one warp per row.
__global__ void layernorm_backward_dinp_kernel(float *__restrict__ dinp, const float *__restrict__ dout,
                                               const float *__restrict__ inp,
                                               const float *__restrict__ weight,
                                               const float *__restrict__ mean,
                                               const float *__restrict__ rstd, int N, int C) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= N) return;
    const size_t base = (size_t)row * C;
    const float *x = inp + base, *d = dout + base;
    const float m = mean[row], rs = rstd[row];
    float s1 = 0.0f, s2 = 0.0f;
    for (int c = lane; c < C; c += 32) {
        const float dn = weight[c] * d[c];
        s1 += dn;
        s2 += dn * ((x[c] - m) * rs);
    }
    const float mdn = warp_sum(s1) / (float)C, mdnn = warp_sum(s2) / (float)C;
    float *dx = dinp + base;
    for (int c = lane; c < C; c += 32) {
        const float norm = (x[c] - m) * rs;
        dx[c] += rs * (weight[c] * d[c] - mdn - norm * mdnn);
    }
}

// Partial column sums over one chunk of `rows` rows (cuda_colsum_rows(N)): part[(chunk*2 + 0)*C + c] =
// sum norm*dout (dweight), part[(chunk*2 + 1)*C + c] = sum dout (dbias).
// Block (32, 8): threadIdx.x = channel within a 32-wide tile, threadIdx.y = row phase.
__global__ void layernorm_backward_partial_kernel(float *__restrict__ part, const float *__restrict__ dout,
                                                  const float *__restrict__ inp,
                                                  const float *__restrict__ mean,
                                                  const float *__restrict__ rstd, int N, int C, int rows) {
    __shared__ float sw[8][33], sb[8][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int c = blockIdx.x * 32 + tx;
    const int r0 = blockIdx.y * rows;
    const int r1 = r0 + rows < N ? r0 + rows : N;
    float aw = 0.0f, ab = 0.0f;
    if (c < C)
        for (int r = r0 + ty; r < r1; r += 8) {
            const float d = dout[(size_t)r * C + c];
            aw += (inp[(size_t)r * C + c] - mean[r]) * rstd[r] * d;
            ab += d;
        }
    sw[ty][tx] = aw;
    sb[ty][tx] = ab;
    __syncthreads();
    if (ty == 0 && c < C) {
        float w = 0.0f, b = 0.0f;
        for (int k = 0; k < 8; k++) {
            w += sw[k][tx];
            b += sb[k][tx];
        }
        part[((size_t)blockIdx.y * 2 + 0) * C + c] = w;
        part[((size_t)blockIdx.y * 2 + 1) * C + c] = b;
    }
}

template <class T>
static void layernorm_forward_launch(CudaCtx *c, float *res, float *out, T *out_lp, float *mean, float *rstd,
                                     const float *a, const float *b, const float *weight, const float *bias,
                                     int N, int C) {
    const unsigned grid = ceil_div(N, ROWS_PER_BLOCK);
    if (res)
        LAUNCH((layernorm_forward_kernel<true, T>), grid, 32 * ROWS_PER_BLOCK, 0, c->stream)(
            res, out, out_lp, mean, rstd, a, b, weight, bias, N, C);
    else
        LAUNCH((layernorm_forward_kernel<false, T>), grid, 32 * ROWS_PER_BLOCK, 0, c->stream)(
            nullptr, out, out_lp, mean, rstd, a, nullptr, weight, bias, N, C);
    LAUNCH_CHECK();
}

void cuda_layernorm_forward(CudaCtx *c, float *res, float *out, void *out_lp, float *mean, float *rstd,
                            const float *a, const float *b, const float *weight,
                            const float *bias, int N, int C) {
    if (N <= 0) return;
    if (out_lp && c->dtype == DTYPE_BF16)
        layernorm_forward_launch(c, res, out, (__nv_bfloat16 *)out_lp, mean, rstd, a, b, weight, bias, N, C);
    else if (out_lp && c->dtype == DTYPE_FP16)
        layernorm_forward_launch(c, res, out, (__half *)out_lp, mean, rstd, a, b, weight, bias, N, C);
    else   // fp32 mode: the copy is the output itself (Backend.lp_size is 0 there; not reached by the model)
        layernorm_forward_launch(c, res, out ? out : (float *)out_lp, out ? (float *)out_lp : (float *)nullptr,
                                 mean, rstd, a, b, weight, bias, N, C);
}

void cuda_layernorm_backward(CudaCtx *c, float *dinp, float *dweight, float *dbias,
                             const float *dout, const float *inp, const float *weight,
                             const float *mean, const float *rstd, int N, int C) {
    if (N <= 0) return;
    LAUNCH(layernorm_backward_dinp_kernel, ceil_div(N, ROWS_PER_BLOCK), 32 * ROWS_PER_BLOCK, 0, c->stream)(
        dinp, dout, inp, weight, mean, rstd, N, C);
    LAUNCH_CHECK();
    const int rows = cuda_colsum_rows(N), nchunk = (int)ceil_div(N, rows);
    float *part = (float *)cuda_scratch(c, SCR_PART, (size_t)nchunk * 2 * C * sizeof(float));
    LAUNCH(layernorm_backward_partial_kernel, dim3(ceil_div(C, 32), nchunk), dim3(32, 8), 0, c->stream)(
        part, dout, inp, mean, rstd, N, C, rows);
    LAUNCH_CHECK();
    cuda_colsum_finalize(c, dweight, dbias, part, nchunk, 2, C);
}
