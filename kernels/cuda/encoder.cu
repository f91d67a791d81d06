// kernels/cuda/encoder.cu — token + position embedding, forward and backward.
//
// Backward, deterministically and without atomics: dwpe[t] sums dout[b,t] over b in order;
// dwte is a scatter by token, done as a gather, all on the device (no host synchronisation,
// so a CUDA graph can capture it): one block sorts the positions by token, positions
// ascending inside a token (a stable counting sort in shared memory when every token is below
// 256, else a bitonic sort of (token, position) keys), and lists the start of each token's run
// (its bucket); then one thread per (bucket, channel) adds its bucket's rows in order. Both are
// exactly the CPU backend's summation order, so the results are bitwise equal to it. Three
// launches in all.
#include "kernels/cuda/cuda_ops.cuh"

#define ENC_SORT_THREADS 1024   // the one block of the bucketing kernel
#define ENC_WTE_THREADS 128     // channels per block of the gather

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

// The token of a sort key, negative for ignored ids (< 0) and for the padding.
static __device__ __forceinline__ int32_t key_token(uint64_t k) { return (int32_t)(uint32_t)(k >> 32); }

// One block of ENC_SORT_THREADS (32 warps). Sorts the positions by token, positions ascending
// inside a token, ignoring negative ids, as keys (uint32 token << 32 | position) in
// keys[0, nvalid), and lists the buckets: meta[0] = nb (the distinct tokens >= 0), meta[1 + k] =
// the first sorted index of bucket k (k < nb), meta[1 + nb] = nvalid (the positions with a token
// >= 0). Two ways, chosen by the largest token (block-uniform):
//  * every token < ENC_FAST_BINS (char-level vocabularies): a stable counting sort. Warp w owns
//    the positions [w*per, (w+1)*per) and counts its tokens in its own histogram row (lanes with
//    the same token meet in __match_any_sync; the lowest adds for them all); the rows are scanned
//    bin-major, warp-minor, so warp w's positions of a token follow warp w-1's; the warps then
//    walk their positions again and place each at its row's offset plus its rank among the
//    lower lanes with the same token.
//  * else a bitonic sort of the keys of all positions (npow2 of them, ones as padding; negative
//    ids, as uint32 >= 2^31, sort after the others): the positions are distinct, so the one
//    order is "by token, positions ascending", whatever the network; then the bucket starts.
#define ENC_FAST_BINS 256
#define ENC_WARPS (ENC_SORT_THREADS / 32)
__global__ void __launch_bounds__(ENC_SORT_THREADS)
encoder_bucket_kernel(uint64_t *__restrict__ keys, int32_t *__restrict__ meta,
                      const int32_t *__restrict__ inp, int N, int npow2) {
    __shared__ int s_hist[ENC_WARPS][ENC_FAST_BINS];   // fast path: per-warp counts, then offsets
    __shared__ int s_cnt[ENC_SORT_THREADS];
    __shared__ int s_nb, s_max;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

    // the largest token (block reduction)
    int mx = -1;
    for (int i = tid; i < N; i += ENC_SORT_THREADS) mx = max(mx, (int)inp[i]);
    mx = __reduce_max_sync(0xffffffffu, mx);
    if (tid == 0) s_max = -1;
    __syncthreads();
    if (lane == 0) atomicMax(&s_max, mx);
    __syncthreads();

    if (s_max < ENC_FAST_BINS) {
        const int per = (N + ENC_WARPS - 1) / ENC_WARPS;
        const int lo = min(warp * per, N), hi = min(lo + per, N);
        const unsigned below = (1u << lane) - 1u;
        for (int b = lane; b < ENC_FAST_BINS; b += 32) s_hist[warp][b] = 0;
        __syncwarp();
        for (int base = lo; base < hi; base += 32) {   // the same number of rounds on every lane
            const int p = base + lane;
            const int v = p < hi ? (int)inp[p] : -1;
            const unsigned peers = __match_any_sync(0xffffffffu, v);
            if (v >= 0 && (peers & below) == 0) s_hist[warp][v] += __popc(peers);
            __syncwarp();
        }
        __syncthreads();
        if (tid < ENC_FAST_BINS) {   // bin totals
            int t = 0;
            for (int w = 0; w < ENC_WARPS; w++) t += s_hist[w][tid];
            s_cnt[tid] = t;
        }
        __syncthreads();
        if (tid == 0) {   // bin starts, bucket starts
            int off = 0, nb = 0;
            for (int b = 0; b < ENC_FAST_BINS; b++) {
                const int t = s_cnt[b];
                s_cnt[b] = off;
                if (t) meta[1 + nb++] = off;
                off += t;
            }
            meta[0] = nb;
            meta[1 + nb] = off;
        }
        __syncthreads();
        if (tid < ENC_FAST_BINS) {   // each warp's first slot per bin: bin-major, warp-minor
            int off = s_cnt[tid];
            for (int w = 0; w < ENC_WARPS; w++) { const int t = s_hist[w][tid]; s_hist[w][tid] = off; off += t; }
        }
        __syncthreads();
        for (int base = lo; base < hi; base += 32) {
            const int p = base + lane;
            const int v = p < hi ? (int)inp[p] : -1;
            const unsigned peers = __match_any_sync(0xffffffffu, v);
            const int at = v >= 0 ? s_hist[warp][v] + __popc(peers & below) : 0;
            __syncwarp();
            if (v >= 0) {
                keys[at] = ((uint64_t)(uint32_t)v << 32) | (uint32_t)p;
                if ((peers & below) == 0) s_hist[warp][v] += __popc(peers);
            }
            __syncwarp();
        }
        return;
    }

    for (int i = tid; i < npow2; i += ENC_SORT_THREADS)
        keys[i] = i < N ? ((uint64_t)(uint32_t)inp[i] << 32) | (uint32_t)i : ~(uint64_t)0;
    __syncthreads();
    for (int k = 2; k <= npow2; k <<= 1) {
        for (int j = k >> 1; j > 0; j >>= 1) {
            for (int i = tid; i < npow2; i += ENC_SORT_THREADS) {
                const int l = i ^ j;
                if (l > i) {
                    const uint64_t a = keys[i], b = keys[l];
                    if ((a > b) == ((i & k) == 0)) { keys[i] = b; keys[l] = a; }
                }
            }
            __syncthreads();
        }
    }
    // bucket starts: thread tid scans the contiguous chunk [lo, hi) of the sorted keys
    const int per = (npow2 + ENC_SORT_THREADS - 1) / ENC_SORT_THREADS;
    const int lo = tid * per < npow2 ? tid * per : npow2, hi = lo + per < npow2 ? lo + per : npow2;
    int cnt = 0;
    for (int i = lo; i < hi; i++) {
        const int32_t v = key_token(keys[i]);
        cnt += v >= 0 && (i == 0 || key_token(keys[i - 1]) != v);
    }
    s_cnt[tid] = cnt;
    __syncthreads();
    if (tid == 0) {   // exclusive scan over the 1024 chunk counts
        int off = 0;
        for (int t = 0; t < ENC_SORT_THREADS; t++) { const int x = s_cnt[t]; s_cnt[t] = off; off += x; }
        s_nb = off;
        meta[0] = off;
    }
    __syncthreads();
    int k = s_cnt[tid];
    for (int i = lo; i < hi; i++) {
        const int32_t v = key_token(keys[i]);
        if (v >= 0 && (i == 0 || key_token(keys[i - 1]) != v)) meta[1 + k++] = i;
        // the end of the last bucket: the first key whose token is negative (or npow2)
        if (v < 0 && (i == 0 || key_token(keys[i - 1]) >= 0)) meta[1 + s_nb] = i;
        if (v >= 0 && i == npow2 - 1) meta[1 + s_nb] = npow2;
    }
}

