// tests/cuda/test_cuda_train.c — 10 training steps of a small GPT (model/gpt.c, AdamW, clipping,
// dropout on) on the emulated CUDA backend against the CPU backend, from the same weights and
// the same batches, in lockstep:
//   fp32 matmuls:        every step's loss within 1e-4 relative of the CPU's (and the first
//                        step's gradient norm, and the final evaluation loss);
//   bf16 matmuls:        within 2e-2 of the CPU fp32 run;
//   fp16 matmuls + the dynamic loss scaler (trainer/loss_scaler.h): within 2e-2 of the CPU fp32
//                        run; at step 2 the scale is forced to 2^24, so dlogits (2^24/64) overflow
//                        fp16 in the lm_head's backward GEMM: the step must be skipped (parameters
//                        and AdamW state untouched, S halved), the reference skips it too, and
//                        training must recover (later steps applied, losses still on track).
// The loss scale reaches the model through the backend table: the dloss of the op that starts
// the backward pass (crossentropy_softmax_backward, or the fused crossentropy_forward_backward
// of the training forward) is multiplied by S. The trainer will hand S to the model instead
// (see trainer/loss_scaler.h).
#include "tests/test_util.h"

#include "kernels/backend.h"
#include "trainer/loss_scaler.h"
#include "model/gpt.h"
#include "trainer/adamw.h"

enum { V = 65, BLOCK = 16, B = 4, T = 16, STEPS = 10, FORCED_STEP = 2 };
static const GPTShape SHAPE = { .vocab_size = V, .block_size = BLOCK, .n_layer = 2, .n_head = 3,
                                .n_embd = 48, .embd_pdrop = 0.1f, .resid_pdrop = 0.1f, .attn_pdrop = 0.1f };
static const float LR = 1e-3f, B1 = 0.9f, B2 = 0.95f, EPS = 1e-8f, WD = 0.1f;
static const double CLIP = 1.0;
static const uint64_t SEED = 1337;

// ---------------------------------------------------------------- data: a seeded "text" with
// structure to learn (a noisy cycle over the vocabulary), windows picked per step
static int32_t text[4096];
static void make_text(void) {
    TestRng r = test_rng(77);
    int32_t c = 0;
    for (int i = 0; i < 4096; i++) {
        const uint64_t z = test_next(&r) % 10;
        c = z < 7 ? (c + 1) % V : (int32_t)(test_next(&r) % V);
        text[i] = c;
    }
}
static void batch(int step, int32_t *x, int32_t *y) {
    TestRng r = test_rng(1000 + (uint64_t)step);
    for (int b = 0; b < B; b++) {
        const int off = (int)(test_next(&r) % (4096 - T - 1));
        for (int t = 0; t < T; t++) { x[b * T + t] = text[off + t]; y[b * T + t] = text[off + t + 1]; }
    }
    y[B * T - 1] = -1;   // one ignored target (ignore_index)
}

// ---------------------------------------------------------------- loss scale through the table
static Backend *g_inner;
static float g_loss_scale = 1.0f;
static void scaled_ce_backward(Backend *be, float *dlogits, const float *probs, const int32_t *targets,
                               int N, int Vv, float dloss) {
    (void)be;
    g_inner->crossentropy_softmax_backward(g_inner, dlogits, probs, targets, N, Vv, dloss * g_loss_scale);
}
static void scaled_ce_forward_backward(Backend *be, float *losses, float *dlogits, const float *logits,
                                       const int32_t *targets, int N, int Vv, float dloss) {
    (void)be;
    g_inner->crossentropy_forward_backward(g_inner, losses, dlogits, logits, targets, N, Vv, dloss * g_loss_scale);
}

typedef struct { GPT m; AdamW opt; LossScaler ls; } Run;

static void run_init(Run *r, Backend *be, int scaler) {
    char err[512];
    if (gpt_build_on(&r->m, &SHAPE, B, T, be, err, sizeof err)) fail_msg("gpt_build_on: %s", err);
    gpt_init_weights(&r->m, SEED);
    if (adamw_init(&r->opt, be, r->m.num_params)) fail_msg("adamw_init");
    loss_scaler_init(&r->ls, scaler);
}
static void run_free(Run *r) { adamw_free(&r->opt); gpt_free(&r->m); }

static float *params_of(Run *r) {
    float *p = malloc(r->m.num_params * sizeof(float));
    gpt_get_params(&r->m, p);
    return p;
}

// One step; returns 1 applied, 0 skipped. *norm: the unscaled gradient norm.
static int step(Run *r, int s, const int32_t *x, const int32_t *y, float *loss, double *norm) {
    g_loss_scale = loss_scaler_scale(&r->ls);   // before the forward: a fused backend starts dlogits there
    *loss = gpt_forward(&r->m, x, y, B, T, true, SEED, (uint64_t)s);
    gpt_zero_grad(&r->m);
    gpt_backward(&r->m);
    const int rc = loss_scaler_unscale_clip(&r->ls, r->m.be, r->m.grads_memory, r->m.num_params, CLIP, norm);
    if (rc < 0) fail_msg("loss scaler: diverged");
    if (rc > 0) {
        adamw_step(&r->opt, r->m.params_memory, r->m.grads_memory, r->m.tensors, r->m.n_tensors, LR, B1, B2,
                   EPS, WD);
        gpt_params_changed(&r->m);
    }
    return rc;
}

