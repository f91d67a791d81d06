// tests/test_gemm.c — kernels/cpu/gemm.h, bf16.h and cpu_features.h: every GEMM implementation
// (OpenBLAS threaded and split, dnnl_sgemm, oneDNN's matmul, MKL and oneDNN 3 when present) against a naive double loop on
// odd shapes, strides, transposes and beta; the dispatch computes exactly what the implementation
// it chose computes; bf16 GEMMs against the exact sum of the bf16 products; fp32 -> bf16 rounding
// against a bit-level reference; the calibration cache's parser on good and malformed files.
// (tests/test_gemm_cache.sh covers the cache file itself: reuse, rewriting, unwritable places.)
#include "tests/test_util.h"

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm.h"

// C (M,N) = op(A) op(B) + beta C in double, row-major with the given strides.
static void naive_gemm(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                       float beta, const float *C0, double *C, int ldc) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) {
                const double a = ta ? A[(long)k * lda + i] : A[(long)i * lda + k];
                const double b = tb ? B[(long)j * ldb + k] : B[(long)k * ldb + j];
                s += a * b;
            }
            C[(long)i * ldc + j] = s + (double)beta * C0[(long)i * ldc + j];
        }
}

// max |got - ref| over the M x N block, relative to max |ref|.
static double block_err(const float *got, const double *ref, int M, int N, int ldc) {
    double num = 0, den = 1e-30;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            const double d = fabs(got[(long)i * ldc + j] - ref[(long)i * ldc + j]);
            num = d > num || d != d ? d : num;
            den = fmax(den, fabs(ref[(long)i * ldc + j]));
        }
    return num / den;
}

typedef struct { int M, N, K; } Shape;
static const Shape SHAPES[] = { {1, 1, 1}, {17, 33, 5}, {64, 48, 96}, {130, 7, 257}, {5, 200, 31}, {96, 96, 1} };

// Operands with row strides 3 more than needed, so a kernel that ignores lda/ldb/ldc fails.
typedef struct { float *A, *B, *C0, *C; double *R; int lda, ldb, ldc; } Ops;
static Ops make_ops(TestRng *r, int ta, int tb, int M, int N, int K) {
    Ops o;
    o.lda = (ta ? M : K) + 3; o.ldb = (tb ? K : N) + 3; o.ldc = N + 3;
    const long na = (long)(ta ? K : M) * o.lda, nb = (long)(tb ? N : K) * o.ldb, nc = (long)M * o.ldc;
    o.A = malloc(sizeof(float) * na); o.B = malloc(sizeof(float) * nb);
    o.C0 = malloc(sizeof(float) * nc); o.C = malloc(sizeof(float) * nc); o.R = malloc(sizeof(double) * nc);
    test_fill(r, o.A, na, -1, 1); test_fill(r, o.B, nb, -1, 1); test_fill(r, o.C0, nc, -1, 1);
    return o;
}
static void free_ops(Ops *o) { free(o->A); free(o->B); free(o->C0); free(o->C); free(o->R); }

static void test_every_impl_matches_naive(void **state) {
    TestRng r = test_rng(11);
    int tested = 0;
    for (int impl = 0; impl < GEMM_N_IMPL; impl++)
        for (size_t s = 0; s < sizeof SHAPES / sizeof *SHAPES; s++)
            for (int ta = 0; ta < 2; ta++)
                for (int tb = 0; tb < 2; tb++)
                    for (int bi = 0; bi < 2; bi++) {
                        const int M = SHAPES[s].M, N = SHAPES[s].N, K = SHAPES[s].K;
                        const float beta = bi ? 1.0f : 0.0f;
                        Ops o = make_ops(&r, ta, tb, M, N, K);
                        memcpy(o.C, o.C0, sizeof(float) * (size_t)M * o.ldc);
                        if (cpu_sgemm_with(impl, ta, tb, M, N, K, o.A, o.lda, o.B, o.ldb, beta, o.C, o.ldc)) {
                            free_ops(&o);
                            continue;   // not available on this machine (oneDNN missing)
                        }
                        naive_gemm(ta, tb, M, N, K, o.A, o.lda, o.B, o.ldb, beta, o.C0, o.R, o.ldc);
                        const double e = block_err(o.C, o.R, M, N, o.ldc);
                        if (!(e <= 1e-5))
                            fail_msg("%s %c%c %dx%dx%d beta %g: rel err %.3e", cpu_gemm_impl_name(impl), ta ? 'T' : 'N',
                                     tb ? 'T' : 'N', M, N, K, beta, e);
                        // the padding between rows is never written
                        for (int i = 0; i < M; i++)
                            for (int j = N; j < o.ldc; j++) assert_true(o.C[(long)i * o.ldc + j] == o.C0[(long)i * o.ldc + j]);
                        free_ops(&o);
                        tested++;
                    }
    assert_true(tested >= 2 * 6 * 8);   // OpenBLAS's two at least
}

