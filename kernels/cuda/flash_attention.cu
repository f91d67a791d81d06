// kernels/cuda/flash_attention.cu — fused causal attention for bf16/fp16 matmul inputs
// (FlashAttention-2: Dao, "FlashAttention-2: Faster Attention with Better Parallelism and Work
// Partitioning", 2023), tensor cores through nvcuda::wmma. No T x T tensor is ever written to
// global memory: one kernel forward, two backward.
//
// Taken by cuda_attention_forward / _backward (attention.cu) when MINGPT_CUDA_ATTENTION=fused
// (not the default: on the one GPU that timed them they were slower than the cuBLAS path,
// kernels/backend.h), matmul_dtype is BF16 or FP16, hs is a multiple of 16 up to 128, any T
// (cuda_flash_attention_ok); otherwise the cuBLAS path of attention.cu runs.
//
// Same numerics as attention.cu's path up to summation order: q, k, v, dy rounded to the
// compute dtype; scores q.k in fp32 (wmma), scaled by 1/sqrt(hs) in fp32; softmax in fp32; the
// dropped-out probabilities rounded to the compute dtype before the product with v (here
// unnormalised, exp(s - running max), the division by the row sum follows in fp32); the
// gradient of the scores rounded before its products with k and q. Dropout: the very masks of
// attention.cu and the CPU backend (element (b,h,t,t2) keyed by dropout_global_index(k, b,
// NH*T*T, (h*T + t)*T + t2)).
//
// What the forward saves in `att` (B*NH*T*max(T, hs+1) floats in bf16/fp16, kernels/backend.h:
// attention_att_floats; the backward of the same backend reads it): att[0 .. B*NH*T) the
// log-sum-exp of each scaled score row (max + log(sum)), att[B*NH*T ..) the attention output per
// head (B,NH,T,hs) fp32 (for D = rowsum(dy * y)); together B*NH*T*(1+hs) floats, so any T.
//
// Forward, one block per (b, h, tile of FA_ROWS queries), grid-stride over them (longest
// tiles first), FA_WARPS warps of 16 query rows: the q tile in shared memory; for each tile
// of FA_COLS keys up to the diagonal (tiles wholly above it are never loaded, warps whose 16
// rows all precede the tile skip it): S = q k^T (wmma, fp32), the online softmax (running
// max m and sum l per row, fp32; two lanes per row, 16 columns each), P = exp(S - m) with
// dropout, rounded; O = alpha O + P v (wmma; O in shared memory fp32, rescaled by
// alpha = exp(m_old - m_new) row-wise by the lanes, since the element-to-position mapping of
// a wmma fragment is unspecified). out (B,T,C) = O / l written directly.
// Backward: D = rowsum(dy * y); then (deterministic: no atomics, every gradient element
// written by one block)
//   flash_bwd_dq_kernel  per (b, h, tile of FA_ROWS queries): D of its rows (also stored for
//     the next kernel, in `scratch`); over key tiles up to the diagonal: S = q k^T,
//     P = exp(S scale - lse), dP = dy v^T, dS = P (dP m - D) scale (rounded), dq += dS k;
//   flash_bwd_dkv_kernel per (b, h, tile of FA_ROWS keys): over query tiles from the
//     diagonal to T: S^T = k q^T, dP^T = v dy^T, dv += (P m)^T dy, dk += dS^T q.
// q, k, v come from qkv (B,T,3C) fp32, rounded as they are loaded, or from its compute-dtype copy
// qkv_lp (c_attn's output as its GEMM wrote it: Backend.matmul_forward_lp's out_lp), copied as
// they are: the same values either way (nothing is scaled before the rounding; 1/sqrt(hs)
// multiplies the fp32 scores).
// dq, dk, dv go straight into dqkv (B,T,3C) (overwritten) and/or, rounded to the compute dtype in
// the same store, into dqkv_lp (attn.c_attn's output-gradient operand: no rounding pass before its
// GEMMs).
#include <mma.h>
#include <algorithm>
#include <type_traits>

#include "kernels/cuda/cuda_ops.cuh"

using namespace nvcuda;

