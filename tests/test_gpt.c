// tests/test_gpt.c — the whole model against PyTorch (committed fixture) and against
// finite differences; init, layout, causality, dropout determinism, one key per dropout site and
// the per-call step arguments (GPTStepArgs, the backward hook).
#include "tests/test_util.h"

#include "model/gpt.h"

#include "tests/gpt_fixture.h"

static void build(GPT *m, const GPTShape *s, int B, int T) {
    char err[256];
    if (gpt_build(m, s, B, T, err, sizeof err)) fail_msg("gpt_build: %s", err);
}

// Logits, loss and every parameter gradient equal PyTorch's within 1e-5 relative to
// each tensor's largest magnitude.
static void test_matches_pytorch(void **state) {
    Fixture fx = load_fixture();
    GPTShape s = { fx.V, fx.T, fx.L, fx.NH, fx.C, 0, 0, 0 };
    GPT m;
    build(&m, &s, fx.B, fx.T);
    assert_int_equal(m.num_params, fx.P);
    memcpy(m.params_memory, fx.params, fx.P * 4);
    float loss = gpt_forward(&m, fx.idx, fx.targets, fx.B, fx.T, false, 0, 0, NULL);
    assert_close_rel(m.acts.logits, fx.logits, (long)fx.B * fx.T * fx.V, 1e-5, "logits");
    assert_true(fabsf(loss - fx.loss) <= 1e-5f * fabsf(fx.loss));
    assert_int_equal(m.n_valid, fx.B * fx.T - 2);   // two targets are ignore_index -1
    gpt_zero_grad(&m);
    gpt_backward(&m, NULL, NULL);
    for (int k = 0; k < m.n_tensors; k++) {
        const ParamTensor *t = &m.tensors[k];
        assert_close_rel(m.grads_memory + t->offset, fx.grads + t->offset, (long)t->numel, 1e-5, t->name);
    }
    gpt_free(&m);
    free_fixture(&fx);
}

// ---------------------------------------------------------------- finite differences
// Directional derivatives: for a random unit direction d restricted to one tensor,
// (L(p + h d) - L(p - h d)) / 2h must equal grad . d. Dropout is ON with a fixed
// (seed, step): the masks are a pure function of those, so L is a smooth function of p.
static double loss_at(GPT *m, const int32_t *x, const int32_t *y, int B, int T) {
    return gpt_forward(m, x, y, B, T, true, 42, 7, NULL);
}

static void test_finite_differences(void **state) {
    GPTShape s = { .vocab_size = 13, .block_size = 9, .n_layer = 2, .n_head = 3, .n_embd = 12,
                   .embd_pdrop = 0.1f, .resid_pdrop = 0.1f, .attn_pdrop = 0.1f };
    const int B = 2, T = 7;
    GPT m;
    build(&m, &s, B, T);
    gpt_init_weights(&m, 5);
    TestRng r = test_rng(11);
    // Larger weights than init so every path carries signal.
    for (size_t i = 0; i < m.num_params; i++) m.params_memory[i] += test_uniform(&r, -0.3f, 0.3f);
    int32_t x[14], y[14];
    for (int i = 0; i < B * T; i++) { x[i] = (int32_t)(test_next(&r) % 13); y[i] = (int32_t)(test_next(&r) % 13); }
    y[3] = -1;
    loss_at(&m, x, y, B, T);
    gpt_zero_grad(&m);
    gpt_backward(&m, NULL, NULL);
    float *grad = malloc(m.num_params * 4), *dir = malloc(m.num_params * 4);
    memcpy(grad, m.grads_memory, m.num_params * 4);
    const double h = 1e-2;
    for (int k = 0; k < m.n_tensors; k++) {
        const ParamTensor *t = &m.tensors[k];
        float *p = m.params_memory + t->offset;
        double norm = 0, gd = 0;
        for (size_t i = 0; i < t->numel; i++) { dir[i] = test_uniform(&r, -1, 1); norm += (double)dir[i] * dir[i]; }
        norm = sqrt(norm);
        for (size_t i = 0; i < t->numel; i++) { dir[i] /= norm; gd += (double)dir[i] * grad[t->offset + i]; }
        float *saved = malloc(t->numel * 4);
        memcpy(saved, p, t->numel * 4);
        for (size_t i = 0; i < t->numel; i++) p[i] = saved[i] + (float)(h * dir[i]);
        double lp = loss_at(&m, x, y, B, T);
        for (size_t i = 0; i < t->numel; i++) p[i] = saved[i] - (float)(h * dir[i]);
        double lm = loss_at(&m, x, y, B, T);
        memcpy(p, saved, t->numel * 4);
        free(saved);
        double fd = (lp - lm) / (2 * h);
        // fp32 forward: loss rounding ~3e-7 over 2h gives ~2e-5 absolute noise.
        double tol = 2e-3 * fabs(gd) + 5e-5;
        if (fabs(fd - gd) > tol)
            fail_msg("%s: finite difference %.6e vs gradient %.6e", t->name, fd, gd);
    }
    free(grad); free(dir);
    gpt_free(&m);
}

