// tests/test_lowp.c — mixed precision on the CPU backend (kernels/cpu/backend_cpu.c):
//   * a bf16 training step of the fixture model (tests/fixtures/gpt_tiny.bin) against
//     tests/fixtures/gpt_tiny_bf16.bin (tests/gen_bf16_fixture.py): mingpt's placement written
//     out in float64 (tight) and PyTorch's torch.autocast (within bf16's precision);
//   * every op with low-precision operands against the fp32 op, within the type's precision;
//   * bf16 on bf16 hardware (oneDNN) against the emulated bf16 (rounded operands, fp32 GEMMs):
//     the same products, so only the summation order differs.
#include "tests/gpt_fixture.h"

#include "dist/comm.h"
#include "kernels/backend.h"
#include "kernels/cpu/bf16.h"
#include "kernels/dropout_rng.h"
#include "trainer/loss_scaler.h"
#include "trainer/adamw.h"
#include "trainer/train_step.h"

// max |a - b| / max |b| over n, printed for the record.
static double rel(const float *a, const float *b, long n) { return test_max_rel_err(a, b, n); }

// ---------------------------------------------------------------- the bf16 step against PyTorch
typedef struct { float *logits, loss, *grads; } Step;

static Step run_step(const Fixture *fx, Backend *be) {
    GPTShape s = { fx->V, fx->T, fx->L, fx->NH, fx->C, 0, 0, 0 };
    GPT m;
    char err[256];
    if (gpt_build_on(&m, &s, fx->B, fx->T, be, err, sizeof err)) fail_msg("gpt_build_on: %s", err);
    gpt_set_params(&m, fx->params);
    Step st;
    st.loss = gpt_forward(&m, fx->idx, fx->targets, fx->B, fx->T, false, 0, 0, NULL);
    gpt_zero_grad(&m);
    gpt_backward(&m, NULL, NULL);
    const size_t nl = (size_t)fx->B * fx->T * fx->V;
    st.logits = malloc(nl * 4);
    st.grads = malloc(fx->P * 4);
    memcpy(st.logits, m.acts.logits, nl * 4);
    memcpy(st.grads, m.grads_memory, fx->P * 4);
    gpt_free(&m);
    return st;
}

static void free_step(Step *s) { free(s->logits); free(s->grads); }

static void load_bf16_fixture(const Fixture *fx, Step *placement, Step *autocast) {
    const char *path = "tests/fixtures/gpt_tiny_bf16.bin";
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    const size_t nl = (size_t)fx->B * fx->T * fx->V;
    Step *s[2] = { placement, autocast };
    for (int i = 0; i < 2; i++) {
        s[i]->logits = malloc(nl * 4);
        s[i]->grads = malloc(fx->P * 4);
        fixture_read(f, s[i]->logits, nl * 4, path);
        fixture_read(f, &s[i]->loss, 4, path);
        fixture_read(f, s[i]->grads, fx->P * 4, path);
    }
    assert_int_equal(fgetc(f), EOF);
    fclose(f);
}

// Worst relative error over the gradient tensors (each against its own largest magnitude).
static double grads_err(const float *got, const float *ref, const Fixture *fx, const char **worst) {
    GPTShape s = { fx->V, fx->T, fx->L, fx->NH, fx->C, 0, 0, 0 };
    const int n = gpt_param_table(&s, NULL);
    ParamTensor *t = calloc(n, sizeof *t);
    gpt_param_table(&s, t);
    double e = 0;
    static char name[64];
    for (int k = 0; k < n; k++) {
        const double ek = rel(got + t[k].offset, ref + t[k].offset, (long)t[k].numel);
        if (ek > e) { e = ek; snprintf(name, sizeof name, "%s", t[k].name); }
    }
    free(t);
    *worst = name;
    return e;
}

