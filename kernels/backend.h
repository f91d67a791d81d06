// kernels/backend.h — the one interface through which the model and the trainer run ops.
//
// A Backend is a table of function pointers (a C ABI) implemented by the CPU backend
// (kernels/cpu/backend_cpu.c) and the CUDA backend (kernels/cuda/). Every pointer the
// ops take is backend memory from be->alloc: host memory on the CPU, device memory on
// CUDA. Host data crosses only through upload/download.
//
// Op semantics, shapes and conventions are those of kernels/cpu/ops.h (forward ops
// overwrite; dropout masks come from kernels/dropout_rng.h; results deterministic for a
// given configuration). Backward ops, on every backend:
//   * ACCUMULATE (+=) into parameter gradients: matmul_backward's dweight and dbias,
//     layernorm_backward's dweight and dbias, encoder_backward's dwte and dwpe (the caller
//     zeroes them once per optimizer step; micro-steps add up), and into layernorm_backward's
//     dinp (the residual stream's gradient: each block's two branches add to it); the matmul
//     backwards' parameter gradients are written (=) instead while set_grad_write asked for
//     GRAD_OVERWRITE (the first backward after the caller zeroed them: see there);
//   * OVERWRITE the activation gradients they alone write, whatever the buffer held before
//     (NaN included): matmul_backward's dinp, attention_backward's dqkv (and _lp's dqkv_lp),
//     gelu_backward's and dropout_backward's dinp, crossentropy_softmax_backward's dlogits. The
//     caller zeroes no scratch gradient before them (on a GPU each zeroing is a launch and a pass
//     over memory).
//
// Mixed precision: when matmul_dtype is BF16 or FP16, the inputs of every matmul and of
// the attention products are rounded to that type, products accumulate in fp32 and
// outputs are fp32 (torch.autocast's placement: Linear and attention matmuls in low
// precision, LayerNorm / softmax / cross-entropy / optimizer in fp32). Master weights,
// gradients and optimizer state stay fp32.
//
// Who rounds a matmul's activation operand: the value a GEMM multiplies is always the fp32
// activation rounded to nearest even in matmul_dtype. Rounding it in a pass of its own before
// each GEMM (the plain matmul ops) reads 4 and writes 2 bytes per element and costs a launch on a
// GPU, for each matmul that reads it, forward and backward. The optional *_lp ops below let the
// producer write the rounded copy itself, once, into a buffer the model owns (model/gpt.c lays
// it out beside the fp32 activations, lp_size bytes per element), and let the matmuls take that
// copy: the same values multiplied, bitwise, only no rounding pass. The model uses them for the
// LayerNorm outputs (ln_1 -> attn.c_attn, ln_2 -> mlp.c_fc, ln_f -> lm_head) and the attention
// output (-> attn.c_proj), forward and backward (the weight gradient multiplies the same copy),
// and then keeps no fp32 copy of those (no op reads it). Each backend rounds at exactly the same
// points: CUDA in the producing kernel's store (the LayerNorm's, the fused attention's or the
// cuBLAS path's unpermute), the CPU by converting the fp32 output (bf16 for its bf16 GEMMs, else
// fp32 values rounded to the type); the CPU backend's matmuls then slice the copy by rows as they
// slice the operand they would convert, so its results are unchanged. With matmul_backward_dgelu
// (CUDA) the MLP's GELU output, which mlp.c_proj multiplies forward and in its weight gradient, is
// written only as its copy by c_fc's GEMM epilogue (matmul_gelu_forward_lp's out_lp), and the
// gradient of c_fc's output only as its copy by c_proj's data-gradient epilogue
// (matmul_backward_dgelu's dpre_lp), which c_fc's backward multiplies (matmul_backward_lp's
// dout_lp). In the backward the attention writes attn.c_attn's output gradient only as its copy
// (attention_backward_lp, where the backend has it), which matmul_backward_lp takes as dout_lp.
// The output gradients of the two c_proj matmuls (the residual branches') come the same way from
// the LayerNorm backward that finishes them, through their dropout mask
// (layernorm_backward_dropout's dbranch_lp, the matmuls' dout_lp), where the backend has that op
// (CUDA). Where the backend's attention reads q, k, v from a copy for the shape
// (attention_takes_lp: CUDA's fused attention), attn.c_attn's output is written only as its copy
// (matmul_forward_lp's out_lp), which the attention forward and backward read (qkv_lp). Still
// rounded per call: lm_head's output gradient.
//
// Residual dropout: where the backend has residual_dropout_layernorm_forward and
// layernorm_backward_dropout (CUDA), the dropout of each block's two branches is applied inside
// the residual add + LayerNorm that follows it (forward) and by the LayerNorm backward that
// finishes the gradient entering it (backward), with dropout_forward's masks and products: no
// dropout pass, and no fp32 copy of the branch's gradient when its matmul takes the rounded one.
#ifndef MINGPT_BACKEND_H
#define MINGPT_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/dropout_key.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { DTYPE_FP32 = 0, DTYPE_BF16 = 1, DTYPE_FP16 = 2 } ComputeDtype;