// grid (<= nb, ceil(C/ENC_WTE_THREADS)): dwte[token of bucket k, c] += dout[position, c] for the
// positions of bucket k, ascending; the blocks stride over the buckets.
__global__ void encoder_backward_wte_kernel(float *__restrict__ dwte, const float *__restrict__ dout,
                                            const uint64_t *__restrict__ keys,
                                            const int32_t *__restrict__ meta, int C) {
    const int c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= C) return;
    const int nb = meta[0];
    const int32_t *start = meta + 1;
    for (int k = blockIdx.x; k < nb; k += gridDim.x) {
        const int j0 = start[k], j1 = start[k + 1];
        float *dw = dwte + (size_t)key_token(keys[j0]) * C + c;
        float acc = *dw;
        for (int j = j0; j < j1; j++) acc += dout[(size_t)(uint32_t)keys[j] * C + c];
        *dw = acc;
    }
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

    // scratch: keys (npow2 uint64) | meta (nb, start[0..nb]: at most N + 2 int32)
    int npow2 = 1;
    while (npow2 < N) npow2 <<= 1;
    const size_t key_bytes = (size_t)npow2 * sizeof(uint64_t);
    char *s = (char *)cuda_scratch(c, SCR_TOK, key_bytes + ((size_t)N + 2) * sizeof(int32_t));
    uint64_t *keys = (uint64_t *)s;
    int32_t *meta = (int32_t *)(s + key_bytes);
    LAUNCH(encoder_bucket_kernel, 1, ENC_SORT_THREADS, 0, c->stream)(keys, meta, inp, N, npow2);
    LAUNCH_CHECK();
    // at most N buckets; the grid-stride loop needs no more blocks than the device runs at once
    const unsigned gx = (unsigned)N < c->max_grid ? (unsigned)N : c->max_grid;
    LAUNCH(encoder_backward_wte_kernel, dim3(gx, ceil_div(C, ENC_WTE_THREADS)), ENC_WTE_THREADS, 0, c->stream)(
        dwte, dout, keys, meta, C);
    LAUNCH_CHECK();
}
