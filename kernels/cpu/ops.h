// kernels/cpu/ops.h — forward and backward of every GPT op on the CPU (fp32, OpenMP).
//
// Conventions (all ops):
//   * Shapes are row-major; B batch, T time, C channels (n_embd), NH heads, hs = C/NH,
//     V vocabulary, N = B*T rows where an op does not care about the (B,T) split.
//   * Forward functions overwrite their outputs.
//   * Backward functions ACCUMULATE (+=) into the parameter gradients they produce (dweight,
//     dbias, dwte, dwpe: gradient accumulation over micro-steps; the caller zeroes them once
//     per optimizer step), into layernorm_backward's dinp (the residual stream's gradient
//     sums the two branches and the skip path) and into residual_backward's da, db. They
//     OVERWRITE the activation gradients that only they write: matmul_backward's dinp,
//     attention_backward's dqkv, gelu_backward's and dropout_backward's dinp,
//     crossentropy_softmax_backward's dlogits. So the model never zeroes a scratch gradient
//     before an op; each op's line below says which it does.
//   * Results are deterministic for a given OMP thread count (no float atomics).
//   * Dropout uses kernels/dropout_rng.h: the mask of element idx is a pure function of
//     (key, idx), recomputed in the backward pass instead of stored. p = 0 is the identity.
//   * No op allocates memory.
#ifndef MINGPT_CPU_OPS_H
#define MINGPT_CPU_OPS_H

#include <stdint.h>

#include "kernels/cpu/gemm.h"
#include "kernels/dropout_rng.h"

// ---------------------------------------------------------------- encoder
// out (B,T,C) = wte[inp[b,t]] + wpe[t].  inp (B,T) int32 in [0,V), wte (V,C), wpe (T_max,C).
void encoder_forward(float *out, const int32_t *inp, const float *wte, const float *wpe,
                     int B, int T, int C);
// dwte (V,C) += scatter of dout by token; dwpe (T_max,C) += sum over b of dout[b,t].
void encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *inp,
                      int B, int T, int C);

// ---------------------------------------------------------------- layernorm
// torch.nn.LayerNorm(C, eps=1e-5): out (N,C) = (inp - mean) * rstd * weight + bias,
// with biased variance; saves mean (N,) and rstd (N,) = 1/sqrt(var + 1e-5) for backward.
void layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                       const float *weight, const float *bias, int N, int C);
// dinp (N,C), dweight (C,), dbias (C,) += gradients given dout (N,C).
void layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, const float *mean,
                        const float *rstd, int N, int C);

// ---------------------------------------------------------------- matmul (nn.Linear)
// out (N,OC) = inp (N,C) @ weight^T + bias;  weight (OC,C) as torch stores it, bias (OC,)
// or NULL. The GEMM is kernels/cpu/gemm.h's.
void matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                    int N, int C, int OC);
// dinp (N,C) = dout @ weight (overwritten);  dweight (OC,C) += dout^T @ inp;
// dbias (OC,) += sum_n dout. dinp or dbias may be NULL (skipped).
void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                     const float *inp, const float *weight, int N, int C, int OC);

// The same on typed operands (kernels/cpu/gemm.h): inp, weight and dout are fp32 or bf16
// arrays as t says (bf16: the products of the bf16 values accumulate in fp32); outputs fp32.
// matmul_backward_t computes no bias gradient: bias_backward does, from the fp32 dout.
void matmul_forward_t(GemmType t, float *out, const void *inp, const void *weight, const float *bias,
                      int N, int C, int OC);
void matmul_backward_t(GemmType t, float *dinp, float *dweight, const void *dout, const void *inp,
                       const void *weight, int N, int C, int OC);
// dbias (OC,) += sum over the N rows of dout (N,OC).
void bias_backward(float *dbias, const float *dout, int N, int OC);