// How the matmul backwards write parameter gradients (Backend.set_grad_write).
typedef enum { GRAD_ACCUMULATE = 0, GRAD_OVERWRITE = 1 } GradWrite;

typedef struct Backend Backend;
typedef struct Comm Comm;   // dist/comm.h

// One segment of Backend.adamw_update_segments: elements [offset, offset + n) of the flat
// buffers (element indices, not bytes); decays != 0: the update's decay_factor applies, else 1.
typedef struct {
    size_t offset;
    size_t n;
    int decays;
} AdamWSegment;

// Backend.optimizer_tail's per-step inputs, in backend memory (the host writes them with
// upload_async before the step's ops; a captured graph reads them when it runs).
typedef struct {
    double loss_scale;     // S: the gradients are S times the loss's (1 without fp16 loss scaling)
    double max_norm;       // global-norm clip of the unscaled gradients (<= 0: off)
    float decay_factor, step_size, bc2_sqrt;   // adamw_update's, for the step about to be taken
    float unused;
} OptimizerTailArgs;
// What Backend.optimizer_tail leaves in backend memory, for the host to read after the step.
typedef struct {
    double ssq;            // the gradients' sum of squares (sum_squares' value)
    float grad_scale;      // the factor the update applied to the gradients (1 when none)
    int nonfinite_loss;    // 1: a per-token loss of a valid target was NaN or inf
    int applied;           // 1: the AdamW update ran; 0: skipped (ssq or a loss not finite)
    int unused;
} OptimizerTailResult;

struct Backend {
    const char *name;            // "cpu", "cuda"
    ComputeDtype matmul_dtype;   // see above; DTYPE_FP32 = full precision
    int host_memory;             // 1 when backend memory is host memory (the CPU backend):
                                 // callers may then read and write it directly
    void *ctx;                   // the implementation's private state

    // ---- memory
    void *(*alloc)(Backend *be, size_t bytes);                 // zeroed; NULL when out of memory
    void (*free)(Backend *be, void *p);
    void (*zero)(Backend *be, void *p, size_t bytes);
    void (*upload)(Backend *be, void *dst, const void *src, size_t bytes);    // host -> backend
    void (*download)(Backend *be, void *dst, const void *src, size_t bytes);  // backend -> host
    // Optional (NULL: use upload). host -> backend without waiting for the copy: src is staged
    // (src may be reused at once) and the copy is ordered after the ops enqueued before it and
    // before those enqueued after it. For what a training step writes before its graph replay
    // (the batch's inputs and targets, the dropout keys: the host then never waits for the
    // previous step's optimizer kernels); not allowed inside graph_run's fn (reported, exit).
    void (*upload_async)(Backend *be, void *dst, const void *src, size_t bytes);
    // Optional, both or neither (NULL: use download). backend -> host without waiting: the copy
    // is ordered after the ops enqueued before it, and dst holds the bytes only once
    // download_wait has returned; src may be overwritten by ops enqueued after the call. For the
    // per-token losses of a training step, read after the step's gradient norm (whose download
    // waits for the stream anyway, so download_wait then waits for nothing). Not allowed inside
    // graph_run's fn (reported, exit).
    void (*download_async)(Backend *be, void *dst, const void *src, size_t bytes);
    // Waits for every download_async copy not yet delivered and fills their dst.
    void (*download_wait)(Backend *be);
    void (*destroy)(Backend *be);                              // frees ctx and be itself
    // Optional: one or more lines (each ending in '\n') for the start-up header: the libraries
    // the ops run on and anything the user should know about them (CPU: the GEMM libraries, the
    // kernels OpenBLAS chose, how low precision runs).
    void (*describe)(Backend *be, char *buf, size_t len);