#define FA_ROWS 64                 // rows a block owns: queries (forward, dq), keys (dk/dv)
#define FA_COLS 32                 // the inner tile: keys (forward, dq), queries (dk/dv)
#define FA_WARPS (FA_ROWS / 16)    // one warp per 16 rows
#define FA_THREADS (32 * FA_WARPS)
// Leading dimensions of the shared-memory tiles, padded by 16 bytes: a row stride that is a
// multiple of 128 bytes puts the rows a wmma fragment load or store touches (and the rows the
// lanes of the softmax loops own) in the same banks; 16 bytes more spreads them over all 32.
// Only where the values sit changes, not one result bit.
#define FA_LDP (FA_COLS + 8)                                    // 16-bit, FA_COLS wide
#define FA_LDS (FA_COLS + 4)                                    // fp32, FA_COLS wide
static __host__ __device__ __forceinline__ int fa_ldq(int hs) { return hs + 8; }   // 16-bit, hs wide
static __host__ __device__ __forceinline__ int fa_ldo(int hs) { return hs + 4; }   // fp32, hs wide

typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> FragAcc;

// 32-byte unit of dynamic shared memory (wmma pointers must be 32-byte aligned)
struct __align__(32) FaSmem { float v[8]; };

struct FlashArgs {
    int B, NH, T, hs;
    float scale;
    bool use_drop;
    DropoutKey dk;
    uint32_t thr;
    float keep_scale;
};

// Elements each thread loads before it stores any (fa_load): that many global loads in flight
// per thread instead of one load's latency per element.
#define FA_LOAD_UNROLL 8
// Rows of D = rowsum(dy * y) a lane sums at once (flash_bwd_dq_kernel); divides 16
#define FA_D_ROWS 4

// (r, c) of element i + blockDim.x from that of element i, where blockDim.x = dr hs + dc
static __device__ __forceinline__ void fa_next(int &r, int &c, int dr, int dc, int hs) {
    r += dr;
    c += dc;
    if (c >= hs) { c -= hs; r++; }
}

// Rows t0 .. t0+n-1 of a (B,T,row) tensor from `src` (batch b, first column of the head's
// part): n x hs at dst (leading dimension fa_ldq(hs)), rounded to T, zero for rows >= T (whole
// block). src of type T (qkv's copy): the values copied as they are (a T widened to fp32 and
// stored back is itself, so this is bitwise rounding the fp32 tensor the copy was rounded from).
// Element i = r hs + c of the tile is thread i % blockDim.x's (consecutive threads, consecutive
// columns: coalesced); each thread first loads its next FA_LOAD_UNROLL elements, blockDim.x
// apart, then stores them, so their loads overlap (a constant trip count: nvcc unrolls both
// loops and keeps v in registers; build/nv/resource-usage.log shows no stack frame); (r, c)
// advance by blockDim.x without a division per element.
template <class T, class S>
static __device__ __forceinline__ void fa_load(T *dst, const S *src, size_t row, int t0, int n, int Tn, int hs) {
    const int total = n * hs, step = (int)blockDim.x, dr = step / hs, dc = step % hs;
    int r = (int)threadIdx.x / hs, c = (int)threadIdx.x % hs;
    for (int i = (int)threadIdx.x; i < total; i += FA_LOAD_UNROLL * step) {
        float v[FA_LOAD_UNROLL];
        int rr = r, cc = c;
        for (int u = 0; u < FA_LOAD_UNROLL; u++) {
            v[u] = i + u * step < total && t0 + rr < Tn ? load_f(src + (size_t)(t0 + rr) * row + cc) : 0.0f;
            fa_next(rr, cc, dr, dc, hs);
        }
        for (int u = 0; u < FA_LOAD_UNROLL; u++) {
            if (i + u * step < total) store_as(dst + r * fa_ldq(hs) + c, v[u]);
            fa_next(r, c, dr, dc, hs);
        }
    }
}

// The q (part 0), k (1) or v (2) rows t0 .. t0+n-1 of head h, batch b, from qkv (B,T,3C) fp32,
// or from its compute-dtype copy qkv_lp when that is given (block-uniform).
template <class T>
static __device__ __forceinline__ void fa_load_qkv(T *dst, const float *qkv, const T *qkv_lp, int b, int h, int part,
                                                   int t0, int n, int Tn, int hs, int C) {
    const size_t off = (size_t)b * Tn * 3 * C + (size_t)part * C + (size_t)h * hs;
    if (qkv_lp) fa_load(dst, qkv_lp + off, 3 * (size_t)C, t0, n, Tn, hs);
    else fa_load(dst, qkv + off, 3 * (size_t)C, t0, n, Tn, hs);
}

