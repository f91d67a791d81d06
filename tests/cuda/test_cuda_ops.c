// tests/cuda/test_cuda_ops.c — every op of the CUDA Backend (run on the CPU through the CUDA
// emulation layer, kernels/cuda/emu/) against the CPU backend's op, on seeded random inputs
// at small odd sizes, with matmul inputs in fp32, bf16 and fp16 (one cmocka group each).
//
// Tolerances are derived, not tuned. Notation: u32 = 2^-24 (fp32 unit roundoff); u = unit
// roundoff of the matmul input type (0 in fp32 mode: nothing is rounded; 2^-8 for bf16,
// 2^-11 for fp16); g(k) = k u32 / (1 - k u32), the classic bound on the relative error of a
// k-term fp32 sum of products (Higham, Accuracy and Stability of Numerical Algorithms, 3.1).
// Each check is per element: |cuda - cpu| <= SAFETY * (coef * mag + rel * |cpu|) + abs,
// where mag is the same computation on absolute values (so cancellation cannot hide an
// error), computed here in double. SAFETY = 1.05 covers the dropped second-order terms.
//
//   * dot products of length k whose two operands the CUDA backend rounds to the matmul
//     type (matmul, the attention GEMMs): the rounded product differs from the exact one by
//     at most (2u + u^2) |a||b|; each backend accumulates in fp32 with error <= g(k) sum|a||b|
//     (times (1+u)^2 <= 1.1 for rounded operands): coef = 2u + u^2 + 2.2 g(k + 2), the +2
//     for the bias add / beta accumulation. Gradients accumulate (+=): rel = 2 u32.
//     fp16 only: an input below 2^-14 rounds as a subnormal with absolute error <= 2^-25,
//     so abs = k 2^-24 (inputs are in [-1, 1]).
//   * attention forward: scores s = q.k/sqrt(hs) differ by at most D_t = scale * max over the
//     row of (2u + u^2 + 2.2 g(hs)) sum|q||k|; shifting softmax inputs by at most D changes
//     each probability by a factor within exp(+-2D), so |d att| <= att E_t with
//     E_t = exp(2 D_t) - 1 + 2 (T + 4) u32 (the second term: exp, sum and division on both
//     sides). out = sum_t2 (att m)_r v_r: coef (E_t (1+u)^2 + 2u + u^2 + 2.2 g(T)) on
//     mag sum_t2 att m |v| (m = dropout multiplier).
//   * attention backward (att given, identical for both): datt = dy.v differs by
//     e1 = 2u + u^2 + 2.2 g(hs) + 2.2 g(T) relative to D = sum|dy||v| (the T term: the row
//     sum s); dpre = att (m datt - s) scale is bounded by P = att scale (m D + sum att m D)
//     and is itself rounded (u); dq = dpre k and dk = dpre^T q add a rounding of k / q and
//     the accumulation: coef e2 = e1 + 3u + u^2 + 4 u32 + 2.2 g(T) on mag sum P |k|
//     (resp. |q|); dv = attd^T dy: coef 2u + u^2 + 2.2 g(T) on mag sum att m |dy|.
//   * fused attention (bf16/fp16, hs a multiple of 16 up to 128, any T: kernels/cuda/
//     flash_attention.cu): the same rounding points, but the softmax is online over key tiles
//     of 32: a row's terms exp(s - m_j) are taken against the running max of their tile and
//     rescaled once per later tile by alpha = exp(m_j - m_j+1) (an exp and a multiply, each
//     within 2 u32), the sum l alike, then O / l: with nk = ceil(T/32) tiles a probability is
//     off by at most 6 (nk + 1) u32 more than above, so E_t grows by that. The dropped-out
//     probabilities are rounded before the division by l instead of after: the same one
//     rounding (u) of the same relative size. att holds the log-sum-exp lse_t = m + log l of
//     each row instead of probabilities: against the exact log sum exp(scale q.k) of the
//     unrounded inputs, every score is within D_t and log-sum-exp is 1-Lipschitz in the max
//     norm, l's relative error is at most (T + 6 nk) u32 (sum and rescales) and m + log l rounds
//     once: |d lse| <= D_t + (T + 6 nk + 2) u32 + u32 |lse|. The backward recomputes P from q,
//     k and lse (P = att (1 + d), |d| <= E_t, the forward's bound) and takes
//     D = rowsum(dy * y) from the forward's own y (off by at most cout_t sum att m |dy||v|,
//     cout_t the forward coefficient below; that is cout_t times the sum term of P below):
//     dq, dk coef e2 + cout_t + E_t (1 + e2 + cout_t) for the query row t of each term, dv
//     ev + E_t (1 + ev).
//   * ops without matmuls run in fp32 in every mode; their outputs are short fp32
//     computations (at most C + 8 or V + 8 roundings along any path), so
//     coef = 2.2 g(C + 8) (resp. V) against the magnitude of the terms, or bitwise equality
//     where both backends do the very same operations in the same order (encoder forward and
//     backward, residual, dropout forward, scale, accumulate).
//   * sum of squares: both accumulate squares of fp32 values in double (exact products),
//     with error <= n 2^-53 relative each: rel = 2 n 2^-53.
#include "tests/test_util.h"

#include <float.h>
#include <stdbool.h>

#include "kernels/backend.h"
#include "kernels/cpu/bf16.h"
#include "tests/cuda/backend_util.h"
#include "kernels/dropout_rng.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cuda/emu/emu_counters.h"
#include "trainer/adamw.h"
#include "trainer/loss_scaler.h"

// The emulator's launch counters (NULL when linked with the real CUDA objects by `make gpu-tests`:
// the launch counts are then not checked, the results still are).
#pragma weak emu_launch_count

#define U32 (1.0 / 16777216.0)
#define SAFETY 1.05

typedef struct { int B, T, C, NH, V; float attn_p; } Dims;
// B 3, T 7, C 48, NH 3 (hs 16), V 67, attention dropout on; then T > 32 (two lanes' worth of
// keys per softmax row), C > 64, N = 74 > 2 * 32 (three partial-sum chunks), dropout off.
static const Dims DIMS[] = { {3, 7, 48, 3, 67, 0.1f}, {2, 37, 80, 5, 67, 0.0f} };
#define NDIMS ((int)(sizeof DIMS / sizeof DIMS[0]))
// Shapes of the fused attention path (bf16/fp16; fp32 runs them on the cuBLAS path): T not a
// multiple of the 64-query / 32-key tiles (37, 100, 130), hs 32, 64, 80, 128, dropout on and
// off; T <= hs too (att then needs B*NH*T*(hs+1) floats, more than T*T): T 1 (hs 32 and 80),
// T 5 < 16 (hs 128), T = hs = 32; both rows of DIMS (hs 16, T 7 and 37) are fused too, the last
// two rows here are not (hs 24, not a multiple of 16, and hs 288 > 128: the cuBLAS path in every
// dtype; hs 288 is also wider than a permute kernel's block, whose threads then step along a row).
static const Dims FDIMS[] = { {3, 37, 96, 3, 67, 0.1f}, {1, 100, 128, 2, 67, 0.0f}, {2, 100, 160, 2, 67, 0.1f},
                              {1, 130, 256, 2, 67, 0.1f}, {2, 1, 64, 2, 67, 0.1f}, {3, 1, 240, 3, 67, 0.0f},
                              {2, 5, 256, 2, 67, 0.1f}, {2, 32, 64, 2, 67, 0.1f}, {2, 37, 72, 3, 67, 0.1f},
                              {2, 9, 288, 1, 67, 0.1f} };
#define NFDIMS ((int)(sizeof FDIMS / sizeof FDIMS[0]))

// Whether the CUDA backend takes the fused attention path (cuda_flash_attention_ok, with
// MINGPT_CUDA_ATTENTION=fused as main sets it, on a device with at least the 146 KB of opt-in
// shared memory per block that hs 128 needs: the emulator's sm_90 limits, an A100's or an H100's).
static bool fused_attention(ComputeDtype dt, int T, int C, int NH) {
    const int hs = C / NH;
    return dt != DTYPE_FP32 && hs % 16 == 0 && hs <= 128 && T >= 1;
}

typedef struct {
    ComputeDtype dt;
    double u;          // unit roundoff of the matmul input type (0: fp32, no rounding)
    double abs_lp;     // per-term absolute error of fp16 subnormals (see above)
    Backend *cu;       // the CUDA backend under test
    Backend *cpu;      // the CPU backend in fp32: the reference
    Backend *cpu_lp;   // the CPU backend in the same matmul dtype
} Fx;

// x rounded to the nearest IEEE half, its bits
static uint16_t fp16_bits(float x) {
    const _Float16 h = (_Float16)x;
    uint16_t b;
    memcpy(&b, &h, 2);
    return b;
}

static double gam(double k) { return k * U32 / (1.0 - k * U32); }
static double coef_dot(const Fx *f, int k) { return 2 * f->u + f->u * f->u + 2.2 * gam(k + 2); }

// ---------------------------------------------------------------- buffers
static TestRng R;
static float *rnd(size_t n, float lo, float hi) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    assert_non_null(p);
    test_fill(&R, p, (long)n, lo, hi);
    return p;
}
// n NaNs: an output the op must overwrite (kernels/backend.h); any read of it shows in the result
static float *nans(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) p[i] = NAN;
    return p;
}
static float *copyf(const float *x, size_t n) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    assert_non_null(p);
    memcpy(p, x, n * sizeof(float));
    return p;
}
static double *dzeros(size_t n) {
    double *p = calloc(n ? n : 1, sizeof(double));
    assert_non_null(p);
    return p;
}
static int32_t *tokens(size_t n, int V, int distinct) {
    int32_t *t = malloc(n * sizeof(int32_t));
    assert_non_null(t);
    // few distinct tokens (repeats in the dwte scatter) plus the last id of the vocabulary
    for (size_t i = 0; i < n; i++) t[i] = (int32_t)(test_next(&R) % (uint64_t)distinct);
    t[n / 2] = V - 1;
    return t;
}

// ---------------------------------------------------------------- checks
// |got - ref| <= SAFETY (coef mag + rel |ref|) + abs for every element (mag NULL: max |ref|).
static void check(const char *what, const float *got, const float *ref, const double *mag, size_t n,
                  double coef, double rel, double abs) {
    double maxref = 0;
    for (size_t i = 0; i < n; i++) maxref = fmax(maxref, fabs(ref[i]));
    double worst = 0;
    size_t wi = 0;
    for (size_t i = 0; i < n; i++) {
        const double m = mag ? mag[i] : maxref;
        const double tol = SAFETY * (coef * m + rel * fabs(ref[i])) + abs;
        const double err = fabs((double)got[i] - ref[i]);
        const double r = err == 0 ? 0 : err / tol;
        if (!(r <= worst)) { worst = r; wi = i; }   // NaN counts as worst
        if (!(err <= tol))
            fail_msg("%s: element %zu: cuda %.9g cpu %.9g |diff| %.3g > tol %.3g", what, i, got[i], ref[i], err, tol);
    }
    print_message("    %-44s max |diff|/tol = %.3f (element %zu)\n", what, worst, wi);
}
static void check_equal(const char *what, const float *got, const float *ref, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &ref[i], sizeof(float)) != 0)
            fail_msg("%s: element %zu: cuda %.9g != cpu %.9g (expected bitwise equality)", what, i, got[i], ref[i]);
    print_message("    %-44s bitwise equal\n", what);
}

// ---------------------------------------------------------------- fixtures
static int setup(void **state, ComputeDtype dt) {
    char err[512] = "";
    Fx *f = calloc(1, sizeof *f);
    if (!f) return 1;
    f->dt = dt;
    f->u = dt == DTYPE_BF16 ? 1.0 / 256 : dt == DTYPE_FP16 ? 1.0 / 2048 : 0.0;
    f->abs_lp = dt == DTYPE_FP16 ? 1.0 / 16777216.0 : 0.0;
    f->cu = backend_cuda_create(dt, 0, err, sizeof err);
    if (!f->cu) { fprintf(stderr, "backend_cuda_create: %s\n", err); free(f); return 1; }
    f->cpu = backend_cpu_create(DTYPE_FP32);
    f->cpu_lp = backend_cpu_create(dt);
    if (!f->cpu || !f->cpu_lp) return 1;
    *state = f;
    R = test_rng(1234 + (uint64_t)dt);
    return 0;
}
static int setup_fp32(void **s) { return setup(s, DTYPE_FP32); }
static int setup_bf16(void **s) { return setup(s, DTYPE_BF16); }
static int setup_fp16(void **s) { return setup(s, DTYPE_FP16); }
static int teardown(void **state) {
    Fx *f = *state;
    f->cu->destroy(f->cu);
    f->cpu->destroy(f->cpu);
    f->cpu_lp->destroy(f->cpu_lp);
    free(f);
    return 0;
}

// ================================================================ memory
static void test_memory(void **state) {
    Fx *f = *state;
    Backend *be = f->cu;
    assert_string_equal(be->name, "cuda");
    assert_int_equal(be->host_memory, 0);
    assert_int_equal(be->matmul_dtype, f->dt);
    const size_t n = 1001;
    float *d = be->alloc(be, n * sizeof(float));
    assert_non_null(d);
    float *h = down(be, d, n);
    for (size_t i = 0; i < n; i++) assert_true(h[i] == 0.0f);   // alloc zeroes
    float *x = rnd(n, -1, 1);
    be->upload(be, d, x, n * sizeof(float));
    float *y = down(be, d, n);
    assert_memory_equal(x, y, n * sizeof(float));
    be->zero(be, d + 10, 20 * sizeof(float));
    free(y);
    y = down(be, d, n);
    for (size_t i = 0; i < n; i++) assert_true(y[i] == (i >= 10 && i < 30 ? 0.0f : x[i]));
    be->free(be, d);
    free(h); free(x); free(y);
}

// ================================================================ encoder
static void test_encoder(void **state) {
    Fx *f = *state;
    for (int k = 0; k < NDIMS; k++) {
        const Dims *D = &DIMS[k];
        const int B = D->B, T = D->T, C = D->C, V = D->V;
        const size_t N = (size_t)B * T, BTC = N * C;
        int32_t *inp = tokens(N, V, 5);
        float *wte = rnd((size_t)V * C, -1, 1), *wpe = rnd((size_t)T * C, -1, 1);
        float *ref = rnd(BTC, -1, 1);
        f->cpu->encoder_forward(f->cpu, ref, inp, wte, wpe, B, T, C);
        int32_t *d_inp = up(f->cu, inp, N * 4);
        float *d_wte = up(f->cu, wte, (size_t)V * C * 4), *d_wpe = up(f->cu, wpe, (size_t)T * C * 4);
        float *d_out = f->cu->alloc(f->cu, BTC * 4);
        f->cu->encoder_forward(f->cu, d_out, d_inp, d_wte, d_wpe, B, T, C);
        float *got = down(f->cu, d_out, BTC);
        check_equal("encoder_forward out", got, ref, BTC);

        // backward accumulates into non-zero gradients; same summation order as the CPU
        float *dout = rnd(BTC, -1, 1), *dwte = rnd((size_t)V * C, -1, 1), *dwpe = rnd((size_t)T * C, -1, 1);
        float *r_dwte = copyf(dwte, (size_t)V * C), *r_dwpe = copyf(dwpe, (size_t)T * C);
        f->cpu->encoder_backward(f->cpu, r_dwte, r_dwpe, dout, inp, B, T, C);
        float *d_dout = up(f->cu, dout, BTC * 4), *d_dwte = up(f->cu, dwte, (size_t)V * C * 4),
              *d_dwpe = up(f->cu, dwpe, (size_t)T * C * 4);
        f->cu->encoder_backward(f->cu, d_dwte, d_dwpe, d_dout, d_inp, B, T, C);
        float *g_dwte = down(f->cu, d_dwte, (size_t)V * C), *g_dwpe = down(f->cu, d_dwpe, (size_t)T * C);
        check_equal("encoder_backward dwte", g_dwte, r_dwte, (size_t)V * C);
        check_equal("encoder_backward dwpe", g_dwpe, r_dwpe, (size_t)T * C);

        f->cu->free(f->cu, d_inp); f->cu->free(f->cu, d_wte); f->cu->free(f->cu, d_wpe);
        f->cu->free(f->cu, d_out); f->cu->free(f->cu, d_dout); f->cu->free(f->cu, d_dwte);
        f->cu->free(f->cu, d_dwpe);
        free(inp); free(wte); free(wpe); free(ref); free(got); free(dout); free(dwte); free(dwpe);
        free(r_dwte); free(r_dwpe); free(g_dwte); free(g_dwpe);
    }
}

// ================================================================ layernorm
// Magnitude of out = (x - m) rs w + b: rs |x - m| |w| + |b| plus the error the mean carries
// into every element (|sum x| / C rs |w|).
static void ln_fwd_mag(double *mag, const float *x, const float *w, const float *b, const float *mean,
                       const float *rstd, int N, int C) {
    for (int n = 0; n < N; n++) {
        double sx = 0;
        for (int c = 0; c < C; c++) sx += fabs(x[(size_t)n * C + c]);
        for (int c = 0; c < C; c++) {
            const double xi = x[(size_t)n * C + c];
            mag[(size_t)n * C + c] = rstd[n] * (fabs(xi - mean[n]) + sx / C) * fabs(w[c]) + fabs(b[c]);
        }
    }
}

static void test_layernorm(void **state) {
    Fx *f = *state;
    for (int k = 0; k < NDIMS; k++) {
        const int N = DIMS[k].B * DIMS[k].T, C = DIMS[k].C;
        const size_t NC = (size_t)N * C;
        const double cf = 2.2 * gam(C + 8);
        float *a = rnd(NC, -1, 1.5f), *b = rnd(NC, -1, 1), *w = rnd(C, 0.5f, 1.5f), *bias = rnd(C, -0.5f, 0.5f);
        float *res = malloc(NC * 4), *out = malloc(NC * 4), *mean = malloc(N * 4), *rstd = malloc(N * 4);
        float *d_a = up(f->cu, a, NC * 4), *d_b = up(f->cu, b, NC * 4), *d_w = up(f->cu, w, C * 4),
              *d_bias = up(f->cu, bias, C * 4);
        float *d_res = f->cu->alloc(f->cu, NC * 4), *d_out = f->cu->alloc(f->cu, NC * 4),
              *d_mean = f->cu->alloc(f->cu, N * 4), *d_rstd = f->cu->alloc(f->cu, N * 4);
        double *mag = dzeros(NC), *mmag = dzeros(N);

        // plain layernorm of a
        f->cpu->layernorm_forward(f->cpu, out, mean, rstd, a, w, bias, N, C);
        f->cu->layernorm_forward(f->cu, d_out, d_mean, d_rstd, d_a, d_w, d_bias, N, C);
        float *g_out = down(f->cu, d_out, NC), *g_mean = down(f->cu, d_mean, N), *g_rstd = down(f->cu, d_rstd, N);
        ln_fwd_mag(mag, a, w, bias, mean, rstd, N, C);
        for (int n = 0; n < N; n++) {
            double s = 0;
            for (int c = 0; c < C; c++) s += fabs(a[(size_t)n * C + c]);
            mmag[n] = s / C;
        }
        check("layernorm_forward out", g_out, out, mag, NC, cf, 0, 0);
        check("layernorm_forward mean", g_mean, mean, mmag, N, cf, 0, 0);
        check("layernorm_forward rstd", g_rstd, rstd, NULL, N, 0, cf, 0);   // rsqrt of a positive sum
        free(g_out); free(g_mean); free(g_rstd);

        // fused residual + layernorm
        f->cpu->residual_layernorm_forward(f->cpu, res, out, mean, rstd, a, b, w, bias, N, C);
        f->cu->residual_layernorm_forward(f->cu, d_res, d_out, d_mean, d_rstd, d_a, d_b, d_w, d_bias, N, C);
        float *g_res = down(f->cu, d_res, NC);
        g_out = down(f->cu, d_out, NC); g_mean = down(f->cu, d_mean, N); g_rstd = down(f->cu, d_rstd, N);
        check_equal("residual_layernorm_forward res", g_res, res, NC);
        ln_fwd_mag(mag, res, w, bias, mean, rstd, N, C);
        check("residual_layernorm_forward out", g_out, out, mag, NC, cf, 0, 0);
        check("residual_layernorm_forward rstd", g_rstd, rstd, NULL, N, 0, cf, 0);

        // backward, accumulating into non-zero gradients
        float *dout = rnd(NC, -1, 1), *dinp = rnd(NC, -1, 1), *dw = rnd(C, -1, 1), *db = rnd(C, -1, 1);
        float *r_dinp = copyf(dinp, NC), *r_dw = copyf(dw, C), *r_db = copyf(db, C);
        f->cpu->layernorm_backward(f->cpu, r_dinp, r_dw, r_db, dout, res, w, mean, rstd, N, C);
        float *d_dout = up(f->cu, dout, NC * 4), *d_dinp = up(f->cu, dinp, NC * 4), *d_dw = up(f->cu, dw, C * 4),
              *d_db = up(f->cu, db, C * 4), *d_mean2 = up(f->cu, mean, N * 4), *d_rstd2 = up(f->cu, rstd, N * 4);
        f->cu->layernorm_backward(f->cu, d_dinp, d_dw, d_db, d_dout, d_res, d_w, d_mean2, d_rstd2, N, C);
        float *g_dinp = down(f->cu, d_dinp, NC), *g_dw = down(f->cu, d_dw, C), *g_db = down(f->cu, d_db, C);
        // dinp = rs (w d - mean(w d) - norm mean(w d norm)): magnitude rs (|w d| + S1/C + |norm| S2/C)
        for (int n = 0; n < N; n++) {
            double s1 = 0, s2 = 0;
            for (int c = 0; c < C; c++) {
                const double norm = ((double)res[(size_t)n * C + c] - mean[n]) * rstd[n];
                const double wd = fabs((double)w[c] * dout[(size_t)n * C + c]);
                s1 += wd; s2 += wd * fabs(norm);
            }
            for (int c = 0; c < C; c++) {
                const double norm = ((double)res[(size_t)n * C + c] - mean[n]) * rstd[n];
                mag[(size_t)n * C + c] = rstd[n] * (fabs((double)w[c] * dout[(size_t)n * C + c]) + s1 / C + fabs(norm) * s2 / C);
            }
        }
        check("layernorm_backward dinp", g_dinp, r_dinp, mag, NC, cf, 2 * U32, 0);
        double *mw = dzeros(C), *mb = dzeros(C);
        for (int n = 0; n < N; n++)
            for (int c = 0; c < C; c++) {
                const double d = fabs(dout[(size_t)n * C + c]);
                mw[c] += fabs(((double)res[(size_t)n * C + c] - mean[n]) * rstd[n]) * d;
                mb[c] += d;
            }
        check("layernorm_backward dweight", g_dw, r_dw, mw, C, 2.2 * gam(N + 8), 2 * U32, 0);
        check("layernorm_backward dbias", g_db, r_db, mb, C, 2.2 * gam(N + 8), 2 * U32, 0);

        f->cu->free(f->cu, d_a); f->cu->free(f->cu, d_b); f->cu->free(f->cu, d_w); f->cu->free(f->cu, d_bias);
        f->cu->free(f->cu, d_res); f->cu->free(f->cu, d_out); f->cu->free(f->cu, d_mean); f->cu->free(f->cu, d_rstd);
        f->cu->free(f->cu, d_dout); f->cu->free(f->cu, d_dinp); f->cu->free(f->cu, d_dw); f->cu->free(f->cu, d_db);
        f->cu->free(f->cu, d_mean2); f->cu->free(f->cu, d_rstd2);
        free(a); free(b); free(w); free(bias); free(res); free(out); free(mean); free(rstd); free(mag); free(mmag);
        free(g_res); free(g_out); free(g_mean); free(g_rstd); free(dout); free(dinp); free(dw); free(db);
        free(r_dinp); free(r_dw); free(r_db); free(g_dinp); free(g_dw); free(g_db); free(mw); free(mb);
    }
}