    // ---- model ops (kernels/cpu/ops.h has each one's shapes)
    void (*encoder_forward)(Backend *be, float *out, const int32_t *inp, const float *wte,
                            const float *wpe, int B, int T, int C);
    // dwte (V,C) and dwpe (T_max,C) += the embeddings' gradients (both accumulate).
    void (*encoder_backward)(Backend *be, float *dwte, float *dwpe, const float *dout,
                             const int32_t *inp, int B, int T, int C);
    void (*layernorm_forward)(Backend *be, float *out, float *mean, float *rstd, const float *inp,
                              const float *weight, const float *bias, int N, int C);
    // res (N,C) = a + b, then out/mean/rstd = layernorm(res): residual + ln fused.
    void (*residual_layernorm_forward)(Backend *be, float *res, float *out, float *mean, float *rstd,
                                       const float *a, const float *b, const float *weight,
                                       const float *bias, int N, int C);
    // dinp (N,C), dweight (C,), dbias (C,) += their gradients given dout: all three accumulate.
    void (*layernorm_backward)(Backend *be, float *dinp, float *dweight, float *dbias,
                               const float *dout, const float *inp, const float *weight,
                               const float *mean, const float *rstd, int N, int C);
    void (*matmul_forward)(Backend *be, float *out, const float *inp, const float *weight,
                           const float *bias, int N, int C, int OC);
    // pre (N,OC) = inp @ weight^T + bias; out (N,OC) = gelu(pre): bias + GELU fused.
    void (*matmul_gelu_forward)(Backend *be, float *pre, float *out, const float *inp,
                                const float *weight, const float *bias, int N, int C, int OC);
    // dinp (N,C) = dout @ weight, overwritten (NULL: skipped); dweight (OC,C) += dout^T @ inp;
    // dbias (OC,) += column sums of dout (NULL: skipped). dweight and dbias are written (=),
    // whatever they held, under GRAD_OVERWRITE (set_grad_write).
    void (*matmul_backward)(Backend *be, float *dinp, float *dweight, float *dbias,
                            const float *dout, const float *inp, const float *weight,
                            int N, int C, int OC);
    // Dropout on the attention probabilities: batch row b is global row k.row0 + b*k.row_stride,
    // element (b,h,t,t2) has global index dropout_global_index(k, b, NH*T*T, (h*T + t)*T + t2).
    // att (attention_att_floats(matmul_dtype, B, T, C, NH) floats: B*NH*T*T, or B*NH*T*(hs+1) where
    // that is more and matmul_dtype is BF16/FP16) is what attention_backward needs, saved by this
    // backend for its own backward: the probabilities (B,NH,T,T) (the CPU backend; CUDA's cuBLAS
    // path), or, on CUDA's fused path (bf16/fp16, hs a multiple of 16 up to 128, any T), the
    // log-sum-exp of each score row and the per-head output (kernels/cuda/flash_attention.cu).
    void (*attention_forward)(Backend *be, float *out, float *att, const float *qkv,
                              int B, int T, int C, int NH, float attn_p, DropoutKey k);
    // Incremental inference over a key/value cache (model/gpt.h: gpt_infer_feed): the keys and
    // values of qkv (B,Tn,3C), positions p0 .. p0+Tn-1, are written into kcache and vcache
    // (B,T_max,C) at those rows, then the last Tq new queries attend causally to the cached
    // positions up to their own: att (B,NH,Tq,p0+Tn), out (B,Tq,C). No dropout; fp32 whatever
    // matmul_dtype.
    void (*attention_forward_cached)(Backend *be, float *out, float *att, float *kcache, float *vcache,
                                     const float *qkv, int B, int p0, int Tn, int Tq, int T_max, int C, int NH);
    // dqkv (B,T,3C) = the gradient given dout (B,T,C), overwritten; scratch (B,NH,T,T) too;
    // att as this backend's attention_forward left it.
    void (*attention_backward)(Backend *be, float *dqkv, float *scratch, const float *dout,
                               const float *qkv, const float *att, int B, int T, int C, int NH,
                               float attn_p, DropoutKey k);
    // out (N,) = gelu(inp) (tanh approximation), as matmul_gelu_forward's out. Optional: when
    // present the model keeps no GELU outputs for the backward pass (4*B*T*C floats per
    // layer) and recomputes each from its saved input just before it is needed.
    void (*gelu_forward)(Backend *be, float *out, const float *inp, long N);
    // dinp (N,) = gelu'(inp) * dout, overwritten.
    void (*gelu_backward)(Backend *be, float *dinp, const float *inp, const float *dout, long N);
    // The MLP's second Linear backward with the GELU backward of its input fused (c_proj after
    // c_fc): dpre (N,C) = gelu'(pre) * (dout @ weight), overwritten; dweight (OC,C) += dout^T @ inp;
    // dbias (OC,) += column sums of dout; dbias_pre (C,) += column sums of dpre (fp32) (those three
    // written (=), whatever they held, under GRAD_OVERWRITE: set_grad_write). dbias_pre,
    // dweight, dbias non-NULL; dpre (or dpre_lp) overlaps none of the inputs. The same as
    // matmul_backward into a scratch dinp, gelu_backward(dpre, pre, dinp) and the column sums of
    // dpre (up to rounding: a backend may sum in another order). With lp_size (bf16/fp16 matmuls):
    //   dpre_lp non-NULL: dpre rounded to matmul_dtype (each fp32 value rounded once, to nearest
    //     even) is written there (N,C) INSTEAD of dpre, which must be NULL; dbias_pre still sums
    //     the fp32 values. It is c_fc's dout operand: matmul_backward_lp's dout_lp;
    //   dout_lp non-NULL: dout's copy in matmul_dtype (dout may be NULL); dbias sums its values;
    //   inp_lp non-NULL: inp's copy (a *_lp producer's, e.g. matmul_gelu_forward_lp's out_lp);
    //     inp may then be NULL.
    // All three NULL in fp32 mode. pre (N,C) is fp32. Optional: NULL means the model makes those
    // calls itself (the CPU backend: its separate ops are the reference the CUDA backend is
    // tested against).
    void (*matmul_backward_dgelu)(Backend *be, float *dpre, void *dpre_lp, float *dbias_pre, float *dweight,
                                  float *dbias, const float *dout, const void *dout_lp, const float *inp,
                                  const void *inp_lp, const float *weight, const float *pre, int N, int C, int OC);
    // N elements in rows of row_len (N % row_len == 0): element i is local row i / row_len and
    // is kept iff dropout_keep(k.key, dropout_global_index(k, i / row_len, row_len, i % row_len)).
    void (*dropout_forward)(Backend *be, float *out, const float *inp, long N, long row_len, float p,
                            DropoutKey k);
    // dropout_backward: dinp (N,) = dout * keep / (1 - p) with dropout_forward's mask, overwritten.
    void (*dropout_backward)(Backend *be, float *dinp, const float *dout, long N, long row_len, float p,
                             DropoutKey k);
    // The residual branches' dropout fused into the LayerNorms around it (the model's res_2 / res_3
    // adds and their branches' c_proj backward). Optional, both together: NULL means the model calls
    // dropout_forward / dropout_backward itself (the CPU backend: the reference). For both, the
    // dropout is dropout_forward's over the (N,C) tensor in rows of row_len elements (a positive
    // multiple of C: whole LayerNorm rows per dropout row), p in [0, 1), key k: element i is kept iff
    // dropout_keep(k.key, dropout_global_index(k, i / row_len, row_len, i % row_len)), kept values
    // times 1/(1-p) (each product rounded on its own), dropped ones 0.
    // residual_dropout_layernorm_forward: res (N,C) = a + dropout(b), overwritten, each sum the bits
    // of dropout_forward into a scratch copy of b and then the add; b is read only (not written).
    // Then out, mean, rstd as residual_layernorm_forward and out_lp as layernorm_forward_lp: out
    // (N,C) fp32 (NULL: not stored), out_lp (N,C) out rounded to matmul_dtype, lp_size bytes per
    // element (NULL: not stored; non-NULL only when lp_size is not 0); at least one of the two.
    void (*residual_dropout_layernorm_forward)(Backend *be, float *res, float *out, void *out_lp, float *mean,
                                               float *rstd, const float *a, const float *b, const float *weight,
                                               const float *bias, int N, int C, long row_len, float p,
                                               DropoutKey k);
    // layernorm_backward (dinp, dweight, dbias accumulate as there), and then, from the dinp it
    // leaves (the finished residual gradient entering the branch), the branch's gradient:
    // dbranch (N,C) = dropout_backward(dinp) in fp32, bitwise that op's result, and/or dbranch_lp
    // (N,C) = the same values rounded to matmul_dtype, lp_size bytes per element (non-NULL only
    // when lp_size is not 0): the dout_lp of the branch's matmul_backward_lp / _dgelu. Both
    // overwritten; either may be NULL (not written). Neither overlaps dinp or the inputs.
    void (*layernorm_backward_dropout)(Backend *be, float *dinp, float *dbranch, void *dbranch_lp, float *dweight,
                                       float *dbias, const float *dout, const float *inp, const float *weight,
                                       const float *mean, const float *rstd, int N, int C, long row_len, float p,
                                       DropoutKey k);
    void (*crossentropy_forward)(Backend *be, float *losses, float *probs, const float *logits,
                                 const int32_t *targets, int N, int V);
    void (*crossentropy_softmax_backward)(Backend *be, float *dlogits, const float *probs,
                                          const int32_t *targets, int N, int V, float dloss);
    // Training loss and gradient fused (softmax + cross-entropy + gradient in one pass):
    // losses as crossentropy_forward and dlogits = dloss * (softmax(logits) - onehot(targets))
    // (0 rows where the target is -1), overwritten; the probabilities are not stored.
    // Optional: NULL means the model calls crossentropy_forward, then
    // crossentropy_softmax_backward in the backward pass.
    void (*crossentropy_forward_backward)(Backend *be, float *losses, float *dlogits,
                                          const float *logits, const int32_t *targets, int N,
                                          int V, float dloss);