static void check_step(const char *what, const Step *got, const Step *ref, const Fixture *fx, double tol_logits,
                       double tol_loss, double tol_grads) {
    const char *worst;
    const double el = rel(got->logits, ref->logits, (long)fx->B * fx->T * fx->V);
    const double eloss = fabs(got->loss - ref->loss) / fabs(ref->loss);
    const double eg = grads_err(got->grads, ref->grads, fx, &worst);
    print_message("  %-34s logits %.2e  loss %.2e  grads %.2e (%s)\n", what, el, eloss, eg, worst);
    if (!(el <= tol_logits && eloss <= tol_loss && eg <= tol_grads))
        fail_msg("%s: beyond tolerance (logits %.1e, loss %.1e, grads %.1e)", what, tol_logits, tol_loss, tol_grads);
}

static void test_bf16_step_matches_pytorch(void **state) {
    Fixture fx = load_fixture();
    Step placement, autocast;
    load_bf16_fixture(&fx, &placement, &autocast);
    Backend *fast = backend_cpu_create(DTYPE_BF16), *emu = backend_cpu_create(DTYPE_BF16),
            *fp32 = backend_cpu_create(DTYPE_FP32);
    backend_cpu_emulate_low_precision(emu);
    print_message("  bf16 on bf16 hardware here: %s\n", backend_cpu_low_precision_is_fast(fast) ? "yes" : "no (emulated)");
    Step a = run_step(&fx, fast), b = run_step(&fx, emu), c = run_step(&fx, fp32);
    // The placement in float64: the same rounded operands, so float32 arithmetic elsewhere and
    // the summation order are the differences; a few operands may round to the neighbouring bf16
    // value (their fp32 value sits within an ulp of a rounding boundary), hence 2e-3, not 1e-6.
    check_step("bf16 vs placement (float64)", &a, &placement, &fx, 2e-3, 2e-4, 5e-3);
    check_step("bf16 emulated vs placement", &b, &placement, &fx, 2e-3, 2e-4, 5e-3);
    // PyTorch's autocast also rounds matmul outputs to bf16: agreement within bf16's precision.
    check_step("bf16 vs torch.autocast", &a, &autocast, &fx, 3e-2, 3e-3, 1e-1);
    // The test can fail: fp32 is measurably further from the placement than bf16 is.
    const char *w;
    const double e32 = grads_err(c.grads, placement.grads, &fx, &w), e16 = grads_err(a.grads, placement.grads, &fx, &w);
    print_message("  fp32 vs placement: grads %.2e (bf16: %.2e)\n", e32, e16);
    assert_true(e32 > 4 * e16);
    free_step(&a); free_step(&b); free_step(&c); free_step(&placement); free_step(&autocast);
    fast->destroy(fast); emu->destroy(emu); fp32->destroy(fp32);
    free_fixture(&fx);
}

// ---------------------------------------------------------------- op by op
enum { B = 3, C = 96, NH = 4, OC = 160 };
// Sequence length of the op tests: 37 (one causal block of the bf16 attention), and 150 where the
// bf16 attention's products run per row block (kernels/cpu/attention_bf16.c: 64, 64, 22 rows).
static int T = 37;

typedef struct {
    Backend *be;
    float *out, *pre, *dinp, *dw, *db, *att, *atty, *dqkv, *scratch;
} OpRun;

typedef struct { float *inp, *w, *bias, *dout, *qkv, *dy; } OpInputs;