// LayerNorm backward is one kernel: a block per chunk of 32 rows writes dinp and the chunk's
// partial dweight/dbias sums, the last block to finish adds the chunks in order (a ticket counter
// it resets; 8 chunks at a time, then the rest one by one). Odd shapes from one chunk to 63 (a
// short last chunk, a partial channel tile, exactly 8 chunks, 8 + 3), each accumulated twice into
// non-zero gradients on both backends: every call must see the counter at 0 (else no block or
// the wrong one finalises and the sums go missing). The partial sums are kept in shared memory
// up to C 764 (48 KB with the kernel's static shared memory; C 760 here), beyond it summed by a
// second pass over the rows (C 768, 800). Run twice on fresh copies, the CUDA results are bitwise equal: which block finalises
// does not change them.
static void test_layernorm_backward_shapes(void **state) {
    Fx *f = *state;
    static const int SH[][2] = { {333, 77}, {40, 32}, {5, 3}, {2000, 45}, {33, 130}, {256, 40}, {352, 760},
                                 {96, 768}, {70, 800} };
    for (size_t k = 0; k < sizeof SH / sizeof SH[0]; k++) {
        const int N = SH[k][0], C = SH[k][1];
        const size_t NC = (size_t)N * C;
        float *x = rnd(NC, -1, 1.5f), *w = rnd(C, 0.5f, 1.5f), *bias = rnd(C, -0.5f, 0.5f);
        float *out = malloc(NC * 4), *mean = malloc(N * 4), *rstd = malloc(N * 4);
        assert_true(out && mean && rstd);
        f->cpu->layernorm_forward(f->cpu, out, mean, rstd, x, w, bias, N, C);
        float *dout = rnd(NC, -1, 1), *dinp = rnd(NC, -1, 1), *dw = rnd(C, -1, 1), *db = rnd(C, -1, 1);
        float *r_dinp = copyf(dinp, NC), *r_dw = copyf(dw, C), *r_db = copyf(db, C);
        for (int rep = 0; rep < 2; rep++)
            f->cpu->layernorm_backward(f->cpu, r_dinp, r_dw, r_db, dout, x, w, mean, rstd, N, C);
        float *d_x = up(f->cu, x, NC * 4), *d_w = up(f->cu, w, C * 4), *d_mean = up(f->cu, mean, N * 4),
              *d_rstd = up(f->cu, rstd, N * 4), *d_dout = up(f->cu, dout, NC * 4);
        float *g[2][3];
        for (int run = 0; run < 2; run++) {
            float *d_dinp = up(f->cu, dinp, NC * 4), *d_dw = up(f->cu, dw, C * 4), *d_db = up(f->cu, db, C * 4);
            for (int rep = 0; rep < 2; rep++)
                f->cu->layernorm_backward(f->cu, d_dinp, d_dw, d_db, d_dout, d_x, d_w, d_mean, d_rstd, N, C);
            g[run][0] = down(f->cu, d_dinp, NC); g[run][1] = down(f->cu, d_dw, C); g[run][2] = down(f->cu, d_db, C);
            f->cu->free(f->cu, d_dinp); f->cu->free(f->cu, d_dw); f->cu->free(f->cu, d_db);
        }
        // magnitudes as in test_layernorm, twice (two accumulated gradients)
        double *mag = dzeros(NC), *mw = dzeros(C), *mb = dzeros(C);
        for (int n = 0; n < N; n++) {
            double s1 = 0, s2 = 0;
            for (int c = 0; c < C; c++) {
                const double norm = ((double)x[(size_t)n * C + c] - mean[n]) * rstd[n];
                const double wd = fabs((double)w[c] * dout[(size_t)n * C + c]);
                s1 += wd; s2 += wd * fabs(norm);
                mw[c] += 2 * fabs(norm) * fabs(dout[(size_t)n * C + c]);
                mb[c] += 2 * fabs(dout[(size_t)n * C + c]);
            }
            for (int c = 0; c < C; c++) {
                const double norm = ((double)x[(size_t)n * C + c] - mean[n]) * rstd[n];
                mag[(size_t)n * C + c] = 2 * rstd[n] * (fabs((double)w[c] * dout[(size_t)n * C + c]) + s1 / C + fabs(norm) * s2 / C);
            }
        }
        print_message("    N %d, C %d (%d chunks of 32 rows), accumulated twice:\n", N, C, (N + 31) / 32);
        check("layernorm_backward dinp", g[0][0], r_dinp, mag, NC, 2.2 * gam(C + 8), 4 * U32, 0);
        check("layernorm_backward dweight", g[0][1], r_dw, mw, C, 2.2 * gam(N + 8), 4 * U32, 0);
        check("layernorm_backward dbias", g[0][2], r_db, mb, C, 2.2 * gam(N + 8), 4 * U32, 0);
        check_equal("layernorm_backward dinp, second run", g[1][0], g[0][0], NC);
        check_equal("layernorm_backward dweight, second run", g[1][1], g[0][1], C);
        check_equal("layernorm_backward dbias, second run", g[1][2], g[0][2], C);
        f->cu->free(f->cu, d_x); f->cu->free(f->cu, d_w); f->cu->free(f->cu, d_mean); f->cu->free(f->cu, d_rstd);
        f->cu->free(f->cu, d_dout);
        for (int run = 0; run < 2; run++) for (int j = 0; j < 3; j++) free(g[run][j]);
        free(x); free(w); free(bias); free(out); free(mean); free(rstd); free(dout); free(dinp); free(dw); free(db);
        free(r_dinp); free(r_dw); free(r_db); free(mag); free(mw); free(mb);
    }
}

// ================================================================ matmul
typedef struct { int N, C, OC; bool bias; } MMShape;
// c_attn (C -> 3C), lm_head (no bias, OC = V), the MLP's c_proj (4C -> C) at N = 74, and N, C,
// OC all odd (not multiples of 8 or 16) with a bias (the bias and bias-gradient epilogues at
// shapes cuBLASLt may refuse on a GPU, where the cuBLAS path runs)
static const MMShape MM[] = { {21, 48, 144, true}, {21, 48, 67, false}, {74, 320, 80, true}, {19, 37, 45, true} };
#define NMM ((int)(sizeof MM / sizeof MM[0]))

// mag[n,o] = sum_c |x[n,c]| |w[o,c]| (+ |bias[o]|)
static void mag_xwT(double *mag, const float *x, const float *w, const float *bias, int N, int C, int OC) {
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = bias ? fabs(bias[o]) : 0.0;
            for (int c = 0; c < C; c++) s += fabs(x[(size_t)n * C + c]) * fabs(w[(size_t)o * C + c]);
            mag[(size_t)n * OC + o] = s;
        }
}

static void test_matmul_forward(void **state) {
    Fx *f = *state;
    for (int k = 0; k < NMM; k++) {
        const int N = MM[k].N, C = MM[k].C, OC = MM[k].OC;
        const size_t NO = (size_t)N * OC;
        float *x = rnd((size_t)N * C, -1, 1), *w = rnd((size_t)OC * C, -1, 1);
        float *bias = MM[k].bias ? rnd(OC, -1, 1) : NULL;
        float *ref = malloc(NO * 4), *ref_lp = malloc(NO * 4);
        f->cpu->matmul_forward(f->cpu, ref, x, w, bias, N, C, OC);
        f->cpu_lp->matmul_forward(f->cpu_lp, ref_lp, x, w, bias, N, C, OC);
        float *d_x = up(f->cu, x, (size_t)N * C * 4), *d_w = up(f->cu, w, (size_t)OC * C * 4);
        float *d_b = bias ? up(f->cu, bias, OC * 4) : NULL, *d_out = f->cu->alloc(f->cu, NO * 4);
        f->cu->matmul_forward(f->cu, d_out, d_x, d_w, d_b, N, C, OC);
        float *got = down(f->cu, d_out, NO);
        double *mag = dzeros(NO);
        mag_xwT(mag, x, w, bias, N, C, OC);
        char what[96];
        snprintf(what, sizeof what, "matmul_forward %dx%d->%d vs cpu fp32", N, C, OC);
        check(what, got, ref, mag, NO, coef_dot(f, C), 0, C * f->abs_lp);
        // same rounded inputs (the CPU backend rounds at the same points): fp32-level agreement
        snprintf(what, sizeof what, "matmul_forward %dx%d->%d vs cpu same dtype", N, C, OC);
        check(what, got, ref_lp, mag, NO, 2.2 * gam(C + 2) * 1.1, 0, 0);
        if (f->dt != DTYPE_FP32) {   // the rounding really happened
            double d = 0;
            for (size_t i = 0; i < NO; i++) d = fmax(d, fabs(got[i] - ref[i]));
            assert_true(d > 0);
        }
        f->cu->free(f->cu, d_x); f->cu->free(f->cu, d_w); f->cu->free(f->cu, d_b); f->cu->free(f->cu, d_out);
        free(x); free(w); free(bias); free(ref); free(ref_lp); free(got); free(mag);
    }
}

static void test_matmul_gelu_forward(void **state) {
    Fx *f = *state;
    // c_fc (C -> 4C); then N, C odd and OC = 84 not a multiple of 8 (the cuBLASLt GELU epilogue
    // needs its aux leading dimension, OC, a multiple of 8: the GEMM + bias_gelu kernel path)
    static const int SH[][3] = { {21, 48, 192}, {19, 37, 84} };
    for (int sh = 0; sh < 2; sh++) {
        const int N = SH[sh][0], C = SH[sh][1], OC = SH[sh][2];
        const size_t NO = (size_t)N * OC;
        float *x = rnd((size_t)N * C, -1, 1), *w = rnd((size_t)OC * C, -0.3f, 0.3f), *bias = rnd(OC, -1, 1);
        float *pre = malloc(NO * 4), *out = malloc(NO * 4);
        f->cpu->matmul_gelu_forward(f->cpu, pre, out, x, w, bias, N, C, OC);
        float *d_x = up(f->cu, x, (size_t)N * C * 4), *d_w = up(f->cu, w, (size_t)OC * C * 4), *d_b = up(f->cu, bias, OC * 4);
        float *d_pre = f->cu->alloc(f->cu, NO * 4), *d_out = f->cu->alloc(f->cu, NO * 4);
        f->cu->matmul_gelu_forward(f->cu, d_pre, d_out, d_x, d_w, d_b, N, C, OC);
        float *g_pre = down(f->cu, d_pre, NO), *g_out = down(f->cu, d_out, NO);
        double *mag = dzeros(NO);
        mag_xwT(mag, x, w, bias, N, C, OC);
        check("matmul_gelu_forward pre", g_pre, pre, mag, NO, coef_dot(f, C), 0, C * f->abs_lp);
        // |gelu'| <= 1.13: the pre-activation's error passes through amplified at most that much;
        // gelu itself (exp, division, a few products) adds 8 u32 relative.
        for (size_t i = 0; i < NO; i++) mag[i] *= 1.13;
        check("matmul_gelu_forward out", g_out, out, mag, NO, coef_dot(f, C), 8 * U32, 1.13 * C * f->abs_lp);
        f->cu->free(f->cu, d_x); f->cu->free(f->cu, d_w); f->cu->free(f->cu, d_b); f->cu->free(f->cu, d_pre);
        f->cu->free(f->cu, d_out);
        free(x); free(w); free(bias); free(pre); free(out); free(g_pre); free(g_out); free(mag);
    }
}

// The magnitudes a matmul backward's errors scale with (the caller zeroes them): mb (OC) =
// sum_n |dout|, mx (N,C) = sum_o |dout| |w| (dinp's terms), mw (OC,C) = sum_n |dout| |x| (dweight's).
static void matmul_bwd_magnitudes(int N, int C, int OC, const float *dout, const float *w, const float *x,
                                  double *mx, double *mw, double *mb) {
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            const double d = fabs(dout[(size_t)n * OC + o]);
            mb[o] += d;
            for (int c = 0; c < C; c++) {
                mx[(size_t)n * C + c] += d * fabs(w[(size_t)o * C + c]);
                mw[(size_t)o * C + c] += d * fabs(x[(size_t)n * C + c]);
            }
        }
}

static void test_matmul_backward(void **state) {
    Fx *f = *state;
    for (int k = 0; k < NMM; k++) {
        const int N = MM[k].N, C = MM[k].C, OC = MM[k].OC;
        const size_t NC = (size_t)N * C, OCC = (size_t)OC * C, NO = (size_t)N * OC;
        float *x = rnd(NC, -1, 1), *w = rnd(OCC, -1, 1), *dout = rnd(NO, -1, 1);
        // dinp is overwritten (NaN before), dweight and dbias accumulate into non-zero gradients
        float *dx = nans(NC), *dw = rnd(OCC, -1, 1), *db = rnd(OC, -1, 1);
        float *r_dx = copyf(dx, NC), *r_dw = copyf(dw, OCC), *r_db = copyf(db, OC);
        const bool with_db = MM[k].bias;
        f->cpu->matmul_backward(f->cpu, r_dx, r_dw, with_db ? r_db : NULL, dout, x, w, N, C, OC);
        float *d_x = up(f->cu, x, NC * 4), *d_w = up(f->cu, w, OCC * 4), *d_dout = up(f->cu, dout, NO * 4);
        float *d_dx = up(f->cu, dx, NC * 4), *d_dw = up(f->cu, dw, OCC * 4), *d_db = up(f->cu, db, OC * 4);
        f->cu->matmul_backward(f->cu, d_dx, d_dw, with_db ? d_db : NULL, d_dout, d_x, d_w, N, C, OC);
        float *g_dx = down(f->cu, d_dx, NC), *g_dw = down(f->cu, d_dw, OCC), *g_db = down(f->cu, d_db, OC);
        // dinp[n,c] = sum_o dout[n,o] w[o,c]; dweight[o,c] = sum_n dout[n,o] x[n,c]
        double *mx = dzeros(NC), *mw = dzeros(OCC), *mb = dzeros(OC);
        matmul_bwd_magnitudes(N, C, OC, dout, w, x, mx, mw, mb);
        char what[96];
        snprintf(what, sizeof what, "matmul_backward %dx%d->%d dinp", N, C, OC);
        check(what, g_dx, r_dx, mx, NC, coef_dot(f, OC), 2 * U32, OC * f->abs_lp);
        snprintf(what, sizeof what, "matmul_backward %dx%d->%d dweight", N, C, OC);
        check(what, g_dw, r_dw, mw, OCC, coef_dot(f, N), 2 * U32, N * f->abs_lp);
        // dbias: column sums of dout, fp32 adds (2.2 g(N + 2)); where the CUDA backend takes them
        // from the GEMM's dout operand (the cuBLASLt BGRADB epilogue) that operand is rounded to
        // the matmul type first: + u per term (fp16 subnormals: + 2^-25 each)
        if (with_db) check("matmul_backward dbias", g_db, r_db, mb, OC, f->u + 2.2 * gam(N + 2), 2 * U32, N * f->abs_lp);
        else check_equal("matmul_backward dbias NULL: untouched", g_db, db, OC);

        // dinp NULL: dweight only (c_attn of the first layer's input has no consumer... the
        // backend must skip, not crash); dbias given again: both accumulate a second time (the
        // micro-steps of gradient accumulation), whether the epilogue or the kernels sum it
        f->cu->matmul_backward(f->cu, NULL, d_dw, with_db ? d_db : NULL, d_dout, d_x, d_w, N, C, OC);
        float *g_dw2 = down(f->cu, d_dw, OCC), *g_db2 = down(f->cu, d_db, OC);
        for (size_t i = 0; i < OCC; i++) r_dw[i] = 2 * g_dw[i] - dw[i];   // twice the product
        for (size_t i = 0; i < OCC; i++) mw[i] *= 2;
        check("matmul_backward dinp NULL: dweight again", g_dw2, r_dw, mw, OCC, coef_dot(f, N), 4 * U32, N * f->abs_lp);
        if (with_db) {
            for (int o = 0; o < OC; o++) r_db[o] = 2 * g_db[o] - db[o];   // twice the column sums
            for (int o = 0; o < OC; o++) mb[o] *= 2;
            check("matmul_backward dbias accumulated twice", g_db2, r_db, mb, OC, 2.2 * gam(N + 2), 4 * U32, 0);
        }

        f->cu->free(f->cu, d_x); f->cu->free(f->cu, d_w); f->cu->free(f->cu, d_dout); f->cu->free(f->cu, d_dx);
        f->cu->free(f->cu, d_dw); f->cu->free(f->cu, d_db);
        free(x); free(w); free(dout); free(dx); free(dw); free(db); free(r_dx); free(r_dw); free(r_db);
        free(g_dx); free(g_dw); free(g_db); free(g_dw2); free(g_db2); free(mx); free(mw); free(mb);
    }
}

// The magnitudes the dgelu comparisons scale their tolerances by: mb (OC) = sum |dout|, mw (OC,C)
// = sum |dout| |x|, mx (N,C) = 1.13 sum |dout| |w| and mbp (C) = the column sums of mx (all zeroed
// by the caller). dpre = gelu'(pre) dinp: dinp's error (as matmul_backward's) times |gelu'| <= 1.13,
// and gelu' evaluated on each side (16 u32 times exp's conditioning <= 5 for |pre| <= 3, on terms
// of magnitude <= 1.2, against |dinp| <= mx): 100 u32 on 1.13 mx.
static void dgelu_magnitudes(int N, int C, int OC, const float *dout, const float *w, const float *x, double *mx,
                             double *mw, double *mb, double *mbp) {
    matmul_bwd_magnitudes(N, C, OC, dout, w, x, mx, mw, mb);
    for (size_t i = 0; i < (size_t)N * C; i++) mx[i] *= 1.13;
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) mbp[c] += mx[(size_t)n * C + c];
}

// matmul_backward_dgelu (an optional op: the CUDA backend has it, the CPU backend does not)
// against the CPU backend's separate ops: matmul_backward into a scratch dinp, gelu_backward,
// the column sums of its result. mlp.c_proj (4C -> C) at C 48, and N, C, OC odd with C = 84 not a
// multiple of 8 (cuBLASLt's DGELU needs the GELU input's leading dimension, C, a multiple of 8:
// the cuBLAS GEMM + in-place GELU backward + column sums path).
static void test_matmul_backward_dgelu(void **state) {
    Fx *f = *state;
    if (!f->cu->matmul_backward_dgelu) { skip(); return; }
    // (N 300: 10 chunks of 32 rows in the column sums of the fallback that runs where cuBLASLt
    // refuses the epilogue, EMU_CUBLASLT_LP_D=refuse: 8 loaded ahead, then 2)
    static const int SH[][3] = { {21, 192, 48}, {19, 84, 37}, {300, 40, 24} };
    for (int sh = 0; sh < (int)(sizeof SH / sizeof SH[0]); sh++) {
        const int N = SH[sh][0], C = SH[sh][1], OC = SH[sh][2];
        const size_t NC = (size_t)N * C, OCC = (size_t)OC * C, NO = (size_t)N * OC;
        float *x = rnd(NC, -1, 1), *w = rnd(OCC, -1, 1), *dout = rnd(NO, -1, 1), *pre = rnd(NC, -3, 3);
        float *dpre = nans(NC), *dw = rnd(OCC, -1, 1), *db = rnd(OC, -1, 1), *dbp = rnd(C, -1, 1);
        float *r_dinp = nans(NC), *r_dpre = nans(NC), *r_dw = copyf(dw, OCC), *r_db = copyf(db, OC), *r_dbp = copyf(dbp, C);
        f->cpu->matmul_backward(f->cpu, r_dinp, r_dw, r_db, dout, x, w, N, C, OC);
        f->cpu->gelu_backward(f->cpu, r_dpre, pre, r_dinp, (long)NC);
        for (int n = 0; n < N; n++)
            for (int c = 0; c < C; c++) r_dbp[c] += r_dpre[(size_t)n * C + c];
        float *d_x = up(f->cu, x, NC * 4), *d_w = up(f->cu, w, OCC * 4), *d_dout = up(f->cu, dout, NO * 4);
        float *d_pre = up(f->cu, pre, NC * 4), *d_dpre = up(f->cu, dpre, NC * 4), *d_dw = up(f->cu, dw, OCC * 4);
        float *d_db = up(f->cu, db, OC * 4), *d_dbp = up(f->cu, dbp, C * 4);
        f->cu->matmul_backward_dgelu(f->cu, d_dpre, NULL, d_dbp, d_dw, d_db, d_dout, NULL, d_x, NULL, d_w, d_pre, N, C, OC);
        float *g_dpre = down(f->cu, d_dpre, NC), *g_dw = down(f->cu, d_dw, OCC), *g_db = down(f->cu, d_db, OC);
        float *g_dbp = down(f->cu, d_dbp, C);
        double *mx = dzeros(NC), *mw = dzeros(OCC), *mb = dzeros(OC), *mbp = dzeros(C);
        dgelu_magnitudes(N, C, OC, dout, w, x, mx, mw, mb, mbp);
        char what[96];
        snprintf(what, sizeof what, "matmul_backward_dgelu %dx%d->%d dpre", N, C, OC);
        check(what, g_dpre, r_dpre, mx, NC, coef_dot(f, OC) + 100 * U32, 0, 1.13 * OC * f->abs_lp);
        snprintf(what, sizeof what, "matmul_backward_dgelu %dx%d->%d dbias_pre", N, C, OC);
        check(what, g_dbp, r_dbp, mbp, C, coef_dot(f, OC) + 100 * U32 + 2.2 * gam(N + 2), 2 * U32,
              1.13 * N * OC * f->abs_lp);
        snprintf(what, sizeof what, "matmul_backward_dgelu %dx%d->%d dweight", N, C, OC);
        check(what, g_dw, r_dw, mw, OCC, coef_dot(f, N), 2 * U32, N * f->abs_lp);
        snprintf(what, sizeof what, "matmul_backward_dgelu %dx%d->%d dbias", N, C, OC);
        check(what, g_db, r_db, mb, OC, f->u + 2.2 * gam(N + 2), 2 * U32, N * f->abs_lp);
        f->cu->free(f->cu, d_x); f->cu->free(f->cu, d_w); f->cu->free(f->cu, d_dout); f->cu->free(f->cu, d_pre);
        f->cu->free(f->cu, d_dpre); f->cu->free(f->cu, d_dw); f->cu->free(f->cu, d_db); f->cu->free(f->cu, d_dbp);
        free(x); free(w); free(dout); free(pre); free(dpre); free(dw); free(db); free(dbp); free(r_dinp); free(r_dpre);
        free(r_dw); free(r_db); free(r_dbp); free(g_dpre); free(g_dw); free(g_db); free(g_dbp);
        free(mx); free(mw); free(mb); free(mbp);
    }
}

