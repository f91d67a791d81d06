// tests/cuda/emu/test_emu_cublaslt.cu — the cuBLASLt shim (kernels/cuda/emu/cublaslt_emu.h)
// against a double-precision reference: every emulated epilogue (DEFAULT, BIAS, GELU_AUX_BIAS,
// BGRADA, BGRADB, DGELU_BGRAD) with transposes, padded leading dimensions, beta != 0 in place, fp32 / bf16 /
// fp16 operands and TF32; bitwise agreement of DEFAULT and BIAS with cublasGemmEx (+ bias) (the
// same product); and the refusals (unsupported epilogue, attribute, types, aux_ld, algo; and EMU_CUBLASLT_LP_D=refuse's
// 16-bit D with fp32 epilogue vectors).
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cublas_v2.h>
#include <cublasLt.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)
#define CB(x) do { cublasStatus_t s_ = (x); if (s_ != CUBLAS_STATUS_SUCCESS) { fprintf(stderr, "%s:%d cublas status %d\n", __FILE__, __LINE__, (int)s_); exit(1); } } while (0)
static unsigned long long rng = 777;
static float frand() { rng = rng * 6364136223846793005ull + 1442695040888963407ull; return ((rng >> 40) / 16777216.0f) * 2.f - 1.f; }
static int fails = 0;
static void report(const char* what, double err, double tol) { bool ok = err <= tol; fails += !ok; printf("%-70s max err %.3g  %s\n", what, err, ok ? "PASS" : "FAIL"); }
static void expect(const char* what, bool ok) { fails += !ok; printf("%-70s %s\n", what, ok ? "PASS" : "FAIL"); }
static double gelu_ref(double x) { return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
static double dgelu_ref(double x) {
  const double k = 0.7978845608028654, a = 0.044715, t = tanh(k * (x + a * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * a * x * x);
}

template <class T> static T to_t(float x);
template <> float to_t<float>(float x) { return x; }
template <> __nv_bfloat16 to_t<__nv_bfloat16>(float x) { return __float2bfloat16(x); }
template <> __half to_t<__half>(float x) { return __float2half(x); }
template <class T> static float from_t(T x);
template <> float from_t<float>(float x) { return x; }
template <> float from_t<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }
template <> float from_t<__half>(__half x) { return __half2float(x); }

template <class T> static T* dev_copy(const std::vector<T>& h) {
  T* d; CK(cudaMalloc(&d, h.size() * sizeof(T) + 1)); CK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice)); return d; }
static std::vector<float> host_copy(const float* d, size_t n) {
  std::vector<float> h(n); CK(cudaMemcpy(h.data(), d, n * 4, cudaMemcpyDeviceToHost)); return h; }

struct Lt {
  cublasLtMatmulDesc_t d = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, o = nullptr;
  ~Lt() { cublasLtMatmulDescDestroy(d); cublasLtMatrixLayoutDestroy(a); cublasLtMatrixLayoutDestroy(b);
          cublasLtMatrixLayoutDestroy(c); cublasLtMatrixLayoutDestroy(o); }
};

