// kernels/cuda/attention.cu — causal multi-head self-attention: cuBLAS strided-batched
// GEMMs for the two products, causal softmax forward/backward kernels, attention dropout
// with the counter-based masks of kernels/dropout_rng.h. The default for every shape; with
// MINGPT_CUDA_ATTENTION=fused (kernels/backend.h), bf16/fp16 matmul inputs and hs a multiple of
// 16 up to 128 (any T), the fused kernels of flash_attention.cu run instead (no T x T tensor;
// `att` then holds what they save).
//
// Forward, per (b,h) with q,k,v (T,hs):
//   permute   qkv (B,T,3C) -> q,k,v (B,NH,T,hs) in the compute dtype (the rounding point)
//   GEMM      att = q k^T                                   (fp32, written into att)
//   softmax   att = softmax(att / sqrt(hs)) causal, 0 above the diagonal   (fp32, saved)
//             attd = dropout(att) in the compute dtype      (operand of the next GEMM)
//   GEMM      y = attd v                                    (fp32)
//   unpermute y (B,NH,T,hs) -> out (B,T,C)
// Backward (att saved; q,k,v,attd recomputed):
//   dy = permute(dout); dv = attd^T dy; datt = dy v^T (into `scratch`)
//   softmax backward: dpre = att * (m*datt - sum(att*m*datt)) / sqrt(hs), m = dropout mult.
//   dq = dpre k; dk = dpre^T q; dqkv = unpermute(dq, dk, dv) (overwritten)
// The dropout mask of att element (b,h,t,t2) is keyed by its GLOBAL index
// dropout_global_index(k, b, NH*T*T, (h*T + t)*T + t2), batch row b being global row
// k.row0 + b*k.row_stride (data-parallel ranks draw the masks of one big batch), as on the
// CPU backend; with {key, 0, 1} that is the flat index.
#include "kernels/cuda/cuda_ops.cuh"

// The four permute kernels move per-head tensors (B,NH,T,hs) to and from row-major ones (B,T,row)
// whose columns h*hs .. h*hs+hs-1 are head h (row = C for (B,T,C), 3C for qkv (B,T,3C), whose
// first third is q; k and v follow at +C and +2C): element (b,h,t,i) sits at ((b*NH + h)*T + t)*hs
// + i in the first and at (b*T + t)*row + h*hs + i in the second. A block takes a head (b,h) at a
// time (grid-stride over the B*NH heads, head_grid), its threads in groups of hs (head_block:
// blockDim a multiple of hs up to BLOCK, else BLOCK): thread x is channel i = x % hs of rows
// t = x / hs, then every blockDim / hs rows (i steps by blockDim where hs > blockDim). No
// division per element (a flat index's 64-bit divisions and remainders by hs, T and NH cost more
// instructions than the copy), and each group reads and writes hs consecutive elements.
static unsigned head_block(int hs) {
    return hs >= BLOCK ? BLOCK : (unsigned)(BLOCK / hs * hs);
}
static unsigned head_grid(const CudaCtx *c, size_t heads) {
    return (unsigned)(heads < c->max_grid ? heads : c->max_grid);
}
// f(ph, rm) for each element (b,h,t,i) of this thread: ph its per-head index, rm its row-major one
template <class F>
static __device__ __forceinline__ void for_head_elements(int B, int NH, int Tn, int hs, size_t row, F f) {
    const int bd = (int)blockDim.x, x = (int)threadIdx.x;
    const bool groups = bd >= hs;   // else one row at a time, i stepping by blockDim
    const int i0 = groups ? x % hs : x, istep = groups ? hs : bd;
    const int t0 = groups ? x / hs : 0, tstep = groups ? bd / hs : 1;
    for (size_t bh = blockIdx.x; bh < (size_t)B * NH; bh += gridDim.x) {
        const size_t b = bh / NH, h = bh % NH;
        for (int t = t0; t < Tn; t += tstep)
            for (int i = i0; i < hs; i += istep)
                f((bh * Tn + t) * hs + i, (b * Tn + t) * row + h * hs + i);
    }
}

