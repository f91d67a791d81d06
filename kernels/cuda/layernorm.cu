// kernels/cuda/layernorm.cu — LayerNorm(C, eps=1e-5) forward (optionally fused with the
// residual add that precedes it) and backward.
//
// One warp per row: two passes over the row (mean, then the variance of the deviations, so
// no cancellation), butterfly shuffles for the reductions. Backward: dinp per row as in
// forward; dweight/dbias are column sums over rows, done deterministically in two stages
// (fixed chunks of rows, then the chunks summed in order, as bias_grad.cu), all in one launch.
//
// The residual branches' dropout rides on these kernels (Backend.residual_dropout_layernorm_forward
// and layernorm_backward_dropout): the forward adds a + dropout(b) with dropout.cu's mask and
// product (b is not written back), and the backward, once a row's dinp is complete, writes that
// row's gradient through the same mask (dropout_backward's product) in fp32 and/or rounded to the
// matmul type for the branch's c_proj backward. Same bits as the separate kernels, no pass of
// their own.
#include "kernels/cuda/cuda_ops.cuh"

#define LN_EPS 1e-5f

// Dropout of a residual branch applied inside a LayerNorm kernel: the mask of element i of the
// (N,C) tensor is dropout_keep(k.key, dropout_global_elem(k, i, row_len), thr), scale 1/(1-p);
// p = 0 gives thr 0 and scale 1: every element kept as it is.
struct LnDrop {
    DropoutKey k;
    size_t row_len;
    uint32_t thr;
    float scale;
};

static LnDrop ln_drop(long row_len, float p, DropoutKey k) {
    return LnDrop{ k, (size_t)row_len, p > 0.0f ? dropout_threshold(p) : 0u, p > 0.0f ? 1.0f / (1.0f - p) : 1.0f };
}

// x * keep(i) * scale as dropout.cu computes it (the product rounded on its own, never fused
// with an add that follows).
static __device__ __forceinline__ float ln_dropped(const DropoutKey &k, const LnDrop &d, size_t i, float x) {
    return dropout_keep(k.key, dropout_global_elem(k, i, d.row_len), d.thr) ? __fmul_rn(x, d.scale) : 0.0f;
}

