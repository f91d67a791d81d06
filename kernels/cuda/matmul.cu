// kernels/cuda/matmul.cu — nn.Linear forward/backward on cuBLAS, the GEMM wrapper every
// family uses, and the rounding kernels of mixed precision.
//
// Row-major (N,C) @ (OC,C)^T is the column-major product W^T-free form cuBLAS expects:
//   out^T (OC,N) = op_T(W as C x OC) * inp^T (C,N)                       forward
//   dinp^T (C,N) = W (C x OC) * dout^T (OC,N)   (beta 0: overwritten)      backward, data
//   dweight^T (C,OC) += inp^T (C,N) * op_T(dout^T) (N,OC)                 backward, weights
//                        (beta 1; beta 0, =, under Backend.set_grad_write's GRAD_OVERWRITE)
// With matmul_dtype BF16/FP16 the operands are first rounded (round to nearest even) into
// scratch buffers of that type; products accumulate in fp32 (CUBLAS_COMPUTE_32F, tensor
// cores on sm_80+) and outputs stay fp32. FP32 mode uses plain fp32 GEMMs (no TF32) unless
// Backend.set_matmul_precision asked for TF32 (CUBLAS_COMPUTE_32F_FAST_TF32: inputs rounded to
// TF32 inside cuBLAS, fp32 accumulation), torch.backends.cuda.matmul.allow_tf32's behaviour.
// Weights inside the flat parameter buffer come from the weight-cast cache instead
// (Backend.cast_weights: the whole buffer rounded once per parameter version, as
// torch.autocast's cache casts each weight once per optimizer step); activations and
// gradients, and weights outside that buffer, are rounded per call, except those whose producer
// wrote the copy (inp_lp / dout_lp: kernels/backend.h).
//
// Epilogues on cuBLASLt (cuda_lt_matmul): the forward's bias add rides on the GEMM
// (CUBLASLT_EPILOGUE_BIAS, no bias kernel), matmul_gelu_forward's bias + GELU too (gelu.cu), and
// the backward's bias gradient is a BGRADB epilogue of the dweight GEMM (the column sums of the
// dout operand, no colsum kernels). matmul_forward's out_lp (attn.c_attn's output, which the
// fused attention reads only as that copy) is the BIAS epilogue's D in bf16/fp16: the fp32
// accumulator plus the fp32 bias, rounded once in the store; without cuBLASLt the fp32 GEMM into
// scratch and one kernel adding the bias and rounding (bias_round_kernel), the same values. BGRADB overwrites its vector: under GRAD_OVERWRITE
// (Backend.set_grad_write: the first backward after the gradients were zeroed) it writes dbias
// itself, no other launch; under GRAD_ACCUMULATE (later micro-steps of gradient accumulation add
// up, kernels/backend.h) it writes scratch and one accumulate kernel of OC elements adds that to
// dbias: 1 launch and 12 OC bytes instead of 2 launches and a pass over dout (4 N OC bytes).
// With bf16/fp16 matmuls the bias gradient sums the rounded dout operand (as torch.autocast's
// Linear, whose grad_output is bf16), in fp32. matmul_backward_dgelu (the MLP's c_proj) runs its
// data-gradient GEMM with the DGELU_BGRAD epilogue instead: gelu'(pre) times the fp32
// accumulator, and the sums of that (the c_fc bias gradient) beside it, into dbias_pre or
// scratch as BGRADB's; with dpre_lp its D is c_fc's dout operand in bf16/fp16 (the fp32 value
// rounded in the store), the bias and aux vectors staying fp32. Where cuBLASLt cannot take a
// case (no handle; a GELU aux leading dimension not a multiple of 8, its documented requirement;
// a shape, type or alignment it refuses with
// NOT_SUPPORTED / INVALID_VALUE, noted once on stderr) the cuBLAS GEMM and the separate kernels
// run instead, with the same results up to rounding.
#include "kernels/cuda/cuda_ops.cuh"

// Per-call rounding of a GEMM operand.
template <class T>
__global__ void round_kernel(T *__restrict__ out, const float *__restrict__ in, size_t n) {
    GRID_STRIDE(i, n) store_as(out + i, in[i]);
}

// The weight-cast cache's one pass: the same rounding as round_kernel (so a cached weight is
// bitwise the per-call one), under its own name so that launches can be told apart
// (tests/cuda/test_cuda_cast.c counts both under emulation).
template <class T>
__global__ void cast_weights_kernel(T *__restrict__ out, const float *__restrict__ in, size_t n) {
    GRID_STRIDE(i, n) store_as(out + i, in[i]);
}

