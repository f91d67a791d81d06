// kernels/cpu/backend_cpu.c — the CPU backend: kernels/cpu/ops.h behind the Backend table.
//
// Mixed precision on the CPU: with matmul_dtype BF16 or FP16 the inputs of every matmul
// (and the attention's q, k, v and its incoming gradient) are in that type, the points where
// torch.autocast computes in low precision, as on the CUDA backend: bf16 GEMMs on CPUs with
// AVX512-BF16 or AMX (faster than fp32), otherwise emulated (see "Low-precision matmul operands").
#include "kernels/backend.h"

#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/simd.h"
#include "kernels/fatal.h"

// ============================================================================
// Low-precision matmul operands
// ============================================================================
// Three ways to run a matmul:
//   LP_NONE      fp32 (DTYPE_FP32);
//   LP_BF16      bf16 GEMMs on bf16 hardware (kernels/cpu/gemm.h, oneDNN on AMX / AVX512-BF16):
//                operands converted to bf16 arrays, products accumulated in fp32;
//   LP_EMULATE   operands rounded to bf16 / fp16 values kept in fp32, then fp32 GEMMs: the same
//                numbers as LP_BF16 and the CUDA backend (every product of two bf16 or fp16 values
//                is exact in fp32; only the summation order differs), slower than fp32. fp16 always
//                runs this way on the CPU; bf16 where the CPU lacks the instructions.
// The attention products' operands are rounded to the type in both low-precision modes: q, k,
// v, dropout(att), the output gradient and the softmax gradient (the CUDA backend's placement);
// LP_BF16 computes those products as batched bf16 GEMMs (attention_bf16.c), LP_EMULATE with the
// fp32 kernels.
enum { LP_NONE, LP_BF16, LP_EMULATE };

// Scratch buffers for converted copies (SLOT_ATTN: the attention's work memory, bf16 or fp32);
// they grow during the first iteration and are then reused, so steady-state steps do not allocate.
// SLOT_OUT: an op's fp32 output that only its low-precision copy keeps (the *_lp producers).
enum { SLOT_A, SLOT_B, SLOT_C, SLOT_ATTN, SLOT_OUT, N_SLOTS };
typedef struct {
    int lp;                     // LP_*
    long lp_chunk;              // elements of a converted chunk (LP_CHUNK; tests set less)
    void *buf[N_SLOTS];
    size_t cap[N_SLOTS];        // bytes
    // The weight-cast cache (Backend.cast_weights): the flat parameters [wparams, wparams + wn)
    // at content wversion, cast once into wcast (bf16 for LP_BF16, rounded fp32 for LP_EMULATE).
    const float *wparams;
    size_t wn, wcap;
    uint64_t wversion;
    int wvalid;
    void *wcast;
    int grad_overwrite;         // Backend.set_grad_write: matmul backwards write (=) dweight and dbias
} CpuCtx;

static void *slot(CpuCtx *c, int k, size_t bytes) {
    if (c->cap[k] < bytes) {
        void *p = realloc(c->buf[k], bytes);
        if (!p) fatal_error("out of memory (op scratch of %zu bytes)", bytes);
        c->buf[k] = p;
        c->cap[k] = bytes;
    }
    return c->buf[k];
}

// The rounding of the attention products' operands (kernels/cpu/bf16.h).
static int lp_mode(const Backend *be) {
    return be->matmul_dtype == DTYPE_BF16 ? LP_ROUND_BF16 : be->matmul_dtype == DTYPE_FP16 ? LP_ROUND_FP16 : LP_ROUND_NONE;
}

// src (n,) rounded to the matmul dtype, as fp32 values (LP_EMULATE), in scratch slot k.
static const float *rounded(Backend *be, int k, const float *src, size_t n) {
    CpuCtx *c = be->ctx;
    if (c->lp == LP_NONE || src == NULL) return src;
    float *dst = slot(c, k, n * sizeof(float));
    const int mode = lp_mode(be);
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) dst[i] = lp_round(src[i], mode);
    return dst;
}