static void train_compare(ComputeDtype dt, double tol) {
    char err[512];
    make_text();
    Backend *cu = backend_cuda_create(dt, 0, err, sizeof err);
    if (!cu) fail_msg("backend_cuda_create: %s", err);
    // the CUDA backend seen through a table whose first backward op applies the loss scale
    Backend wrapped = *cu;
    g_inner = cu;
    wrapped.crossentropy_softmax_backward = scaled_ce_backward;
    if (cu->crossentropy_forward_backward) wrapped.crossentropy_forward_backward = scaled_ce_forward_backward;
    Backend *cpu = backend_cpu_create(DTYPE_FP32), *cpu_lp = backend_cpu_create(dt);
    Run rc, rr, rl;
    run_init(&rc, &wrapped, dt == DTYPE_FP16);
    run_init(&rr, cpu, 0);
    run_init(&rl, cpu_lp, 0);

    float *p0c = params_of(&rc), *p0r = params_of(&rr);   // same initial weights, bitwise
    assert_memory_equal(p0c, p0r, rc.m.num_params * sizeof(float));
    free(p0c); free(p0r);

    int32_t x[B * T], y[B * T];
    int skipped = 0, forced_skipped = 0;
    float first_loss = 0, last_loss = 0;
    for (int s = 0; s < STEPS; s++) {
        batch(s, x, y);
        if (dt == DTYPE_FP16 && s == FORCED_STEP) rc.ls.scale = 16777216.0f;   // 2^24: forced overflow
        float *before = (dt == DTYPE_FP16 && s >= FORCED_STEP) ? params_of(&rc) : NULL;
        const long adam_before = rc.opt.step;
        const float S = loss_scaler_scale(&rc.ls);
        float lc, lr, ll;
        double nc, nr, nl;
        const int applied = step(&rc, s, x, y, &lc, &nc);
        // the references skip what the CUDA run skipped (they never overflow themselves)
        if (applied) {
            step(&rr, s, x, y, &lr, &nr);
            step(&rl, s, x, y, &ll, &nl);
        } else {
            lr = gpt_forward(&rr.m, x, y, B, T, true, SEED, (uint64_t)s);
            ll = gpt_forward(&rl.m, x, y, B, T, true, SEED, (uint64_t)s);
            nr = nl = NAN;
            skipped++;
            if (s == FORCED_STEP) forced_skipped = 1;
            assert_int_equal(rc.opt.step, adam_before);         // AdamW did not step
            float *after = params_of(&rc);
            assert_memory_equal(after, before, rc.m.num_params * sizeof(float));   // weights untouched
            free(after);
            assert_true(rc.ls.scale == 0.5f * S);                // scale halved
        }
        free(before);
        const double rel = fabs((double)lc - lr) / fabs((double)lr);
        print_message("    step %d: loss cuda %.6f  cpu fp32 %.6f (rel %.2e)  cpu same-dtype %.6f | norm %.4f/%.4f | "
                      "scale %g%s\n", s, lc, lr, rel, ll, nc, nr, S, applied ? "" : "  SKIPPED (overflow)");
        if (!(rel <= tol)) fail_msg("step %d: loss %.7f vs cpu %.7f: rel %.3e > %.1e", s, lc, lr, rel, tol);
        if (dt == DTYPE_FP32 && s == 0 && !(fabs(nc - nr) <= 1e-4 * nr))
            fail_msg("step 0 gradient norm %.9g vs cpu %.9g", nc, nr);
        if (s == 0) first_loss = lc;
        last_loss = lc;
    }
    // evaluation (dropout off) after training
    batch(STEPS, x, y);
    const float ec = gpt_forward(&rc.m, x, y, B, T, false, 0, 0), er = gpt_forward(&rr.m, x, y, B, T, false, 0, 0);
    float *pc = params_of(&rc), *pr = params_of(&rr);
    double dmax = 0, pmax = 0;
    for (size_t i = 0; i < rc.m.num_params; i++) {
        dmax = fmax(dmax, fabs((double)pc[i] - pr[i]));
        pmax = fmax(pmax, fabs((double)pr[i]));
    }
    free(pc); free(pr);
    print_message("    eval: cuda %.6f cpu %.6f (rel %.2e); skipped steps %d; final weights max |diff| %.2e "
                  "(max |w| %.2f)\n", ec, er, fabs((double)ec - er) / er, skipped, dmax, pmax);
    assert_true(fabs((double)ec - er) <= tol * er);
    assert_true(last_loss < first_loss);                         // it learns
    if (dt == DTYPE_FP16) {
        assert_true(forced_skipped);
        assert_true(skipped <= 6);                                // recovered: halving brought S back
        assert_true(rc.ls.consecutive_skips == 0);                // the last steps were applied
        assert_true(rc.ls.scale == 16777216.0f / (float)(1 << skipped));
    } else {
        assert_int_equal(skipped, 0);
    }
    run_free(&rc); run_free(&rr); run_free(&rl);
    cu->destroy(cu); cpu->destroy(cpu); cpu_lp->destroy(cpu_lp);
}

static void test_train_fp32(void **state) { train_compare(DTYPE_FP32, 1e-4); }
static void test_train_bf16(void **state) { train_compare(DTYPE_BF16, 2e-2); }
static void test_train_fp16_loss_scaler(void **state) { train_compare(DTYPE_FP16, 2e-2); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_train_fp32),
        cmocka_unit_test(test_train_bf16),
        cmocka_unit_test(test_train_fp16_loss_scaler),
    };
    return cmocka_run_group_tests_name("cuda training vs cpu", tests, NULL, NULL);
}