    // ---- optimizer ops on flat fp32 buffers
    // One torch.optim.AdamW element update over n elements (host computes the scalars):
    //   g' = g * grad_scale (fp32 product: the loss scaler's unscale and the global-norm clip
    //        folded in, bitwise Backend.scale(g, grad_scale) first; g itself is not written)
    //   m = b1 m + (1-b1) g';  v = b2 v + (1-b2) g'^2;
    //   p = p * decay_factor - step_size * m / (sqrt(v) / bc2_sqrt + eps)
    // with decay_factor = 1 - lr*wd (1 for no-decay tensors), step_size = lr / (1 - b1^t),
    // bc2_sqrt = sqrt(1 - b2^t).
    void (*adamw_update)(Backend *be, float *p, const float *g, float *m, float *v, size_t n,
                         float beta1, float beta2, float eps, float decay_factor,
                         float step_size, float bc2_sqrt, float grad_scale);
    // adamw_update over n_segs segments of the flat buffers p, g, m, v at once: segment k updates
    // elements [segs[k].offset, segs[k].offset + segs[k].n) of each of the four (the same index
    // in all), with decay_factor where segs[k].decays, else 1. Segments do not overlap; n 0 is
    // allowed. Bitwise the results of one adamw_update per segment. segs is host memory, read
    // during the call only (a backend may keep a copy: CUDA uploads the table once per new
    // content and runs one launch per call). Optional: NULL means the caller calls adamw_update
    // per segment (the CPU backend).
    void (*adamw_update_segments)(Backend *be, float *p, const float *g, float *m, float *v,
                                  const AdamWSegment *segs, int n_segs, float beta1, float beta2,
                                  float eps, float decay_factor, float step_size, float bc2_sqrt,
                                  float grad_scale);
    // The end of a training step in one process, queued without a host wait, so that a captured
    // graph (graph_run) holds it after the backward: res->ssq = sum_squares(g, n) (the same bits);
    // res->nonfinite_loss = 1 when losses[i] is NaN or inf for some i < n_losses with
    // targets[i] != -1; norm = sqrt(ssq) / S; when ssq is finite and no loss is nonfinite, the
    // update of adamw_update_segments(p, g, m, v, segs, n_segs, beta1, beta2, eps, decay_factor,
    // step_size, bc2_sqrt, grad_scale) (args' scalars) with grad_scale as the host's
    // loss_scaler_unscale_clip_coef computes it (trainer/loss_scaler.h: in double, coef =
    // max_norm / (norm + 1e-6) when that is below 1 and max_norm > 0, else 1; grad_scale = coef /
    // S rounded to float, 1 when coef and S are 1), and res->applied = 1; else no update,
    // res->applied = 0 (p, m, v untouched). args, res, losses (n_losses floats) and targets are
    // backend memory; args is read when the ops run, res written by them (read it with
    // download_async after the step). segs as adamw_update_segments (host memory; its table must not
    // change inside a capture). Unlike adamw_update, it does not drop the weight-cast copy (a
    // captured forward reads that copy): the caller changes the parameters' version when
    // res->applied. Optional (CUDA): NULL means the trainer reads the norm back and decides on the
    // host (trainer/train_step.c).
    void (*optimizer_tail)(Backend *be, float *p, const float *g, float *m, float *v, size_t n,
                           const AdamWSegment *segs, int n_segs, float beta1, float beta2, float eps,
                           const float *losses, const int32_t *targets, size_t n_losses,
                           const OptimizerTailArgs *args, OptimizerTailResult *res);
    // sum of x[i]^2 in double, in a fixed order (independent of thread/block count).
    double (*sum_squares)(Backend *be, const float *x, size_t n);
    // x *= s
    void (*scale)(Backend *be, float *x, size_t n, float s);
    // acc[i] = x[i] (copy != 0) or acc[i] += x[i] (copy == 0), each element rounded on its own
    // (the same bits on every backend), after the backend's earlier work on them (ZeRO stage
    // 2: a reduced part of a bucket into the rank's shard of the gradient). acc and x do not
    // overlap.
    void (*accumulate)(Backend *be, float *acc, const float *x, size_t n, int copy);