// ---------------------------------------------------------------- layout and init
// gpt_shape_check's closed-form count agrees with the table, and sizes a file or override can
// set to INT_MAX are refused before anything is sized from them.
static void test_shape_check(void **state) {
    (void)state;
    char err[256];
    const GPTShape shapes[] = { {5, 4, 1, 1, 4, 0, 0, 0}, {65, 64, 3, 2, 48, 0, 0, 0}, {1, 1, 7, 3, 9, 0, 0, 0} };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        size_t n = 0;
        assert_int_equal(gpt_shape_check(&shapes[i], &n, err, sizeof err), 0);
        int nt = gpt_param_table(&shapes[i], NULL);
        ParamTensor *t = calloc((size_t)nt, sizeof *t);
        gpt_param_table(&shapes[i], t);
        assert_int_equal(n, t[nt - 1].offset + t[nt - 1].numel);
        free(t);
    }
    GPTShape s = shapes[0];
    s.n_layer = 2147483647;
    assert_int_not_equal(gpt_shape_check(&s, NULL, err, sizeof err), 0);
    assert_non_null(strstr(err, "n_layer"));
    s = shapes[0]; s.n_embd = 715827884; s.n_head = 1;
    assert_int_not_equal(gpt_shape_check(&s, NULL, err, sizeof err), 0);
    s = shapes[0]; s.n_embd = GPT_MAX_EMBD; s.n_head = 1; s.n_layer = GPT_MAX_LAYER;   // each size allowed, the count not
    assert_int_not_equal(gpt_shape_check(&s, NULL, err, sizeof err), 0);
    assert_non_null(strstr(err, "parameters"));
    s = shapes[0]; s.block_size = -1;
    assert_int_not_equal(gpt_shape_check(&s, NULL, err, sizeof err), 0);
    // A batch whose activation count would wrap is refused before anything is allocated.
    GPT m;
    s = (GPTShape){ 65, 1 << 20, 4, 64, 64, 0, 0, 0 };
    assert_int_not_equal(gpt_build(&m, &s, 1 << 20, 1 << 20, err, sizeof err), 0);
    assert_non_null(strstr(err, "activation"));
}

