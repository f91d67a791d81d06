// tests/test_gpt_layouts.c — the model's two other activation layouts (model/gpt.h):
//   * forward-only evaluation (gpt_forward_inference, one shared set of block buffers): the
//     same logits and loss as gpt_forward on the same rows, bit for bit on the CPU backend; a
//     batch of B_infer > B rows fits in the training allocation; gpt_backward refuses to follow;
//   * activation checkpointing (gpt_build_with, activation_checkpointing): the loss, every
//     gradient and the parameters after several train_step calls with AdamW, dropout on, equal
//     the run that keeps every activation bit for bit (memcmp), with and without GELU
//     recomputation; the activation floats of the tutorial's shape drop by at least half.
#include "tests/test_util.h"

#include "kernels/fatal.h"
#include "model/gpt.h"
#include "trainer/adamw.h"
#include "trainer/train_step.h"

enum { V = 13 };

static void build(GPT *m, const GPTShape *s, int B, int T, Backend *be, bool ckpt) {
    char err[256];
    GPTBuildOptions opt = { .activation_checkpointing = ckpt };
    if (gpt_build_with(m, s, B, T, be, &opt, err, sizeof err)) fail_msg("gpt_build_with: %s", err);
}

static void fill_tokens(TestRng *r, int32_t *x, long n) {
    for (long i = 0; i < n; i++) x[i] = (int32_t)(test_next(r) % V);
}

// ---------------------------------------------------------------- forward-only evaluation
// gpt_forward_inference on rows R gives gpt_forward's logits and loss on R bit for bit, for
// every batch size up to B (the ops and sizes are the same, only the buffers differ); the full
// B_infer rows equal gpt_forward over the same rows B at a time to float rounding (GEMM shapes
// differ), so the shared buffers do not overlap anything live.
static void test_inference_matches_forward(void **state) {
    GPTShape s = { .vocab_size = V, .block_size = 8, .n_layer = 3, .n_head = 2, .n_embd = 16,
                   .embd_pdrop = 0.1f, .resid_pdrop = 0.1f, .attn_pdrop = 0.1f };
    const int B = 4, T = 8;
    Backend *be = backend_cpu_create(DTYPE_FP32);
    GPT m;
    build(&m, &s, B, T, be, false);
    gpt_init_weights(&m, 5);
    assert_true(m.B_infer > 2 * B);   // 3 layers: the shared layout holds several times the rows
    const int BI = m.B_infer;
    const long n_tok = (long)BI * T;
    int32_t *x = malloc(n_tok * 4), *y = malloc(n_tok * 4);
    float *logits = malloc(n_tok * V * 4), *losses = malloc(n_tok * 4);
    TestRng r = test_rng(11);
    fill_tokens(&r, x, n_tok);
    fill_tokens(&r, y, n_tok);
    y[3] = -1;   // ignore_index
    for (int b = 1; b <= B; b++) {
        const float lf = gpt_forward(&m, x, y, b, T, false, 0, 0, NULL);
        const long nv = m.n_valid;
        memcpy(logits, m.acts.logits, (size_t)b * T * V * 4);
        const float li = gpt_forward_inference(&m, x, y, b, T);
        assert_int_equal(m.n_valid, nv);
        assert_memory_equal(&li, &lf, sizeof lf);
        assert_memory_equal(m.infer.logits, logits, (size_t)b * T * V * 4);
    }
    // all B_infer rows at once against B-row forwards; then the per-token losses summed
    gpt_forward_inference(&m, x, y, BI, T);
    memcpy(logits, m.infer.logits, n_tok * V * 4);
    memcpy(losses, m.host_losses, n_tok * 4);
    double sum_inf = 0, sum_fwd = 0;
    for (long i = 0; i < n_tok; i++) sum_inf += y[i] != -1 ? losses[i] : 0.0;
    for (int r0 = 0; r0 < BI; r0 += B) {
        const int n = BI - r0 < B ? BI - r0 : B;
        const float l = gpt_forward(&m, x + (long)r0 * T, y + (long)r0 * T, n, T, false, 0, 0, NULL);
        sum_fwd += (double)l * m.n_valid;
        assert_close_rel(logits + (long)r0 * T * V, m.acts.logits, (long)n * T * V, 1e-5, "logits of B_infer rows");
    }
    assert_true(fabs(sum_inf - sum_fwd) <= 1e-5 * fabs(sum_fwd));
    free(x); free(y); free(logits); free(losses);
    gpt_free(&m);
    be->destroy(be);
}