// q/k/v (B,NH,T,hs) <- thirds of qkv (B,T,3C), rounded to T
template <class T>
__global__ void permute_qkv_kernel(T *__restrict__ q, T *__restrict__ k, T *__restrict__ v,
                                   const float *__restrict__ qkv, int B, int NH, int Tn, int hs) {
    const int C = NH * hs;
    for_head_elements(B, NH, Tn, hs, 3 * (size_t)C, [&](size_t idx, size_t o) {
        const float *src = qkv + o;
        store_as(q + idx, src[0]);
        store_as(k + idx, src[C]);
        store_as(v + idx, src[2 * C]);
    });
}

// dst (B,NH,T,hs) <- src (B,T,C) (the output gradient), rounded to T
template <class T>
__global__ void permute_out_kernel(T *__restrict__ dst, const float *__restrict__ src, int B, int NH,
                                   int Tn, int hs) {
    const int C = NH * hs;
    for_head_elements(B, NH, Tn, hs, (size_t)C, [&](size_t idx, size_t o) { store_as(dst + idx, src[o]); });
}

// out (B,T,C) <- y (B,NH,T,hs)
// out NULL: not written; out_lp non-NULL: the output rounded to T too (attn.c_proj's operand,
// kernels/backend.h: attention_forward_lp)
template <class T>
__global__ void unpermute_kernel(float *__restrict__ out, T *__restrict__ out_lp, const float *__restrict__ y, int B,
                                 int NH, int Tn, int hs) {
    const int C = NH * hs;
    for_head_elements(B, NH, Tn, hs, (size_t)C, [&](size_t idx, size_t o) {
        if (out) out[o] = y[idx];
        if (out_lp) store_as(out_lp + o, y[idx]);
    });
}

// dqkv (B,T,3C) = (dq | dk | dv) each (B,NH,T,hs)
// dqkv NULL: not written; dqkv_lp non-NULL: the same rounded to T (attn.c_attn's output-gradient
// operand, kernels/backend.h: attention_backward_lp)
template <class T>
__global__ void unpermute_qkv_kernel(float *__restrict__ dqkv, T *__restrict__ dqkv_lp, const float *__restrict__ dq,
                                     const float *__restrict__ dk, const float *__restrict__ dv,
                                     int B, int NH, int Tn, int hs) {
    const int C = NH * hs;
    for_head_elements(B, NH, Tn, hs, 3 * (size_t)C, [&](size_t idx, size_t o) {
        if (dqkv) {
            dqkv[o] = dq[idx];
            dqkv[o + C] = dk[idx];
            dqkv[o + 2 * C] = dv[idx];
        }
        if (dqkv_lp) {
            store_as(dqkv_lp + o, dq[idx]);
            store_as(dqkv_lp + o + C, dk[idx]);
            store_as(dqkv_lp + o + 2 * C, dv[idx]);
        }
    });
}

static __device__ __forceinline__ float drop_mult(bool use_drop, uint64_t key, uint64_t idx,
                                                  uint32_t thr, float keep_scale) {
    if (!use_drop) return 1.0f;
    return dropout_keep(key, idx, thr) ? keep_scale : 0.0f;
}

// Global mask index of element t2 = 0 of softmax row `row` = (b*NH + h)*T + t (nht = NH*T).
static __device__ __forceinline__ uint64_t att_row_index(const DropoutKey &k, int row, int nht, int Tn) {
    return dropout_global_index(k, row / nht, (int64_t)nht * Tn, (int64_t)(row % nht) * Tn);
}

