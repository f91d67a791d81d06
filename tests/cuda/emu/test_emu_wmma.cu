// tests/cuda/emu/test_emu_wmma.cu — the emulator's nvcuda::wmma (kernels/cuda/emu/wmma_emu.h)
// against a double reference (valid CUDA: also compiled by nvcc): D = A B + C for 16x16x16
// fragments of __nv_bfloat16 and __half, A and B row- or col-major at an ldm larger than 16,
// C loaded and D stored in either memory layout, element-wise ops on x[] (scale by 2 through
// every element), two mma_sync in a row accumulating in place (d == c), and fragment kinds
// holding their elements at different positions of x[].
//
// Tolerance: the inputs are exact in the 16-bit type, so every product a*b is exact in fp32
// (8+8 or 11+11 significant bits); D = c + sum_k a_k b_k summed in fp32 in some order: each of
// the 16 additions rounds with relative error <= u = 2^-24, so |D - D_exact| <= 16 u sum |terms|
// (first order; the tensor cores' internal order differs, the bound does not).
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "kernels/cuda/emu/launch.cuh"

using namespace nvcuda;

// one warp: D = 2 * (A B + C) (row_a/row_b pick the operand layouts, layout_c/layout_d the
// accumulator's), then E = A B + D in place
template <class T, class LA, class LB>
__global__ void mma_kernel(float* d, float* e, const T* a, const T* b, const float* c, int lda, int ldb, int ldc,
                           int layout_c, int layout_d) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, LA> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, LB> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    wmma::load_matrix_sync(fa, a, lda);
    wmma::load_matrix_sync(fb, b, ldb);
    wmma::load_matrix_sync(fc, c, ldc, layout_c ? wmma::mem_col_major : wmma::mem_row_major);
    wmma::mma_sync(fc, fa, fb, fc);
    for (int i = 0; i < fc.num_elements; i++) fc.x[i] *= 2.0f;
    wmma::store_matrix_sync(d, fc, 16, layout_d ? wmma::mem_col_major : wmma::mem_row_major);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(e, fc, 16, layout_d ? wmma::mem_col_major : wmma::mem_row_major);
}

// fill_fragment of an accumulator and a matrix_a: D = fill(1) fill(0.5) + fill(3) = 8 + 3
__global__ void fill_kernel(float* d) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    wmma::fill_fragment(fa, __float2half(1.0f));
    wmma::fill_fragment(fb, __float2half(0.5f));
    wmma::fill_fragment(fc, 3.0f);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(d, fc, 16, wmma::mem_row_major);
}

// x[] of an accumulator and of a matrix_a loaded from the same 16x16 values (small integers,
// exact in either type): out[lane] = how many of the lane's 8 elements agree position by
// position. On a GPU the two mappings differ (and are unspecified); the emulator makes them
// differ too, so that code pairing x[] across fragment kinds fails there as well.
__global__ void mapping_kernel(int* out, const float* m32, const __half* m16) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::load_matrix_sync(fc, m32, 16, wmma::mem_row_major);
    wmma::load_matrix_sync(fa, m16, 16);
    int same = 0;
    for (int i = 0; i < fc.num_elements; i++) same += fc.x[i] == __half2float(fa.x[i]);
    out[threadIdx.x] = same;
}

static float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
static float to_f(__half v) { return __half2float(v); }
static __nv_bfloat16 from_f(float v, __nv_bfloat16*) { return __float2bfloat16(v); }
static __half from_f(float v, __half*) { return __float2half(v); }

static int fails = 0;