// One case: column-major D (m x n, ldd) = epi(alpha op(A) op(B) + beta C), operand type T.
template <class T>
static void run_case(cublasLtHandle_t h, const char* tname, cudaDataType dt, bool tA, bool tB, uint32_t epi, float beta,
                     bool tf32, double tol_rel) {
  const int m = 37, n = 29, k = 53;
  const int lda = (tA ? k : m) + 3, ldb = (tB ? n : k) + 1, ldc = m + 2, aux_ld = 48;
  std::vector<float> Af((size_t)lda * (tA ? m : k)), Bf((size_t)ldb * (tB ? k : n)), Cf((size_t)ldc * n), bias(std::max(m, n));
  std::vector<float> auxin((size_t)aux_ld * n);   // DGELU_BGRAD's GELU input
  for (auto& v : auxin) v = 3.f * frand();
  for (auto& v : Af) v = from_t<T>(to_t<T>(frand()));   // exactly representable in T
  for (auto& v : Bf) v = from_t<T>(to_t<T>(frand()));
  for (auto& v : Cf) v = frand();
  for (auto& v : bias) v = frand();
  std::vector<T> At(Af.size()), Bt(Bf.size());
  for (size_t i = 0; i < Af.size(); i++) At[i] = to_t<T>(Af[i]);
  for (size_t i = 0; i < Bf.size(); i++) Bt[i] = to_t<T>(Bf[i]);
  auto opA = [&](int i, int p) { return (double)(tA ? Af[p + (size_t)i * lda] : Af[i + (size_t)p * lda]); };
  auto opB = [&](int p, int j) { return (double)(tB ? Bf[j + (size_t)p * ldb] : Bf[p + (size_t)j * ldb]); };
  const float alpha = 0.75f;
  // reference in double; mag = the same on absolute values (the error scale)
  std::vector<double> R((size_t)m * n), mag((size_t)m * n), Raux((size_t)m * n), G(std::max(m, n), 0.0), Gmag(std::max(m, n), 0.0);
  for (int j = 0; j < n; j++)
    for (int i = 0; i < m; i++) {
      double s = 0, sm = 0;
      for (int p = 0; p < k; p++) { s += opA(i, p) * opB(p, j); sm += fabs(opA(i, p) * opB(p, j)); }
      double v = alpha * s + beta * (double)Cf[i + (size_t)j * ldc];
      double vm = alpha * sm + fabs(beta * (double)Cf[i + (size_t)j * ldc]);
      if (epi == CUBLASLT_EPILOGUE_BIAS || epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) { v += bias[i]; vm += fabs(bias[i]); }
      Raux[(size_t)i * n + j] = v;
      if (epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) { v = gelu_ref(v); vm *= 1.13; }
      if (epi == CUBLASLT_EPILOGUE_DGELU_BGRAD) {   // |gelu'| <= 1.13
        const double gd = dgelu_ref(auxin[i + (size_t)j * aux_ld]);
        v *= gd; vm = vm * 1.13 + 1e-7 * fabs(v);
        G[i] += v; Gmag[i] += fabs(vm);
      }
      R[(size_t)i * n + j] = v; mag[(size_t)i * n + j] = vm + 1e-30;
    }
  if (epi == CUBLASLT_EPILOGUE_BGRADA) for (int i = 0; i < m; i++) for (int p = 0; p < k; p++) { G[i] += opA(i, p); Gmag[i] += fabs(opA(i, p)); }
  if (epi == CUBLASLT_EPILOGUE_BGRADB) for (int j = 0; j < n; j++) for (int p = 0; p < k; p++) { G[j] += opB(p, j); Gmag[j] += fabs(opB(p, j)); }

  T *dA = dev_copy(At), *dB = dev_copy(Bt);
  float *dC = dev_copy(Cf), *dBias = dev_copy(bias), *dAux = dev_copy(auxin);
  Lt L;
  CB(cublasLtMatmulDescCreate(&L.d, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const int32_t ta = tA ? CUBLAS_OP_T : CUBLAS_OP_N, tb = tB ? CUBLAS_OP_T : CUBLAS_OP_N;
  CB(cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CB(cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  CB(cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
  if (epi != CUBLASLT_EPILOGUE_DEFAULT) CB(cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dBias, sizeof dBias));
  if (epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || epi == CUBLASLT_EPILOGUE_DGELU_BGRAD) {
    const int64_t ald = aux_ld;
    CB(cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &dAux, sizeof dAux));
    CB(cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ald, sizeof ald));
  }
  CB(cublasLtMatrixLayoutCreate(&L.a, dt, tA ? k : m, tA ? m : k, lda));
  CB(cublasLtMatrixLayoutCreate(&L.b, dt, tB ? n : k, tB ? k : n, ldb));
  CB(cublasLtMatrixLayoutCreate(&L.c, CUDA_R_32F, m, n, ldc));
  CB(cublasLtMatrixLayoutCreate(&L.o, CUDA_R_32F, m, n, ldc));
  CB(cublasLtMatmul(h, L.d, &alpha, dA, L.a, dB, L.b, &beta, dC, L.c, dC, L.o, nullptr, nullptr, 0, 0));   // in place
  std::vector<float> out = host_copy(dC, Cf.size()), aux = host_copy(dAux, (size_t)aux_ld * n), g = host_copy(dBias, bias.size());
  // fp32 accumulation of k products (+ alpha, beta, bias, GELU): a few k u32 relative to mag;
  // TF32 rounds the operands to 2^-11 relative
  double e = 0, ea = 0;
  for (int j = 0; j < n; j++)
    for (int i = 0; i < m; i++) {
      e = fmax(e, fabs(out[i + (size_t)j * ldc] - R[(size_t)i * n + j]) / mag[(size_t)i * n + j]);
      if (epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) ea = fmax(ea, fabs(aux[i + (size_t)j * aux_ld] - Raux[(size_t)i * n + j]) / mag[(size_t)i * n + j]);
    }
  static const char* names[] = {"", "DEFAULT", "", "", "BIAS"};
  const char* en = epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ? "GELU_AUX_BIAS" : epi == CUBLASLT_EPILOGUE_DGELU_BGRAD ? "DGELU_BGRAD"
                 : epi == CUBLASLT_EPILOGUE_BGRADA ? "BGRADA"
                 : epi == CUBLASLT_EPILOGUE_BGRADB ? "BGRADB" : names[epi];
  char what[160];
  snprintf(what, sizeof what, "cublasLtMatmul %s %s%s op(A)=%c op(B)=%c beta=%g: D", en, tname, tf32 ? " tf32" : "", tA ? 'T' : 'N', tB ? 'T' : 'N', beta);
  report(what, e, tol_rel);
  if (epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) {
    snprintf(what, sizeof what, "cublasLtMatmul %s %s op(A)=%c op(B)=%c: aux (pre-activation)", en, tname, tA ? 'T' : 'N', tB ? 'T' : 'N');
    report(what, ea, tol_rel);
  }
  if (epi == CUBLASLT_EPILOGUE_BGRADA || epi == CUBLASLT_EPILOGUE_BGRADB || epi == CUBLASLT_EPILOGUE_DGELU_BGRAD) {
    const int nb = epi == CUBLASLT_EPILOGUE_BGRADB ? n : m;
    double eg = 0;
    for (int i = 0; i < nb; i++) eg = fmax(eg, fabs(g[i] - G[i]) / (Gmag[i] + 1e-30));
    snprintf(what, sizeof what, "cublasLtMatmul %s %s op(A)=%c op(B)=%c: bias gradient", en, tname, tA ? 'T' : 'N', tB ? 'T' : 'N');
    // BGRADA/B: k-term fp32 sum of the stored operand (no TF32 rounding); DGELU_BGRAD: an n-term
    // fp32 sum of D values each within tol_rel of their magnitude
    report(what, eg, epi == CUBLASLT_EPILOGUE_DGELU_BGRAD ? tol_rel : 1e-5);
  }
  cudaFree(dA); cudaFree(dB); cudaFree(dC); cudaFree(dBias); cudaFree(dAux);
}

// D and BIAS against cublasGemmEx + an fp32 bias add: bitwise (the same product)
static void same_as_cublas(cublasHandle_t hb, cublasLtHandle_t h) {
  const int m = 40, n = 19, k = 33;
  std::vector<__nv_bfloat16> A((size_t)k * m), B((size_t)k * n);
  std::vector<float> bias(m), zero((size_t)m * n, 0.f);
  for (auto& v : A) v = __float2bfloat16(frand());
  for (auto& v : B) v = __float2bfloat16(frand());
  for (auto& v : bias) v = frand();
  __nv_bfloat16 *dA = dev_copy(A), *dB = dev_copy(B);
  float *dBias = dev_copy(bias), *d1 = dev_copy(zero), *d2 = dev_copy(zero);
  const float one = 1.f, zer = 0.f;
  CB(cublasGemmEx(hb, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, dA, CUDA_R_16BF, k, dB, CUDA_R_16BF, k, &zer, d1, CUDA_R_32F, m,
                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  Lt L;
  CB(cublasLtMatmulDescCreate(&L.d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const int32_t t = CUBLAS_OP_T;
  const uint32_t epi = CUBLASLT_EPILOGUE_BIAS;
  CB(cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
  CB(cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
  CB(cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dBias, sizeof dBias));
  CB(cublasLtMatrixLayoutCreate(&L.a, CUDA_R_16BF, k, m, k));
  CB(cublasLtMatrixLayoutCreate(&L.b, CUDA_R_16BF, k, n, k));
  CB(cublasLtMatrixLayoutCreate(&L.c, CUDA_R_32F, m, n, m));
  CB(cublasLtMatrixLayoutCreate(&L.o, CUDA_R_32F, m, n, m));
  CB(cublasLtMatmul(h, L.d, &one, dA, L.a, dB, L.b, &zer, d2, L.c, d2, L.o, nullptr, nullptr, 0, 0));
  std::vector<float> r1 = host_copy(d1, zero.size()), r2 = host_copy(d2, zero.size());
  bool same = true;
  for (int j = 0; j < n; j++) for (int i = 0; i < m; i++) { float want = r1[i + (size_t)j * m] + bias[i]; same &= memcmp(&want, &r2[i + (size_t)j * m], 4) == 0; }
  expect("cublasLtMatmul BIAS bf16 == cublasGemmEx then fp32 += bias, bitwise", same);
  cudaFree(dA); cudaFree(dB); cudaFree(dBias); cudaFree(d1); cudaFree(d2);
}

static void refusals(cublasLtHandle_t h) {
  Lt L;
  expect("MatmulDescCreate COMPUTE_16F refused", cublasLtMatmulDescCreate(&L.d, CUBLAS_COMPUTE_16F, CUDA_R_16F) == CUBLAS_STATUS_NOT_SUPPORTED);
  CB(cublasLtMatmulDescCreate(&L.d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const uint32_t relu = CUBLASLT_EPILOGUE_RELU, dgelu = CUBLASLT_EPILOGUE_DGELU, gelu_aux = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  expect("epilogue RELU refused", cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_EPILOGUE, &relu, sizeof relu) == CUBLAS_STATUS_NOT_SUPPORTED);
  expect("epilogue DGELU (without BGRAD) refused (not emulated)", cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_EPILOGUE, &dgelu, sizeof dgelu) == CUBLAS_STATUS_NOT_SUPPORTED);
  const int64_t stride = 0;
  expect("attribute BIAS_BATCH_STRIDE refused", cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &stride, sizeof stride) == CUBLAS_STATUS_NOT_SUPPORTED);
  const int32_t bf = CUDA_R_16BF, op_c = CUBLAS_OP_C;
  expect("BIAS_DATA_TYPE bf16 refused", cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bf, sizeof bf) == CUBLAS_STATUS_NOT_SUPPORTED);
  expect("TRANSA = OP_C refused", cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_TRANSA, &op_c, sizeof op_c) == CUBLAS_STATUS_NOT_SUPPORTED);
  expect("EPILOGUE of the wrong size: INVALID_VALUE", cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_EPILOGUE, &stride, sizeof stride) == CUBLAS_STATUS_INVALID_VALUE);
  // GELU_AUX_BIAS with an aux leading dimension not a multiple of 8
  const int m = 12, n = 5, k = 7;
  std::vector<float> z((size_t)16 * 16, 0.5f);
  float *dA = dev_copy(z), *dB = dev_copy(z), *dD = dev_copy(z), *dBias = dev_copy(z), *dAux = dev_copy(z);
  CB(cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_EPILOGUE, &gelu_aux, sizeof gelu_aux));
  CB(cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dBias, sizeof dBias));
  CB(cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &dAux, sizeof dAux));
  const int64_t bad_ld = 12;
  CB(cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &bad_ld, sizeof bad_ld));
  CB(cublasLtMatrixLayoutCreate(&L.a, CUDA_R_32F, m, k, m));
  CB(cublasLtMatrixLayoutCreate(&L.b, CUDA_R_32F, k, n, k));
  CB(cublasLtMatrixLayoutCreate(&L.c, CUDA_R_32F, m, n, m));
  CB(cublasLtMatrixLayoutCreate(&L.o, CUDA_R_32F, m, n, m));
  const float one = 1.f, zer = 0.f;
  expect("GELU_AUX_BIAS aux_ld 12 (not a multiple of 8) refused",
         cublasLtMatmul(h, L.d, &one, dA, L.a, dB, L.b, &zer, dD, L.c, dD, L.o, nullptr, nullptr, 0, 0) != CUBLAS_STATUS_SUCCESS);
  const int64_t ok_ld = 16;
  CB(cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ok_ld, sizeof ok_ld));
  expect("GELU_AUX_BIAS aux_ld 16 accepted",
         cublasLtMatmul(h, L.d, &one, dA, L.a, dB, L.b, &zer, dD, L.c, dD, L.o, nullptr, nullptr, 0, 0) == CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulAlgo_t algo;
  memset(&algo, 0, sizeof algo);
  expect("an explicit algo refused",
         cublasLtMatmul(h, L.d, &one, dA, L.a, dB, L.b, &zer, dD, L.c, dD, L.o, &algo, nullptr, 0, 0) == CUBLAS_STATUS_NOT_SUPPORTED);
  cublasLtMatrixLayout_t half_c = nullptr;
  CB(cublasLtMatrixLayoutCreate(&half_c, CUDA_R_16F, m, n, m));
  expect("fp16 C/D with fp32 A/B refused",
         cublasLtMatmul(h, L.d, &one, dA, L.a, dB, L.b, &zer, dD, half_c, dD, half_c, nullptr, nullptr, 0, 0) == CUBLAS_STATUS_NOT_SUPPORTED);
  cublasLtMatrixLayoutDestroy(half_c);
  cublasLtMatrixLayout_t wrong_b = nullptr;
  CB(cublasLtMatrixLayoutCreate(&wrong_b, CUDA_R_32F, k + 1, n, k + 1));
  expect("layouts that do not fit: INVALID_VALUE",
         cublasLtMatmul(h, L.d, &one, dA, L.a, dB, wrong_b, &zer, dD, L.c, dD, L.o, nullptr, nullptr, 0, 0) == CUBLAS_STATUS_INVALID_VALUE);
  cublasLtMatrixLayoutDestroy(wrong_b);
  float host[4];
  const float* hp = host;
  CB(cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &hp, sizeof hp));
  expect("a host bias pointer: INVALID_VALUE",
         cublasLtMatmul(h, L.d, &one, dA, L.a, dB, L.b, &zer, dD, L.c, dD, L.o, nullptr, nullptr, 0, 0) == CUBLAS_STATUS_INVALID_VALUE);
  cudaDeviceSynchronize();
  cudaFree(dA); cudaFree(dB); cudaFree(dD); cudaFree(dBias); cudaFree(dAux);
}

