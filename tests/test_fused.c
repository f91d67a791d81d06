// tests/test_fused.c — every fused CPU op against the unfused sequence of single ops it
// replaces (kernels/cpu/ops.h), directly and through the Backend table, and the model's
// fused training loss/gradient path against the unfused one.
//
// Tolerances (max |fused - unfused| / max |unfused|, test_max_rel_err):
//   exact     residual + layernorm: the same row kernel on the same sums;
//   TOL_MM    1e-6  matmul + GELU: the bias joins after the GEMM instead of before it (one
//                   rounding moves), GELU amplifies it by at most ~1.1;
//   TOL_CE    1e-6  softmax + cross-entropy + gradient: same arithmetic, one pass;
//   TOL_GPT   1e-6  whole-model gradients with and without the fused loss gradient.
#include "tests/test_util.h"

#include "kernels/backend.h"
#include "kernels/cpu/ops.h"
#include "model/gpt.h"

#define TOL_MM 1e-6
#define TOL_CE 1e-6
#define TOL_GPT 1e-6


// ---------------------------------------------------------------- residual + layernorm
typedef struct { int N, C; } RlCfg;
// C 37: vector lanes plus a scalar tail; C 8: tail only with 16 lanes; C 128: the S model.
static const RlCfg rl_cfgs[] = { {21, 37}, {5, 8}, {64, 128}, {3, 1} };

static void test_residual_layernorm(void **state) {
    Backend *be = backend_cpu_create(DTYPE_FP32);
    assert_non_null(be);
    for (size_t k = 0; k < sizeof rl_cfgs / sizeof *rl_cfgs; k++) {
        const int N = rl_cfgs[k].N, C = rl_cfgs[k].C;
        const long n = (long)N * C;
        TestRng r = test_rng(100 + k);
        float *a = frand(&r, n, -2, 2), *b = frand(&r, n, -1, 1);
        float *w = frand(&r, C, 0.5f, 1.5f), *bias = frand(&r, C, -1, 1);
        float *res1 = falloc(n), *out1 = falloc(n), *m1 = falloc(N), *rs1 = falloc(N);
        float *res2 = falloc(n), *out2 = falloc(n), *m2 = falloc(N), *rs2 = falloc(N);
        residual_forward(res1, a, b, n);
        layernorm_forward(out1, m1, rs1, res1, w, bias, N, C);
        residual_layernorm_forward(res2, out2, m2, rs2, a, b, w, bias, N, C);
        assert_memory_equal(res1, res2, sizeof(float) * n);
        assert_memory_equal(out1, out2, sizeof(float) * n);
        assert_memory_equal(m1, m2, sizeof(float) * N);
        assert_memory_equal(rs1, rs2, sizeof(float) * N);
        // through the backend table
        memset(out2, 0, sizeof(float) * n);
        be->residual_layernorm_forward(be, res2, out2, m2, rs2, a, b, w, bias, N, C);
        assert_memory_equal(out1, out2, sizeof(float) * n);
        free(a); free(b); free(w); free(bias);
        free(res1); free(out1); free(m1); free(rs1); free(res2); free(out2); free(m2); free(rs2);
    }
    be->destroy(be);
}

// ---------------------------------------------------------------- matmul + bias + GELU
typedef struct { int N, C, OC; } MgCfg;
static const MgCfg mg_cfgs[] = { {21, 12, 48}, {7, 37, 148}, {64, 128, 512}, {1, 5, 20} };