// A matmul operand in the backend's GEMM type: src itself (fp32), a bf16 copy (LP_BF16) or a
// rounded fp32 copy (LP_EMULATE), in scratch slot k.
typedef struct { GemmType t; const void *p; } Operand;
static Operand operand(Backend *be, int k, const float *src, size_t n) {
    CpuCtx *c = be->ctx;
    if (c->lp != LP_BF16) return (Operand){ GEMM_F32, rounded(be, k, src, n) };
    uint16_t *dst = slot(c, k, n * sizeof(uint16_t));
    bf16_from_floats(dst, src, n);
    return (Operand){ GEMM_BF16, dst };
}

static void cpu_cast_weights(Backend *be, const float *params, size_t n, uint64_t version) {
    CpuCtx *c = be->ctx;
    if (c->lp == LP_NONE) return;
    if (!params || !n) { c->wvalid = 0; return; }
    if (c->wvalid && params == c->wparams && n == c->wn && version == c->wversion) return;
    const size_t bytes = n * (c->lp == LP_BF16 ? sizeof(uint16_t) : sizeof(float));
    if (c->wcap < bytes) {
        void *p = realloc(c->wcast, bytes);
        if (!p) fatal_error("out of memory (the low-precision copy of %zu weights)", n);
        c->wcast = p;
        c->wcap = bytes;
    }
    if (c->lp == LP_BF16) {
        bf16_from_floats(c->wcast, params, n);
    } else {
        float *dst = c->wcast;
        const int mode = lp_mode(be);
        #pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) dst[i] = lp_round(params[i], mode);
    }
    c->wparams = params;
    c->wn = n;
    c->wversion = version;
    c->wvalid = 1;
}

// A weight's operand: from the cast cache when it lies inside the cast buffer, else cast now.
static Operand weight_operand(Backend *be, int k, const float *w, size_t n) {
    const CpuCtx *c = be->ctx;
    if (c->lp != LP_NONE && c->wvalid && w >= c->wparams && w + n <= c->wparams + c->wn) {
        const size_t off = (size_t)(w - c->wparams);
        if (c->lp == LP_BF16) return (Operand){ GEMM_BF16, (const uint16_t *)c->wcast + off };
        return (Operand){ GEMM_F32, (const float *)c->wcast + off };
    }
    return operand(be, k, w, n);
}

// The backend's own writes into (or frees of) the cast range drop the copy: a safety net behind
// the version contract of Backend.cast_weights, as the CUDA backend has.
static void touch(Backend *be, const void *p, size_t bytes) {
    CpuCtx *c = be->ctx;
    if (!c->wvalid) return;   // (no copy: wparams may be NULL, and NULL + 0 is undefined)
    const char *a = p, *lo = (const char *)c->wparams, *hi = (const char *)(c->wparams + c->wn);
    if (a < hi && a + bytes > lo) c->wvalid = 0;
}

// ============================================================================
// Memory: plain host memory
// ============================================================================
static void *cpu_alloc(Backend *be, size_t bytes) { return calloc(1, bytes ? bytes : 1); }
static void cpu_free(Backend *be, void *p) {
    CpuCtx *c = be->ctx;
    if (p && p == (void *)c->wparams) c->wvalid = 0;
    free(p);
}
// Large buffers (the backward's gradient scratch, several MiB a layer) are cleared by all threads:
// one core's stores reach about half of what two reach.
#define ZERO_CHUNK ((size_t)1 << 20)
static void cpu_zero(Backend *be, void *p, size_t bytes) {
    touch(be, p, bytes);
    if (bytes < 2 * ZERO_CHUNK) {
        memset(p, 0, bytes);
        return;
    }
    char *a = p;
    const long n = (long)((bytes + ZERO_CHUNK - 1) / ZERO_CHUNK);
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        const size_t off = (size_t)i * ZERO_CHUNK;
        memset(a + off, 0, bytes - off < ZERO_CHUNK ? bytes - off : ZERO_CHUNK);
    }
}
static void cpu_upload(Backend *be, void *dst, const void *src, size_t bytes) {
    touch(be, dst, bytes);
    if (dst != src) memcpy(dst, src, bytes);
}
static void cpu_download(Backend *be, void *dst, const void *src, size_t bytes) { if (dst != src) memcpy(dst, src, bytes); }

static void cpu_destroy(Backend *be) {
    CpuCtx *c = be->ctx;
    for (int i = 0; i < N_SLOTS; i++) free(c->buf[i]);
    free(c->wcast);
    free(c);
    free(be);
}

