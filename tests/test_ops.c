// tests/test_ops.c — unit tests of the CPU kernels (kernels/cpu/ops.h).
//
// Every op is checked against a naive double-precision reference written here (never the
// op itself): forward values, and backward against central finite differences of
// L = sum(out * w) for fixed random w, evaluated on the double reference. Also: the
// accumulate / overwrite convention (overwritten outputs start as NaN), dropout masks, causality,
// ignore_index and determinism.
//
// Tolerances (max |got - ref| / max |ref|, see test_max_rel_err):
//   TOL_FWD 1e-5  fp32 forward vs double reference (fp32 rounding is ~1e-7 per op).
//   TOL_BWD 1e-4  fp32 backward vs double central FD with h = 1e-4 (FD truncation ~1e-9,
//                 fp32 gradient error ~1e-6; the slack covers fp32 saved mean/rstd/att).
//   TOL_ACC 1e-6  backward called twice vs 2x once (one extra fp32 rounding per add).
#include "tests/test_util.h"

#include "kernels/cpu/ops.h"
#include "kernels/dropout_rng.h"

#define TOL_FWD 1e-5
#define TOL_BWD 1e-4
#define TOL_ACC 1e-6
#define FD_H 1e-4

// ---------------------------------------------------------------- helpers

static double *dalloc(long n) {
    double *p = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    assert_non_null(p);
    return p;
}
static float *fcopy(const float *x, long n) {
    float *p = falloc(n);
    memcpy(p, x, (size_t)n * sizeof(float));
    return p;
}
// n NaNs: the content of an output buffer that an op must overwrite (never read).
static float *fnan(long n) {
    float *p = falloc(n);
    for (long i = 0; i < n; i++) p[i] = NAN;
    return p;
}
static void fill_nan(float *p, long n) { for (long i = 0; i < n; i++) p[i] = NAN; }
// Exact widening of fp32 inputs, so the reference sees the very values the op sees.
static double *to_double(const float *x, long n) {
    double *d = dalloc(n);
    for (long i = 0; i < n; i++) d[i] = x[i];
    return d;
}
static float *to_float(const double *x, long n) {
    float *f = falloc(n);
    for (long i = 0; i < n; i++) f[i] = (float)x[i];
    return f;
}
static double dot_d(const double *a, const double *b, long n) {
    double s = 0;
    for (long i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

// Scalar loss of a double reference; ctx holds the inputs (perturbed in place) and w.
typedef double (*LossFn)(void *ctx);

// Central finite differences of f with respect to x (n,), written to g as fp32.
static void fd_grad(LossFn f, void *ctx, double *x, long n, float *g) {
    for (long i = 0; i < n; i++) {
        const double x0 = x[i];
        x[i] = x0 + FD_H;
        const double lp = f(ctx);
        x[i] = x0 - FD_H;
        const double lm = f(ctx);
        x[i] = x0;
        g[i] = (float)((lp - lm) / (2 * FD_H));
    }
}

// Checks the op's gradient (n,) against FD of f with respect to x.
static void check_fd(const float *got, LossFn f, void *ctx, double *x, long n, const char *what) {
    float *ref = falloc(n);
    fd_grad(f, ctx, x, n, ref);
    assert_close_rel(got, ref, n, TOL_BWD, what);
    free(ref);
}

// An overwritten output, filled with NaN before a second identical call, holds the first
// call's result again, bit for bit (an op that added to it would leave NaN).
static void check_overwritten(const float *again, const float *once, long n, const char *what) {
    for (long i = 0; i < n; i++)
        if (memcmp(&again[i], &once[i], sizeof(float)) != 0)
            fail_msg("%s: element %ld is %.9g after a call on a NaN-filled buffer, %.9g before", what, i,
                     again[i], once[i]);
}

// After a second backward call, the buffer must hold twice the first call's gradient.
static void check_doubled(const float *twice, const float *once, long n, const char *what) {
    float *ref = falloc(n);
    for (long i = 0; i < n; i++) ref[i] = 2.0f * once[i];
    assert_close_rel(twice, ref, n, TOL_ACC, what);
    free(ref);
}

static void check_fwd(const float *got, const double *ref, long n, const char *what) {
    float *rf = to_float(ref, n);
    assert_close_rel(got, rf, n, TOL_FWD, what);
    free(rf);
}

// ================================================================ encoder

typedef struct { int B, T, C; const int32_t *inp; double *wte, *wpe, *w, *out; } EncCtx;

// out (B,T,C) = wte[inp] + wpe[t].
static void ref_encoder(double *out, const int32_t *inp, const double *wte, const double *wpe,
                        int B, int T, int C) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++)
                out[((long)b * T + t) * C + c] = wte[(long)inp[b * T + t] * C + c] + wpe[(long)t * C + c];
}
static double enc_loss(void *p) {
    EncCtx *x = p;
    ref_encoder(x->out, x->inp, x->wte, x->wpe, x->B, x->T, x->C);
    return dot_d(x->out, x->w, (long)x->B * x->T * x->C);
}

typedef struct { int B, T, C, V; } EncCfg;
// C 37: two channel blocks in the dwte scatter, the second partial.
static const EncCfg enc_cfgs[] = { {3, 7, 12, 11}, {2, 5, 37, 11} };

static void test_encoder_forward(void **state) {
    for (size_t k = 0; k < sizeof enc_cfgs / sizeof *enc_cfgs; k++) {
        const int B = enc_cfgs[k].B, T = enc_cfgs[k].T, C = enc_cfgs[k].C, V = enc_cfgs[k].V;
        const int Tmax = T + 2;
        TestRng r = test_rng(100 + k);
        int32_t *inp = malloc(sizeof(int32_t) * B * T);
        for (int i = 0; i < B * T; i++) inp[i] = (int32_t)(test_next(&r) % V);
        float *wte = frand(&r, (long)V * C, -1, 1), *wpe = frand(&r, (long)Tmax * C, -1, 1);
        float *out = falloc((long)B * T * C), *out2 = falloc((long)B * T * C);
        double *wted = to_double(wte, (long)V * C), *wped = to_double(wpe, (long)Tmax * C);
        double *ref = dalloc((long)B * T * C);
        encoder_forward(out, inp, wte, wpe, B, T, C);
        ref_encoder(ref, inp, wted, wped, B, T, C);
        check_fwd(out, ref, (long)B * T * C, "encoder out");
        encoder_forward(out2, inp, wte, wpe, B, T, C);
        assert_memory_equal(out, out2, sizeof(float) * B * T * C);
        free(inp); free(wte); free(wpe); free(out); free(out2); free(wted); free(wped); free(ref);
    }
}

static void test_encoder_backward(void **state) {
    for (size_t k = 0; k < sizeof enc_cfgs / sizeof *enc_cfgs; k++) {
        const int B = enc_cfgs[k].B, T = enc_cfgs[k].T, C = enc_cfgs[k].C, V = enc_cfgs[k].V;
        const int Tmax = T + 2;  // rows of wpe past T must get zero gradient
        const long n = (long)B * T * C;
        TestRng r = test_rng(200 + k);
        int32_t *inp = malloc(sizeof(int32_t) * B * T);
        // More positions than tokens: repeated tokens exercise the scatter-add.
        for (int i = 0; i < B * T; i++) inp[i] = (int32_t)(test_next(&r) % (V - 2));
        float *wte = frand(&r, (long)V * C, -1, 1), *wpe = frand(&r, (long)Tmax * C, -1, 1);
        float *w = frand(&r, n, -1, 1);
        float *dwte = falloc((long)V * C), *dwpe = falloc((long)Tmax * C);
        encoder_backward(dwte, dwpe, w, inp, B, T, C);

        EncCtx ctx = { B, T, C, inp, to_double(wte, (long)V * C), to_double(wpe, (long)Tmax * C),
                       to_double(w, n), dalloc(n) };
        check_fd(dwte, enc_loss, &ctx, ctx.wte, (long)V * C, "encoder dwte");
        check_fd(dwpe, enc_loss, &ctx, ctx.wpe, (long)Tmax * C, "encoder dwpe");

        float *dwte1 = fcopy(dwte, (long)V * C), *dwpe1 = fcopy(dwpe, (long)Tmax * C);
        encoder_backward(dwte, dwpe, w, inp, B, T, C);
        check_doubled(dwte, dwte1, (long)V * C, "encoder dwte accumulate");
        check_doubled(dwpe, dwpe1, (long)Tmax * C, "encoder dwpe accumulate");

        free(inp); free(wte); free(wpe); free(w); free(dwte); free(dwpe); free(dwte1); free(dwpe1);
        free(ctx.wte); free(ctx.wpe); free(ctx.w); free(ctx.out);
    }
}

