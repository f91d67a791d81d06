// kernels/cuda/cuda_ops.cuh — host entry points of the CUDA kernel families (one .cu each).
// Semantics, shapes and the accumulate / overwrite convention are those of kernels/cpu/ops.h and
// kernels/backend.h; every pointer is device memory; all work goes on c->stream.
#ifndef MINGPT_CUDA_OPS_CUH
#define MINGPT_CUDA_OPS_CUH

#include "kernels/cuda/common.cuh"

// encoder.cu
void cuda_encoder_forward(CudaCtx *c, float *out, const int32_t *inp, const float *wte,
                          const float *wpe, int B, int T, int C);
void cuda_encoder_backward(CudaCtx *c, float *dwte, float *dwpe, const float *dout,
                           const int32_t *inp, int B, int T, int C);

// graph.cu: Backend.graph_run and graph_free
int cuda_graph_run(CudaCtx *c, void **graph, void (*fn)(void *ctx), void *ctx);
void cuda_graph_free(CudaCtx *c, void *graph);

// layernorm.cu (res != NULL: res = a + b first, the fused residual + LayerNorm; out_lp non-NULL:
// the output's compute-dtype copy too, Backend.layernorm_forward_lp; out NULL: no fp32 output)
void cuda_layernorm_forward(CudaCtx *c, float *res, float *out, void *out_lp, float *mean, float *rstd,
                            const float *a, const float *b, const float *weight,
                            const float *bias, int N, int C);
void cuda_layernorm_backward(CudaCtx *c, float *dinp, float *dweight, float *dbias,
                             const float *dout, const float *inp, const float *weight,
                             const float *mean, const float *rstd, int N, int C);
// Backend.residual_dropout_layernorm_forward and layernorm_backward_dropout (kernels/backend.h)
void cuda_residual_dropout_layernorm_forward(CudaCtx *c, float *res, float *out, void *out_lp, float *mean,
                                             float *rstd, const float *a, const float *b, const float *weight,
                                             const float *bias, int N, int C, long row_len, float p, DropoutKey k);
void cuda_layernorm_backward_dropout(CudaCtx *c, float *dinp, float *dbranch, void *dbranch_lp, float *dweight,
                                     float *dbias, const float *dout, const float *inp, const float *weight,
                                     const float *mean, const float *rstd, int N, int C, long row_len, float p,
                                     DropoutKey k);

// bias_grad.cu: deterministic column sums (fixed chunks of rows, summed in order)
#define COLSUM_ROWS 32   // rows per partial sum (more when N > 65535 * 32: gridDim.y limit)
int cuda_colsum_rows(int N);
// out[c] += sum_n in[n*C + c] (accumulate), or out[c] = that sum (!accumulate)
void cuda_colsum(CudaCtx *c, float *out, const float *in, int N, int C, bool accumulate);
// the same over in's values in the compute dtype (bf16/fp16; fp32: cuda_colsum), summed in fp32 in
// the same order
void cuda_colsum_lp(CudaCtx *c, float *out, const void *in, int N, int C, bool accumulate);
// out0[c] += sum_k part[(k*nout + 0)*C + c]; out1 likewise with slot 1 (nout 1 or 2);
// = instead of += when !accumulate
void cuda_colsum_finalize(CudaCtx *c, float *out0, float *out1, const float *part, int nchunk,
                          int nout, int C, bool accumulate);

// matmul.cu
cudaDataType cuda_gemm_type(const CudaCtx *c);
// Column-major C = alpha op(A) op(B) + beta C (strided batched when batch > 1); A and B in
// the compute dtype, C fp32, fp32 accumulation.
void cuda_gemm(CudaCtx *c, bool transA, bool transB, int m, int n, int k, const void *A, int lda,
               long long strideA, const void *B, int ldb, long long strideB, float alpha,
               float beta, float *C, int ldc, long long strideC, int batch);
// The same product on cuBLASLt (beta 0 or 1, alpha 1, D column-major (m,n) with ld ldd: fp32, or
// with d_lp the compute dtype, the fp32 epilogue result rounded to nearest even; bias and aux fp32)
// with `epilogue`: CUBLASLT_EPILOGUE_BIAS (bias: m floats added), GELU_AUX_BIAS (aux (m,n), ld
// aux_ld, gets the biased pre-activation, D = gelu of it), BGRADB (bias: n floats, overwritten
// with the column sums of op(B) over k) or DGELU_BGRAD (D = gelu'(aux) times the product; bias:
// m floats, overwritten with the sums of D's rows). Queued on c->stream. Returns false, having queued
// nothing, where cuBLASLt cannot take the case (no handle, aux_ld not a multiple of 8, or
// CUBLAS_STATUS_NOT_SUPPORTED / INVALID_VALUE from the library, noted once per epilogue on
// stderr): the caller then runs cuda_gemm and kernels.
bool cuda_lt_matmul(CudaCtx *c, bool transA, bool transB, int m, int n, int k, const void *A, int lda,
                    const void *B, int ldb, float beta, void *D, int ldd, cublasLtEpilogue_t epilogue,
                    float *bias, float *aux, int aux_ld, bool d_lp = false);
