// kernels/cuda/emu/cublaslt_emu.h -- the cuBLASLt subset mingpt uses, on the CPU. Included by
// cuda_emu.h after its cuBLAS shim (needs emu::gemm_load / gemm_acc, submit_on, is_dev); not a
// header of its own.
//
// What is emulated, no more:
//   cublasLtCreate / cublasLtDestroy, cublasLtGetStatusString / Name,
//   cublasLtMatmulDescCreate / Destroy / SetAttribute: COMPUTE_TYPE, SCALE_TYPE (CUDA_R_32F),
//     POINTER_MODE (host), TRANSA, TRANSB, EPILOGUE, BIAS_POINTER, BIAS_DATA_TYPE (CUDA_R_32F),
//     EPILOGUE_AUX_POINTER, EPILOGUE_AUX_LD, EPILOGUE_AUX_DATA_TYPE (CUDA_R_32F). Both data types
//     default (unset, -1) to D's type, as cuBLASLt documents; a bias or aux whose type is then
//     16-bit is not emulated (refused), so a 16-bit D with an epilogue vector needs them set;
//   cublasLtMatrixLayoutCreate / Destroy (column-major, one matrix: no layout attributes);
//   cublasLtMatmul with algo NULL (the library's own heuristic), A and B fp32 / bf16 / fp16 (the
//     same type), C and D of one type, fp32 or A's (a 16-bit D holds the fp32 epilogue result
//     rounded to nearest even: the same bits as an fp32 D rounded afterwards), compute
//     CUBLAS_COMPUTE_32F or _32F_FAST_TF32, and the epilogues
//       DEFAULT        D = alpha op(A) op(B) + beta C
//       BIAS           D = ... + bias[i]                      (bias: m floats)
//       GELU_AUX_BIAS  aux = ... + bias[i]; D = gelu(aux)     (tanh GELU; aux fp32, aux_ld >= m and
//                                                              a multiple of 8, as cuBLASLt requires)
//       BGRADA         D as DEFAULT; bias[i] = sum_p op(A)[i,p] (m floats, overwritten)
//       BGRADB         D as DEFAULT; bias[j] = sum_p op(B)[p,j] (n floats, overwritten)
//       DGELU_BGRAD    D = gelu'(aux) * (alpha op(A) op(B) + beta C) (aux: the GELU input, fp32, as
//                      for GELU_AUX_BIAS); bias[i] = sum_j D[i,j] (m floats, overwritten)
// Any other attribute, value, type or epilogue is refused with CUBLAS_STATUS_NOT_SUPPORTED (an
// attribute buffer of the wrong size with CUBLAS_STATUS_INVALID_VALUE), never ignored.
// EMU_CUBLASLT_LP_D=refuse (read at each cublasLtMatmul): a 16-bit D with an epilogue vector (BIAS,
// GELU_AUX_BIAS, DGELU_BGRAD, BGRADA/B: whose vectors can only be fp32 here) is refused with
// CUBLAS_STATUS_NOT_SUPPORTED, nothing written, as a cuBLASLt without such a kernel may do
// (cublasLt.h lists non-default vector types only for fp8 D): the callers' fallbacks then run.
//
// Numerics: the product is the cuBLAS shim's (emu::gemm_acc: operands read and rounded at the
// same points, the same fp32 sums), so a BIAS epilogue gives bitwise the values of cublasGemmEx
// followed by an fp32 `out += bias` pass. The epilogue works on the fp32 value alpha*acc + beta*C.
// Bias gradients sum the operand as stored (bf16/fp16 values when A/B are; before any TF32
// rounding) in fp32, ascending p. GELU is x / (1 + exp(-2 sqrt(2/pi) (x + 0.044715 x^3))), the
// formula of kernels/cuda/gelu.cu, gelu' that of its gelu_backward_kernel; real cuBLASLt
// evaluates its own approximations (compare with tolerances, as for every GPU result).
// DGELU_BGRAD's bias gradient sums the fp32 D values of a row (before a 16-bit D's rounding) in ascending j.
//
// Like the cuBLAS shim, a cublasLtMatmul is queued on its stream (EMU_DEFER=1: runs at the next
// synchronisation; recorded as a node while the stream is capturing a CUDA graph) and is not
// counted as a kernel launch by emu_launch_count().
#ifndef CUBLASLT_EMU_H
#define CUBLASLT_EMU_H 1