// gpt_backward after gpt_forward_inference is refused (its activations are gone); a training
// forward after an evaluation gives the gradients of a model that never evaluated.
static jmp_buf g_fatal_jmp;
static char g_fatal_msg[512];
static void on_fatal(const char *msg, void *ctx) {
    (void)ctx;
    snprintf(g_fatal_msg, sizeof g_fatal_msg, "%s", msg);
    longjmp(g_fatal_jmp, 1);
}

static void test_backward_after_inference(void **state) {
    GPTShape s = { .vocab_size = V, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16,
                   .embd_pdrop = 0.1f, .resid_pdrop = 0.1f, .attn_pdrop = 0.1f };
    const int B = 3, T = 8;
    GPT a, b;
    Backend *be = backend_cpu_create(DTYPE_FP32);
    build(&a, &s, B, T, be, false);
    build(&b, &s, B, T, be, false);
    gpt_init_weights(&a, 6);
    gpt_init_weights(&b, 6);
    int32_t x[24], y[24];
    TestRng r = test_rng(12);
    fill_tokens(&r, x, 24);
    fill_tokens(&r, y, 24);
    gpt_forward(&a, x, y, B, T, true, 7, 3, NULL);
    gpt_forward_inference(&a, x, y, B, T);
    g_fatal_msg[0] = 0;
    fatal_set_handler(on_fatal, NULL);
    if (setjmp(g_fatal_jmp) == 0) {
        gpt_backward(&a, NULL, NULL);
        fatal_set_handler(NULL, NULL);
        fail_msg("gpt_backward after gpt_forward_inference returned");
    }
    fatal_set_handler(NULL, NULL);
    assert_non_null(strstr(g_fatal_msg, "gpt_forward_inference"));
    const float la = gpt_forward(&a, x, y, B, T, true, 7, 3, NULL);
    const float lb = gpt_forward(&b, x, y, B, T, true, 7, 3, NULL);
    assert_memory_equal(&la, &lb, sizeof la);
    gpt_zero_grad(&a); gpt_backward(&a, NULL, NULL);
    gpt_zero_grad(&b); gpt_backward(&b, NULL, NULL);
    assert_memory_equal(a.grads_memory, b.grads_memory, a.num_params * 4);
    gpt_free(&a);
    gpt_free(&b);
    be->destroy(be);
}

// ---------------------------------------------------------------- activation checkpointing
// STEPS train_step calls (forward, backward, clip, AdamW; dropout on) of a 3-layer model with
// and without checkpointing, the last step on a partial batch: the loss, the gradients and the
// parameters after each step are the same bytes. keep_gelu: the backend without gelu_forward,
// so the GELU outputs live in the working set instead of the backward's scratch.
static void checkpointing_bitwise(bool keep_gelu) {
    GPTShape s = { .vocab_size = V, .block_size = 8, .n_layer = 3, .n_head = 2, .n_embd = 16,
                   .embd_pdrop = 0.1f, .resid_pdrop = 0.2f, .attn_pdrop = 0.15f };
    enum { B = 4, T = 8, STEPS = 4 };
    Backend *be = backend_cpu_create(DTYPE_FP32);
    if (keep_gelu) be->gelu_forward = NULL;
    GPT m[2];
    AdamW opt[2];
    LossScaler ls[2];
    Comm *comm = comm_single_create();
    assert_non_null(comm);
    for (int k = 0; k < 2; k++) {
        build(&m[k], &s, B, T, be, k == 1);
        gpt_init_weights(&m[k], 21);
        assert_int_equal(adamw_init(&opt[k], be, m[k].num_params), 0);
        loss_scaler_init(&ls[k], 0);
    }
    assert_true(m[1].checkpointing && !m[0].checkpointing);
    assert_true(m[1].num_acts < m[0].num_acts);
    TestRng r = test_rng(13);
    for (int step = 0; step < STEPS; step++) {
        int32_t x[B * T], y[B * T];
        fill_tokens(&r, x, B * T);
        fill_tokens(&r, y, B * T);
        y[5] = -1;
        const int rows = step == STEPS - 1 ? B - 1 : B;
        StepResult res[2];
        for (int k = 0; k < 2; k++) {
            TrainStep ts = { .model = &m[k], .opt = &opt[k], .scaler = &ls[k], .comm = comm, .grad_clip = 1.0,
                             .lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f };
            MicroBatch mb = { x, y, rows };
            assert_int_equal(train_step(&ts, &mb, 1, B, T, 99, (uint64_t)step, 0, &res[k]), 0);
            assert_int_equal(res[k].applied, 1);
        }
        assert_memory_equal(&res[0].loss, &res[1].loss, sizeof(double));
        assert_memory_equal(&res[0].norm, &res[1].norm, sizeof(double));
        assert_memory_equal(m[0].grads_memory, m[1].grads_memory, m[0].num_params * 4);
        assert_memory_equal(m[0].params_memory, m[1].params_memory, m[0].num_params * 4);
    }
    for (int k = 0; k < 2; k++) { adamw_free(&opt[k]); gpt_free(&m[k]); }
    comm->destroy(comm);
    be->destroy(be);
}