// The dispatched product is bitwise the one of the implementation the class table names.
static void test_dispatch_uses_the_chosen_impl(void **state) {
    TestRng r = test_rng(12);
    const int M = 300, N = 200, K = 150;
    Ops o = make_ops(&r, 0, 1, M, N, K);
    memcpy(o.C, o.C0, sizeof(float) * (size_t)M * o.ldc);
    cpu_sgemm(0, 1, M, N, K, o.A, o.lda, o.B, o.ldb, 1.0f, o.C, o.ldc);
    GemmClass c[512];
    const int n = cpu_gemm_classes(c, 512);
    int impl = -1;
    for (int i = 0; i < n && i < 512; i++)
        if (c[i].ta == 0 && c[i].tb == 1 && !c[i].beta0 && c[i].m_log2 == 9 && c[i].n_log2 == 8 && c[i].k_log2 == 8)
            impl = c[i].impl;
    assert_true(impl >= 0);
    float *C2 = malloc(sizeof(float) * (size_t)M * o.ldc);
    memcpy(C2, o.C0, sizeof(float) * (size_t)M * o.ldc);
    assert_int_equal(cpu_sgemm_with(impl, 0, 1, M, N, K, o.A, o.lda, o.B, o.ldb, 1.0f, C2, o.ldc), 0);
    assert_memory_equal(o.C, C2, sizeof(float) * (size_t)M * o.ldc);
    // and the same again (the table does not change under a second call)
    memcpy(C2, o.C0, sizeof(float) * (size_t)M * o.ldc);
    cpu_sgemm(0, 1, M, N, K, o.A, o.lda, o.B, o.ldb, 1.0f, C2, o.ldc);
    assert_memory_equal(o.C, C2, sizeof(float) * (size_t)M * o.ldc);
    free(C2);
    free_ops(&o);
}

// cpu_gemm_totals counts each product outside a parallel region once, 2 M N K FLOPs, and none of
// those a thread of a parallel region makes (the benchmark's GEMM share must not double count).
static void test_totals_count_each_product(void **state) {
    TestRng r = test_rng(13);
    const int M = 70, N = 50, K = 30;
    Ops o = make_ops(&r, 1, 0, M, N, K);
    cpu_sgemm(1, 0, M, N, K, o.A, o.lda, o.B, o.ldb, 0.0f, o.C, o.ldc);   // the class is calibrated now
    double s0, f0, s1, f1, s2, f2;
    cpu_gemm_totals(&s0, &f0);
    cpu_sgemm(1, 0, M, N, K, o.A, o.lda, o.B, o.ldb, 0.0f, o.C, o.ldc);
    cpu_sgemm(1, 0, M, N, K, o.A, o.lda, o.B, o.ldb, 0.0f, o.C, o.ldc);
    cpu_gemm_totals(&s1, &f1);
    assert_true(f1 - f0 == 2.0 * 2.0 * M * N * K);
    assert_true(s1 > s0);
    #pragma omp parallel num_threads(2)
    cpu_sgemm(1, 0, M, N, K, o.A, o.lda, o.B, o.ldb, 0.0f, o.C, o.ldc);
    cpu_sgemm(1, 0, 0, N, K, o.A, o.lda, o.B, o.ldb, 0.0f, o.C, o.ldc);   // empty: nothing
    cpu_gemm_totals(&s2, &f2);
    assert_true(f2 == f1);
    assert_true(s2 == s1);
    free_ops(&o);
}

// ---------------------------------------------------------------- bf16
static float bits_to_float(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }

// Reference rounding on the bit pattern: keep the upper 16 bits, round half to even.
static uint16_t ref_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0x7f800000u) return (uint16_t)(u >> 16) | ((u & 0xffffu) ? 0x40 : 0);
    const uint32_t hi = u >> 16, lo = u & 0xffffu;
    return (uint16_t)(lo > 0x8000u || (lo == 0x8000u && (hi & 1)) ? hi + 1 : hi);
}