#include <cublasLt.h>

struct cublasLtContext { int magic = 0x4c74; };
namespace emu {
namespace lt {
constexpr uint32_t DESC_MAGIC = 0x4c744d44u, LAYOUT_MAGIC = 0x4c744c59u;
struct Desc {
  uint32_t magic = DESC_MAGIC;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  void* bias = nullptr;
  void* aux = nullptr;
  int64_t aux_ld = 0;
  int32_t bias_type = -1, aux_type = -1;   // -1: D's type
};
struct Layout {
  uint32_t magic = LAYOUT_MAGIC;
  cudaDataType type = CUDA_R_32F;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
};
inline Desc* desc(cublasLtMatmulDesc_t d) {
  Desc* p = reinterpret_cast<Desc*>(d);
  return p && p->magic == DESC_MAGIC ? p : nullptr;
}
inline Layout* layout(cublasLtMatrixLayout_t l) {
  Layout* p = reinterpret_cast<Layout*>(l);
  return p && p->magic == LAYOUT_MAGIC ? p : nullptr;
}
inline bool epilogue_ok(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_DEFAULT || e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
         e == CUBLASLT_EPILOGUE_BGRADA || e == CUBLASLT_EPILOGUE_BGRADB || e == CUBLASLT_EPILOGUE_DGELU_BGRAD;
}
inline cublasStatus_t refuse(const char* what) {
  fprintf(stderr, "[cuda-emu] cublasLtMatmul: %s\n", what);
  return CUBLAS_STATUS_NOT_SUPPORTED;
}
// EMU_CUBLASLT_LP_D=refuse (see cublasLtMatmul)
inline bool lp_d_refused() {
  const char* v = getenv("EMU_CUBLASLT_LP_D");
  if (!v || !*v) return false;
  if (strcmp(v, "refuse") == 0) return true;
  fprintf(stderr, "[cuda-emu] EMU_CUBLASLT_LP_D=%s: only 'refuse' (or unset) is known\n", v);
  abort();
}
inline float gelu(float x) {  // kernels/cuda/gelu.cu's gelu_f, operation for operation
  const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  return x / (1.0f + expf(-2.0f * u));
}
inline float dgelu(float x) {  // kernels/cuda/gelu.cu's gelu_backward_kernel, operation for operation
  const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  const float e = expf(fminf(-2.0f * u, 80.0f));
  const float s = 1.0f / (1.0f + e);
  return s + 2.0f * x * (e * s * s) * 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * x * x);
}
}  // namespace lt
}  // namespace emu

inline cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) {
  if (!h) return CUBLAS_STATUS_INVALID_VALUE;
  *h = new cublasLtContext();
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) { emu::flush(); delete h; return CUBLAS_STATUS_SUCCESS; }
inline const char* cublasLtGetStatusString(cublasStatus_t s) { return cublasGetStatusString(s); }
inline const char* cublasLtGetStatusName(cublasStatus_t s) { return cublasGetStatusString(s); }