    // ---- mixed precision: the weight-cast cache (torch.autocast's). Both backends have one.
    // Optional: NULL means every matmul rounds its weight itself, on every call (the tests
    // compare the two by setting it NULL).
    // The flat parameter buffer [params, params + n) (backend memory) holds content `version`.
    // A backend that runs matmuls in low precision (matmul_dtype BF16/FP16) casts it once per
    // new (params, n, version), one pass over n elements into a copy it owns (CUDA: bf16 or
    // fp16; CPU: bf16 for its bf16 GEMMs, else fp32 values rounded to the type), and then uses
    // the cast copy for every matmul_forward / matmul_gelu_forward / matmul_backward whose
    // weight lies wholly inside [params, params + n); weights elsewhere, and every weight while
    // there is no valid copy, are rounded per call. The cast value of each element is exactly
    // the one per-call rounding gives, so results do not change, only the work. Same (params,
    // n, version) again: nothing to do. params NULL or n 0: drop the copy. No-op for FP32.
    // The caller promises that the buffer's content changes only together with `version`
    // (model/gpt.h: gpt_params_changed). Both backends also drop the copy when one of their
    // own calls writes into that range (zero, upload, adamw_update[_segments], scale) or frees the
    // buffer, a safety net the caller must not rely on.
    // Called by gpt_forward and gpt_forward_inference (model/gpt.c) before their first op when
    // matmul_dtype is not FP32. Aborts (like the ops) when out of memory.
    void (*cast_weights)(Backend *be, const float *params, size_t n, uint64_t version);