static void test_bf16_rounding(void **state) {
    enum { N = 4099 };   // not a multiple of any vector width
    float *x = malloc(sizeof(float) * N);
    uint16_t *got = malloc(sizeof(uint16_t) * N);
    TestRng r = test_rng(13);
    const float special[] = { 0.0f, -0.0f, 1.0f, INFINITY, -INFINITY, NAN, bits_to_float(0x3f808000u) /* tie, even */,
                              bits_to_float(0x3f818000u) /* tie, odd: up */, bits_to_float(0x7f7fffffu) /* -> inf */,
                              bits_to_float(0x00000001u) /* denormal */, bits_to_float(0x7f800001u) /* sNaN */ };
    for (int i = 0; i < N; i++) x[i] = i < 11 ? special[i] : bits_to_float((uint32_t)test_next(&r));
    bf16_from_floats(got, x, N);
    for (int i = 0; i < N; i++) {
        const uint16_t want = ref_bf16(x[i]);
        if (isnan(x[i])) {
            assert_true(isnan(bf16_to_float(got[i])));
            assert_true(isnan(bf16_round(x[i])));
        } else {
            if (got[i] != want) fail_msg("element %d (0x%08x): got 0x%04x want 0x%04x", i, (unsigned)(*(uint32_t *)&x[i]), got[i], want);
            assert_int_equal(bf16_from_float(x[i]), want);
        }
    }
    assert_true(bf16_round(bits_to_float(0x7f7fffffu)) == INFINITY);
    free(x); free(got);
}

// bf16_from_floats_row on every length up to 2 vectors + 1 (whole vectors, then the masked or
// element-wise last part) and bf16_from_floats past its parallel threshold: each element as
// bf16_from_float gives it (NaNs included: their bits too), nothing written past n.
static void test_bf16_rows(void **state) {
    enum { MAXN = 2 * VL + 1, BIG = 70001 };
    TestRng r = test_rng(15);
    float x[MAXN];
    uint16_t got[MAXN + 4];
    for (int n = 0; n <= MAXN; n++) {
        for (int i = 0; i < n; i++)
            x[i] = (i + n) % 5 == 0 ? NAN : (i + n) % 7 == 0 ? bits_to_float(0x3f818000u) : bits_to_float((uint32_t)test_next(&r));
        for (int i = 0; i < MAXN + 4; i++) got[i] = 0xbeef;
        bf16_from_floats_row(got + 1, x, (size_t)n);
        assert_int_equal(got[0], 0xbeef);
        for (int i = 0; i < n; i++)
            if (got[1 + i] != bf16_from_float(x[i])) fail_msg("n %d, element %d: got 0x%04x want 0x%04x", n, i, got[1 + i], bf16_from_float(x[i]));
        for (int i = n; i < MAXN + 3; i++) if (got[1 + i] != 0xbeef) fail_msg("n %d: element %d written", n, i);
    }
    float *big = malloc(sizeof(float) * BIG);
    uint16_t *out = malloc(sizeof(uint16_t) * BIG);
    for (int i = 0; i < BIG; i++) big[i] = i % 1000 == 3 ? NAN : bits_to_float((uint32_t)test_next(&r));
    bf16_from_floats(out, big, BIG);
    for (int i = 0; i < BIG; i++)
        if (out[i] != bf16_from_float(big[i])) fail_msg("bf16_from_floats element %d: got 0x%04x want 0x%04x", i, out[i], bf16_from_float(big[i]));
    free(big); free(out);
}

static void test_bf16_gemm_matches_exact_products(void **state) {
    if (!cpu_gemm_bf16_fast()) skip();   // no AVX512-BF16 / AMX here: the path is never used
    TestRng r = test_rng(14);
    for (size_t s = 0; s < sizeof SHAPES / sizeof *SHAPES; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int bi = 0; bi < 2; bi++) {
                    const int M = SHAPES[s].M, N = SHAPES[s].N, K = SHAPES[s].K;
                    Ops o = make_ops(&r, ta, tb, M, N, K);
                    const long na = (long)(ta ? K : M) * o.lda, nb = (long)(tb ? N : K) * o.ldb;
                    uint16_t *a = malloc(2 * na), *b = malloc(2 * nb);
                    for (long i = 0; i < na; i++) { a[i] = bf16_from_float(o.A[i]); o.A[i] = bf16_to_float(a[i]); }
                    for (long i = 0; i < nb; i++) { b[i] = bf16_from_float(o.B[i]); o.B[i] = bf16_to_float(b[i]); }
                    const float beta = bi ? 1.0f : 0.0f;
                    memcpy(o.C, o.C0, sizeof(float) * (size_t)M * o.ldc);
                    cpu_gemm(GEMM_BF16, ta, tb, M, N, K, a, o.lda, b, o.ldb, beta, o.C, o.ldc);
                    // The products of bf16 values are exact in fp32: only the fp32 summation of K
                    // terms may differ from the exact sum.
                    naive_gemm(ta, tb, M, N, K, o.A, o.lda, o.B, o.ldb, beta, o.C0, o.R, o.ldc);
                    const double e = block_err(o.C, o.R, M, N, o.ldc);
                    if (!(e <= 1e-5)) fail_msg("bf16 %c%c %dx%dx%d: rel err %.3e", ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, e);
                    free(a); free(b);
                    free_ops(&o);
                }
    // The dispatched bf16 product is bitwise the one of the implementation its (bf16) class names.
    {
        const int M = 300, N = 200, K = 150;
        Ops o = make_ops(&r, 0, 1, M, N, K);
        const long na = (long)M * o.lda, nb = (long)N * o.ldb;
        uint16_t *a = malloc(2 * na), *b = malloc(2 * nb);
        for (long i = 0; i < na; i++) a[i] = bf16_from_float(o.A[i]);
        for (long i = 0; i < nb; i++) b[i] = bf16_from_float(o.B[i]);
        memcpy(o.C, o.C0, sizeof(float) * (size_t)M * o.ldc);
        cpu_gemm_bf16(0, 1, M, N, K, a, o.lda, b, o.ldb, 1.0f, o.C, o.ldc);
        GemmClass c[512];
        const int n = cpu_gemm_classes(c, 512);
        int impl = -1;
        for (int i = 0; i < n && i < 512; i++)
            if (c[i].bf16 && c[i].ta == 0 && c[i].tb == 1 && !c[i].beta0 && c[i].m_log2 == 9 && c[i].n_log2 == 8 &&
                c[i].k_log2 == 8)
                impl = c[i].impl;
        if (impl < 0) impl = GEMM_ONEDNN_MATMUL;   // no class: oneDNN's is the only bf16 GEMM here (no MKL, no oneDNN 3)
        assert_true(impl == GEMM_ONEDNN_MATMUL || impl == GEMM_MKL || impl == GEMM_ONEDNN3);
        float *C2 = malloc(sizeof(float) * (size_t)M * o.ldc);
        memcpy(C2, o.C0, sizeof(float) * (size_t)M * o.ldc);
        assert_int_equal(cpu_gemm_bf16_with(impl, 0, 1, M, N, K, a, o.lda, b, o.ldb, 1.0f, C2, o.ldc), 0);
        assert_memory_equal(o.C, C2, sizeof(float) * (size_t)M * o.ldc);
        free(C2); free(a); free(b);
        free_ops(&o);
    }
}