static void test_matmul_gelu(void **state) {
    Backend *be = backend_cpu_create(DTYPE_FP32);
    assert_non_null(be);
    for (size_t k = 0; k < sizeof mg_cfgs / sizeof *mg_cfgs; k++)
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            const int N = mg_cfgs[k].N, C = mg_cfgs[k].C, OC = mg_cfgs[k].OC;
            TestRng r = test_rng(200 + 2 * k + with_bias);
            float *inp = frand(&r, (long)N * C, -2, 2), *wt = frand(&r, (long)OC * C, -0.5f, 0.5f);
            float *bias = with_bias ? frand(&r, OC, -1, 1) : NULL;
            const long no = (long)N * OC;
            float *pre1 = falloc(no), *out1 = falloc(no), *pre2 = falloc(no), *out2 = falloc(no);
            matmul_forward(pre1, inp, wt, bias, N, C, OC);
            gelu_forward(out1, pre1, no);
            matmul_gelu_forward(pre2, out2, inp, wt, bias, N, C, OC);
            assert_close_rel(pre2, pre1, no, TOL_MM, "matmul_gelu pre");
            assert_close_rel(out2, out1, no, TOL_MM, "matmul_gelu out");
            memset(out2, 0, sizeof(float) * no);
            be->matmul_gelu_forward(be, pre2, out2, inp, wt, bias, N, C, OC);
            assert_close_rel(out2, out1, no, TOL_MM, "backend matmul_gelu out");
            free(inp); free(wt); free(bias); free(pre1); free(out1); free(pre2); free(out2);
        }
    be->destroy(be);
}

// ---------------------------------------------------------------- softmax + CE + gradient
typedef struct { int N, V; } CeCfg;
static const CeCfg ce_cfgs[] = { {12, 65}, {5, 13}, {3, 100}, {4, 1} };

static void test_crossentropy_fused(void **state) {
    Backend *be = backend_cpu_create(DTYPE_FP32);
    assert_non_null(be);
    for (size_t k = 0; k < sizeof ce_cfgs / sizeof *ce_cfgs; k++) {
        const int N = ce_cfgs[k].N, V = ce_cfgs[k].V;
        const long nv = (long)N * V;
        TestRng r = test_rng(300 + k);
        float *logits = frand(&r, nv, -6, 6);
        int32_t *tgt = malloc(sizeof(int32_t) * N);
        for (int i = 0; i < N; i++) tgt[i] = (int32_t)(test_next(&r) % (uint64_t)V);
        tgt[1] = -1;   // ignore_index: zero loss, zero gradient row
        const float dloss = 1.0f / (float)(N - 1);
        float *loss1 = falloc(N), *probs = falloc(nv), *d1 = falloc(nv);
        float *loss2 = falloc(N), *d2 = frand(&r, nv, -9, 9);   // garbage: must be overwritten
        const long v1 = crossentropy_forward(loss1, probs, logits, tgt, N, V);
        crossentropy_softmax_backward(d1, probs, tgt, N, V, dloss);
        const long v2 = crossentropy_forward_backward(loss2, d2, logits, tgt, N, V, dloss);
        assert_int_equal(v1, v2);
        assert_int_equal(v2, N - 1);
        assert_close_rel(loss2, loss1, N, TOL_CE, "fused CE losses");
        assert_close_rel(d2, d1, nv, TOL_CE, "fused CE dlogits");
        for (int v = 0; v < V; v++) assert_true(d2[(long)V + v] == 0.0f);
        assert_true(loss2[1] == 0.0f);
        // in place over the logits
        float *inplace = malloc(sizeof(float) * nv);
        memcpy(inplace, logits, sizeof(float) * nv);
        crossentropy_forward_backward(loss2, inplace, inplace, tgt, N, V, dloss);
        assert_close_rel(inplace, d1, nv, TOL_CE, "fused CE dlogits in place");
        // through the backend table
        assert_non_null(be->crossentropy_forward_backward);
        memset(d2, 0, sizeof(float) * nv);
        be->crossentropy_forward_backward(be, loss2, d2, logits, tgt, N, V, dloss);
        assert_close_rel(d2, d1, nv, TOL_CE, "backend fused CE dlogits");
        free(logits); free(tgt); free(loss1); free(probs); free(d1); free(loss2); free(d2); free(inplace);
    }
    be->destroy(be);
}