// Dropout mask index of score (b, h, t, 0): attention.cu's softmax kernels' mask; (b, h, t, t2)
// is this + t2.
static __device__ __forceinline__ uint64_t fa_row_index(const FlashArgs &a, int b, int h, int t) {
    return dropout_global_index(a.dk, b, (int64_t)a.NH * a.T * a.T, ((int64_t)h * a.T + t) * a.T);
}
static __device__ __forceinline__ float fa_mult(const FlashArgs &a, uint64_t idx) {
    if (!a.use_drop) return 1.0f;
    return dropout_keep(a.dk.key, idx, a.thr) ? a.keep_scale : 0.0f;
}
static __device__ __forceinline__ float fa_mult(const FlashArgs &a, int b, int h, int t, int t2) {
    return fa_mult(a, fa_row_index(a, b, h, t) + t2);
}

// One warp: the 16x16 fp32 tile at dst (leading dimension ldd) = (acc ? dst : 0) + A B, A 16 x K
// row-major at a (lda), B K x 16 whose element (k, n) is b[k*ldb + n] (LB row_major) or
// b[n*ldb + k] (col_major); K a multiple of 16.
template <class T, class LB>
static __device__ __forceinline__ void fa_mma(float *dst, int ldd, bool acc, const T *a, int lda, const T *b, int ldb,
                                              int K) {
    FragAcc c;
    if (acc) wmma::load_matrix_sync(c, dst, ldd, wmma::mem_row_major);
    else wmma::fill_fragment(c, 0.0f);
    const bool brow = std::is_same<LB, wmma::row_major>::value;
    for (int kk = 0; kk < K; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, LB> fb;
        wmma::load_matrix_sync(fa, a + kk, lda);
        wmma::load_matrix_sync(fb, brow ? b + (size_t)kk * ldb : b + kk, ldb);
        wmma::mma_sync(c, fa, fb, c);
    }
    wmma::store_matrix_sync(dst, c, ldd, wmma::mem_row_major);
}

// ---------------------------------------------------------------- forward
static size_t fa_fwd_smem(int hs, size_t ts) {
    return (size_t)(FA_ROWS * fa_ldq(hs) + 2 * FA_COLS * fa_ldq(hs) + FA_ROWS * FA_LDP) * ts +
           (size_t)(FA_ROWS * FA_LDS + FA_ROWS * fa_ldo(hs) + 2 * FA_ROWS) * sizeof(float);
}