// ---------------------------------------------------------------- cache parser
static const char *FP = "cpu=test; flags=x";

static void test_cache_parser(void **state) {
    GemmClass c[6];
    char why[64];
    const char *good = "mingpt-gemm-cache 5\nfingerprint cpu=test; flags=x\n"
                       "class 0 1 0 10 9 7 2 768 384 128 2 299.8 309.8 371.6 343.7 0.0 0.0\n"
                       "class 1 0 1 7 9 10 2 128 512 768 0 267.3 0.0 0.0 0.0 0.0 0.0\n"
                       "class 0 0 1 9 9 9 2 512 512 512 4 250.1 0.0 260.2 0.0 301.5 0.0\n"
                       "bf16 class 0 0 1 9 9 9 2 512 512 512 3 0.0 0.0 0.0 900.5 120.0 850.0\n"
                       "class 0 0 0 9 9 9 2 512 512 512 5 250.1 0.0 260.2 270.0 0.0 280.5\n"
                       "bf16 class 1 0 1 9 9 9 2 512 512 512 5 0.0 0.0 0.0 900.5 0.0 1000.25\n";
    assert_int_equal(cpu_gemm_cache_parse(good, strlen(good), FP, c, 6, why, sizeof why), 6);
    assert_int_equal(c[0].bf16, 0);
    assert_int_equal(c[3].bf16, 1);   // a class of bf16 products, on oneDNN's matmul
    assert_int_equal(c[3].impl, GEMM_ONEDNN_MATMUL);
    assert_true(fabs(c[3].gflops[GEMM_MKL] - 120.0) < 1e-9);
    assert_int_equal(c[2].impl, GEMM_MKL);   // MKL's column, chosen
    assert_true(fabs(c[2].gflops[GEMM_MKL] - 301.5) < 1e-9);
    assert_int_equal(c[0].ta, 0); assert_int_equal(c[0].tb, 1); assert_int_equal(c[0].m_log2, 10);
    assert_int_equal(c[0].n, 384); assert_int_equal(c[0].impl, GEMM_ONEDNN_SGEMM);
    assert_true(fabs(c[0].gflops[GEMM_ONEDNN_MATMUL] - 343.7) < 1e-9);
    assert_int_equal(c[1].impl, GEMM_OPENBLAS);
    assert_int_equal(c[0].beta0, 0); assert_int_equal(c[1].beta0, 1);
    assert_int_equal(c[4].impl, GEMM_ONEDNN3);   // oneDNN 3's column, chosen for fp32 and for bf16
    assert_true(fabs(c[4].gflops[GEMM_ONEDNN3] - 280.5) < 1e-9);
    assert_int_equal(c[5].bf16, 1);
    assert_int_equal(c[5].impl, GEMM_ONEDNN3);
    assert_true(fabs(c[5].gflops[GEMM_ONEDNN3] - 1000.25) < 1e-9);
    assert_true(fabs(c[3].gflops[GEMM_ONEDNN3] - 850.0) < 1e-9);
    // the same without the final newline
    assert_int_equal(cpu_gemm_cache_parse(good, strlen(good) - 1, FP, c, 6, why, sizeof why), 6);
    // header only: no classes
    const char *empty = "mingpt-gemm-cache 5\nfingerprint cpu=test; flags=x\n";
    assert_int_equal(cpu_gemm_cache_parse(empty, strlen(empty), FP, c, 4, why, sizeof why), 0);

    const struct { const char *text, *why; } bad[] = {
        { "", "no header" },
        { "mingpt-gemm-cache 2\nfingerprint cpu=test; flags=x\n", "line 1" },            // an older format
        { "mingpt-gemm-cache 3\nfingerprint cpu=test; flags=x\n", "line 1" },            // the one before MKL
        { "mingpt-gemm-cache 4\nfingerprint cpu=test; flags=x\n"                          // the one before oneDNN 3
          "class 0 1 0 10 9 7 2 768 384 128 2 299.8 309.8 371.6 343.7 0.0\n", "line 1" },
        { "mingpt-gemm-cache 5x\nfingerprint cpu=test; flags=x\n", "line 1" },
        { "mingpt-gemm-cache 5\nfingerprint cpu=other\n", "line 2" },                   // another machine
        { "mingpt-gemm-cache 5\nfingerprint cpu=test; flags=x\nclass 0 1 0 10 9 7 2 768 384 128 7 1 1 1 1 1 1\n", "line 3" },
        { "mingpt-gemm-cache 5\nfingerprint cpu=test; flags=x\nclass 2 1 0 10 9 7 2 768 384 128 0 1 1 1 1 1 1\n", "line 3" },
        { "mingpt-gemm-cache 5\nfingerprint cpu=test; flags=x\nclass 0 1 2 10 9 7 2 768 384 128 0 1 1 1 1 1 1\n", "line 3" },  // beta0 2
        { "mingpt-gemm-cache 5\nfingerprint cpu=test; flags=x\nclass 0 1 0 10 9 7 2 768 384 128 0 1 1 1 1\n", "line 3" },
        { "mingpt-gemm-cache 5\nfingerprint cpu=test; flags=x\nclass 0 1 0 10 9 7 2 768 384 128 0 1 1 1 1 5 1 1\n", "line 3" },
        { "mingpt-gemm-cache 5\nfingerprint cpu=test; flags=x\nclass 0 1 0 9 9 7 2 768 384 128 0 1 1 1 1 1 1\n", "line 3" },  // 768 > 2^9
        { "mingpt-gemm-cache 5\nfingerprint cpu=test; flags=x\nclass 0 1 0 10 9 7 0 768 384 128 0 1 1 1 1 1 1\n", "line 3" }, // 0 threads
        { "mingpt-gemm-cache 5\nfingerprint cpu=test; flags=x\nclass 0 1 0 10 9 7 2 768 384 128 0 nan 1 1 1 1 1\n", "line 3" },
        { "mingpt-gemm-cache 5\nfingerprint cpu=test; flags=x\nclass 0 1 0 10 9 7 2 768 384 128 0 -1 1 1 1 1 1\n", "line 3" },
        { "mingpt-gemm-cache 5\nfingerprint cpu=test; flags=x\nclass 0 1 0 10 9 7 2 768 384 128 2 1 1 0 1 1 1\n", "line 3" }, // chosen one unmeasured
        { "mingpt-gemm-cache 5\nfingerprint cpu=test; flags=x\nclass 0 1 0 40 9 7 2 768 384 128 0 1 1 1 1 1 1\n", "line 3" },
        { "mingpt-gemm-cache 5\nfingerprint cpu=test; flags=x\ngarbage\n", "line 3" },
        { "mingpt-gemm-cache 5\nfingerprint cpu=test; flags=x\nclass 0 1 0 10 9 7 2 768 384 128 6 1 1 1 1 1 1\n", "line 3" }, // no impl 6
        { "mingpt-gemm-cache 5\nfingerprint cpu=test; flags=x\nclass 0 1 0 10 9 7 2 768 384 128 4 1 1 1 1 0 1\n", "line 3" }, // MKL unmeasured
        { "mingpt-gemm-cache 5\nfingerprint cpu=test; flags=x\nclass 0 1 0 10 9 7 2 768 384 128 5 1 1 1 1 1 0\n", "line 3" }, // oneDNN 3 unmeasured
        { "mingpt-gemm-cache 5\nfingerprint cpu=test; flags=x\nbf16 class 0 1 0 10 9 7 2 768 384 128 0 1 1 1 1 1 1\n", "line 3" }, // no bf16 OpenBLAS
        { "mingpt-gemm-cache 5\nfingerprint cpu=test; flags=x\nbf16 class 0 1 0 10 9 7 2 768 384 128 2 1 1 1 1 1 1\n", "line 3" },
        { "mingpt-gemm-cache 5\nfingerprint cpu=test; flags=x\nbf16  class 0 1 0 10 9 7 2 768 384 128 3 1 1 1 1 1 1\n", "line 3" },
        { "mingpt-gemm-cache 5\nfingerprint cpu=test; flags=x\nfp16 class 0 1 0 10 9 7 2 768 384 128 3 1 1 1 1 1 1\n", "line 3" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const int n = cpu_gemm_cache_parse(bad[i].text, strlen(bad[i].text), FP, c, 4, why, sizeof why);
        if (n != -1 || strcmp(why, bad[i].why) != 0)
            fail_msg("bad cache %zu: got %d '%s', want -1 '%s'", i, n, why, bad[i].why);
    }
    // a NUL byte inside, and an over-long line
    const char nul[] = "mingpt-gemm-cache 5\nfingerprint cpu=test; flags=x\nclass 0\0 1\n";
    assert_int_equal(cpu_gemm_cache_parse(nul, sizeof nul - 1, FP, c, 4, why, sizeof why), -1);
    char *longl = malloc(5000);
    snprintf(longl, 5000, "mingpt-gemm-cache 5\nfingerprint %s", FP);
    memset(longl + strlen(longl), 'x', 2000);
    longl[4000] = 0;
    assert_int_equal(cpu_gemm_cache_parse(longl, strlen(longl), FP, c, 4, why, sizeof why), -1);
    free(longl);
    // at most max classes are stored
    assert_int_equal(cpu_gemm_cache_parse(good, strlen(good), FP, c, 1, why, sizeof why), 1);
}

// ---------------------------------------------------------------- MKL (optional library)
// MKL, when present (`make deps` installs it under build/mkl), against OpenBLAS at the tolerance
// every implementation is held to, bitwise the same on a second call (its reproducible mode);
// its bf16 GEMM against the exact sums of the bf16 products. Skipped only where build/mkl could
// not be made (tests/allowed_skips.txt).
static void test_mkl_matches_openblas(void **state) {
    const char *st = cpu_gemm_mkl_status();
    if (!(st[0] >= '0' && st[0] <= '9')) {
        print_message("MKL: %s\n", st);
        skip();
    }
    char desc[512];
    cpu_gemm_describe(desc, sizeof desc);
    assert_non_null(strstr(desc, " + MKL "));
    TestRng r = test_rng(21);
    const Shape shapes[] = { {1, 1, 1}, {17, 33, 5}, {130, 7, 257}, {300, 200, 150}, {64, 768, 192} };
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int bi = 0; bi < 2; bi++) {
                    const int M = shapes[s].M, N = shapes[s].N, K = shapes[s].K;
                    const float beta = bi ? 1.0f : 0.0f;
                    Ops o = make_ops(&r, ta, tb, M, N, K);
                    const size_t nc = (size_t)M * o.ldc;
                    float *ref = malloc(sizeof(float) * nc), *again = malloc(sizeof(float) * nc);
                    memcpy(ref, o.C0, sizeof(float) * nc);
                    memcpy(o.C, o.C0, sizeof(float) * nc);
                    memcpy(again, o.C0, sizeof(float) * nc);
                    assert_int_equal(cpu_sgemm_with(GEMM_OPENBLAS, ta, tb, M, N, K, o.A, o.lda, o.B, o.ldb, beta, ref, o.ldc), 0);
                    assert_int_equal(cpu_sgemm_with(GEMM_MKL, ta, tb, M, N, K, o.A, o.lda, o.B, o.ldb, beta, o.C, o.ldc), 0);
                    assert_int_equal(cpu_sgemm_with(GEMM_MKL, ta, tb, M, N, K, o.A, o.lda, o.B, o.ldb, beta, again, o.ldc), 0);
                    for (size_t i = 0; i < nc; i++) o.R[i] = ref[i];
                    const double e = block_err(o.C, o.R, M, N, o.ldc);
                    if (!(e <= 1e-5))
                        fail_msg("mkl vs openblas %c%c %dx%dx%d beta %g: rel err %.3e", ta ? 'T' : 'N', tb ? 'T' : 'N', M, N,
                                 K, beta, e);
                    assert_memory_equal(o.C, again, sizeof(float) * nc);
                    for (int i = 0; i < M; i++)   // the padding between rows is never written
                        for (int j = N; j < o.ldc; j++) assert_true(o.C[(long)i * o.ldc + j] == o.C0[(long)i * o.ldc + j]);
                    free(ref); free(again);
                    free_ops(&o);
                }
    // bf16: cblas_gemm_bf16bf16f32 (MKL emulates it where the CPU has no bf16 instructions)
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            const int M = 70, N = 45, K = 300;
            Ops o = make_ops(&r, ta, tb, M, N, K);
            const long na = (long)(ta ? K : M) * o.lda, nb = (long)(tb ? N : K) * o.ldb;
            uint16_t *a = malloc(2 * na), *b = malloc(2 * nb);
            for (long i = 0; i < na; i++) { a[i] = bf16_from_float(o.A[i]); o.A[i] = bf16_to_float(a[i]); }
            for (long i = 0; i < nb; i++) { b[i] = bf16_from_float(o.B[i]); o.B[i] = bf16_to_float(b[i]); }
            memcpy(o.C, o.C0, sizeof(float) * (size_t)M * o.ldc);
            assert_int_equal(cpu_gemm_bf16_with(GEMM_MKL, ta, tb, M, N, K, a, o.lda, b, o.ldb, 1.0f, o.C, o.ldc), 0);
            naive_gemm(ta, tb, M, N, K, o.A, o.lda, o.B, o.ldb, 1.0f, o.C0, o.R, o.ldc);
            const double e = block_err(o.C, o.R, M, N, o.ldc);
            if (!(e <= 1e-5)) fail_msg("mkl bf16 %c%c: rel err %.3e", ta ? 'T' : 'N', tb ? 'T' : 'N', e);
            free(a); free(b);
            free_ops(&o);
        }
}