// ================================================================ layernorm

typedef struct { int N, C; double *inp, *weight, *bias, *w, *out; } LnCtx;

// out (N,C) = (x - mean) / sqrt(var + 1e-5) * weight + bias, biased variance.
static void ref_layernorm(double *out, double *mean, double *rstd, const double *inp,
                          const double *weight, const double *bias, int N, int C) {
    for (int n = 0; n < N; n++) {
        const double *x = inp + (long)n * C;
        double m = 0, v = 0;
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        for (int c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
        v /= C;
        const double rs = 1.0 / sqrt(v + 1e-5);
        for (int c = 0; c < C; c++) out[(long)n * C + c] = (x[c] - m) * rs * weight[c] + bias[c];
        if (mean) mean[n] = m;
        if (rstd) rstd[n] = rs;
    }
}
static double ln_loss(void *p) {
    LnCtx *x = p;
    ref_layernorm(x->out, NULL, NULL, x->inp, x->weight, x->bias, x->N, x->C);
    return dot_d(x->out, x->w, (long)x->N * x->C);
}

typedef struct { int N, C; } LnCfg;
// N = B*T = 21; C 37: two channel blocks in the dweight/dbias reduction.
static const LnCfg ln_cfgs[] = { {21, 12}, {21, 37} };

static void test_layernorm_forward(void **state) {
    for (size_t k = 0; k < sizeof ln_cfgs / sizeof *ln_cfgs; k++) {
        const int N = ln_cfgs[k].N, C = ln_cfgs[k].C;
        const long n = (long)N * C;
        TestRng r = test_rng(300 + k);
        // Offset inputs: a one-pass variance would lose digits here.
        float *inp = frand(&r, n, 2, 6), *weight = frand(&r, C, 0.5f, 1.5f), *bias = frand(&r, C, -1, 1);
        // Row 1 nearly constant: var ~3e-7 << eps, so eps (1e-5) dominates its rstd.
        for (int c = 0; c < C; c++) inp[C + c] = test_uniform(&r, -1e-3f, 1e-3f);
        float *out = falloc(n), *mean = falloc(N), *rstd = falloc(N);
        double *inpd = to_double(inp, n), *wd = to_double(weight, C), *bd = to_double(bias, C);
        double *ref = dalloc(n), *refm = dalloc(N), *refr = dalloc(N);
        layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
        ref_layernorm(ref, refm, refr, inpd, wd, bd, N, C);
        check_fwd(out, ref, n, "layernorm out");
        check_fwd(mean, refm, N, "layernorm mean");
        check_fwd(rstd, refr, N, "layernorm rstd");
        float *out2 = falloc(n), *mean2 = falloc(N), *rstd2 = falloc(N);
        layernorm_forward(out2, mean2, rstd2, inp, weight, bias, N, C);
        assert_memory_equal(out, out2, sizeof(float) * n);
        assert_memory_equal(rstd, rstd2, sizeof(float) * N);
        free(inp); free(weight); free(bias); free(out); free(mean); free(rstd);
        free(inpd); free(wd); free(bd); free(ref); free(refm); free(refr);
        free(out2); free(mean2); free(rstd2);
    }
}

static void test_layernorm_backward(void **state) {
    for (size_t k = 0; k < sizeof ln_cfgs / sizeof *ln_cfgs; k++) {
        const int N = ln_cfgs[k].N, C = ln_cfgs[k].C;
        const long n = (long)N * C;
        TestRng r = test_rng(400 + k);
        float *inp = frand(&r, n, -2, 2), *weight = frand(&r, C, 0.5f, 1.5f), *bias = frand(&r, C, -1, 1);
        float *w = frand(&r, n, -1, 1);
        float *out = falloc(n), *mean = falloc(N), *rstd = falloc(N);
        float *dinp = falloc(n), *dweight = falloc(C), *dbias = falloc(C);
        layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
        layernorm_backward(dinp, dweight, dbias, w, inp, weight, mean, rstd, N, C);

        LnCtx ctx = { N, C, to_double(inp, n), to_double(weight, C), to_double(bias, C),
                      to_double(w, n), dalloc(n) };
        check_fd(dinp, ln_loss, &ctx, ctx.inp, n, "layernorm dinp");
        check_fd(dweight, ln_loss, &ctx, ctx.weight, C, "layernorm dweight");
        check_fd(dbias, ln_loss, &ctx, ctx.bias, C, "layernorm dbias");

        float *dinp1 = fcopy(dinp, n), *dweight1 = fcopy(dweight, C), *dbias1 = fcopy(dbias, C);
        layernorm_backward(dinp, dweight, dbias, w, inp, weight, mean, rstd, N, C);
        check_doubled(dinp, dinp1, n, "layernorm dinp accumulate");
        check_doubled(dweight, dweight1, C, "layernorm dweight accumulate");
        check_doubled(dbias, dbias1, C, "layernorm dbias accumulate");

        free(inp); free(weight); free(bias); free(w); free(out); free(mean); free(rstd);
        free(dinp); free(dweight); free(dbias); free(dinp1); free(dweight1); free(dbias1);
        free(ctx.inp); free(ctx.weight); free(ctx.bias); free(ctx.w); free(ctx.out);
    }
}

// ================================================================ matmul

typedef struct { int N, C, OC; double *inp, *weight, *bias, *w, *out; } MmCtx;

// out (N,OC) = inp (N,C) @ weight (OC,C)^T + bias (OC,) (bias may be NULL).
static void ref_matmul(double *out, const double *inp, const double *weight, const double *bias,
                       int N, int C, int OC) {
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = bias ? bias[o] : 0.0;
            for (int c = 0; c < C; c++) s += inp[(long)n * C + c] * weight[(long)o * C + c];
            out[(long)n * OC + o] = s;
        }
}
static double mm_loss(void *p) {
    MmCtx *x = p;
    ref_matmul(x->out, x->inp, x->weight, x->bias, x->N, x->C, x->OC);
    return dot_d(x->out, x->w, (long)x->N * x->OC);
}

typedef struct { int N, C, OC; } MmCfg;
// OC 70: two blocks in the dbias column sums, the second partial (single channels); OC 148: two
// whole blocks, then a partial one of a vector and single channels.
static const MmCfg mm_cfgs[] = { {21, 12, 10}, {21, 13, 70}, {9, 8, 148} };