// No NaN in x (n,): an overwritten gradient kept nothing of what its buffer held.
static void check_no_nan(const char *what, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (isnan(x[i])) fail_msg("%s: element %zu is NaN (the prior contents were read)", what, i);
}

// Backend.set_grad_write: under GRAD_OVERWRITE the matmul backwards write (=) their parameter
// gradients over NaN-filled buffers, equal to the CPU's accumulation into zeros (the tolerances of
// test_matmul_backward / test_matmul_backward_dgelu: the same sums); back under GRAD_ACCUMULATE
// the next call adds to what the first wrote. Every MM shape (with a bias: the BGRADB epilogue
// writing dbias itself; without: the cuBLAS GEMM with beta 0), dweight NULL (dbias by the
// column-sum kernels), and the dgelu shapes of test_matmul_backward_dgelu (C 84: the cuBLAS GEMM
// and the column sums for dbias_pre). The CPU's GRAD_OVERWRITE gives its accumulate-into-zeros
// bits exactly.
static void test_grad_overwrite(void **state) {
    Fx *f = *state;
    assert_non_null(f->cu->set_grad_write);
    assert_non_null(f->cpu->set_grad_write);
    for (int k = 0; k < NMM; k++) {
        const int N = MM[k].N, C = MM[k].C, OC = MM[k].OC;
        const size_t NC = (size_t)N * C, OCC = (size_t)OC * C, NO = (size_t)N * OC;
        float *x = rnd(NC, -1, 1), *w = rnd(OCC, -1, 1), *dout = rnd(NO, -1, 1);
        float *r_dw = calloc(OCC, 4), *r_db = calloc(OC, 4), *r_dx = nans(NC);
        f->cpu->matmul_backward(f->cpu, r_dx, r_dw, r_db, dout, x, w, N, C, OC);   // into zeros
        // the CPU overwriting NaN buffers: bitwise its accumulation into zeros
        float *c_dw = nans(OCC), *c_db = nans(OC);
        f->cpu->set_grad_write(f->cpu, GRAD_OVERWRITE);
        f->cpu->matmul_backward(f->cpu, r_dx, c_dw, c_db, dout, x, w, N, C, OC);
        f->cpu->set_grad_write(f->cpu, GRAD_ACCUMULATE);
        check_equal("cpu GRAD_OVERWRITE dweight vs += into zeros", c_dw, r_dw, OCC);
        check_equal("cpu GRAD_OVERWRITE dbias vs += into zeros", c_db, r_db, OC);

        float *d_x = up(f->cu, x, NC * 4), *d_w = up(f->cu, w, OCC * 4), *d_dout = up(f->cu, dout, NO * 4);
        float *nan_w = nans(OCC), *nan_b = nans(OC);
        float *d_dx = f->cu->alloc(f->cu, NC * 4), *d_dw = up(f->cu, nan_w, OCC * 4), *d_db = up(f->cu, nan_b, OC * 4);
        float *d_db2 = up(f->cu, nan_b, OC * 4);
        f->cu->set_grad_write(f->cu, GRAD_OVERWRITE);
        f->cu->matmul_backward(f->cu, d_dx, d_dw, MM[k].bias ? d_db : NULL, d_dout, d_x, d_w, N, C, OC);
        f->cu->matmul_backward(f->cu, NULL, NULL, d_db2, d_dout, d_x, d_w, N, C, OC);   // dbias alone
        f->cu->set_grad_write(f->cu, GRAD_ACCUMULATE);
        float *g_dw = down(f->cu, d_dw, OCC), *g_db = down(f->cu, d_db, OC), *g_db2 = down(f->cu, d_db2, OC);
        double *mw = dzeros(OCC), *mb = dzeros(OC);
        for (int n = 0; n < N; n++)
            for (int o = 0; o < OC; o++) {
                const double d = fabs(dout[(size_t)n * OC + o]);
                mb[o] += d;
                for (int c = 0; c < C; c++) mw[(size_t)o * C + c] += d * fabs(x[(size_t)n * C + c]);
            }
        char what[96];
        snprintf(what, sizeof what, "GRAD_OVERWRITE %dx%d->%d dweight", N, C, OC);
        check_no_nan(what, g_dw, OCC);
        check(what, g_dw, r_dw, mw, OCC, coef_dot(f, N), 2 * U32, N * f->abs_lp);
        if (MM[k].bias) {
            snprintf(what, sizeof what, "GRAD_OVERWRITE %dx%d->%d dbias", N, C, OC);
            check_no_nan(what, g_db, OC);
            check(what, g_db, r_db, mb, OC, f->u + 2.2 * gam(N + 2), 2 * U32, N * f->abs_lp);
        } else {
            for (int o = 0; o < OC; o++) assert_true(isnan(g_db[o]));   // dbias NULL: untouched
        }
        // dweight NULL: the column-sum kernels sum the fp32 dout itself (no rounding)
        snprintf(what, sizeof what, "GRAD_OVERWRITE %dx%d->%d dbias, dweight NULL", N, C, OC);
        check_no_nan(what, g_db2, OC);
        check(what, g_db2, r_db, mb, OC, 2.2 * gam(N + 2), 2 * U32, 0);

        // GRAD_ACCUMULATE again: the second call adds the same product to the first's
        f->cu->matmul_backward(f->cu, NULL, d_dw, MM[k].bias ? d_db : NULL, d_dout, d_x, d_w, N, C, OC);
        float *g2_dw = down(f->cu, d_dw, OCC), *g2_db = down(f->cu, d_db, OC);
        for (size_t i = 0; i < OCC; i++) { r_dw[i] = 2 * g_dw[i]; mw[i] *= 2; }
        check("GRAD_ACCUMULATE after it: dweight doubled", g2_dw, r_dw, mw, OCC, coef_dot(f, N), 4 * U32, N * f->abs_lp);
        if (MM[k].bias) {
            for (int o = 0; o < OC; o++) { r_db[o] = 2 * g_db[o]; mb[o] *= 2; }
            check("GRAD_ACCUMULATE after it: dbias doubled", g2_db, r_db, mb, OC, 2.2 * gam(N + 2), 4 * U32, 0);
        }
        f->cu->free(f->cu, d_x); f->cu->free(f->cu, d_w); f->cu->free(f->cu, d_dout); f->cu->free(f->cu, d_dx);
        f->cu->free(f->cu, d_dw); f->cu->free(f->cu, d_db); f->cu->free(f->cu, d_db2);
        free(x); free(w); free(dout); free(r_dw); free(r_db); free(r_dx); free(c_dw); free(c_db); free(nan_w);
        free(nan_b); free(g_dw); free(g_db); free(g_db2); free(g2_dw); free(g2_db); free(mw); free(mb);
    }

    if (!f->cu->matmul_backward_dgelu) return;
    // (N 300: 10 chunks of 32 rows in the column sums of the fallback that runs where cuBLASLt
    // refuses the epilogue, EMU_CUBLASLT_LP_D=refuse: 8 loaded ahead, then 2)
    static const int SH[][3] = { {21, 192, 48}, {19, 84, 37}, {300, 40, 24} };
    for (int sh = 0; sh < (int)(sizeof SH / sizeof SH[0]); sh++) {
        const int N = SH[sh][0], C = SH[sh][1], OC = SH[sh][2];
        const size_t NC = (size_t)N * C, OCC = (size_t)OC * C, NO = (size_t)N * OC;
        float *x = rnd(NC, -1, 1), *w = rnd(OCC, -1, 1), *dout = rnd(NO, -1, 1), *pre = rnd(NC, -3, 3);
        float *r_dinp = nans(NC), *r_dpre = nans(NC), *r_dw = calloc(OCC, 4), *r_db = calloc(OC, 4);
        float *r_dbp = calloc(C, 4);
        f->cpu->matmul_backward(f->cpu, r_dinp, r_dw, r_db, dout, x, w, N, C, OC);
        f->cpu->gelu_backward(f->cpu, r_dpre, pre, r_dinp, (long)NC);
        for (int n = 0; n < N; n++)
            for (int c = 0; c < C; c++) r_dbp[c] += r_dpre[(size_t)n * C + c];
        float *nan_w = nans(OCC), *nan_b = nans(OC), *nan_bp = nans(C);
        float *d_x = up(f->cu, x, NC * 4), *d_w = up(f->cu, w, OCC * 4), *d_dout = up(f->cu, dout, NO * 4);
        float *d_pre = up(f->cu, pre, NC * 4), *d_dpre = f->cu->alloc(f->cu, NC * 4), *d_dw = up(f->cu, nan_w, OCC * 4);
        float *d_db = up(f->cu, nan_b, OC * 4), *d_dbp = up(f->cu, nan_bp, C * 4);
        f->cu->set_grad_write(f->cu, GRAD_OVERWRITE);
        f->cu->matmul_backward_dgelu(f->cu, d_dpre, NULL, d_dbp, d_dw, d_db, d_dout, NULL, d_x, NULL, d_w, d_pre, N, C, OC);
        f->cu->set_grad_write(f->cu, GRAD_ACCUMULATE);
        float *g_dw = down(f->cu, d_dw, OCC), *g_db = down(f->cu, d_db, OC), *g_dbp = down(f->cu, d_dbp, C);
        double *mx = dzeros(NC), *mw = dzeros(OCC), *mb = dzeros(OC), *mbp = dzeros(C);
        dgelu_magnitudes(N, C, OC, dout, w, x, mx, mw, mb, mbp);
        char what[96];
        snprintf(what, sizeof what, "GRAD_OVERWRITE dgelu %dx%d->%d dbias_pre", N, C, OC);
        check_no_nan(what, g_dbp, C);
        check(what, g_dbp, r_dbp, mbp, C, coef_dot(f, OC) + 100 * U32 + 2.2 * gam(N + 2), 2 * U32,
              1.13 * N * OC * f->abs_lp);
        snprintf(what, sizeof what, "GRAD_OVERWRITE dgelu %dx%d->%d dweight", N, C, OC);
        check_no_nan(what, g_dw, OCC);
        check(what, g_dw, r_dw, mw, OCC, coef_dot(f, N), 2 * U32, N * f->abs_lp);
        snprintf(what, sizeof what, "GRAD_OVERWRITE dgelu %dx%d->%d dbias", N, C, OC);
        check_no_nan(what, g_db, OC);
        check(what, g_db, r_db, mb, OC, f->u + 2.2 * gam(N + 2), 2 * U32, N * f->abs_lp);
        // GRAD_ACCUMULATE again: dbias_pre doubles
        f->cu->matmul_backward_dgelu(f->cu, d_dpre, NULL, d_dbp, d_dw, d_db, d_dout, NULL, d_x, NULL, d_w, d_pre, N, C, OC);
        float *g2_dbp = down(f->cu, d_dbp, C);
        for (int c = 0; c < C; c++) { r_dbp[c] = 2 * g_dbp[c]; mbp[c] *= 2; }
        check("GRAD_ACCUMULATE after it: dbias_pre doubled", g2_dbp, r_dbp, mbp, C, 2.2 * gam(N + 2), 4 * U32, 0);
        f->cu->free(f->cu, d_x); f->cu->free(f->cu, d_w); f->cu->free(f->cu, d_dout); f->cu->free(f->cu, d_pre);
        f->cu->free(f->cu, d_dpre); f->cu->free(f->cu, d_dw); f->cu->free(f->cu, d_db); f->cu->free(f->cu, d_dbp);
        free(x); free(w); free(dout); free(pre); free(r_dinp); free(r_dpre); free(r_dw); free(r_db); free(r_dbp);
        free(nan_w); free(nan_b); free(nan_bp); free(g_dw); free(g_db); free(g_dbp); free(g2_dbp);
        free(mx); free(mw); free(mb); free(mbp);
    }
}

// An element of a low-precision copy of `size` bytes per element (2: bf16/fp16 bits, 4: fp32
// values already rounded) as the float it holds, and x rounded as such a copy stores it (nearest
// even), compared bit for bit.
static float lp_value(ComputeDtype dt, const void *copy, size_t size, size_t i) {
    if (size == 4) return ((const float *)copy)[i];
    const uint16_t b = ((const uint16_t *)copy)[i];
    if (dt == DTYPE_BF16) return bf16_to_float(b);
    _Float16 h;
    memcpy(&h, &b, 2);
    return (float)h;
}
static bool lp_holds_rounded(ComputeDtype dt, const void *copy, size_t size, size_t i, float x) {
    const float want = dt == DTYPE_BF16 ? bf16_round(x) : fp16_round(x), got = lp_value(dt, copy, size, i);
    return memcmp(&want, &got, sizeof want) == 0;
}
static void check_rounded_copy(const char *what, ComputeDtype dt, const void *copy, size_t size, const float *x,
                               size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!lp_holds_rounded(dt, copy, size, i, x[i]))
            fail_msg("%s: element %zu: copy holds %.9g, the fp32 value %.9g rounds to %.9g", what, i,
                     lp_value(dt, copy, size, i), x[i], dt == DTYPE_BF16 ? bf16_round(x[i]) : fp16_round(x[i]));
    print_message("    %-44s bitwise the fp32 output rounded\n", what);
}
static void *down_bytes(Backend *be, const void *d, size_t bytes) {
    void *h = malloc(bytes ? bytes : 1);
    assert_non_null(h);
    be->download(be, h, d, bytes);
    return h;
}
static void check_same(const char *what, Backend *be, const float *d1, const float *d2, size_t n) {
    float *a = down(be, d1, n), *b = down(be, d2, n);
    check_equal(what, b, a, n);
    free(a); free(b);
}

// On a real GPU (emu_launch_count NULL) cuBLASLt's GELU_AUX_BIAS and DGELU_BGRAD epilogues
// evaluate GELU and its derivative with NVIDIA's own code, per output type: a 16-bit D is not
// the fp32 D rounded (seen on an H200: 2 bf16 ulps in GELU's negative tail, where
// 0.5 x (1 + tanh u) cancels; elsewhere the other neighbour of the fp32 value: 0.9 bf16 ulp, 1
// fp16 ulp). Where those epilogues run (`lt`), the copy is held there to one ulp of the type
// (2 f->u relative) plus 8 fp32 ulps of the tensor's largest value, and what is computed from it
// to a dot product's error over k terms against the plain op's result; the emulator
// (kernels/cuda/gelu.cu's formula in every path) and the fallback kernels keep the bitwise checks.
// MINGPT_CUDA_EPILOGUES=off (kernels/backend.h; make test runs the suite so): no cuBLASLt
static bool epilogues_off(void) {
    const char *v = getenv("MINGPT_CUDA_EPILOGUES");
    return v && strcmp(v, "off") == 0;
}
static void check_copy(const Fx *f, bool lt, const char *what, const void *copy, size_t size, const float *x,
                       size_t n) {
    if (!lt || emu_launch_count) { check_rounded_copy(what, f->dt, copy, size, x, n); return; }
    float *got = malloc(n * sizeof(float));
    assert_non_null(got);
    for (size_t i = 0; i < n; i++) got[i] = lp_value(f->dt, copy, size, i);
    check(what, got, x, NULL, n, 8 * U32, 2 * f->u, f->abs_lp);
    free(got);
}
static void check_same_lt(const Fx *f, bool lt, const char *what, const float *d1, const float *d2, size_t n,
                          int k) {
    if (!lt || emu_launch_count) { check_same(what, f->cu, d1, d2, n); return; }
    float *a = down(f->cu, d1, n), *b = down(f->cu, d2, n);
    check(what, b, a, NULL, n, coef_dot(f, k), 0, k * f->abs_lp);
    free(a); free(b);
}