    // ---- fp32 matmul precision (torch.set_float32_matmul_precision). Optional: NULL means the
    // backend has no reduced-precision fp32 matmuls and always multiplies in true fp32 (the CPU).
    // tf32 1 ("high"): matmuls whose inputs are fp32 (matmul_dtype FP32; all of them, attention's
    // included) may round their inputs to TF32 (8-bit exponent, 10 explicit mantissa bits, unit
    // roundoff 2^-11) and accumulate in fp32 on tensor cores; 0 ("highest", the default): true
    // fp32. Matmuls in BF16/FP16 are unaffected. Applies to the ops queued after the call.
    void (*set_matmul_precision)(Backend *be, int tf32);

    // ---- parameter-gradient writes. Optional: NULL means the backend always accumulates (a
    // caller that wanted GRAD_OVERWRITE zeroes the gradients and accumulates into the zeros).
    // GRAD_ACCUMULATE (the default): the backward ops add (+=) into parameter gradients, as the
    // top of this file says. GRAD_OVERWRITE: matmul_backward's and matmul_backward_lp's dweight
    // and dbias, and matmul_backward_dgelu's dweight, dbias and dbias_pre, are written (=) with
    // the gradient whatever they held (NaN included); layernorm_backward and encoder_backward
    // still accumulate. Meant for the first backward after the gradients were zeroed, where each
    // of those tensors has that op as its only writer: the result is then the accumulated one
    // (a GPU saves the pass that adds the bias gradients and the GEMMs' read of dweight). The
    // values are the accumulate-into-zeros values, except that an overwritten -0.0 stays -0.0
    // where 0.0 + -0.0 gives +0.0 (the CPU writes the accumulate-into-zeros bits exactly).
    // Applies to the ops queued after the call; a graph (graph_run) replays the mode its ops
    // were captured with.
    void (*set_grad_write)(Backend *be, GradWrite mode);

    // ---- data parallelism (dist/comm.h). Optional: NULL means gradients live in host memory
    // and the trainer all-reduces them with the host communicator itself (the CPU backend).
    // Returns the backend's own gradient communicator over the same ranks as `host` (NCCL on
    // CUDA: the ncclUniqueId travels through host->bcast), whose allreduce_start takes backend
    // memory and overlaps the compute stream; NULL with a message naming the rank on error.
    Comm *(*grad_comm_create)(Backend *be, Comm *host, char *err, size_t errlen);

    // ---- memory. Optional: NULL means the backend's memory is the host's (the trainer then
    // reads MemAvailable in /proc/meminfo). The bytes of backend memory free now and in all
    // (CUDA: cudaMemGetInfo of the backend's device); the trainer checks its estimate of the
    // run's memory against them before allocating (model/gpt_cost.h). Returns 0, or non-zero
    // when they cannot be had (nothing is checked then).
    int (*mem_info)(Backend *be, size_t *free_bytes, size_t *total_bytes);
    // ---- graphs (CUDA graphs). Optional: NULL means every op runs when it is called (the CPU).
    // graph_run runs fn(ctx), a sequence of this backend's ops, through the graph *graph (NULL
    // the first time; the backend allocates it): the first call runs fn directly; the second
    // captures the ops fn enqueues (they do not run while fn executes) and launches them as one
    // graph; later calls launch that graph without calling fn, as long as it is current (the
    // backend's scratch buffers, weight-cast copy and matmul precision unchanged since the
    // capture), else they capture again. The same *graph must always be given the same fn with
    // the same pointers, sizes and scalar arguments: a replay repeats the captured ops exactly,
    // reading the buffers' contents at launch. fn may not synchronise with the host (upload,
    // download, sum_squares, allocation, free): the backend reports it and exits. Returns 1 when
    // fn was called, 0 when the graph was replayed.
    int (*graph_run)(Backend *be, void **graph, void (*fn)(void *ctx), void *ctx);
    // Frees a graph of graph_run (NULL: nothing).
    void (*graph_free)(Backend *be, void *graph);