// out (N,OC) += bias broadcast over rows
__global__ void add_bias_kernel(float *__restrict__ out, const float *__restrict__ bias, int OC, size_t total) {
    GRID_STRIDE(i, total) out[i] += bias[i % OC];
}

// out_lp (N,OC) = in + bias (when given) in fp32, rounded once: add_bias_kernel then round_kernel
// in one pass (matmul_forward's out_lp where cuBLASLt's epilogue cannot write it)
template <class T>
__global__ void bias_round_kernel(T *__restrict__ out_lp, const float *__restrict__ in, const float *__restrict__ bias,
                                  int OC, size_t total) {
    GRID_STRIDE(i, total) store_as(out_lp + i, bias ? in[i] + bias[i % OC] : in[i]);
}

cudaDataType cuda_gemm_type(const CudaCtx *c) {
    return c->dtype == DTYPE_BF16 ? CUDA_R_16BF : c->dtype == DTYPE_FP16 ? CUDA_R_16F : CUDA_R_32F;
}

void cuda_gemm(CudaCtx *c, bool transA, bool transB, int m, int n, int k, const void *A, int lda,
               long long strideA, const void *B, int ldb, long long strideB, float alpha,
               float beta, float *C, int ldc, long long strideC, int batch) {
    if (m <= 0 || n <= 0 || batch <= 0) return;
    const cudaDataType t = cuda_gemm_type(c);
    const cublasOperation_t ta = transA ? CUBLAS_OP_T : CUBLAS_OP_N, tb = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasComputeType_t ct = t == CUDA_R_32F && c->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    if (batch == 1)
        CUBLAS_CHECK(cublasGemmEx(c->cublas, ta, tb, m, n, k, &alpha, A, t, lda, B, t, ldb, &beta,
                                  C, CUDA_R_32F, ldc, ct, CUBLAS_GEMM_DEFAULT));
    else
        CUBLAS_CHECK(cublasGemmStridedBatchedEx(c->cublas, ta, tb, m, n, k, &alpha, A, t, lda, strideA,
                                                B, t, ldb, strideB, &beta, C, CUDA_R_32F, ldc, strideC,
                                                batch, ct, CUBLAS_GEMM_DEFAULT));
}

// Bytes of cuBLASLt workspace (NVIDIA's recommendation for Hopper; Ampere needs less).
#define CUDA_LT_WORKSPACE ((size_t)32 << 20)

bool cuda_lt_matmul(CudaCtx *c, bool transA, bool transB, int m, int n, int k, const void *A, int lda,
                    const void *B, int ldb, float beta, void *D, int ldd, cublasLtEpilogue_t epilogue,
                    float *bias, float *aux, int aux_ld, bool d_lp) {
    if (!c->cublaslt) return false;
    // cuBLASLt's documented requirement: the GELU input matrix's leading dimension a multiple of 8
    if ((epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || epilogue == CUBLASLT_EPILOGUE_DGELU_BGRAD) && aux_ld % 8)
        return false;
    const cudaDataType t = cuda_gemm_type(c);
    const cublasComputeType_t ct = t == CUDA_R_32F && c->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    void *ws = cuda_scratch(c, SCR_LT_WS, CUDA_LT_WORKSPACE);
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
    const cublasOperation_t ta = transA ? CUBLAS_OP_T : CUBLAS_OP_N, tb = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    const uint32_t epi = (uint32_t)epilogue;
    const int64_t ald = aux_ld;
    // the epilogue vectors stay fp32 whatever D's type (unset, cuBLASLt takes D's type)
    const int32_t f32 = CUDA_R_32F;
    const cudaDataType dt = d_lp ? t : CUDA_R_32F;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, ct, CUDA_R_32F));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (bias) {
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &f32, sizeof f32));
    }
    if (aux) {
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &f32, sizeof f32));
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ald, sizeof ald));
    }
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, t, transA ? k : m, transA ? m : k, lda));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, t, transB ? n : k, transB ? k : n, ldb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ld, dt, m, n, ldd));
    const float alpha = 1.0f;
    // algo NULL: cuBLASLt's heuristic picks a kernel for these pointers' alignment; when none fits
    // (CUBLAS_STATUS_NOT_SUPPORTED) the caller takes the cuBLAS path
    const cublasStatus_t s = cublasLtMatmul(c->cublaslt, desc, &alpha, A, la, B, lb, &beta, D, ld, D, ld, nullptr,
                                            ws, CUDA_LT_WORKSPACE, c->stream);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatmulDescDestroy(desc);
    if (s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_INVALID_VALUE) {
        // a configuration this cuBLASLt refuses (its rules vary by version and GPU): the cuBLAS path,
        // said once per epilogue kind (the emulator refuses none that reach here, except a 16-bit D
        // with fp32 vectors under EMU_CUBLASLT_LP_D=refuse: tests/cuda/test_cuda_cast.c counts the
        // epilogues' kernels and, under that switch, the fallbacks')
        static bool said[8];
        const int kind = (epilogue == CUBLASLT_EPILOGUE_BIAS ? 0 : epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ? 1
                       : epilogue == CUBLASLT_EPILOGUE_BGRADB ? 2 : 3) + (d_lp ? 4 : 0);
        if (!said[kind]) {
            said[kind] = true;
            fprintf(stderr, "mingpt: note: CUDA backend: cuBLASLt refused epilogue %u (%d x %d x %d, D %s): %s; that "
                    "product runs as cuBLAS + kernels\n", epi, m, n, k, d_lp ? "16-bit" : "fp32", cublasGetStatusString(s));
        }
        return false;
    }
    CUBLAS_CHECK(s);
    return true;
}