// The MLP's copies, bf16 and fp16 (the *_lp ops exist only there): c_fc's GELU output written
// only as its copy (matmul_gelu_forward_lp's out_lp), mlp.c_proj's backward writing the gradient
// of c_fc's output only as its copy (matmul_backward_dgelu's dpre_lp, with the GELU output given
// as inp_lp) and c_fc's backward taking it (matmul_backward_lp's dout_lp). Each copy is bitwise
// the fp32 output of the plain op on the same backend rounded to nearest even (the rounding point
// is unchanged), every fp32 output beside it (pre, the bias and weight gradients) is bitwise the
// plain op's, and the ops that take the copies give bitwise the plain ops' results on the fp32
// tensors (the plain ops are compared with the CPU above; on a real GPU, where cuBLASLt's
// epilogues run, within the tolerances of check_copy). The copy of the GELU output is also
// compared with the fp32 CPU reference: the tolerance of matmul_gelu_forward's out plus one
// rounding to the type (f->u relative). The CPU backend's matmul_gelu_forward_lp with out_lp and
// matmul_backward_lp with dout_lp: the same bitwise properties against its own plain ops. Shapes:
// c_fc C 48 -> 192 (cuBLASLt's epilogues) and N, C odd with 4C = 84 not a multiple of 8 (the
// fallbacks: the GEMM and bias_gelu_kernel writing the copy; the GEMM, GELU backward, column
// sums and rounding). Under MINGPT_CUDA_EPILOGUES=off c_fc's bias gradient on the fp32 dout sums
// dout, as the CPU's does, and on dout_lp the copy (cuBLASLt's BGRADB sums the copy in both): the
// two then differ by the rounding of each term, u relative to the column sums of |dout|.
static void test_mlp_lp_copies(void **state) {
    Fx *f = *state;
    if (f->dt == DTYPE_FP32 || !f->cu->matmul_gelu_forward_lp || !f->cu->matmul_backward_dgelu) { skip(); return; }
    static const int SH[][2] = { {21, 48}, {19, 21} };
    for (int sh = 0; sh < 2; sh++) {
        const int N = SH[sh][0], C = SH[sh][1], H = 4 * C;
        const bool lt = sh == 0;   // cuBLASLt's epilogues (see check_copy)
        const size_t NC = (size_t)N * C, NH = (size_t)N * H, HC = (size_t)H * C;
        float *x = rnd(NC, -1, 1), *lnw = rnd(C, 0.5f, 1.5f), *lnb = rnd(C, -0.2f, 0.2f);
        float *wfc = rnd(HC, -0.3f, 0.3f), *bfc = rnd(H, -1, 1), *wpr = rnd(HC, -0.3f, 0.3f), *bpr = rnd(C, -1, 1);
        float *dout = rnd(NC, -1, 1), *zero = calloc(HC, sizeof(float));
        Backend *cu = f->cu;
        const size_t lp = cu->lp_size;
        assert_int_equal(lp, 2);
        float *d_x = up(cu, x, NC * 4), *d_lnw = up(cu, lnw, C * 4), *d_lnb = up(cu, lnb, C * 4);
        float *d_wfc = up(cu, wfc, HC * 4), *d_bfc = up(cu, bfc, H * 4), *d_wpr = up(cu, wpr, HC * 4);
        float *d_bpr = up(cu, bpr, C * 4), *d_dout = up(cu, dout, NC * 4);
        float *d_ln = cu->alloc(cu, NC * 4), *d_st = cu->alloc(cu, 2 * N * 4);
        void *d_ln_lp = cu->alloc(cu, NC * lp), *d_g_lp = cu->alloc(cu, NH * lp), *d_dp_lp = cu->alloc(cu, NH * lp);
        float *d_pre1 = cu->alloc(cu, NH * 4), *d_pre2 = cu->alloc(cu, NH * 4), *d_g1 = cu->alloc(cu, NH * 4);
        float *d_o1 = cu->alloc(cu, NC * 4), *d_o2 = cu->alloc(cu, NC * 4), *d_dp1 = cu->alloc(cu, NH * 4);
        float *d_dln1 = cu->alloc(cu, NC * 4), *d_dln2 = cu->alloc(cu, NC * 4);
        float *gr[2][5];   // per run: dbias_pre, dweight, dbias of mlp.c_proj; dweight, dbias of c_fc
        const size_t gn[5] = { (size_t)H, HC, (size_t)C, HC, (size_t)H };
        for (int r = 0; r < 2; r++)
            for (int k = 0; k < 5; k++) gr[r][k] = up(cu, zero, gn[k] * 4);
        char what[96];
        // the producer of c_fc's input copy (and its fp32 output, the plain ops' input)
        cu->layernorm_forward_lp(cu, NULL, d_ln, d_ln_lp, d_st, d_st + N, d_x, NULL, d_lnw, d_lnb, N, C);
        // forward: c_fc + GELU, then mlp.c_proj
        cu->matmul_gelu_forward(cu, d_pre1, d_g1, d_ln, d_wfc, d_bfc, N, C, H);
        cu->matmul_gelu_forward_lp(cu, d_pre2, NULL, d_g_lp, d_ln_lp, d_wfc, d_bfc, N, C, H);
        cu->matmul_forward(cu, d_o1, d_g1, d_wpr, d_bpr, N, H, C);
        cu->matmul_forward_lp(cu, d_o2, NULL, d_g_lp, d_wpr, d_bpr, N, H, C);
        float *g1 = down(cu, d_g1, NH);
        void *glp = down_bytes(cu, d_g_lp, NH * lp);
        snprintf(what, sizeof what, "gelu_forward_lp %dx%d->%d out_lp", N, C, H);
        check_copy(f, lt, what, glp, lp, g1, NH);
        snprintf(what, sizeof what, "gelu_forward_lp %dx%d->%d pre", N, C, H);
        check_same_lt(f, lt, what, d_pre1, d_pre2, NH, C);
        snprintf(what, sizeof what, "mlp.c_proj on out_lp %dx%d->%d", N, H, C);
        check_same_lt(f, lt, what, d_o1, d_o2, NC, H);
        // the copy against the fp32 CPU reference (ln's output as the CPU computes it)
        float *ln = down(cu, d_ln, NC), *pre = malloc(NH * 4), *out = malloc(NH * 4), *gw = malloc(NH * 4);
        f->cpu->matmul_gelu_forward(f->cpu, pre, out, ln, wfc, bfc, N, C, H);
        for (size_t i = 0; i < NH; i++) gw[i] = lp_value(f->dt, glp, lp, i);
        double *mag = dzeros(NH);
        mag_xwT(mag, ln, wfc, bfc, N, C, H);
        for (size_t i = 0; i < NH; i++) mag[i] *= 1.13;
        snprintf(what, sizeof what, "gelu_forward_lp %dx%d->%d out_lp vs cpu", N, C, H);
        check(what, gw, out, mag, NH, coef_dot(f, C), 8 * U32 + f->u, 1.13 * C * f->abs_lp);
        // backward: mlp.c_proj with the GELU backward (dpre fp32, or only its copy), then c_fc
        cu->matmul_backward_dgelu(cu, d_dp1, NULL, gr[0][0], gr[0][1], gr[0][2], d_dout, NULL, d_g1, NULL, d_wpr,
                                  d_pre1, N, H, C);
        cu->matmul_backward_dgelu(cu, NULL, d_dp_lp, gr[1][0], gr[1][1], gr[1][2], d_dout, NULL, NULL, d_g_lp, d_wpr,
                                  d_pre1, N, H, C);
        cu->matmul_backward_lp(cu, d_dln1, gr[0][3], gr[0][4], d_dp1, NULL, d_ln_lp, d_wfc, N, C, H);
        cu->matmul_backward_lp(cu, d_dln2, gr[1][3], gr[1][4], NULL, d_dp_lp, d_ln_lp, d_wfc, N, C, H);
        float *dp1 = down(cu, d_dp1, NH);
        void *dplp = down_bytes(cu, d_dp_lp, NH * lp);
        snprintf(what, sizeof what, "backward_dgelu %dx%d->%d dpre_lp", N, H, C);
        check_copy(f, lt, what, dplp, lp, dp1, NH);
        static const char *names[5] = { "dbias_pre", "c_proj dweight", "c_proj dbias", "c_fc dweight",
                                        "c_fc dbias (dout_lp's sums)" };
        for (int k = 0; k < 4; k++) {
            snprintf(what, sizeof what, "mlp backward %dx%d %s", N, C, names[k]);
            check_same_lt(f, lt, what, gr[0][k], gr[1][k], gn[k], H);
        }
        snprintf(what, sizeof what, "mlp backward %dx%d %s", N, C, names[4]);
        if (!epilogues_off()) check_same_lt(f, lt, what, gr[0][4], gr[1][4], gn[4], H);
        else {   // no BGRADB: given fp32 dout, the column sums are of it (the CPU's too), not of D
            float *b0 = down(cu, gr[0][4], H), *b1 = down(cu, gr[1][4], H);
            double *mb = dzeros(H);
            for (size_t i = 0; i < NH; i++) mb[i % H] += fabs(dp1[i]);
            check(what, b1, b0, mb, H, f->u + 2.2 * gam(N + 2), 2 * U32, 0);
            free(b0); free(b1); free(mb);
        }
        snprintf(what, sizeof what, "c_fc backward on dout_lp %dx%d dinp", N, C);
        check_same_lt(f, lt, what, d_dln1, d_dln2, NC, H);
        // the CPU backend's variants, against its own plain ops
        Backend *cl = f->cpu_lp;
        if (cl->matmul_gelu_forward_lp && cl->lp_size) {
            const size_t clp = cl->lp_size;
            void *c_ln_lp = malloc(NC * clp), *c_g_lp = malloc(NH * clp), *c_d_lp = malloc(NH * clp);
            float *c_ln = malloc(NC * 4), *c_st = malloc(2 * N * 4), *p1 = malloc(NH * 4), *p2 = malloc(NH * 4);
            float *o1 = malloc(NH * 4), *dpc = rnd(NH, -1, 1), *di1 = malloc(NC * 4), *di2 = malloc(NC * 4);
            float *w1 = calloc(HC, 4), *w2 = calloc(HC, 4), *b1 = calloc(H, 4), *b2 = calloc(H, 4);
            cl->layernorm_forward_lp(cl, NULL, c_ln, c_ln_lp, c_st, c_st + N, x, NULL, lnw, lnb, N, C);
            cl->matmul_gelu_forward(cl, p1, o1, c_ln, wfc, bfc, N, C, H);
            cl->matmul_gelu_forward_lp(cl, p2, NULL, c_g_lp, c_ln_lp, wfc, bfc, N, C, H);
            check_rounded_copy("cpu gelu_forward_lp out_lp", f->dt, c_g_lp, clp, o1, NH);
            check_equal("cpu gelu_forward_lp pre", p2, p1, NH);
            // a copy of an output gradient (dpc rounded), then the op on it and on the rounded fp32 values
            for (size_t i = 0; i < NH; i++) dpc[i] = f->dt == DTYPE_BF16 ? bf16_round(dpc[i]) : fp16_round(dpc[i]);
            if (clp == 2) for (size_t i = 0; i < NH; i++) ((uint16_t *)c_d_lp)[i] = bf16_from_float(dpc[i]);
            else memcpy(c_d_lp, dpc, NH * 4);
            cl->matmul_backward_lp(cl, di1, w1, b1, dpc, NULL, c_ln_lp, wfc, N, C, H);
            cl->matmul_backward_lp(cl, di2, w2, b2, NULL, c_d_lp, c_ln_lp, wfc, N, C, H);
            check_equal("cpu backward_lp on dout_lp dinp", di2, di1, NC);
            check_equal("cpu backward_lp on dout_lp dweight", w2, w1, HC);
            check_equal("cpu backward_lp on dout_lp dbias", b2, b1, H);
            free(c_ln_lp); free(c_g_lp); free(c_d_lp); free(c_ln); free(c_st); free(p1); free(p2); free(o1);
            free(dpc); free(di1); free(di2); free(w1); free(w2); free(b1); free(b2);
        }
        void *dbufs[] = { d_x, d_lnw, d_lnb, d_wfc, d_bfc, d_wpr, d_bpr, d_dout, d_ln, d_st, d_ln_lp, d_g_lp, d_dp_lp,
                          d_pre1, d_pre2, d_g1, d_o1, d_o2, d_dp1, d_dln1, d_dln2 };
        for (size_t i = 0; i < sizeof dbufs / sizeof *dbufs; i++) cu->free(cu, dbufs[i]);
        for (int r = 0; r < 2; r++) for (int k = 0; k < 5; k++) cu->free(cu, gr[r][k]);
        free(x); free(lnw); free(lnb); free(wfc); free(bfc); free(wpr); free(bpr); free(dout); free(zero);
        free(g1); free(glp); free(ln); free(pre); free(out); free(gw); free(mag); free(dp1); free(dplp);
    }
}

// ================================================================ attention
// Dropout multiplier of att element `flat` (flat index in the local (B,NH,T,T) tensor, batch
// row b, L = NH*T*T elements per batch row): its mask is keyed by the global index.
static double drop_mult(float p, DropoutKey dk, int b, size_t L, size_t flat) {
    if (p <= 0) return 1.0;
    const uint64_t g = dropout_global_index(dk, b, (int64_t)L, (int64_t)(flat - (size_t)b * L));
    return dropout_keep(dk.key, g, dropout_threshold(p)) ? 1.0 / (1.0 - p) : 0.0;
}

// Where the local batch rows sit in the global batch: one process ({0, 1}), and rank 1 of 3
// data-parallel ranks ({1, 3}: local row j is global row 1 + 3j).
static const int64_t ROWMAP[][2] = { {0, 1}, {1, 3} };
#define NROWMAP 2

// Backend.attention_backward_lp from the same inputs as the attention_backward whose fp32 result
// is want (B,T,3C): its copy (dqkv NULL) is bitwise want rounded to nearest even in the matmul
// dtype (the kernels round the very values they store in fp32), and with dqkv given both come
// out: dqkv bitwise want, the copy the same again. Both buffers hold NaN before (overwritten).
static void check_dqkv_lp(Fx *f, const float *want, float *d_scr, const float *d_dout, const float *d_qkv,
                          const float *d_att, int B, int T, int C, int NH, float p, DropoutKey key) {
    Backend *cu = f->cu;
    const size_t n = (size_t)B * T * 3 * C;
    assert_int_equal(cu->lp_size, 2);
    uint16_t *h = malloc(n * 2);
    float *nan_f = nans(n);
    memset(h, 0xff, n * 2);   // NaN in bf16 and fp16
    void *d_lp = up(cu, h, n * 2);
    float *d_dq = up(cu, nan_f, n * 4);
    for (int with_fp32 = 0; with_fp32 < 2; with_fp32++) {
        cu->upload(cu, d_lp, h, n * 2);
        cu->attention_backward_lp(cu, with_fp32 ? d_dq : NULL, d_lp, d_scr, d_dout, d_qkv, NULL, d_att, B, T, C, NH, p,
                                  key);
        uint16_t *g = malloc(n * 2);
        cu->download(cu, g, d_lp, n * 2);
        for (size_t i = 0; i < n; i++) {
            const uint16_t r = f->dt == DTYPE_BF16 ? bf16_from_float(want[i]) : fp16_bits(want[i]);
            if (g[i] != r)
                fail_msg("attention_backward_lp: dqkv_lp[%zu] = 0x%04x, the fp32 gradient %.9g rounds to 0x%04x", i,
                         g[i], want[i], r);
        }
        free(g);
        if (with_fp32) {
            float *g32 = down(cu, d_dq, n);
            check_equal("attention_backward_lp dqkv (fp32 too)", g32, want, n);
            free(g32);
        }
    }
    print_message("    attention_backward_lp: dqkv_lp bitwise the fp32 dqkv rounded (%zu elements)\n", n);
    cu->free(cu, d_lp); cu->free(cu, d_dq);
    free(h); free(nan_f);
}

static void test_attention(void **state) {
    Fx *f = *state;
    for (int mi = 0; mi < NROWMAP; mi++)
    for (int k = 0; k < NDIMS + NFDIMS; k++) {
        const DropoutKey key = { dropout_key(42, 7), ROWMAP[mi][0], ROWMAP[mi][1], NULL };
        const Dims *D = k < NDIMS ? &DIMS[k] : &FDIMS[k - NDIMS];
        if (mi > 0 && D->attn_p <= 0) continue;   // no mask: the mapping cannot matter
        const int B = D->B, T = D->T, C = D->C, NH = D->NH, hs = C / NH;
        const bool fused = fused_attention(f->dt, T, C, NH);
        print_message("    rows: local b = global %lld + %lld b; B %d T %d hs %d NH %d, %s path\n", (long long)key.row0,
                      (long long)key.row_stride, B, T, hs, NH, fused ? "fused" : "cuBLAS");
        const int nk = (T + 31) / 32;   // key tiles of the fused path
        const float p = D->attn_p;
        const size_t BTC = (size_t)B * T * C, NATT = (size_t)B * NH * T * T;
        const size_t DATT = attention_att_floats(f->dt, B, T, C, NH);   // the CUDA backend's att
        const double u = f->u, scale = 1.0 / sqrt((double)hs);
        float *qkv = rnd(3 * BTC, -1, 1), *out = malloc(BTC * 4), *att = malloc(NATT * 4);
        f->cpu->attention_forward(f->cpu, out, att, qkv, B, T, C, NH, p, key);
        float *d_qkv = up(f->cu, qkv, 3 * BTC * 4), *d_out = f->cu->alloc(f->cu, BTC * 4),
              *d_att = f->cu->alloc(f->cu, DATT * 4);
        f->cu->attention_forward(f->cu, d_out, d_att, d_qkv, B, T, C, NH, p, key);
        float *g_out = down(f->cu, d_out, BTC), *g_att = down(f->cu, d_att, NATT);

        double *m_att = dzeros(NATT), *m_out = dzeros(BTC);
        double *Erow = dzeros((size_t)B * NH * T), *Crow = dzeros((size_t)B * NH * T);   // E_t, cout_t
        float *lse_ref = malloc((size_t)B * NH * T * sizeof(float));
        double *m_lse = dzeros((size_t)B * NH * T);
        double worst_E = 0;
        #define Q(b, t, h, i) qkv[((size_t)(b) * T + (t)) * 3 * C + (size_t)(h) * hs + (i)]
        #define K(b, t, h, i) qkv[((size_t)(b) * T + (t)) * 3 * C + C + (size_t)(h) * hs + (i)]
        #define VV(b, t, h, i) qkv[((size_t)(b) * T + (t)) * 3 * C + 2 * C + (size_t)(h) * hs + (i)]
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int t = 0; t < T; t++) {
                    const size_t row = (((size_t)b * NH + h) * T + t) * T;
                    double Dt = 0;
                    for (int t2 = 0; t2 <= t; t2++) {
                        double s = 0;
                        for (int i = 0; i < hs; i++) s += fabs(Q(b, t, h, i)) * fabs(K(b, t2, h, i));
                        Dt = fmax(Dt, scale * s * (2 * u + u * u + 2.2 * gam(hs)));
                    }
                    const double E = expm1(2 * Dt) + 2 * (T + 4) * U32 + (fused ? 6 * (nk + 1) * U32 : 0);
                    const double cout = E * (1 + u) * (1 + u) + 2 * u + u * u + 2.2 * gam(T);
                    const size_t rix = ((size_t)b * NH + h) * T + t;
                    Erow[rix] = E;
                    Crow[rix] = cout;
                    worst_E = fmax(worst_E, E);
                    if (fused) {   // the exact log-sum-exp of the scaled scores
                        double mx = -INFINITY, l = 0;
                        for (int t2 = 0; t2 <= t; t2++) {
                            double s = 0;
                            for (int i = 0; i < hs; i++) s += (double)Q(b, t, h, i) * K(b, t2, h, i);
                            mx = fmax(mx, s * scale);
                        }
                        for (int t2 = 0; t2 <= t; t2++) {
                            double s = 0;
                            for (int i = 0; i < hs; i++) s += (double)Q(b, t, h, i) * K(b, t2, h, i);
                            l += exp(s * scale - mx);
                        }
                        lse_ref[rix] = (float)(mx + log(l));
                        m_lse[rix] = Dt + (T + 6 * nk + 2) * U32 + U32 * fabs(mx + log(l));
                    }
                    for (int t2 = 0; t2 < T; t2++) m_att[row + t2] = att[row + t2];
                    for (int i = 0; i < hs; i++) {
                        double a = 0;
                        for (int t2 = 0; t2 <= t; t2++) a += att[row + t2] * drop_mult(p, key, b, (size_t)NH * T * T, row + t2) * fabs(VV(b, t2, h, i));
                        m_out[((size_t)b * T + t) * C + (size_t)h * hs + i] = a * cout;
                    }
                    for (int t2 = 0; t2 < T; t2++) m_att[row + t2] *= E;
                }
        if (fused) {   // att: the log-sum-exp rows (then the per-head output, internal to the backward)
            check("attention_forward (fused) log-sum-exp", g_att, lse_ref, m_lse, (size_t)B * NH * T, 1.0, 0, 1e-30);
        } else {
            check("attention_forward att", g_att, att, m_att, NATT, 1.0, 0, 1e-30);
            for (size_t i = 0; i < NATT; i++) {   // causal: exactly 0 above the diagonal
                const size_t t = (i / T) % T, t2 = i % T;
                if (t2 > t) assert_true(g_att[i] == 0.0f);
            }
        }
        check(fused ? "attention_forward (fused) out" : "attention_forward out", g_out, out, m_out, BTC, 1.0, 0, T * f->abs_lp);

        // backward: the cuBLAS path from the CPU's att (both get the very same saved
        // activation), the fused path from its own forward's att (what it saves is its own);
        // dqkv is overwritten (NaN before)
        float *dout = rnd(BTC, -1, 1), *dqkv = nans(3 * BTC), *r_dqkv = copyf(dqkv, 3 * BTC);
        float *scratch = malloc(NATT * 4);
        f->cpu->attention_backward(f->cpu, r_dqkv, scratch, dout, qkv, att, B, T, C, NH, p, key);
        float *d_dout = up(f->cu, dout, BTC * 4), *d_dqkv = up(f->cu, dqkv, 3 * BTC * 4),
              *d_att2 = up(f->cu, att, NATT * 4), *d_scr = f->cu->alloc(f->cu, NATT * 4);
        f->cu->attention_backward(f->cu, d_dqkv, d_scr, d_dout, d_qkv, fused ? d_att : d_att2, B, T, C, NH, p, key);
        float *g_dqkv = down(f->cu, d_dqkv, 3 * BTC);
        double *m_d = dzeros(3 * BTC), *P = dzeros((size_t)T * T);
        const double e1 = 2 * u + u * u + 2.2 * gam(hs) + 2.2 * gam(T);
        const double e2 = e1 + 3 * u + u * u + 4 * U32 + 2.2 * gam(T);
        const double ev = 2 * u + u * u + 2.2 * gam(T);
        #define DY(b, t, h, i) dout[((size_t)(b) * T + (t)) * C + (size_t)(h) * hs + (i)]
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++) {
                const size_t base = ((size_t)b * NH + h) * T * T;
                for (int t = 0; t < T; t++) {
                    double sumP = 0;
                    for (int t2 = 0; t2 <= t; t2++) {
                        double Dv = 0;
                        for (int i = 0; i < hs; i++) Dv += fabs(DY(b, t, h, i)) * fabs(VV(b, t2, h, i));
                        P[(size_t)t * T + t2] = drop_mult(p, key, b, (size_t)NH * T * T, base + (size_t)t * T + t2) * Dv;
                        sumP += att[base + (size_t)t * T + t2] * P[(size_t)t * T + t2];
                    }
                    // fused: the row's factor over e2 (see the header), folded into P
                    const size_t rix = ((size_t)b * NH + h) * T + t;
                    const double F = fused ? 1 + (Crow[rix] + Erow[rix] * (1 + e2 + Crow[rix])) / e2 : 1;
                    for (int t2 = 0; t2 <= t; t2++)
                        P[(size_t)t * T + t2] = att[base + (size_t)t * T + t2] * scale * (P[(size_t)t * T + t2] + sumP) * F;
                }
                for (int t = 0; t < T; t++)
                    for (int i = 0; i < hs; i++) {
                        double mq = 0, mk = 0, mv = 0;
                        for (int t2 = 0; t2 <= t; t2++) mq += P[(size_t)t * T + t2] * fabs(K(b, t2, h, i));
                        for (int t1 = t; t1 < T; t1++) {   // t is the key position here
                            mk += P[(size_t)t1 * T + t] * fabs(Q(b, t1, h, i));
                            const double Fv = fused ? 1 + Erow[((size_t)b * NH + h) * T + t1] * (1 + ev) / ev : 1;
                            mv += att[base + (size_t)t1 * T + t] * drop_mult(p, key, b, (size_t)NH * T * T, base + (size_t)t1 * T + t) * fabs(DY(b, t1, h, i)) * Fv;
                        }
                        const size_t o = ((size_t)b * T + t) * 3 * C + (size_t)h * hs + i;
                        m_d[o] = e2 * mq;
                        m_d[o + C] = e2 * mk;
                        m_d[o + 2 * C] = ev * mv;
                    }
            }
        check(fused ? "attention_backward (fused) dqkv" : "attention_backward dqkv", g_dqkv, r_dqkv, m_d, 3 * BTC, 1.0,
              2 * U32, T * f->abs_lp);
        if (f->cu->attention_backward_lp)
            check_dqkv_lp(f, g_dqkv, d_scr, d_dout, d_qkv, fused ? d_att : d_att2, B, T, C, NH, p, key);
        print_message("    (attention: dropout p %.2f, worst softmax factor E %.3g)\n", p, worst_E);
        #undef Q
        #undef K
        #undef VV
        #undef DY
        f->cu->free(f->cu, d_qkv); f->cu->free(f->cu, d_out); f->cu->free(f->cu, d_att);
        f->cu->free(f->cu, d_dout); f->cu->free(f->cu, d_dqkv); f->cu->free(f->cu, d_att2); f->cu->free(f->cu, d_scr);
        free(qkv); free(out); free(att); free(g_out); free(g_att); free(m_att); free(m_out);
        free(dout); free(dqkv); free(r_dqkv); free(scratch); free(g_dqkv); free(m_d); free(P);
        free(Erow); free(Crow); free(lse_ref); free(m_lse);
    }
}