// ---------------------------------------------------------------- the model's fused path
// With dropout 0, a training forward (fused loss + gradient, dropout sites skipped in the
// backward) and an evaluation-mode forward (unfused) give the same loss and gradients.
static void test_gpt_fused_loss_gradient(void **state) {
    GPTShape s = { 13, 9, 2, 2, 16, 0.0f, 0.0f, 0.0f };
    const int B = 3, T = 9;
    GPT m;
    char err[256];
    if (gpt_build(&m, &s, B, T, err, sizeof err)) fail_msg("gpt_build: %s", err);
    gpt_init_weights(&m, 7);
    TestRng r = test_rng(400);
    int32_t x[27], y[27];
    for (int i = 0; i < B * T; i++) {
        x[i] = (int32_t)(test_next(&r) % 13);
        y[i] = (int32_t)(test_next(&r) % 13);
    }
    y[4] = -1;
    float *g_eval = falloc((long)m.num_params);
    const float l_eval = gpt_forward(&m, x, y, B, T, false, 1, 0, NULL);
    gpt_zero_grad(&m);
    gpt_backward(&m, NULL, NULL);
    memcpy(g_eval, m.grads_memory, sizeof(float) * m.num_params);
    const float l_train = gpt_forward(&m, x, y, B, T, true, 1, 0, NULL);
    gpt_zero_grad(&m);
    gpt_backward(&m, NULL, NULL);
    assert_true(fabsf(l_train - l_eval) <= 1e-6f * fabsf(l_eval));
    assert_close_rel(m.grads_memory, g_eval, (long)m.num_params, TOL_GPT, "gradients, fused loss path");
    free(g_eval);
    gpt_free(&m);
}

// The GELU output recomputed in the backward (backend with gelu_forward, the CPU default) and
// kept from the forward (gelu_forward removed from the table) give the same gradients, with
// and without dropout; the recomputing model allocates 4*B*T*C floats less per layer.
static void test_gpt_gelu_recompute(void **state) {
    for (int drop = 0; drop < 2; drop++) {
        const float p = drop ? 0.1f : 0.0f;
        GPTShape s = { 13, 9, 2, 2, 16, p, p, p };
        const int B = 3, T = 9;
        Backend *be1 = backend_cpu_create(DTYPE_FP32), *be2 = backend_cpu_create(DTYPE_FP32);
        assert_non_null(be1);
        assert_non_null(be2);
        be2->gelu_forward = NULL;
        GPT m1, m2;
        char err[256];
        if (gpt_build_on(&m1, &s, B, T, be1, err, sizeof err)) fail_msg("gpt_build_on: %s", err);
        if (gpt_build_on(&m2, &s, B, T, be2, err, sizeof err)) fail_msg("gpt_build_on: %s", err);
        assert_int_equal(m2.num_acts - m1.num_acts, (size_t)s.n_layer * 4 * B * T * s.n_embd);
        gpt_init_weights(&m1, 11);
        gpt_init_weights(&m2, 11);
        TestRng r = test_rng(500 + drop);
        int32_t x[27], y[27];
        for (int i = 0; i < B * T; i++) {
            x[i] = (int32_t)(test_next(&r) % 13);
            y[i] = (int32_t)(test_next(&r) % 13);
        }
        const float l1 = gpt_forward(&m1, x, y, B, T, true, 5, 3, NULL);
        const float l2 = gpt_forward(&m2, x, y, B, T, true, 5, 3, NULL);
        assert_true(l1 == l2);
        gpt_zero_grad(&m1);
        gpt_backward(&m1, NULL, NULL);
        gpt_zero_grad(&m2);
        gpt_backward(&m2, NULL, NULL);
        assert_close_rel(m1.grads_memory, m2.grads_memory, (long)m1.num_params, TOL_GPT,
                         drop ? "gradients, GELU recomputed (dropout)" : "gradients, GELU recomputed");
        gpt_free(&m1);
        gpt_free(&m2);
        be1->destroy(be1);
        be2->destroy(be2);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_residual_layernorm),
        cmocka_unit_test(test_matmul_gelu),
        cmocka_unit_test(test_crossentropy_fused),
        cmocka_unit_test(test_gpt_fused_loss_gradient),
        cmocka_unit_test(test_gpt_gelu_recompute),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