void cuda_round_to(CudaCtx *c, void *out, const float *in, size_t n) {
    if (!n) return;
    const unsigned g = grid_for(c, n);
    switch (c->dtype) {
    case DTYPE_BF16: LAUNCH((round_kernel<__nv_bfloat16>), g, BLOCK, 0, c->stream)((__nv_bfloat16 *)out, in, n); break;
    case DTYPE_FP16: LAUNCH((round_kernel<__half>), g, BLOCK, 0, c->stream)((__half *)out, in, n); break;
    default: CUDA_CHECK(cudaMemcpyAsync(out, in, n * sizeof(float), cudaMemcpyDeviceToDevice, c->stream)); return;
    }
    LAUNCH_CHECK();
}

const void *cuda_gemm_operand(CudaCtx *c, int slot, const float *x, size_t n) {
    if (c->dtype == DTYPE_FP32) return x;
    void *lp = cuda_scratch(c, slot, n * dtype_size(c->dtype));
    cuda_round_to(c, lp, x, n);
    return lp;
}

// ---------------------------------------------------------------- the weight-cast cache
void cuda_cast_weights(CudaCtx *c, const float *params, size_t n, uint64_t version) {
    WeightCast *w = &c->wcast;
    if (c->dtype == DTYPE_FP32) return;
    if (!params || !n) { w->params = nullptr; return; }
    if (w->params == params && w->n == n && w->version == version) return;
    w->params = nullptr;   // invalid until the cast below is queued
    if (n > w->cap) {      // allocated once for a model (again only for a larger buffer)
        if (w->lp) CUDA_CHECK(cudaFree(w->lp));   // synchronises with pending reads of it
        w->lp = nullptr;
        w->cap = 0;
        CUDA_CHECK(cudaMalloc(&w->lp, n * dtype_size(c->dtype)));
        w->cap = n;
    }
    const unsigned g = grid_for(c, n);
    if (c->dtype == DTYPE_BF16)
        LAUNCH((cast_weights_kernel<__nv_bfloat16>), g, BLOCK, 0, c->stream)((__nv_bfloat16 *)w->lp, params, n);
    else
        LAUNCH((cast_weights_kernel<__half>), g, BLOCK, 0, c->stream)((__half *)w->lp, params, n);
    LAUNCH_CHECK();
    w->params = params;
    w->n = n;
    w->version = version;
}

void cuda_cast_touch(CudaCtx *c, const void *p, size_t bytes) {
    WeightCast *w = &c->wcast;
    if (!w->params || !p || !bytes) return;
    const uintptr_t a = (uintptr_t)p, lo = (uintptr_t)w->params, hi = lo + w->n * sizeof(float);
    if (a < hi && lo < a + bytes) w->params = nullptr;
}

const void *cuda_weight_operand(CudaCtx *c, const float *weight, size_t n) {
    const WeightCast *w = &c->wcast;
    if (c->dtype != DTYPE_FP32 && w->params) {
        const uintptr_t a = (uintptr_t)weight, lo = (uintptr_t)w->params, hi = lo + w->n * sizeof(float);
        if (a >= lo && a + n * sizeof(float) <= hi)   // wholly inside the cached buffer
            return (const char *)w->lp + (size_t)(weight - w->params) * dtype_size(c->dtype);
    }
    return cuda_gemm_operand(c, SCR_W_LP, weight, n);
}