// One warp per row (b,h,t) of att (B*NH*T rows of T): att holds raw scores q.k on entry.
// attd (may be null: fp32 without dropout, where att itself is the operand) gets the
// dropped-out probabilities in the compute dtype.
template <class T>
__global__ void softmax_forward_kernel(float *__restrict__ att, T *__restrict__ attd, int rows, int nht,
                                       int Tn, float scale, bool use_drop, DropoutKey kin, uint32_t thr,
                                       float keep_scale) {
    const DropoutKey dk = dropout_key_at(kin);
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= rows) return;  // warp-uniform
    const int t = row % Tn;
    float *a = att + (size_t)row * Tn;
    float maxv = -INFINITY;
    for (int t2 = lane; t2 <= t; t2 += 32) maxv = fmaxf(maxv, a[t2] * scale);
    maxv = warp_max(maxv);
    float sum = 0.0f;
    for (int t2 = lane; t2 <= t; t2 += 32) sum += expf(a[t2] * scale - maxv);
    const float inv = 1.0f / warp_sum(sum);
    const uint64_t idx_row = att_row_index(dk, row, nht, Tn);
    for (int t2 = lane; t2 < Tn; t2 += 32) {
        const float p = t2 <= t ? expf(a[t2] * scale - maxv) * inv : 0.0f;
        a[t2] = p;
        if (attd) store_as(attd + (size_t)row * Tn + t2, p * drop_mult(use_drop, dk.key, idx_row + t2, thr, keep_scale));
    }
}

// attd = dropout(att) rounded (backward recomputes the GEMM operand of the forward);
// batch_len = NH*T*T elements per batch row
template <class T>
__global__ void dropout_att_kernel(T *__restrict__ attd, const float *__restrict__ att, size_t n,
                                   size_t batch_len, bool use_drop, DropoutKey kin, uint32_t thr,
                                   float keep_scale) {
    const DropoutKey dk = dropout_key_at(kin);
    const bool flat = dk.row0 == 0 && dk.row_stride == 1;   // one process: the flat index
    GRID_STRIDE(i, n) {
        const uint64_t gi = flat ? (uint64_t)i
                                 : dropout_global_index(dk, (int64_t)(i / batch_len), (int64_t)batch_len,
                                                        (int64_t)(i % batch_len));
        store_as(attd + i, att[i] * drop_mult(use_drop, dk.key, gi, thr, keep_scale));
    }
}

// One warp per row: datt (fp32, from the GEMM, full rows) -> dpre in the compute dtype
// (dpre may alias datt when T is float: every element is read before the lane writes it).
template <class T>
__global__ void softmax_backward_kernel(T *dpre, const float *datt, const float *__restrict__ att,
                                        int rows, int nht, int Tn, float scale, bool use_drop,
                                        DropoutKey kin, uint32_t thr, float keep_scale) {
    const DropoutKey dk = dropout_key_at(kin);
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= rows) return;
    const int t = row % Tn;
    const float *a = att + (size_t)row * Tn;
    const float *d = datt + (size_t)row * Tn;
    const uint64_t idx_row = att_row_index(dk, row, nht, Tn);
    const uint64_t key = dk.key;
    float s = 0.0f;
    for (int t2 = lane; t2 <= t; t2 += 32) s += a[t2] * (d[t2] * drop_mult(use_drop, key, idx_row + t2, thr, keep_scale));
    s = warp_sum(s);
    T *o = dpre + (size_t)row * Tn;
    for (int t2 = lane; t2 < Tn; t2 += 32) {
        float g = 0.0f;
        if (t2 <= t) g = a[t2] * (d[t2] * drop_mult(use_drop, key, idx_row + t2, thr, keep_scale) - s) * scale;
        store_as(o + t2, g);
    }
}