// x (n floats) rounded to the matmul dtype dt as 16-bit bits (a copy the device holds), and the
// rounded values as floats into xr (NULL: not wanted).
static uint16_t *lp_bits(ComputeDtype dt, const float *x, float *xr, size_t n) {
    uint16_t *h = malloc((n ? n : 1) * 2);
    assert_non_null(h);
    for (size_t i = 0; i < n; i++) {
        h[i] = dt == DTYPE_BF16 ? bf16_from_float(x[i]) : fp16_bits(x[i]);
        if (xr) xr[i] = dt == DTYPE_BF16 ? bf16_round(x[i]) : fp16_round(x[i]);
    }
    return h;
}

// c_attn's output written only as its copy (matmul_forward_lp's out_lp, bf16 and fp16): bitwise
// matmul_forward's fp32 output on the same rounded input rounded to nearest even, the copy
// holding NaN before (overwritten); matmul_forward_lp without out_lp gives that fp32 output
// itself. Shapes: C 48 -> 144 with bias (cuBLASLt's BIAS epilogue writing a 16-bit D), C 37 ->
// 111 with bias (odd leading dimensions), and without bias (the fallback: the fp32 GEMM into
// scratch, then bias_round_kernel). The CPU backend's matmul_forward_lp with out_lp likewise
// against its own matmul_forward.
static void test_matmul_out_lp(void **state) {
    Fx *f = *state;
    if (f->dt == DTYPE_FP32) { skip(); return; }
    Backend *cu = f->cu;
    static const MMShape SH[] = { {21, 48, 144, true}, {19, 37, 111, true}, {21, 48, 144, false} };
    for (int k = 0; k < 3; k++) {
        const int N = SH[k].N, C = SH[k].C, OC = SH[k].OC;
        const size_t NC = (size_t)N * C, NO = (size_t)N * OC;
        float *x = rnd(NC, -1, 1), *xr = malloc(NC * 4), *w = rnd((size_t)OC * C, -0.5f, 0.5f), *b = rnd(OC, -1, 1);
        uint16_t *xh = lp_bits(f->dt, x, xr, NC), *nan16 = malloc(NO * 2);
        memset(nan16, 0xff, NO * 2);
        float *d_x = up(cu, xr, NC * 4), *d_w = up(cu, w, (size_t)OC * C * 4), *d_b = up(cu, b, OC * 4);
        void *d_xlp = up(cu, xh, NC * 2), *d_olp = up(cu, nan16, NO * 2);
        float *d_o = cu->alloc(cu, NO * 4), *d_o2 = cu->alloc(cu, NO * 4);
        const float *bias = SH[k].bias ? d_b : NULL;
        cu->matmul_forward(cu, d_o, d_x, d_w, bias, N, C, OC);
        cu->matmul_forward_lp(cu, NULL, d_olp, d_xlp, d_w, bias, N, C, OC);
        cu->matmul_forward_lp(cu, d_o2, NULL, d_xlp, d_w, bias, N, C, OC);
        float *o = down(cu, d_o, NO);
        void *olp = down_bytes(cu, d_olp, NO * 2);
        check_rounded_copy(SH[k].bias ? "matmul_forward_lp out_lp (bias)" : "matmul_forward_lp out_lp (no bias)",
                           f->dt, olp, 2, o, NO);
        check_same("matmul_forward_lp out (fp32)", cu, d_o, d_o2, NO);
        free(o); free(olp);
        // the CPU backend's out_lp (its fp32 output into scratch, then rounded): its copies hold
        // bf16 bits (lp_size 2) or the rounded values as floats (4)
        Backend *cl = f->cpu_lp;
        if (cl->matmul_forward_lp && cl->lp_size) {
            const size_t ls = cl->lp_size;
            float *c_x = up(cl, xr, NC * 4), *c_w = up(cl, w, (size_t)OC * C * 4), *c_b = up(cl, b, OC * 4);
            void *c_xlp = up(cl, ls == 2 ? (const void *)xh : (const void *)xr, NC * ls);
            void *c_olp = cl->alloc(cl, NO * ls);
            float *c_o = cl->alloc(cl, NO * 4);
            const float *cb = SH[k].bias ? c_b : NULL;
            cl->matmul_forward(cl, c_o, c_x, c_w, cb, N, C, OC);
            cl->matmul_forward_lp(cl, NULL, c_olp, c_xlp, c_w, cb, N, C, OC);
            float *co = down(cl, c_o, NO);
            void *colp = down_bytes(cl, c_olp, NO * ls);
            check_rounded_copy("cpu matmul_forward_lp out_lp", f->dt, colp, ls, co, NO);
            free(co); free(colp);
            cl->free(cl, c_x); cl->free(cl, c_w); cl->free(cl, c_b); cl->free(cl, c_xlp); cl->free(cl, c_olp);
            cl->free(cl, c_o);
        }
        cu->free(cu, d_x); cu->free(cu, d_w); cu->free(cu, d_b); cu->free(cu, d_xlp); cu->free(cu, d_olp);
        cu->free(cu, d_o); cu->free(cu, d_o2);
        free(x); free(xr); free(w); free(b); free(xh); free(nan16);
    }
}

// The fused attention from qkv's copy (attention_forward_lp / attention_backward_lp with qkv_lp,
// qkv NULL: any read of it would fault), bf16 and fp16: out, its copy, att, dqkv and its copy
// bitwise those from the fp32 qkv the copy was rounded from (the kernels round q, k, v as they
// load them and scale the fp32 scores, so the values multiplied are the same), every output NaN
// before. Shapes: FDIMS where attention_takes_lp says so (hs 32, 64, 80, 128; T 1, 5 < 16, 32,
// 37, 100, 130), which is exactly where the fused path runs (fused_attention); hs 24 and fp32 are
// not taken.
static void test_attention_qkv_lp(void **state) {
    Fx *f = *state;
    Backend *cu = f->cu;
    if (f->dt == DTYPE_FP32) {
        assert_null(cu->attention_takes_lp);
        skip();
        return;
    }
    assert_non_null(cu->attention_takes_lp);
    int ran = 0;
    for (int k = 0; k < NFDIMS; k++) {
        const Dims d = FDIMS[k];
        const int B = d.B, T = d.T, C = d.C, NH = d.NH;
        const bool takes = cu->attention_takes_lp(cu, T, C, NH) != 0;
        assert_int_equal(takes, fused_attention(f->dt, T, C, NH));
        if (!takes) continue;
        const DropoutKey key = { dropout_key(77, 3), 1, 2, NULL };
        const size_t BTC = (size_t)B * T * C, n3 = 3 * BTC, NATT = attention_att_floats(f->dt, B, T, C, NH);
        float *qkv = rnd(n3, -2, 2), *dout = rnd(BTC, -1, 1), *nanf = nans(n3 > NATT ? n3 : NATT);
        uint16_t *qh = lp_bits(f->dt, qkv, NULL, n3), *nan16 = malloc(n3 * 2);
        memset(nan16, 0xff, n3 * 2);
        float *d_qkv = up(cu, qkv, n3 * 4), *d_dout = up(cu, dout, BTC * 4);
        void *d_qlp = up(cu, qh, n3 * 2);
        float *d_out[2], *d_att[2], *d_dq[2], *d_scr[2];
        void *d_olp[2], *d_dqlp[2];
        for (int v = 0; v < 2; v++) {   // v 0: from the fp32 qkv; 1: from its copy alone
            d_out[v] = up(cu, nanf, BTC * 4); d_att[v] = up(cu, nanf, NATT * 4); d_dq[v] = up(cu, nanf, n3 * 4);
            d_scr[v] = up(cu, nanf, NATT * 4);
            d_olp[v] = up(cu, nan16, BTC * 2); d_dqlp[v] = up(cu, nan16, n3 * 2);
            const float *q32 = v ? NULL : d_qkv;
            const void *qlp = v ? d_qlp : NULL;
            cu->attention_forward_lp(cu, d_out[v], d_olp[v], d_att[v], q32, qlp, B, T, C, NH, d.attn_p, key);
            cu->attention_backward_lp(cu, d_dq[v], d_dqlp[v], d_scr[v], d_dout, q32, qlp, d_att[v], B, T, C, NH,
                                      d.attn_p, key);
        }
        char what[96];
        snprintf(what, sizeof what, "qkv_lp out (B%d T%d hs%d)", B, T, C / NH);
        check_same(what, cu, d_out[0], d_out[1], BTC);
        check_same("qkv_lp att (saved for the backward)", cu, d_att[0], d_att[1], NATT);
        check_same("qkv_lp dqkv", cu, d_dq[0], d_dq[1], n3);
        uint16_t *a0 = down_bytes(cu, d_olp[0], BTC * 2), *a1 = down_bytes(cu, d_olp[1], BTC * 2);
        uint16_t *g0 = down_bytes(cu, d_dqlp[0], n3 * 2), *g1 = down_bytes(cu, d_dqlp[1], n3 * 2);
        if (memcmp(a0, a1, BTC * 2)) fail_msg("attention_forward_lp: out_lp from qkv_lp differs");
        if (memcmp(g0, g1, n3 * 2)) fail_msg("attention_backward_lp: dqkv_lp from qkv_lp differs");
        free(a0); free(a1); free(g0); free(g1);
        for (int v = 0; v < 2; v++) {
            cu->free(cu, d_out[v]); cu->free(cu, d_att[v]); cu->free(cu, d_dq[v]); cu->free(cu, d_scr[v]);
            cu->free(cu, d_olp[v]); cu->free(cu, d_dqlp[v]);
        }
        cu->free(cu, d_qkv); cu->free(cu, d_dout); cu->free(cu, d_qlp);
        free(qkv); free(dout); free(nanf); free(qh); free(nan16);
        ran++;
    }
    assert_true(ran >= 8);
}

// Run attention forward and backward on `be` (B,T,C,NH, dropout p, key): out (B,T,C), att
// (attention_att_floats) and dqkv (B,T,3C) come back in host arrays the caller frees.
static void attention_run(Backend *be, const float *qkv, const float *dout, int B, int T, int C, int NH, float p,
                          DropoutKey key, float **out, float **att, float **dqkv) {
    const size_t BTC = (size_t)B * T * C, NATT = attention_att_floats(be->matmul_dtype, B, T, C, NH);
    float *d_qkv = up(be, qkv, 3 * BTC * 4), *d_dout = up(be, dout, BTC * 4), *d_out = be->alloc(be, BTC * 4),
          *d_att = be->alloc(be, NATT * 4), *d_dqkv = be->alloc(be, 3 * BTC * 4), *d_scr = be->alloc(be, NATT * 4);
    be->attention_forward(be, d_out, d_att, d_qkv, B, T, C, NH, p, key);
    be->attention_backward(be, d_dqkv, d_scr, d_dout, d_qkv, d_att, B, T, C, NH, p, key);
    *out = down(be, d_out, BTC);
    *att = down(be, d_att, NATT);
    *dqkv = down(be, d_dqkv, 3 * BTC);
    be->free(be, d_qkv); be->free(be, d_dout); be->free(be, d_out); be->free(be, d_att); be->free(be, d_dqkv);
    be->free(be, d_scr);
}

// Causality, bitwise: rows t <= t0 of out and of dq cannot change when everything after t0
// changes (q, k, v and the output gradient of those positions); t0 = 40 sits inside a tile of
// either path. Fused path only: the key tiles wholly after a tile of 64 queries are never
// multiplied in (nor, in its dq, their queries and output gradients): with NaN in every position
// from 64 on, rows 0..63 of out and dq are still bitwise those of the clean input (were such a
// tile multiplied in, masked or not, 0 * NaN would show).
static void test_attention_causal(void **state) {
    Fx *f = *state;
    const int B = 2, T = 100, C = 128, NH = 2, t0 = 40, tile = 64;
    const float p = 0.1f;
    const DropoutKey key = { dropout_key(42, 9), 0, 1, NULL };
    const size_t BTC = (size_t)B * T * C;
    float *qkv = rnd(3 * BTC, -1, 1), *dout = rnd(BTC, -1, 1);
    float *out0, *att0, *dq0;
    attention_run(f->cu, qkv, dout, B, T, C, NH, p, key, &out0, &att0, &dq0);
    for (int pass = 0; pass < 2; pass++) {
        const bool nan_pass = pass == 1;
        if (nan_pass && !fused_attention(f->dt, T, C, NH)) continue;
        const int from = nan_pass ? tile : t0 + 1;   // first position changed
        float *q2 = copyf(qkv, 3 * BTC), *do2 = copyf(dout, BTC);
        for (int b = 0; b < B; b++)
            for (int t = from; t < T; t++) {
                for (int i = 0; i < 3 * C; i++) {
                    float *x = &q2[((size_t)b * T + t) * 3 * C + i];
                    *x = nan_pass ? NAN : *x * -3.0f + 0.5f;
                }
                for (int i = 0; i < C; i++) {
                    float *x = &do2[((size_t)b * T + t) * C + i];
                    *x = nan_pass ? NAN : *x * 2.0f - 1.0f;
                }
            }
        float *out1, *att1, *dq1;
        attention_run(f->cu, q2, do2, B, T, C, NH, p, key, &out1, &att1, &dq1);
        for (int b = 0; b < B; b++)
            for (int t = 0; t < from; t++) {
                const size_t o = ((size_t)b * T + t) * C, g = ((size_t)b * T + t) * 3 * C;
                for (int i = 0; i < C; i++) assert_true(isfinite(out1[o + i]) && isfinite(dq1[g + i]));
                if (memcmp(out0 + o, out1 + o, C * sizeof(float)) || memcmp(dq0 + g, dq1 + g, C * sizeof(float)))
                    fail_msg("attention (%s): row %d of batch %d changed when positions >= %d changed to %s",
                             fused_attention(f->dt, T, C, NH) ? "fused" : "cuBLAS", t, b, from, nan_pass ? "NaN" : "other values");
            }
        print_message("    attention: out and dq of rows < %d bitwise unchanged by %s from %d on\n", from,
                      nan_pass ? "NaN" : "other values", from);
        free(q2); free(do2); free(out1); free(att1); free(dq1);
    }
    free(qkv); free(dout); free(out0); free(att0); free(dq0);
}

// The grid-stride kernels' results do not depend on the grid: B*NH = 35 heads (one tile of
// queries each) over the 16 blocks of a backend on a one-multiprocessor device (EMU_SM_COUNT,
// the emulator's; on a GPU both backends are alike) give bitwise the outputs of the default grid,
// at T 37 and at T 7 < hs (the fused path's lse and per-head output then exceed T*T floats).
static void test_attention_grid(void **state) {
    Fx *f = *state;
    const int B = 5, C = 112, NH = 7;
    const float p = 0.1f;
    const DropoutKey key = { dropout_key(42, 11), 2, 3, NULL };
    char err[512] = "";
    setenv("EMU_SM_COUNT", "1", 1);
    Backend *small = backend_cuda_create(f->dt, 0, err, sizeof err);
    unsetenv("EMU_SM_COUNT");
    assert_non_null(small);
    static const int Ts[] = { 37, 7 };
    for (int k = 0; k < 2; k++) {
        const int T = Ts[k];
        const size_t BTC = (size_t)B * T * C, NATT = attention_att_floats(f->dt, B, T, C, NH);
        float *qkv = rnd(3 * BTC, -1, 1), *dout = rnd(BTC, -1, 1);
        float *o0, *a0, *g0, *o1, *a1, *g1;
        attention_run(f->cu, qkv, dout, B, T, C, NH, p, key, &o0, &a0, &g0);
        attention_run(small, qkv, dout, B, T, C, NH, p, key, &o1, &a1, &g1);
        check_equal("attention out, 16 blocks vs default grid", o1, o0, BTC);
        check_equal("attention att, 16 blocks vs default grid", a1, a0, NATT);
        check_equal("attention dqkv, 16 blocks vs default grid", g1, g0, 3 * BTC);
        free(qkv); free(dout); free(o0); free(a0); free(g0); free(o1); free(a1); free(g1);
    }
    small->destroy(small);
}

// MINGPT_CUDA_ATTENTION (kernels/backend.h): a backend created with it unset (the default) or
// "cublas" takes attention.cu's cuBLAS path at a shape the fused kernels take with "fused" (this
// suite's fixture; hs 32, T 40, dropout 0.1): attention_takes_lp is false and no flash kernel runs
// (counted in the emulator), and the output and gradients are the fused backend's: bitwise in
// fp32 (cuBLAS either way), within 2 roundings of the type of the largest value in bf16/fp16 (the
// two paths round P at different points and sum in another order: seen 0.44 of that; a dropout
// mask or a head out of place is far outside it).
static long flash_launches(void) {   // forward and dq kernels: one each per fused attention op
    return emu_launch_count("flash_fwd_kernel") + emu_launch_count("flash_bwd_dq_kernel");
}
static void test_attention_cublas_switch(void **state) {
    Fx *f = *state;
    const int B = 2, T = 40, C = 64, NH = 2;
    const size_t BTC = (size_t)B * T * C;
    const DropoutKey key = { dropout_key(42, 13), 0, 1, NULL };
    float *qkv = rnd(3 * BTC, -1, 1), *dout = rnd(BTC, -1, 1);
    float *o0, *a0, *g0;
    long fl0 = emu_launch_count ? flash_launches() : 0;
    attention_run(f->cu, qkv, dout, B, T, C, NH, 0.1f, key, &o0, &a0, &g0);
    if (emu_launch_count && f->dt != DTYPE_FP32) assert_int_equal(flash_launches() - fl0, 2);
    if (f->dt != DTYPE_FP32)   // (fp32 backends have no attention_takes_lp: nothing is low precision)
        assert_true(f->cu->attention_takes_lp(f->cu, T, C, NH));
    const char *const env = getenv("MINGPT_CUDA_ATTENTION");
    char *const fixture_env = env ? strdup(env) : NULL;
    static const char *const SETTINGS[] = { NULL, "cublas" };   // unset: the default
    for (int i = 0; i < 2; i++) {
        char err[512] = "";
        if (SETTINGS[i]) setenv("MINGPT_CUDA_ATTENTION", SETTINGS[i], 1);
        else unsetenv("MINGPT_CUDA_ATTENTION");
        Backend *cb = backend_cuda_create(f->dt, 0, err, sizeof err);
        if (fixture_env) setenv("MINGPT_CUDA_ATTENTION", fixture_env, 1);
        else unsetenv("MINGPT_CUDA_ATTENTION");
        const char *what = SETTINGS[i] ? SETTINGS[i] : "unset";
        if (!cb) fail_msg("backend_cuda_create with MINGPT_CUDA_ATTENTION %s: %s", what, err);
        if (f->dt != DTYPE_FP32) assert_false(cb->attention_takes_lp(cb, T, C, NH));
        float *o1, *a1, *g1;
        fl0 = emu_launch_count ? flash_launches() : 0;
        attention_run(cb, qkv, dout, B, T, C, NH, 0.1f, key, &o1, &a1, &g1);
        if (emu_launch_count) assert_int_equal(flash_launches() - fl0, 0);
        char lo[96], lg[96];
        snprintf(lo, sizeof lo, "attention out, MINGPT_CUDA_ATTENTION %s vs fused", what);
        snprintf(lg, sizeof lg, "attention dqkv, MINGPT_CUDA_ATTENTION %s vs fused", what);
        if (f->dt == DTYPE_FP32) {
            check_equal(lo, o1, o0, BTC);
            check_equal(lg, g1, g0, 3 * BTC);
        } else {
            check(lo, o1, o0, NULL, BTC, 2 * f->u, 0, 0);
            check(lg, g1, g0, NULL, 3 * BTC, 2 * f->u, 0, 0);
        }
        free(o1); free(a1); free(g1);
        cb->destroy(cb);
    }
    free(fixture_env);
    free(qkv); free(dout); free(o0); free(a0); free(g0);
}