// x as a GEMM operand: x itself in fp32 mode, else x rounded into scratch `slot`.
const void *cuda_gemm_operand(CudaCtx *c, int slot, const float *x, size_t n);
void cuda_round_to(CudaCtx *c, void *out, const float *in, size_t n);  // fp32 -> compute dtype
// Backend.cast_weights (kernels/backend.h): rounds [params, params + n) into c->wcast once per
// new (params, n, version); FP32 mode: nothing. Aborts when the device is out of memory.
void cuda_cast_weights(CudaCtx *c, const float *params, size_t n, uint64_t version);
// Drops the cast copy when [p, p + bytes) overlaps the cached buffer: an op of this backend is
// about to write it (the safety net behind the version contract).
void cuda_cast_touch(CudaCtx *c, const void *p, size_t bytes);
// A matmul weight (n elements) as a GEMM operand: its slice of the cast copy when it lies wholly
// inside the cached buffer, else as cuda_gemm_operand (rounded per call into SCR_W_LP).
const void *cuda_weight_operand(CudaCtx *c, const float *weight, size_t n);
// inp_lp non-NULL: inp's compute-dtype copy, written by its producer (Backend.matmul_forward_lp):
// the GEMM takes it and nothing is rounded; inp is then not read (may be NULL). NULL: inp rounded.
// out_lp non-NULL (bf16/fp16 only): the output is written only as its compute-dtype copy, each
// fp32 value (GEMM + bias) rounded once (out NULL; Backend.matmul_forward_lp).
void cuda_matmul_forward(CudaCtx *c, float *out, void *out_lp, const float *inp, const void *inp_lp,
                         const float *weight, const float *bias, int N, int C, int OC);
// dout_lp non-NULL: dout's compute-dtype copy, written by its producer (Backend.matmul_backward_lp):
// the GEMMs take it and dbias sums its values; dout is then not read (may be NULL).
void cuda_matmul_backward(CudaCtx *c, float *dinp, float *dweight, float *dbias, const float *dout,
                          const void *dout_lp, const float *inp, const void *inp_lp, const float *weight, int N,
                          int C, int OC);
// Backend.matmul_backward_dgelu (kernels/backend.h)
void cuda_matmul_backward_dgelu(CudaCtx *c, float *dpre, void *dpre_lp, float *dbias_pre, float *dweight,
                                float *dbias, const float *dout, const void *dout_lp, const float *inp,
                                const void *inp_lp, const float *weight, const float *pre, int N, int C, int OC);

// gelu.cu
// out_lp non-NULL (bf16/fp16 only): gelu(pre) is written only there, rounded (out NULL).
void cuda_matmul_gelu_forward(CudaCtx *c, float *pre, float *out, void *out_lp, const float *inp,
                              const void *inp_lp, const float *weight, const float *bias, int N, int C, int OC);
// dinp may be dout (in place)
void cuda_gelu_backward(CudaCtx *c, float *dinp, const float *inp, const float *dout, long N);

// attention.cu (attention dropout: batch row b is global row k.row0 + b*k.row_stride, element
// (b,h,t,t2) of att has mask index dropout_global_index(k, b, NH*T*T, (h*T + t)*T + t2))
// out_lp non-NULL: the output's compute-dtype copy too (Backend.attention_forward_lp); out NULL: none in fp32
// qkv_lp non-NULL: qkv given only as its compute-dtype copy (qkv NULL), on the fused path alone
// (cuda_flash_attention_ok; elsewhere it aborts)
void cuda_attention_forward(CudaCtx *c, float *out, void *out_lp, float *att, const float *qkv,
                            const void *qkv_lp, int B, int T, int C, int NH, float attn_p, DropoutKey k);
// dqkv_lp non-NULL: the gradient's compute-dtype copy too (Backend.attention_backward_lp); dqkv
// NULL: none in fp32
void cuda_attention_backward(CudaCtx *c, float *dqkv, void *dqkv_lp, float *scratch, const float *dout,
                             const float *qkv, const void *qkv_lp, const float *att, int B, int T, int C, int NH,
                             float attn_p, DropoutKey k);
