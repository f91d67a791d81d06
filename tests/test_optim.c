// tests/test_optim.c — AdamW against a naive double-precision transcription of
// torch.optim.AdamW, global-norm clipping against clip_grad_norm_'s formula, the
// learning-rate schedule against nanoGPT's published values; the step's guards: the
// gradient-norm outlier detector against a long-double reference, and train_step leaving
// parameters and AdamW state untouched on a spike or a non-finite loss.
#include "tests/test_util.h"

#include <limits.h>

#include "dist/comm.h"
#include "trainer/adamw.h"
#include "trainer/loss_scaler.h"
#include "trainer/spike_detector.h"
#include "trainer/train_step.h"

static Backend *cpu(void) {
    static Backend *be;   // one for the whole program
    if (!be) be = backend_cpu_create(DTYPE_FP32);
    return be;
}

// Two tensors: one decayed (a Linear weight), one not (a bias).
static void make_tensors(ParamTensor t[2]) {
    memset(t, 0, 2 * sizeof *t);
    snprintf(t[0].name, sizeof t[0].name, "w"); t[0].offset = 0; t[0].numel = 37; t[0].decay = true;
    snprintf(t[1].name, sizeof t[1].name, "b"); t[1].offset = 37; t[1].numel = 5; t[1].decay = false;
}

static void test_adamw_matches_reference(void **state) {
    enum { N = 42 };
    ParamTensor t[2];
    make_tensors(t);
    float p[N], g[N];
    double rp[N], rm[N] = {0}, rv[N] = {0};
    TestRng r = test_rng(1);
    test_fill(&r, p, N, -1, 1);
    for (int i = 0; i < N; i++) rp[i] = p[i];
    AdamW opt;
    assert_int_equal(adamw_init(&opt, cpu(), N), 0);
    const double lr = 1e-2, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
    for (int step = 1; step <= 5; step++) {
        test_fill(&r, g, N, -1, 1);
        adamw_step(&opt, p, g, t, 2, (float)lr, (float)b1, (float)b2, (float)eps, (float)wd);
        for (int i = 0; i < N; i++) {   // torch/optim/adamw.py, single-tensor path
            if (i < 37) rp[i] *= 1 - lr * wd;
            rm[i] = b1 * rm[i] + (1 - b1) * g[i];
            rv[i] = b2 * rv[i] + (1 - b2) * (double)g[i] * g[i];
            double bc1 = 1 - pow(b1, step), bc2 = 1 - pow(b2, step);
            rp[i] -= lr / bc1 * rm[i] / (sqrt(rv[i]) / sqrt(bc2) + eps);
        }
    }
    assert_int_equal(opt.step, 5);
    for (int i = 0; i < N; i++)
        if (fabs(p[i] - rp[i]) > 1e-5 * (1 + fabs(rp[i]))) fail_msg("param %d: %.8f vs %.8f", i, p[i], rp[i]);
    adamw_free(&opt);
}

// Weight decay touches only tensors marked decay: with zero gradients, decayed weights
// shrink by exactly (1 - lr*wd) and the rest stay put.
static void test_adamw_decay_groups(void **state) {
    enum { N = 42 };
    ParamTensor t[2];
    make_tensors(t);
    float p[N], p0[N], g[N] = {0};
    for (int i = 0; i < N; i++) p[i] = p0[i] = 1.0f + i;
    AdamW opt;
    adamw_init(&opt, cpu(), N);
    adamw_step(&opt, p, g, t, 2, 0.5f, 0.9f, 0.95f, 1e-8f, 0.1f);
    for (int i = 0; i < 37; i++) assert_true(fabsf(p[i] - p0[i] * 0.95f) < 1e-5f * p0[i]);
    for (int i = 37; i < N; i++) assert_true(p[i] == p0[i]);
    adamw_free(&opt);
}