static void test_matmul_forward(void **state) {
    for (size_t k = 0; k < sizeof mm_cfgs / sizeof *mm_cfgs; k++) {
        const int N = mm_cfgs[k].N, C = mm_cfgs[k].C, OC = mm_cfgs[k].OC;
        TestRng r = test_rng(500 + k);
        float *inp = frand(&r, (long)N * C, -1, 1), *weight = frand(&r, (long)OC * C, -1, 1);
        float *bias = frand(&r, OC, -1, 1);
        float *out = falloc((long)N * OC), *out2 = falloc((long)N * OC);
        double *inpd = to_double(inp, (long)N * C), *wd = to_double(weight, (long)OC * C);
        double *bd = to_double(bias, OC), *ref = dalloc((long)N * OC);

        matmul_forward(out, inp, weight, bias, N, C, OC);
        ref_matmul(ref, inpd, wd, bd, N, C, OC);
        check_fwd(out, ref, (long)N * OC, "matmul out (bias)");
        matmul_forward(out2, inp, weight, bias, N, C, OC);
        assert_memory_equal(out, out2, sizeof(float) * N * OC);

        // No bias; out pre-filled with garbage must be overwritten.
        for (long i = 0; i < (long)N * OC; i++) out[i] = 1e30f;
        matmul_forward(out, inp, weight, NULL, N, C, OC);
        ref_matmul(ref, inpd, wd, NULL, N, C, OC);
        check_fwd(out, ref, (long)N * OC, "matmul out (no bias)");

        free(inp); free(weight); free(bias); free(out); free(out2);
        free(inpd); free(wd); free(bd); free(ref);
    }
}

static void test_matmul_backward(void **state) {
    for (size_t k = 0; k < sizeof mm_cfgs / sizeof *mm_cfgs; k++) {
        const int N = mm_cfgs[k].N, C = mm_cfgs[k].C, OC = mm_cfgs[k].OC;
        TestRng r = test_rng(600 + k);
        float *inp = frand(&r, (long)N * C, -1, 1), *weight = frand(&r, (long)OC * C, -1, 1);
        float *bias = frand(&r, OC, -1, 1), *w = frand(&r, (long)N * OC, -1, 1);
        float *dinp = fnan((long)N * C), *dweight = falloc((long)OC * C), *dbias = falloc(OC);
        matmul_backward(dinp, dweight, dbias, w, inp, weight, N, C, OC);   // dinp overwritten

        MmCtx ctx = { N, C, OC, to_double(inp, (long)N * C), to_double(weight, (long)OC * C),
                      to_double(bias, OC), to_double(w, (long)N * OC), dalloc((long)N * OC) };
        check_fd(dinp, mm_loss, &ctx, ctx.inp, (long)N * C, "matmul dinp");
        check_fd(dweight, mm_loss, &ctx, ctx.weight, (long)OC * C, "matmul dweight");
        check_fd(dbias, mm_loss, &ctx, ctx.bias, OC, "matmul dbias");

        float *dinp1 = fcopy(dinp, (long)N * C), *dweight1 = fcopy(dweight, (long)OC * C);
        float *dbias1 = fcopy(dbias, OC);
        fill_nan(dinp, (long)N * C);
        matmul_backward(dinp, dweight, dbias, w, inp, weight, N, C, OC);
        check_overwritten(dinp, dinp1, (long)N * C, "matmul dinp overwritten");
        check_doubled(dweight, dweight1, (long)OC * C, "matmul dweight accumulate");
        check_doubled(dbias, dbias1, OC, "matmul dbias accumulate");

        // NULL dinp and dbias are skipped; dweight still accumulates (now 3x).
        matmul_backward(NULL, dweight, NULL, w, inp, weight, N, C, OC);
        for (long i = 0; i < (long)OC * C; i++) dweight1[i] *= 1.5f;
        check_doubled(dweight, dweight1, (long)OC * C, "matmul dweight with NULL dinp/dbias");

        free(inp); free(weight); free(bias); free(w); free(dinp); free(dweight); free(dbias);
        free(dinp1); free(dweight1); free(dbias1);
        free(ctx.inp); free(ctx.weight); free(ctx.bias); free(ctx.w); free(ctx.out);
    }
}

// ================================================================ attention

typedef struct { int B, T, C, NH; float p; uint64_t key; double *qkv, *w, *out, *att; } AttCtx;

// Naive causal attention: att (B,NH,T,T) softmax of q.k/sqrt(hs) over t2 <= t (0 above the
// diagonal); out (B,T,C) = sum_t2 drop(att)[t,t2] v[t2], with the shared dropout mask of the
// flat att index.
static void ref_attention(double *out, double *att, const double *qkv, int B, int T, int C,
                          int NH, float p, uint64_t key) {
    const int hs = C / NH;
    const long C3 = 3L * C;
    const double scale = 1.0 / sqrt((double)hs);
    const uint32_t thr = dropout_threshold(p);
    const double keep_scale = p > 0 ? 1.0 / (1.0 - (double)p) : 1.0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const long row = (((long)b * NH + h) * T + t) * T;
                const double *q = qkv + ((long)b * T + t) * C3 + h * hs;
                double maxv = -INFINITY, sum = 0;
                for (int t2 = 0; t2 <= t; t2++) {
                    const double *kk = qkv + ((long)b * T + t2) * C3 + C + h * hs;
                    double s = 0;
                    for (int i = 0; i < hs; i++) s += q[i] * kk[i];
                    att[row + t2] = s * scale;
                    if (att[row + t2] > maxv) maxv = att[row + t2];
                }
                for (int t2 = 0; t2 <= t; t2++) sum += exp(att[row + t2] - maxv);
                for (int t2 = 0; t2 <= t; t2++) att[row + t2] = exp(att[row + t2] - maxv) / sum;
                for (int t2 = t + 1; t2 < T; t2++) att[row + t2] = 0;
                for (int i = 0; i < hs; i++) {
                    double s = 0;
                    for (int t2 = 0; t2 <= t; t2++) {
                        const double m = p > 0 ? (dropout_keep(key, (uint64_t)(row + t2), thr) ? keep_scale : 0.0) : 1.0;
                        s += att[row + t2] * m * qkv[((long)b * T + t2) * C3 + 2 * C + h * hs + i];
                    }
                    out[((long)b * T + t) * C + h * hs + i] = s;
                }
            }
}
static double att_loss(void *p) {
    AttCtx *x = p;
    ref_attention(x->out, x->att, x->qkv, x->B, x->T, x->C, x->NH, x->p, x->key);
    return dot_d(x->out, x->w, (long)x->B * x->T * x->C);
}

typedef struct { int B, T, C, NH; } AttCfg;
// hs 4 (only the scalar tail of the 8-lane dot), hs 13 (8 lanes + tail), T 1 with C 10
// (hs 5, not a multiple of 8), hs 24 with T 37 (whole 8x8 blocks of the key transpose, then
// both edges).
static const AttCfg att_cfgs[] = { {3, 7, 12, 3}, {2, 9, 39, 3}, {2, 1, 10, 2}, {2, 37, 48, 2} };
static const float att_ps[] = { 0.0f, 0.25f };
#define ATT_KEY 0x1234abcdULL
// A key with the one-process row map (global index = local index).
#define DK(k) ((DropoutKey){ (k), 0, 1, NULL })

