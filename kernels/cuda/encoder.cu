// kernels/cuda/encoder.cu — token + position embedding, forward and backward.
//
// Backward, deterministically and without atomics: dwpe[t] sums dout[b,t] over b in order;
// dwte is a scatter by token, done as a gather: the token ids come to the host (one small
// copy, N int32), are bucketed there (counting sort, ascending position inside each bucket),
// and one thread per (token, channel) adds its bucket's rows in order. Both are exactly the
// CPU backend's summation order, so the results are bitwise equal to it.
#include <vector>

#include "kernels/cuda/cuda_ops.cuh"

// out (B,T,C) = wte[inp[b,t]] + wpe[t]
__global__ void encoder_forward_kernel(float *__restrict__ out, const int32_t *__restrict__ inp,
                                       const float *__restrict__ wte, const float *__restrict__ wpe,
                                       int T, int C, size_t total) {
    GRID_STRIDE(i, total) {
        const size_t n = i / C;
        const int c = (int)(i % C), t = (int)(n % T);
        out[i] = wte[(size_t)inp[n] * C + c] + wpe[(size_t)t * C + c];
    }
}

// dwpe (T,C) += sum over b of dout[b,t,:], b ascending
__global__ void encoder_backward_wpe_kernel(float *__restrict__ dwpe, const float *__restrict__ dout,
                                            int B, int T, int C) {
    GRID_STRIDE(i, (size_t)T * C) {
        const size_t t = i / C, c = i % C;
        float acc = dwpe[i];
        for (int b = 0; b < B; b++) acc += dout[((size_t)b * T + t) * C + c];
        dwpe[i] = acc;
    }
}

// grid (buckets, ceil(C/blockDim)): dwte[tok[k], c] += dout[idx[j], c] for j in bucket k, in order
__global__ void encoder_backward_wte_kernel(float *__restrict__ dwte, const float *__restrict__ dout,
                                            const int32_t *__restrict__ idx,
                                            const int32_t *__restrict__ start,
                                            const int32_t *__restrict__ tok, int C) {
    const int k = blockIdx.x;
    const int c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float *dw = dwte + (size_t)tok[k] * C + c;
    float acc = *dw;
    for (int j = start[k]; j < start[k + 1]; j++) acc += dout[(size_t)idx[j] * C + c];
    *dw = acc;
}

void cuda_encoder_forward(CudaCtx *c, float *out, const int32_t *inp, const float *wte,
                          const float *wpe, int B, int T, int C) {
    const size_t total = (size_t)B * T * C;
    if (!total) return;
    LAUNCH(encoder_forward_kernel, grid_for(c, total), BLOCK, 0, c->stream)(out, inp, wte, wpe, T, C, total);
    LAUNCH_CHECK();
}

void cuda_encoder_backward(CudaCtx *c, float *dwte, float *dwpe, const float *dout,
                           const int32_t *inp, int B, int T, int C) {
    const int N = B * T;
    if (N <= 0 || C <= 0) return;
    LAUNCH(encoder_backward_wpe_kernel, grid_for(c, (size_t)T * C), BLOCK, 0, c->stream)(dwpe, dout, B, T, C);
    LAUNCH_CHECK();

    // Host buffer layout (pinned): [tokens N | idx N | start N+1 | tok N]
    const size_t need = 4 * (size_t)N + 1;
    if (c->host_tok_n < need) {
        if (c->host_tok) CUDA_CHECK(cudaFreeHost(c->host_tok));
        c->host_tok = nullptr;
        CUDA_CHECK(cudaMallocHost((void **)&c->host_tok, need * sizeof(int32_t)));
        c->host_tok_n = need;
    }
    int32_t *h_inp = c->host_tok, *h_idx = h_inp + N, *h_start = h_idx + N;
    CUDA_CHECK(cudaMemcpyAsync(h_inp, inp, (size_t)N * sizeof(int32_t), cudaMemcpyDeviceToHost, c->stream));
    CUDA_CHECK(cudaStreamSynchronize(c->stream));

    // Counting sort by token, stable (positions ascending inside a bucket).
    int32_t max_tok = -1;
    for (int n = 0; n < N; n++) max_tok = h_inp[n] > max_tok ? h_inp[n] : max_tok;
    if (max_tok < 0) return;
    std::vector<int32_t> count((size_t)max_tok + 2, 0);
    for (int n = 0; n < N; n++) if (h_inp[n] >= 0) count[(size_t)h_inp[n] + 1]++;
    int nb = 0;
    for (int32_t v = 0; v <= max_tok; v++) nb += count[(size_t)v + 1] > 0;
    int32_t *h_tok = h_start + nb + 1;
    std::vector<int32_t> pos((size_t)max_tok + 1);
    int k = 0, off = 0;
    for (int32_t v = 0; v <= max_tok; v++) {
        const int32_t cnt = count[(size_t)v + 1];
        if (!cnt) continue;
        h_tok[k] = v;
        h_start[k] = off;
        pos[v] = off;
        off += cnt;
        k++;
    }
    h_start[nb] = off;
    for (int n = 0; n < N; n++) if (h_inp[n] >= 0) h_idx[pos[h_inp[n]]++] = n;

    const size_t words = (size_t)N + (size_t)nb + 1 + (size_t)nb;  // idx | start | tok
    int32_t *d = (int32_t *)cuda_scratch(c, SCR_TOK, words * sizeof(int32_t));
    CUDA_CHECK(cudaMemcpyAsync(d, h_idx, words * sizeof(int32_t), cudaMemcpyHostToDevice, c->stream));
    const int threads = 128;
    LAUNCH(encoder_backward_wte_kernel, dim3(nb, ceil_div(C, threads)), threads, 0, c->stream)(
        dwte, dout, d, d + N, d + N + nb + 1, C);
    LAUNCH_CHECK();
}