// The unscale / clip factor folded into AdamW (train_step's path): the same bits as scaling the
// gradients first (loss_scaler_unscale_clip_ssq) and updating with factor 1, on a buffer long
// enough for the parallel vector loop and its scalar tail; the gradients are not written.
static void test_adamw_grad_scale_folded(void **state) {
    enum { N = 100003 };
    ParamTensor t[2] = { { .offset = 0, .numel = 70001, .decay = 1 }, { .offset = 70001, .numel = N - 70001, .decay = 0 } };
    float *p = malloc(N * 4), *q = malloc(N * 4), *g = malloc(N * 4), *g0 = malloc(N * 4), *gs = malloc(N * 4);
    TestRng r = test_rng(5);
    test_fill(&r, p, N, -1, 1);
    memcpy(q, p, N * 4);
    AdamW a, b;
    assert_int_equal(adamw_init(&a, cpu(), N), 0);
    assert_int_equal(adamw_init(&b, cpu(), N), 0);
    for (int step = 0; step < 3; step++) {
        test_fill(&r, g, N, -3e4f, 3e4f);   // as if computed with the fp16 loss scale 2^16
        memcpy(g0, g, N * 4);
        memcpy(gs, g, N * 4);
        LossScaler la, lb;
        loss_scaler_init(&la, 1);
        loss_scaler_init(&lb, 1);
        const double ssq = cpu()->sum_squares(cpu(), g, N);
        double na, nb;
        float factor = 0;
        assert_int_equal(loss_scaler_unscale_clip_ssq(&la, cpu(), gs, N, ssq, 1.0, &na), 1);
        assert_int_equal(loss_scaler_unscale_clip_coef(&lb, ssq, 1.0, &nb, &factor), 1);
        assert_true(na == nb && factor != 1.0f && la.scale == lb.scale);
        adamw_step_range(&a, p, gs, t, 2, 0, N, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f);
        adamw_step_range(&b, q, g, t, 2, 0, N, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, factor);
        assert_memory_equal(p, q, N * 4);
        assert_memory_equal(a.m, b.m, N * 4);
        assert_memory_equal(a.v, b.v, N * 4);
        assert_memory_equal(g, g0, N * 4);
    }
    adamw_free(&a); adamw_free(&b);
    free(p); free(q); free(g); free(g0); free(gs);
}

static void test_grad_norm_and_clip(void **state) {
    enum { N = 100003 };   // not a multiple of the chunk count
    float *g = malloc(N * 4);
    TestRng r = test_rng(2);
    test_fill(&r, g, N, -1, 1);
    double ref = 0;
    for (int i = 0; i < N; i++) ref += (double)g[i] * g[i];
    ref = sqrt(ref);
    double norm = grad_global_norm(cpu(), g, N);
    assert_true(fabs(norm - ref) <= 1e-12 * ref);
    // Below the threshold: untouched.
    assert_true(grad_clip(cpu(), g, N, norm, norm * 2) == 1.0f);
    // Above: scaled by max/(norm + 1e-6), so the new norm is just under max.
    float s = grad_clip(cpu(), g, N, norm, 1.0);
    assert_true(fabs(s - 1.0 / (ref + 1e-6)) < 1e-6 * s);
    assert_true(fabs(grad_global_norm(cpu(), g, N) - 1.0) < 1e-5);
    // max_norm <= 0 disables clipping.
    assert_true(grad_clip(cpu(), g, N, 123.0, 0.0) == 1.0f);
    free(g);
}

// nanoGPT shakespeare_char: lr 1e-3, warmup 100, decay 5000, min 1e-4 (values from
// shared reference section 6).
static void test_lr_schedule(void **state) {
    OptimizerConfig o = { .learning_rate = 1e-3, .warmup_iters = 100, .lr_decay_iters = 5000, .min_lr = 1e-4 };
    struct { long it; double lr; } want[] = {
        {0, 9.9e-6}, {1, 1.98e-5}, {99, 9.901e-4}, {100, 1e-3}, {2550, 5.5e-4}, {5000, 1e-4}, {9000, 1e-4},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        double got = lr_at(&o, want[i].it);
        if (fabs(got - want[i].lr) > 1e-3 * want[i].lr) fail_msg("it %ld: lr %.6e, want %.6e", want[i].it, got, want[i].lr);
    }
    OptimizerConfig c = { .learning_rate = 3e-4 };   // the tutorial: constant
    assert_true(lr_at(&c, 0) == 3e-4 && lr_at(&c, 123456) == 3e-4);
}

// The schedule at the extremes of its keys: warmup_iters = LONG_MAX must not overflow into a
// negative rate.
static void test_lr_schedule_huge_warmup(void **state) {
    OptimizerConfig o = { .learning_rate = 3e-4, .warmup_iters = LONG_MAX, .lr_decay_iters = LONG_MAX };
    for (long it = 0; it < 3; it++) {
        const double lr = lr_at(&o, it);
        if (!(lr > 0 && lr < 1e-20)) fail_msg("it %ld: lr %g, want a tiny positive warm-up rate", it, lr);
    }
    assert_true(lr_at(&o, LONG_MAX - 1) > 0);
}