// The shapes of one call, forward or backward.
struct AttnDims {
    int B, T, C, NH, hs, BH;
    int rows;       // softmax rows, B*NH*T
    size_t nhead;   // B*NH*T*hs
    size_t natt;    // B*NH*T*T
    long long sh;   // T*hs: the batched GEMMs' stride from one head's q/k/v/y/dq/dk/dv to the next
    long long sa;   // T*T: the same for att, attd, datt, dpre
    float scale;
    bool use_drop;
    uint32_t thr;
    float keep_scale;
};
static AttnDims attn_dims(int B, int T, int C, int NH, float attn_p) {
    AttnDims d;
    d.B = B; d.T = T; d.C = C; d.NH = NH; d.hs = C / NH; d.BH = B * NH;
    d.rows = d.BH * T;
    d.nhead = (size_t)B * NH * T * d.hs;
    d.natt = (size_t)B * NH * T * T;
    d.sh = (long long)T * d.hs;
    d.sa = (long long)T * T;
    d.scale = 1.0f / sqrtf((float)d.hs);
    d.use_drop = attn_p > 0.0f;
    d.thr = dropout_threshold(attn_p);
    d.keep_scale = d.use_drop ? 1.0f / (1.0f - attn_p) : 1.0f;
    return d;
}

// What the forward and the backward both start with: q, k, v (B,NH,T,hs) in the compute dtype
// T, in their scratch buffers, permuted from qkv (the backward recomputes them rather than keep
// the forward's), and whether the second GEMM's operand is attd (dropout(att) in T, its own
// buffer) or att itself (fp32 without dropout).
template <class T>
struct AttnHeads {
    T *q, *k, *v;
    bool need_attd;
};
template <class T>
static AttnHeads<T> attn_heads(CudaCtx *c, const float *qkv, const AttnDims &d) {
    AttnHeads<T> h;
    h.q = (T *)cuda_scratch(c, SCR_Q, d.nhead * sizeof(T));
    h.k = (T *)cuda_scratch(c, SCR_K, d.nhead * sizeof(T));
    h.v = (T *)cuda_scratch(c, SCR_V, d.nhead * sizeof(T));
    LAUNCH((permute_qkv_kernel<T>), head_grid(c, d.BH), head_block(d.hs), 0, c->stream)(h.q, h.k, h.v, qkv, d.B, d.NH,
                                                                                       d.T, d.hs);
    LAUNCH_CHECK();
    h.need_attd = sizeof(T) != sizeof(float) || d.use_drop;
    return h;
}

template <class T>
static void attention_forward_t(CudaCtx *c, float *out, T *out_lp, float *att, const float *qkv, const AttnDims &d,
                                DropoutKey key) {
    const int hs = d.hs, Tn = d.T;
    const long long sh = d.sh, sa = d.sa;
    const AttnHeads<T> h = attn_heads<T>(c, qkv, d);
    float *y = (float *)cuda_scratch(c, SCR_Y, d.nhead * sizeof(float));
    // att (T x T per head, row-major) = q k^T: column-major att^T = op_T(k) * q
    cuda_gemm(c, true, false, Tn, Tn, hs, h.k, hs, sh, h.q, hs, sh, 1.0f, 0.0f, att, Tn, sa, d.BH);
    T *attd = h.need_attd ? (T *)cuda_scratch(c, SCR_ATTD, d.natt * sizeof(T)) : nullptr;
    const int rows = d.rows;
    LAUNCH((softmax_forward_kernel<T>), ceil_div(rows, ROWS_PER_BLOCK), 32 * ROWS_PER_BLOCK, 0, c->stream)(
        att, attd, rows, d.NH * Tn, Tn, d.scale, d.use_drop, key, d.thr, d.keep_scale);
    LAUNCH_CHECK();
    // y (T x hs) = attd v: column-major y^T = v^T(as stored) * attd^T(as stored)
    const void *A = h.need_attd ? (const void *)attd : (const void *)att;
    cuda_gemm(c, false, false, hs, Tn, Tn, h.v, hs, sh, A, Tn, sa, 1.0f, 0.0f, y, hs, sh, d.BH);
    LAUNCH((unpermute_kernel<T>), head_grid(c, d.BH), head_block(hs), 0, c->stream)(out, out_lp, y, d.B, d.NH, Tn, hs);
    LAUNCH_CHECK();
}