// A 16-bit D (the operands' type) with GELU_AUX_BIAS and DGELU_BGRAD: D bitwise the fp32 D of the
// same product rounded to nearest even, the fp32 aux and bias vector bitwise the fp32 run's; the
// bias and aux types must be set to CUDA_R_32F (unset they are D's type, not emulated: refused).
template <class T>
static void lp_d(cublasLtHandle_t h, const char* tname, cudaDataType dt, uint32_t epi) {
  const int m = 24, n = 13, k = 19;
  std::vector<T> A((size_t)k * m), B((size_t)k * n);
  std::vector<float> pre((size_t)m * n), bias(m, 0.f), zero((size_t)m * n, 0.f);
  for (auto& v : A) v = to_t<T>(frand());
  for (auto& v : B) v = to_t<T>(frand());
  for (auto& v : bias) v = frand();
  for (auto& v : pre) v = 3.f * frand();
  std::vector<T> zt((size_t)m * n, to_t<T>(0.f));
  T *dA = dev_copy(A), *dB = dev_copy(B), *dD2 = dev_copy(zt);
  float *dD1 = dev_copy(zero), *aux1 = dev_copy(epi == CUBLASLT_EPILOGUE_DGELU_BGRAD ? pre : zero);
  float *aux2 = dev_copy(epi == CUBLASLT_EPILOGUE_DGELU_BGRAD ? pre : zero);
  float *b1 = dev_copy(bias), *b2 = dev_copy(bias);
  const float one = 1.f, zer = 0.f;
  const int32_t t = CUBLAS_OP_T, f32 = CUDA_R_32F;
  const int64_t ald = m;
  cublasStatus_t st[2];
  for (int r = 0; r < 2; r++) {   // r 0: fp32 D; r 1: D in T
    Lt L;
    float* bp = r ? b2 : b1; float* ap = r ? aux2 : aux1;
    CB(cublasLtMatmulDescCreate(&L.d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CB(cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
    CB(cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    CB(cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp));
    CB(cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &ap, sizeof ap));
    CB(cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ald, sizeof ald));
    CB(cublasLtMatrixLayoutCreate(&L.a, dt, k, m, k));
    CB(cublasLtMatrixLayoutCreate(&L.b, dt, k, n, k));
    CB(cublasLtMatrixLayoutCreate(&L.c, r ? dt : CUDA_R_32F, m, n, m));
    CB(cublasLtMatrixLayoutCreate(&L.o, r ? dt : CUDA_R_32F, m, n, m));
    void* D = r ? (void*)dD2 : (void*)dD1;
    if (r) {
      char what[160];
      snprintf(what, sizeof what, "%s D with the bias/aux types unset (D's type) refused", tname);
      expect(what, cublasLtMatmul(h, L.d, &one, dA, L.a, dB, L.b, &zer, D, L.c, D, L.o, nullptr, nullptr, 0, 0) == CUBLAS_STATUS_NOT_SUPPORTED);
      CB(cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &f32, sizeof f32));
      snprintf(what, sizeof what, "%s D with the aux type unset refused", tname);
      expect(what, cublasLtMatmul(h, L.d, &one, dA, L.a, dB, L.b, &zer, D, L.c, D, L.o, nullptr, nullptr, 0, 0) == CUBLAS_STATUS_NOT_SUPPORTED);
      CB(cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &f32, sizeof f32));
    }
    st[r] = cublasLtMatmul(h, L.d, &one, dA, L.a, dB, L.b, &zer, D, L.c, D, L.o, nullptr, nullptr, 0, 0);
  }
  std::vector<T> d2(zt.size());
  CK(cudaMemcpy(d2.data(), dD2, d2.size() * sizeof(T), cudaMemcpyDeviceToHost));
  std::vector<float> d1 = host_copy(dD1, zero.size()), a1 = host_copy(aux1, zero.size()), a2 = host_copy(aux2, zero.size());
  std::vector<float> g1 = host_copy(b1, m), g2 = host_copy(b2, m);
  bool same_d = true;
  for (size_t i = 0; i < d1.size(); i++) { T want = to_t<T>(d1[i]); same_d &= memcmp(&want, &d2[i], sizeof(T)) == 0; }
  const char* en = epi == CUBLASLT_EPILOGUE_DGELU_BGRAD ? "DGELU_BGRAD" : "GELU_AUX_BIAS";
  char what[160];
  snprintf(what, sizeof what, "%s %s D (bias, aux fp32) accepted", en, tname);
  expect(what, st[0] == CUBLAS_STATUS_SUCCESS && st[1] == CUBLAS_STATUS_SUCCESS);
  snprintf(what, sizeof what, "%s %s D == fp32 D rounded, bitwise", en, tname);
  expect(what, same_d);
  snprintf(what, sizeof what, "%s %s D: aux and bias vector bitwise the fp32 run's", en, tname);
  expect(what, memcmp(a1.data(), a2.data(), a1.size() * 4) == 0 && memcmp(g1.data(), g2.data(), g1.size() * 4) == 0);
  cudaFree(dA); cudaFree(dB); cudaFree(dD1); cudaFree(dD2); cudaFree(aux1); cudaFree(aux2); cudaFree(b1); cudaFree(b2);
}