// z of x against vals[0..n) (population std), in long double: the reference.
static double ref_z(const double *vals, int n, double x) {
    long double m = 0, v = 0;
    for (int i = 0; i < n; i++) m += vals[i];
    m /= n;
    for (int i = 0; i < n; i++) v += (vals[i] - m) * (vals[i] - m);
    const long double sd = sqrtl(v / n);
    return sd > 0 ? (double)((x - m) / sd) : 0.0;
}

// No score until the window is full; then every value is scored against the `window` values
// before it (a sliding window), before it joins.
static void test_spike_detector_window(void **state) {
    enum { W = 8, N = 200 };
    SpikeDetector d;
    spike_init(&d, W);
    double seen[N];
    TestRng r = test_rng(5);
    for (int i = 0; i < N; i++) {
        const double x = 1.0 + test_uniform(&r, -0.1f, 0.1f) + (i % 37 == 36 ? 5.0 : 0.0);   // some spikes
        const double z = spike_observe(&d, x);
        if (i < W) {
            if (!isnan(z)) fail_msg("value %d: z %g before the window is full", i, z);
        } else {
            const double want = ref_z(seen + i - W, W, x);
            if (fabs(z - want) > 1e-9 * (1 + fabs(want))) fail_msg("value %d: z %.12g, want %.12g", i, z, want);
            if (i % 37 == 36 && !(z > 10)) fail_msg("value %d: a spike scored only %g", i, z);
        }
        seen[i] = x;
    }
    // A constant window has no spread: score 0, never a skip.
    spike_init(&d, W);
    for (int i = 0; i < W; i++) spike_observe(&d, 2.0);
    assert_true(spike_observe(&d, 3.0) == 0.0);
    // Non-finite values are neither scored nor held.
    spike_init(&d, W);
    for (int i = 0; i < W; i++) spike_observe(&d, i);
    assert_true(isnan(spike_observe(&d, NAN)) && isnan(spike_observe(&d, INFINITY)));
    assert_true(fabs(spike_observe(&d, 3.5) - ref_z((double[]){0, 1, 2, 3, 4, 5, 6, 7}, W, 3.5)) < 1e-12);
}

// Norms with a large mean and a small spread: E[x^2] - E[x]^2 (llm.c's running sums) loses
// every digit here; the detector keeps the reference's score.
static void test_spike_detector_stable(void **state) {
    enum { W = 128 };
    SpikeDetector d;
    spike_init(&d, W);
    double vals[W];
    TestRng r = test_rng(9);
    for (int i = 0; i < W; i++) {
        vals[i] = 1e8 + test_uniform(&r, -1e-3f, 1e-3f);
        spike_observe(&d, vals[i]);
    }
    const double x = 1e8 + 5e-3, want = ref_z(vals, W, x), z = spike_observe(&d, x);
    if (fabs(z - want) > 1e-6 * fabs(want)) fail_msg("z %.10g, want %.10g", z, want);
    spike_init(&d, 1000);   // clamped to SPIKE_WINDOW_MAX
    assert_int_equal(d.window, SPIKE_WINDOW_MAX);
}

// ---- train_step on a tiny model
typedef struct {
    GPT m;
    AdamW opt;
    LossScaler scaler;
    Comm *comm;
    int32_t x[4 * 8], y[4 * 8];
    float *p0, *p1, *m0, *v0;
} Tiny;

