// tests/cuda/test_cuda_tf32.c — trainer_config.matmul_precision=high on the CUDA backend
// (Backend.set_matmul_precision), run through the CUDA emulation layer: fp32 matmuls then
// multiply TF32-rounded inputs (cuBLAS's CUBLAS_COMPUTE_32F_FAST_TF32; the emulator's cuBLAS
// shim models it as cvt.rna.tf32.f32: 10 explicit mantissa bits, to nearest, ties away from
// zero) and accumulate in fp32. Emulator-only: on a GPU cuBLAS chooses TF32 per GEMM (small
// ones stay fp32) and rounds its inputs otherwise (seen on an H200: docs/gpu_performance.md).
//
// The reference is independent of the shim's bit manipulation: each input is rounded here with
// frexp/round/ldexp (round() is C's round-half-away-from-zero), and the products are summed in
// double. Tolerance: both sides multiply the same rounded values, so what remains is the fp32
// accumulation of k terms, |err| <= g(k) sum |a||b| with g(k) = k u32 / (1 - k u32) (Higham,
// 3.1), times 1.05 for the dropped second-order terms, plus 2 u32 |ref| for the += of the
// backward. The same bound against the unrounded inputs must NOT hold everywhere (TF32's unit
// roundoff 2^-11 is 8192 x fp32's), which shows that the rounding happened at all.
#include "tests/test_util.h"

#include <math.h>
#include <stdbool.h>

#include "kernels/backend.h"
#include "tests/cuda/backend_util.h"

#define U32 (1.0 / 16777216.0)
static double gam(double k) { return k * U32 / (1.0 - k * U32); }

// the value a TF32 tensor core multiplies: 11 significant bits, ties away from zero
static double tf32_ref(float x) {
    if (!isfinite(x) || x == 0) return x;
    int e;
    const double m = frexp(x, &e);   // x = m 2^e, 0.5 <= |m| < 1
    return ldexp(round(ldexp(m, 11)), e - 11);
}

static TestRng R;
static float *rnd(size_t n) {
    float *p = malloc(n * sizeof(float));
    assert_non_null(p);
    test_fill(&R, p, (long)n, -1, 1);
    return p;
}
static Backend *cuda(ComputeDtype dt) {
    char err[512] = "";
    Backend *be = backend_cuda_create(dt, 0, err, sizeof err);
    if (!be) fail_msg("backend_cuda_create: %s", err);
    assert_non_null(be->set_matmul_precision);
    return be;
}

// C (M,N) = sum_k A(m,k) B(n,k), in double, inputs optionally TF32-rounded; mag: the same on |.|
static void ref_abt(double *C, double *mag, const float *A, const float *B, int M, int N, int K,
                    bool tf32) {
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = 0, a = 0;
            for (int k = 0; k < K; k++) {
                const double x = tf32 ? tf32_ref(A[(size_t)m * K + k]) : A[(size_t)m * K + k];
                const double y = tf32 ? tf32_ref(B[(size_t)n * K + k]) : B[(size_t)n * K + k];
                s += x * y;
                a += fabs(x * y);
            }
            C[(size_t)m * N + n] = s;
            if (mag) mag[(size_t)m * N + n] = a;
        }
}
// worst |got - ref| / (1.05 g(k+2) mag + 2 u32 |ref|) over the elements
static double worst_ratio(const float *got, const double *ref, const double *mag, size_t n, int k) {
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        const double tol = 1.05 * gam(k + 2) * mag[i] + 2 * U32 * fabs(ref[i]) + 1e-30;
        const double r = fabs(got[i] - ref[i]) / tol;
        if (!(r <= w)) w = r;   // NaN counts as worst
    }
    return w;
}
static void transpose(float *out, const float *in, int rows, int cols) {
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) out[(size_t)c * rows + r] = in[(size_t)r * cols + c];
}

// ---------------------------------------------------------------- rounding at the edges
// k = 1 products x * 1 expose the rounding of one input exactly.
static void test_rounding_edges(void **state) {
    (void)state;
    Backend *be = cuda(DTYPE_FP32);
    be->set_matmul_precision(be, 1);
    const float u11 = ldexpf(1, -11), u10 = ldexpf(1, -10);
    const float x[] = { 1 + u11,                 // tie: away from zero -> 1 + 2^-10
                        -(1 + u11),              // -> -(1 + 2^-10)
                        1 + 3 * u11,             // tie between 1+2^-10 and 1+2^-9: away -> 1+2^-9
                        nextafterf(1 + u11, 0),  // just below the tie -> 1
                        1 + u10,                 // representable: unchanged
                        2 - ldexpf(1, -12),      // rounds up into the next binade -> 2
                        -0.1f };                 // an inexact fp32 value
    const int n = (int)(sizeof x / sizeof x[0]);
    float one = 1, zero = 0;
    float *dx = up(be, x, sizeof x), *dw = up(be, &one, sizeof one), *db = up(be, &zero, sizeof zero);
    float *dout = be->alloc(be, sizeof x);
    be->matmul_forward(be, dout, dx, dw, db, n, 1, 1);   // out (n,1) = x (n,1) @ w (1,1)^T + 0
    float *got = down(be, dout, n);
    for (int i = 0; i < n; i++) {
        print_message("    x = %.9g -> %.9g (reference %.9g)\n", x[i], got[i], tf32_ref(x[i]));
        assert_true((double)got[i] == tf32_ref(x[i]));
    }
    assert_true(got[0] == 1 + u10 && got[2] == 1 + 2 * u10 && got[3] == 1 && got[5] == 2);
    be->free(be, dx); be->free(be, dw); be->free(be, db); be->free(be, dout);
    free(got);
    be->destroy(be);
}