// ============================================================================
// Ops: thin wrappers over kernels/cpu/ops.h
// ============================================================================
static void cpu_encoder_forward(Backend *be, float *out, const int32_t *inp, const float *wte,
                                const float *wpe, int B, int T, int C) {
    encoder_forward(out, inp, wte, wpe, B, T, C);
}
static void cpu_encoder_backward(Backend *be, float *dwte, float *dwpe, const float *dout,
                                 const int32_t *inp, int B, int T, int C) {
    encoder_backward(dwte, dwpe, dout, inp, B, T, C);
}
static void cpu_layernorm_forward(Backend *be, float *out, float *mean, float *rstd, const float *inp,
                                  const float *weight, const float *bias, int N, int C) {
    layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
}
static void cpu_residual_layernorm_forward(Backend *be, float *res, float *out, float *mean, float *rstd,
                                           const float *a, const float *b, const float *weight,
                                           const float *bias, int N, int C) {
    residual_layernorm_forward(res, out, mean, rstd, a, b, weight, bias, N, C);
}
static void cpu_layernorm_backward(Backend *be, float *dinp, float *dweight, float *dbias,
                                   const float *dout, const float *inp, const float *weight,
                                   const float *mean, const float *rstd, int N, int C) {
    layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}
// Low-precision ops work through their rows (or batch rows) in chunks whose converted copies
// hold at most LP_CHUNK elements: the scratch stays bounded whatever the batch (an evaluation
// batch holds many training batches' rows). Rows of one chunk for operands `width` wide:
#define LP_CHUNK (8L << 20)
static int lp_rows(const Backend *be, int N, long width) {
    const CpuCtx *c = be->ctx;
    if (c->lp == LP_NONE) return N;
    const long r = c->lp_chunk / (width > 0 ? width : 1);
    return r < 1 ? 1 : r >= N ? N : (int)r;
}

// The input operand of rows [n0, n0 + r) of a matmul: converted from inp into scratch slot k, or,
// when the producer wrote the copy (inp_lp, Backend.layernorm_forward_lp), that copy's rows.
static Operand input_rows(Backend *be, int k, const float *inp, const void *inp_lp, int n0, int r, int C) {
    const CpuCtx *c = be->ctx;
    if (!inp_lp) return operand(be, k, inp + (size_t)n0 * C, (size_t)r * C);
    if (c->lp == LP_BF16) return (Operand){ GEMM_BF16, (const uint16_t *)inp_lp + (size_t)n0 * C };
    return (Operand){ GEMM_F32, (const float *)inp_lp + (size_t)n0 * C };
}