static void attention_fwd_case(const AttCfg *cf, float p, float range, uint64_t seed) {
    const int B = cf->B, T = cf->T, C = cf->C, NH = cf->NH;
    const long nq = (long)B * T * 3 * C, no = (long)B * T * C, na = (long)B * NH * T * T;
    TestRng r = test_rng(seed);
    float *qkv = frand(&r, nq, -range, range);
    float *out = falloc(no), *att = falloc(na), *out2 = falloc(no), *att2 = falloc(na);
    double *qkvd = to_double(qkv, nq), *ref = dalloc(no), *refa = dalloc(na);
    // Garbage in att: the op must write every element, zeros above the diagonal included.
    for (long i = 0; i < na; i++) att[i] = 7.0f;
    attention_forward(out, att, qkv, B, T, C, NH, p, DK(ATT_KEY));
    ref_attention(ref, refa, qkvd, B, T, C, NH, p, ATT_KEY);
    check_fwd(out, ref, no, "attention out");
    check_fwd(att, refa, na, "attention att");
    for (long bh = 0; bh < (long)B * NH; bh++)
        for (int t = 0; t < T; t++) {
            double s = 0;
            for (int t2 = 0; t2 < T; t2++) {
                const float a = att[(bh * T + t) * T + t2];
                if (t2 > t) assert_true(a == 0.0f);
                s += a;
            }
            assert_true(fabs(s - 1.0) < 1e-5);  // rows of att (pre-dropout) sum to 1
        }
    attention_forward(out2, att2, qkv, B, T, C, NH, p, DK(ATT_KEY));
    assert_memory_equal(out, out2, sizeof(float) * no);
    assert_memory_equal(att, att2, sizeof(float) * na);
    free(qkv); free(out); free(att); free(out2); free(att2); free(qkvd); free(ref); free(refa);
}

static void test_attention_forward(void **state) {
    for (size_t k = 0; k < sizeof att_cfgs / sizeof *att_cfgs; k++)
        attention_fwd_case(&att_cfgs[k], 0.0f, 2.0f, 700 + k);
    // Scores in the thousands: expf overflows unless the row max is subtracted.
    attention_fwd_case(&att_cfgs[0], 0.0f, 40.0f, 705);
}

static void test_attention_forward_dropout(void **state) {
    for (size_t k = 0; k < sizeof att_cfgs / sizeof *att_cfgs; k++)
        attention_fwd_case(&att_cfgs[k], 0.25f, 2.0f, 710 + k);
    // The mask must actually change the output (a key-independent op would pass above
    // only if the reference were wrong the same way).
    const AttCfg *cf = &att_cfgs[0];
    const long nq = (long)cf->B * cf->T * 3 * cf->C, no = (long)cf->B * cf->T * cf->C;
    const long na = (long)cf->B * cf->NH * cf->T * cf->T;
    TestRng r = test_rng(719);
    float *qkv = frand(&r, nq, -2, 2), *o1 = falloc(no), *o2 = falloc(no), *att = falloc(na);
    attention_forward(o1, att, qkv, cf->B, cf->T, cf->C, cf->NH, 0.25f, DK(ATT_KEY));
    attention_forward(o2, att, qkv, cf->B, cf->T, cf->C, cf->NH, 0.25f, DK(ATT_KEY + 1));
    assert_true(memcmp(o1, o2, sizeof(float) * no) != 0);
    free(qkv); free(o1); free(o2); free(att);
}

// attention_forward_cached (incremental inference) against the naive reference on the whole
// sequence, fed in chunks of new positions: every chunk's keys and values land in the cache, and
// the outputs and probabilities of its last Tq rows equal the reference's rows at those positions.
// Garbage in out and att first: the op must write every element it owns.
static void attention_cached_case(const AttCfg *cf, const int *chunks, const int *tq, int n_chunks, uint64_t seed) {
    const int B = cf->B, T = cf->T, C = cf->C, NH = cf->NH;
    const long C3 = 3L * C, nq = (long)B * T * C3, no = (long)B * T * C, na = (long)B * NH * T * T;
    TestRng r = test_rng(seed);
    float *qkv = frand(&r, nq, -2, 2), *kc = falloc(no), *vc = falloc(no);
    float *chunk = falloc(nq), *out = falloc(no), *att = falloc(na);
    double *qkvd = to_double(qkv, nq), *ref = dalloc(no), *refa = dalloc(na), *ro = dalloc(no), *ra = dalloc(na);
    ref_attention(ref, refa, qkvd, B, T, C, NH, 0.0f, 0);
    int p0 = 0;
    for (int c = 0; c < n_chunks; c++) {
        const int Tn = chunks[c], Tq = tq[c], L = p0 + Tn, q0 = p0 + Tn - Tq;   // q0: first attending position
        for (int b = 0; b < B; b++)
            memcpy(chunk + (long)b * Tn * C3, qkv + ((long)b * T + p0) * C3, sizeof(float) * (size_t)(Tn * C3));
        for (long i = 0; i < na; i++) att[i] = 7.0f;
        for (long i = 0; i < no; i++) out[i] = 7.0f;
        attention_forward_cached(out, att, kc, vc, chunk, B, p0, Tn, Tq, T, C, NH);
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < L; t++)   // the cache holds every position fed so far, exactly
                for (int i = 0; i < C; i++) {
                    assert_true(kc[((long)b * T + t) * C + i] == qkv[((long)b * T + t) * C3 + C + i]);
                    assert_true(vc[((long)b * T + t) * C + i] == qkv[((long)b * T + t) * C3 + 2 * C + i]);
                }
            for (int t = 0; t < Tq; t++) {
                memcpy(ro + ((long)b * Tq + t) * C, ref + ((long)b * T + q0 + t) * C, sizeof(double) * (size_t)C);
                for (int h = 0; h < NH; h++)
                    memcpy(ra + (((long)b * NH + h) * Tq + t) * L, refa + (((long)b * NH + h) * T + q0 + t) * T,
                           sizeof(double) * (size_t)L);
            }
        }
        char what[96];
        snprintf(what, sizeof what, "attention_forward_cached out (p0 %d, Tn %d, Tq %d)", p0, Tn, Tq);
        check_fwd(out, ro, (long)B * Tq * C, what);
        snprintf(what, sizeof what, "attention_forward_cached att (p0 %d, Tn %d, Tq %d)", p0, Tn, Tq);
        check_fwd(att, ra, (long)B * NH * Tq * L, what);
        p0 += Tn;
    }
    assert_int_equal(p0, T);
    free(qkv); free(kc); free(vc); free(chunk); free(out); free(att);
    free(qkvd); free(ref); free(refa); free(ro); free(ra);
}

static void test_attention_forward_cached(void **state) {
    // Every new position alone (sampling), then chunks of 1, 3 and the rest with some only the last
    // row attending (the model's last block), then the whole sequence at once.
    for (size_t k = 0; k < sizeof att_cfgs / sizeof *att_cfgs; k++) {
        const AttCfg *cf = &att_cfgs[k];
        int ones[64], all_q[64];
        for (int t = 0; t < cf->T; t++) ones[t] = all_q[t] = 1;
        attention_cached_case(cf, ones, all_q, cf->T, 730 + k);
        if (cf->T >= 5) {
            const int chunks[] = { 1, 3, cf->T - 4 }, tq[] = { 1, 1, cf->T - 4 }, tq_last[] = { 1, 3, 1 };
            attention_cached_case(cf, chunks, tq, 3, 740 + k);
            attention_cached_case(cf, chunks, tq_last, 3, 745 + k);
        }
        const int whole[] = { cf->T };
        attention_cached_case(cf, whole, whole, 1, 750 + k);
    }
    // Threads over (b,h) and more keys than one transposed tile of keys (hs 64: 128 keys).
    const AttCfg big = { 2, 150, 128, 2 };
    const int chunks[] = { 149, 1 }, tq[] = { 149, 1 };
    attention_cached_case(&big, chunks, tq, 2, 760);
    const int tail[] = { 140, 10 }, tq_tail[] = { 140, 3 };
    attention_cached_case(&big, tail, tq_tail, 2, 761);
}