// Incremental inference's attention over a key/value cache: fp32 in every dtype group (nothing is
// rounded: u = 0 in the attention bounds above, L keys), chunks of new positions fed one after
// another into caches of T rows on both backends; the cached keys and values are copies, bitwise
// equal. Chunks: one position, two whose last only attends (the model's last block), the rest.
static void test_attention_cached(void **state) {
    Fx *f = *state;
    for (int k = 0; k < NDIMS; k++) {
        const Dims *D = &DIMS[k];
        const int B = D->B, T = D->T, C = D->C, NH = D->NH, hs = C / NH;
        const long C3 = 3L * C;
        const size_t BTC = (size_t)B * T * C, NATT = (size_t)B * NH * T * T;
        const double scale = 1.0 / sqrt((double)hs);
        float *qkv = rnd(3 * BTC, -1, 1), *chunk = malloc(3 * BTC * 4);
        float *kc = calloc(BTC, 4), *vc = calloc(BTC, 4), *out = malloc(BTC * 4), *att = malloc(NATT * 4);
        float *d_kc = f->cu->alloc(f->cu, BTC * 4), *d_vc = f->cu->alloc(f->cu, BTC * 4);
        float *d_out = f->cu->alloc(f->cu, BTC * 4), *d_att = f->cu->alloc(f->cu, NATT * 4);
        float *d_chunk = f->cu->alloc(f->cu, 3 * BTC * 4);
        const int chunks[] = { 1, 2, T - 3 }, tq[] = { 1, 1, T - 3 };
        int p0 = 0;
        for (int c = 0; c < 3; c++) {
            const int Tn = chunks[c], Tq = tq[c], L = p0 + Tn, q0 = p0 + Tn - Tq;
            for (int b = 0; b < B; b++)
                memcpy(chunk + (long)b * Tn * C3, qkv + ((long)b * T + p0) * C3, sizeof(float) * (size_t)(Tn * C3));
            f->cpu->attention_forward_cached(f->cpu, out, att, kc, vc, chunk, B, p0, Tn, Tq, T, C, NH);
            f->cu->upload(f->cu, d_chunk, chunk, (size_t)B * Tn * C3 * 4);
            f->cu->attention_forward_cached(f->cu, d_out, d_att, d_kc, d_vc, d_chunk, B, p0, Tn, Tq, T, C, NH);
            const size_t n_out = (size_t)B * Tq * C, n_att = (size_t)B * NH * Tq * L;
            float *g_out = down(f->cu, d_out, n_out), *g_att = down(f->cu, d_att, n_att);
            float *g_kc = down(f->cu, d_kc, BTC), *g_vc = down(f->cu, d_vc, BTC);
            double *m_out = dzeros(n_out), *m_att = dzeros(n_att);
            #define Q(b, t, h, i) qkv[((size_t)(b) * T + (t)) * C3 + (size_t)(h) * hs + (i)]
            #define KK(b, t, h, i) qkv[((size_t)(b) * T + (t)) * C3 + C + (size_t)(h) * hs + (i)]
            #define VV(b, t, h, i) qkv[((size_t)(b) * T + (t)) * C3 + 2 * C + (size_t)(h) * hs + (i)]
            for (int b = 0; b < B; b++)
                for (int h = 0; h < NH; h++)
                    for (int t = 0; t < Tq; t++) {
                        const int pos = q0 + t;
                        const size_t row = (((size_t)b * NH + h) * Tq + t) * L;
                        double Dt = 0;
                        for (int j = 0; j <= pos; j++) {
                            double sq = 0;
                            for (int i = 0; i < hs; i++) sq += fabs(Q(b, pos, h, i)) * fabs(KK(b, j, h, i));
                            Dt = fmax(Dt, scale * sq * 2.2 * gam(hs));
                        }
                        const double E = expm1(2 * Dt) + 2 * (L + 4) * U32;
                        for (int j = 0; j < L; j++) m_att[row + j] = E * att[row + j];
                        for (int i = 0; i < hs; i++) {
                            double a = 0;
                            for (int j = 0; j <= pos; j++) a += att[row + j] * fabs(VV(b, j, h, i));
                            m_out[((size_t)b * Tq + t) * C + (size_t)h * hs + i] = a * (E + 2.2 * gam(L));
                        }
                    }
            #undef Q
            #undef KK
            #undef VV
            char what[64];
            snprintf(what, sizeof what, "attention_forward_cached att (p0 %d, Tq %d)", p0, Tq);
            check(what, g_att, att, m_att, n_att, 1.0, 0, 1e-30);
            snprintf(what, sizeof what, "attention_forward_cached out (p0 %d, Tq %d)", p0, Tq);
            check(what, g_out, out, m_out, n_out, 1.0, 0, 0);
            check_equal("attention_forward_cached key cache", g_kc, kc, BTC);
            check_equal("attention_forward_cached value cache", g_vc, vc, BTC);
            free(g_out); free(g_att); free(g_kc); free(g_vc); free(m_out); free(m_att);
            p0 += Tn;
        }
        f->cu->free(f->cu, d_kc); f->cu->free(f->cu, d_vc); f->cu->free(f->cu, d_out); f->cu->free(f->cu, d_att);
        f->cu->free(f->cu, d_chunk);
        free(qkv); free(chunk); free(kc); free(vc); free(out); free(att);
    }
}

// ================================================================ element-wise ops
static void test_gelu_backward(void **state) {
    Fx *f = *state;
    const long N = 21 * 192 + 5;
    float *x = rnd(N, -6, 6), *dout = rnd(N, -1, 1), *dinp = nans(N), *r = copyf(dinp, N);   // dinp overwritten
    x[0] = -100; x[1] = 100; x[2] = 0;   // saturated tails and the origin
    f->cpu->gelu_backward(f->cpu, r, x, dout, N);
    float *d_x = up(f->cu, x, N * 4), *d_do = up(f->cu, dout, N * 4), *d_di = up(f->cu, dinp, N * 4);
    f->cu->gelu_backward(f->cu, d_di, d_x, d_do, N);
    float *g = down(f->cu, d_di, N);
    // gelu' = s + 2 x e s^2 k (1 + 3 a x^2): magnitude of the terms times |dout|, ~10 roundings,
    // plus exp's conditioning: e = exp(-2u) turns the few roundings of its argument into a
    // relative error |2u| times theirs (4 u32 each, on each backend); this shows in the tails,
    // where gelu' is small (dinp is overwritten: no accumulated O(1) value hides it)
    double *mag = dzeros(N);
    for (long i = 0; i < N; i++) {
        const double xi = x[i], uu = 0.7978845608028654 * (xi + 0.044715 * xi * xi * xi);
        const double e = exp(fmin(-2 * uu, 80.0)), s = 1 / (1 + e);
        const double cond = 1 + 2 * fmin(fabs(2 * uu), 80.0) * 4 / 16;   // in units of the 16 u32 below
        mag[i] = cond * (s + fabs(2 * xi * e * s * s * 0.7978845608028654 * (1 + 3 * 0.044715 * xi * xi))) * fabs(dout[i]);
    }
    check("gelu_backward dinp", g, r, mag, N, 16 * U32, 2 * U32, 0);
    f->cu->free(f->cu, d_x); f->cu->free(f->cu, d_do); f->cu->free(f->cu, d_di);
    free(x); free(dout); free(dinp); free(r); free(g); free(mag);
}

static void test_dropout(void **state) {
    Fx *f = *state;
    const long ROW = 53, N = 21 * ROW;   // odd sizes: a partial block of 256 at the end
    const uint64_t key = dropout_key(1337, 5);
    float *a = rnd(N, -1, 1), *b = rnd(N, -1, 1), *out = malloc(N * 4);
    float *d_a = up(f->cu, a, N * 4), *d_b = up(f->cu, b, N * 4), *d_o = f->cu->alloc(f->cu, N * 4);
    float *g;
    // (row_len, row0, row_stride): one process, in rows of 53 and as a single row (the same
    // masks); rank 1 of 3 data-parallel ranks; micro-step 1 of 2 of rank 1 of 2 (row0 5)
    const struct { long row_len; int64_t row0, stride; } maps[] = { {ROW, 0, 1}, {N, 0, 1}, {ROW, 1, 3}, {ROW, 5, 2} };
    const float ps[] = { 0.0f, 0.1f, 0.5f };
    for (int mi = 0; mi < 4; mi++)
    for (int k = 0; k < 3; k++) {
        const DropoutKey dk = { key, maps[mi].row0, maps[mi].stride, NULL };
        const long row_len = maps[mi].row_len;
        print_message("    dropout p %.1f, rows of %ld, local row j = global %lld + %lld j\n", ps[k], row_len,
                      (long long)dk.row0, (long long)dk.row_stride);
        // forward out of place, then in place
        f->cpu->dropout_forward(f->cpu, out, a, N, row_len, ps[k], dk);
        f->cu->dropout_forward(f->cu, d_o, d_a, N, row_len, ps[k], dk);
        g = down(f->cu, d_o, N);
        check_equal("dropout_forward", g, out, N);
        if (ps[k] > 0) {   // the mask itself, independently of the CPU backend: global indices
            const uint32_t thr = dropout_threshold(ps[k]);
            const float scale = 1.0f / (1.0f - ps[k]);
            long dropped = 0;
            for (long i = 0; i < N; i++) {
                const uint64_t gi = dropout_global_index(dk, i / row_len, row_len, i % row_len);
                const float want = dropout_keep(key, gi, thr) ? a[i] * scale : 0.0f;
                if (memcmp(&g[i], &want, 4) != 0)
                    fail_msg("dropout_forward element %ld (global index %llu): cuda %.9g, mask says %.9g", i,
                             (unsigned long long)gi, g[i], want);
                dropped += want == 0.0f;
            }
            assert_true(dropped > 0 && dropped < N);   // the mask is not trivial
        }
        free(g);
        float *d_in = up(f->cu, a, N * 4);
        f->cu->dropout_forward(f->cu, d_in, d_in, N, row_len, ps[k], dk);
        g = down(f->cu, d_in, N);
        check_equal("dropout_forward in place", g, out, N);
        free(g);
        f->cu->free(f->cu, d_in);
        // backward overwrites dinp (NaN before): one product per element
        float *r = nans(N);
        float *d_acc = up(f->cu, r, N * 4);
        f->cpu->dropout_backward(f->cpu, r, a, N, row_len, ps[k], dk);
        f->cu->dropout_backward(f->cu, d_acc, d_a, N, row_len, ps[k], dk);
        g = down(f->cu, d_acc, N);
        check_equal("dropout_backward", g, r, N);   // one product: the same bits
        free(g); free(r);
        f->cu->free(f->cu, d_acc);
    }
    f->cu->free(f->cu, d_a); f->cu->free(f->cu, d_b); f->cu->free(f->cu, d_o);
    free(a); free(b); free(out);
}

// ================================================================ residual dropout in the LayerNorms
// x rounded to the compute dtype, as the host value
static float lp_round_host(ComputeDtype dt, float x) { return dt == DTYPE_BF16 ? bf16_round(x) : fp16_round(x); }

// residual_dropout_layernorm_forward and layernorm_backward_dropout (optional ops: CUDA has them):
// the fused ops against the separate ones they replace. Forward: res = a + dropout(b) bitwise the
// CPU backend's dropout_forward then residual add (one rounded product, one add), b left as it was;
// out, mean, rstd and the rounded copy bitwise CUDA's own dropout_forward + residual LayerNorm (the
// same kernel arithmetic), and out within test_layernorm's bound of the CPU's. Backward: dinp,
// dweight, dbias and dbranch bitwise CUDA's layernorm_backward + dropout_backward; dbranch against
// the CPU's layernorm_backward + dropout_backward: zero at exactly the same elements (the mask)
// and within test_layernorm's dinp bound times 1/(1-p) elsewhere; the rounded copy bitwise the
// rounding of the fp32 dbranch. Shapes: rows not a multiple of the
// blocks (4 rows forward, 32 backward), C not a multiple of 32; p 0 and 0.1; rows numbered as one
// process and as rank 1 of 3 (row0 1, stride 3).
static void test_residual_dropout_layernorm(void **state) {
    Fx *f = *state;
    if (!f->cu->residual_dropout_layernorm_forward || !f->cu->layernorm_backward_dropout) { skip(); return; }
    static const int SH[][3] = { {3, 37, 77}, {2, 5, 130}, {1, 70, 45} };   // B, T, C
    const float ps[] = { 0.0f, 0.1f };
    const size_t lp = f->cu->lp_size;
    for (size_t k = 0; k < sizeof SH / sizeof SH[0]; k++)
    for (int pi = 0; pi < 2; pi++)
    for (int mi = 0; mi < NROWMAP; mi++) {
        const int B = SH[k][0], T = SH[k][1], C = SH[k][2], N = B * T;
        const size_t NC = (size_t)N * C;
        const long row_len = (long)T * C;
        const float p = ps[pi];
        const DropoutKey dk = { dropout_key(99, 7 + k), ROWMAP[mi][0], ROWMAP[mi][1], NULL };
        print_message("    B %d, T %d, C %d, p %.1f, local row j = global %lld + %lld j\n", B, T, C, p,
                      (long long)dk.row0, (long long)dk.row_stride);
        float *a = rnd(NC, -1, 1.5f), *b = rnd(NC, -1, 1), *w = rnd(C, 0.5f, 1.5f), *bias = rnd(C, -0.5f, 0.5f);
        float *bd = malloc(NC * 4), *res = malloc(NC * 4), *out = malloc(NC * 4), *mean = malloc(N * 4),
              *rstd = malloc(N * 4);
        assert_true(bd && res && out && mean && rstd);
        f->cpu->dropout_forward(f->cpu, bd, b, (long)NC, row_len, p, dk);
        f->cpu->residual_layernorm_forward(f->cpu, res, out, mean, rstd, a, bd, w, bias, N, C);
        float *d_a = up(f->cu, a, NC * 4), *d_b = up(f->cu, b, NC * 4), *d_w = up(f->cu, w, C * 4),
              *d_bias = up(f->cu, bias, C * 4);
        float *d_res = f->cu->alloc(f->cu, NC * 4), *d_out = f->cu->alloc(f->cu, NC * 4),
              *d_mean = f->cu->alloc(f->cu, N * 4), *d_rstd = f->cu->alloc(f->cu, N * 4);
        void *d_lp = lp ? f->cu->alloc(f->cu, NC * lp) : NULL, *d_lp2 = lp ? f->cu->alloc(f->cu, NC * lp) : NULL;
        f->cu->residual_dropout_layernorm_forward(f->cu, d_res, d_out, d_lp, d_mean, d_rstd, d_a, d_b, d_w, d_bias, N,
                                                  C, row_len, p, dk);
        float *g_res = down(f->cu, d_res, NC), *g_out = down(f->cu, d_out, NC), *g_mean = down(f->cu, d_mean, N),
              *g_rstd = down(f->cu, d_rstd, N), *g_b = down(f->cu, d_b, NC);
        check_equal("residual_dropout_layernorm res vs cpu", g_res, res, NC);
        check_equal("residual_dropout_layernorm leaves b", g_b, b, NC);
        double *mag = dzeros(NC);
        ln_fwd_mag(mag, res, w, bias, mean, rstd, N, C);
        check("residual_dropout_layernorm out vs cpu", g_out, out, mag, NC, 2.2 * gam(C + 8), 0, 0);
        // the separate ops on CUDA: dropout_forward into a copy of b, the residual LayerNorm
        float *d_bd = f->cu->alloc(f->cu, NC * 4), *d_res2 = f->cu->alloc(f->cu, NC * 4),
              *d_out2 = f->cu->alloc(f->cu, NC * 4), *d_mean2 = f->cu->alloc(f->cu, N * 4),
              *d_rstd2 = f->cu->alloc(f->cu, N * 4);
        f->cu->dropout_forward(f->cu, d_bd, d_b, (long)NC, row_len, p, dk);
        if (lp) f->cu->layernorm_forward_lp(f->cu, d_res2, d_out2, d_lp2, d_mean2, d_rstd2, d_a, d_bd, d_w, d_bias, N, C);
        else f->cu->residual_layernorm_forward(f->cu, d_res2, d_out2, d_mean2, d_rstd2, d_a, d_bd, d_w, d_bias, N, C);
        float *s_out = down(f->cu, d_out2, NC), *s_mean = down(f->cu, d_mean2, N), *s_rstd = down(f->cu, d_rstd2, N);
        check_equal("residual_dropout_layernorm out vs separate", g_out, s_out, NC);
        check_equal("residual_dropout_layernorm mean vs separate", g_mean, s_mean, N);
        check_equal("residual_dropout_layernorm rstd vs separate", g_rstd, s_rstd, N);
        void *h_lp = NULL, *h_lp2 = NULL;
        if (lp) {   // the copy, and the copy alone (out NULL)
            h_lp = malloc(NC * lp); h_lp2 = malloc(NC * lp);
            assert_true(h_lp && h_lp2);
            f->cu->download(f->cu, h_lp2, d_lp2, NC * lp);
            f->cu->download(f->cu, h_lp, d_lp, NC * lp);
            assert_memory_equal(h_lp, h_lp2, NC * lp);
            f->cu->zero(f->cu, d_lp, NC * lp);
            f->cu->residual_dropout_layernorm_forward(f->cu, d_res, NULL, d_lp, d_mean, d_rstd, d_a, d_b, d_w, d_bias,
                                                      N, C, row_len, p, dk);
            f->cu->download(f->cu, h_lp, d_lp, NC * lp);
            assert_memory_equal(h_lp, h_lp2, NC * lp);
            print_message("    %-44s bitwise equal\n", "residual_dropout_layernorm out_lp vs separate");
        }

        // backward, accumulating into non-zero gradients; dbranch overwritten (NaN before)
        float *dout = rnd(NC, -1, 1), *dinp = rnd(NC, -1, 1), *dw = rnd(C, -1, 1), *db = rnd(C, -1, 1);
        float *r_dinp = copyf(dinp, NC), *r_dw = copyf(dw, C), *r_db = copyf(db, C), *r_dbr = nans(NC);
        f->cpu->layernorm_backward(f->cpu, r_dinp, r_dw, r_db, dout, res, w, mean, rstd, N, C);
        f->cpu->dropout_backward(f->cpu, r_dbr, r_dinp, (long)NC, row_len, p, dk);
        float *nan_init = nans(NC);
        float *d_dout = up(f->cu, dout, NC * 4), *d_dinp = up(f->cu, dinp, NC * 4), *d_dw = up(f->cu, dw, C * 4),
              *d_db = up(f->cu, db, C * 4), *d_dbr = up(f->cu, nan_init, NC * 4);
        float *d_dinp2 = up(f->cu, dinp, NC * 4), *d_dw2 = up(f->cu, dw, C * 4), *d_db2 = up(f->cu, db, C * 4),
              *d_dbr2 = f->cu->alloc(f->cu, NC * 4);
        f->cu->layernorm_backward_dropout(f->cu, d_dinp, d_dbr, d_lp, d_dw, d_db, d_dout, d_res, d_w, d_mean, d_rstd,
                                          N, C, row_len, p, dk);
        f->cu->layernorm_backward(f->cu, d_dinp2, d_dw2, d_db2, d_dout, d_res, d_w, d_mean, d_rstd, N, C);
        f->cu->dropout_backward(f->cu, d_dbr2, d_dinp2, (long)NC, row_len, p, dk);
        float *g_dinp = down(f->cu, d_dinp, NC), *g_dw = down(f->cu, d_dw, C), *g_db = down(f->cu, d_db, C),
              *g_dbr = down(f->cu, d_dbr, NC);
        float *s_dinp = down(f->cu, d_dinp2, NC), *s_dw = down(f->cu, d_dw2, C), *s_db = down(f->cu, d_db2, C),
              *s_dbr = down(f->cu, d_dbr2, NC);
        check_equal("layernorm_backward_dropout dinp vs separate", g_dinp, s_dinp, NC);
        check_equal("layernorm_backward_dropout dweight vs separate", g_dw, s_dw, C);
        check_equal("layernorm_backward_dropout dbias vs separate", g_db, s_db, C);
        check_equal("layernorm_backward_dropout dbranch vs separate", g_dbr, s_dbr, NC);
        // against the CPU: the mask bitwise (zero exactly where the CPU's is), the values within
        // test_layernorm's dinp bound (the LayerNorm backward's own rounding) scaled by 1/(1-p)
        // (the product's rounding: one more unit roundoff, the 2 U32 below already allow it)
        for (int n = 0; n < N; n++) {
            double s1 = 0, s2 = 0;
            for (int c = 0; c < C; c++) {
                const double norm = ((double)res[(size_t)n * C + c] - mean[n]) * rstd[n];
                const double wd = fabs((double)w[c] * dout[(size_t)n * C + c]);
                s1 += wd; s2 += wd * fabs(norm);
            }
            for (int c = 0; c < C; c++) {
                const size_t i = (size_t)n * C + c;
                const double norm = ((double)res[i] - mean[n]) * rstd[n];
                const double keep = r_dbr[i] == 0.0f && r_dinp[i] != 0.0f ? 0.0 : 1.0 / (1.0 - p);
                mag[i] = keep * rstd[n] * (fabs((double)w[c] * dout[i]) + s1 / C + fabs(norm) * s2 / C);
                if ((r_dbr[i] == 0.0f) != (g_dbr[i] == 0.0f))
                    fail_msg("layernorm_backward_dropout dbranch element %zu: cuda %.9g, cpu %.9g (mask differs)", i,
                             g_dbr[i], r_dbr[i]);
            }
        }
        check("layernorm_backward_dropout dbranch vs cpu", g_dbr, r_dbr, mag, NC, 2.2 * gam(C + 8), 3 * U32, 0);
        if (lp) {   // the copy: the fp32 gradient rounded, element by element
            f->cu->download(f->cu, h_lp, d_lp, NC * lp);
            for (size_t i = 0; i < NC; i++) {
                const float want = lp_round_host(f->dt, g_dbr[i]), got = lp_value(f->dt, h_lp, 2, i);
                if (memcmp(&want, &got, 4) != 0)
                    fail_msg("layernorm_backward_dropout dbranch_lp element %zu: %.9g, the rounded fp32 gradient %.9g",
                             i, got, want);
            }
            print_message("    %-44s bitwise equal\n", "layernorm_backward_dropout dbranch_lp = round(dbranch)");
            // the copy alone (dbranch NULL): the same copy, the same accumulated gradients
            f->cu->zero(f->cu, d_lp, NC * lp);
            float *d_dinp3 = up(f->cu, dinp, NC * 4);
            f->cu->layernorm_backward_dropout(f->cu, d_dinp3, NULL, d_lp, NULL, NULL, d_dout, d_res, d_w, d_mean,
                                              d_rstd, N, C, row_len, p, dk);
            f->cu->download(f->cu, h_lp2, d_lp, NC * lp);
            assert_memory_equal(h_lp, h_lp2, NC * lp);
            float *g3 = down(f->cu, d_dinp3, NC);
            check_equal("layernorm_backward_dropout dinp (copy only)", g3, s_dinp, NC);
            free(g3);
            f->cu->free(f->cu, d_dinp3);
        }
        f->cu->free(f->cu, d_a); f->cu->free(f->cu, d_b); f->cu->free(f->cu, d_w); f->cu->free(f->cu, d_bias);
        f->cu->free(f->cu, d_res); f->cu->free(f->cu, d_out); f->cu->free(f->cu, d_mean); f->cu->free(f->cu, d_rstd);
        f->cu->free(f->cu, d_lp); f->cu->free(f->cu, d_lp2); f->cu->free(f->cu, d_bd); f->cu->free(f->cu, d_res2);
        f->cu->free(f->cu, d_out2); f->cu->free(f->cu, d_mean2); f->cu->free(f->cu, d_rstd2);
        f->cu->free(f->cu, d_dout); f->cu->free(f->cu, d_dinp); f->cu->free(f->cu, d_dw); f->cu->free(f->cu, d_db);
        f->cu->free(f->cu, d_dbr); f->cu->free(f->cu, d_dinp2); f->cu->free(f->cu, d_dw2); f->cu->free(f->cu, d_db2);
        f->cu->free(f->cu, d_dbr2);
        free(a); free(b); free(w); free(bias); free(bd); free(res); free(out); free(mean); free(rstd); free(mag);
        free(g_res); free(g_out); free(g_mean); free(g_rstd); free(g_b); free(s_out); free(s_mean); free(s_rstd);
        free(h_lp); free(h_lp2); free(dout); free(dinp); free(dw); free(db); free(r_dinp); free(r_dw); free(r_db);
        free(r_dbr); free(nan_init); free(g_dinp); free(g_dw); free(g_db); free(g_dbr); free(s_dinp); free(s_dw);
        free(s_db); free(s_dbr);
    }
}