// Runs every matmul and attention op of the Backend on the same inputs; outputs in r.
static void run_ops(OpRun *r, const OpInputs *in, float attn_p) {
    const int N = B * T;
    Backend *be = r->be;
    const DropoutKey dk = { 12345, 0, 1, NULL };
    r->out = calloc((size_t)N * OC, 4); r->pre = calloc((size_t)N * OC, 4);
    r->dinp = calloc((size_t)N * C, 4); r->dw = calloc((size_t)OC * C, 4); r->db = calloc(OC, 4);
    r->att = calloc((size_t)B * NH * T * T, 4); r->atty = calloc((size_t)N * C, 4);
    r->dqkv = calloc((size_t)N * 3 * C, 4); r->scratch = calloc((size_t)B * NH * T * T, 4);
    // matmul_backward's dinp and attention_backward's dqkv are overwritten (kernels/backend.h):
    // NaN before the call, which any read of the old content would carry into the result
    for (size_t i = 0; i < (size_t)N * C; i++) r->dinp[i] = NAN;
    for (size_t i = 0; i < (size_t)N * 3 * C; i++) r->dqkv[i] = NAN;
    float *gel = calloc((size_t)N * OC, 4);
    be->matmul_gelu_forward(be, r->pre, gel, in->inp, in->w, in->bias, N, C, OC);
    be->matmul_forward(be, r->out, in->inp, in->w, in->bias, N, C, OC);
    // the GELU of matmul_gelu_forward is checked through pre (its input) and out = gelu(pre)
    for (int i = 0; i < N * OC; i++) {
        const float x = r->pre[i], u = 0.7978845608f * (x + 0.044715f * x * x * x);
        if (!(fabsf(gel[i] - 0.5f * x * (1.0f + tanhf(u))) <= 1e-5f * (1.0f + fabsf(x))))
            fail_msg("gelu(pre) at %d: %g vs %g", i, gel[i], 0.5f * x * (1.0f + tanhf(u)));
    }
    free(gel);
    be->matmul_backward(be, r->dinp, r->dw, r->db, in->dout, in->inp, in->w, N, C, OC);
    be->attention_forward(be, r->atty, r->att, in->qkv, B, T, C, NH, attn_p, dk);
    be->attention_backward(be, r->dqkv, r->scratch, in->dy, in->qkv, r->att, B, T, C, NH, attn_p, dk);
}

static void free_run(OpRun *r) {
    free(r->out); free(r->pre); free(r->dinp); free(r->dw); free(r->db);
    free(r->att); free(r->atty); free(r->dqkv); free(r->scratch);
}

static void compare_runs(const char *what, const OpRun *a, const OpRun *b, double tol) {
    const int N = B * T;
    const struct { const char *name; const float *x, *y; long n; } t[] = {
        { "matmul_forward", a->out, b->out, (long)N * OC }, { "matmul_gelu_forward pre", a->pre, b->pre, (long)N * OC },
        { "matmul_backward dinp", a->dinp, b->dinp, (long)N * C }, { "matmul_backward dweight", a->dw, b->dw, (long)OC * C },
        { "matmul_backward dbias", a->db, b->db, OC }, { "attention_forward att", a->att, b->att, (long)B * NH * T * T },
        { "attention_forward out", a->atty, b->atty, (long)N * C }, { "attention_backward dqkv", a->dqkv, b->dqkv, (long)N * 3 * C },
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        const double e = rel(t[i].x, t[i].y, t[i].n);
        if (!(e <= tol)) fail_msg("%s: %s rel err %.3e > %.1e", what, t[i].name, e, tol);
    }
}

static OpInputs make_inputs(void) {
    const int N = B * T;
    TestRng r = test_rng(77);
    OpInputs in = { malloc((size_t)N * C * 4), malloc((size_t)OC * C * 4), malloc(OC * 4), malloc((size_t)N * OC * 4),
                    malloc((size_t)N * 3 * C * 4), malloc((size_t)N * C * 4) };
    test_fill(&r, in.inp, (long)N * C, -1, 1); test_fill(&r, in.w, (long)OC * C, -0.2f, 0.2f);
    test_fill(&r, in.bias, OC, -0.1f, 0.1f); test_fill(&r, in.dout, (long)N * OC, -1, 1);
    test_fill(&r, in.qkv, (long)N * 3 * C, -2, 2); test_fill(&r, in.dy, (long)N * C, -1, 1);
    return in;
}

static void free_inputs(OpInputs *in) { free(in->inp); free(in->w); free(in->bias); free(in->dout); free(in->qkv); free(in->dy); }

