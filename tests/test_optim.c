// tests/test_optim.c — AdamW against a naive double-precision transcription of
// torch.optim.AdamW, global-norm clipping against clip_grad_norm_'s formula, and the
// learning-rate schedule against nanoGPT's published values.
#include "tests/test_util.h"

#include "trainer/adamw.h"

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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adamw_matches_reference),
        cmocka_unit_test(test_adamw_decay_groups),
        cmocka_unit_test(test_grad_norm_and_clip),
        cmocka_unit_test(test_lr_schedule),
    };
    return cmocka_run_group_tests_name("optim", tests, NULL, NULL);
}