// ---------------------------------------------------------------- nn.Linear forward and backward
static void test_linear(void **state) {
    (void)state;
    R = test_rng(32);
    const int N = 37, C = 80, OC = 67;   // odd sizes
    float *inp = rnd((size_t)N * C), *w = rnd((size_t)OC * C), *bias = rnd(OC), *dy = rnd((size_t)N * OC);
    Backend *be = cuda(DTYPE_FP32);
    float *d_inp = up(be, inp, sizeof(float) * N * C), *d_w = up(be, w, sizeof(float) * OC * C);
    float *d_b = up(be, bias, sizeof(float) * OC), *d_dy = up(be, dy, sizeof(float) * N * OC);
    float *d_out = be->alloc(be, sizeof(float) * N * OC);
    float *d_dinp = be->alloc(be, sizeof(float) * N * C), *d_dw = be->alloc(be, sizeof(float) * OC * C);
    float *d_db = be->alloc(be, sizeof(float) * OC);

    double *ref = malloc(sizeof(double) * N * OC * 4), *mag = malloc(sizeof(double) * N * OC * 4);
    double *ref_hi = malloc(sizeof(double) * N * OC * 4);
    assert_true(ref && mag && ref_hi);
    float *fp32_out = NULL;
    for (int tf32 = 0; tf32 <= 1; tf32++) {
        be->set_matmul_precision(be, tf32);
        print_message("  matmul_precision=%s\n", tf32 ? "high" : "highest");
        // forward: out (N,OC) = inp (N,C) @ w (OC,C)^T + bias
        be->matmul_forward(be, d_out, d_inp, d_w, d_b, N, C, OC);
        float *out = down(be, d_out, (size_t)N * OC);
        ref_abt(ref, mag, inp, w, N, OC, C, tf32);
        ref_abt(ref_hi, NULL, inp, w, N, OC, C, false);
        for (int i = 0; i < N * OC; i++) { ref[i] += bias[i % OC]; ref_hi[i] += bias[i % OC]; mag[i] += fabs(bias[i % OC]); }
        const double r = worst_ratio(out, ref, mag, (size_t)N * OC, C), r_hi = worst_ratio(out, ref_hi, mag, (size_t)N * OC, C);
        print_message("    forward: |diff|/tol %.3f against its own inputs, %.3f against unrounded fp32 inputs\n", r, r_hi);
        assert_true(r <= 1.0);
        if (tf32) {
            assert_true(r_hi > 1.0);   // the inputs were rounded
            size_t same = 0;
            for (int i = 0; i < N * OC; i++) same += out[i] == fp32_out[i];
            print_message("    forward: %zu of %d outputs bitwise those of matmul_precision=highest\n", same, N * OC);
            assert_true(same < (size_t)N * OC / 10);
            free(out);
        } else {
            fp32_out = out;
        }

        // backward: dinp (N,C) = dy (N,OC) @ w (OC,C); dweight (OC,C) += dy^T (OC,N) @ inp (N,C)
        be->zero(be, d_dw, sizeof(float) * OC * C);
        be->zero(be, d_db, sizeof(float) * OC);
        be->matmul_backward(be, d_dinp, d_dw, d_db, d_dy, d_inp, d_w, N, C, OC);
        float *dinp = down(be, d_dinp, (size_t)N * C), *dw = down(be, d_dw, (size_t)OC * C);
        float *wt = malloc(sizeof(float) * OC * C), *dyt = malloc(sizeof(float) * N * OC), *inpt = malloc(sizeof(float) * N * C);
        assert_true(wt && dyt && inpt);
        transpose(wt, w, OC, C);        // (C,OC)
        transpose(dyt, dy, N, OC);      // (OC,N)
        transpose(inpt, inp, N, C);     // (C,N)
        ref_abt(ref, mag, dy, wt, N, C, OC, tf32);
        const double rd = worst_ratio(dinp, ref, mag, (size_t)N * C, OC);
        ref_abt(ref, mag, dyt, inpt, OC, C, N, tf32);
        const double rw = worst_ratio(dw, ref, mag, (size_t)OC * C, N);
        print_message("    backward: dinp |diff|/tol %.3f, dweight %.3f\n", rd, rw);
        assert_true(rd <= 1.0 && rw <= 1.0);
        free(dinp); free(dw); free(wt); free(dyt); free(inpt);
    }
    // back to highest: bitwise the first fp32 result again
    be->set_matmul_precision(be, 0);
    be->matmul_forward(be, d_out, d_inp, d_w, d_b, N, C, OC);
    float *again = down(be, d_out, (size_t)N * OC);
    assert_memory_equal(again, fp32_out, sizeof(float) * N * OC);
    free(again); free(fp32_out);
    free(ref); free(mag); free(ref_hi);
    be->free(be, d_inp); be->free(be, d_w); be->free(be, d_b); be->free(be, d_dy); be->free(be, d_out);
    be->free(be, d_dinp); be->free(be, d_dw); be->free(be, d_db);
    be->destroy(be);
    free(inp); free(w); free(bias); free(dy);
}