template <class T>
__global__ void __launch_bounds__(FA_THREADS, 1) flash_fwd_kernel(float *__restrict__ out, T *__restrict__ out_lp,
                                                               float *__restrict__ lse,
                                                               float *__restrict__ ybuf, const float *__restrict__ qkv,
                                                               const T *__restrict__ qkv_lp, FlashArgs a) {
    DYNAMIC_SHARED(FaSmem, smem);
    a.dk = dropout_key_at(a.dk);   // the step's key (graph replays: read from a.dk.dev)
    const int hs = a.hs, Tn = a.T, C = a.NH * hs, LQ = fa_ldq(hs), LO = fa_ldo(hs);
    T *sq = (T *)smem;                            // FA_ROWS x hs (leading dimension LQ)
    T *sk = sq + FA_ROWS * LQ;                    // FA_COLS x hs (LQ)
    T *sv = sk + FA_COLS * LQ;                    // FA_COLS x hs (LQ)
    T *sp = sv + FA_COLS * LQ;                    // FA_ROWS x FA_COLS (FA_LDP): dropped-out P, rounded
    float *ss = (float *)(sp + FA_ROWS * FA_LDP); // FA_ROWS x FA_COLS (FA_LDS): scores
    float *so = ss + FA_ROWS * FA_LDS;            // FA_ROWS x hs (LO): O (unnormalised)
    float *sinv = so + FA_ROWS * LO;              // FA_ROWS: 1 / l
    float *slse = sinv + FA_ROWS;                 // FA_ROWS: m + log l
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int nq = (Tn + FA_ROWS - 1) / FA_ROWS, total = a.B * a.NH * nq;
    for (int w = blockIdx.x; w < total; w += gridDim.x) {
        const int bh = w / nq, qt = nq - 1 - w % nq, b = bh / a.NH, h = bh % a.NH, q0 = qt * FA_ROWS;
        __syncthreads();   // the previous tile's reads of shared memory are done
        fa_load_qkv(sq, qkv, qkv_lp, b, h, 0, q0, FA_ROWS, Tn, hs, C);
        for (int i = threadIdx.x; i < FA_ROWS * LO; i += blockDim.x) so[i] = 0.0f;
        // this lane's row (two lanes per row, columns half*16 .. half*16+15 of each key tile)
        const int rw = lane >> 1, half = lane & 1, r = warp * 16 + rw, t = q0 + r;
        const int wq0 = q0 + warp * 16;                          // the warp's first query
        float m = -INFINITY, l = 0.0f;
        const int nk = (min(q0 + FA_ROWS, Tn) - 1) / FA_COLS + 1;   // key tiles up to the diagonal
        float *sw = ss + warp * 16 * FA_LDS, *ow = so + warp * 16 * LO;
        T *pw = sp + warp * 16 * FA_LDP;
        for (int kt = 0; kt < nk; kt++) {
            const int k0 = kt * FA_COLS;
            __syncthreads();
            fa_load_qkv(sk, qkv, qkv_lp, b, h, 1, k0, FA_COLS, Tn, hs, C);
            fa_load_qkv(sv, qkv, qkv_lp, b, h, 2, k0, FA_COLS, Tn, hs, C);
            __syncthreads();
            if (wq0 >= Tn || wq0 + 15 < k0) continue;   // warp-uniform: no row of the warp sees this tile
            for (int j = 0; j < FA_COLS; j += 16)
                fa_mma<T, wmma::col_major>(sw + j, FA_LDS, false, sq + warp * 16 * LQ, LQ, sk + j * LQ, LQ, hs);
            __syncwarp();
            const bool live = t < Tn;
            const float *srow = sw + rw * FA_LDS + half * 16;
            float mx = -INFINITY;
            for (int c = 0; c < 16; c++)
                if (live && k0 + half * 16 + c <= t) mx = fmaxf(mx, srow[c] * a.scale);
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            const float mn = fmaxf(m, mx), mu = mn == -INFINITY ? 0.0f : mn;
            const float alpha = expf(m - mu);   // 0 on the first tile (m = -inf)
            float sum = 0.0f;
            T *prow = pw + rw * FA_LDP + half * 16;
            const uint64_t idx0 = fa_row_index(a, b, h, t);
            for (int c = 0; c < 16; c++) {
                const int t2 = k0 + half * 16 + c;
                float p = 0.0f, pd = 0.0f;
                if (live && t2 <= t) {
                    p = expf(srow[c] * a.scale - mu);
                    pd = p * fa_mult(a, idx0 + t2);
                }
                sum += p;
                store_as(prow + c, pd);
            }
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            l = l * alpha + sum;
            m = mn;
            float *orow = ow + rw * LO;
            for (int c = half * (hs / 2); c < (half + 1) * (hs / 2); c++) orow[c] *= alpha;
            __syncwarp();
            for (int j = 0; j < hs; j += 16)
                fa_mma<T, wmma::row_major>(ow + j, LO, true, pw, FA_LDP, sv + j, LQ, FA_COLS);
            __syncwarp();
        }
        if (half == 0) {
            sinv[r] = 1.0f / l;   // l > 0 for every row < T (its diagonal term is exp(0))
            slse[r] = m + logf(l);
        }
        __syncwarp();
        // the warp's 16 rows, lanes along the columns
        for (int i = lane; i < 16 * hs; i += 32) {
            const int rr = warp * 16 + i / hs, c = i % hs, tt = q0 + rr;
            if (tt >= Tn) continue;
            const float y = so[rr * LO + c] * sinv[rr];
            const size_t o = ((size_t)b * Tn + tt) * C + (size_t)h * hs + c;
            if (out) out[o] = y;
            if (out_lp) store_as(out_lp + o, y);   // attn.c_proj's operand (kernels/backend.h)
            ybuf[((size_t)bh * Tn + tt) * hs + c] = y;
        }
        if (lane < 16 && wq0 + lane < Tn) lse[(size_t)bh * Tn + wq0 + lane] = slse[warp * 16 + lane];
    }
}

// ---------------------------------------------------------------- backward: dq (and D)
static size_t fa_dq_smem(int hs, size_t ts) {
    return (size_t)(2 * FA_ROWS * fa_ldq(hs) + 2 * FA_COLS * fa_ldq(hs) + FA_ROWS * FA_LDP) * ts +
           (size_t)(2 * FA_ROWS * FA_LDS + FA_ROWS * fa_ldo(hs) + 2 * FA_ROWS) * sizeof(float);
}