template <class T>
static void attention_backward_t(CudaCtx *c, float *dqkv, T *dqkv_lp, float *scratch, const float *dout,
                                 const float *qkv, const float *att, const AttnDims &d, DropoutKey key) {
    const int hs = d.hs, Tn = d.T;
    const long long sh = d.sh, sa = d.sa;
    const AttnHeads<T> h = attn_heads<T>(c, qkv, d);
    T *dy = (T *)cuda_scratch(c, SCR_DY, d.nhead * sizeof(T));
    float *dq = (float *)cuda_scratch(c, SCR_DQ, d.nhead * sizeof(float));
    float *dk = (float *)cuda_scratch(c, SCR_DK, d.nhead * sizeof(float));
    float *dv = (float *)cuda_scratch(c, SCR_DV, d.nhead * sizeof(float));
    LAUNCH((permute_out_kernel<T>), head_grid(c, d.BH), head_block(hs), 0, c->stream)(dy, dout, d.B, d.NH, Tn, hs);
    LAUNCH_CHECK();
    // the forward's second GEMM operand
    const void *attd = att;
    if (h.need_attd) {
        T *p = (T *)cuda_scratch(c, SCR_ATTD, d.natt * sizeof(T));
        LAUNCH((dropout_att_kernel<T>), grid_for(c, d.natt), BLOCK, 0, c->stream)(
            p, att, d.natt, (size_t)d.NH * Tn * Tn, d.use_drop, key, d.thr, d.keep_scale);
        LAUNCH_CHECK();
        attd = p;
    }
    // dv (T2 x hs) = attd^T dy: column-major dv^T = dy^T(as stored) * op_T(attd^T as stored)
    cuda_gemm(c, false, true, hs, Tn, Tn, dy, hs, sh, attd, Tn, sa, 1.0f, 0.0f, dv, hs, sh, d.BH);
    // datt (T x T2) = dy v^T, into scratch (fp32)
    cuda_gemm(c, true, false, Tn, Tn, hs, h.v, hs, sh, dy, hs, sh, 1.0f, 0.0f, scratch, Tn, sa, d.BH);
    // dpre: in place over scratch in fp32, else a rounded copy
    T *dpre = sizeof(T) == sizeof(float) ? (T *)scratch : (T *)cuda_scratch(c, SCR_DPRE, d.natt * sizeof(T));
    const int rows = d.rows;
    LAUNCH((softmax_backward_kernel<T>), ceil_div(rows, ROWS_PER_BLOCK), 32 * ROWS_PER_BLOCK, 0, c->stream)(
        dpre, scratch, att, rows, d.NH * Tn, Tn, d.scale, d.use_drop, key, d.thr, d.keep_scale);
    LAUNCH_CHECK();
    // dq (T x hs) = dpre k: column-major dq^T = k^T(as stored) * dpre^T(as stored)
    cuda_gemm(c, false, false, hs, Tn, Tn, h.k, hs, sh, dpre, Tn, sa, 1.0f, 0.0f, dq, hs, sh, d.BH);
    // dk (T2 x hs) = dpre^T q
    cuda_gemm(c, false, true, hs, Tn, Tn, h.q, hs, sh, dpre, Tn, sa, 1.0f, 0.0f, dk, hs, sh, d.BH);
    LAUNCH((unpermute_qkv_kernel<T>), head_grid(c, d.BH), head_block(hs), 0, c->stream)(dqkv, dqkv_lp, dq, dk, dv,
                                                                                         d.B, d.NH, Tn, hs);
    LAUNCH_CHECK();
}

// qkv given only as its copy: the fused path's alone (Backend.attention_takes_lp)
static void need_fp32_qkv(const void *qkv_lp, const char *op) {
    if (!qkv_lp) return;
    fprintf(stderr, "%s: qkv given as its copy where the fused attention does not run\n", op);
    abort();
}