static void tiny_init(Tiny *t) {
    GPTShape s = { .vocab_size = 8, .block_size = 8, .n_layer = 1, .n_head = 2, .n_embd = 8 };
    char err[512];
    if (gpt_build(&t->m, &s, 4, 8, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(gpt_init_weights(&t->m, 7), 0);
    assert_int_equal(adamw_init(&t->opt, t->m.be, t->m.num_params), 0);
    loss_scaler_init(&t->scaler, 0);
    t->comm = comm_single_create();
    for (int i = 0; i < 32; i++) { t->x[i] = i % 8; t->y[i] = (i * 3 + 1) % 8; }
    const size_t bytes = t->m.num_params * sizeof(float);
    t->p0 = malloc(bytes); t->p1 = malloc(bytes); t->m0 = malloc(bytes); t->v0 = malloc(bytes);
}

static void tiny_free(Tiny *t) {
    free(t->p0); free(t->p1); free(t->m0); free(t->v0);
    t->comm->destroy(t->comm);
    adamw_free(&t->opt);
    gpt_free(&t->m);
}

static StepResult tiny_step(Tiny *t, float lr, SpikeDetector *spike, double zmax, uint64_t step) {
    TrainStep ts = { .model = &t->m, .opt = &t->opt, .scaler = &t->scaler, .comm = t->comm, .grad_clip = 1.0,
                     .lr = lr, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f,
                     .spike = spike, .skip_zscore = zmax };
    MicroBatch mb = { t->x, t->y, 4 };
    StepResult res;
    assert_int_equal(train_step(&ts, &mb, 1, 4, 8, 1, step, 0, &res), 0);
    return res;
}

// Parameters, moments and the step count, before and after a step that must not touch them.
static void snapshot_state(Tiny *t, float *p, long *step) {
    gpt_get_params(&t->m, p);
    memcpy(t->m0, t->opt.m, t->m.num_params * sizeof(float));   // CPU backend: host memory
    memcpy(t->v0, t->opt.v, t->m.num_params * sizeof(float));
    *step = t->opt.step;
}
static void assert_untouched(Tiny *t, const float *p, long step) {
    gpt_get_params(&t->m, t->p1);
    assert_memory_equal(t->p1, p, t->m.num_params * sizeof(float));
    assert_memory_equal(t->opt.m, t->m0, t->m.num_params * sizeof(float));
    assert_memory_equal(t->opt.v, t->v0, t->m.num_params * sizeof(float));
    assert_int_equal(t->opt.step, step);
}

// A norm far above the window's: the step is skipped, nothing changes; the same step with a
// loose threshold is applied (the skip is the detector's doing).
static void test_train_step_skips_spike(void **state) {
    Tiny t;
    tiny_init(&t);
    assert_true(t.m.be->host_memory);
    tiny_step(&t, 1e-3f, NULL, 0, 0);   // one ordinary step: moments non-zero
    SpikeDetector d;
    spike_init(&d, 4);
    for (int i = 0; i < 4; i++) spike_observe(&d, 1e-3 * (1 + i));   // a window of tiny norms
    long step;
    snapshot_state(&t, t.p0, &step);
    StepResult r = tiny_step(&t, 1e-3f, &d, 3.0, 1);
    if (!(r.spike == 1 && r.applied == 0 && r.zscore > 3.0 && r.nonfinite == 0 && isfinite(r.loss)))
        fail_msg("spike %d applied %d z %g", r.spike, r.applied, r.zscore);
    assert_untouched(&t, t.p0, step);
    // Threshold off (0): scored, applied.
    r = tiny_step(&t, 1e-3f, &d, 0.0, 1);
    assert_true(r.applied == 1 && r.spike == 0 && isfinite(r.zscore));
    assert_int_equal(t.opt.step, step + 1);
    gpt_get_params(&t.m, t.p1);
    assert_memory_not_equal(t.p1, t.p0, t.m.num_params * sizeof(float));
    // No detector: not scored.
    r = tiny_step(&t, 1e-3f, NULL, 3.0, 2);
    assert_true(r.applied == 1 && isnan(r.zscore));
    tiny_free(&t);
}

// A learning rate that blows the model up: the first step whose loss is not finite reports it
// and leaves parameters and AdamW state as they were (the trainer then stops).
static void test_train_step_nonfinite(void **state) {
    Tiny t;
    tiny_init(&t);
    int found = 0;
    for (uint64_t k = 0; k < 10 && !found; k++) {
        long step;
        snapshot_state(&t, t.p0, &step);
        StepResult r = tiny_step(&t, 1e30f, NULL, 0, k);
        if (!r.nonfinite) {
            assert_true(r.applied == 1 && isfinite(r.loss) && isfinite(r.norm));
            continue;
        }
        found = 1;
        assert_true(r.applied == 0 && (!isfinite(r.loss) || !isfinite(r.norm)));
        assert_untouched(&t, t.p0, step);
        assert_true(step >= 1);
    }
    assert_true(found);
    tiny_free(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adamw_matches_reference),
        cmocka_unit_test(test_adamw_decay_groups),
        cmocka_unit_test(test_adamw_grad_scale_folded),
        cmocka_unit_test(test_grad_norm_and_clip),
        cmocka_unit_test(test_lr_schedule),
        cmocka_unit_test(test_lr_schedule_huge_warmup),
        cmocka_unit_test(test_spike_detector_window),
        cmocka_unit_test(test_spike_detector_stable),
        cmocka_unit_test(test_train_step_skips_spike),
        cmocka_unit_test(test_train_step_nonfinite),
    };
    return cmocka_run_group_tests_name("optim", tests, NULL, NULL);
}