void cuda_matmul_forward(CudaCtx *c, float *out, void *out_lp, const float *inp, const void *inp_lp,
                         const float *weight, const float *bias, int N, int C, int OC) {
    if (N <= 0 || OC <= 0) return;
    if (c->dtype == DTYPE_FP32 && out_lp && !out) out = (float *)out_lp;   // fp32 mode: the copy is fp32
    if (c->dtype == DTYPE_FP32) out_lp = nullptr;
    const void *A = cuda_weight_operand(c, weight, (size_t)OC * C);
    const void *B = inp_lp ? inp_lp : cuda_gemm_operand(c, SCR_IN_LP, inp, (size_t)N * C);
    // out_lp: D is the copy, acc + bias rounded in the epilogue's store
    if (bias && cuda_lt_matmul(c, true, false, OC, N, C, A, C, B, C, 0.0f, out_lp ? out_lp : (void *)out, OC,
                               CUBLASLT_EPILOGUE_BIAS, (float *)bias, nullptr, 0, out_lp != nullptr))
        return;
    if (out_lp) {   // the fp32 GEMM into scratch, then bias and rounding in one kernel
        const size_t total = (size_t)N * OC;
        float *y = (float *)cuda_scratch(c, SCR_F32, total * sizeof(float));
        cuda_gemm(c, true, false, OC, N, C, A, C, 0, B, C, 0, 1.0f, 0.0f, y, OC, 0, 1);
        if (c->dtype == DTYPE_BF16)
            LAUNCH((bias_round_kernel<__nv_bfloat16>), grid_for(c, total), BLOCK, 0, c->stream)(
                (__nv_bfloat16 *)out_lp, y, bias, OC, total);
        else
            LAUNCH((bias_round_kernel<__half>), grid_for(c, total), BLOCK, 0, c->stream)((__half *)out_lp, y, bias,
                                                                                          OC, total);
        LAUNCH_CHECK();
        return;
    }
    cuda_gemm(c, true, false, OC, N, C, A, C, 0, B, C, 0, 1.0f, 0.0f, out, OC, 0, 1);
    if (bias) {
        const size_t total = (size_t)N * OC;
        LAUNCH(add_bias_kernel, grid_for(c, total), BLOCK, 0, c->stream)(out, bias, OC, total);
        LAUNCH_CHECK();
    }
}

// dweight += dout^T inp and dbias += column sums of dout (= both under GRAD_OVERWRITE), given
// dout's GEMM operand D (and inp's, inp_lp, when its producer wrote it): one cuBLASLt GEMM with
// the BGRADB epilogue (which sums D, the rounded values; and, accumulating, one accumulate), else
// the cuBLAS GEMM and colsums (of dout, or of D when dout is NULL: its producer wrote only the
// rounded copy).
static void backward_weight(CudaCtx *c, const void *D, float *dweight, float *dbias, const float *dout,
                            const float *inp, const void *inp_lp, int N, int C, int OC) {
    const bool ow = c->grad_overwrite;
    if (dweight) {
        const void *X = inp_lp ? inp_lp : cuda_gemm_operand(c, SCR_IN_LP, inp, (size_t)N * C);
        float *g = !dbias ? nullptr : ow ? dbias : (float *)cuda_scratch(c, SCR_PART, (size_t)OC * sizeof(float));
        if (dbias && cuda_lt_matmul(c, false, true, C, OC, N, X, C, D, OC, ow ? 0.0f : 1.0f, dweight, C,
                                    CUBLASLT_EPILOGUE_BGRADB, g, nullptr, 0)) {
            if (!ow) cuda_accumulate(c, dbias, g, (size_t)OC, 0);   // the epilogue overwrote g; dbias accumulates
            return;
        }
        cuda_gemm(c, false, true, C, OC, N, X, C, 0, D, OC, 0, 1.0f, ow ? 0.0f : 1.0f, dweight, C, 0, 1);
    }
    if (dbias && dout) cuda_colsum(c, dbias, dout, N, OC, !ow);
    else if (dbias) cuda_colsum_lp(c, dbias, D, N, OC, !ow);
}

