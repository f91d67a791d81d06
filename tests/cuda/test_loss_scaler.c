// tests/cuda/test_loss_scaler.c — the dynamic loss scaler (trainer/loss_scaler.h): torch
// GradScaler's state machine, unscale-before-clip, overflow skips, and equivalence with the
// plain norm + clip path when disabled. Runs on both backends (CPU and emulated CUDA).
#include "tests/test_util.h"

#include "kernels/backend.h"
#include "trainer/loss_scaler.h"
#include "trainer/adamw.h"

static Backend *make(int cuda) {
    char err[512];
    Backend *be = cuda ? backend_cuda_create(DTYPE_FP16, 0, err, sizeof err) : backend_cpu_create(DTYPE_FP16);
    if (!be) fail_msg("backend: %s", err);
    return be;
}
static float *dev(Backend *be, const float *h, size_t n) {
    float *d = be->alloc(be, n * sizeof(float));
    be->upload(be, d, h, n * sizeof(float));
    return d;
}
static float *host(Backend *be, const float *d, size_t n) {
    float *h = malloc(n * sizeof(float));
    be->download(be, h, d, n * sizeof(float));
    return h;
}

static void test_state_machine(void **state) {
    LossScaler ls;
    loss_scaler_init(&ls, 0);
    assert_true(loss_scaler_scale(&ls) == 1.0f);
    assert_int_equal(loss_scaler_update(&ls, 0), 1);        // disabled: never skips
    assert_true(loss_scaler_scale(&ls) == 1.0f);

    loss_scaler_init(&ls, 1);
    assert_true(loss_scaler_scale(&ls) == 65536.0f);         // 2^16
    for (int i = 0; i < LOSS_SCALER_GROWTH_INTERVAL - 1; i++) assert_int_equal(loss_scaler_update(&ls, 1), 1);
    assert_true(ls.scale == 65536.0f);
    assert_int_equal(ls.good_steps, LOSS_SCALER_GROWTH_INTERVAL - 1);
    assert_int_equal(loss_scaler_update(&ls, 1), 1);         // the 2000th clean step doubles S
    assert_true(ls.scale == 131072.0f);
    assert_int_equal(ls.good_steps, 0);
    for (int i = 0; i < 1000; i++) loss_scaler_update(&ls, 1);
    assert_int_equal(loss_scaler_update(&ls, 0), 0);         // overflow: skip, halve, reset
    assert_true(ls.scale == 65536.0f);
    assert_int_equal(ls.good_steps, 0);
    assert_int_equal(ls.skipped, 1);
    for (int i = 0; i < LOSS_SCALER_GROWTH_INTERVAL; i++) loss_scaler_update(&ls, 1);
    assert_true(ls.scale == 131072.0f);                       // the count restarted at the overflow

    LossScaler r;
    loss_scaler_init(&r, 1);
    loss_scaler_restore(&r, 1024.0f, 17);
    assert_true(r.scale == 1024.0f);
    assert_int_equal(r.good_steps, 17);
    loss_scaler_restore(&r, 0.0f, 5);                          // no saved state: unchanged
    assert_true(r.scale == 1024.0f);

    // growth_interval is the scaler's own parameter (tests/test_resume.c shortens it through
    // TrainerHook); a restore continues the saved clean-step count under it and leaves it alone
    loss_scaler_init(&r, 1);
    r.growth_interval = 3;
    loss_scaler_restore(&r, 4096.0f, 1);
    assert_int_equal(r.growth_interval, 3);
    assert_int_equal(loss_scaler_update(&r, 1), 1);
    assert_true(r.scale == 4096.0f);
    assert_int_equal(loss_scaler_update(&r, 1), 1);          // 1 saved + 2 clean steps: S doubles
    assert_true(r.scale == 8192.0f);
    assert_int_equal(r.good_steps, 0);
    assert_int_equal(loss_scaler_update(&r, 0), 0);
    assert_true(r.scale == 4096.0f);
    for (int i = 0; i < 3; i++) loss_scaler_update(&r, 1);
    assert_true(r.scale == 8192.0f);
    assert_int_equal(r.skipped, 1);
}