// EMU_CUBLASLT_LP_D=refuse: a 16-bit D with an fp32 bias / aux vector (BIAS, GELU_AUX_BIAS,
// DGELU_BGRAD) is refused with NOT_SUPPORTED and nothing is written (D, aux, bias untouched); a
// 16-bit D without a vector (DEFAULT) and an fp32 D with one (BIAS) still run; unset, the same
// 16-bit BIAS call runs again (the variable is read at every call).
static void lp_d_refuse(cublasLtHandle_t h) {
  const int m = 16, n = 5, k = 7;
  std::vector<__nv_bfloat16> A((size_t)k * m), B((size_t)k * n), zt((size_t)m * n, to_t<__nv_bfloat16>(0.25f));
  for (auto& v : A) v = to_t<__nv_bfloat16>(frand());
  for (auto& v : B) v = to_t<__nv_bfloat16>(frand());
  std::vector<float> vec((size_t)m * n, 0.75f);
  __nv_bfloat16 *dA = dev_copy(A), *dB = dev_copy(B), *dD = dev_copy(zt);
  float *dBias = dev_copy(vec), *dAux = dev_copy(vec), *dF = dev_copy(vec);
  const float one = 1.f, zer = 0.f;
  const int32_t t = CUBLAS_OP_T, f32 = CUDA_R_32F;
  const int64_t ald = m;
  auto call = [&](uint32_t epi, bool lp) {
    Lt L;
    CB(cublasLtMatmulDescCreate(&L.d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CB(cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
    CB(cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (epi != CUBLASLT_EPILOGUE_DEFAULT) {
      CB(cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dBias, sizeof dBias));
      CB(cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &f32, sizeof f32));
    }
    if (epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || epi == CUBLASLT_EPILOGUE_DGELU_BGRAD) {
      CB(cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &f32, sizeof f32));
      CB(cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &dAux, sizeof dAux));
      CB(cublasLtMatmulDescSetAttribute(L.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ald, sizeof ald));
    }
    CB(cublasLtMatrixLayoutCreate(&L.a, CUDA_R_16BF, k, m, k));
    CB(cublasLtMatrixLayoutCreate(&L.b, CUDA_R_16BF, k, n, k));
    CB(cublasLtMatrixLayoutCreate(&L.o, lp ? CUDA_R_16BF : CUDA_R_32F, m, n, m));
    void* D = lp ? (void*)dD : (void*)dF;
    const cublasStatus_t s = cublasLtMatmul(h, L.d, &one, dA, L.a, dB, L.b, &zer, D, L.o, D, L.o, nullptr, nullptr, 0, 0);
    CK(cudaDeviceSynchronize());
    return s;
  };
  auto untouched = [&]() {
    std::vector<__nv_bfloat16> d(zt.size());
    CK(cudaMemcpy(d.data(), dD, d.size() * sizeof d[0], cudaMemcpyDeviceToHost));
    const std::vector<float> b = host_copy(dBias, vec.size()), a = host_copy(dAux, vec.size());
    return memcmp(d.data(), zt.data(), d.size() * sizeof d[0]) == 0 && b == vec && a == vec;
  };
  setenv("EMU_CUBLASLT_LP_D", "refuse", 1);
  expect("LP_D=refuse: bf16 D, BIAS (fp32 bias) NOT_SUPPORTED", call(CUBLASLT_EPILOGUE_BIAS, true) == CUBLAS_STATUS_NOT_SUPPORTED);
  expect("LP_D=refuse: bf16 D, GELU_AUX_BIAS (fp32 bias, aux) NOT_SUPPORTED",
         call(CUBLASLT_EPILOGUE_GELU_AUX_BIAS, true) == CUBLAS_STATUS_NOT_SUPPORTED);
  expect("LP_D=refuse: bf16 D, DGELU_BGRAD (fp32 bias, aux) NOT_SUPPORTED",
         call(CUBLASLT_EPILOGUE_DGELU_BGRAD, true) == CUBLAS_STATUS_NOT_SUPPORTED);
  expect("LP_D=refuse: the refused calls wrote nothing (D, bias, aux)", untouched());
  expect("LP_D=refuse: bf16 D, DEFAULT (no vector) accepted", call(CUBLASLT_EPILOGUE_DEFAULT, true) == CUBLAS_STATUS_SUCCESS);
  expect("LP_D=refuse: fp32 D, BIAS accepted", call(CUBLASLT_EPILOGUE_BIAS, false) == CUBLAS_STATUS_SUCCESS);
  unsetenv("EMU_CUBLASLT_LP_D");
  CK(cudaMemcpy(dD, zt.data(), zt.size() * sizeof zt[0], cudaMemcpyHostToDevice));
  expect("LP_D unset again: bf16 D, BIAS accepted and written",
         call(CUBLASLT_EPILOGUE_BIAS, true) == CUBLAS_STATUS_SUCCESS && !untouched());
  cudaFree(dA); cudaFree(dB); cudaFree(dD); cudaFree(dBias); cudaFree(dAux); cudaFree(dF);
}

