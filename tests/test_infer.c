// tests/test_infer.c — the model's incremental inference with a key/value cache (model/gpt.h:
// gpt_infer_*, on the CPU backend) against the full forward pass (gpt_forward): the same logits
// at every position within 1e-5 relative to the largest logit, token by token, in chunks, and past
// block_size (minGPT's cropping), so sampling draws from the same distribution as a full forward
// would give. The emulated CUDA backend's incremental inference: tests/cuda/test_cuda_layouts.c.
#include "tests/test_util.h"

#include "model/gpt.h"

#define TOL_LOGITS 1e-5

typedef struct { int V, T, L, NH, C; } Shape;
// hs 8 (vector lanes), hs 10 (scalar tails), hs 32 with block 40 (several key groups).
static const Shape shapes[] = { {11, 16, 2, 2, 16}, {13, 12, 3, 2, 20}, {17, 40, 2, 2, 64} };

// A model with random weights everywhere (LayerNorm and biases too, so every term counts).
static void build_random(GPT *m, const Shape *sh, int B, int T, uint64_t seed) {
    GPTShape s = { sh->V, sh->T, sh->L, sh->NH, sh->C, 0.0f, 0.0f, 0.0f };
    char err[256];
    if (gpt_build(m, &s, B, T, err, sizeof err)) fail_msg("gpt_build: %s", err);
    TestRng r = test_rng(seed);
    test_fill(&r, m->params_memory, (long)m->num_params, -0.5f, 0.5f);
}

static void tokens(int32_t *x, long n, int V, uint64_t seed) {
    TestRng r = test_rng(seed);
    for (long i = 0; i < n; i++) x[i] = (int32_t)(test_next(&r) % (uint64_t)V);
}

// Full-forward logits (T, V) of x (T tokens) in out.
static void full_logits(GPT *m, const int32_t *x, int T, float *out) {
    gpt_forward(m, x, NULL, 1, T, false, 0, 0, NULL);
    memcpy(out, m->acts.logits, sizeof(float) * (size_t)T * m->shape.vocab_size);
}

// Feeding one token at a time gives the full forward's logits at each position.
static void test_step_matches_forward(void **state) {
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
        const Shape *sh = &shapes[k];
        GPT m;
        build_random(&m, sh, 1, sh->T, 100 + k);
        int32_t *x = malloc(sizeof(int32_t) * sh->T);
        float *ref = malloc(sizeof(float) * sh->T * sh->V);
        tokens(x, sh->T, sh->V, 200 + k);
        full_logits(&m, x, sh->T, ref);
        GPTInfer g;
        char err[256];
        if (gpt_infer_begin(&g, &m, err, sizeof err)) fail_msg("%s", err);
        for (int t = 0; t < sh->T; t++) {
            const float *lg = gpt_infer_feed(&g, x + t, 1);
            assert_non_null(lg);
            char what[64];
            snprintf(what, sizeof what, "shape %zu position %d", k, t);
            assert_close_rel(lg, ref + (size_t)t * sh->V, sh->V, TOL_LOGITS, what);
        }
        assert_null(gpt_infer_feed(&g, x, 1));   // the cache is full
        gpt_infer_end(&g);
        free(x); free(ref);
        gpt_free(&m);
    }
}

// Chunks of several tokens (a prompt) continue the cache exactly like single tokens.
static void test_chunks_match_forward(void **state) {
    const Shape *sh = &shapes[2];
    GPT m;
    build_random(&m, sh, 1, sh->T, 300);
    int32_t *x = malloc(sizeof(int32_t) * sh->T);
    float *ref = malloc(sizeof(float) * sh->T * sh->V);
    tokens(x, sh->T, sh->V, 301);
    full_logits(&m, x, sh->T, ref);
    GPTInfer g;
    char err[256];
    if (gpt_infer_begin(&g, &m, err, sizeof err)) fail_msg("%s", err);
    const int chunks[] = { 7, 1, 13, 2, 17 };   // sums to 40 = block_size
    int pos = 0;
    for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++) {
        const float *lg = gpt_infer_feed(&g, x + pos, chunks[c]);
        pos += chunks[c];
        assert_close_rel(lg, ref + (size_t)(pos - 1) * sh->V, sh->V, TOL_LOGITS, "chunked feed");
    }
    // reset starts over at position 0
    gpt_infer_reset(&g);
    assert_close_rel(gpt_infer_feed(&g, x, 1), ref, sh->V, TOL_LOGITS, "after reset");
    gpt_infer_end(&g);
    free(x); free(ref);
    gpt_free(&m);
}