// ================================================================ data-parallel rows
// The property data parallelism rests on: a rank whose local batch rows are global
// rows row0 + j*row_stride draws exactly the dropout masks one process draws for those rows of
// the whole batch. Here rank 1 of 3 (rows 1, 4, 7, ...) against one process with all 3B rows,
// both on the CUDA backend: the rank's outputs and gradients equal the big batch's rows.
static void gather_rows(float *dst, const float *src, int B, size_t row, int64_t row0, int64_t stride) {
    for (int j = 0; j < B; j++) memcpy(dst + (size_t)j * row, src + (size_t)(row0 + j * stride) * row, row * sizeof(float));
}

// test_global_rows' attention part at one shape: B local rows of rank R0 of W against the
// big batch of B*W rows, forward and backward, bitwise.
static void global_rows_attention(Fx *f, int T, int C, int NH) {
    const int B = 3, W = 3, R0 = 1, BF = B * W;
    const float p = 0.3f;
    const uint64_t key = dropout_key(7, 11);
    const DropoutKey one = { key, 0, 1, NULL }, rank = { key, R0, W, NULL };
    const size_t TC = (size_t)T * C, ATT = attention_att_floats(f->dt, 1, T, C, NH);   // per batch row
    float *want = malloc(B * TC * 4);
    print_message("    T %d, hs %d: %s attention path\n", T, C / NH, fused_attention(f->dt, T, C, NH) ? "fused" : "cuBLAS");
    float *qf = rnd(BF * 3 * TC, -1, 1), *q = malloc(B * 3 * TC * 4);
    gather_rows(q, qf, B, 3 * TC, R0, W);
    float *d_qf = up(f->cu, qf, BF * 3 * TC * 4), *d_q = up(f->cu, q, B * 3 * TC * 4);
    float *d_of = f->cu->alloc(f->cu, BF * TC * 4), *d_o = f->cu->alloc(f->cu, B * TC * 4);
    float *d_af = f->cu->alloc(f->cu, BF * ATT * 4), *d_a = f->cu->alloc(f->cu, B * ATT * 4);
    f->cu->attention_forward(f->cu, d_of, d_af, d_qf, BF, T, C, NH, p, one);
    f->cu->attention_forward(f->cu, d_o, d_a, d_q, B, T, C, NH, p, rank);
    float *of = down(f->cu, d_of, BF * TC), *o = down(f->cu, d_o, B * TC);
    gather_rows(want, of, B, TC, R0, W);
    check_equal("attention_forward out: rank rows == big batch rows", o, want, B * TC);
    // backward from the same upstream gradient rows
    float *dyf = rnd(BF * TC, -1, 1), *dy = malloc(B * TC * 4);
    gather_rows(dy, dyf, B, TC, R0, W);
    float *d_dyf = up(f->cu, dyf, BF * TC * 4), *d_dy = up(f->cu, dy, B * TC * 4);
    float *d_dqf = f->cu->alloc(f->cu, BF * 3 * TC * 4), *d_dq = f->cu->alloc(f->cu, B * 3 * TC * 4);
    float *d_sf = f->cu->alloc(f->cu, BF * ATT * 4), *d_s = f->cu->alloc(f->cu, B * ATT * 4);
    f->cu->attention_backward(f->cu, d_dqf, d_sf, d_dyf, d_qf, d_af, BF, T, C, NH, p, one);
    f->cu->attention_backward(f->cu, d_dq, d_s, d_dy, d_q, d_a, B, T, C, NH, p, rank);
    float *dqf = down(f->cu, d_dqf, BF * 3 * TC), *dq = down(f->cu, d_dq, B * 3 * TC);
    float *want3 = malloc(B * 3 * TC * 4);
    gather_rows(want3, dqf, B, 3 * TC, R0, W);
    check_equal("attention_backward dqkv: rank rows == big batch rows", dq, want3, B * 3 * TC);
    // (test_attention compares the CUDA and CPU backends under this mapping)

    f->cu->free(f->cu, d_qf); f->cu->free(f->cu, d_q); f->cu->free(f->cu, d_of); f->cu->free(f->cu, d_o);
    f->cu->free(f->cu, d_af); f->cu->free(f->cu, d_a); f->cu->free(f->cu, d_dyf); f->cu->free(f->cu, d_dy);
    f->cu->free(f->cu, d_dqf); f->cu->free(f->cu, d_dq); f->cu->free(f->cu, d_sf); f->cu->free(f->cu, d_s);
    free(want); free(qf); free(q); free(of); free(o); free(dyf); free(dy); free(dqf); free(dq); free(want3);
}

static void test_global_rows(void **state) {
    Fx *f = *state;
    const int B = 3, W = 3, R0 = 1, T = 7, C = 48, BF = B * W;
    const float p = 0.3f;
    const uint64_t key = dropout_key(7, 11);
    const DropoutKey one = { key, 0, 1, NULL }, rank = { key, R0, W, NULL };
    const size_t TC = (size_t)T * C;   // per batch row

    // dropout on (B, T, C) activations: rows of T*C, as the model calls it
    float *xf = rnd(BF * TC, -1, 1), *x = malloc(B * TC * 4), *want = malloc(B * TC * 4);
    gather_rows(x, xf, B, TC, R0, W);
    float *d_xf = up(f->cu, xf, BF * TC * 4), *d_x = up(f->cu, x, B * TC * 4);
    f->cu->dropout_forward(f->cu, d_xf, d_xf, (long)(BF * TC), (long)TC, p, one);
    f->cu->dropout_forward(f->cu, d_x, d_x, (long)(B * TC), (long)TC, p, rank);
    float *gf = down(f->cu, d_xf, BF * TC), *g = down(f->cu, d_x, B * TC);
    gather_rows(want, gf, B, TC, R0, W);
    check_equal("dropout_forward rank rows == big batch rows", g, want, B * TC);
    // the mapping matters: the same rows keyed as one process of B draw other masks
    f->cu->upload(f->cu, d_x, x, B * TC * 4);
    f->cu->dropout_forward(f->cu, d_x, d_x, (long)(B * TC), (long)TC, p, one);
    float *g1 = down(f->cu, d_x, B * TC);
    assert_true(memcmp(g1, want, B * TC * 4) != 0);
    // backward into zeros: the gradient is the mask times the scale
    float *dxf = f->cu->alloc(f->cu, BF * TC * 4), *dx = f->cu->alloc(f->cu, B * TC * 4);
    f->cu->upload(f->cu, d_xf, xf, BF * TC * 4);
    f->cu->upload(f->cu, d_x, x, B * TC * 4);
    f->cu->dropout_backward(f->cu, dxf, d_xf, (long)(BF * TC), (long)TC, p, one);
    f->cu->dropout_backward(f->cu, dx, d_x, (long)(B * TC), (long)TC, p, rank);
    free(gf); free(g);
    gf = down(f->cu, dxf, BF * TC);
    g = down(f->cu, dx, B * TC);
    gather_rows(want, gf, B, TC, R0, W);
    check_equal("dropout_backward rank rows == big batch rows", g, want, B * TC);

    // attention, dropout on the probabilities: the cuBLAS path (hs 24) and, with bf16/fp16
    // matmuls, the fused one (T 7 < hs 16, hs 32 < T 37)
    global_rows_attention(f, 7, 72, 3);
    global_rows_attention(f, 7, 48, 3);
    global_rows_attention(f, 37, 96, 3);

    f->cu->free(f->cu, d_xf); f->cu->free(f->cu, d_x); f->cu->free(f->cu, dxf); f->cu->free(f->cu, dx);
    free(xf); free(x); free(want); free(gf); free(g); free(g1);
}

// ================================================================ keys in device memory
// A DropoutKey whose .dev points at a key in device memory (what a CUDA graph's kernels get,
// model/gpt.c): the kernels use that key, not the by-value fields (set to another key, another
// placement here), so every output is bitwise the one the pointed-to key gives by value.
static void dev_key_case(Fx *f, DropoutKey want, DropoutKey viadev, int T, int C, int NH) {
    const int B = 3;
    const float p = 0.3f;
    const size_t TC = (size_t)T * C, ATT = attention_att_floats(f->dt, 1, T, C, NH), N3 = B * 3 * TC;
    float *x = rnd(B * TC, -1, 1), *q = rnd(N3, -1, 1);
    float *d_x = up(f->cu, x, B * TC * 4), *d_y1 = f->cu->alloc(f->cu, B * TC * 4), *d_y2 = f->cu->alloc(f->cu, B * TC * 4);
    f->cu->dropout_forward(f->cu, d_y1, d_x, (long)(B * TC), (long)TC, p, want);
    f->cu->dropout_forward(f->cu, d_y2, d_x, (long)(B * TC), (long)TC, p, viadev);
    float *y1 = down(f->cu, d_y1, B * TC), *y2 = down(f->cu, d_y2, B * TC);
    check_equal("dropout_forward, key read from device memory", y2, y1, B * TC);
    free(y1); free(y2);
    f->cu->dropout_backward(f->cu, d_y1, d_x, (long)(B * TC), (long)TC, p, want);
    f->cu->dropout_backward(f->cu, d_y2, d_x, (long)(B * TC), (long)TC, p, viadev);
    y1 = down(f->cu, d_y1, B * TC); y2 = down(f->cu, d_y2, B * TC);
    check_equal("dropout_backward, key read from device memory", y2, y1, B * TC);
    float *d_q = up(f->cu, q, N3 * 4);
    float *d_a1 = f->cu->alloc(f->cu, B * ATT * 4), *d_a2 = f->cu->alloc(f->cu, B * ATT * 4);
    f->cu->attention_forward(f->cu, d_y1, d_a1, d_q, B, T, C, NH, p, want);
    f->cu->attention_forward(f->cu, d_y2, d_a2, d_q, B, T, C, NH, p, viadev);
    float *o1 = down(f->cu, d_y1, B * TC), *o2 = down(f->cu, d_y2, B * TC);
    check_equal("attention_forward, key read from device memory", o2, o1, B * TC);
    float *d_g1 = f->cu->alloc(f->cu, N3 * 4), *d_g2 = f->cu->alloc(f->cu, N3 * 4);
    float *d_s = f->cu->alloc(f->cu, B * ATT * 4);
    f->cu->attention_backward(f->cu, d_g1, d_s, d_x, d_q, d_a1, B, T, C, NH, p, want);
    f->cu->attention_backward(f->cu, d_g2, d_s, d_x, d_q, d_a1, B, T, C, NH, p, viadev);
    float *g1 = down(f->cu, d_g1, N3), *g2 = down(f->cu, d_g2, N3);
    check_equal("attention_backward dqkv, key read from device memory", g2, g1, N3);
    print_message("    T %d, hs %d (%s attention): dropout and attention with the key in device memory bitwise equal\n",
                  T, C / NH, fused_attention(f->dt, T, C, NH) ? "fused" : "cuBLAS");
    f->cu->free(f->cu, d_x); f->cu->free(f->cu, d_y1); f->cu->free(f->cu, d_y2); f->cu->free(f->cu, d_q);
    f->cu->free(f->cu, d_a1); f->cu->free(f->cu, d_a2); f->cu->free(f->cu, d_g1); f->cu->free(f->cu, d_g2);
    f->cu->free(f->cu, d_s);
    free(x); free(q); free(y1); free(y2); free(o1); free(o2); free(g1); free(g2);
}

static void test_dropout_key_in_device_memory(void **state) {
    Fx *f = *state;
    const DropoutKey want = { dropout_key(5, 77), 1, 3, NULL };   // rank 1 of 3
    DropoutKey *d_key = up(f->cu, &want, sizeof want);
    const DropoutKey viadev = { dropout_key(5, 78), 0, 1, d_key };
    // the value fields alone draw other masks: the comparison above could not pass by them
    float *x = rnd(64, 1, 2);
    float *d_x = up(f->cu, x, 64 * 4), *d_y1 = f->cu->alloc(f->cu, 64 * 4), *d_y2 = f->cu->alloc(f->cu, 64 * 4);
    DropoutKey byvalue = viadev;
    byvalue.dev = NULL;
    f->cu->dropout_forward(f->cu, d_y1, d_x, 64, 16, 0.5f, want);
    f->cu->dropout_forward(f->cu, d_y2, d_x, 64, 16, 0.5f, byvalue);
    float *y1 = down(f->cu, d_y1, 64), *y2 = down(f->cu, d_y2, 64);
    assert_true(memcmp(y1, y2, 64 * 4) != 0);
    dev_key_case(f, want, viadev, 7, 72, 3);    // cuBLAS attention path (hs 24)
    dev_key_case(f, want, viadev, 7, 48, 3);    // fused with bf16/fp16 matmuls (T 7 < hs 16)
    dev_key_case(f, want, viadev, 37, 96, 3);   // fused with bf16/fp16 matmuls (hs 32 < T 37)
    f->cu->free(f->cu, d_key); f->cu->free(f->cu, d_x); f->cu->free(f->cu, d_y1); f->cu->free(f->cu, d_y2);
    free(x); free(y1); free(y2);
}

// ================================================================ classifier
static void test_crossentropy(void **state) {
    Fx *f = *state;
    for (int k = 0; k < NDIMS; k++) {
        const int N = DIMS[k].B * DIMS[k].T, V = DIMS[k].V;
        const size_t NV = (size_t)N * V;
        float *logits = rnd(NV, -4, 4);
        logits[5] = 60; logits[V + 3] = -60;   // a dominant and a vanishing class
        int32_t *tg = tokens(N, V, V);
        tg[1] = -1; tg[N - 1] = -1;            // ignore_index
        tg[0] = 5;
        float *losses = malloc(N * 4), *probs = malloc(NV * 4);
        f->cpu->crossentropy_forward(f->cpu, losses, probs, logits, tg, N, V);
        float *d_l = up(f->cu, logits, NV * 4), *d_p = f->cu->alloc(f->cu, NV * 4), *d_loss = f->cu->alloc(f->cu, N * 4);
        int32_t *d_t = up(f->cu, tg, N * 4);
        f->cu->crossentropy_forward(f->cu, d_loss, d_p, d_l, d_t, N, V);
        float *g_p = down(f->cu, d_p, NV), *g_loss = down(f->cu, d_loss, N);
        // probabilities: exp, a V-term positive sum and a division: relative coef 2.2 g(V + 8);
        // loss = log(sum) - (l_t - max): error (V + 8) u32 on log(sum) (sum >= 1) plus u32 |l_t - max|
        check("crossentropy_forward probs", g_p, probs, NULL, NV, 0, 2.2 * gam(V + 8), 1e-37);
        double *mag = dzeros(N);
        for (int n = 0; n < N; n++) {
            if (tg[n] < 0) continue;
            double mx = -INFINITY;
            for (int v = 0; v < V; v++) mx = fmax(mx, logits[(size_t)n * V + v]);
            mag[n] = 1 + fabs(logits[(size_t)n * V + tg[n]] - mx) + fabs(losses[n]);
        }
        check("crossentropy_forward losses", g_loss, losses, mag, N, 2.2 * gam(V + 8), 0, 0);
        assert_true(g_loss[1] == 0.0f && g_loss[N - 1] == 0.0f);

        // backward from the CPU's probs, out of place and in place (dlogits aliases probs)
        const float dloss = 1.0f / (float)(N - 2);
        float *r_d = malloc(NV * 4);
        f->cpu->crossentropy_softmax_backward(f->cpu, r_d, probs, tg, N, V, dloss);
        float *d_p2 = up(f->cu, probs, NV * 4), *d_d = f->cu->alloc(f->cu, NV * 4);
        f->cu->crossentropy_softmax_backward(f->cu, d_d, d_p2, d_t, N, V, dloss);
        float *g_d = down(f->cu, d_d, NV);
        check("crossentropy_softmax_backward", g_d, r_d, NULL, NV, 0, 2 * U32, 1e-37);
        free(g_d);
        f->cu->crossentropy_softmax_backward(f->cu, d_p2, d_p2, d_t, N, V, dloss);
        g_d = down(f->cu, d_p2, NV);
        check("crossentropy_softmax_backward in place", g_d, r_d, NULL, NV, 0, 2 * U32, 1e-37);
        for (size_t i = (size_t)V; i < 2 * (size_t)V; i++) assert_true(g_d[i] == 0.0f);   // ignored row

        // fused forward + backward (the table's crossentropy_forward_backward): into its own
        // buffer, then in place over the logits
        assert_non_null(f->cu->crossentropy_forward_backward);
        double *mp = dzeros(NV);
        for (size_t i = 0; i < NV; i++) mp[i] = dloss * probs[i];   // dloss (p - onehot): p's error times dloss
        float *d_l2 = up(f->cu, logits, NV * 4), *d_d2 = f->cu->alloc(f->cu, NV * 4);
        float *g_loss2 = NULL, *g_d2 = NULL;
        for (int inplace = 0; inplace < 2; inplace++) {
            float *dst = inplace ? d_l2 : d_d2;
            f->cu->crossentropy_forward_backward(f->cu, d_loss, dst, d_l2, d_t, N, V, dloss);
            free(g_loss2); free(g_d2);
            g_loss2 = down(f->cu, d_loss, N);
            g_d2 = down(f->cu, dst, NV);
            check(inplace ? "crossentropy_forward_backward losses (in place)" : "crossentropy_forward_backward losses",
                  g_loss2, losses, mag, N, 2.2 * gam(V + 8), 0, 0);
            check(inplace ? "crossentropy_forward_backward dlogits (in place)" : "crossentropy_forward_backward dlogits",
                  g_d2, r_d, mp, NV, 2.2 * gam(V + 8), 2 * U32, 1e-37);
        }
        if (f->cpu->crossentropy_forward_backward) {   // and the CPU backend's fused op
            float *c_loss = malloc(N * 4), *c_d = malloc(NV * 4);
            f->cpu->crossentropy_forward_backward(f->cpu, c_loss, c_d, logits, tg, N, V, dloss);
            check("crossentropy_forward_backward vs cpu fused", g_d2, c_d, mp, NV, 2.2 * gam(V + 8), 2 * U32, 1e-37);
            free(c_loss); free(c_d);
        }
        f->cu->free(f->cu, d_d2);

        f->cu->free(f->cu, d_l); f->cu->free(f->cu, d_p); f->cu->free(f->cu, d_loss); f->cu->free(f->cu, d_t);
        f->cu->free(f->cu, d_p2); f->cu->free(f->cu, d_d); f->cu->free(f->cu, d_l2);
        free(logits); free(tg); free(losses); free(probs); free(g_p); free(g_loss); free(mag); free(r_d);
        free(g_d); free(g_loss2); free(g_d2); free(mp);
    }
}

// ================================================================ optimizer and loss scaling
// download_async: the bytes of src as they were when the call was enqueued, delivered by
// download_wait, also when later ops overwrite src and when more copies are pending than the
// staging ring has slots (the sixth call delivers the first five); upload_async the same way up.
static void test_async_copies(void **state) {
    Fx *f = *state;
    Backend *be = f->cu;
    assert_non_null(be->download_async);
    assert_non_null(be->download_wait);
    enum { N = 1001, K = 6 };
    float *h = rnd(N, -1, 1), *got[K];
    float *d = up(be, h, N * sizeof(float));
    for (int k = 0; k < K; k++) {
        got[k] = calloc(N, sizeof(float));
        be->download_async(be, got[k], d, N * sizeof(float));
        be->scale(be, d, N, 2.0f);   // enqueued after the copy: not in it
    }
    be->download_wait(be);
    for (int k = 0; k < K; k++) {
        float *want = copyf(h, N);
        for (int i = 0; i < N; i++) want[i] = h[i] * (float)(1 << k);
        check_equal("download_async: src as it was when enqueued", got[k], want, N);
        free(want);
    }
    float *z = calloc(N, sizeof(float));
    be->upload_async(be, d, z, N * sizeof(float));
    memcpy(z, h, N * sizeof(float));   // the staged copy is not affected
    float *back = down(be, d, N);
    for (int i = 0; i < N; i++) assert_true(back[i] == 0.0f);
    be->free(be, d);
    for (int k = 0; k < K; k++) free(got[k]);
    free(h); free(z); free(back);
}

// The gradient scale (unscale and clip) folded into the update: bitwise Backend.scale on a copy of
// the gradients, then the update with scale 1; the gradients themselves are not written.
static void test_adamw(void **state) {
    Fx *f = *state;
    const size_t n = 5003;
    float *p = rnd(n, -1, 1), *g = rnd(n, -1e-2f, 1e-2f), *m = calloc(n, 4), *v = calloc(n, 4);
    float *rp = copyf(p, n), *rm = copyf(m, n), *rv = copyf(v, n);   // CPU: scale, then update
    float *cp = copyf(p, n), *cm = copyf(m, n), *cv = copyf(v, n);   // CPU: the scale folded in
    float *d_p = up(f->cu, p, n * 4), *d_g = up(f->cu, g, n * 4), *d_m = up(f->cu, m, n * 4), *d_v = up(f->cu, v, n * 4);
    const float b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, lr = 3e-4f, wd = 0.1f;
    for (int step = 1; step <= 3; step++) {
        const float bc2 = sqrtf(1 - powf(b2, (float)step)), ss = lr / (1 - powf(b1, (float)step));
        const float decay = step == 2 ? 1.0f : 1.0f - lr * wd;   // a no-decay step too
        const float gs = step == 1 ? 1.0f : step == 2 ? 0.731f : 0.8f / 65536.0f;   // none, a clip, unscale + clip
        float *gsc = copyf(g, n);
        f->cpu->scale(f->cpu, gsc, n, gs);
        f->cpu->adamw_update(f->cpu, rp, gsc, rm, rv, n, b1, b2, eps, decay, ss, bc2, 1.0f);
        f->cpu->adamw_update(f->cpu, cp, g, cm, cv, n, b1, b2, eps, decay, ss, bc2, gs);
        f->cu->adamw_update(f->cu, d_p, d_g, d_m, d_v, n, b1, b2, eps, decay, ss, bc2, gs);
        free(gsc);
    }
    float *gp = down(f->cu, d_p, n), *gm = down(f->cu, d_m, n), *gv = down(f->cu, d_v, n), *gg = down(f->cu, d_g, n);
    // the CPU's expression order, each operation rounded on its own: the same bits
    check_equal("adamw_update p", gp, rp, n);
    check_equal("adamw_update m", gm, rm, n);
    check_equal("adamw_update v", gv, rv, n);
    check_equal("adamw_update (cpu, scale folded in) p vs scale first", cp, rp, n);
    check_equal("adamw_update (cpu, scale folded in) m vs scale first", cm, rm, n);
    check_equal("adamw_update (cpu, scale folded in) v vs scale first", cv, rv, n);
    check_equal("adamw_update leaves the gradients as they were", gg, g, n);
    f->cu->free(f->cu, d_p); f->cu->free(f->cu, d_g); f->cu->free(f->cu, d_m); f->cu->free(f->cu, d_v);
    free(p); free(g); free(m); free(v); free(rp); free(rm); free(rv); free(cp); free(cm); free(cv);
    free(gp); free(gm); free(gv); free(gg);
}