int main() {
  cublasLtHandle_t h; CB(cublasLtCreate(&h));
  cublasHandle_t hb; CB(cublasCreate(&hb));
  const uint32_t epis[] = {CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_GELU_AUX_BIAS,
                           CUBLASLT_EPILOGUE_BGRADA, CUBLASLT_EPILOGUE_BGRADB, CUBLASLT_EPILOGUE_DGELU_BGRAD};
  // fp32 sums of 53 products: 4 * 53 * 2^-24 ~ 1.3e-5 relative to the magnitude; TF32 operands 2 * 2^-11 more
  for (uint32_t e : epis)
    for (int tA = 0; tA < 2; tA++) for (int tB = 0; tB < 2; tB++) {
      run_case<float>(h, "fp32", CUDA_R_32F, tA, tB, e, e == CUBLASLT_EPILOGUE_DEFAULT ? 0.5f : 0.f, false, 2e-5);
      run_case<__nv_bfloat16>(h, "bf16", CUDA_R_16BF, tA, tB, e, 0.f, false, 2e-5);
    }
  run_case<__half>(h, "fp16", CUDA_R_16F, false, true, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, 0.f, false, 2e-5);
  run_case<__half>(h, "fp16", CUDA_R_16F, false, true, CUBLASLT_EPILOGUE_BGRADB, 1.f, false, 2e-5);
  run_case<float>(h, "fp32", CUDA_R_32F, true, false, CUBLASLT_EPILOGUE_BIAS, 0.f, true, 2.5e-3);
  same_as_cublas(hb, h);
  lp_d<__nv_bfloat16>(h, "bf16", CUDA_R_16BF, CUBLASLT_EPILOGUE_GELU_AUX_BIAS);
  lp_d<__nv_bfloat16>(h, "bf16", CUDA_R_16BF, CUBLASLT_EPILOGUE_DGELU_BGRAD);
  lp_d<__half>(h, "fp16", CUDA_R_16F, CUBLASLT_EPILOGUE_GELU_AUX_BIAS);
  lp_d<__half>(h, "fp16", CUDA_R_16F, CUBLASLT_EPILOGUE_DGELU_BGRAD);
  refusals(h);
  lp_d_refuse(h);
  CB(cublasDestroy(hb));
  CB(cublasLtDestroy(h));
  printf(fails ? "%d FAILED\n" : "all passed\n", fails);
  return fails ? 1 : 0;
}