// gpt_infer_next on a growing context, past block_size: each call equals the full forward
// on the last min(n, block_size) tokens at its last position (minGPT's generate cropping).
static void test_next_crops_like_generate(void **state) {
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
        const Shape *sh = &shapes[k];
        const int n_total = 2 * sh->T + 5;
        GPT m;
        build_random(&m, sh, 1, sh->T, 400 + k);
        int32_t *ctx = malloc(sizeof(int32_t) * n_total);
        float *ref = malloc(sizeof(float) * sh->T * sh->V);
        tokens(ctx, n_total, sh->V, 500 + k);
        GPTInfer g;
        char err[256];
        if (gpt_infer_begin(&g, &m, err, sizeof err)) fail_msg("%s", err);
        for (int n = 1; n <= n_total; n++) {
            const int w = n < sh->T ? n : sh->T;
            full_logits(&m, ctx + (n - w), w, ref);
            const float *lg = gpt_infer_next(&g, ctx, n);
            char what[64];
            snprintf(what, sizeof what, "shape %zu context %d", k, n);
            assert_close_rel(lg, ref + (size_t)(w - 1) * sh->V, sh->V, TOL_LOGITS, what);
        }
        // A context that is not an extension of the cache (a new prompt) refills it.
        tokens(ctx, 5, sh->V, 600 + k);
        full_logits(&m, ctx, 5, ref);
        assert_close_rel(gpt_infer_next(&g, ctx, 5), ref + 4 * sh->V, sh->V, TOL_LOGITS, "new prompt");
        gpt_infer_end(&g);
        free(ctx); free(ref);
        gpt_free(&m);
    }
}

// Inference leaves the training forward's activations alone (its own working set and cache).
static void test_training_acts_untouched(void **state) {
    const Shape *sh = &shapes[0];
    GPT m;
    build_random(&m, sh, 2, sh->T, 700);
    const long n = 2L * sh->T;
    int32_t *x = malloc(sizeof(int32_t) * n);
    tokens(x, n, sh->V, 701);
    gpt_forward(&m, x, NULL, 2, sh->T, false, 0, 0, NULL);
    float *before = malloc(sizeof(float) * m.num_acts);
    memcpy(before, m.acts_memory, sizeof(float) * m.num_acts);
    GPTInfer g;
    char err[256];
    if (gpt_infer_begin(&g, &m, err, sizeof err)) fail_msg("%s", err);
    assert_non_null(gpt_infer_next(&g, x, sh->T + 3));
    assert_memory_equal(before, m.acts_memory, sizeof(float) * m.num_acts);
    gpt_infer_end(&g);
    free(x); free(before);
    gpt_free(&m);
}

// Inference runs in fp32: a backend with low-precision matmuls is refused with a message, and the
// refused (empty) state can be ended.
static void test_low_precision_refused(void **state) {
    GPTShape s = { 10, 8, 1, 2, 16, 0, 0, 0 };
    Backend *be = backend_cpu_create(DTYPE_BF16);
    assert_non_null(be);
    GPT m;
    GPTInfer g;
    char err[256];
    if (gpt_build_on(&m, &s, 1, 1, be, err, sizeof err)) fail_msg("%s", err);
    assert_int_not_equal(gpt_infer_begin(&g, &m, err, sizeof err), 0);
    assert_non_null(strstr(err, "fp32"));
    gpt_infer_end(&g);
    gpt_free(&m);
    be->destroy(be);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_step_matches_forward),
        cmocka_unit_test(test_chunks_match_forward),
        cmocka_unit_test(test_next_crops_like_generate),
        cmocka_unit_test(test_training_acts_untouched),
        cmocka_unit_test(test_low_precision_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
