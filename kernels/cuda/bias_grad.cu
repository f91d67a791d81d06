// kernels/cuda/bias_grad.cu — bias gradients and the other column sums over rows
// (LayerNorm dweight/dbias), deterministic and without atomics: stage 1 sums fixed chunks
// of cuda_colsum_rows(N) rows per channel (8 row phases per block, combined in a fixed order),
// stage 2 adds the chunks in order. The result depends only on (N, C), never on the GPU.
#include "kernels/cuda/cuda_ops.cuh"

int cuda_colsum_rows(int N) {
    int rows = COLSUM_ROWS;
    while (ceil_div(N, rows) > 65535) rows *= 2;   // gridDim.y limit
    return rows;
}

// part[chunk*C + c] = sum of in[r*C + c] (as fp32) over the rows of the chunk. Block (32, 8).
template <class T>
__global__ void colsum_partial_kernel(float *__restrict__ part, const T *__restrict__ in, int N, int C,
                                      int rows) {
    __shared__ float s[8][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int c = blockIdx.x * 32 + tx;
    const int r0 = blockIdx.y * rows;
    const int r1 = r0 + rows < N ? r0 + rows : N;
    float acc = 0.0f;
    if (c < C)
        for (int r = r0 + ty; r < r1; r += 8) acc += load_f(in + (size_t)r * C + c);
    s[ty][tx] = acc;
    __syncthreads();
    if (ty == 0 && c < C) {
        float t = 0.0f;
        for (int k = 0; k < 8; k++) t += s[k][tx];
        part[(size_t)blockIdx.y * C + c] = t;
    }
}

// out_j[c] += sum over chunks k (ascending) of part[(k*nout + j)*C + c], j < nout (1 or 2);
// out_j[c] = that sum when accumulate is 0. One thread per output: a chain of nchunk (N/32)
// dependent adds, so COLSUM_AHEAD chunks are loaded before they are added (in the same order),
// and the chain waits on nchunk/COLSUM_AHEAD load latencies instead of nchunk.
#define COLSUM_AHEAD 8
__global__ void colsum_finalize_kernel(float *out0, float *out1, const float *__restrict__ part,
                                       int nchunk, int nout, int C, int accumulate) {
    GRID_STRIDE(i, (size_t)nout * C) {
        const int j = (int)(i / C), c = (int)(i % C);
        float *out = j == 0 ? out0 : out1;
        if (!out) continue;
        const float *p = part + (size_t)j * C + c;   // chunk k's value: p[k * nout * C]
        const size_t step = (size_t)nout * C;
        float acc = 0.0f;
        int k = 0;
        for (; k + COLSUM_AHEAD <= nchunk; k += COLSUM_AHEAD) {
            float v[COLSUM_AHEAD];
            for (int a = 0; a < COLSUM_AHEAD; a++) v[a] = p[(size_t)(k + a) * step];
            for (int a = 0; a < COLSUM_AHEAD; a++) acc += v[a];
        }
        for (; k < nchunk; k++) acc += p[(size_t)k * step];
        if (accumulate) out[c] += acc;
        else out[c] = acc;
    }
}

void cuda_colsum_finalize(CudaCtx *c, float *out0, float *out1, const float *part, int nchunk,
                          int nout, int C, bool accumulate) {
    if (C <= 0 || (!out0 && !out1)) return;
    LAUNCH(colsum_finalize_kernel, grid_for(c, (size_t)nout * C), BLOCK, 0, c->stream)(out0, out1, part, nchunk, nout, C,
                                                                                        accumulate ? 1 : 0);
    LAUNCH_CHECK();
}

template <class T>
static void colsum_t(CudaCtx *c, float *out, const T *in, int N, int C, bool accumulate) {
    if (N <= 0 || C <= 0) return;
    const int rows = cuda_colsum_rows(N), nchunk = (int)ceil_div(N, rows);
    float *part = (float *)cuda_scratch(c, SCR_PART, (size_t)nchunk * C * sizeof(float));
    LAUNCH((colsum_partial_kernel<T>), dim3(ceil_div(C, 32), nchunk), dim3(32, 8), 0, c->stream)(part, in, N, C, rows);
    LAUNCH_CHECK();
    cuda_colsum_finalize(c, out, nullptr, part, nchunk, 1, C, accumulate);
}

void cuda_colsum(CudaCtx *c, float *out, const float *in, int N, int C, bool accumulate) {
    colsum_t(c, out, in, N, C, accumulate);
}

void cuda_colsum_lp(CudaCtx *c, float *out, const void *in, int N, int C, bool accumulate) {
    switch (c->dtype) {
    case DTYPE_BF16: colsum_t(c, out, (const __nv_bfloat16 *)in, N, C, accumulate); break;
    case DTYPE_FP16: colsum_t(c, out, (const __half *)in, N, C, accumulate); break;
    default: colsum_t(c, out, (const float *)in, N, C, accumulate); break;
    }
}
