// tests/test_simd.c — the short-vector helpers of kernels/cpu/simd.h against their scalar
// definitions, lane by lane: vmax / vmin (a > b ? a : b, a < b ? a : b, with NaNs, signed zeros
// and infinities, where an instruction's operand order decides the result), vsum (its pairwise
// order, bit for bit), vstore_n and vcopy_n (exactly n floats written) and vexp (against the scalar expf_fast bit for bit, and against libm's expf
// within the documented error).
#pragma GCC optimize("fp-contract=fast")
#include "tests/test_util.h"

#include "kernels/cpu/simd.h"

static VF from_array(const float *x) { return vload(x); }

// Special values and ordinary ones, paired every way across the lanes of two vectors.
static const float special[] = { 0.0f, -0.0f, 1.0f, -1.0f, 2.5f, -3.0f, INFINITY, -INFINITY, NAN, -NAN,
                                 1e-40f, -1e-40f, 3.4e38f, 7.0f, 0.5f, -0.25f };
#define N_SPECIAL ((int)(sizeof special / sizeof *special))

static int same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

static void test_vmax_vmin(void **state) {
    (void)state;
    for (int s = 0; s < N_SPECIAL; s++) {   // lane i pairs special[i] with special[(i + s) % N]
        float a[VL], b[VL], mx[VL], mn[VL];
        for (int i = 0; i < VL; i++) {
            a[i] = special[i % N_SPECIAL];
            b[i] = special[(i + s) % N_SPECIAL];
        }
        vstore(mx, vmax(from_array(a), from_array(b)));
        vstore(mn, vmin(from_array(a), from_array(b)));
        for (int i = 0; i < VL; i++) {
            const float want_max = a[i] > b[i] ? a[i] : b[i], want_min = a[i] < b[i] ? a[i] : b[i];
            if (!same_bits(mx[i], want_max))
                fail_msg("vmax(%g, %g) = %g, want %g (lane %d)", a[i], b[i], mx[i], want_max, i);
            if (!same_bits(mn[i], want_min))
                fail_msg("vmin(%g, %g) = %g, want %g (lane %d)", a[i], b[i], mn[i], want_min, i);
        }
    }
}

// vsum in its documented order (t[i] += t[i + w], w = VL/2 .. 1), bit for bit, on values whose
// sums round differently in other orders.
static void test_vsum(void **state) {
    (void)state;
    TestRng r = test_rng(17);
    for (int rep = 0; rep < 2000; rep++) {
        float x[VL], t[VL];
        for (int i = 0; i < VL; i++) x[i] = test_uniform(&r, -1.0f, 1.0f) * ldexpf(1.0f, (int)(test_next(&r) % 40) - 20);
        memcpy(t, x, sizeof t);
        for (int w = VL / 2; w >= 1; w /= 2)
            for (int i = 0; i < w; i++) t[i] += t[i + w];
        const float got = vsum(from_array(x));
        if (!same_bits(got, t[0])) fail_msg("vsum = %a, the pairwise order gives %a", got, t[0]);
    }
}

static void test_vstore_n(void **state) {
    (void)state;
    float src[VL];
    for (int i = 0; i < VL; i++) src[i] = (float)(i + 1);
    for (int n = 0; n <= VL; n++) {
        float dst[VL + 2];
        for (int i = 0; i < VL + 2; i++) dst[i] = -7.0f;
        vstore_n(dst + 1, from_array(src), n);
        assert_true(dst[0] == -7.0f);
        for (int i = 0; i < VL + 1; i++) {
            const float want = i < n ? src[i] : -7.0f;
            if (dst[1 + i] != want) fail_msg("vstore_n(n %d): lane %d = %g, want %g", n, i, dst[1 + i], want);
        }
    }
}

static void test_vcopy_n(void **state) {
    (void)state;
    float src[2 * VL + 1];
    for (int i = 0; i < 2 * VL + 1; i++) src[i] = (float)(i + 1);
    for (int n = 0; n <= 2 * VL + 1; n++) {
        float dst[2 * VL + 3];
        for (int i = 0; i < 2 * VL + 3; i++) dst[i] = -7.0f;
        vcopy_n(dst + 1, src, n);
        assert_true(dst[0] == -7.0f);
        for (int i = 0; i < 2 * VL + 2; i++) {
            const float want = i < n ? src[i] : -7.0f;
            if (dst[1 + i] != want) fail_msg("vcopy_n(n %d): float %d = %g, want %g", n, i, dst[1 + i], want);
        }
    }
}

static void test_vexp(void **state) {
    (void)state;
    TestRng r = test_rng(31);
    float x[VL], y[VL];
    for (int rep = 0; rep < 4000; rep++) {
        for (int i = 0; i < VL; i++) x[i] = rep == 0 ? special[i % N_SPECIAL] : test_uniform(&r, -100.0f, 100.0f);
        vstore(y, vexp(from_array(x)));
        for (int i = 0; i < VL; i++) {
            const float s = expf_fast(x[i]);
            if (!same_bits(y[i], s) && !(isnan(x[i]) && isfinite(y[i])))
                fail_msg("vexp(%g) = %a, expf_fast %a", x[i], y[i], s);
            assert_true(isfinite(y[i]) && y[i] > 0.0f);   // clamped: always finite and positive
            if (x[i] >= EXP_LO && x[i] <= EXP_HI) {
                const double want = exp((double)x[i]);
                if (fabs(y[i] - want) > 4e-7 * want) fail_msg("vexp(%g) = %g, exp %g", x[i], y[i], want);
            }
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vmax_vmin),
        cmocka_unit_test(test_vsum),
        cmocka_unit_test(test_vstore_n),
        cmocka_unit_test(test_vcopy_n),
        cmocka_unit_test(test_vexp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