static void test_layout_and_init(void **state) {
    GPTShape s = { .vocab_size = 65, .block_size = 64, .n_layer = 4, .n_head = 4, .n_embd = 128 };
    GPT m;
    build(&m, &s, 2, 64);
    const size_t C = 128, V = 65, L = 4;
    assert_int_equal(m.num_params, V * C + 64 * C + L * (12 * C * C + 13 * C) + 2 * C + V * C);
    assert_int_equal(m.n_tensors, 2 + 12 * 4 + 3);
    // Tensors tile the buffer without gaps, in order.
    size_t off = 0;
    for (int k = 0; k < m.n_tensors; k++) { assert_int_equal(m.tensors[k].offset, off); off += m.tensors[k].numel; }
    gpt_init_weights(&m, 1337);
    for (int k = 0; k < m.n_tensors; k++) {
        const ParamTensor *t = &m.tensors[k];
        const float *w = m.params_memory + t->offset;
        const char *nm = t->name;
        size_t len = strlen(nm);
        bool is_weight_2d = t->cols > 1;
        bool is_bias = len > 5 && strcmp(nm + len - 5, ".bias") == 0;
        bool is_ln = strstr(nm, "ln_") != NULL;
        // minGPT's weight-decay groups: Linear weights only.
        bool linear_w = is_weight_2d && strstr(nm, "wte") == NULL && strstr(nm, "wpe") == NULL;
        assert_int_equal(t->decay, linear_w);
        double sum = 0, sq = 0;
        for (size_t i = 0; i < t->numel; i++) { sum += w[i]; sq += (double)w[i] * w[i]; }
        double mean = sum / t->numel, sd = sqrt(sq / t->numel - mean * mean);
        if (is_bias) { assert_true(sq == 0); continue; }
        if (is_ln) { assert_true(mean == 1.0 && sd < 1e-6); continue; }
        double want = strstr(nm, "c_proj.weight") ? 0.02 / sqrt(2.0 * L) : 0.02;
        if (fabs(sd - want) > 0.1 * want) fail_msg("%s: init std %.5f, want %.5f", nm, sd, want);
        if (fabs(mean) > 5 * want / sqrt((double)t->numel) + 1e-6) fail_msg("%s: init mean %.2e", nm, mean);
    }
    // Same seed, same weights; another seed, other weights.
    float *a = malloc(m.num_params * 4);
    memcpy(a, m.params_memory, m.num_params * 4);
    gpt_init_weights(&m, 1337);
    assert_memory_equal(a, m.params_memory, m.num_params * 4);
    gpt_init_weights(&m, 1338);
    assert_memory_not_equal(a, m.params_memory, m.num_params * 4);
    free(a);
    gpt_free(&m);
}

static void test_rejects_bad_shapes(void **state) {
    GPT m;
    char err[256];
    GPTShape s = { .vocab_size = 10, .block_size = 8, .n_layer = 1, .n_head = 3, .n_embd = 16 };
    assert_int_not_equal(gpt_build(&m, &s, 2, 8, err, sizeof err), 0);
    assert_non_null(strstr(err, "divisible"));
    s.n_head = 4;
    assert_int_not_equal(gpt_build(&m, &s, 2, 9, err, sizeof err), 0);   // T > block_size
    s.attn_pdrop = 1.0f;
    assert_int_not_equal(gpt_build(&m, &s, 2, 8, err, sizeof err), 0);
}

