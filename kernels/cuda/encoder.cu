// kernels/cuda/encoder.cu — token + position embedding, forward and backward.
//
// Backward, deterministically and without atomics: dwpe[t] sums dout[b,t] over b in order;
// dwte is a scatter by token, done as a gather, all on the device (no host synchronisation,
// so a CUDA graph can capture it): one block sorts the positions by token, positions
// ascending inside a token (a radix sort of stable counting sorts in shared memory, one pass
// when every token is below 256), and lists the start of each token's run (its bucket); then
// one thread per (bucket, channel) adds its bucket's rows in order. Both are exactly the CPU
// backend's summation order, so the results are bitwise equal to it. Three launches in all.
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
// inside a token, ignoring negative ids, into keys[0, nvalid) as (token << 32 | position), and
// lists the buckets: meta[0] = nb (the distinct tokens >= 0), meta[1 + k] = the first sorted
// index of bucket k (k < nb), meta[1 + nb] = nvalid (the positions with a token >= 0).
// The sort is a least-significant-digit radix sort, 8 bits per pass, as many passes as the
// largest token needs (1 below 256, as for char-level vocabularies; 3 for any Unicode code
// point), each pass a stable counting sort, so positions stay ascending inside a token. In a
// pass warp w owns the elements [w*per, (w+1)*per) and counts their digits in its own histogram
// row (lanes with the same digit meet in __match_any_sync; the lowest adds for them all); the
// rows are scanned bin-major, warp-minor, so warp w's elements of a digit follow warp w-1's;
// the warps then walk their elements again and place each at its row's offset plus its rank
// among the lower lanes with the same digit. Passes alternate between keys and tmp, ending in
// keys. Then each thread marks the bucket starts in a contiguous chunk of the sorted keys.
#define ENC_BINS 256
#define ENC_WARPS (ENC_SORT_THREADS / 32)
__global__ void __launch_bounds__(ENC_SORT_THREADS)
encoder_bucket_kernel(uint64_t *__restrict__ keys, uint64_t *__restrict__ tmp, int32_t *__restrict__ meta,
                      const int32_t *__restrict__ inp, int N) {
    __shared__ int s_hist[ENC_WARPS][ENC_BINS];   // per-warp digit counts, then offsets
    __shared__ int s_cnt[ENC_SORT_THREADS];
    __shared__ int s_max, s_n;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const unsigned below = (1u << lane) - 1u;

    // the largest token (block reduction): the number of passes
    int mx = -1;
    for (int i = tid; i < N; i += ENC_SORT_THREADS) mx = max(mx, (int)inp[i]);
    mx = __reduce_max_sync(0xffffffffu, mx);
    if (tid == 0) { s_max = -1; s_n = N; }
    __syncthreads();
    if (lane == 0) atomicMax(&s_max, mx);
    __syncthreads();
    const int passes = s_max < (1 << 8) ? 1 : s_max < (1 << 16) ? 2 : s_max < (1 << 24) ? 3 : 4;

    for (int pass = 0; pass < passes; pass++) {
        const int shift = 8 * pass, n = s_n;   // pass 0: all N positions; then the valid ones
        const uint64_t *src = pass % 2 == passes % 2 ? keys : tmp;   // (unused in pass 0)
        uint64_t *dst = (passes - 1 - pass) % 2 == 0 ? keys : tmp;
        const int per = (n + ENC_WARPS - 1) / ENC_WARPS;
        const int lo = min(warp * per, n), hi = min(lo + per, n);
        for (int b = lane; b < ENC_BINS; b += 32) s_hist[warp][b] = 0;
        __syncwarp();
        for (int base = lo; base < hi; base += 32) {   // the same number of rounds on every lane
            const int e = base + lane;
            int d = -1;   // the element's digit; -1: none (past the end, or a negative token)
            if (e < hi) {
                const uint32_t t = pass == 0 ? (uint32_t)inp[e] : (uint32_t)(src[e] >> 32);
                if (pass > 0 || (int32_t)t >= 0) d = (int)((t >> shift) & (ENC_BINS - 1));
            }
            const unsigned peers = __match_any_sync(0xffffffffu, d);
            if (d >= 0 && (peers & below) == 0) s_hist[warp][d] += __popc(peers);
            __syncwarp();
        }
        __syncthreads();
        if (tid < ENC_BINS) {   // digit totals
            int t = 0;
            for (int w = 0; w < ENC_WARPS; w++) t += s_hist[w][tid];
            s_cnt[tid] = t;
        }
        __syncthreads();
        if (tid == 0) {   // digit starts; their total is the number of valid positions
            int off = 0;
            for (int b = 0; b < ENC_BINS; b++) { const int t = s_cnt[b]; s_cnt[b] = off; off += t; }
            s_n = off;
        }
        __syncthreads();
        if (tid < ENC_BINS) {   // each warp's first slot per digit: bin-major, warp-minor
            int off = s_cnt[tid];
            for (int w = 0; w < ENC_WARPS; w++) { const int t = s_hist[w][tid]; s_hist[w][tid] = off; off += t; }
        }
        __syncthreads();
        for (int base = lo; base < hi; base += 32) {
            const int e = base + lane;
            int d = -1;
            uint64_t key = 0;
            if (e < hi) {
                key = pass == 0 ? ((uint64_t)(uint32_t)inp[e] << 32) | (uint32_t)e : src[e];
                const uint32_t t = (uint32_t)(key >> 32);
                if (pass > 0 || (int32_t)t >= 0) d = (int)((t >> shift) & (ENC_BINS - 1));
            }
            const unsigned peers = __match_any_sync(0xffffffffu, d);
            const int at = d >= 0 ? s_hist[warp][d] + __popc(peers & below) : 0;
            __syncwarp();
            if (d >= 0) {
                dst[at] = key;
                if ((peers & below) == 0) s_hist[warp][d] += __popc(peers);
            }
            __syncwarp();
        }
        __syncthreads();
    }

    // bucket starts: thread tid marks those in the contiguous chunk [lo, hi) of keys[0, nvalid)
    const int nvalid = s_n;
    const int per = (nvalid + ENC_SORT_THREADS - 1) / ENC_SORT_THREADS;
    const int lo = min(tid * per, nvalid), hi = min(lo + per, nvalid);
    int cnt = 0;
    for (int i = lo; i < hi; i++) cnt += i == 0 || key_token(keys[i - 1]) != key_token(keys[i]);
    s_cnt[tid] = cnt;
    __syncthreads();
    if (tid == 0) {   // exclusive scan over the chunk counts
        int off = 0;
        for (int t = 0; t < ENC_SORT_THREADS; t++) { const int x = s_cnt[t]; s_cnt[t] = off; off += x; }
        meta[0] = off;
        meta[1 + off] = nvalid;
    }
    __syncthreads();
    int k = s_cnt[tid];
    for (int i = lo; i < hi; i++)
        if (i == 0 || key_token(keys[i - 1]) != key_token(keys[i])) meta[1 + k++] = i;
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

    // scratch: keys, tmp (N uint64 each) | meta (nb, start[0..nb]: at most N + 2 int32)
    const size_t key_bytes = (size_t)N * sizeof(uint64_t);
    char *s = (char *)cuda_scratch(c, SCR_TOK, 2 * key_bytes + ((size_t)N + 2) * sizeof(int32_t));
    uint64_t *keys = (uint64_t *)s, *tmp = (uint64_t *)(s + key_bytes);
    int32_t *meta = (int32_t *)(s + 2 * key_bytes);
    LAUNCH(encoder_bucket_kernel, 1, ENC_SORT_THREADS, 0, c->stream)(keys, tmp, meta, inp, N);
    LAUNCH_CHECK();
    // at most N buckets; the grid-stride loop needs no more blocks than the device runs at once
    const unsigned gx = (unsigned)N < c->max_grid ? (unsigned)N : c->max_grid;
    LAUNCH(encoder_backward_wte_kernel, dim3(gx, ceil_div(C, ENC_WTE_THREADS)), ENC_WTE_THREADS, 0, c->stream)(
        dwte, dout, keys, meta, C);
    LAUNCH_CHECK();
}