// FUSED: res = a + b (DROP: a + dropout(b), b read only), then normalise res; else normalise a.
// out NULL: no fp32 output; out_lp non-NULL: the output rounded to T too (the operand of the
// matmul that reads it: round_kernel's rounding, so the GEMM multiplies the same values;
// kernels/backend.h, layernorm_forward_lp).
template <bool FUSED, bool DROP, class T>
__global__ void layernorm_forward_kernel(float *res, float *__restrict__ out, T *__restrict__ out_lp,
                                         float *__restrict__ mean,
                                         float *__restrict__ rstd, const float *a, const float *b,
                                         const float *__restrict__ weight,
                                         const float *__restrict__ bias, int N, int C, LnDrop drop) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= N) return;  // warp-uniform: the whole warp leaves
    const size_t base = (size_t)row * C;
    const float *x = a + base;
    if (FUSED) {
        if (DROP) {
            const DropoutKey k = dropout_key_at(drop.k);
            for (int c = lane; c < C; c += 32)
                res[base + c] = a[base + c] + ln_dropped(k, drop, base + c, b[base + c]);
        } else {
            for (int c = lane; c < C; c += 32) res[base + c] = a[base + c] + b[base + c];
        }
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

// The whole backward in one launch: block k owns the chunk of `rows` rows (cuda_colsum_rows(N))
// starting at k*rows; 256 threads = 8 warps.
//  1. dinp += rstd * (w*dout - mean(w*dout) - norm * mean(w*dout*norm)), one warp per row
//     (warp w takes rows r0+w, r0+w+8, ...), butterfly shuffles for the two row means.
//  2. the chunk's partial column sums: per warp (row phase w) and channel c, sum over the warp's
//     rows in ascending order of norm*dout (dweight) and of dout (dbias), then the 8 phases added
//     in order: part[(k*2 + 0)*C + c] (dweight's), part[(k*2 + 1)*C + c] (dbias's). Where the
//     per-warp sums fit in shared memory (lnb_smem: 2 x 8 x C floats, C <= 764) each lane adds
//     its channels' terms there while step 1 has the row in registers, so dout and inp are read
//     once; otherwise (wider C) a second pass per 32-channel tile re-reads the chunk's rows, lane
//     = channel, warp = row phase. Both sum the same terms in the same order: the same bits.
//  3. the block that finishes last (a ticket counter in device memory, which atomicInc wraps
//     back to 0 for the next launch) adds the chunks in index order: dweight[c] += sum_k
//     part[(k*2 + 0)*C + c], dbias likewise. Which block does it does not change the sum:
//     the result depends only on (N, C), bitwise, like the two-kernel colsum (bias_grad.cu).
//     One block alone runs this tail, a chain of N/32 L2 reads per column: each thread keeps
//     LNB_COLS columns' chains side by side and loads LNB_AHEAD chunks ahead before adding
//     them (same order), so the chain waits on N/32/LNB_AHEAD load latencies, not N/32.
//  With dbr / dbr_lp (DROP): the row's finished dinp, through the dropout mask (ln_dropped),
//  into dbr (fp32) and/or dbr_lp (rounded to T), overwritten, in step 1: a row's dinp is
//  complete once its warp has added to it (rows are independent).
#define LNB_WARPS 8
#define LNB_COLS 4    // finalize: columns per thread summed side by side
#define LNB_AHEAD 8   // finalize: chunks loaded ahead per column
// shared memory without an opt-in: 48 KB for static and dynamic together (the kernel's static
// `last` and its alignment are left room)
#define LNB_SMEM_MAX (48 * 1024 - 256)
// Dynamic shared memory of layernorm_backward_kernel: the per-warp column sums (2 x LNB_WARPS x C
// floats) where they fit, else the second pass's tile (2 x LNB_WARPS x 33 floats).
static size_t lnb_smem(int C, bool *sums_in_smem) {
    const size_t sums = (size_t)2 * LNB_WARPS * C * sizeof(float);
    *sums_in_smem = sums <= LNB_SMEM_MAX;
    return *sums_in_smem ? sums : (size_t)2 * LNB_WARPS * 33 * sizeof(float);
}
template <bool DROP, class T>
__global__ void layernorm_backward_kernel(float *__restrict__ dinp, float *dweight, float *dbias,
                                          float *part, unsigned *ticket,
                                          const float *__restrict__ dout, const float *__restrict__ inp,
                                          const float *__restrict__ weight, const float *__restrict__ mean,
                                          const float *__restrict__ rstd, int N, int C, int rows,
                                          float *__restrict__ dbr, T *__restrict__ dbr_lp, LnDrop drop,
                                          bool sums_in_smem) {
    DYNAMIC_SHARED(float, sh);
    __shared__ bool last;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int r0 = blockIdx.x * rows;
    const int r1 = r0 + rows < N ? r0 + rows : N;
    DropoutKey k = drop.k;
    if (DROP) k = dropout_key_at(drop.k);
    // sums_in_smem: this warp's column sums, sh[w*C + c] (dweight's) and sh[(LNB_WARPS + w)*C + c]
    float *cw = sh + (size_t)warp * C, *cb = sh + (size_t)(LNB_WARPS + warp) * C;
    if (sums_in_smem)
        for (int c = lane; c < C; c += 32) {
            cw[c] = 0.0f;
            cb[c] = 0.0f;
        }
    for (int row = r0 + warp; row < r1; row += LNB_WARPS) {   // 1. dinp, warp-uniform loop
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
            const float dc = d[c];
            const float norm = (x[c] - m) * rs;
            const float g = dx[c] + rs * (weight[c] * dc - mdn - norm * mdnn);
            dx[c] = g;
            if (DROP) {
                const float gd = ln_dropped(k, drop, base + c, g);
                if (dbr) dbr[base + c] = gd;
                if (dbr_lp) store_as(dbr_lp + base + c, gd);
            }
            if (sums_in_smem) {   // 2., while the row is at hand
                cw[c] += norm * dc;
                cb[c] += dc;
            }
        }
    }
    if (sums_in_smem) {                                       // 2. the 8 phases, in order
        __syncthreads();
        for (int c = threadIdx.x; c < C; c += blockDim.x) {
            float w = 0.0f, b = 0.0f;
            for (int p = 0; p < LNB_WARPS; p++) {
                w += sh[(size_t)p * C + c];
                b += sh[(size_t)(LNB_WARPS + p) * C + c];
            }
            part[((size_t)blockIdx.x * 2 + 0) * C + c] = w;
            part[((size_t)blockIdx.x * 2 + 1) * C + c] = b;
        }
    } else {
        float *sw = sh, *sb = sh + LNB_WARPS * 33;            // [LNB_WARPS][33] each
        for (int c0 = 0; c0 < C; c0 += 32) {                  // 2. a second pass, per 32-channel tile
            const int c = c0 + lane;
            float aw = 0.0f, ab = 0.0f;
            if (c < C)
                for (int r = r0 + warp; r < r1; r += LNB_WARPS) {
                    const float d = dout[(size_t)r * C + c];
                    aw += (inp[(size_t)r * C + c] - mean[r]) * rstd[r] * d;
                    ab += d;
                }
            sw[warp * 33 + lane] = aw;
            sb[warp * 33 + lane] = ab;
            __syncthreads();
            if (warp == 0 && c < C) {
                float w = 0.0f, b = 0.0f;
                for (int p = 0; p < LNB_WARPS; p++) {
                    w += sw[p * 33 + lane];
                    b += sb[p * 33 + lane];
                }
                part[((size_t)blockIdx.x * 2 + 0) * C + c] = w;
                part[((size_t)blockIdx.x * 2 + 1) * C + c] = b;
            }
            __syncthreads();   // sw/sb are reused by the next tile
        }
    }
    __threadfence();       // this block's partials are visible before its ticket is taken
    __syncthreads();
    if (threadIdx.x == 0) last = atomicInc(ticket, gridDim.x - 1) == gridDim.x - 1;
    __syncthreads();
    if (!last) return;     // block-uniform
    __threadfence();
    // 3. the chunks, in index order. Each column is one serial chain of gridDim.x adds; a thread
    // runs LNB_COLS columns' chains side by side and loads LNB_AHEAD chunks of each before it adds
    // them (independent loads in flight, the same order of adds).
    const int nchunk = (int)gridDim.x;
    for (int i0 = threadIdx.x; i0 < 2 * C; i0 += LNB_COLS * blockDim.x) {
        float acc[LNB_COLS];
        for (int q = 0; q < LNB_COLS; q++) acc[q] = 0.0f;
        int kc = 0;
        for (; kc + LNB_AHEAD <= nchunk; kc += LNB_AHEAD) {
            float v[LNB_AHEAD][LNB_COLS];
            for (int a = 0; a < LNB_AHEAD; a++) {
                const float *pk = part + (size_t)(kc + a) * 2 * C;   // chunk kc+a: dweight's C sums, then dbias's
                for (int q = 0; q < LNB_COLS; q++) {
                    const int i = i0 + q * blockDim.x;
                    v[a][q] = i < 2 * C ? __ldcg(pk + i) : 0.0f;
                }
            }
            for (int a = 0; a < LNB_AHEAD; a++)
                for (int q = 0; q < LNB_COLS; q++) acc[q] += v[a][q];
        }
        for (; kc < nchunk; kc++) {
            const float *pk = part + (size_t)kc * 2 * C;
            for (int q = 0; q < LNB_COLS; q++) {
                const int i = i0 + q * blockDim.x;
                if (i < 2 * C) acc[q] += __ldcg(pk + i);
            }
        }
        for (int q = 0; q < LNB_COLS; q++) {
            const int i = i0 + q * blockDim.x;
            float *out = i < C ? dweight : dbias;
            if (i < 2 * C && out) out[i < C ? i : i - C] += acc[q];
        }
    }
}