// ---------------------------------------------------------------- oneDNN 3 (optional library)
// oneDNN 3.x, when present (`make onednn3` installs it under build/onednn3), beside Debian's oneDNN
// 2.x in this one process: each reports its own version through its own dnnl_version() (so the
// 3.x library bound its own symbols: RTLD_DEEPBIND), and products alternating between the two
// libraries are all right. Its fp32 matmul against the naive double loop at odd shapes,
// transposes, strides and beta 0/1, bitwise the same on a second call, the padding between rows
// never written; its bf16 matmul (bf16 A and B, fp32 accumulation and C) against the exact sums
// of the bf16 products. Skipped only where build/onednn3 was not made (tests/allowed_skips.txt).
static void test_dnnl3_matches_naive(void **state) {
    const char *st = cpu_gemm_dnnl3_status();
    if (!(st[0] >= '0' && st[0] <= '9')) {
        print_message("oneDNN 3: %s\n", st);
        float one = 1, c = 0;   // and it is no candidate: refused rather than computed
        assert_int_not_equal(cpu_sgemm_with(GEMM_ONEDNN3, 0, 0, 1, 1, 1, &one, 1, &one, 1, 0.0f, &c, 1), 0);
        skip();
    }
    char v2[32], v3[32], desc[512];
    cpu_gemm_dnnl_versions(v2, v3, sizeof v2);
    assert_true(strncmp(v2, "2.", 2) == 0);   // Debian's, linked
    assert_true(strncmp(v3, "3.", 2) == 0);   // the dlopen'ed one
    assert_true(strncmp(st, v3, strlen(v3)) == 0);
    cpu_gemm_describe(desc, sizeof desc);
    assert_non_null(strstr(desc, " + oneDNN 3."));
    TestRng r = test_rng(31);
    const Shape shapes[] = { {1, 1, 1}, {17, 33, 5}, {130, 7, 257}, {5, 200, 31}, {96, 96, 1}, {300, 200, 150} };
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int bi = 0; bi < 2; bi++) {
                    const int M = shapes[s].M, N = shapes[s].N, K = shapes[s].K;
                    const float beta = bi ? 1.0f : 0.0f;
                    Ops o = make_ops(&r, ta, tb, M, N, K);
                    const size_t nc = (size_t)M * o.ldc;
                    float *v2c = malloc(sizeof(float) * nc), *again = malloc(sizeof(float) * nc);
                    memcpy(o.C, o.C0, sizeof(float) * nc);
                    memcpy(v2c, o.C0, sizeof(float) * nc);
                    memcpy(again, o.C0, sizeof(float) * nc);
                    naive_gemm(ta, tb, M, N, K, o.A, o.lda, o.B, o.ldb, beta, o.C0, o.R, o.ldc);
                    // 3.x, 2.x, 3.x again: the libraries interleaved in one process
                    assert_int_equal(cpu_sgemm_with(GEMM_ONEDNN3, ta, tb, M, N, K, o.A, o.lda, o.B, o.ldb, beta, o.C, o.ldc), 0);
                    assert_int_equal(cpu_sgemm_with(GEMM_ONEDNN_MATMUL, ta, tb, M, N, K, o.A, o.lda, o.B, o.ldb, beta, v2c, o.ldc), 0);
                    assert_int_equal(cpu_sgemm_with(GEMM_ONEDNN3, ta, tb, M, N, K, o.A, o.lda, o.B, o.ldb, beta, again, o.ldc), 0);
                    const double e = block_err(o.C, o.R, M, N, o.ldc), e2 = block_err(v2c, o.R, M, N, o.ldc);
                    if (!(e <= 1e-5) || !(e2 <= 1e-5))
                        fail_msg("onednn3 %c%c %dx%dx%d beta %g: rel err %.3e (oneDNN 2 beside it: %.3e)", ta ? 'T' : 'N',
                                 tb ? 'T' : 'N', M, N, K, beta, e, e2);
                    assert_memory_equal(o.C, again, sizeof(float) * nc);
                    for (int i = 0; i < M; i++)   // the padding between rows is never written
                        for (int j = N; j < o.ldc; j++) assert_true(o.C[(long)i * o.ldc + j] == o.C0[(long)i * o.ldc + j]);
                    free(v2c); free(again);
                    free_ops(&o);
                }
    // bf16 A and B, fp32 C (oneDNN 3 converts where the CPU has no bf16 instructions)
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int bi = 0; bi < 2; bi++) {
                    const int M = shapes[s].M, N = shapes[s].N, K = shapes[s].K;
                    const float beta = bi ? 1.0f : 0.0f;
                    Ops o = make_ops(&r, ta, tb, M, N, K);
                    const long na = (long)(ta ? K : M) * o.lda, nb = (long)(tb ? N : K) * o.ldb;
                    uint16_t *a = malloc(2 * na), *b = malloc(2 * nb);
                    for (long i = 0; i < na; i++) { a[i] = bf16_from_float(o.A[i]); o.A[i] = bf16_to_float(a[i]); }
                    for (long i = 0; i < nb; i++) { b[i] = bf16_from_float(o.B[i]); o.B[i] = bf16_to_float(b[i]); }
                    memcpy(o.C, o.C0, sizeof(float) * (size_t)M * o.ldc);
                    assert_int_equal(cpu_gemm_bf16_with(GEMM_ONEDNN3, ta, tb, M, N, K, a, o.lda, b, o.ldb, beta, o.C, o.ldc), 0);
                    naive_gemm(ta, tb, M, N, K, o.A, o.lda, o.B, o.ldb, beta, o.C0, o.R, o.ldc);
                    const double e = block_err(o.C, o.R, M, N, o.ldc);
                    if (!(e <= 1e-5))
                        fail_msg("onednn3 bf16 %c%c %dx%dx%d beta %g: rel err %.3e", ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K,
                                 beta, e);
                    for (int i = 0; i < M; i++)
                        for (int j = N; j < o.ldc; j++) assert_true(o.C[(long)i * o.ldc + j] == o.C0[(long)i * o.ldc + j]);
                    free(a); free(b);
                    free_ops(&o);
                }
}

