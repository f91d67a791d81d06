// tests/cuda/emu/test_emu_cublas.cu — cuBLAS shim tests: column-major semantics, transposes, leading dimensions, alpha/beta, bf16 inputs,
// strided batches, and the row-major "out = inp @ W^T" idiom used by GPT trainers.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cublas_v2.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)
#define CB(x) do { cublasStatus_t s_ = (x); if (s_ != CUBLAS_STATUS_SUCCESS) { fprintf(stderr, "%s:%d cublas status %d\n", __FILE__, __LINE__, (int)s_); exit(1); } } while (0)
static unsigned long long rng = 12345;
static float frand() { rng = rng * 6364136223846793005ull + 1442695040888963407ull; return ((rng >> 40) / 16777216.0f) * 2.f - 1.f; }
static int fails = 0;
static void report(const char* what, double err, double tol) { bool ok = err <= tol; fails += !ok; printf("%-62s max abs err %.3g  %s\n", what, err, ok ? "PASS" : "FAIL"); }

// reference: column-major C = alpha*op(A)*op(B) + beta*C (beta==0: C ignored)
static void ref_gemm(bool tA, bool tB, int m, int n, int k, float alpha, const std::vector<float>& A, int lda, const std::vector<float>& B, int ldb,
                     float beta, std::vector<double>& C, int ldc) {
    for (int j = 0; j < n; j++) for (int i = 0; i < m; i++) {
        double acc = 0;
        for (int p = 0; p < k; p++) acc += (double)(tA ? A[p + (size_t)i * lda] : A[i + (size_t)p * lda]) * (tB ? B[j + (size_t)p * ldb] : B[p + (size_t)j * ldb]);
        double& c = C[i + (size_t)j * ldc];
        c = alpha * acc + (beta != 0 ? beta * c : 0.0);
    }
}
static float bfr(float x) { return __bfloat162float(__float2bfloat16(x)); }