template <class T, class LA, class LB>
static void run(const char* name, int lda, int ldb, int ldc, int layout_c, int layout_d) {
    const bool ra = std::is_same<LA, wmma::row_major>::value, rb = std::is_same<LB, wmma::row_major>::value;
    const int na = 16 * lda, nb = 16 * ldb, nc = 16 * ldc;
    T *ha = (T*)malloc(na * sizeof(T)), *hb = (T*)malloc(nb * sizeof(T));
    float* hc = (float*)malloc(nc * 4);
    for (int i = 0; i < na; i++) ha[i] = from_f((float)(rand() % 2001 - 1000) / 256.0f, (T*)0);
    for (int i = 0; i < nb; i++) hb[i] = from_f((float)(rand() % 2001 - 1000) / 300.0f, (T*)0);
    for (int i = 0; i < nc; i++) hc[i] = (float)(rand() % 2001 - 1000) / 77.0f;
    T *da, *db; float *dc, *dd, *de;
    cudaMalloc(&da, na * sizeof(T)); cudaMalloc(&db, nb * sizeof(T)); cudaMalloc(&dc, nc * 4);
    cudaMalloc(&dd, 256 * 4); cudaMalloc(&de, 256 * 4);
    cudaMemcpy(da, ha, na * sizeof(T), cudaMemcpyHostToDevice);
    cudaMemcpy(db, hb, nb * sizeof(T), cudaMemcpyHostToDevice);
    cudaMemcpy(dc, hc, nc * 4, cudaMemcpyHostToDevice);
    LAUNCH((mma_kernel<T, LA, LB>), 1, 32)(dd, de, da, db, dc, lda, ldb, ldc, layout_c, layout_d);
    float hd[256], he[256];
    cudaMemcpy(hd, dd, sizeof hd, cudaMemcpyDeviceToHost);
    cudaMemcpy(he, de, sizeof he, cudaMemcpyDeviceToHost);
    double worst = 0;   // error / bound
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) {
            double s = layout_c ? hc[c * ldc + r] : hc[r * ldc + c], mag = fabs(s);
            double p = 0, pm = 0;
            for (int k = 0; k < 16; k++) {
                double x = to_f(ra ? ha[r * lda + k] : ha[k * lda + r]) * (double)to_f(rb ? hb[k * ldb + c] : hb[c * ldb + k]);
                p += x; pm += fabs(x);
            }
            const double ref_d = 2 * (s + p), mag_d = 2 * (mag + pm), ref_e = ref_d + p, mag_e = mag_d + pm;
            const int id = layout_d ? c * 16 + r : r * 16 + c;
            const double u = ldexp(1.0, -24);
            worst = fmax(worst, fabs(hd[id] - ref_d) / (16 * u * mag_d + 1e-30));
            worst = fmax(worst, fabs(he[id] - ref_e) / (32 * u * mag_e + 1e-30));
        }
    const bool ok = worst <= 1.0;
    fails += !ok;
    printf("%-4s wmma %s lda %d ldb %d ldc %d C %s D %s: worst error / bound %.3g\n", ok ? "ok" : "FAIL", name, lda, ldb, ldc,
           layout_c ? "col" : "row", layout_d ? "col" : "row", worst);
    cudaFree(da); cudaFree(db); cudaFree(dc); cudaFree(dd); cudaFree(de);
    free(ha); free(hb); free(hc);
}

int main() {
    srand(3);
    typedef wmma::row_major R;
    typedef wmma::col_major C;
    run<__nv_bfloat16, R, R>("bf16 A row B row", 16, 16, 16, 0, 0);
    run<__nv_bfloat16, R, C>("bf16 A row B col", 24, 32, 20, 1, 0);
    run<__nv_bfloat16, C, R>("bf16 A col B row", 40, 24, 16, 0, 1);
    run<__nv_bfloat16, C, C>("bf16 A col B col", 16, 48, 24, 1, 1);
    run<__half, R, R>("fp16 A row B row", 24, 16, 16, 1, 0);
    run<__half, R, C>("fp16 A row B col", 16, 16, 32, 0, 1);
    run<__half, C, R>("fp16 A col B row", 32, 40, 16, 1, 1);
    run<__half, C, C>("fp16 A col B col", 24, 24, 28, 0, 0);
    float* dd; cudaMalloc(&dd, 256 * 4);
    LAUNCH(fill_kernel, 1, 32)(dd);
    float hd[256];
    cudaMemcpy(hd, dd, sizeof hd, cudaMemcpyDeviceToHost);
    int bad = 0;
    for (int i = 0; i < 256; i++) bad += hd[i] != 11.0f;
    fails += bad != 0;
    printf("%-4s wmma fill_fragment: D = fill(1) fill(0.5) + fill(3) = 11 everywhere (%d wrong)\n", bad ? "FAIL" : "ok", bad);
    cudaFree(dd);
    {
        float m32[256]; __half m16[256]; int same[32], total = 0;
        for (int i = 0; i < 256; i++) { m32[i] = (float)i; m16[i] = __float2half((float)i); }
        float* d32; __half* d16; int* dout;
        cudaMalloc(&d32, sizeof m32); cudaMalloc(&d16, sizeof m16); cudaMalloc(&dout, sizeof same);
        cudaMemcpy(d32, m32, sizeof m32, cudaMemcpyHostToDevice);
        cudaMemcpy(d16, m16, sizeof m16, cudaMemcpyHostToDevice);
        LAUNCH(mapping_kernel, 1, 32)(dout, d32, d16);
        cudaMemcpy(same, dout, sizeof same, cudaMemcpyDeviceToHost);
        for (int l = 0; l < 32; l++) total += same[l];
        fails += total == 256;
        printf("%-4s wmma fragment kinds map x[] to different positions (%d of 256 pair up)\n", total == 256 ? "FAIL" : "ok", total);
        cudaFree(d32); cudaFree(d16); cudaFree(dout);
    }
    printf("%s\n", fails ? "FAILED" : "all wmma checks passed");
    return fails != 0;
}