// ---------------------------------------------------------------- CPU features
static void test_cpu_features(void **state) {
    const CpuFeatures *f = cpu_features();
    if (f->amx_bf16 || f->avx512_bf16) assert_true(f->avx512);
    if (f->avx512) assert_true(f->avx2);
    assert_string_equal(openblas_core_isa("SkylakeX"), "avx512");
    assert_string_equal(openblas_core_isa("Haswell"), "avx2");
    assert_string_equal(openblas_core_isa("Prescott"), "sse");
    assert_string_equal(openblas_core_isa("NoSuchCore"), "sse");
    const CpuFeatures amx = { .avx2 = true, .fma = true, .avx512 = true, .avx512_bf16 = true, .amx_bf16 = true };
    const CpuFeatures av2 = { .avx2 = true, .fma = true };
    assert_int_equal(openblas_core_is_weaker(&amx, "Prescott"), 1);
    assert_int_equal(openblas_core_is_weaker(&amx, "Haswell"), 1);
    assert_int_equal(openblas_core_is_weaker(&amx, "SkylakeX"), 0);
    assert_int_equal(openblas_core_is_weaker(&av2, "Haswell"), 0);
    assert_int_equal(openblas_core_is_weaker(&av2, "Prescott"), 1);
    char desc[512];
    cpu_gemm_describe(desc, sizeof desc);
    assert_non_null(strstr(desc, "OpenBLAS"));
    assert_non_null(strstr(desc, openblas_core()));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_impl_matches_naive),
        cmocka_unit_test(test_dispatch_uses_the_chosen_impl),
        cmocka_unit_test(test_totals_count_each_product),
        cmocka_unit_test(test_bf16_rounding),
        cmocka_unit_test(test_bf16_rows),
        cmocka_unit_test(test_bf16_gemm_matches_exact_products),
        cmocka_unit_test(test_cache_parser),
        cmocka_unit_test(test_mkl_matches_openblas),
        cmocka_unit_test(test_dnnl3_matches_naive),
        cmocka_unit_test(test_cpu_features),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