static void matmul_forward_rows(Backend *be, float *out, const float *inp, const void *inp_lp, const float *weight,
                                const float *bias, int N, int C, int OC) {
    const Operand w = weight_operand(be, SLOT_B, weight, (size_t)OC * C);
    for (int n0 = 0, R = lp_rows(be, N, C); n0 < N; n0 += R) {
        const int r = N - n0 < R ? N - n0 : R;
        const Operand x = input_rows(be, SLOT_A, inp, inp_lp, n0, r, C);
        matmul_forward_t(x.t, out + (size_t)n0 * OC, x.p, w.p, bias, r, C, OC);
    }
}
static void cpu_matmul_forward(Backend *be, float *out, const float *inp, const float *weight,
                               const float *bias, int N, int C, int OC) {
    matmul_forward_rows(be, out, inp, NULL, weight, bias, N, C, OC);
}
static void store_lp(Backend *be, void *dst, const float *y, size_t n);
// out_lp: the fp32 output into scratch, then rounded into out_lp as a matmul would round it.
static void cpu_matmul_forward_lp(Backend *be, float *out, void *out_lp, const void *inp_lp, const float *weight,
                                  const float *bias, int N, int C, int OC) {
    const size_t n = (size_t)N * OC;
    float *y = out_lp ? slot(be->ctx, SLOT_OUT, n * sizeof(float)) : out;
    matmul_forward_rows(be, y, NULL, inp_lp, weight, bias, N, C, OC);
    if (out_lp) store_lp(be, out_lp, y, n);
}
static void matmul_gelu_forward_rows(Backend *be, float *pre, float *out, const float *inp, const void *inp_lp,
                                     const float *weight, const float *bias, int N, int C, int OC) {
    const Operand w = weight_operand(be, SLOT_B, weight, (size_t)OC * C);
    for (int n0 = 0, R = lp_rows(be, N, C); n0 < N; n0 += R) {
        const int r = N - n0 < R ? N - n0 : R;
        const Operand x = input_rows(be, SLOT_A, inp, inp_lp, n0, r, C);
        matmul_gelu_forward_t(x.t, pre + (size_t)n0 * OC, out + (size_t)n0 * OC, x.p, w.p, bias, r, C, OC);
    }
}
static void cpu_matmul_gelu_forward(Backend *be, float *pre, float *out, const float *inp,
                                    const float *weight, const float *bias, int N, int C, int OC) {
    matmul_gelu_forward_rows(be, pre, out, inp, NULL, weight, bias, N, C, OC);
}
// out_lp: the fp32 GELU output into scratch, then rounded into out_lp as a matmul would round it.
static void cpu_matmul_gelu_forward_lp(Backend *be, float *pre, float *out, void *out_lp, const void *inp_lp,
                                       const float *weight, const float *bias, int N, int C, int OC) {
    const size_t n = (size_t)N * OC;
    float *y = out_lp ? slot(be->ctx, SLOT_OUT, n * sizeof(float)) : out;
    matmul_gelu_forward_rows(be, pre, y, NULL, inp_lp, weight, bias, N, C, OC);
    if (out_lp) store_lp(be, out_lp, y, n);
}
// dout_lp non-NULL: dout's copy as operand() would convert it (written by its producer; dout not
// read): the GEMMs take its rows and dbias sums its values in fp32.
static void matmul_backward_rows(Backend *be, float *dinp, float *dweight, float *dbias, const float *dout,
                                 const void *dout_lp, const float *inp, const void *inp_lp, const float *weight,
                                 int N, int C, int OC) {
    // GRAD_OVERWRITE: the accumulation below into zeros (+0.0), the bits the caller's zeroed
    // gradients would give, whatever dweight and dbias held
    if (((const CpuCtx *)be->ctx)->grad_overwrite) {
        if (dweight) memset(dweight, 0, (size_t)OC * C * sizeof(float));
        if (dbias) memset(dbias, 0, (size_t)OC * sizeof(float));
    }
    // dbias is a plain fp32 reduction (autocast sums bias gradients in fp32).
    if (dbias && !dout_lp) bias_backward(dbias, dout, N, OC);
    if (dbias && dout_lp) {
        const CpuCtx *c = be->ctx;
        const float *d = dout_lp;
        if (c->lp == LP_BF16) {   // widened: every bf16 value is exact in fp32
            float *w = slot(be->ctx, SLOT_OUT, (size_t)N * OC * sizeof(float));
            const uint16_t *h = dout_lp;
            #pragma omp parallel for schedule(static)
            for (size_t i = 0; i < (size_t)N * OC; i++) w[i] = bf16_to_float(h[i]);
            d = w;
        }
        bias_backward(dbias, d, N, OC);
    }
    const Operand w = dinp ? weight_operand(be, SLOT_B, weight, (size_t)OC * C) : (Operand){ GEMM_F32, NULL };
    for (int n0 = 0, R = lp_rows(be, N, C > OC ? C : OC); n0 < N; n0 += R) {   // dweight sums the chunks
        const int r = N - n0 < R ? N - n0 : R;
        const Operand d = input_rows(be, SLOT_C, dout, dout_lp, n0, r, OC);
        const Operand x = dweight ? input_rows(be, SLOT_A, inp, inp_lp, n0, r, C) : (Operand){ d.t, NULL };
        matmul_backward_t(d.t, dinp ? dinp + (size_t)n0 * C : NULL, dweight, d.p, x.p, w.p, r, C, OC);
    }
}
static void cpu_set_grad_write(Backend *be, GradWrite mode) {
    ((CpuCtx *)be->ctx)->grad_overwrite = mode == GRAD_OVERWRITE;
}
static void cpu_matmul_backward(Backend *be, float *dinp, float *dweight, float *dbias,
                                const float *dout, const float *inp, const float *weight,
                                int N, int C, int OC) {
    matmul_backward_rows(be, dinp, dweight, dbias, dout, NULL, inp, NULL, weight, N, C, OC);
}
// dout_lp: the fp32 values of the copy (exact: each is a value of the type) take dout's place; the
// GEMMs' conversion of a rounded value is that value, so they multiply the copy's values, and dbias
// sums them. The model never passes one here (this backend has no layernorm_backward_dropout):
// widened whole, for the interface's sake, not for speed.
static void cpu_matmul_backward_lp(Backend *be, float *dinp, float *dweight, float *dbias, const float *dout,
                                   const void *dout_lp, const void *inp_lp, const float *weight, int N, int C,
                                   int OC) {
    matmul_backward_rows(be, dinp, dweight, dbias, dout, dout_lp, NULL, inp_lp, weight, N, C, OC);
}