static void ops_vs_fp32(ComputeDtype dt, int emulate, double tol, double dropout) {
    OpInputs in = make_inputs();
    OpRun ref = { .be = backend_cpu_create(DTYPE_FP32) }, lp = { .be = backend_cpu_create(dt) };
    if (emulate) backend_cpu_emulate_low_precision(lp.be);
    run_ops(&ref, &in, (float)dropout);
    run_ops(&lp, &in, (float)dropout);
    char what[64];
    snprintf(what, sizeof what, "%s%s vs fp32", dt == DTYPE_BF16 ? "bf16" : "fp16", emulate ? " (emulated)" : "");
    compare_runs(what, &lp, &ref, tol);
    // and the low precision is real: the results are not the fp32 ones
    assert_true(rel(lp.out, ref.out, (long)B * T * OC) > 1e-5);
    free_run(&ref); free_run(&lp);
    ref.be->destroy(ref.be); lp.be->destroy(lp.be);
    free_inputs(&in);
}

// Tolerances: operands rounded to 8 (bf16) or 11 (fp16) significant bits; the relative error of a
// sum of K such products is about sqrt(K) * 2^-9 of its terms' scale, measured against the
// largest output: 3e-2 for bf16 and 4e-3 for fp16 cover C = 96..160 with margin.
static void test_bf16_ops_vs_fp32(void **state) {
    ops_vs_fp32(DTYPE_BF16, 0, 3e-2, 0.0);
    ops_vs_fp32(DTYPE_BF16, 0, 3e-2, 0.2);
    T = 150;
    ops_vs_fp32(DTYPE_BF16, 0, 3e-2, 0.2);
    T = 37;
}
static void test_bf16_emulated_ops_vs_fp32(void **state) { ops_vs_fp32(DTYPE_BF16, 1, 3e-2, 0.2); }
static void test_fp16_ops_vs_fp32(void **state) { ops_vs_fp32(DTYPE_FP16, 1, 4e-3, 0.2); }

// bf16 on the hardware against bf16 emulated: the same exactly representable products.
static void test_bf16_fast_vs_emulated(void **state) {
    Backend *probe = backend_cpu_create(DTYPE_BF16);
    const int fast = backend_cpu_low_precision_is_fast(probe);
    probe->destroy(probe);
    if (!fast) skip();   // no bf16 hardware: both would be the emulation
    Backend *fast_be = backend_cpu_create(DTYPE_BF16), *emu_be = backend_cpu_create(DTYPE_BF16);
    backend_cpu_emulate_low_precision(emu_be);
    for (int k = 0; k < 2; k++) {
        T = k ? 150 : 37;
        OpInputs in = make_inputs();
        OpRun a = { .be = fast_be }, b = { .be = emu_be };
        run_ops(&a, &in, 0.1f);
        run_ops(&b, &in, 0.1f);
        compare_runs(k ? "bf16 hardware vs emulated, T 150" : "bf16 hardware vs emulated", &a, &b, 1e-5);
        free_run(&a); free_run(&b);
        free_inputs(&in);
    }
    T = 37;
    fast_be->destroy(fast_be); emu_be->destroy(emu_be);
}

// Chunked conversion (as for a batch many times the training batch) computes what one chunk does.
static void test_chunked_low_precision(void **state) {
    const ComputeDtype dts[2] = { DTYPE_BF16, DTYPE_FP16 };
    for (int i = 0; i < 2; i++) {
        OpInputs in = make_inputs();
        OpRun a = { .be = backend_cpu_create(dts[i]) }, b = { .be = backend_cpu_create(dts[i]) };
        if (dts[i] == DTYPE_FP16) backend_cpu_emulate_low_precision(a.be);
        if (dts[i] == DTYPE_FP16) backend_cpu_emulate_low_precision(b.be);
        backend_cpu_set_low_precision_chunk(b.be, 2000);   // a few rows, or one batch row, per chunk
        run_ops(&a, &in, 0.1f);
        run_ops(&b, &in, 0.1f);
        compare_runs("chunked vs whole", &b, &a, 1e-5);
        free_run(&a); free_run(&b);
        a.be->destroy(a.be); b.be->destroy(b.be);
        free_inputs(&in);
    }
}

// ---------------------------------------------------------------- the weight-cast cache
// Training steps with the CPU backend's weight-cast cache (Backend.cast_weights) give bitwise the
// parameters of the same backend without it: the cast copy always holds the current weights
// (a stale copy after an AdamW step, a gpt_set_params or a direct write would change them).
typedef struct { Backend *be; GPT m; AdamW opt; LossScaler scaler; TrainStep ts; } CastRun;