    // ---- mixed precision: producers write the matmuls' operands (see the top of this file).
    // Optional, all together: lp_size 0 (always when matmul_dtype is FP32) means none of these.
    // lp_size: bytes per element of an operand copy (CUDA 2: bf16/fp16; CPU 2 with its bf16
    // GEMMs, else 4: fp32 values rounded to the type). Copies are row-major like their fp32
    // tensors and must be 16-byte aligned.
    size_t lp_size;
    // layernorm_forward (res and b NULL) or residual_layernorm_forward (both non-NULL) that also
    // writes out_lp (N,C), out rounded to matmul_dtype; out NULL: no fp32 output is stored.
    void (*layernorm_forward_lp)(Backend *be, float *res, float *out, void *out_lp, float *mean, float *rstd,
                                 const float *a, const float *b, const float *weight, const float *bias,
                                 int N, int C);
    // attention_forward that also writes out_lp (B,T,C), out rounded to matmul_dtype; out NULL:
    // no fp32 output (attention_backward does not read it). qkv_lp non-NULL: the input given only
    // as its copy (B,T,3C) in matmul_dtype (matmul_forward_lp's out_lp), qkv then NULL; allowed
    // only where attention_takes_lp(be, T, C, NH) is true (never on the CPU); the results are
    // bitwise those from the fp32 qkv the copy was rounded from.
    void (*attention_forward_lp)(Backend *be, float *out, void *out_lp, float *att, const float *qkv,
                                 const void *qkv_lp, int B, int T, int C, int NH, float attn_p, DropoutKey k);
    // matmul_forward, matmul_gelu_forward and matmul_backward with the input given by its copy
    // inp_lp (N,C) (written by a *_lp producer) instead of the fp32 inp: bitwise their results.
    // out_lp non-NULL: the output (N,OC) written only as its copy, each fp32 value (product plus
    // bias) rounded once to matmul_dtype (bitwise rounding matmul_forward's out), into out_lp; out
    // must then be NULL. Used only for attn.c_attn's output where attention_takes_lp is true (the
    // CPU backend accepts it too: its fp32 output into scratch, then rounded).
    // matmul_backward_lp's dout_lp (N,OC), lp_size bytes per element: non-NULL, dout's copy in
    // matmul_dtype written by its producer (layernorm_backward_dropout's dbranch_lp), which the
    // GEMMs multiply instead of rounding dout (which may then be NULL and is not read), and dbias
    // += the fp32 column sums of those rounded values; NULL: dout rounded per call, as before.
    void (*matmul_forward_lp)(Backend *be, float *out, void *out_lp, const void *inp_lp, const float *weight,
                              const float *bias, int N, int C, int OC);
    // out_lp non-NULL: the GELU output (N,OC) is written only as its copy, gelu(pre) computed in
    // fp32 and rounded once to matmul_dtype (what rounding out would give, bitwise), into out_lp;
    // out must then be NULL. out_lp NULL: out (fp32) as matmul_gelu_forward. pre is always fp32.
    void (*matmul_gelu_forward_lp)(Backend *be, float *pre, float *out, void *out_lp, const void *inp_lp,
                                   const float *weight, const float *bias, int N, int C, int OC);
    // dout_lp non-NULL: dout's copy in matmul_dtype (N,OC), written by its producer (e.g.
    // matmul_backward_dgelu's dpre_lp); the GEMMs multiply it and dbias (when non-NULL) is the
    // fp32 column sums of those rounded values (what CUDA's BGRADB epilogue sums anyway); dout may
    // then be NULL. dout_lp NULL: dout (fp32) rounded as by matmul_backward.
    void (*matmul_backward_lp)(Backend *be, float *dinp, float *dweight, float *dbias, const float *dout,
                               const void *dout_lp, const void *inp_lp, const float *weight, int N, int C, int OC);
    // attention_backward that also writes dqkv_lp (B,T,3C), dqkv rounded to matmul_dtype (each
    // element the fp32 value attention_backward computes, rounded to nearest even: attn.c_attn's
    // dout_lp); dqkv NULL: no fp32 gradient is stored. Both overwritten. Optional (NULL on the
    // CPU: the model then calls attention_backward and matmul_backward_lp rounds dqkv itself).
    // qkv_lp: as attention_forward_lp's (qkv then NULL; only where attention_takes_lp is true).
    void (*attention_backward_lp)(Backend *be, float *dqkv, void *dqkv_lp, float *scratch, const float *dout,
                                  const float *qkv, const void *qkv_lp, const float *att, int B, int T, int C,
                                  int NH, float attn_p, DropoutKey k);
    // 1 when attention_forward_lp and attention_backward_lp (both present) take qkv as its copy
    // qkv_lp for this shape (T positions, C channels, NH heads) and this matmul_dtype, else 0: CUDA's
    // fused attention (bf16/fp16, hs a multiple of 16 up to 128), which rounds q, k, v to
    // matmul_dtype as it loads them anyway. The model asks once, at its batch's T, and lays out its
    // activations by the answer for every forward of that model, so it must hold for every T from
    // 1 up (CUDA's does not depend on T). Optional: NULL (the CPU) means never.
    int (*attention_takes_lp)(const Backend *be, int T, int C, int NH);
};

// The floats of attention_forward's att for a (B,T) batch (C channels, NH heads) with matmul
// inputs in dtype: B*NH*T*T (the probabilities), at least B*NH*T*(hs+1) when dtype is BF16/FP16
// (what CUDA's fused attention saves: the log-sum-exp rows and the per-head output, hs = C/NH).
static inline size_t attention_att_floats(ComputeDtype dtype, size_t B, size_t T, size_t C, size_t NH) {
    const size_t hs1 = NH ? C / NH + 1 : 0, per_row = dtype != DTYPE_FP32 && hs1 > T ? hs1 : T;
    return B * NH * T * per_row;
}