// ---------------------------------------------------------------- attention (batched GEMMs)
// The attention's strided-batched GEMMs take the same compute type: TF32 changes their
// output, and it stays within TF32's reach of the CPU backend's fp32 attention: a score sums
// hs = 16 products |q k| <= 1, each off by at most 2 x 2^-11 relative, scaled by 1/4, so by at
// most 16 x 2^-10 / 4 = 3.9e-3; the probabilities change by a factor within exp(2 x 3.9e-3),
// i.e. 0.8%, and the output (a convex combination of |v| <= 1, v itself rounded: 2^-11) by at
// most ~1e-2: the bound 2e-2; fp32 (highest) stays within 1e-5, ~100 x its rounding.
static void test_attention(void **state) {
    (void)state;
    R = test_rng(33);
    const int B = 2, T = 19, C = 48, NH = 3;
    const size_t nqkv = (size_t)B * T * 3 * C, nout = (size_t)B * T * C, natt = (size_t)B * NH * T * T;
    float *qkv = rnd(nqkv);
    DropoutKey k = {0};
    Backend *cpu = backend_cpu_create(DTYPE_FP32);
    assert_non_null(cpu);
    float *c_out = malloc(sizeof(float) * nout), *c_att = malloc(sizeof(float) * natt);
    assert_true(c_out && c_att);
    cpu->attention_forward(cpu, c_out, c_att, qkv, B, T, C, NH, 0.0f, k);

    Backend *be = cuda(DTYPE_FP32);
    float *d_qkv = up(be, qkv, sizeof(float) * nqkv), *d_out = be->alloc(be, sizeof(float) * nout);
    float *d_att = be->alloc(be, sizeof(float) * natt);
    float *got[2];
    for (int tf32 = 0; tf32 <= 1; tf32++) {
        be->set_matmul_precision(be, tf32);
        be->attention_forward(be, d_out, d_att, d_qkv, B, T, C, NH, 0.0f, k);
        got[tf32] = down(be, d_out, nout);
        double worst = 0;
        for (size_t i = 0; i < nout; i++) worst = fmax(worst, fabs((double)got[tf32][i] - c_out[i]));
        print_message("    attention, matmul_precision=%s: max |cuda - cpu| %.3g\n", tf32 ? "high" : "highest", worst);
        assert_true(worst <= (tf32 ? 2e-2 : 1e-5));
    }
    size_t same = 0;
    for (size_t i = 0; i < nout; i++) same += got[0][i] == got[1][i];
    print_message("    attention: %zu of %zu outputs unchanged by TF32\n", same, nout);
    assert_true(same < nout / 10);
    free(got[0]); free(got[1]); free(c_out); free(c_att); free(qkv);
    be->free(be, d_qkv); be->free(be, d_out); be->free(be, d_att);
    be->destroy(be);
    cpu->destroy(cpu);
}

// ---------------------------------------------------------------- bf16 matmuls are unaffected
static void test_low_precision_unaffected(void **state) {
    (void)state;
    R = test_rng(34);
    const int N = 21, C = 40, OC = 33;
    float *inp = rnd((size_t)N * C), *w = rnd((size_t)OC * C), *bias = rnd(OC);
    Backend *be = cuda(DTYPE_BF16);
    float *d_inp = up(be, inp, sizeof(float) * N * C), *d_w = up(be, w, sizeof(float) * OC * C);
    float *d_b = up(be, bias, sizeof(float) * OC), *d_out = be->alloc(be, sizeof(float) * N * OC);
    float *got[2];
    for (int tf32 = 0; tf32 <= 1; tf32++) {
        be->set_matmul_precision(be, tf32);
        be->matmul_forward(be, d_out, d_inp, d_w, d_b, N, C, OC);
        got[tf32] = down(be, d_out, (size_t)N * OC);
    }
    assert_memory_equal(got[0], got[1], sizeof(float) * N * OC);
    free(got[0]); free(got[1]); free(inp); free(w); free(bias);
    be->free(be, d_inp); be->free(be, d_w); be->free(be, d_b); be->free(be, d_out);
    be->destroy(be);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rounding_edges),
        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_low_precision_unaffected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