// produced 0: the backend without the *_lp ops (every matmul rounds its input itself); ckpt:
// activation checkpointing; chunk > 0: the low-precision chunk in elements.
static void run_init(CastRun *r, ComputeDtype dt, int emulate, int cached, int produced, int ckpt, long chunk,
                     Comm *comm, const Fixture *fx) {
    char err[256];
    r->be = backend_cpu_create(dt);
    if (emulate) backend_cpu_emulate_low_precision(r->be);
    if (!cached) r->be->cast_weights = NULL;
    if (!produced) r->be->lp_size = 0;
    if (chunk > 0) backend_cpu_set_low_precision_chunk(r->be, chunk);
    GPTShape s = { fx->V, fx->T, fx->L, fx->NH, fx->C, 0.1f, 0.1f, 0.1f };
    const GPTBuildOptions opt = { .activation_checkpointing = ckpt != 0 };
    if (gpt_build_with(&r->m, &s, fx->B, fx->T, r->be, &opt, err, sizeof err)) fail_msg("gpt_build_with: %s", err);
    gpt_set_params(&r->m, fx->params);
    if (adamw_init(&r->opt, r->be, r->m.num_params)) fail_msg("adamw_init");
    loss_scaler_init(&r->scaler, dt == DTYPE_FP16);
    r->ts = (TrainStep){ .model = &r->m, .opt = &r->opt, .scaler = &r->scaler, .comm = comm, .grad_clip = 1.0,
                         .lr = 3e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f };
}

static void cast_run_init(CastRun *r, ComputeDtype dt, int emulate, int cached, Comm *comm, const Fixture *fx) {
    run_init(r, dt, emulate, cached, 1, 0, 0, comm, fx);
}

static void cast_run_free(CastRun *r) {
    adamw_free(&r->opt);
    gpt_free(&r->m);
    r->be->destroy(r->be);
}

static void cache_matches_uncached(ComputeDtype dt, int emulate) {
    Fixture fx = load_fixture();
    Comm *comm = comm_single_create();
    CastRun a, b;
    cast_run_init(&a, dt, emulate, 1, comm, &fx);
    cast_run_init(&b, dt, emulate, 0, comm, &fx);
    const int half = fx.B / 2 > 0 ? fx.B / 2 : 1;
    for (int step = 0; step < 4; step++) {
        // two micro-steps per step (the cache serves both), then an evaluation forward
        MicroBatch mb[2] = { { fx.idx, fx.targets, half }, { fx.idx + half * fx.T, fx.targets + half * fx.T, fx.B - half } };
        StepResult ra, rb;
        assert_int_equal(train_step(&a.ts, mb, 2, half, fx.T, 7, (uint64_t)step, 0, &ra), 0);
        assert_int_equal(train_step(&b.ts, mb, 2, half, fx.T, 7, (uint64_t)step, 0, &rb), 0);
        assert_true(ra.loss == rb.loss);
        const float la = gpt_forward(&a.m, fx.idx, fx.targets, fx.B, fx.T, false, 0, 0, NULL);
        const float lb = gpt_forward(&b.m, fx.idx, fx.targets, fx.B, fx.T, false, 0, 0, NULL);
        assert_true(la == lb);
        if (step == 1) {   // weights written directly (host memory), as the contract allows with a bump
            for (size_t i = 0; i < a.m.num_params; i += 7) { a.m.params_memory[i] *= 0.5f; b.m.params_memory[i] *= 0.5f; }
            gpt_params_changed(&a.m);
            gpt_params_changed(&b.m);
        }
        if (step == 2) { gpt_set_params(&a.m, fx.params); gpt_set_params(&b.m, fx.params); }
    }
    assert_memory_equal(a.m.params_memory, b.m.params_memory, a.m.num_params * sizeof(float));
    cast_run_free(&a); cast_run_free(&b);
    comm->destroy(comm);
    free_fixture(&fx);
}

static void test_weight_cast_cache(void **state) {
    cache_matches_uncached(DTYPE_BF16, 0);
    cache_matches_uncached(DTYPE_BF16, 1);
    cache_matches_uncached(DTYPE_FP16, 1);
}