// dst (n,) = y rounded as operand() rounds a matmul input: bf16 (LP_BF16) or fp32 values rounded
// to the type (LP_EMULATE); per element, so a matmul's chunks of it are the bits operand gives.
static void store_lp(Backend *be, void *dst, const float *y, size_t n) {
    const CpuCtx *c = be->ctx;
    if (c->lp == LP_BF16) {
        bf16_from_floats(dst, y, n);
        return;
    }
    float *d = dst;
    const int mode = lp_mode(be);
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) d[i] = lp_round(y[i], mode);
}

// Backend.layernorm_forward_lp: the fp32 op (into scratch when out is NULL), then its output
// rounded into out_lp as a matmul would round it (operand's conversion, whole rows at once: the
// rounding is per element, so a matmul's chunks of it are the bits operand gives them).
static void cpu_layernorm_forward_lp(Backend *be, float *res, float *out, void *out_lp, float *mean, float *rstd,
                                     const float *a, const float *b, const float *weight, const float *bias,
                                     int N, int C) {
    CpuCtx *c = be->ctx;
    const size_t n = (size_t)N * C;
    float *y = out ? out : slot(c, SLOT_OUT, n * sizeof(float));
    if (res) residual_layernorm_forward(res, y, mean, rstd, a, b, weight, bias, N, C);
    else layernorm_forward(y, mean, rstd, a, weight, bias, N, C);
    store_lp(be, out_lp, y, n);
}

// Batch rows [b0, b0 + n) of an attention op: the dropout key's rows move with them.
static DropoutKey rows_from(DropoutKey k, int b0) { k.row0 += (int64_t)b0 * k.row_stride; return k; }

// Batch rows per chunk of an attention op: its bf16 scratch, or its rounded q, k, v, bounded.
static int attention_rows(const Backend *be, int B, int T, int C, int NH) {
    const CpuCtx *c = be->ctx;
    return c->lp == LP_BF16 ? lp_rows(be, B, (long)(attention_bf16_scratch_bytes(1, T, C, NH) / 2))
                            : lp_rows(be, B, 3L * T * C);
}