// flash_attention.cu: the fused path of the two above (bf16/fp16, hs a multiple of 16 up to 128,
// any T: cuda_flash_attention_ok); `att` then holds the log-sum-exp rows and the per-head output
// (see the file; B*NH*T*(hs+1) floats, kernels/backend.h: attention_att_floats), which only its
// backward reads
bool cuda_flash_attention_ok(const CudaCtx *c, int T, int C, int NH);
void cuda_flash_attention_forward(CudaCtx *c, float *out, void *out_lp, float *att, const float *qkv,
                                  const void *qkv_lp, int B, int T, int C, int NH, float attn_p, DropoutKey key);
void cuda_flash_attention_backward(CudaCtx *c, float *dqkv, void *dqkv_lp, float *scratch, const float *dout,
                                   const float *qkv, const void *qkv_lp, const float *att, int B, int T, int C, int NH,
                                   float attn_p, DropoutKey key);
// key/value-cache attention of inference (Backend.attention_forward_cached), fp32 in every dtype
void cuda_attention_forward_cached(CudaCtx *c, float *out, float *att, float *kcache, float *vcache,
                                   const float *qkv, int B, int p0, int Tn, int Tq, int T_max, int C, int NH);

// classifier.cu
void cuda_crossentropy_forward(CudaCtx *c, float *losses, float *probs, const float *logits,
                               const int32_t *targets, int N, int V);
void cuda_crossentropy_softmax_backward(CudaCtx *c, float *dlogits, const float *probs,
                                        const int32_t *targets, int N, int V, float dloss);
// losses and dlogits = dloss (softmax - onehot) in one pass; dlogits may alias logits
void cuda_crossentropy_forward_backward(CudaCtx *c, float *losses, float *dlogits, const float *logits,
                                        const int32_t *targets, int N, int V, float dloss);

// dropout.cu: N elements in rows of row_len (N % row_len == 0 when p > 0, else a fatal error);
// element i is kept iff dropout_keep(k.key, dropout_global_index(k, i / row_len, row_len,
// i % row_len), threshold(p)). Forward overwrites out (may alias inp); backward overwrites dinp.
void cuda_dropout_forward(CudaCtx *c, float *out, const float *inp, long N, long row_len, float p,
                          DropoutKey k);
void cuda_dropout_backward(CudaCtx *c, float *dinp, const float *dout, long N, long row_len, float p,
                           DropoutKey k);

// adamw.cu
void cuda_adamw_update(CudaCtx *c, float *p, const float *g, float *m, float *v, size_t n,
                       float beta1, float beta2, float eps, float decay_factor, float step_size,
                       float bc2_sqrt, float grad_scale);
// Backend.adamw_update_segments: one launch over all segments; the segment table goes to device
// memory (scratch SCR_ADAMW, with one stream synchronisation) only when segs differ from the
// last call's, so a run's steps upload it once and then allocate and synchronise nothing.
void cuda_adamw_update_segments(CudaCtx *c, float *p, const float *g, float *m, float *v,
                                const AdamWSegment *segs, int n_segs, float beta1, float beta2, float eps,
                                float decay_factor, float step_size, float bc2_sqrt, float grad_scale);

// global_norm.cu
double cuda_sum_squares(CudaCtx *c, const float *x, size_t n);
// The same sum of squares (n >= 0) into res->ssq, queued (no host wait), and in the launch that
// finishes it the optimizer tail's decision (Backend.optimizer_tail) into res.
void cuda_sum_squares_tail(CudaCtx *c, const float *x, size_t n, const float *losses, const int32_t *targets,
                           size_t n_losses, const OptimizerTailArgs *args, OptimizerTailResult *res);
// Backend.optimizer_tail: cuda_sum_squares_tail, then one adamw_segments launch reading the decision.
void cuda_optimizer_tail(CudaCtx *c, float *p, const float *g, float *m, float *v, size_t n,
                         const AdamWSegment *segs, int n_segs, float beta1, float beta2, float eps,
                         const float *losses, const int32_t *targets, size_t n_losses,
                         const OptimizerTailArgs *args, OptimizerTailResult *res);

// loss_scale.cu
void cuda_scale(CudaCtx *c, float *x, size_t n, float s);
// acc = x (copy) or acc += x, on the compute stream (Backend.accumulate).
void cuda_accumulate(CudaCtx *c, float *acc, const float *x, size_t n, int copy);

// comm_nccl.cu: Backend.grad_comm_create (kernels/backend.h, dist/comm.h): the "nccl" gradient
// communicator over the ranks of `host`, its all-reduces on a stream of its own fenced with
// events against c->stream. NULL with a message naming the rank in err on failure.
Comm *cuda_grad_comm_create(Backend *be, Comm *host, char *err, size_t errlen);

#endif