template <class T>
static void layernorm_forward_launch(CudaCtx *c, float *res, float *out, T *out_lp, float *mean, float *rstd,
                                     const float *a, const float *b, const float *weight, const float *bias,
                                     int N, int C, const LnDrop *drop) {
    const unsigned grid = ceil_div(N, ROWS_PER_BLOCK);
    const LnDrop d = drop ? *drop : LnDrop{};
    if (res && drop)
        LAUNCH((layernorm_forward_kernel<true, true, T>), grid, 32 * ROWS_PER_BLOCK, 0, c->stream)(
            res, out, out_lp, mean, rstd, a, b, weight, bias, N, C, d);
    else if (res)
        LAUNCH((layernorm_forward_kernel<true, false, T>), grid, 32 * ROWS_PER_BLOCK, 0, c->stream)(
            res, out, out_lp, mean, rstd, a, b, weight, bias, N, C, d);
    else
        LAUNCH((layernorm_forward_kernel<false, false, T>), grid, 32 * ROWS_PER_BLOCK, 0, c->stream)(
            nullptr, out, out_lp, mean, rstd, a, nullptr, weight, bias, N, C, d);
    LAUNCH_CHECK();
}

static void layernorm_forward_any(CudaCtx *c, float *res, float *out, void *out_lp, float *mean, float *rstd,
                                  const float *a, const float *b, const float *weight, const float *bias,
                                  int N, int C, const LnDrop *drop) {
    if (N <= 0) return;
    if (out_lp && c->dtype == DTYPE_BF16)
        layernorm_forward_launch(c, res, out, (__nv_bfloat16 *)out_lp, mean, rstd, a, b, weight, bias, N, C, drop);
    else if (out_lp && c->dtype == DTYPE_FP16)
        layernorm_forward_launch(c, res, out, (__half *)out_lp, mean, rstd, a, b, weight, bias, N, C, drop);
    else   // fp32 mode: the copy is the output itself (Backend.lp_size is 0 there; not reached by the model)
        layernorm_forward_launch(c, res, out ? out : (float *)out_lp, out ? (float *)out_lp : (float *)nullptr,
                                 mean, rstd, a, b, weight, bias, N, C, drop);
}