static void cpu_attention_forward(Backend *be, float *out, float *att, const float *qkv,
                                  int B, int T, int C, int NH, float attn_p, DropoutKey key) {
    CpuCtx *c = be->ctx;
    const long tc = (long)T * C, tt = (long)NH * T * T;
    const int R = attention_rows(be, B, T, C, NH);
    for (int b0 = 0; b0 < B; b0 += R) {
        const int n = B - b0 < R ? B - b0 : R;
        float *o = out + b0 * tc, *a = att + b0 * tt;
        const float *x = qkv + 3 * b0 * tc;
        if (c->lp == LP_BF16)
            attention_forward_bf16(o, a, x, n, T, C, NH, attn_p, rows_from(key, b0),
                                   slot(c, SLOT_ATTN, attention_bf16_scratch_bytes(n, T, C, NH)));
        else
            attention_forward_lp(o, a, rounded(be, SLOT_A, x, (size_t)n * 3 * tc), n, T, C, NH, attn_p,
                                 rows_from(key, b0), lp_mode(be), slot(c, SLOT_ATTN, attention_work_bytes(T, C, NH)));
    }
}
// Backend.attention_forward_lp: the op (into scratch when out is NULL), then its output rounded.
// qkv_lp is never given (no attention_takes_lp here).
static void cpu_attention_forward_produce(Backend *be, float *out, void *out_lp, float *att, const float *qkv,
                                          const void *qkv_lp, int B, int T, int C, int NH, float attn_p,
                                          DropoutKey key) {
    CpuCtx *c = be->ctx;
    if (qkv_lp) {
        fprintf(stderr, "attention_forward_lp: the CPU backend takes qkv in fp32 only\n");
        abort();
    }
    const size_t n = (size_t)B * T * C;
    float *y = out ? out : slot(c, SLOT_OUT, n * sizeof(float));
    cpu_attention_forward(be, y, att, qkv, B, T, C, NH, attn_p, key);
    store_lp(be, out_lp, y, n);
}
// Inference runs in fp32 (kernels/backend.h): no operand rounding whatever matmul_dtype.
static void cpu_attention_forward_cached(Backend *be, float *out, float *att, float *kcache, float *vcache,
                                         const float *qkv, int B, int p0, int Tn, int Tq, int T_max, int C, int NH) {
    attention_forward_cached(out, att, kcache, vcache, qkv, B, p0, Tn, Tq, T_max, C, NH);
}
static void cpu_attention_backward(Backend *be, float *dqkv, float *scratch, const float *dout,
                                   const float *qkv, const float *att, int B, int T, int C, int NH,
                                   float attn_p, DropoutKey key) {
    CpuCtx *c = be->ctx;
    const long tc = (long)T * C, tt = (long)NH * T * T;
    const int R = attention_rows(be, B, T, C, NH);
    for (int b0 = 0; b0 < B; b0 += R) {
        const int n = B - b0 < R ? B - b0 : R;
        float *dx = dqkv + 3 * b0 * tc, *ds = scratch + b0 * tt;
        const float *dy = dout + b0 * tc, *x = qkv + 3 * b0 * tc, *a = att + b0 * tt;
        if (c->lp == LP_BF16)
            attention_backward_bf16(dx, ds, dy, x, a, n, T, C, NH, attn_p, rows_from(key, b0),
                                    slot(c, SLOT_ATTN, attention_bf16_scratch_bytes(n, T, C, NH)));
        else
            attention_backward_lp(dx, ds, rounded(be, SLOT_C, dy, (size_t)n * tc), rounded(be, SLOT_A, x, (size_t)n * 3 * tc),
                                  a, n, T, C, NH, attn_p, rows_from(key, b0), lp_mode(be),
                                  slot(c, SLOT_ATTN, attention_work_bytes(T, C, NH)));
    }
}
static void cpu_gelu_forward(Backend *be, float *out, const float *inp, long N) {
    gelu_forward(out, inp, N);
}
static void cpu_gelu_backward(Backend *be, float *dinp, const float *inp, const float *dout, long N) {
    gelu_backward(dinp, inp, dout, N);
}
static void cpu_dropout_forward(Backend *be, float *out, const float *inp, long N, long row_len, float p,
                                DropoutKey key) {
    dropout_forward(out, inp, N, row_len, p, key);
}
static void cpu_dropout_backward(Backend *be, float *dinp, const float *dout, long N, long row_len, float p,
                                 DropoutKey key) {
    dropout_backward(dinp, dout, N, row_len, p, key);
}
static void cpu_crossentropy_forward(Backend *be, float *losses, float *probs, const float *logits,
                                     const int32_t *targets, int N, int V) {
    crossentropy_forward(losses, probs, logits, targets, N, V);
}
static void cpu_crossentropy_softmax_backward(Backend *be, float *dlogits, const float *probs,
                                              const int32_t *targets, int N, int V, float dloss) {
    crossentropy_softmax_backward(dlogits, probs, targets, N, V, dloss);
}
static void cpu_crossentropy_forward_backward(Backend *be, float *losses, float *dlogits,
                                              const float *logits, const int32_t *targets, int N,
                                              int V, float dloss) {
    crossentropy_forward_backward(losses, dlogits, logits, targets, N, V, dloss);
}

// ============================================================================
// Optimizer ops
// ============================================================================
// Short vectors (kernels/cpu/simd.h) with an exact vector sqrt: the same arithmetic, in the
// same order, as the scalar loop (no FMA contraction in this file), VL elements at a time.
static inline void adamw_vec(size_t i, float *p, const float *g, float *m, float *v, float beta1,
                             float beta2, float eps, float decay_factor, float step_size,
                             float bc2_sqrt, float grad_scale) {
    const VF gi = vload(g + i) * grad_scale;
    const VF mi = beta1 * vload(m + i) + (1.0f - beta1) * gi;
    const VF vi = beta2 * vload(v + i) + (1.0f - beta2) * gi * gi;
    vstore(m + i, mi);
    vstore(v + i, vi);
    vstore(p + i, vload(p + i) * decay_factor - step_size * mi / (vsqrt(vi) / bc2_sqrt + eps));
}