// ---------------------------------------------------------------- produced operands
// With the *_lp ops (kernels/backend.h) the LayerNorms and the attention write the rounded copies the matmuls
// multiply and the training layout keeps no fp32 LayerNorm or attention outputs: fewer activation floats, and
// training steps (with and without activation checkpointing, in whole and in small chunks) give
// bitwise the losses and parameters of the same backend whose matmuls round their inputs.
static void produced_matches_rounded(ComputeDtype dt, int emulate, int ckpt, long chunk) {
    Fixture fx = load_fixture();
    Comm *comm = comm_single_create();
    CastRun a, b;
    run_init(&a, dt, emulate, 1, 1, ckpt, chunk, comm, &fx);
    run_init(&b, dt, emulate, 1, 0, ckpt, chunk, comm, &fx);
    assert_true(a.be->lp_size == (emulate || !backend_cpu_low_precision_is_fast(a.be) ? 4u : 2u));
    assert_non_null(a.m.acts.h[0].ln_1_lp);
    assert_null(a.m.acts.h[0].ln_1);
    assert_null(a.m.acts.ln_f);
    assert_null(a.m.acts.h[0].atty);
    assert_non_null(a.m.acts.h[0].atty_lp);
    assert_null(b.m.acts.h[0].ln_1_lp);
    // the fp32 copies of ln_1, ln_2, atty (per layer unless checkpointing) and ln_f are gone; lp copies of
    // 2 bytes save half of them, fp32-valued ones (emulated) cost the same
    const size_t BTC = (size_t)fx.B * fx.T * fx.C, sets = ckpt ? 1 : (size_t)fx.L;
    if (a.be->lp_size == 2) assert_true(a.m.num_acts + (3 * sets + 1) * BTC / 2 <= b.m.num_acts);
    else assert_true(a.m.num_acts <= b.m.num_acts + 4 * (3 * sets + 1));   // (16-byte alignment)
    const int half = fx.B / 2 > 0 ? fx.B / 2 : 1;
    for (int step = 0; step < 3; step++) {
        MicroBatch mb[2] = { { fx.idx, fx.targets, half }, { fx.idx + half * fx.T, fx.targets + half * fx.T, fx.B - half } };
        StepResult ra, rb;
        assert_int_equal(train_step(&a.ts, mb, 2, half, fx.T, 7, (uint64_t)step, 0, &ra), 0);
        assert_int_equal(train_step(&b.ts, mb, 2, half, fx.T, 7, (uint64_t)step, 0, &rb), 0);
        assert_true(ra.loss == rb.loss);
        const float la = gpt_forward(&a.m, fx.idx, fx.targets, fx.B, fx.T, false, 0, 0, NULL);
        const float lb = gpt_forward(&b.m, fx.idx, fx.targets, fx.B, fx.T, false, 0, 0, NULL);
        assert_true(la == lb);
    }
    assert_memory_equal(a.m.params_memory, b.m.params_memory, a.m.num_params * sizeof(float));
    cast_run_free(&a); cast_run_free(&b);
    comm->destroy(comm);
    free_fixture(&fx);
}

static void test_produced_operands(void **state) {
    produced_matches_rounded(DTYPE_BF16, 0, 0, 0);
    produced_matches_rounded(DTYPE_BF16, 0, 1, 0);
    produced_matches_rounded(DTYPE_BF16, 1, 0, 0);
    produced_matches_rounded(DTYPE_BF16, 1, 1, 300);   // chunks of a few rows: the copy sliced like the operand
    produced_matches_rounded(DTYPE_FP16, 1, 0, 0);
    produced_matches_rounded(DTYPE_FP16, 1, 1, 300);
}