void cuda_attention_forward(CudaCtx *c, float *out, void *out_lp, float *att, const float *qkv, const void *qkv_lp,
                            int B, int T, int C, int NH, float attn_p, DropoutKey key) {
    if (B <= 0 || T <= 0) return;
    if (cuda_flash_attention_ok(c, T, C, NH)) {
        cuda_flash_attention_forward(c, out, out_lp, att, qkv, qkv_lp, B, T, C, NH, attn_p, key);
        return;
    }
    need_fp32_qkv(qkv_lp, "attention_forward");
    const AttnDims d = attn_dims(B, T, C, NH, attn_p);
    switch (c->dtype) {
    case DTYPE_BF16: attention_forward_t<__nv_bfloat16>(c, out, (__nv_bfloat16 *)out_lp, att, qkv, d, key); break;
    case DTYPE_FP16: attention_forward_t<__half>(c, out, (__half *)out_lp, att, qkv, d, key); break;
    default: attention_forward_t<float>(c, out ? out : (float *)out_lp, out ? (float *)out_lp : nullptr, att, qkv, d, key); break;
    }
}

void cuda_attention_backward(CudaCtx *c, float *dqkv, void *dqkv_lp, float *scratch, const float *dout,
                             const float *qkv, const void *qkv_lp, const float *att, int B, int T, int C, int NH,
                             float attn_p, DropoutKey key) {
    if (B <= 0 || T <= 0) return;
    if (cuda_flash_attention_ok(c, T, C, NH)) {
        cuda_flash_attention_backward(c, dqkv, dqkv_lp, scratch, dout, qkv, qkv_lp, att, B, T, C, NH, attn_p, key);
        return;
    }
    need_fp32_qkv(qkv_lp, "attention_backward");
    const AttnDims d = attn_dims(B, T, C, NH, attn_p);
    switch (c->dtype) {
    case DTYPE_BF16:
        attention_backward_t<__nv_bfloat16>(c, dqkv, (__nv_bfloat16 *)dqkv_lp, scratch, dout, qkv, att, d, key);
        break;
    case DTYPE_FP16: attention_backward_t<__half>(c, dqkv, (__half *)dqkv_lp, scratch, dout, qkv, att, d, key); break;
    default:
        attention_backward_t<float>(c, dqkv ? dqkv : (float *)dqkv_lp, dqkv ? (float *)dqkv_lp : nullptr, scratch, dout,
                                    qkv, att, d, key);
        break;
    }
}

// ---------------------------------------------------------------- forward over a key/value cache
// Incremental inference (kernels/backend.h: attention_forward_cached), fp32 whatever the compute
// dtype: sampling feeds one new row per step, a matrix-vector product per head, so three plain
// kernels (append the Tn new keys and values, scores + softmax of the last Tq queries, att v)
// rather than cuBLAS.

// kcache/vcache (B,T_max,C) rows p0 .. p0+Tn-1 <- the k and v thirds of qkv (B,Tn,3C)
__global__ void kv_append_kernel(float *__restrict__ kc, float *__restrict__ vc, const float *__restrict__ qkv,
                                 int B, int Tn, int p0, int T_max, int C) {
    const size_t total = (size_t)B * Tn * C;
    GRID_STRIDE(idx, total) {
        const int c = (int)(idx % C);
        const size_t r = idx / C;
        const int t = (int)(r % Tn);
        const size_t b = r / Tn;
        const float *src = qkv + r * 3 * (size_t)C + c;
        const size_t dst = (b * T_max + p0 + t) * (size_t)C + c;
        kc[dst] = src[C];
        vc[dst] = src[2 * C];
    }
}

// Rows of the queries: new row q0 + t (t < Tq) of Tn, at position p = pq + t (pq = p0 + q0); its
// softmax runs over the cached positions 0 .. p of L = p0 + Tn.
struct CachedDims {
    int NH, Tn, q0, Tq, pq, L, T_max, C;
};