// The whole sequence in one call is attention_forward without dropout, bit for bit.
static void test_attention_forward_cached_is_forward(void **state) {
    const AttCfg cfgs[] = { att_cfgs[0], att_cfgs[1], att_cfgs[2], { 2, 150, 128, 2 } };
    for (size_t k = 0; k < sizeof cfgs / sizeof *cfgs; k++) {
        const AttCfg *cf = &cfgs[k];
        const long nq = (long)cf->B * cf->T * 3 * cf->C, no = (long)cf->B * cf->T * cf->C;
        const long na = (long)cf->B * cf->NH * cf->T * cf->T;
        TestRng r = test_rng(770 + k);
        float *qkv = frand(&r, nq, -2, 2), *o1 = falloc(no), *o2 = falloc(no), *a1 = falloc(na), *a2 = falloc(na);
        float *kc = falloc(no), *vc = falloc(no);
        attention_forward(o1, a1, qkv, cf->B, cf->T, cf->C, cf->NH, 0.0f, DK(ATT_KEY));
        attention_forward_cached(o2, a2, kc, vc, qkv, cf->B, 0, cf->T, cf->T, cf->T, cf->C, cf->NH);
        assert_memory_equal(o1, o2, sizeof(float) * no);
        assert_memory_equal(a1, a2, sizeof(float) * na);
        free(qkv); free(o1); free(o2); free(a1); free(a2); free(kc); free(vc);
    }
}

// Backward vs FD for each config and p; with p > 0 the mask is fixed by the same key in the
// op and the reference, so L is smooth in qkv.
static void test_attention_backward(void **state) {
    for (size_t pi = 0; pi < sizeof att_ps / sizeof *att_ps; pi++)
        for (size_t k = 0; k < sizeof att_cfgs / sizeof *att_cfgs; k++) {
            const AttCfg *cf = &att_cfgs[k];
            const int B = cf->B, T = cf->T, C = cf->C, NH = cf->NH;
            const float p = att_ps[pi];
            const long nq = (long)B * T * 3 * C, no = (long)B * T * C, na = (long)B * NH * T * T;
            TestRng r = test_rng(800 + 10 * pi + k);
            float *qkv = frand(&r, nq, -2, 2), *w = frand(&r, no, -1, 1);
            float *out = falloc(no), *att = falloc(na), *scratch = falloc(na), *dqkv = fnan(nq);
            attention_forward(out, att, qkv, B, T, C, NH, p, DK(ATT_KEY));
            attention_backward(dqkv, scratch, w, qkv, att, B, T, C, NH, p, DK(ATT_KEY));   // dqkv overwritten

            AttCtx ctx = { B, T, C, NH, p, ATT_KEY, to_double(qkv, nq), to_double(w, no),
                           dalloc(no), dalloc(na) };
            check_fd(dqkv, att_loss, &ctx, ctx.qkv, nq, p > 0 ? "attention dqkv (dropout)" : "attention dqkv");

            float *dqkv1 = fcopy(dqkv, nq);
            fill_nan(dqkv, nq);
            attention_backward(dqkv, scratch, w, qkv, att, B, T, C, NH, p, DK(ATT_KEY));
            check_overwritten(dqkv, dqkv1, nq, "attention dqkv overwritten");

            free(qkv); free(w); free(out); free(att); free(scratch); free(dqkv); free(dqkv1);
            free(ctx.qkv); free(ctx.w); free(ctx.out); free(ctx.att);
        }
}

// Changing q/k/v at time t0 leaves out and att at times < t0 bitwise unchanged; and a
// gradient that is zero at times >= t0 gives exactly zero dqkv at times >= t0.
static void test_attention_causal(void **state) {
    const int B = 3, T = 7, C = 12, NH = 3, t0 = 4;
    const long nq = (long)B * T * 3 * C, no = (long)B * T * C, na = (long)B * NH * T * T;
    for (size_t pi = 0; pi < sizeof att_ps / sizeof *att_ps; pi++) {
        const float p = att_ps[pi];
        TestRng r = test_rng(900 + pi);
        float *qkv = frand(&r, nq, -2, 2), *qkv2 = fcopy(qkv, nq);
        float *o1 = falloc(no), *o2 = falloc(no), *a1 = falloc(na), *a2 = falloc(na);
        for (int b = 0; b < B; b++)
            for (int c = 0; c < 3 * C; c++) qkv2[((long)b * T + t0) * 3 * C + c] += 0.5f;
        attention_forward(o1, a1, qkv, B, T, C, NH, p, DK(ATT_KEY));
        attention_forward(o2, a2, qkv2, B, T, C, NH, p, DK(ATT_KEY));
        for (int b = 0; b < B; b++) {
            assert_memory_equal(o1 + (long)b * T * C, o2 + (long)b * T * C, sizeof(float) * t0 * C);
            assert_true(memcmp(o1 + ((long)b * T + t0) * C, o2 + ((long)b * T + t0) * C,
                               sizeof(float) * (T - t0) * C) != 0);
            for (int h = 0; h < NH; h++)
                assert_memory_equal(a1 + ((long)b * NH + h) * T * T, a2 + ((long)b * NH + h) * T * T,
                                    sizeof(float) * t0 * T);
        }

        float *dout = frand(&r, no, -1, 1), *dqkv = falloc(nq), *scratch = falloc(na);
        for (int b = 0; b < B; b++)
            for (int t = t0; t < T; t++)
                for (int c = 0; c < C; c++) dout[((long)b * T + t) * C + c] = 0.0f;
        attention_backward(dqkv, scratch, dout, qkv, a1, B, T, C, NH, p, DK(ATT_KEY));
        for (int b = 0; b < B; b++)
            for (int t = t0; t < T; t++)
                for (int c = 0; c < 3 * C; c++) assert_true(dqkv[((long)b * T + t) * 3 * C + c] == 0.0f);
        free(qkv); free(qkv2); free(o1); free(o2); free(a1); free(a2);
        free(dout); free(dqkv); free(scratch);
    }
}

// ================================================================ GELU

typedef struct { long N; double *inp, *w, *out; } GeluCtx;

// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
static void ref_gelu(double *out, const double *inp, long N) {
    const double k = sqrt(2.0 / M_PI);
    for (long i = 0; i < N; i++) {
        const double x = inp[i];
        out[i] = 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
    }
}
static double gelu_loss(void *p) {
    GeluCtx *x = p;
    ref_gelu(x->out, x->inp, x->N);
    return dot_d(x->out, x->w, x->N);
}

// (B,T,4C) plus 5: a count no vector width divides, so the scalar tail runs as well as the
// vector loop (each has its own copy of the formula).
#define GELU_N (3 * 7 * 4 * 12 + 5)

static void test_gelu_forward(void **state) {
    const long N = GELU_N;
    TestRng r = test_rng(1000);
    float *inp = frand(&r, N, -6, 6), *out = falloc(N), *out2 = falloc(N);
    inp[0] = -30.0f;  // far tails: exp overflow must give 0 (not NaN), and x itself at +30
    inp[1] = 30.0f;
    double *inpd = to_double(inp, N), *ref = dalloc(N);
    gelu_forward(out, inp, N);
    ref_gelu(ref, inpd, N);
    check_fwd(out, ref, N, "gelu out");
    // Per element too: max-relative hides errors on the small negative tail.
    for (long i = 0; i < N; i++) assert_true(fabs(out[i] - ref[i]) <= 1e-6 * (1.0 + fabs(ref[i])));
    // Per element relative where GELU is not tiny, also on the negative side.
    for (long i = 0; i < N; i++)
        if (fabs(ref[i]) > 1e-3) assert_true(fabs(out[i] - ref[i]) <= 1e-5 * fabs(ref[i]));
    gelu_forward(out2, inp, N);
    assert_memory_equal(out, out2, sizeof(float) * N);
    free(inp); free(out); free(out2); free(inpd); free(ref);
}