// ---------------------------------------------------------------- causal self-attention
// qkv (B,T,3C): q, k, v are the thirds of the last dimension (minGPT's c_attn split),
// head h uses channels [h*hs, (h+1)*hs) of each.
// att (B,NH,T,T) = softmax(q k^T / sqrt(hs)) with the causal mask (keys t2 > t get
// probability 0; entries above the diagonal are written as 0). Saved for backward.
// out (B,T,C) = dropout(att, attn_p, dk) @ v, heads concatenated. The dropout element index
// of att[b][h][t][t2] is dropout_global_index(dk, b, NH*T*T, (h*T + t)*T + t2): the flat index
// into att when dk maps rows {0, 1}, the index in the global batch under data parallelism.
void attention_forward(float *out, float *att, const float *qkv, int B, int T, int C, int NH,
                       float attn_p, DropoutKey dk);
// Incremental inference (sampling; no dropout): attention of new positions over a key/value cache.
// qkv (B,Tn,3C) holds positions p0 .. p0+Tn-1 of each sequence; their keys and values are first
// copied into kcache and vcache (B,T_max,C), rows p0 .. p0+Tn-1 (rows 0 .. p0-1 hold the earlier
// positions' from earlier calls; p0 + Tn <= T_max). Then the queries of the LAST Tq new rows
// (1 <= Tq <= Tn; Tq < Tn when only the last positions' outputs are wanted) attend causally over
// the L = p0 + Tn cached positions: att (B,NH,Tq,L) = softmax(q k^T / sqrt(hs)) over the keys
// 0 .. p of the query at position p (written as 0 for later keys), out (B,Tq,C) = att @ v, heads
// concatenated. p0 = 0, Tq = Tn = T: exactly attention_forward's att and out with attn_p = 0 (the
// same operations, bit for bit).
void attention_forward_cached(float *out, float *att, float *kcache, float *vcache, const float *qkv, int B,
                              int p0, int Tn, int Tq, int T_max, int C, int NH);
// dqkv (B,T,3C) = gradient given dout (B,T,C), overwritten. scratch (B,NH,T,T) is overwritten.
// O(T^2 * hs) per (b,h), parallel over (b,h).
void attention_backward(float *dqkv, float *scratch, const float *dout, const float *qkv,
                        const float *att, int B, int T, int C, int NH, float attn_p,
                        DropoutKey dk);

// The same with the products' other operands rounded as the low-precision matmuls round theirs
// (lp: LP_ROUND_NONE / BF16 / FP16 of kernels/cpu/bf16.h): dropout(att) in att @ v and in the
// backward's att^T dout, and the softmax gradient dS in dS k and dS^T q. The caller rounds qkv and
// dout. LP_ROUND_NONE is attention_forward / attention_backward. work: attention_work_bytes(T, C,
// NH) bytes of per-thread copies (overwritten), so a training step allocates nothing; NULL: each
// thread allocates its own for the call (attention_forward / attention_backward do that).
void attention_forward_lp(float *out, float *att, const float *qkv, int B, int T, int C, int NH,
                          float attn_p, DropoutKey dk, int lp, void *work);
void attention_backward_lp(float *dqkv, float *scratch, const float *dout, const float *qkv,
                           const float *att, int B, int T, int C, int NH, float attn_p,
                           DropoutKey dk, int lp, void *work);
// Bytes of the work memory above for omp_get_max_threads() threads: per thread 3 T hs floats and
// T^2 bytes.
size_t attention_work_bytes(int T, int C, int NH);

// attention_forward_lp / attention_backward_lp with LP_ROUND_BF16, the products computed as bf16
// GEMMs on oneDNN (kernels/cpu/gemm.h; only where cpu_gemm_bf16_fast()): the same roundings, the
// fp32 sums in another order. qkv and dout are fp32 (rounded here). scratch holds
// attention_bf16_scratch_bytes(B, T, C, NH) bytes (overwritten); ds is the backward's
// (B,NH,T,T) scratch as in attention_backward.
size_t attention_bf16_scratch_bytes(int B, int T, int C, int NH);
void attention_forward_bf16(float *out, float *att, const float *qkv, int B, int T, int C, int NH,
                            float attn_p, DropoutKey dk, void *scratch);