void cuda_matmul_backward(CudaCtx *c, float *dinp, float *dweight, float *dbias, const float *dout,
                          const void *dout_lp, const float *inp, const void *inp_lp, const float *weight, int N,
                          int C, int OC) {
    if (N <= 0 || OC <= 0 || C <= 0) return;
    // dout_lp: the producer's copy; dbias then sums its (rounded) values, as BGRADB does
    const void *D = dout_lp ? dout_lp : cuda_gemm_operand(c, SCR_DOUT_LP, dout, (size_t)N * OC);
    if (dinp) {
        const void *W = cuda_weight_operand(c, weight, (size_t)OC * C);
        cuda_gemm(c, false, false, C, N, OC, W, C, 0, D, OC, 0, 1.0f, 0.0f, dinp, C, 0, 1);
    }
    backward_weight(c, D, dweight, dbias, dout_lp ? nullptr : dout, inp, inp_lp, N, C, OC);
}

// Backend.matmul_backward_dgelu: the weight gradients first (inp is read before dpre is
// written), then the data gradient as one cuBLASLt GEMM with the DGELU_BGRAD epilogue (gelu'(pre)
// applied to the fp32 accumulator, the column sums of the result into dbias_pre under
// GRAD_OVERWRITE, else into scratch added to dbias_pre by one accumulate): no gelu_backward pass
// and no dinp buffer. dpre_lp: the epilogue's D is that copy (the fp32 value rounded once, as
// round_kernel would; the sums are of the fp32 values); where cuBLASLt refuses that 16-bit D, the
// epilogue with an fp32 D into scratch and the rounding into dpre_lp. Without cuBLASLt: the cuBLAS
// GEMM into dpre (or fp32 scratch), gelu_backward in place, the column sums, and the rounding.
void cuda_matmul_backward_dgelu(CudaCtx *c, float *dpre, void *dpre_lp, float *dbias_pre, float *dweight,
                                float *dbias, const float *dout, const void *dout_lp, const float *inp,
                                const void *inp_lp, const float *weight, const float *pre, int N, int C, int OC) {
    if (N <= 0 || OC <= 0 || C <= 0) return;
    if (c->dtype == DTYPE_FP32 && dpre_lp && !dpre) dpre = (float *)dpre_lp;   // fp32 mode: the copy is fp32
    if (c->dtype == DTYPE_FP32) dpre_lp = nullptr;
    const void *D = dout_lp ? dout_lp : cuda_gemm_operand(c, SCR_DOUT_LP, dout, (size_t)N * OC);
    backward_weight(c, D, dweight, dbias, dout_lp ? nullptr : dout, inp, inp_lp, N, C, OC);
    const void *W = cuda_weight_operand(c, weight, (size_t)OC * C);
    const bool ow = c->grad_overwrite;
    float *g = ow ? dbias_pre : (float *)cuda_scratch(c, SCR_PART, (size_t)C * sizeof(float));
    if (cuda_lt_matmul(c, false, false, C, N, OC, W, C, D, OC, 0.0f, dpre_lp ? dpre_lp : (void *)dpre, C,
                       CUBLASLT_EPILOGUE_DGELU_BGRAD, g, (float *)pre, C, dpre_lp != nullptr)) {
        if (!ow) cuda_accumulate(c, dbias_pre, g, (size_t)C, 0);
        return;
    }
    float *d = dpre ? dpre : (float *)cuda_scratch(c, SCR_F32, (size_t)N * C * sizeof(float));
    // a 16-bit D refused (cuBLASLt documents the bias / aux vectors as D's type): the same epilogue
    // with an fp32 D, then the rounding into dpre_lp; the bias gradient is the one of the epilogue
    // path with an fp32 dpre, and 1 launch replaces gelu_backward and the 2 colsum kernels
    if (dpre_lp && cuda_lt_matmul(c, false, false, C, N, OC, W, C, D, OC, 0.0f, d, C, CUBLASLT_EPILOGUE_DGELU_BGRAD, g,
                                  (float *)pre, C, false)) {
        if (!ow) cuda_accumulate(c, dbias_pre, g, (size_t)C, 0);
        cuda_round_to(c, dpre_lp, d, (size_t)N * C);
        return;
    }
    cuda_gemm(c, false, false, C, N, OC, W, C, 0, D, OC, 0, 1.0f, 0.0f, d, C, 0, 1);
    cuda_gelu_backward(c, d, pre, d, (long)N * C);   // in place
    cuda_colsum(c, dbias_pre, d, N, C, !ow);
    if (dpre_lp) cuda_round_to(c, dpre_lp, d, (size_t)N * C);
}