inline cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t ct, cudaDataType_t scale) {
  if (!d) return CUBLAS_STATUS_INVALID_VALUE;
  if ((ct != CUBLAS_COMPUTE_32F && ct != CUBLAS_COMPUTE_32F_FAST_TF32) || scale != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  emu::lt::Desc* p = new emu::lt::Desc();
  p->compute = ct;
  *d = reinterpret_cast<cublasLtMatmulDesc_t>(p);
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  emu::lt::Desc* p = emu::lt::desc(d);
  if (d && !p) return CUBLAS_STATUS_INVALID_VALUE;
  if (p) p->magic = 0;
  delete p;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const void* buf, size_t size) {
  emu::lt::Desc* p = emu::lt::desc(d);
  if (!p || !buf) return CUBLAS_STATUS_INVALID_VALUE;
  int32_t i32 = 0;
  auto want = [&](size_t n) { return size == n; };
  switch (attr) {
  case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE:
    if (!want(4)) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(&i32, buf, 4);
    if (i32 != CUBLAS_COMPUTE_32F && i32 != CUBLAS_COMPUTE_32F_FAST_TF32) return CUBLAS_STATUS_NOT_SUPPORTED;
    p->compute = (cublasComputeType_t)i32;
    return CUBLAS_STATUS_SUCCESS;
  case CUBLASLT_MATMUL_DESC_SCALE_TYPE:
  case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE:   // fp32 only (or -1: D's type)
    if (!want(4)) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(&i32, buf, 4);
    if (i32 != CUDA_R_32F && !(i32 == -1 && attr != CUBLASLT_MATMUL_DESC_SCALE_TYPE)) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (attr == CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE) p->bias_type = i32;
    if (attr == CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE) p->aux_type = i32;
    return CUBLAS_STATUS_SUCCESS;
  case CUBLASLT_MATMUL_DESC_POINTER_MODE:
    if (!want(4)) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(&i32, buf, 4);
    return i32 == CUBLASLT_POINTER_MODE_HOST ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
  case CUBLASLT_MATMUL_DESC_TRANSA:
  case CUBLASLT_MATMUL_DESC_TRANSB:
    if (!want(4)) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(&i32, buf, 4);
    if (i32 != CUBLAS_OP_N && i32 != CUBLAS_OP_T) return CUBLAS_STATUS_NOT_SUPPORTED;
    (attr == CUBLASLT_MATMUL_DESC_TRANSA ? p->ta : p->tb) = (cublasOperation_t)i32;
    return CUBLAS_STATUS_SUCCESS;
  case CUBLASLT_MATMUL_DESC_EPILOGUE: {
    if (!want(4)) return CUBLAS_STATUS_INVALID_VALUE;
    uint32_t e; memcpy(&e, buf, 4);
    if (!emu::lt::epilogue_ok(e)) return CUBLAS_STATUS_NOT_SUPPORTED;
    p->epilogue = e;
    return CUBLAS_STATUS_SUCCESS;
  }
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
    if (!want(sizeof(void*))) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(&p->bias, buf, sizeof(void*));
    return CUBLAS_STATUS_SUCCESS;
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
    if (!want(sizeof(void*))) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(&p->aux, buf, sizeof(void*));
    return CUBLAS_STATUS_SUCCESS;
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
    if (!want(8)) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(&p->aux_ld, buf, 8);
    return CUBLAS_STATUS_SUCCESS;
  default:
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

inline cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType type, uint64_t rows, uint64_t cols, int64_t ld) {
  if (!l) return CUBLAS_STATUS_INVALID_VALUE;
  if (!emu::dt_size(type)) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (ld < 1 || (uint64_t)ld < rows || rows > 0x7fffffffu || cols > 0x7fffffffu) return CUBLAS_STATUS_INVALID_VALUE;
  emu::lt::Layout* p = new emu::lt::Layout();
  p->type = type; p->rows = rows; p->cols = cols; p->ld = ld;
  *l = reinterpret_cast<cublasLtMatrixLayout_t>(p);
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
  emu::lt::Layout* p = emu::lt::layout(l);
  if (l && !p) return CUBLAS_STATUS_INVALID_VALUE;
  if (p) p->magic = 0;
  delete p;
  return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t opdesc, const void* alpha_p, const void* A,
                                     cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta_p,
                                     const void* C, cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
                                     const cublasLtMatmulAlgo_t* algo, void*, size_t, cudaStream_t stream) {
  using namespace emu::lt;
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  const Desc* d = desc(opdesc);
  const Layout *la = layout(Adesc), *lb = layout(Bdesc), *lc = layout(Cdesc), *ld = layout(Ddesc);
  if (!d || !la || !lb || !lc || !ld || !alpha_p || !beta_p) return CUBLAS_STATUS_INVALID_VALUE;
  if (algo) return refuse("only algo NULL (the library's heuristic) is emulated");
  const bool tA = d->ta == CUBLAS_OP_T, tB = d->tb == CUBLAS_OP_T;
  const uint64_t m = ld->rows, n = ld->cols, k = tA ? la->rows : la->cols;
  if ((tA ? la->cols : la->rows) != m || (tB ? lb->cols : lb->rows) != k || (tB ? lb->rows : lb->cols) != n ||
      lc->rows != m || lc->cols != n) {
    fprintf(stderr, "[cuda-emu] cublasLtMatmul: layouts do not fit: A %llux%llu%s, B %llux%llu%s, C %llux%llu, D %llux%llu\n",
            (unsigned long long)la->rows, (unsigned long long)la->cols, tA ? "^T" : "", (unsigned long long)lb->rows,
            (unsigned long long)lb->cols, tB ? "^T" : "", (unsigned long long)lc->rows, (unsigned long long)lc->cols,
            (unsigned long long)m, (unsigned long long)n);
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (la->type != lb->type) return refuse("A and B of different types");
  if (lc->type != ld->type || (ld->type != CUDA_R_32F && ld->type != la->type))
    return refuse("C and D must be of one type, fp32 or A's");
  if (C == D && lc->ld != ld->ld) return CUBLAS_STATUS_INVALID_VALUE;  // in place needs one layout
  const float alpha = *(const float*)alpha_p, beta = *(const float*)beta_p;
  const uint32_t epi = d->epilogue;
  const bool bias_in = epi == CUBLASLT_EPILOGUE_BIAS || epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  const bool bgrad_a = epi == CUBLASLT_EPILOGUE_BGRADA, bgrad_b = epi == CUBLASLT_EPILOGUE_BGRADB;
  const bool dgelu_bgrad = epi == CUBLASLT_EPILOGUE_DGELU_BGRAD;
  const bool aux = epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || dgelu_bgrad;
  const bool bgrad = bgrad_a || bgrad_b || dgelu_bgrad;
  const uint64_t nbias = bgrad_b ? n : m;
  if ((bias_in || bgrad) && !d->bias) return refuse("the epilogue needs CUBLASLT_MATMUL_DESC_BIAS_POINTER");
  // the vectors' types: unset means D's type, and only fp32 vectors are emulated
  if ((bias_in || bgrad) && (d->bias_type == -1 ? (int32_t)ld->type : d->bias_type) != CUDA_R_32F)
    return refuse("a bias of D's 16-bit type is not emulated: set CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE CUDA_R_32F");
  if (aux && (d->aux_type == -1 ? (int32_t)ld->type : d->aux_type) != CUDA_R_32F)
    return refuse("an aux of D's 16-bit type is not emulated: set CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE CUDA_R_32F");
  // EMU_CUBLASLT_LP_D=refuse: play a cuBLASLt that has no kernel for a 16-bit D with fp32 epilogue
  // vectors (cublasLt.h documents those vectors as D's type, other types only for fp8), so that
  // the callers' fallbacks run; read at every call (a test may set it between calls)
  if ((bias_in || bgrad || aux) && ld->type != CUDA_R_32F && lp_d_refused()) {
    static bool said = false;
    if (!said) {
      said = true;
      fprintf(stderr, "[cuda-emu] cublasLtMatmul: EMU_CUBLASLT_LP_D=refuse: a 16-bit D with fp32 bias / aux vectors "
              "refused (CUBLAS_STATUS_NOT_SUPPORTED; said once)\n");
    }
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (aux && (!d->aux || d->aux_ld < (int64_t)m || d->aux_ld % 8)) {
    fprintf(stderr, "[cuda-emu] cublasLtMatmul: GELU_AUX_BIAS / DGELU_BGRAD need EPILOGUE_AUX_POINTER and EPILOGUE_AUX_LD >= %llu, "
            "a multiple of 8 (got %p, %lld)\n", (unsigned long long)m, d->aux, (long long)d->aux_ld);
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  const char* fn = "cublasLtMatmul";
  if (!emu::operand_ok(fn, "A", A, la->type, (long)la->rows, (long)la->cols, (long)la->ld, 0, 1) ||
      !emu::operand_ok(fn, "B", B, lb->type, (long)lb->rows, (long)lb->cols, (long)lb->ld, 0, 1) ||
      (beta != 0.f && !emu::operand_ok(fn, "C", C, lc->type, (long)m, (long)n, (long)lc->ld, 0, 1)) ||
      !emu::operand_ok(fn, "D", D, ld->type, (long)m, (long)n, (long)ld->ld, 0, 1) ||
      ((bias_in || bgrad) && !emu::operand_ok(fn, "bias", d->bias, CUDA_R_32F, (long)nbias, 1, (long)nbias, 0, 1)) ||
      (aux && !emu::operand_ok(fn, "aux", d->aux, CUDA_R_32F, (long)m, (long)n, (long)d->aux_ld, 0, 1)))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  const bool tf32 = d->compute == CUBLAS_COMPUTE_32F_FAST_TF32 && la->type == CUDA_R_32F;
  const cudaDataType at = la->type, ct = lc->type, dt = ld->type;
  const int M = (int)m, N = (int)n, K = (int)k, lda = (int)la->ld, ldb = (int)lb->ld, ldc = (int)lc->ld, ldd = (int)ld->ld;
  float* bias = (float*)d->bias;
  float* auxp = (float*)d->aux;
  const int64_t aux_ld = d->aux_ld;
  const cudaError_t enq = emu::submit_on(stream, [=] {
    std::vector<float> a, b, acc;
    emu::gemm_load(tA, tB, M, N, K, (const char*)A, at, lda, (const char*)B, at, ldb, a, b);
    // bias gradients of the operands as stored (before TF32 rounding), fp32, ascending p
    std::vector<float> g;
    if (bgrad_a) { g.assign(M, 0.f); for (int i = 0; i < M; i++) for (int p = 0; p < K; p++) g[i] += a[(size_t)i * K + p]; }
    if (bgrad_b) { g.assign(N, 0.f); for (int j = 0; j < N; j++) for (int p = 0; p < K; p++) g[j] += b[(size_t)j * K + p]; }
    emu::gemm_acc(M, N, K, a, b, tf32, acc);
    std::vector<float> out((size_t)M * N);   // C may be D: read every C before writing D
    for (int j = 0; j < N; j++)
      for (int i = 0; i < M; i++) {
        float v = alpha * acc[(size_t)i * N + j];
        if (beta != 0.f) v += beta * emu::ld_el(C, ct, (size_t)i + (size_t)j * ldc);
        if (bias_in) v += bias[i];
        if (dgelu_bgrad) v = dgelu(auxp[(size_t)i + (size_t)j * aux_ld]) * v;
        else if (aux) { auxp[(size_t)i + (size_t)j * aux_ld] = v; v = gelu(v); }
        out[(size_t)i * N + j] = v;
      }
    if (dgelu_bgrad) { g.assign(M, 0.f); for (int i = 0; i < M; i++) for (int j = 0; j < N; j++) g[i] += out[(size_t)i * N + j]; }
    for (int j = 0; j < N; j++)
      for (int i = 0; i < M; i++) emu::st_el(D, dt, (size_t)i + (size_t)j * ldd, out[(size_t)i * N + j]);
    if (bgrad) memcpy(bias, g.data(), g.size() * sizeof(float));
  });
  // recorded when the stream is capturing (a CUDA graph); a capture invalidated before fails it
  return enq == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

#endif  // CUBLASLT_EMU_H