template <class T>
__global__ void __launch_bounds__(FA_THREADS, 1) flash_bwd_dq_kernel(float *__restrict__ dqkv, T *__restrict__ dqkv_lp,
                                                                  float *__restrict__ Dg,
                                                                  const float *__restrict__ dout,
                                                                  const float *__restrict__ qkv,
                                                                  const T *__restrict__ qkv_lp,
                                                                  const float *__restrict__ lse,
                                                                  const float *__restrict__ ybuf, FlashArgs a) {
    DYNAMIC_SHARED(FaSmem, smem);
    a.dk = dropout_key_at(a.dk);   // the step's key (graph replays: read from a.dk.dev)
    const int hs = a.hs, Tn = a.T, C = a.NH * hs, LQ = fa_ldq(hs), LO = fa_ldo(hs);
    T *sq = (T *)smem;                    // FA_ROWS x hs (leading dimension LQ)
    T *sdo = sq + FA_ROWS * LQ;           // FA_ROWS x hs (LQ)
    T *sk = sdo + FA_ROWS * LQ;           // FA_COLS x hs (LQ)
    T *sv = sk + FA_COLS * LQ;            // FA_COLS x hs (LQ)
    T *sds = sv + FA_COLS * LQ;           // FA_ROWS x FA_COLS (FA_LDP): dS, rounded
    float *ss = (float *)(sds + FA_ROWS * FA_LDP);   // FA_ROWS x FA_COLS (FA_LDS): S
    float *sdp = ss + FA_ROWS * FA_LDS;   // FA_ROWS x FA_COLS (FA_LDS): dP = dy v^T
    float *sdq = sdp + FA_ROWS * FA_LDS;  // FA_ROWS x hs (LO)
    float *slse = sdq + FA_ROWS * LO, *sD = slse + FA_ROWS;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int nq = (Tn + FA_ROWS - 1) / FA_ROWS, total = a.B * a.NH * nq;
    for (int w = blockIdx.x; w < total; w += gridDim.x) {
        const int bh = w / nq, qt = nq - 1 - w % nq, b = bh / a.NH, h = bh % a.NH, q0 = qt * FA_ROWS;
        const float *dbase = dout + (size_t)b * Tn * C + (size_t)h * hs;
        const int wq0 = q0 + warp * 16;
        __syncthreads();
        fa_load_qkv(sq, qkv, qkv_lp, b, h, 0, q0, FA_ROWS, Tn, hs, C);
        fa_load(sdo, dbase, (size_t)C, q0, FA_ROWS, Tn, hs);
        for (int i = threadIdx.x; i < FA_ROWS * LO; i += blockDim.x) sdq[i] = 0.0f;
        // D = rowsum(dy * y) of the warp's rows (fp32), kept for flash_bwd_dkv_kernel too. Each
        // lane sums its columns of FA_D_ROWS rows at once (their loads in flight together, not two
        // per row in turn; every row's terms in the order of one row at a time), then one warp sum
        // per row. More rows at once cost registers the kernel's occupancy needs.
        for (int r0 = 0; r0 < 16; r0 += FA_D_ROWS) {
            float part[FA_D_ROWS];
            for (int u = 0; u < FA_D_ROWS; u++) part[u] = 0.0f;
            for (int c = lane; c < hs; c += 32)
                for (int u = 0; u < FA_D_ROWS; u++) {
                    const int t = wq0 + r0 + u;
                    if (t < Tn) part[u] += dbase[(size_t)t * C + c] * ybuf[((size_t)bh * Tn + t) * hs + c];
                }
            for (int u = 0; u < FA_D_ROWS; u++) {
                const int rr = r0 + u, t = wq0 + rr;
                const float s = warp_sum(part[u]);
                if (lane == 0) {
                    sD[warp * 16 + rr] = s;
                    slse[warp * 16 + rr] = t < Tn ? lse[(size_t)bh * Tn + t] : 0.0f;
                    if (t < Tn) Dg[(size_t)bh * Tn + t] = s;
                }
            }
        }
        const int nk = (min(q0 + FA_ROWS, Tn) - 1) / FA_COLS + 1;
        float *sw = ss + warp * 16 * FA_LDS, *dpw = sdp + warp * 16 * FA_LDS, *dqw = sdq + warp * 16 * LO;
        T *dsw = sds + warp * 16 * FA_LDP;
        for (int kt = 0; kt < nk; kt++) {
            const int k0 = kt * FA_COLS;
            __syncthreads();
            fa_load_qkv(sk, qkv, qkv_lp, b, h, 1, k0, FA_COLS, Tn, hs, C);
            fa_load_qkv(sv, qkv, qkv_lp, b, h, 2, k0, FA_COLS, Tn, hs, C);
            __syncthreads();
            if (wq0 >= Tn || wq0 + 15 < k0) continue;   // warp-uniform
            for (int j = 0; j < FA_COLS; j += 16) {
                fa_mma<T, wmma::col_major>(sw + j, FA_LDS, false, sq + warp * 16 * LQ, LQ, sk + j * LQ, LQ, hs);
                fa_mma<T, wmma::col_major>(dpw + j, FA_LDS, false, sdo + warp * 16 * LQ, LQ, sv + j * LQ, LQ, hs);
            }
            __syncwarp();
            for (int e = lane; e < 16 * FA_COLS; e += 32) {
                const int rr = e / FA_COLS, cc = e % FA_COLS, t = wq0 + rr, t2 = k0 + cc;
                float ds = 0.0f;
                if (t < Tn && t2 <= t) {
                    const float p = expf(sw[rr * FA_LDS + cc] * a.scale - slse[warp * 16 + rr]);
                    ds = p * (dpw[rr * FA_LDS + cc] * fa_mult(a, b, h, t, t2) - sD[warp * 16 + rr]) * a.scale;
                }
                store_as(dsw + rr * FA_LDP + cc, ds);
            }
            __syncwarp();
            for (int j = 0; j < hs; j += 16)
                fa_mma<T, wmma::row_major>(dqw + j, LO, true, dsw, FA_LDP, sk + j, LQ, FA_COLS);
            __syncwarp();
        }
        for (int i = lane; i < 16 * hs; i += 32) {
            const int r = i / hs, t = wq0 + r, c = i % hs;
            if (t >= Tn) continue;
            const size_t o = ((size_t)b * Tn + t) * 3 * C + (size_t)h * hs + c;
            if (dqkv) dqkv[o] = dqw[r * LO + c];
            if (dqkv_lp) store_as(dqkv_lp + o, dqw[r * LO + c]);   // attn.c_attn's operand (kernels/backend.h)
        }
    }
}