static void cpu_adamw_update(Backend *be, float *p, const float *g, float *m, float *v, size_t n,
                             float beta1, float beta2, float eps, float decay_factor,
                             float step_size, float bc2_sqrt, float grad_scale) {
    touch(be, p, n * sizeof(float));
    const size_t nvec = n / VL;
    // Small tensors run serially, outside any parallel region: libgomp allocates a team for
    // every one-thread region (an if(false) clause included), and this runs once per tensor.
    if (n > 16384) {
        #pragma omp parallel for schedule(static)
        for (size_t k = 0; k < nvec; k++)
            adamw_vec(k * VL, p, g, m, v, beta1, beta2, eps, decay_factor, step_size, bc2_sqrt, grad_scale);
    } else {
        for (size_t k = 0; k < nvec; k++)
            adamw_vec(k * VL, p, g, m, v, beta1, beta2, eps, decay_factor, step_size, bc2_sqrt, grad_scale);
    }
    for (size_t i = nvec * VL; i < n; i++) {
        float gi = g[i] * grad_scale;
        m[i] = beta1 * m[i] + (1.0f - beta1) * gi;
        v[i] = beta2 * v[i] + (1.0f - beta2) * gi * gi;
        p[i] = p[i] * decay_factor - step_size * m[i] / (sqrtf(v[i]) / bc2_sqrt + eps);
    }
}

// Fixed chunking, partial sums added in chunk order: independent of the thread count.
#define SUMSQ_CHUNKS 64
static double cpu_sum_squares(Backend *be, const float *x, size_t n) {
    double partial[SUMSQ_CHUNKS];
    const size_t chunk = (n + SUMSQ_CHUNKS - 1) / SUMSQ_CHUNKS;
    #pragma omp parallel for schedule(static)
    for (int c = 0; c < SUMSQ_CHUNKS; c++) {
        size_t lo = (size_t)c * chunk, hi = lo + chunk < n ? lo + chunk : n;
        // 8 interleaved double partial sums (a fixed order, so still deterministic) instead
        // of one serial chain: vectorises and hides the add latency.
        double acc[8] = {0};
        size_t i = lo;
        for (; i + 8 <= hi; i += 8)
            for (int j = 0; j < 8; j++) acc[j] += (double)x[i + j] * x[i + j];
        double s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
        for (; i < hi; i++) s += (double)x[i] * x[i];
        partial[c] = s;
    }
    double total = 0.0;
    for (int c = 0; c < SUMSQ_CHUNKS; c++) total += partial[c];
    return total;
}