void cuda_layernorm_forward(CudaCtx *c, float *res, float *out, void *out_lp, float *mean, float *rstd,
                            const float *a, const float *b, const float *weight,
                            const float *bias, int N, int C) {
    layernorm_forward_any(c, res, out, out_lp, mean, rstd, a, b, weight, bias, N, C, nullptr);
}

// row_len must be a positive multiple of C (whole LayerNorm rows per dropout row; the masks are
// otherwise not dropout_forward's over the same tensor), reported like a failed CUDA call.
static void check_drop_rows(const char *op, long row_len, int C) {
    if (row_len <= 0 || row_len % C != 0) {
        char detail[128];
        snprintf(detail, sizeof detail, "row_len = %ld is not a positive multiple of C = %d", row_len, C);
        cuda_fatal(op, detail, __FILE__, __LINE__);
    }
}

void cuda_residual_dropout_layernorm_forward(CudaCtx *c, float *res, float *out, void *out_lp, float *mean,
                                             float *rstd, const float *a, const float *b, const float *weight,
                                             const float *bias, int N, int C, long row_len, float p, DropoutKey k) {
    if (N <= 0) return;
    check_drop_rows("residual_dropout_layernorm_forward", row_len, C);
    const LnDrop d = ln_drop(row_len, p, k);
    layernorm_forward_any(c, res, out, out_lp, mean, rstd, a, b, weight, bias, N, C, &d);
}

template <bool DROP, class T>
static void layernorm_backward_launch(CudaCtx *c, float *dinp, float *dweight, float *dbias, const float *dout,
                                      const float *inp, const float *weight, const float *mean, const float *rstd,
                                      int N, int C, float *dbr, T *dbr_lp, const LnDrop &d) {
    const int rows = cuda_colsum_rows(N), nchunk = (int)ceil_div(N, rows);
    float *part = (float *)cuda_scratch(c, SCR_PART, (size_t)nchunk * 2 * C * sizeof(float));
    bool sums_in_smem;
    const size_t smem = lnb_smem(C, &sums_in_smem);
    LAUNCH((layernorm_backward_kernel<DROP, T>), nchunk, 32 * LNB_WARPS, smem, c->stream)(
        dinp, dweight, dbias, part, c->ticket, dout, inp, weight, mean, rstd, N, C, rows, dbr, dbr_lp, d,
        sums_in_smem);
    LAUNCH_CHECK();
}

void cuda_layernorm_backward(CudaCtx *c, float *dinp, float *dweight, float *dbias,
                             const float *dout, const float *inp, const float *weight,
                             const float *mean, const float *rstd, int N, int C) {
    if (N <= 0) return;
    layernorm_backward_launch<false, float>(c, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C,
                                            nullptr, nullptr, LnDrop{});
}

void cuda_layernorm_backward_dropout(CudaCtx *c, float *dinp, float *dbranch, void *dbranch_lp, float *dweight,
                                     float *dbias, const float *dout, const float *inp, const float *weight,
                                     const float *mean, const float *rstd, int N, int C, long row_len, float p,
                                     DropoutKey k) {
    if (N <= 0) return;
    check_drop_rows("layernorm_backward_dropout", row_len, C);
    const LnDrop d = ln_drop(row_len, p, k);
    if (dbranch_lp && c->dtype == DTYPE_BF16)
        layernorm_backward_launch<true>(c, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, dbranch,
                                        (__nv_bfloat16 *)dbranch_lp, d);
    else if (dbranch_lp && c->dtype == DTYPE_FP16)
        layernorm_backward_launch<true>(c, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, dbranch,
                                        (__half *)dbranch_lp, d);
    else if (dbranch_lp)   // fp32 mode: the matmul type is fp32, the copy is the fp32 gradient
        layernorm_backward_launch<true, float>(c, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C,
                                               dbranch, (float *)dbranch_lp, d);
    else
        layernorm_backward_launch<true, float>(c, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C,
                                               dbranch, nullptr, d);
}