// ---------------------------------------------------------------- backward: dk, dv
static size_t fa_dkv_smem(int hs, size_t ts) {
    return (size_t)(2 * FA_ROWS * fa_ldq(hs) + 2 * FA_COLS * fa_ldq(hs) + 2 * FA_ROWS * FA_LDP) * ts +
           (size_t)(2 * FA_ROWS * FA_LDS + 2 * FA_ROWS * fa_ldo(hs) + 2 * FA_COLS) * sizeof(float);
}

template <class T>
__global__ void __launch_bounds__(FA_THREADS, 1) flash_bwd_dkv_kernel(float *__restrict__ dqkv, T *__restrict__ dqkv_lp,
                                                                   const float *__restrict__ Dg,
                                                                   const float *__restrict__ dout,
                                                                   const float *__restrict__ qkv,
                                                                   const T *__restrict__ qkv_lp,
                                                                   const float *__restrict__ lse, FlashArgs a) {
    DYNAMIC_SHARED(FaSmem, smem);
    a.dk = dropout_key_at(a.dk);   // the step's key (graph replays: read from a.dk.dev)
    const int hs = a.hs, Tn = a.T, C = a.NH * hs, LQ = fa_ldq(hs), LO = fa_ldo(hs);
    T *sk = (T *)smem;                    // FA_ROWS x hs (keys; leading dimension LQ)
    T *sv = sk + FA_ROWS * LQ;            // FA_ROWS x hs (LQ)
    T *sq = sv + FA_ROWS * LQ;            // FA_COLS x hs (queries; LQ)
    T *sdo = sq + FA_COLS * LQ;           // FA_COLS x hs (LQ)
    T *spt = sdo + FA_COLS * LQ;          // FA_ROWS x FA_COLS (FA_LDP): (P m)^T, rounded
    T *sdst = spt + FA_ROWS * FA_LDP;     // FA_ROWS x FA_COLS (FA_LDP): dS^T, rounded
    float *sst = (float *)(sdst + FA_ROWS * FA_LDP);   // S^T (FA_LDS)
    float *sdpt = sst + FA_ROWS * FA_LDS;              // dP^T = v dy^T (FA_LDS)
    float *sdk = sdpt + FA_ROWS * FA_LDS;              // FA_ROWS x hs (LO)
    float *sdv = sdk + FA_ROWS * LO;                   // FA_ROWS x hs (LO)
    float *slse = sdv + FA_ROWS * LO, *sD = slse + FA_COLS;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int nkt = (Tn + FA_ROWS - 1) / FA_ROWS, total = a.B * a.NH * nkt;
    for (int w = blockIdx.x; w < total; w += gridDim.x) {
        const int bh = w / nkt, kt = w % nkt, b = bh / a.NH, h = bh % a.NH, k0 = kt * FA_ROWS;
        const float *dbase = dout + (size_t)b * Tn * C + (size_t)h * hs;
        const int wk0 = k0 + warp * 16;   // the warp's first key
        __syncthreads();
        fa_load_qkv(sk, qkv, qkv_lp, b, h, 1, k0, FA_ROWS, Tn, hs, C);
        fa_load_qkv(sv, qkv, qkv_lp, b, h, 2, k0, FA_ROWS, Tn, hs, C);
        for (int i = threadIdx.x; i < 2 * FA_ROWS * LO; i += blockDim.x) sdk[i] = 0.0f;   // sdk and sdv
        float *stw = sst + warp * 16 * FA_LDS, *dptw = sdpt + warp * 16 * FA_LDS;
        float *dkw = sdk + warp * 16 * LO, *dvw = sdv + warp * 16 * LO;
        T *ptw = spt + warp * 16 * FA_LDP, *dstw = sdst + warp * 16 * FA_LDP;
        const int nq = (Tn + FA_COLS - 1) / FA_COLS;
        for (int qt = k0 / FA_COLS; qt < nq; qt++) {   // query tiles from the diagonal on
            const int q0 = qt * FA_COLS;
            __syncthreads();
            fa_load_qkv(sq, qkv, qkv_lp, b, h, 0, q0, FA_COLS, Tn, hs, C);
            fa_load(sdo, dbase, (size_t)C, q0, FA_COLS, Tn, hs);
            for (int i = threadIdx.x; i < FA_COLS; i += blockDim.x) {
                const int t = q0 + i;
                slse[i] = t < Tn ? lse[(size_t)bh * Tn + t] : 0.0f;
                sD[i] = t < Tn ? Dg[(size_t)bh * Tn + t] : 0.0f;
            }
            __syncthreads();
            if (wk0 >= Tn || wk0 > q0 + FA_COLS - 1) continue;   // warp-uniform: every query precedes the warp's keys
            for (int j = 0; j < FA_COLS; j += 16) {
                fa_mma<T, wmma::col_major>(stw + j, FA_LDS, false, sk + warp * 16 * LQ, LQ, sq + j * LQ, LQ, hs);
                fa_mma<T, wmma::col_major>(dptw + j, FA_LDS, false, sv + warp * 16 * LQ, LQ, sdo + j * LQ, LQ, hs);
            }
            __syncwarp();
            for (int e = lane; e < 16 * FA_COLS; e += 32) {
                const int c = e % FA_COLS, r = e / FA_COLS, t2 = wk0 + r, t = q0 + c;
                float pd = 0.0f, ds = 0.0f;
                if (t < Tn && t2 <= t) {
                    const float p = expf(stw[r * FA_LDS + c] * a.scale - slse[c]), mult = fa_mult(a, b, h, t, t2);
                    pd = p * mult;
                    ds = p * (dptw[r * FA_LDS + c] * mult - sD[c]) * a.scale;
                }
                store_as(ptw + r * FA_LDP + c, pd);
                store_as(dstw + r * FA_LDP + c, ds);
            }
            __syncwarp();
            for (int j = 0; j < hs; j += 16) {
                fa_mma<T, wmma::row_major>(dvw + j, LO, true, ptw, FA_LDP, sdo + j, LQ, FA_COLS);
                fa_mma<T, wmma::row_major>(dkw + j, LO, true, dstw, FA_LDP, sq + j, LQ, FA_COLS);
            }
            __syncwarp();
        }
        for (int i = lane; i < 16 * hs; i += 32) {
            const int r = i / hs, t2 = wk0 + r, c = i % hs;
            if (t2 >= Tn) continue;
            const size_t o = ((size_t)b * Tn + t2) * 3 * C + (size_t)h * hs + c;
            if (dqkv) {
                dqkv[o + C] = dkw[r * LO + c];
                dqkv[o + 2 * C] = dvw[r * LO + c];
            }
            if (dqkv_lp) {
                store_as(dqkv_lp + o + C, dkw[r * LO + c]);
                store_as(dqkv_lp + o + 2 * C, dvw[r * LO + c]);
            }
        }
    }
}