static void cpu_scale(Backend *be, float *x, size_t n, float s) {
    touch(be, x, n * sizeof(float));
    #pragma omp parallel for schedule(static) if (n > 16384)
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

static void cpu_accumulate(Backend *be, float *acc, const float *x, size_t n, int copy) {
    touch(be, acc, n * sizeof(float));
    if (copy) {
        if (n) memcpy(acc, x, n * sizeof(float));
        return;
    }
    #pragma omp parallel for schedule(static) if (n > 16384)
    for (size_t i = 0; i < n; i++) acc[i] += x[i];
}

// ============================================================================
// Description
// ============================================================================
void backend_cpu_describe(char *buf, size_t len) {
    char gemm[512], flags[160];
    const CpuFeatures *f = cpu_features();
    cpu_gemm_describe(gemm, sizeof gemm);
    cpu_features_describe(f, flags, sizeof flags);
    const char *notes = cpu_gemm_notes();
    const int threads = omp_get_max_threads();
    snprintf(buf, len, "CPU: %s (%s), %d OpenMP thread%s\nGEMM: %s\n%s%s%s", f->brand[0] ? f->brand : "unknown model",
             flags, threads, threads == 1 ? "" : "s", gemm, notes[0] ? "GEMM note: " : "", notes, notes[0] ? "\n" : "");
}

static void cpu_describe(Backend *be, char *buf, size_t len) {
    const CpuCtx *c = be->ctx;
    char base[3072];
    backend_cpu_describe(base, sizeof base);
    const char *lp = c->lp == LP_BF16 ? "Low precision: bf16 GEMMs on oneDNN (bf16 hardware), fp32 accumulation\n"
                   : c->lp != LP_EMULATE ? ""
                   : be->matmul_dtype == DTYPE_FP16
                       ? "Low precision: float16 on the CPU is emulated (the CUDA backend's numerics: operands rounded "
                         "to fp16, fp32 GEMMs); it is slower than fp32, not faster\n"
                       : "Low precision: bfloat16 is emulated on this CPU (no AVX512-BF16 or AMX): operands rounded "
                         "to bf16, fp32 GEMMs; slower than fp32\n";
    snprintf(buf, len, "%s%s", base, lp);
}

// ============================================================================
// Construction and selection
// ============================================================================
Backend *backend_cpu_create(ComputeDtype matmul_dtype) {
    Backend *be = calloc(1, sizeof *be);
    CpuCtx *c = calloc(1, sizeof *c);
    if (!be || !c) { free(be); free(c); return NULL; }
    c->lp_chunk = LP_CHUNK;
    c->lp = matmul_dtype == DTYPE_FP32 ? LP_NONE
          : matmul_dtype == DTYPE_BF16 && cpu_gemm_bf16_fast() ? LP_BF16 : LP_EMULATE;
    *be = (Backend){
        .name = "cpu", .matmul_dtype = matmul_dtype, .host_memory = 1, .ctx = c,
        .alloc = cpu_alloc, .free = cpu_free, .zero = cpu_zero, .upload = cpu_upload,
        .download = cpu_download, .destroy = cpu_destroy,
        .describe = cpu_describe,
        .encoder_forward = cpu_encoder_forward, .encoder_backward = cpu_encoder_backward,
        .layernorm_forward = cpu_layernorm_forward,
        .residual_layernorm_forward = cpu_residual_layernorm_forward,
        .layernorm_backward = cpu_layernorm_backward, .matmul_forward = cpu_matmul_forward,
        .matmul_gelu_forward = cpu_matmul_gelu_forward, .matmul_backward = cpu_matmul_backward,
        .attention_forward = cpu_attention_forward, .attention_backward = cpu_attention_backward,
        .attention_forward_cached = cpu_attention_forward_cached,
        .gelu_forward = cpu_gelu_forward, .gelu_backward = cpu_gelu_backward,
        .dropout_forward = cpu_dropout_forward, .dropout_backward = cpu_dropout_backward,
        .crossentropy_forward = cpu_crossentropy_forward,
        .crossentropy_softmax_backward = cpu_crossentropy_softmax_backward,
        .crossentropy_forward_backward = cpu_crossentropy_forward_backward,
        .adamw_update = cpu_adamw_update, .sum_squares = cpu_sum_squares, .scale = cpu_scale,
        .accumulate = cpu_accumulate,
        .cast_weights = cpu_cast_weights, .set_grad_write = cpu_set_grad_write,
    };
    if (c->lp != LP_NONE) {   // producers write the matmuls' operands (kernels/backend.h)
        be->lp_size = c->lp == LP_BF16 ? sizeof(uint16_t) : sizeof(float);
        be->layernorm_forward_lp = cpu_layernorm_forward_lp;
        be->attention_forward_lp = cpu_attention_forward_produce;
        be->matmul_forward_lp = cpu_matmul_forward_lp;
        be->matmul_gelu_forward_lp = cpu_matmul_gelu_forward_lp;
        be->matmul_backward_lp = cpu_matmul_backward_lp;
    }
    return be;
}

void backend_cpu_emulate_low_precision(Backend *be) {
    CpuCtx *c = be->ctx;
    if (c->lp == LP_BF16) c->lp = LP_EMULATE;
    if (be->lp_size) be->lp_size = sizeof(float);   // the copies are now rounded fp32 values (build models after this)
}

void backend_cpu_set_low_precision_chunk(Backend *be, long elements) {
    CpuCtx *c = be->ctx;
    c->lp_chunk = elements > 0 ? elements : LP_CHUNK;
}

int backend_cpu_bf16_fast(void) { return cpu_gemm_bf16_fast(); }

int backend_cpu_low_precision_is_fast(const Backend *be) {
    const CpuCtx *c = be->ctx;
    return c->lp == LP_BF16;
}