static void test_gelu_backward(void **state) {
    const long N = GELU_N;
    TestRng r = test_rng(1100);
    float *inp = frand(&r, N, -6, 6), *w = frand(&r, N, -1, 1), *dinp = fnan(N);   // overwritten
    inp[0] = -30.0f;  // far tails: derivative 0 and 1, finite
    inp[1] = 30.0f;
    gelu_backward(dinp, inp, w, N);
    assert_true(fabsf(dinp[0]) < 1e-30f && fabsf(dinp[1] - w[1]) <= 1e-7f * fabsf(w[1]));
    GeluCtx ctx = { N, to_double(inp, N), to_double(w, N), dalloc(N) };
    check_fd(dinp, gelu_loss, &ctx, ctx.inp, N, "gelu dinp");
    float *dinp1 = fcopy(dinp, N);
    fill_nan(dinp, N);
    gelu_backward(dinp, inp, w, N);
    check_overwritten(dinp, dinp1, N, "gelu dinp overwritten");
    free(inp); free(w); free(dinp); free(dinp1); free(ctx.inp); free(ctx.w); free(ctx.out);
}

// ================================================================ residual

typedef struct { long N; double *a, *b, *w, *out; } ResCtx;

static double res_loss(void *p) {
    ResCtx *x = p;
    for (long i = 0; i < x->N; i++) x->out[i] = x->a[i] + x->b[i];
    return dot_d(x->out, x->w, x->N);
}

static void test_residual(void **state) {
    const long N = 3 * 7 * 12;
    TestRng r = test_rng(1200);
    float *a = frand(&r, N, -1, 1), *b = frand(&r, N, -1, 1), *w = frand(&r, N, -1, 1);
    float *out = falloc(N), *da = falloc(N), *db = falloc(N);
    ResCtx ctx = { N, to_double(a, N), to_double(b, N), to_double(w, N), dalloc(N) };
    residual_forward(out, a, b, N);
    res_loss(&ctx);
    check_fwd(out, ctx.out, N, "residual out");
    residual_backward(da, db, w, N);
    check_fd(da, res_loss, &ctx, ctx.a, N, "residual da");
    check_fd(db, res_loss, &ctx, ctx.b, N, "residual db");
    float *da1 = fcopy(da, N), *db1 = fcopy(db, N);
    residual_backward(da, db, w, N);
    check_doubled(da, da1, N, "residual da accumulate");
    check_doubled(db, db1, N, "residual db accumulate");
    free(a); free(b); free(w); free(out); free(da); free(db); free(da1); free(db1);
    free(ctx.a); free(ctx.b); free(ctx.w); free(ctx.out);
}

// ================================================================ dropout

typedef struct { long N; float p; uint64_t key; double *inp, *w, *out; } DropCtx;

// out = inp * keep / (1 - p) with the shared counter-based mask.
static void ref_dropout(double *out, const double *inp, long N, float p, uint64_t key) {
    const uint32_t thr = dropout_threshold(p);
    for (long i = 0; i < N; i++)
        out[i] = dropout_keep(key, (uint64_t)i, thr) ? inp[i] / (1.0 - (double)p) : 0.0;
}
static double drop_loss(void *p) {
    DropCtx *x = p;
    ref_dropout(x->out, x->inp, x->N, x->p, x->key);
    return dot_d(x->out, x->w, x->N);
}

static void test_dropout_identity(void **state) {
    const long N = 3 * 7 * 12;
    TestRng r = test_rng(1300);
    float *inp = frand(&r, N, -1, 1), *out = falloc(N), *dout = frand(&r, N, -1, 1);
    float *dinp = frand(&r, N, -1, 1), *expect = falloc(N);
    dropout_forward(out, inp, N, N, 0.0f, DK(42));
    assert_memory_equal(out, inp, sizeof(float) * N);
    dropout_forward(out, out, N, N, 0.0f, DK(42));  // in place
    assert_memory_equal(out, inp, sizeof(float) * N);
    for (long i = 0; i < N; i++) expect[i] = dout[i];   // the identity; dinp overwritten
    fill_nan(dinp, N);
    dropout_backward(dinp, dout, N, N, 0.0f, DK(42));
    assert_memory_equal(dinp, expect, sizeof(float) * N);
    free(inp); free(out); free(dout); free(dinp); free(expect);
}

// Same key, same mask; different key, different mask; the mask is the header's function.
static void test_dropout_mask_determinism(void **state) {
    const long N = 4096;
    const float p = 0.5f;
    const uint64_t k1 = dropout_key(1234, 7), k2 = dropout_key(1234, 8);
    float *ones = falloc(N), *o1 = falloc(N), *o2 = falloc(N), *o3 = falloc(N);
    for (long i = 0; i < N; i++) ones[i] = 1.0f;
    dropout_forward(o1, ones, N, N, p, DK(k1));
    dropout_forward(o2, ones, N, N, p, DK(k1));
    dropout_forward(o3, ones, N, N, p, DK(k2));
    assert_memory_equal(o1, o2, sizeof(float) * N);
    long differ = 0;
    for (long i = 0; i < N; i++) {
        assert_true((o1[i] != 0.0f) == dropout_keep(k1, (uint64_t)i, dropout_threshold(p)));
        differ += (o1[i] != 0.0f) != (o3[i] != 0.0f);
    }
    // Independent masks at p = 0.5 disagree on about half the elements.
    assert_true(differ > N / 4 && differ < 3 * N / 4);
    // In place matches out of place.
    memcpy(o2, ones, sizeof(float) * N);
    dropout_forward(o2, o2, N, N, p, DK(k1));
    assert_memory_equal(o1, o2, sizeof(float) * N);
    free(ones); free(o1); free(o2); free(o3);
}

// Kept fraction within 5 sigma of 1 - p over 1e5 elements; kept values scaled by 1/(1-p).
static void test_dropout_statistics(void **state) {
    const long N = 100000;
    const float ps[] = { 0.1f, 0.5f, 0.9f };
    float *ones = falloc(N), *out = falloc(N);
    for (long i = 0; i < N; i++) ones[i] = 1.0f;
    for (size_t k = 0; k < sizeof ps / sizeof *ps; k++) {
        const double p = ps[k];
        dropout_forward(out, ones, N, N, ps[k], DK(dropout_key(99, k)));
        long kept = 0;
        for (long i = 0; i < N; i++) {
            if (out[i] == 0.0f) continue;
            kept++;
            assert_true(fabs(out[i] - 1.0 / (1.0 - p)) <= 1e-6 / (1.0 - p));
        }
        const double sigma = sqrt(N * p * (1.0 - p));
        if (!(fabs(kept - N * (1.0 - p)) <= 5 * sigma))
            fail_msg("dropout p=%.1f kept %ld of %ld (expected %.0f +- %.0f)", p, kept, N,
                     N * (1.0 - p), 5 * sigma);
    }
    free(ones); free(out);
}

static void test_dropout_backward(void **state) {
    const long N = 3 * 7 * 12;
    const float p = 0.3f;
    const uint64_t key = dropout_key(5, 3);
    TestRng r = test_rng(1400);
    float *inp = frand(&r, N, -1, 1), *w = frand(&r, N, -1, 1), *out = falloc(N), *dinp = fnan(N);   // overwritten
    DropCtx ctx = { N, p, key, to_double(inp, N), to_double(w, N), dalloc(N) };
    dropout_forward(out, inp, N, N, p, DK(key));
    drop_loss(&ctx);
    check_fwd(out, ctx.out, N, "dropout out");
    dropout_backward(dinp, w, N, N, p, DK(key));
    check_fd(dinp, drop_loss, &ctx, ctx.inp, N, "dropout dinp");
    float *dinp1 = fcopy(dinp, N);
    fill_nan(dinp, N);
    dropout_backward(dinp, w, N, N, p, DK(key));
    check_overwritten(dinp, dinp1, N, "dropout dinp overwritten");
    free(inp); free(w); free(out); free(dinp); free(dinp1); free(ctx.inp); free(ctx.w); free(ctx.out);
}