// adamw_update_segments (one launch over all tensors) against one adamw_update per segment, bit
// for bit: segments of odd sizes with and without decay, an empty one, three steps.
static void test_adamw_segments(void **state) {
    Fx *f = *state;
    assert_non_null(f->cu->adamw_update_segments);
    const AdamWSegment segs[] = { {0, 1, 1}, {1, 37, 0}, {38, 255, 1}, {293, 0, 1}, {293, 256, 0},
                                  {549, 257, 1}, {806, 3, 0}, {809, 5003, 1}, {5812, 7, 0} };
    const int ns = (int)(sizeof segs / sizeof segs[0]);
    const size_t n = 5812 + 7 + 5;   // 5 trailing elements no segment covers: untouched
    float *p = rnd(n, -1, 1), *g = rnd(n, -1e-2f, 1e-2f), *m = calloc(n, 4), *v = calloc(n, 4);
    float *d_p[2], *d_g = up(f->cu, g, n * 4), *d_m[2], *d_v[2];
    for (int k = 0; k < 2; k++) { d_p[k] = up(f->cu, p, n * 4); d_m[k] = up(f->cu, m, n * 4); d_v[k] = up(f->cu, v, n * 4); }
    float *rp = copyf(p, n), *rm = copyf(m, n), *rv = copyf(v, n);   // the CPU backend, per segment
    const float b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, lr = 3e-4f, wd = 0.1f;
    for (int step = 1; step <= 3; step++) {
        const float bc2 = sqrtf(1 - powf(b2, (float)step)), ss = lr / (1 - powf(b1, (float)step));
        const float decay = 1.0f - lr * wd;
        const float gs = step == 2 ? 0.731f : 1.0f;   // the unscale / clip factor of a step
        for (int k = 0; k < ns; k++) {
            const size_t o = segs[k].offset, len = segs[k].n;
            const float dk = segs[k].decays ? decay : 1.0f;
            f->cu->adamw_update(f->cu, d_p[0] + o, d_g + o, d_m[0] + o, d_v[0] + o, len, b1, b2, eps, dk, ss, bc2, gs);
            f->cpu->adamw_update(f->cpu, rp + o, g + o, rm + o, rv + o, len, b1, b2, eps, dk, ss, bc2, gs);
        }
        const long all0 = emu_launch_count ? emu_launch_count(NULL) : 0;
        const long seg0 = emu_launch_count ? emu_launch_count("adamw_segments_kernel") : 0;
        f->cu->adamw_update_segments(f->cu, d_p[1], d_g, d_m[1], d_v[1], segs, ns, b1, b2, eps, decay, ss, bc2, gs);
        if (emu_launch_count) {
            assert_int_equal(emu_launch_count(NULL) - all0, 1);   // one launch, whatever the segment count
            assert_int_equal(emu_launch_count("adamw_segments_kernel") - seg0, 1);
        }
    }
    float *ref[3] = { down(f->cu, d_p[0], n), down(f->cu, d_m[0], n), down(f->cu, d_v[0], n) };
    float *got[3] = { down(f->cu, d_p[1], n), down(f->cu, d_m[1], n), down(f->cu, d_v[1], n) };
    check_equal("adamw_update_segments p vs per-segment adamw_update", got[0], ref[0], n);
    check_equal("adamw_update_segments m vs per-segment adamw_update", got[1], ref[1], n);
    check_equal("adamw_update_segments v vs per-segment adamw_update", got[2], ref[2], n);
    check_equal("adamw_update_segments p vs cpu", got[0], rp, n);
    check_equal("adamw_update_segments m vs cpu", got[1], rm, n);
    check_equal("adamw_update_segments v vs cpu", got[2], rv, n);
    check_equal("adamw_update_segments: elements outside every segment", got[0] + 5819, p + 5819, 5);
    for (int k = 0; k < 3; k++) { free(ref[k]); free(got[k]); }
    for (int k = 0; k < 2; k++) { f->cu->free(f->cu, d_p[k]); f->cu->free(f->cu, d_m[k]); f->cu->free(f->cu, d_v[k]); }
    f->cu->free(f->cu, d_g);
    free(p); free(g); free(m); free(v); free(rp); free(rm); free(rv);
}

// adamw_update_segments inside a CUDA graph (Backend.graph_run): once its table is on the device
// the op neither allocates nor synchronises, so it captures (the emulator refuses either inside a
// capture, and exits) and its replays give the direct calls' bits.
typedef struct { Backend *be; float *p, *g, *m, *v; const AdamWSegment *segs; int ns; } SegCall;
static void seg_call(void *ctx) {
    const SegCall *c = ctx;
    c->be->adamw_update_segments(c->be, c->p, c->g, c->m, c->v, c->segs, c->ns, 0.9f, 0.95f, 1e-8f, 0.9997f, 3e-4f,
                                 0.3f, 0.731f);
}
static void test_adamw_segments_graph(void **state) {
    Fx *f = *state;
    const AdamWSegment segs[] = { {3, 1000, 1}, {1003, 77, 0}, {1200, 513, 1} };
    const size_t n = 1800;
    float *p = rnd(n, -1, 1), *g = rnd(n, -1e-2f, 1e-2f), *mv = rnd(n, 0, 1e-4f);
    SegCall c[2];
    for (int k = 0; k < 2; k++)
        c[k] = (SegCall){ f->cu, up(f->cu, p, n * 4), up(f->cu, g, n * 4), up(f->cu, mv, n * 4), up(f->cu, mv, n * 4),
                          segs, 3 };
    void *graph = NULL;
    for (int it = 0; it < 4; it++) {
        seg_call(&c[0]);   // direct
        const int called = f->cu->graph_run(f->cu, &graph, seg_call, &c[1]);
        assert_int_equal(called, it < 2);   // run, captured, then replayed
    }
    f->cu->graph_free(f->cu, graph);
    for (int b = 0; b < 3; b++) {
        float *bufs0[3] = { c[0].p, c[0].m, c[0].v }, *bufs1[3] = { c[1].p, c[1].m, c[1].v };
        float *a = down(f->cu, bufs0[b], n), *r = down(f->cu, bufs1[b], n);
        check_equal(b == 0 ? "adamw_update_segments graph replays p" : b == 1 ? "adamw_update_segments graph replays m"
                                                                               : "adamw_update_segments graph replays v",
                    r, a, n);
        free(a); free(r);
    }
    for (int k = 0; k < 2; k++) {
        f->cu->free(f->cu, c[k].p); f->cu->free(f->cu, c[k].g); f->cu->free(f->cu, c[k].m); f->cu->free(f->cu, c[k].v);
    }
    free(p); free(g); free(mv);
}

// trainer/adamw.c's adamw_step_range on CUDA: one adamw launch per optimizer step, the same bits
// as its per-tensor loop (the backend's adamw_update_segments set NULL), over the whole buffer
// and over ranges [lo, hi) that cut tensors as ZeRO's shards do (params absolute, grads and
// moments relative to lo); the segment table changes between the ranges and is uploaded again.
static void test_adamw_step_range_one_launch(void **state) {
    Fx *f = *state;
    const size_t sizes[] = { 129, 1, 4096, 37, 255, 2048, 3, 1000, 5 };
    enum { NT = sizeof sizes / sizeof sizes[0] };
    ParamTensor t[NT];
    size_t N = 0;
    for (int k = 0; k < NT; k++) {
        memset(&t[k], 0, sizeof t[k]);
        t[k].offset = N; t[k].numel = sizes[k]; t[k].decay = k % 3 != 1;
        N += sizes[k];
    }
    const size_t ranges[][2] = { {0, N}, {130, 4300}, {4227, 4227 + 37 + 100}, {N - 1004, N}, {5, 6} };
    float *p = rnd(N, -1, 1), *g = rnd(N, -1e-2f, 1e-2f);
    for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++) {
        const size_t lo = ranges[r][0], hi = ranges[r][1], len = hi - lo;
        float *d_p[2], *d_g = up(f->cu, g + lo, len * 4);
        AdamW opt[2];
        for (int k = 0; k < 2; k++) {
            d_p[k] = up(f->cu, p, N * 4);
            assert_int_equal(adamw_init(&opt[k], f->cu, len), 0);
        }
        void (*segs_op)(Backend *, float *, const float *, float *, float *, const AdamWSegment *, int, float, float,
                        float, float, float, float, float) = f->cu->adamw_update_segments;
        for (int step = 0; step < 3; step++) {
            const float lr = step == 1 ? 1e-3f : 3e-4f;
            f->cu->adamw_update_segments = NULL;   // the per-tensor loop
            adamw_step_range(&opt[0], d_p[0], d_g, t, NT, lo, hi, lr, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f);
            f->cu->adamw_update_segments = segs_op;
            const long all0 = emu_launch_count ? emu_launch_count(NULL) : 0;
            const long adamw0 = emu_launch_count ? emu_launch_count("adamw_kernel") : 0;
            adamw_step_range(&opt[1], d_p[1], d_g, t, NT, lo, hi, lr, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f);
            if (emu_launch_count) {
                assert_int_equal(emu_launch_count(NULL) - all0, 1);
                assert_int_equal(emu_launch_count("adamw_kernel") - adamw0, 0);
            }
        }
        float *a = down(f->cu, d_p[0], N), *b = down(f->cu, d_p[1], N);
        check_equal("adamw_step_range params: one launch vs per tensor", b, a, N);
        check_equal("adamw_step_range params outside [lo, hi) untouched", b, p, lo);
        check_equal("adamw_step_range params outside [lo, hi) untouched", b + hi, p + hi, N - hi);
        free(a); free(b);
        a = down(f->cu, opt[0].m, len); b = down(f->cu, opt[1].m, len);
        check_equal("adamw_step_range m: one launch vs per tensor", b, a, len);
        free(a); free(b);
        a = down(f->cu, opt[0].v, len); b = down(f->cu, opt[1].v, len);
        check_equal("adamw_step_range v: one launch vs per tensor", b, a, len);
        free(a); free(b);
        for (int k = 0; k < 2; k++) { adamw_free(&opt[k]); f->cu->free(f->cu, d_p[k]); }
        f->cu->free(f->cu, d_g);
    }
    free(p); free(g);
}

// Backend.optimizer_tail against the host's sequence on the same backend: sum_squares read back,
// loss_scaler_unscale_clip_coef's factor and decision, adamw_update_segments. ssq, the factor, p, m
// and v bitwise, with the clip active or not, with a loss scale, and the skips: a NaN gradient, a NaN
// loss of a valid target (skipped) and of an ignored one (-1: not counted, applied).
static void test_optimizer_tail(void **state) {
    Fx *f = *state;
    assert_non_null(f->cu->optimizer_tail);
    const AdamWSegment segs[] = { {0, 700, 1}, {700, 37, 0}, {737, 2000, 1} };
    const size_t n = 2737, NL = 300;
    typedef struct { double S, clip; int nan_grad, nan_loss_at; int32_t nan_target; int applied; const char *what; } Case;
    const Case cases[] = {
        { 1.0, 1.0, 0, -1, 0, 1, "no clip (norm below max_norm)" },
        { 1.0, 0.05, 0, -1, 0, 1, "clip active" },
        { 65536.0, 0.05, 0, -1, 0, 1, "loss scale 2^16, clip active" },
        { 1.0, 1.0, 1, -1, 0, 0, "a NaN gradient: skipped" },
        { 1.0, 1.0, 0, 17, 5, 0, "a NaN loss of a valid target: skipped" },
        { 1.0, 1.0, 0, 17, -1, 1, "a NaN loss of an ignored target: applied" },
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        const Case *c = &cases[ci];
        float *p = rnd(n, -1, 1), *g = rnd(n, -2e-3f, 2e-3f), *mv = rnd(n, 0, 1e-4f), *losses = rnd(NL, 0, 5);
        for (size_t i = 0; i < n; i++) g[i] *= (float)c->S;
        if (c->nan_grad) g[1234] = NAN;
        int32_t *targets = malloc(NL * sizeof *targets);
        for (size_t i = 0; i < NL; i++) targets[i] = (int32_t)(i % 7);
        if (c->nan_loss_at >= 0) { losses[c->nan_loss_at] = NAN; targets[c->nan_loss_at] = c->nan_target; }
        float *d_p[2], *d_m[2], *d_v[2], *d_g = up(f->cu, g, n * 4), *d_l = up(f->cu, losses, NL * 4);
        int32_t *d_t = up(f->cu, targets, NL * sizeof *targets);
        for (int k = 0; k < 2; k++) { d_p[k] = up(f->cu, p, n * 4); d_m[k] = up(f->cu, mv, n * 4); d_v[k] = up(f->cu, mv, n * 4); }
        const float b1 = 0.9f, b2 = 0.95f, eps = 1e-8f;
        const OptimizerTailArgs a = { .loss_scale = c->S, .max_norm = c->clip, .decay_factor = 0.9997f,
                                      .step_size = 3e-4f, .bc2_sqrt = 0.31f };
        // the host's sequence
        const double ssq = f->cu->sum_squares(f->cu, d_g, n);
        LossScaler ls;
        loss_scaler_init(&ls, c->S != 1.0);
        if (c->S != 1.0) ls.scale = (float)c->S;
        double norm;
        float gs;
        // (train_step's rule: the scaler's decision, then no update on a nonfinite norm or loss)
        int applied = loss_scaler_unscale_clip_coef(&ls, ssq, c->clip, &norm, &gs) > 0 && isfinite(norm);
        if (c->nan_loss_at >= 0 && c->nan_target != -1) applied = 0;
        if (applied)
            f->cu->adamw_update_segments(f->cu, d_p[0], d_g, d_m[0], d_v[0], segs, 3, b1, b2, eps, a.decay_factor,
                                         a.step_size, a.bc2_sqrt, gs);
        // the tail
        OptimizerTailArgs *d_a = up(f->cu, &a, sizeof a);
        OptimizerTailResult *d_r = f->cu->alloc(f->cu, sizeof *d_r), r;
        f->cu->optimizer_tail(f->cu, d_p[1], d_g, d_m[1], d_v[1], n, segs, 3, b1, b2, eps, d_l, d_t, NL, d_a, d_r);
        f->cu->download(f->cu, &r, d_r, sizeof r);
        if (!c->nan_grad) assert_memory_equal(&r.ssq, &ssq, sizeof ssq);
        assert_int_equal(r.applied, c->applied);
        assert_int_equal(applied, c->applied);   // (the case's expectation holds for the host too)
        assert_int_equal(r.nonfinite_loss, c->nan_loss_at >= 0 && c->nan_target != -1);
        if (applied) assert_memory_equal(&r.grad_scale, &gs, sizeof gs);
        if (c->clip == 0.05) assert_true(r.grad_scale < 1.0f / (float)c->S);   // the clip was active
        float *bufs[2][3] = { { d_p[0], d_m[0], d_v[0] }, { d_p[1], d_m[1], d_v[1] } };
        for (int b = 0; b < 3; b++) {
            float *want = down(f->cu, bufs[0][b], n), *got = down(f->cu, bufs[1][b], n);
            check_equal(c->what, got, want, n);
            if (!c->applied) check_equal("skipped: untouched", got, b == 0 ? p : mv, n);
            free(want); free(got);
        }
        print_message("    optimizer_tail, %s: bitwise the host's sequence\n", c->what);
        for (int k = 0; k < 2; k++) { f->cu->free(f->cu, d_p[k]); f->cu->free(f->cu, d_m[k]); f->cu->free(f->cu, d_v[k]); }
        f->cu->free(f->cu, d_g); f->cu->free(f->cu, d_l); f->cu->free(f->cu, d_t);
        f->cu->free(f->cu, d_a); f->cu->free(f->cu, d_r);
        free(p); free(g); free(mv); free(losses); free(targets);
    }
}

static void test_sum_squares(void **state) {
    Fx *f = *state;
    const size_t sizes[] = { 1, 255, 70001 };   // one element, under one block, many strides
    for (int k = 0; k < 3; k++) {
        const size_t n = sizes[k];
        float *x = rnd(n, -3, 3);
        float *d = up(f->cu, x, n * 4);
        const double r = f->cpu->sum_squares(f->cpu, x, n);
        const double g1 = f->cu->sum_squares(f->cu, d, n), g2 = f->cu->sum_squares(f->cu, d, n);
        assert_true(memcmp(&g1, &g2, sizeof g1) == 0);   // deterministic
        const double tol = 2.0 * n * 0x1p-53 * r;
        print_message("    sum_squares n=%zu: |diff| %.3g (tol %.3g)\n", n, fabs(g1 - r), tol);
        assert_true(fabs(g1 - r) <= tol);
        f->cu->free(f->cu, d);
        free(x);
    }
    assert_true(f->cu->sum_squares(f->cu, NULL, 0) == 0.0);
}

static void test_scale(void **state) {
    Fx *f = *state;
    const size_t n = 9001;
    float *x = rnd(n, -10, 10), *r = copyf(x, n);
    float *d = up(f->cu, x, n * 4);
    f->cpu->scale(f->cpu, r, n, 0.125f / 3);
    f->cu->scale(f->cu, d, n, 0.125f / 3);
    float *g = down(f->cu, d, n);
    check_equal("scale", g, r, n);
    f->cu->free(f->cu, d);
    free(x); free(r); free(g);
}

// ZeRO stage 2's harvest: acc = x, then acc += x twice, bitwise the CPU's (one rounding per
// element); the floats around the range are untouched.
static void test_accumulate(void **state) {
    Fx *f = *state;
    const size_t n = 70001, pad = 5;
    float *acc = rnd(n + 2 * pad, -10, 10), *x = rnd(n, -3, 3), *y = rnd(n, -1e-3f, 1e-3f), *r = copyf(acc, n + 2 * pad);
    float *da = up(f->cu, acc, (n + 2 * pad) * 4), *dx = up(f->cu, x, n * 4), *dy = up(f->cu, y, n * 4);
    f->cpu->accumulate(f->cpu, r + pad, x, n, 1);
    f->cu->accumulate(f->cu, da + pad, dx, n, 1);
    for (int k = 0; k < 2; k++) {
        f->cpu->accumulate(f->cpu, r + pad, k ? y : x, n, 0);
        f->cu->accumulate(f->cu, da + pad, k ? dy : dx, n, 0);
    }
    f->cu->accumulate(f->cu, da, dx, 0, 0);   // n = 0: nothing
    float *g = down(f->cu, da, n + 2 * pad);
    check_equal("accumulate", g, r, n + 2 * pad);
    for (size_t i = 0; i < pad; i++) assert_true(g[i] == acc[i] && g[n + pad + i] == acc[n + pad + i]);
    for (size_t i = 0; i < n; i++) {   // the reference itself: copy, then one rounded add each
        const float want = (x[i] + x[i]) + y[i];
        assert_memory_equal(&r[pad + i], &want, sizeof want);
    }
    f->cu->free(f->cu, da); f->cu->free(f->cu, dx); f->cu->free(f->cu, dy);
    free(acc); free(x); free(y); free(r); free(g);
}

int main(void) {
    // the fused attention kernels wherever a shape allows them (MINGPT_CUDA_ATTENTION=fused; the
    // default is the cuBLAS path, kernels/backend.h), so this suite keeps checking both paths
    setenv("MINGPT_CUDA_ATTENTION", "fused", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_encoder),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_layernorm_backward_shapes),
        cmocka_unit_test(test_matmul_forward),
        cmocka_unit_test(test_matmul_gelu_forward),
        cmocka_unit_test(test_matmul_backward),
        cmocka_unit_test(test_matmul_backward_dgelu),
        cmocka_unit_test(test_grad_overwrite),
        cmocka_unit_test(test_mlp_lp_copies),
        cmocka_unit_test(test_matmul_out_lp),
        cmocka_unit_test(test_attention_qkv_lp),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_attention_causal),
        cmocka_unit_test(test_attention_grid),
        cmocka_unit_test(test_attention_cublas_switch),
        cmocka_unit_test(test_attention_cached),
        cmocka_unit_test(test_gelu_backward),
        cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_residual_dropout_layernorm),
        cmocka_unit_test(test_global_rows),
        cmocka_unit_test(test_dropout_key_in_device_memory),
        cmocka_unit_test(test_crossentropy),
        cmocka_unit_test(test_async_copies),
        cmocka_unit_test(test_adamw),
        cmocka_unit_test(test_adamw_segments),
        cmocka_unit_test(test_adamw_step_range_one_launch),
        cmocka_unit_test(test_adamw_segments_graph),
        cmocka_unit_test(test_sum_squares),
        cmocka_unit_test(test_optimizer_tail),
        cmocka_unit_test(test_scale),
        cmocka_unit_test(test_accumulate),
    };
    int fails = 0;
    fails += cmocka_run_group_tests_name("cuda ops, fp32 matmuls", tests, setup_fp32, teardown);
    fails += cmocka_run_group_tests_name("cuda ops, bf16 matmuls", tests, setup_bf16, teardown);
    fails += cmocka_run_group_tests_name("cuda ops, fp16 matmuls", tests, setup_fp16, teardown);
    return fails != 0;
}