int main() {
    cublasHandle_t h; CB(cublasCreate(&h));
    cudaStream_t st; CK(cudaStreamCreate(&st)); CB(cublasSetStream(h, st));
    const int m = 37, n = 29, k = 53;
    for (int tA = 0; tA < 2; tA++) for (int tB = 0; tB < 2; tB++) for (int zb = 0; zb < 2; zb++) {
        int lda = (tA ? k : m) + 3, ldb = (tB ? n : k) + 1, ldc = m + 2;
        size_t sa = (size_t)lda * (tA ? m : k), sb = (size_t)ldb * (tB ? k : n), sc = (size_t)ldc * n;
        std::vector<float> A(sa), B(sb), C(sc); for (auto& v : A) v = frand();
        for (auto& v : B) v = frand();
        for (auto& v : C) v = zb ? NAN : frand();
        float alpha = 0.7f, beta = zb ? 0.f : 0.3f;
        std::vector<double> R(C.begin(), C.end());
        ref_gemm(tA, tB, m, n, k, alpha, A, lda, B, ldb, beta, R, ldc);
        float *dA, *dB, *dC;
        CK(cudaMalloc(&dA, sa * 4)); CK(cudaMalloc(&dB, sb * 4)); CK(cudaMalloc(&dC, sc * 4));
        CK(cudaMemcpy(dA, A.data(), sa * 4, cudaMemcpyHostToDevice)); CK(cudaMemcpy(dB, B.data(), sb * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dC, C.data(), sc * 4, cudaMemcpyHostToDevice));
        CB(cublasSgemm(h, tA ? CUBLAS_OP_T : CUBLAS_OP_N, tB ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha, dA, lda, dB, ldb, &beta, dC, ldc));
        std::vector<float> out(sc); CK(cudaMemcpy(out.data(), dC, sc * 4, cudaMemcpyDeviceToHost));
        double e = 0; for (int j = 0; j < n; j++) for (int i = 0; i < m; i++) e = fmax(e, fabs(out[i + (size_t)j * ldc] - R[i + (size_t)j * ldc]));
        char name[128]; snprintf(name, sizeof name, "cublasSgemm op(A)=%c op(B)=%c lda/ldb/ldc padded%s", tA ? 'T' : 'N', tB ? 'T' : 'N', zb ? " beta=0,C=NaN" : "");
        report(name, e, 1e-4);
        cudaFree(dA); cudaFree(dB); cudaFree(dC);
    }
    // GPT linear layer, row-major: out[BT,OC] = inp[BT,C] @ W[OC,C]^T  ==  column-major out^T = W^T(op T) * inp^T
    {
        const int BT = 128, C = 64, OC = 192;
        std::vector<float> inp((size_t)BT * C), W((size_t)OC * C);
        for (auto& v : inp) v = bfr(frand());
        for (auto& v : W) v = bfr(frand());
        std::vector<__nv_bfloat16> hin(inp.size()), hw(W.size());
        for (size_t i = 0; i < inp.size(); i++) hin[i] = __float2bfloat16(inp[i]);
        for (size_t i = 0; i < W.size(); i++) hw[i] = __float2bfloat16(W[i]);
        __nv_bfloat16 *din, *dw, *dout; float* doutf;
        CK(cudaMalloc(&din, hin.size() * 2)); CK(cudaMalloc(&dw, hw.size() * 2)); CK(cudaMalloc(&dout, (size_t)BT * OC * 2)); CK(cudaMalloc(&doutf, (size_t)BT * OC * 4));
        CK(cudaMemcpy(din, hin.data(), hin.size() * 2, cudaMemcpyHostToDevice)); CK(cudaMemcpy(dw, hw.data(), hw.size() * 2, cudaMemcpyHostToDevice));
        const float one = 1.f, zero = 0.f;
        CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, OC, BT, C, &one, dw, CUDA_R_16BF, C, din, CUDA_R_16BF, C, &zero, dout, CUDA_R_16BF, OC, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, OC, BT, C, &one, dw, CUDA_R_16BF, C, din, CUDA_R_16BF, C, &zero, doutf, CUDA_R_32F, OC, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        std::vector<__nv_bfloat16> out((size_t)BT * OC); std::vector<float> outf((size_t)BT * OC);
        CK(cudaMemcpy(out.data(), dout, out.size() * 2, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(outf.data(), doutf, outf.size() * 4, cudaMemcpyDeviceToHost));
        double e16 = 0, e32 = 0;
        for (int r = 0; r < BT; r++) for (int o = 0; o < OC; o++) {
            double acc = 0; for (int c = 0; c < C; c++) acc += (double)inp[(size_t)r * C + c] * W[(size_t)o * C + c];
            e16 = fmax(e16, fabs(__bfloat162float(out[(size_t)r * OC + o]) - acc) / fmax(1.0, fabs(acc)));
            e32 = fmax(e32, fabs(outf[(size_t)r * OC + o] - acc));
        }
        report("cublasGemmEx bf16 in, bf16 out: row-major inp@W^T (rel err)", e16, 1.0 / 128);
        report("cublasGemmEx bf16 in, fp32 out: row-major inp@W^T", e32, 1e-4);
        // strided batched (attention scores): S[b] = Q[b] K[b]^T, row-major (T x hs) per batch
        const int nb = 3, T = 32, hs = 16;
        std::vector<float> Q((size_t)nb * T * hs), K((size_t)nb * T * hs);
        for (auto& v : Q) v = bfr(frand());
        for (auto& v : K) v = bfr(frand());
        std::vector<__nv_bfloat16> hq(Q.size()), hk(K.size());
        for (size_t i = 0; i < Q.size(); i++) { hq[i] = __float2bfloat16(Q[i]); hk[i] = __float2bfloat16(K[i]); }
        __nv_bfloat16 *dq, *dk; float* ds;
        CK(cudaMalloc(&dq, hq.size() * 2)); CK(cudaMalloc(&dk, hk.size() * 2)); CK(cudaMalloc(&ds, (size_t)nb * T * T * 4));
        CK(cudaMemcpy(dq, hq.data(), hq.size() * 2, cudaMemcpyHostToDevice)); CK(cudaMemcpy(dk, hk.data(), hk.size() * 2, cudaMemcpyHostToDevice));
        const float scale = 0.25f;
        CB(cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, &scale, dk, CUDA_R_16BF, hs, (long long)T * hs, dq, CUDA_R_16BF, hs,
                                      (long long)T * hs, &zero, ds, CUDA_R_32F, T, (long long)T * T, nb, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        std::vector<float> S((size_t)nb * T * T); CK(cudaMemcpy(S.data(), ds, S.size() * 4, cudaMemcpyDeviceToHost));
        double eb = 0;
        for (int b = 0; b < nb; b++) for (int i = 0; i < T; i++) for (int j = 0; j < T; j++) {
            double acc = 0; for (int d = 0; d < hs; d++) acc += (double)Q[((size_t)b * T + i) * hs + d] * K[((size_t)b * T + j) * hs + d];
            eb = fmax(eb, fabs(S[((size_t)b * T + i) * T + j] - scale * acc));
        }
        report("cublasGemmStridedBatchedEx bf16 in, fp32 out: Q K^T per batch", eb, 1e-5);
        // error detection: lda too small, operand past its allocation
        cublasStatus_t s1 = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, OC, BT, C, &one, dw, CUDA_R_16BF, C - 1, din, CUDA_R_16BF, C, &zero, dout, CUDA_R_16BF, OC, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        cublasStatus_t s2 = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, OC, BT + 1, C, &one, dw, CUDA_R_16BF, C, din, CUDA_R_16BF, C, &zero, dout, CUDA_R_16BF, OC, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        printf("%-62s %s\n", "lda < K with op(A)=T rejected (CUBLAS_STATUS_INVALID_VALUE)", s1 == CUBLAS_STATUS_INVALID_VALUE ? "PASS" : "FAIL");
        printf("%-62s %s\n", "operand B one row past its allocation rejected", s2 == CUBLAS_STATUS_INVALID_VALUE ? "PASS" : "FAIL");
        fails += (s1 != CUBLAS_STATUS_INVALID_VALUE) + (s2 != CUBLAS_STATUS_INVALID_VALUE);
        cudaFree(din); cudaFree(dw); cudaFree(dout); cudaFree(doutf); cudaFree(dq); cudaFree(dk); cudaFree(ds);
    }
    CB(cublasDestroy(h));
    CK(cudaStreamDestroy(st));
    printf(fails ? "SOME TESTS FAILED\n" : "ALL PASSED\n");
    return fails != 0;
}