// Data parallelism: rank r of W with rows {r, r+W, ...} of a global batch and the row map
// {key, r, W} draws exactly the masks of the one-process run on the whole batch, so its outputs
// equal the matching rows of that run bit for bit (dropout and attention dropout, both passes).
static void test_dropout_global_rows(void **state) {
    const int W = 3, Bl = 2, Bg = W * Bl, T = 5, C = 8, NH = 2;
    const long row = (long)T * C, rowq = 3L * T * C, rowa = (long)NH * T * T;
    const float p = 0.4f;
    const uint64_t key = dropout_key(77, 5);
    TestRng r = test_rng(1500);
    float *x = frand(&r, Bg * row, -1, 1), *dy = frand(&r, Bg * row, -1, 1), *qkv = frand(&r, Bg * rowq, -1, 1);
    float *y = falloc(Bg * row), *dx = falloc(Bg * row), *ao = falloc(Bg * row), *att = falloc(Bg * rowa);
    float *dqkv = falloc(Bg * rowq), *scr = falloc(Bg * rowa);
    dropout_forward(y, x, Bg * row, row, p, DK(key));
    dropout_backward(dx, dy, Bg * row, row, p, DK(key));
    attention_forward(ao, att, qkv, Bg, T, C, NH, p, DK(key));
    attention_backward(dqkv, scr, dy, qkv, att, Bg, T, C, NH, p, DK(key));
    for (int rk = 0; rk < W; rk++) {
        const DropoutKey dk = { key, rk, W, NULL };
        float *lx = falloc(Bl * row), *ldy = falloc(Bl * row), *lq = falloc(Bl * rowq);
        for (int j = 0; j < Bl; j++) {
            const long g = rk + (long)W * j;
            memcpy(lx + j * row, x + g * row, sizeof(float) * row);
            memcpy(ldy + j * row, dy + g * row, sizeof(float) * row);
            memcpy(lq + j * rowq, qkv + g * rowq, sizeof(float) * rowq);
        }
        float *ly = falloc(Bl * row), *ldx = falloc(Bl * row), *lao = falloc(Bl * row), *latt = falloc(Bl * rowa);
        float *ldq = falloc(Bl * rowq), *lscr = falloc(Bl * rowa);
        dropout_forward(ly, lx, Bl * row, row, p, dk);
        dropout_backward(ldx, ldy, Bl * row, row, p, dk);
        attention_forward(lao, latt, lq, Bl, T, C, NH, p, dk);
        attention_backward(ldq, lscr, ldy, lq, latt, Bl, T, C, NH, p, dk);
        long dropped = 0;
        for (int j = 0; j < Bl; j++) {
            const long g = rk + (long)W * j;
            assert_memory_equal(ly + j * row, y + g * row, sizeof(float) * row);
            assert_memory_equal(ldx + j * row, dx + g * row, sizeof(float) * row);
            assert_memory_equal(lao + j * row, ao + g * row, sizeof(float) * row);
            assert_memory_equal(ldq + j * rowq, dqkv + g * rowq, sizeof(float) * rowq);
            for (long e = 0; e < row; e++) dropped += ly[j * row + e] == 0.0f;
        }
        assert_true(dropped > 0);   // the masks are really on
        // The one-process map on the same local rows draws other masks (rank 0 row 0 aside).
        if (rk > 0) {
            dropout_forward(ly, lx, Bl * row, row, p, DK(key));
            assert_true(memcmp(ly, y + (long)rk * row, sizeof(float) * row) != 0);
        }
        free(lx); free(ldy); free(lq); free(ly); free(ldx); free(lao); free(latt); free(ldq); free(lscr);
    }
    free(x); free(dy); free(qkv); free(y); free(dx); free(ao); free(att); free(dqkv); free(scr);
}

// ================================================================ cross-entropy

typedef struct { int N, V; const int32_t *targets; double dloss; double *logits; } CeCtx;

// probs = softmax(logits) via log-sum-exp; losses = lse - logit[target], 0 for target -1.
static long ref_crossentropy(double *losses, double *probs, const double *logits,
                             const int32_t *targets, int N, int V) {
    long valid = 0;
    for (int n = 0; n < N; n++) {
        const double *l = logits + (long)n * V;
        double m = -INFINITY, s = 0;
        for (int v = 0; v < V; v++) m = l[v] > m ? l[v] : m;
        for (int v = 0; v < V; v++) s += exp(l[v] - m);
        const double lse = m + log(s);
        if (probs)
            for (int v = 0; v < V; v++) probs[(long)n * V + v] = exp(l[v] - lse);
        losses[n] = targets[n] == -1 ? 0.0 : lse - l[targets[n]];
        valid += targets[n] != -1;
    }
    return valid;
}
// L = dloss * sum_n losses[n] (the mean loss when dloss = 1/valid).
static double ce_loss(void *p) {
    CeCtx *x = p;
    double *losses = dalloc(x->N);
    ref_crossentropy(losses, NULL, x->logits, x->targets, x->N, x->V);
    double s = 0;
    for (int n = 0; n < x->N; n++) s += losses[n];
    free(losses);
    return x->dloss * s;
}

enum { CE_N = 21, CE_V = 11 };

static void ce_inputs(TestRng *r, float *logits, int32_t *targets) {
    test_fill(r, logits, (long)CE_N * CE_V, -3, 3);
    for (int v = 0; v < CE_V; v++) logits[2 * CE_V + v] += 1000.0f;  // overflows a naive exp
    for (int n = 0; n < CE_N; n++) targets[n] = (int32_t)(test_next(r) % CE_V);
    targets[3] = -1;
    targets[10] = -1;
}

static void test_crossentropy_forward(void **state) {
    const long nl = (long)CE_N * CE_V;
    TestRng r = test_rng(1500);
    float *logits = falloc(nl), *probs = falloc(nl), *losses = falloc(CE_N);
    float *probs2 = falloc(nl), *losses2 = falloc(CE_N);
    int32_t targets[CE_N];
    ce_inputs(&r, logits, targets);
    double *ld = to_double(logits, nl), *refp = dalloc(nl), *refl = dalloc(CE_N);
    const long valid = crossentropy_forward(losses, probs, logits, targets, CE_N, CE_V);
    const long refv = ref_crossentropy(refl, refp, ld, targets, CE_N, CE_V);
    assert_int_equal(valid, refv);
    assert_int_equal(valid, CE_N - 2);
    check_fwd(probs, refp, nl, "crossentropy probs");
    check_fwd(losses, refl, CE_N, "crossentropy losses");
    crossentropy_forward(losses2, probs2, logits, targets, CE_N, CE_V);
    assert_memory_equal(probs, probs2, sizeof(float) * nl);
    assert_memory_equal(losses, losses2, sizeof(float) * CE_N);
    free(logits); free(probs); free(losses); free(probs2); free(losses2);
    free(ld); free(refp); free(refl);
}

static void test_crossentropy_backward(void **state) {
    const long nl = (long)CE_N * CE_V;
    TestRng r = test_rng(1600);
    float *logits = falloc(nl), *probs = falloc(nl), *losses = falloc(CE_N), *dlogits = falloc(nl);
    int32_t targets[CE_N];
    ce_inputs(&r, logits, targets);
    const long valid = crossentropy_forward(losses, probs, logits, targets, CE_N, CE_V);
    const float dloss = 1.0f / (float)valid;
    for (long i = 0; i < nl; i++) dlogits[i] = 1e30f;  // overwritten, not accumulated
    crossentropy_softmax_backward(dlogits, probs, targets, CE_N, CE_V, dloss);
    CeCtx ctx = { CE_N, CE_V, targets, dloss, to_double(logits, nl) };
    check_fd(dlogits, ce_loss, &ctx, ctx.logits, nl, "crossentropy dlogits");
    // In place (dlogits aliasing probs) gives the same bits.
    crossentropy_softmax_backward(probs, probs, targets, CE_N, CE_V, dloss);
    assert_memory_equal(probs, dlogits, sizeof(float) * nl);
    free(logits); free(probs); free(losses); free(dlogits); free(ctx.logits);
}