void attention_backward_bf16(float *dqkv, float *ds, const float *dout, const float *qkv,
                             const float *att, int B, int T, int C, int NH, float attn_p,
                             DropoutKey dk, void *scratch);

// ---------------------------------------------------------------- GELU (tanh approximation)
// out (N,) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))  (minGPT NewGELU,
// torch.nn.GELU(approximate='tanh')).
void gelu_forward(float *out, const float *inp, long N);
// dinp (N,) = gelu'(inp) * dout, overwritten.
void gelu_backward(float *dinp, const float *inp, const float *dout, long N);

// ---------------------------------------------------------------- residual
// out (N,) = a + b.
void residual_forward(float *out, const float *a, const float *b, long N);
// da (N,) += dout;  db (N,) += dout.
void residual_backward(float *da, float *db, const float *dout, long N);

// ---------------------------------------------------------------- dropout
// out (N,) = inp * keep(idx) / (1 - p)  (inverted dropout, torch.nn.Dropout). out may alias inp.
// N elements in rows of row_len (N % row_len == 0); element e of local row j has the mask of
// global index dropout_global_index(dk, j, row_len, e) (kernels/dropout_rng.h).
void dropout_forward(float *out, const float *inp, long N, long row_len, float p, DropoutKey dk);
// dinp (N,) = dout * keep(idx) / (1 - p), overwritten; the mask as in dropout_forward.
void dropout_backward(float *dinp, const float *dout, long N, long row_len, float p, DropoutKey dk);

// ---------------------------------------------------------------- cross-entropy
// probs (N,V) = softmax(logits) (numerically stable, max-subtracted);
// losses (N,) = -log probs[n, targets[n]], or 0 where targets[n] == -1 (ignore_index).
// Returns the number of rows whose target is not -1.
long crossentropy_forward(float *losses, float *probs, const float *logits,
                          const int32_t *targets, int N, int V);
// dlogits (N,V) = dloss * (probs - onehot(targets)); rows with target -1 get 0.
// For the mean loss, dloss = 1 / (number of non-ignored rows). Overwrites dlogits;
// dlogits may alias probs.
void crossentropy_softmax_backward(float *dlogits, const float *probs, const int32_t *targets,
                                   int N, int V, float dloss);

// ---------------------------------------------------------------- fused ops
// res (N,C) = a + b; then out/mean/rstd = layernorm(res) as layernorm_forward.
// One pass over the residual stream instead of two.
void residual_layernorm_forward(float *res, float *out, float *mean, float *rstd,
                                const float *a, const float *b, const float *weight,
                                const float *bias, int N, int C);
// pre (N,OC) = inp (N,C) @ weight^T + bias; out (N,OC) = gelu(pre) (tanh approximation).
void matmul_gelu_forward(float *pre, float *out, const float *inp, const float *weight,
                         const float *bias, int N, int C, int OC);
void matmul_gelu_forward_t(GemmType t, float *pre, float *out, const void *inp, const void *weight,
                           const float *bias, int N, int C, int OC);
// Training loss and its gradient in one pass (softmax + cross-entropy + gradient): losses (N,)
// as crossentropy_forward, and dlogits (N,V) = dloss * (softmax(logits) - onehot(targets)),
// 0 in rows whose target is -1 — crossentropy_forward then crossentropy_softmax_backward
// without storing the probabilities. Overwrites dlogits, which may alias logits. Returns the
// number of rows whose target is not -1.
long crossentropy_forward_backward(float *losses, float *dlogits, const float *logits,
                                   const int32_t *targets, int N, int V, float dloss);

#endif