// Unscale happens before clipping: the norm compared with max_norm is the true gradients'.
static void unscale_clip_on(int cuda) {
    Backend *be = make(cuda);
    enum { N = 1003 };
    float g[N], scaled[N];
    TestRng r = test_rng(5);
    test_fill(&r, g, N, -0.5f, 0.5f);
    double ssq = 0;
    for (int i = 0; i < N; i++) ssq += (double)g[i] * g[i];
    const double true_norm = sqrt(ssq);
    LossScaler ls;
    loss_scaler_init(&ls, 1);
    const float S = loss_scaler_scale(&ls);
    for (int i = 0; i < N; i++) scaled[i] = g[i] * S;          // exact: S is a power of two

    // no clipping needed: the gradients come back unscaled, bitwise
    float *d = dev(be, scaled, N);
    double norm;
    assert_int_equal(loss_scaler_unscale_clip(&ls, be, d, N, 1e9, &norm), 1);
    assert_true(fabs(norm - true_norm) <= 1e-12 * true_norm);
    float *h = host(be, d, N);
    assert_memory_equal(h, g, sizeof g);
    free(h);

    // clipping at half the true norm: grads = g * max_norm / (norm + 1e-6)
    const double max_norm = 0.5 * true_norm;
    be->upload(be, d, scaled, sizeof scaled);
    assert_int_equal(loss_scaler_unscale_clip(&ls, be, d, N, max_norm, &norm), 1);
    h = host(be, d, N);
    const float c = (float)(max_norm / (true_norm + 1e-6));
    for (int i = 0; i < N; i++) assert_true(fabsf(h[i] - g[i] * c) <= 1e-6f * fabsf(g[i]));
    double hn = 0;
    for (int i = 0; i < N; i++) hn += (double)h[i] * h[i];
    assert_true(fabs(sqrt(hn) - max_norm) < 1e-5 * max_norm);   // clipped to max_norm, not max_norm / S
    free(h);

    // overflow (inf, then NaN): skipped, gradients untouched, S halved
    const float bad[2] = { INFINITY, NAN };
    for (int k = 0; k < 2; k++) {
        scaled[N / 3] = bad[k];
        be->upload(be, d, scaled, sizeof scaled);
        const float before = ls.scale;
        assert_int_equal(loss_scaler_unscale_clip(&ls, be, d, N, max_norm, &norm), 0);
        assert_true(ls.scale == 0.5f * before);
        h = host(be, d, N);
        assert_memory_equal(h, scaled, sizeof scaled);
        free(h);
    }
    // diverged: non-finite at every scale
    int rc = 0;
    for (int i = 0; i < LOSS_SCALER_MAX_SKIPS && rc == 0; i++) rc = loss_scaler_unscale_clip(&ls, be, d, N, max_norm, &norm);
    assert_int_equal(rc, -1);

    // disabled: exactly grad_global_norm + grad_clip
    loss_scaler_init(&ls, 0);
    scaled[N / 3] = g[N / 3];
    float *d2 = dev(be, g, N);
    be->upload(be, d, g, sizeof g);
    assert_int_equal(loss_scaler_unscale_clip(&ls, be, d, N, max_norm, &norm), 1);
    const double n2 = grad_global_norm(be, d2, N);
    grad_clip(be, d2, N, n2, max_norm);
    assert_true(norm == n2);
    float *h1 = host(be, d, N), *h2 = host(be, d2, N);
    assert_memory_equal(h1, h2, sizeof g);
    free(h1); free(h2);
    be->free(be, d); be->free(be, d2);
    be->destroy(be);
}
static void test_unscale_clip_cpu(void **state) { unscale_clip_on(0); }
static void test_unscale_clip_cuda(void **state) { unscale_clip_on(1); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_state_machine),
        cmocka_unit_test(test_unscale_clip_cpu),
        cmocka_unit_test(test_unscale_clip_cuda),
    };
    return cmocka_run_group_tests_name("loss scaler", tests, NULL, NULL);
}