// ---------------------------------------------------------------- host side
bool cuda_flash_attention_ok(const CudaCtx *c, int T, int C, int NH) {
    if (c->dtype == DTYPE_FP32 || c->attention_cublas || NH <= 0 || C % NH) return false;
    const int hs = C / NH;
    if (hs % 16 || hs > 128 || T <= 0) return false;
    // the kernels' shared memory (at hs 128: 82, 108 and 146 KB; hs 64: 50, 68 and 90 KB)
    // within the device's opt-in limit (sm_80 163 KB, sm_90 227 KB; sm_86/sm_89 99 KB, enough
    // up to hs 64)
    int optin = 0;
    if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, c->device) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    const size_t need = std::max(fa_fwd_smem(hs, 2), std::max(fa_dq_smem(hs, 2), fa_dkv_smem(hs, 2)));
    return need <= (size_t)optin;
}

static FlashArgs fa_args(int B, int T, int C, int NH, float attn_p, DropoutKey key) {
    FlashArgs a;
    a.B = B; a.NH = NH; a.T = T; a.hs = C / NH;
    a.scale = 1.0f / sqrtf((float)a.hs);
    a.use_drop = attn_p > 0.0f;
    a.dk = key;
    a.thr = dropout_threshold(attn_p);
    a.keep_scale = a.use_drop ? 1.0f / (1.0f - attn_p) : 1.0f;
    return a;
}