// The CPU backend (always available). Never NULL except when out of memory. With BF16 its
// matmuls are bf16 GEMMs on CPUs with AVX512-BF16 or AMX (kernels/cpu/gemm.h), faster than fp32;
// elsewhere, and always with FP16, the low precision is emulated: operands rounded to the type
// and fp32 GEMMs, the same numbers (every product of two such values is exact in fp32), slower.
Backend *backend_cpu_create(ComputeDtype matmul_dtype);
// The CPU's GEMM libraries and SIMD, for --version (the CPU backend's describe without a backend).
void backend_cpu_describe(char *buf, size_t len);
// CPU backend only: 1 when its low-precision matmuls run on bf16 hardware (not emulated).
int backend_cpu_low_precision_is_fast(const Backend *be);
// 1 when a bfloat16 CPU backend would run its matmuls on bf16 hardware (AVX512-BF16 or AMX, and
// oneDNN computes them: kernels/cpu/gemm.h's cpu_gemm_bf16_fast), no backend needed; else 0.
int backend_cpu_bf16_fast(void);
// CPU backend only: low-precision ops convert their operands in chunks of at most this many
// elements (default 8M; <= 0 restores it), so their scratch does not grow with the batch (tests
// make it small).
void backend_cpu_set_low_precision_chunk(Backend *be, long elements);
// CPU backend only: emulate the low precision even where bf16 hardware exists (tests compare
// the two paths). Call it before building a model on the backend (its Backend.lp_size changes).
void backend_cpu_emulate_low_precision(Backend *be);

// The CUDA backend's constructor (kernels/cuda/backend_cuda.cu). A weak symbol: defined only in
// programs linked with the CUDA objects (the emulated test programs); ./mingpt has it NULL and
// backend_select (kernels/backend.c) loads build/libmingpt_cuda.so with dlopen instead, only when
// a CUDA backend is asked for. Returns NULL with a message naming the missing driver or device
// when no GPU can be used.
// device: the CUDA device index (the rank's local rank modulo the visible device count).
Backend *backend_cuda_create(ComputeDtype matmul_dtype, int device, char *err, size_t errlen) __attribute__((weak));

// For --version: "CUDA: toolkit 13.0, cuBLAS 13.1.0, NCCL 2.28.9, nvcc build ... (<library>)\n",
// the header versions the CUDA backend library was compiled with (its backend_cuda_version;
// loading the library needs no GPU or driver), or "CUDA: not built\n" / "CUDA: library not
// found: <path>\n" / "CUDA: <why it cannot be loaded>\n".
void backend_cuda_describe_build(char *buf, size_t len);

// Why backend_select found no backend.
typedef enum {
    BACKEND_OK = 0,
    BACKEND_BAD_DEVICE,   // device is none of auto, cpu, cuda
    BACKEND_NO_CUDA,      // device "cuda", and no CUDA backend can be had here
    BACKEND_NO_MEMORY,    // out of host memory
    BACKEND_BAD_ENV,      // MINGPT_CUDA_ATTENTION or MINGPT_CUDA_EPILOGUES has another value
                          // than those below (device cuda or auto)
} BackendError;

// Picks the backend for a device name: "cpu", "cuda" or "auto" (cuda when a device is present
// and mingpt was built with CUDA, else cpu) into *be; local_rank picks the GPU (local_rank modulo
// the device count; 0 in one process). Returns BACKEND_OK, or the error with *be NULL and err
// the problem alone, which names neither the setting nor the flag the device came from (the
// caller knows which and puts it in front):
//   BACKEND_BAD_DEVICE  "must be auto, cpu or cuda (got '<device>')"
//   BACKEND_NO_CUDA     why: the missing driver, device or build option, as the CUDA backend or
//                       its library's loader reports it
//   BACKEND_NO_MEMORY   "out of memory"
//   BACKEND_BAD_ENV     "MINGPT_CUDA_ATTENTION must be fused or cublas (got '<value>')",
//                       "MINGPT_CUDA_EPILOGUES must be cublaslt or off (got '<value>')"
// MINGPT_CUDA_ATTENTION (read by the CUDA backend): "cublas" or unset, attention.cu's cuBLAS path
// for every shape; "fused", the fused attention kernels where the shape and the GPU allow
// (kernels/cuda/flash_attention.cu). The default is the path measured faster: on the one GPU
// that timed both (an H200, the tutorial config in bf16) the fused kernels took about 28 ms of a
// 50 ms step, the cuBLAS path about 7 (docs/gpu_performance.md); tests/cuda/gpu_bench.sh times
// both in one run (rows bf16 and bf16-fused), for the next GPU to confirm or reverse it.
// MINGPT_CUDA_EPILOGUES (read by the CUDA backend): "cublaslt" or unset, the GEMMs of the linear
// layers with cuBLASLt's bias, GELU and bias-gradient epilogues where cuBLASLt takes them; "off",
// no cuBLASLt: cuBLAS GEMMs and the backend's own bias, GELU and column-sum kernels (the
// fallbacks every refused epilogue takes; the same values within the suites' tolerances), to
// compare the two on a GPU (tests/cuda/gpu_bench.sh, row bf16-noepi).
// An empty value is unset.
// The trainer's messages are then "trainer_config.device=cuda: <err>",
// "trainer_config.device <err>" and "<err>"; sample's "sample --device <device>: <err>".
BackendError backend_select(const char *device, int local_rank, ComputeDtype matmul_dtype, Backend **be,
                            char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