static void test_checkpointing_bitwise(void **state) { checkpointing_bitwise(false); }
static void test_checkpointing_bitwise_keep_gelu(void **state) { checkpointing_bitwise(true); }

// Evaluation works on a checkpointing model too, with the same loss as the plain model's.
static void test_checkpointing_inference(void **state) {
    GPTShape s = { .vocab_size = V, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16 };
    const int B = 3, T = 8;
    Backend *be = backend_cpu_create(DTYPE_FP32);
    GPT a, b;
    build(&a, &s, B, T, be, false);
    build(&b, &s, B, T, be, true);
    gpt_init_weights(&a, 8);
    gpt_init_weights(&b, 8);
    assert_true(b.B_infer >= B);
    int32_t x[24], y[24];
    TestRng r = test_rng(14);
    fill_tokens(&r, x, 24);
    fill_tokens(&r, y, 24);
    const float la = gpt_forward_inference(&a, x, y, B, T), lb = gpt_forward_inference(&b, x, y, B, T);
    assert_memory_equal(&la, &lb, sizeof la);
    gpt_free(&a);
    gpt_free(&b);
    be->destroy(be);
}

// The activation floats of the tutorial config's shape (n_layer 8, n_head 8, n_embd 512,
// block 128, batch 216, tiny-shakespeare's 65 characters), counted without allocating: with
// checkpointing at most half. A small model's counts are what gpt_build_with allocates.
static void test_checkpointing_memory(void **state) {
    Backend *be = backend_cpu_create(DTYPE_FP32);
    const GPTShape tut = { .vocab_size = 65, .block_size = 128, .n_layer = 8, .n_head = 8, .n_embd = 512 };
    const GPTBuildOptions plain = { .activation_checkpointing = false }, ckpt = { .activation_checkpointing = true };
    const size_t full = gpt_count_acts(&tut, 216, 128, be, &plain), less = gpt_count_acts(&tut, 216, 128, be, &ckpt);
    print_message("tutorial shape: %zu activation floats (%.2f GiB), %zu with checkpointing (%.2f GiB): -%.1f%%\n",
                  full, full * 4.0 / (1 << 30), less, less * 4.0 / (1 << 30), 100.0 * (1.0 - (double)less / full));
    assert_true(2 * less <= full);
    assert_int_equal(gpt_count_acts(&tut, 216, 128, be, NULL), full);
    const GPTShape small = { .vocab_size = V, .block_size = 8, .n_layer = 3, .n_head = 2, .n_embd = 16 };
    for (int k = 0; k < 2; k++) {
        GPT m;
        build(&m, &small, 5, 8, be, k == 1);
        assert_int_equal(m.num_acts, gpt_count_acts(&small, 5, 8, be, k ? &ckpt : &plain));
        gpt_free(&m);
    }
    be->destroy(be);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inference_matches_forward),
        cmocka_unit_test(test_backward_after_inference),
        cmocka_unit_test(test_checkpointing_bitwise),
        cmocka_unit_test(test_checkpointing_bitwise_keep_gelu),
        cmocka_unit_test(test_checkpointing_inference),
        cmocka_unit_test(test_checkpointing_memory),
    };
    return cmocka_run_group_tests_name("gpt_layouts", tests, NULL, NULL);
}