static unsigned fa_grid(const CudaCtx *c, size_t items) { return (unsigned)(items < c->max_grid ? items : c->max_grid); }

template <class T>
static void flash_forward_t(CudaCtx *c, float *out, T *out_lp, float *att, const float *qkv, const T *qkv_lp,
                            const FlashArgs &a) {
    const size_t bht = (size_t)a.B * a.NH * a.T, smem = fa_fwd_smem(a.hs, sizeof(T));
    CUDA_CHECK(cudaFuncSetAttribute(flash_fwd_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    const size_t items = (size_t)a.B * a.NH * ceil_div(a.T, FA_ROWS);
    LAUNCH((flash_fwd_kernel<T>), fa_grid(c, items), FA_THREADS, smem, c->stream)(out, out_lp, att, att + bht, qkv,
                                                                                    qkv_lp, a);
    LAUNCH_CHECK();
}

template <class T>
static void flash_backward_t(CudaCtx *c, float *dqkv, T *dqkv_lp, float *scratch, const float *dout, const float *qkv,
                             const T *qkv_lp, const float *att, const FlashArgs &a) {
    const size_t bht = (size_t)a.B * a.NH * a.T;
    const size_t s1 = fa_dq_smem(a.hs, sizeof(T)), s2 = fa_dkv_smem(a.hs, sizeof(T));
    CUDA_CHECK(cudaFuncSetAttribute(flash_bwd_dq_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)s1));
    CUDA_CHECK(cudaFuncSetAttribute(flash_bwd_dkv_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)s2));
    const size_t items = (size_t)a.B * a.NH * ceil_div(a.T, FA_ROWS);
    LAUNCH((flash_bwd_dq_kernel<T>), fa_grid(c, items), FA_THREADS, s1, c->stream)(dqkv, dqkv_lp, scratch, dout, qkv,
                                                                                     qkv_lp, att, att + bht, a);
    LAUNCH_CHECK();
    LAUNCH((flash_bwd_dkv_kernel<T>), fa_grid(c, items), FA_THREADS, s2, c->stream)(dqkv, dqkv_lp, scratch, dout,
                                                                                      qkv, qkv_lp, att, a);
    LAUNCH_CHECK();
}

void cuda_flash_attention_forward(CudaCtx *c, float *out, void *out_lp, float *att, const float *qkv,
                                  const void *qkv_lp, int B, int T, int C, int NH, float attn_p, DropoutKey key) {
    const FlashArgs a = fa_args(B, T, C, NH, attn_p, key);
    if (c->dtype == DTYPE_FP16) flash_forward_t<__half>(c, out, (__half *)out_lp, att, qkv, (const __half *)qkv_lp, a);
    else
        flash_forward_t<__nv_bfloat16>(c, out, (__nv_bfloat16 *)out_lp, att, qkv, (const __nv_bfloat16 *)qkv_lp, a);
}

void cuda_flash_attention_backward(CudaCtx *c, float *dqkv, void *dqkv_lp, float *scratch, const float *dout,
                                   const float *qkv, const void *qkv_lp, const float *att, int B, int T, int C, int NH,
                                   float attn_p, DropoutKey key) {
    const FlashArgs a = fa_args(B, T, C, NH, attn_p, key);
    if (c->dtype == DTYPE_FP16)
        flash_backward_t<__half>(c, dqkv, (__half *)dqkv_lp, scratch, dout, qkv, (const __half *)qkv_lp, att, a);
    else
        flash_backward_t<__nv_bfloat16>(c, dqkv, (__nv_bfloat16 *)dqkv_lp, scratch, dout, qkv,
                                        (const __nv_bfloat16 *)qkv_lp, att, a);
}