// ---------------------------------------------------------------- behaviour
// Changing the token at position t leaves the logits at positions < t unchanged.
static void test_causal(void **state) {
    GPTShape s = { .vocab_size = 11, .block_size = 10, .n_layer = 2, .n_head = 2, .n_embd = 16 };
    const int T = 10, V = 11;
    GPT m;
    build(&m, &s, 1, T);
    gpt_init_weights(&m, 3);
    int32_t x[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    gpt_forward(&m, x, NULL, 1, T, false, 0, 0, NULL);
    float before[110];
    memcpy(before, m.acts.logits, sizeof before);
    for (int t = 1; t < T; t++) {
        int32_t y[10];
        memcpy(y, x, sizeof y);
        y[t] = (y[t] + 5) % V;
        gpt_forward(&m, y, NULL, 1, T, false, 0, 0, NULL);
        assert_memory_equal(m.acts.logits, before, (size_t)t * V * 4);
        assert_memory_not_equal(m.acts.logits + t * V, before + t * V, V * 4);
    }
    gpt_free(&m);
}

// Dropout masks depend only on (seed, step): same inputs give bitwise-equal losses,
// another step gives another loss, and eval mode ignores dropout.
static void test_dropout_determinism(void **state) {
    GPTShape s = { .vocab_size = 11, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16,
                   .embd_pdrop = 0.2f, .resid_pdrop = 0.2f, .attn_pdrop = 0.2f };
    GPT m;
    build(&m, &s, 2, 8);
    gpt_init_weights(&m, 3);
    int32_t x[16], y[16];
    for (int i = 0; i < 16; i++) { x[i] = i % 11; y[i] = (i * 7) % 11; }
    float a = gpt_forward(&m, x, y, 2, 8, true, 9, 100, NULL);
    float b = gpt_forward(&m, x, y, 2, 8, true, 9, 100, NULL);
    float c = gpt_forward(&m, x, y, 2, 8, true, 9, 101, NULL);
    float e1 = gpt_forward(&m, x, y, 2, 8, false, 9, 100, NULL);
    float e2 = gpt_forward(&m, x, y, 2, 8, false, 10, 555, NULL);
    assert_true(a == b);
    assert_true(a != c);
    assert_true(e1 == e2);
    assert_true(a != e1);
    gpt_free(&m);
}

// Every dropout site of every step draws its own mask: the keys the model hands the backend's
// dropout and attention ops over several steps of a 3-layer model are all different (two sites
// with one key would drop the same elements, correlating masks that must be independent).
#define MAX_KEYS 256
static uint64_t g_keys[MAX_KEYS];
static int g_nkeys;
static void (*g_dropout_forward)(Backend *, float *, const float *, long, long, float, DropoutKey);
static void (*g_attention_forward)(Backend *, float *, float *, const float *, int, int, int, int, float, DropoutKey);
static void record_key(DropoutKey k) {
    if (g_nkeys < MAX_KEYS) g_keys[g_nkeys] = k.key;
    g_nkeys++;
}
static void rec_dropout_forward(Backend *be, float *out, const float *inp, long N, long row_len, float p,
                                DropoutKey k) {
    record_key(k);
    g_dropout_forward(be, out, inp, N, row_len, p, k);
}
static void rec_attention_forward(Backend *be, float *out, float *att, const float *qkv, int B, int T, int C,
                                  int NH, float attn_p, DropoutKey k) {
    record_key(k);
    g_attention_forward(be, out, att, qkv, B, T, C, NH, attn_p, k);
}

static void test_dropout_keys_distinct(void **state) {
    GPTShape s = { .vocab_size = 11, .block_size = 8, .n_layer = 3, .n_head = 2, .n_embd = 16,
                   .embd_pdrop = 0.1f, .resid_pdrop = 0.1f, .attn_pdrop = 0.1f };
    GPT m;
    build(&m, &s, 2, 8);
    gpt_init_weights(&m, 3);
    g_dropout_forward = m.be->dropout_forward;
    g_attention_forward = m.be->attention_forward;
    m.be->dropout_forward = rec_dropout_forward;
    m.be->attention_forward = rec_attention_forward;
    int32_t x[16], y[16];
    for (int i = 0; i < 16; i++) { x[i] = i % 11; y[i] = (i * 7) % 11; }
    g_nkeys = 0;
    const int steps = 5, sites = 1 + 3 * s.n_layer;   // the embedding, then 3 per block
    for (int step = 0; step < steps; step++) gpt_forward(&m, x, y, 2, 8, true, 9, (uint64_t)step, NULL);
    assert_int_equal(g_nkeys, steps * sites);
    for (int i = 0; i < g_nkeys; i++)
        for (int j = 0; j < i; j++)
            if (g_keys[i] == g_keys[j])
                fail_msg("dropout site %d of step %d has the key of site %d of step %d", i % sites, i / sites,
                         j % sites, j / sites);
    m.be->dropout_forward = g_dropout_forward;
    m.be->attention_forward = g_attention_forward;
    gpt_free(&m);
}

// GPTStepArgs: NULL is GPT_STEP_ARGS_DEFAULT bit for bit; a row's dropout masks follow its global
// row (row 1 of a batch equals a one-row batch placed at row 1, dropout on, up to the rounding
// of GEMMs of another shape; placed at row 0 it draws other masks); loss_scale 4
// multiplies every gradient by exactly 4 and leaves the loss; the backward's hook sees the
// finished suffixes of the gradients, from ln_f's offset down to 0, at gpt_grads_ready_points'
// points (after every op of a block): between two calls the backward writes only the gradients
// [this first, previous first), and what the hook sees from first on is already final.
#define MAX_READY 32
static size_t g_ready[MAX_READY];
static int g_nready;
static const GPT *g_ready_model;             // when set: each call's gradients are kept in g_ready_grads
static float *g_ready_grads[MAX_READY];
static void on_ready(void *ctx, size_t first) {
    (void)ctx;
    if (g_nready < MAX_READY) {
        g_ready[g_nready] = first;
        if (g_ready_model) {
            const size_t P = g_ready_model->num_params;
            g_ready_grads[g_nready] = malloc(P * sizeof(float));
            memcpy(g_ready_grads[g_nready], g_ready_model->grads_memory, P * sizeof(float));
        }
    }
    g_nready++;
}

static void test_step_args(void **state) {
    GPTShape s = { .vocab_size = 11, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16,
                   .embd_pdrop = 0.2f, .resid_pdrop = 0.2f, .attn_pdrop = 0.2f };
    const int T = 8, V = 11;
    GPT m;
    build(&m, &s, 2, T);
    gpt_init_weights(&m, 3);
    int32_t x[16], y[16];
    for (int i = 0; i < 16; i++) { x[i] = i % 11; y[i] = (i * 7) % 11; }
    const float l_null = gpt_forward(&m, x, y, 2, T, true, 9, 4, NULL);
    gpt_zero_grad(&m);
    gpt_backward(&m, NULL, NULL);
    float *g1 = malloc(m.num_params * 4), *row1 = malloc((size_t)T * V * 4);
    memcpy(g1, m.grads_memory, m.num_params * 4);
    memcpy(row1, m.acts.logits + (size_t)T * V, (size_t)T * V * 4);
    const GPTStepArgs dflt = GPT_STEP_ARGS_DEFAULT;
    assert_true(gpt_forward(&m, x, y, 2, T, true, 9, 4, &dflt) == l_null);

    const GPTStepArgs at1 = { .batch_row0 = 1, .batch_row_stride = 1, .loss_scale = 1.0f };
    gpt_forward(&m, x + T, y + T, 1, T, true, 9, 4, &at1);   // GEMMs of another shape: to rounding
    assert_close_rel(m.acts.logits, row1, (long)T * V, 1e-5, "row 1 alone");
    gpt_forward(&m, x + T, y + T, 1, T, true, 9, 4, NULL);   // placed at row 0: other masks
    double diff = 0;
    for (int i = 0; i < T * V; i++) diff = fmax(diff, fabs(m.acts.logits[i] - row1[i]));
    assert_true(diff > 1e-2);

    const GPTStepArgs x4 = { .batch_row0 = 0, .batch_row_stride = 1, .loss_scale = 4.0f };
    assert_true(gpt_forward(&m, x, y, 2, T, true, 9, 4, &x4) == l_null);
    gpt_zero_grad(&m);
    g_nready = 0;
    gpt_backward(&m, on_ready, NULL);
    for (size_t i = 0; i < m.num_params; i++)
        if (m.grads_memory[i] != 4.0f * g1[i]) fail_msg("gradient %zu: %g, want 4 x %g", i, m.grads_memory[i], g1[i]);
    assert_int_equal(g_nready, 6 * s.n_layer + 2);   // ln_f + lm_head, each block's 6 ops, the embeddings
    assert_true(g_ready[0] == (size_t)(m.grads.ln_f_w - m.grads_memory));
    for (int i = 1; i < g_nready; i++) assert_true(g_ready[i] < g_ready[i - 1]);
    assert_true(g_ready[g_nready - 1] == 0);
    size_t pts[MAX_READY];
    assert_int_equal(gpt_grads_ready_points(&m.shape, NULL), g_nready);
    assert_int_equal(gpt_grads_ready_points(&m.shape, pts), g_nready);
    for (int i = 0; i < g_nready; i++) assert_true(pts[i] == g_ready[i]);
    // between two calls, only [this first, previous first) changes; from first on, final
    gpt_forward(&m, x, y, 2, T, true, 9, 4, &x4);
    gpt_zero_grad(&m);
    g_nready = 0;
    g_ready_model = &m;
    gpt_backward(&m, on_ready, NULL);
    g_ready_model = NULL;
    for (int i = 0; i < g_nready; i++) {
        const size_t hi = i ? g_ready[i - 1] : m.num_params;
        for (size_t j = 0; j < m.num_params; j++) {
            const float before = i ? g_ready_grads[i - 1][j] : 0.0f;
            if (g_ready_grads[i][j] != before && (j < g_ready[i] || j >= hi))
                fail_msg("hook %d (first %zu): gradient %zu written outside [%zu, %zu): %g -> %g", i, g_ready[i], j, g_ready[i], hi, before, g_ready_grads[i][j]);
            if (j >= g_ready[i] && g_ready_grads[i][j] != m.grads_memory[j])
                fail_msg("hook %d (first %zu): gradient %zu not final yet", i, g_ready[i], j);
        }
    }
    for (int i = 0; i < g_nready; i++) free(g_ready_grads[i]);
    free(g1);
    free(row1);
    gpt_free(&m);
}

// GPTStepArgs.params_needed: the parameters start as NaN and the hook fills each range it is
// called with from the real ones (as the ZeRO all-gather does): the forward still gives the loss
// of the model with every parameter in place, bit for bit, and (with activation checkpointing,
// whose backward recomputes each block) the same gradients, so no layer reads a weight before
// asking for it; the ranges come in order (each starts at or before the previous end: a
// LayerNorm's weights may be asked for twice), cover [0, num_params), and
// gpt_forward_inference never calls the hook.
typedef struct { const float *real; float *params; size_t last_hi; int calls, out_of_order; } NeedCtx;
static void on_needed(void *ctx, size_t lo, size_t hi) {
    NeedCtx *n = ctx;
    if (lo > n->last_hi || hi <= lo) n->out_of_order++;
    if (hi > n->last_hi) n->last_hi = hi;
    memcpy(n->params + lo, n->real + lo, (hi - lo) * sizeof(float));
    n->calls++;
}

static void test_params_needed(void **state) {
    GPTShape s = { .vocab_size = 11, .block_size = 8, .n_layer = 3, .n_head = 2, .n_embd = 16,
                   .embd_pdrop = 0.1f, .resid_pdrop = 0.1f, .attn_pdrop = 0.1f };
    const int T = 8;
    int32_t x[16], y[16];
    for (int i = 0; i < 16; i++) { x[i] = i % 11; y[i] = (i * 5) % 11; }
    for (int ckpt = 0; ckpt <= 1; ckpt++) {
        Backend *be = backend_cpu_create(DTYPE_FP32);
        GPTBuildOptions opt = { .activation_checkpointing = ckpt };
        GPT m;
        char err[256];
        if (gpt_build_with(&m, &s, 2, T, be, &opt, err, sizeof err)) fail_msg("gpt_build_with: %s", err);
        gpt_init_weights(&m, 5);
        const size_t P = m.num_params;
        float *real = malloc(P * 4), *g_ref = malloc(P * 4);
        memcpy(real, m.params_memory, P * 4);
        const float loss_ref = gpt_forward(&m, x, y, 2, T, true, 3, 7, NULL);
        gpt_zero_grad(&m);
        gpt_backward(&m, NULL, NULL);
        memcpy(g_ref, m.grads_memory, P * 4);

        for (size_t i = 0; i < P; i++) m.params_memory[i] = NAN;
        NeedCtx n = { .real = real, .params = m.params_memory };
        GPTStepArgs args = GPT_STEP_ARGS_DEFAULT;
        args.params_needed = on_needed;
        args.params_ctx = &n;
        const float loss = gpt_forward(&m, x, y, 2, T, true, 3, 7, &args);
        assert_true(loss == loss_ref);
        gpt_zero_grad(&m);
        gpt_backward(&m, NULL, NULL);
        for (size_t i = 0; i < P; i++)
            if (m.grads_memory[i] != g_ref[i]) fail_msg("checkpointing %d: gradient %zu: %g, want %g", ckpt, i,
                                                        m.grads_memory[i], g_ref[i]);
        assert_int_equal(n.calls, s.n_layer + 2);   // the embeddings, each block, ln_f + lm_head
        assert_int_equal(n.out_of_order, 0);
        assert_true(n.last_hi == P);
        for (size_t i = 0; i < P; i++) assert_true(m.params_memory[i] == real[i]);

        n.calls = 0;
        gpt_forward_inference(&m, x, y, 2, T);
        assert_int_equal(n.calls, 0);
        free(real);
        free(g_ref);
        gpt_free(&m);
        be->destroy(be);
    }
}

// A batch smaller than the buffers (the last batch of an epoch) computes the same as a
// model built for exactly that batch.
static void test_partial_batch(void **state) {
    GPTShape s = { .vocab_size = 11, .block_size = 8, .n_layer = 1, .n_head = 2, .n_embd = 8 };
    GPT big, small;
    build(&big, &s, 4, 8);
    build(&small, &s, 1, 5);
    gpt_init_weights(&big, 4);
    memcpy(small.params_memory, big.params_memory, big.num_params * 4);
    int32_t x[5] = {1, 2, 3, 4, 5}, y[5] = {2, 3, 4, 5, 6};
    float lb = gpt_forward(&big, x, y, 1, 5, false, 0, 0, NULL);
    float ls = gpt_forward(&small, x, y, 1, 5, false, 0, 0, NULL);
    assert_true(fabsf(lb - ls) <= 1e-6f * fabsf(ls));
    gpt_zero_grad(&big); gpt_backward(&big, NULL, NULL);
    gpt_zero_grad(&small); gpt_backward(&small, NULL, NULL);
    assert_close_rel(big.grads_memory, small.grads_memory, (long)big.num_params, 1e-6, "grads");
    gpt_free(&big);
    gpt_free(&small);
}

// The first backward after gpt_zero_grad runs under GRAD_OVERWRITE (Backend.set_grad_write), the
// later ones and any after gpt_bind_grad under GRAD_ACCUMULATE, and the mode is back to
// GRAD_ACCUMULATE after each backward; a backward with every target ignored writes nothing and
// leaves the next one the first. On the CPU backend the gradients are bitwise those of a table
// without set_grad_write (accumulation into the zeroed buffer), after every micro-step, in fp32
// and in bf16 (emulated or on bf16 hardware).
static Backend g_inner_be;
static int g_modes[16], g_nmodes;
static void recording_set_grad_write(Backend *be, GradWrite mode) {
    if (g_nmodes < 16) g_modes[g_nmodes++] = (int)mode;
    g_inner_be.set_grad_write(be, mode);
}

static void test_first_backward_overwrites(void **state) {
    GPTShape s = { .vocab_size = 11, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16,
                   .embd_pdrop = 0.1f, .resid_pdrop = 0.1f, .attn_pdrop = 0.1f };
    const int B = 2, T = 8;
    for (int dt = DTYPE_FP32; dt <= DTYPE_BF16; dt++) {
        Backend *cpu = backend_cpu_create((ComputeDtype)dt);
        assert_non_null(cpu);
        assert_non_null(cpu->set_grad_write);
        g_inner_be = *cpu;
        Backend rec = *cpu, plain = *cpu;   // the same backend context seen through two tables
        rec.set_grad_write = recording_set_grad_write;
        plain.set_grad_write = NULL;
        char err[256];
        GPT a, b;
        if (gpt_build_on(&a, &s, B, T, &rec, err, sizeof err)) fail_msg("gpt_build_on: %s", err);
        if (gpt_build_on(&b, &s, B, T, &plain, err, sizeof err)) fail_msg("gpt_build_on: %s", err);
        gpt_init_weights(&a, 8);
        gpt_init_weights(&b, 8);
        int32_t x[3][16], y[3][16];
        for (int k = 0; k < 3; k++)
            for (int i = 0; i < B * T; i++) { x[k][i] = (i * (k + 3)) % 11; y[k][i] = (i * 5 + k) % 11; }
        for (int i = 0; i < B * T; i++) y[2][i] = -1;   // micro-batch 2: every target ignored
        g_nmodes = 0;
        for (int step = 0; step < 2; step++) {
            gpt_zero_grad(&a);
            gpt_zero_grad(&b);
            // step 0: micro-batches 0, 1; step 1: 2 (no gradient), 0, 1
            for (int j = step == 0 ? 0 : -1; j < 2; j++) {
                const int k = j < 0 ? 2 : j;
                gpt_forward(&a, x[k], y[k], B, T, true, 1, (uint64_t)(step * 3 + k), NULL);
                gpt_backward(&a, NULL, NULL);
                gpt_forward(&b, x[k], y[k], B, T, true, 1, (uint64_t)(step * 3 + k), NULL);
                gpt_backward(&b, NULL, NULL);
                for (size_t i = 0; i < a.num_params; i++)
                    if (memcmp(&a.grads_memory[i], &b.grads_memory[i], sizeof(float)) != 0)
                        fail_msg("dtype %d step %d micro-batch %d: gradient %zu: %g (set_grad_write) != %g (none)",
                                 dt, step, k, i, a.grads_memory[i], b.grads_memory[i]);
            }
        }
        // one OVERWRITE and its ACCUMULATE around each step's first backward with targets only
        assert_int_equal(g_nmodes, 4);
        const int want[] = { GRAD_OVERWRITE, GRAD_ACCUMULATE, GRAD_OVERWRITE, GRAD_ACCUMULATE };
        for (int i = 0; i < 4; i++) assert_int_equal(g_modes[i], want[i]);
        // a rebound gradient: the model no longer knows every gradient to be zero
        float *elsewhere = calloc(a.tensors[0].numel, sizeof(float));
        gpt_bind_grad(&a, 0, elsewhere);
        gpt_zero_grad(&a);
        gpt_forward(&a, x[0], y[0], B, T, true, 1, 9, NULL);
        gpt_backward(&a, NULL, NULL);
        assert_int_equal(g_nmodes, 4);
        free(elsewhere);
        gpt_free(&a);
        gpt_free(&b);
        cpu->destroy(cpu);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_pytorch),
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_layout_and_init),
        cmocka_unit_test(test_shape_check),
        cmocka_unit_test(test_rejects_bad_shapes),
        cmocka_unit_test(test_causal),
        cmocka_unit_test(test_dropout_determinism),
        cmocka_unit_test(test_dropout_keys_distinct),
        cmocka_unit_test(test_step_args),
        cmocka_unit_test(test_params_needed),
        cmocka_unit_test(test_partial_batch),
        cmocka_unit_test(test_first_backward_overwrites),
    };
    return cmocka_run_group_tests_name("gpt", tests, NULL, NULL);
}