// One warp per row (b,h,t) of att (B*NH*Tq rows of L): the scaled scores of the query at position
// pq+t against the cached keys 0 .. pq+t, their softmax, zeros after them.
__global__ void cached_softmax_kernel(float *__restrict__ att, const float *__restrict__ qkv,
                                      const float *__restrict__ kc, int rows, CachedDims d, float scale) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= rows) return;  // warp-uniform
    const int hs = d.C / d.NH, t = row % d.Tq, n = d.pq + t + 1;
    const int bh = row / d.Tq, h = bh % d.NH;
    const size_t b = (size_t)(bh / d.NH);
    const float *q = qkv + (b * d.Tn + d.q0 + t) * 3 * (size_t)d.C + (size_t)h * hs;
    const float *k = kc + b * d.T_max * (size_t)d.C + (size_t)h * hs;
    float *a = att + (size_t)row * d.L;
    float maxv = -INFINITY;
    for (int j = lane; j < n; j += 32) {
        const float *kj = k + (size_t)j * d.C;
        float s = 0.0f;
        for (int i = 0; i < hs; i++) s += q[i] * kj[i];
        a[j] = s * scale;
        maxv = fmaxf(maxv, a[j]);
    }
    maxv = warp_max(maxv);
    float sum = 0.0f;
    for (int j = lane; j < n; j += 32) {
        const float e = expf(a[j] - maxv);
        a[j] = e;
        sum += e;
    }
    const float inv = 1.0f / warp_sum(sum);
    for (int j = lane; j < d.L; j += 32) a[j] = j < n ? a[j] * inv : 0.0f;
}

// out (B,Tq,C): element (b,t,c) = sum over the cached positions j <= pq+t of att[b,h,t,j] v[b,j,c],
// h = c / hs (threads of a warp read consecutive channels of each v row)
__global__ void cached_av_kernel(float *__restrict__ out, const float *__restrict__ att,
                                 const float *__restrict__ vc, size_t total, CachedDims d) {
    const int hs = d.C / d.NH;
    GRID_STRIDE(idx, total) {
        const int c = (int)(idx % d.C);
        const size_t r = idx / d.C;
        const int t = (int)(r % d.Tq);
        const size_t b = r / d.Tq;
        const float *a = att + ((b * d.NH + (size_t)(c / hs)) * d.Tq + t) * (size_t)d.L;
        const float *v = vc + b * d.T_max * (size_t)d.C + c;
        float s = 0.0f;
        for (int j = 0; j <= d.pq + t; j++) s += a[j] * v[(size_t)j * d.C];
        out[idx] = s;
    }
}

void cuda_attention_forward_cached(CudaCtx *c, float *out, float *att, float *kcache, float *vcache,
                                   const float *qkv, int B, int p0, int Tn, int Tq, int T_max, int C, int NH) {
    if (B <= 0 || Tn <= 0 || Tq <= 0) return;
    const size_t n = (size_t)B * Tn * C, nq = (size_t)B * Tq * C;
    LAUNCH(kv_append_kernel, grid_for(c, n), BLOCK, 0, c->stream)(kcache, vcache, qkv, B, Tn, p0, T_max, C);
    LAUNCH_CHECK();
    CachedDims d;
    d.NH = NH; d.Tn = Tn; d.q0 = Tn - Tq; d.Tq = Tq; d.pq = p0 + Tn - Tq; d.L = p0 + Tn; d.T_max = T_max; d.C = C;
    const int rows = B * NH * Tq;
    LAUNCH(cached_softmax_kernel, ceil_div(rows, ROWS_PER_BLOCK), 32 * ROWS_PER_BLOCK, 0, c->stream)(
        att, qkv, kcache, rows, d, 1.0f / sqrtf((float)(C / NH)));
    LAUNCH_CHECK();
    LAUNCH(cached_av_kernel, grid_for(c, nq), BLOCK, 0, c->stream)(out, att, vcache, nq, d);
    LAUNCH_CHECK();
}