// ---------------------------------------------------------------- a produced output gradient
// matmul_backward_lp with dout given by its copy (dout_lp, dout NULL) is bitwise the call with
// the fp32 dout whose values are already those rounded ones: the GEMMs multiply the same
// operand rows (sliced into the same chunks) and dbias sums the same fp32 values. The copy is
// in the backend's format (lp_size 2: bf16 bits; 4: fp32 values rounded to the type).
static void dout_lp_matches(ComputeDtype dt, int emulate, long chunk) {
    enum { N = 37, C = 24, OC = 40 };
    Backend *be = backend_cpu_create(dt);
    assert_non_null(be);
    if (emulate) backend_cpu_emulate_low_precision(be);
    if (chunk) backend_cpu_set_low_precision_chunk(be, chunk);
    assert_non_null(be->matmul_backward_lp);
    const int mode = dt == DTYPE_BF16 ? LP_ROUND_BF16 : LP_ROUND_FP16;
    TestRng r = test_rng(31 + (uint64_t)dt * 2 + (uint64_t)emulate);
    float *dout = malloc(N * OC * 4), *inp = malloc(N * C * 4), *w = malloc(OC * C * 4);
    test_fill(&r, dout, N * OC, -2, 2);
    test_fill(&r, inp, N * C, -1, 1);
    test_fill(&r, w, OC * C, -1, 1);
    void *inp_lp = malloc(N * C * 4), *dout_lp = malloc(N * OC * 4);
    for (int i = 0; i < N * OC; i++) {
        dout[i] = lp_round(dout[i], mode);   // the values the copy holds
        if (be->lp_size == 2) ((uint16_t *)dout_lp)[i] = bf16_from_float(dout[i]);
        else ((float *)dout_lp)[i] = dout[i];
    }
    for (int i = 0; i < N * C; i++) {
        if (be->lp_size == 2) ((uint16_t *)inp_lp)[i] = bf16_from_float(inp[i]);
        else ((float *)inp_lp)[i] = lp_round(inp[i], mode);
    }
    float *di[2], *dw[2], *db[2];
    for (int k = 0; k < 2; k++) {
        di[k] = malloc(N * C * 4);
        dw[k] = calloc(OC * C, 4);
        db[k] = malloc(OC * 4);
        for (int o = 0; o < OC; o++) db[k][o] = 0.25f * (float)o;   // dbias accumulates
    }
    be->matmul_backward_lp(be, di[0], dw[0], db[0], dout, NULL, inp_lp, w, N, C, OC);
    be->matmul_backward_lp(be, di[1], dw[1], db[1], NULL, dout_lp, inp_lp, w, N, C, OC);
    assert_memory_equal(di[0], di[1], N * C * 4);
    assert_memory_equal(dw[0], dw[1], OC * C * 4);
    assert_memory_equal(db[0], db[1], OC * 4);
    // dbias only (no GEMM)
    be->matmul_backward_lp(be, NULL, NULL, db[0], dout, NULL, inp_lp, w, N, C, OC);
    be->matmul_backward_lp(be, NULL, NULL, db[1], NULL, dout_lp, inp_lp, w, N, C, OC);
    assert_memory_equal(db[0], db[1], OC * 4);
    for (int k = 0; k < 2; k++) { free(di[k]); free(dw[k]); free(db[k]); }
    free(dout); free(inp); free(w); free(inp_lp); free(dout_lp);
    be->destroy(be);
}

static void test_dout_lp(void **state) {
    dout_lp_matches(DTYPE_BF16, 0, 0);     // bf16 GEMMs where the CPU has them (lp_size 2)
    dout_lp_matches(DTYPE_BF16, 0, 300);   // in chunks of a few rows
    dout_lp_matches(DTYPE_BF16, 1, 0);     // emulated (lp_size 4)
    dout_lp_matches(DTYPE_FP16, 1, 300);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_step_matches_pytorch),
        cmocka_unit_test(test_bf16_ops_vs_fp32),
        cmocka_unit_test(test_bf16_emulated_ops_vs_fp32),
        cmocka_unit_test(test_fp16_ops_vs_fp32),
        cmocka_unit_test(test_bf16_fast_vs_emulated),
        cmocka_unit_test(test_chunked_low_precision),
        cmocka_unit_test(test_weight_cast_cache),
        cmocka_unit_test(test_produced_operands),
        cmocka_unit_test(test_dout_lp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