// ignore_index -1: zero loss, zero gradient row, not counted; all-ignored gives 0 rows.
static void test_crossentropy_ignore(void **state) {
    const long nl = (long)CE_N * CE_V;
    TestRng r = test_rng(1700);
    float *logits = falloc(nl), *probs = falloc(nl), *losses = falloc(CE_N), *dlogits = falloc(nl);
    int32_t targets[CE_N];
    ce_inputs(&r, logits, targets);
    for (int n = 0; n < CE_N; n++)
        if (n % 3) targets[n] = -1;
    const long valid = crossentropy_forward(losses, probs, logits, targets, CE_N, CE_V);
    assert_int_equal(valid, 6);  // rows 0, 6, 9, 12, 15, 18 (row 3 is -1 from ce_inputs)
    for (int n = 0; n < CE_N; n++) {
        if (targets[n] == -1) assert_true(losses[n] == 0.0f);
        else assert_true(losses[n] > 0.0f);
    }
    crossentropy_softmax_backward(dlogits, probs, targets, CE_N, CE_V, 1.0f / (float)valid);
    for (int n = 0; n < CE_N; n++) {
        double s = 0;
        for (int v = 0; v < CE_V; v++) {
            const float d = dlogits[(long)n * CE_V + v];
            if (targets[n] == -1) assert_true(d == 0.0f);
            s += d;
        }
        assert_true(fabs(s) < 1e-6);  // softmax gradient rows sum to zero
    }
    for (int n = 0; n < CE_N; n++) targets[n] = -1;
    assert_int_equal(crossentropy_forward(losses, probs, logits, targets, CE_N, CE_V), 0);
    for (int n = 0; n < CE_N; n++) assert_true(losses[n] == 0.0f);
    free(logits); free(probs); free(losses); free(dlogits);
}

// ================================================================ determinism at larger sizes

// Every op twice on sizes that split across threads and channel blocks: bitwise equal.
static void test_determinism(void **state) {
    const int B = 4, T = 32, C = 96, NH = 4, V = 65, OC = 4 * C;
    const long N = (long)B * T, nx = N * C, nq = 3 * nx, na = (long)B * NH * T * T;
    TestRng r = test_rng(1800);
    float *x = frand(&r, nx, -2, 2), *dx = frand(&r, nx, -1, 1), *qkv = frand(&r, nq, -2, 2);
    float *wv = frand(&r, (long)OC * C, -1, 1), *bv = frand(&r, OC, -1, 1);
    float *dy = frand(&r, N * OC, -1, 1), *logits = frand(&r, N * V, -4, 4);
    float *wte = frand(&r, (long)V * C, -1, 1), *wpe = frand(&r, (long)T * C, -1, 1);
    float *g = frand(&r, C, 0.5f, 1.5f), *bb = frand(&r, C, -1, 1);
    int32_t *tok = malloc(sizeof(int32_t) * N);
    for (long i = 0; i < N; i++) tok[i] = (int32_t)(test_next(&r) % V);
    tok[5] = -1;  // as a target only; the encoder gets a valid copy below
    int32_t *tok_in = malloc(sizeof(int32_t) * N);
    for (long i = 0; i < N; i++) tok_in[i] = tok[i] < 0 ? 0 : tok[i];

    // Sizes of the outputs of one run; two runs land in run[0] and run[1].
    enum { O_ENC, O_DWTE, O_DWPE, O_LN, O_MEAN, O_RSTD, O_LNDX, O_LNDW, O_LNDB, O_MM, O_MMDX,
           O_MMDW, O_MMDB, O_ATT, O_A, O_DQKV, O_GELU, O_GDX, O_DROP, O_DDX, O_PROBS, O_LOSS,
           O_DLOG, O_COUNT };
    const long sz[O_COUNT] = { nx, (long)V * C, (long)T * C, nx, N, N, nx, C, C, N * OC, nx,
                               (long)OC * C, OC, nx, na, nq, nx, nx, nx, nx, N * V, N, N * V };
    float *run[2][O_COUNT];
    for (int k = 0; k < 2; k++) {
        float **o = run[k];
        for (int i = 0; i < O_COUNT; i++) o[i] = falloc(sz[i]);  // zeroed gradients
        float *scratch = falloc(na);
        encoder_forward(o[O_ENC], tok_in, wte, wpe, B, T, C);
        encoder_backward(o[O_DWTE], o[O_DWPE], dx, tok_in, B, T, C);
        layernorm_forward(o[O_LN], o[O_MEAN], o[O_RSTD], x, g, bb, (int)N, C);
        layernorm_backward(o[O_LNDX], o[O_LNDW], o[O_LNDB], dx, x, g, o[O_MEAN], o[O_RSTD], (int)N, C);
        matmul_forward(o[O_MM], x, wv, bv, (int)N, C, OC);
        matmul_backward(o[O_MMDX], o[O_MMDW], o[O_MMDB], dy, x, wv, (int)N, C, OC);
        attention_forward(o[O_ATT], o[O_A], qkv, B, T, C, NH, 0.1f, DK(77));
        attention_backward(o[O_DQKV], scratch, dx, qkv, o[O_A], B, T, C, NH, 0.1f, DK(77));
        gelu_forward(o[O_GELU], x, nx);
        gelu_backward(o[O_GDX], x, dx, nx);
        dropout_forward(o[O_DROP], x, nx, nx, 0.1f, DK(77));
        dropout_backward(o[O_DDX], dx, nx, nx, 0.1f, DK(77));
        crossentropy_forward(o[O_LOSS], o[O_PROBS], logits, tok, (int)N, V);
        crossentropy_softmax_backward(o[O_DLOG], o[O_PROBS], tok, (int)N, V, 1.0f / (float)(N - 1));
        free(scratch);
    }
    for (int i = 0; i < O_COUNT; i++) {
        if (memcmp(run[0][i], run[1][i], sizeof(float) * sz[i]) != 0)
            fail_msg("output %d differs between two identical runs", i);
        free(run[0][i]);
        free(run[1][i]);
    }
    free(x); free(dx); free(qkv); free(wv); free(bv); free(dy); free(logits); free(wte); free(wpe);
    free(g); free(bb); free(tok); free(tok_in);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encoder_forward),
        cmocka_unit_test(test_encoder_backward),
        cmocka_unit_test(test_layernorm_forward),
        cmocka_unit_test(test_layernorm_backward),
        cmocka_unit_test(test_matmul_forward),
        cmocka_unit_test(test_matmul_backward),
        cmocka_unit_test(test_attention_forward),
        cmocka_unit_test(test_attention_forward_dropout),
        cmocka_unit_test(test_attention_forward_cached),
        cmocka_unit_test(test_attention_forward_cached_is_forward),
        cmocka_unit_test(test_attention_backward),
        cmocka_unit_test(test_attention_causal),
        cmocka_unit_test(test_gelu_forward),
        cmocka_unit_test(test_gelu_backward),
        cmocka_unit_test(test_residual),
        cmocka_unit_test(test_dropout_identity),
        cmocka_unit_test(test_dropout_mask_determinism),
        cmocka_unit_test(test_dropout_statistics),
        cmocka_unit_test(test_dropout_backward),
        cmocka_unit_test(test_dropout_global_rows),
        cmocka_unit_test(test_crossentropy_forward),
        cmocka_unit_test(test_crossentropy_backward),
        cmocka_unit_test(test_crossentropy_ignore),
        cmocka_unit_test(test_determinism),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
