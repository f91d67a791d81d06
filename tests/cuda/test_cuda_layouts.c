// tests/cuda/test_cuda_layouts.c — the model's evaluation and checkpointing layouts (model/gpt.h)
// on the emulated CUDA backend, through the same Backend ops as the CPU:
//   * gpt_forward_inference: on the CUDA backend, bit for bit gpt_forward's logits and loss on
//     the same rows; a batch of all B_infer rows (more than the training batch: the attention
//     and GEMM scratch grow) against the CPU backend's gpt_forward, B rows at a time, within
//     fp32 tolerance (1e-5 of the largest logit; the GEMMs sum in other orders);
//   * incremental inference (gpt_infer_*: the key/value cache, Backend.attention_forward_cached):
//     on the CUDA backend, the logits of a context growing one token at a time past block_size
//     (cache extended, then the window recomputed as it slides) and of chunks of several new
//     tokens equal the CPU backend's full forward at the same position within 1e-5 of the
//     largest logit;
//   * activation checkpointing: STEPS train_step calls (AdamW, clipping, dropout on) with and
//     without it on the CUDA backend give the same loss, gradient norm, gradients and parameters
//     bit for bit (the recomputation runs the same kernels on the same inputs; this backend has
//     no gelu_forward, so the GELU outputs sit in the shared working set), and the losses of
//     the CPU backend within 1e-4 relative; in fp32 and in bf16, where the layouts keep the GELU
//     output and c_fc's output gradient only as their bf16 copies (the CPU's: fp32, as before),
//     and c_attn's output qkv only as the bf16 copy the fused attention reads (recomputed from it);
//   * qkv as its copy (Backend.attention_takes_lp), bf16 and fp16, with and without checkpointing:
//     the layout keeps no fp32 qkv and is smaller, and training (the loss, every gradient) and
//     evaluation (gpt_forward_inference, fp32 qkv in its own layout) are bitwise those of the same
//     backend without attention_takes_lp (qkv in fp32, rounded by the attention kernels as they
//     load it).
#include "tests/test_util.h"

#include "dist/comm.h"
#include "kernels/backend.h"
#include "trainer/loss_scaler.h"
#include "model/gpt.h"
#include "trainer/adamw.h"
#include "trainer/train_step.h"

enum { V = 29, T = 12, B = 3, STEPS = 3 };
static const GPTShape SHAPE = { .vocab_size = V, .block_size = T, .n_layer = 3, .n_head = 2, .n_embd = 32,
                                .embd_pdrop = 0.1f, .resid_pdrop = 0.1f, .attn_pdrop = 0.1f };

static Backend *cuda_dt(ComputeDtype dt) {
    char err[512];
    Backend *be = backend_cuda_create(dt, 0, err, sizeof err);
    if (!be) fail_msg("backend_cuda_create: %s", err);
    return be;
}

static Backend *cuda(void) { return cuda_dt(DTYPE_FP32); }

static void build(GPT *m, Backend *be, bool ckpt) {
    char err[512];
    const GPTBuildOptions opt = { .activation_checkpointing = ckpt };
    if (gpt_build_with(m, &SHAPE, B, T, be, &opt, err, sizeof err)) fail_msg("gpt_build_with: %s", err);
    gpt_init_weights(m, 17);
}

static void tokens(TestRng *r, int32_t *x, long n) {
    for (long i = 0; i < n; i++) x[i] = (int32_t)(test_next(r) % V);
}

static float *download(Backend *be, const float *p, size_t n) {
    float *h = malloc(n * sizeof(float));
    be->download(be, h, p, n * sizeof(float));
    return h;
}

static void test_inference(void **state) {
    Backend *cu = cuda(), *cpu = backend_cpu_create(DTYPE_FP32);
    GPT mc, mr;
    build(&mc, cu, false);
    build(&mr, cpu, false);
    const int BI = mc.B_infer;
    assert_true(BI > B);
    const long n_tok = (long)BI * T;
    int32_t *x = malloc(n_tok * 4), *y = malloc(n_tok * 4);
    TestRng r = test_rng(3);
    tokens(&r, x, n_tok);
    tokens(&r, y, n_tok);
    y[1] = -1;
    // the same rows through both entry points of the CUDA backend: the same bytes
    const float lf = gpt_forward(&mc, x, y, B, T, false, 0, 0, NULL);
    float *lg_fwd = download(cu, mc.acts.logits, (size_t)B * T * V);
    const float li = gpt_forward_inference(&mc, x, y, B, T);
    float *lg_inf = download(cu, mc.infer.logits, (size_t)B * T * V);
    assert_memory_equal(&lf, &li, sizeof lf);
    assert_memory_equal(lg_fwd, lg_inf, (size_t)B * T * V * 4);
    // every B_infer row against the CPU backend's training forward, B rows at a time
    gpt_forward_inference(&mc, x, y, BI, T);
    float *lg = download(cu, mc.infer.logits, (size_t)n_tok * V);
    double sum_cu = 0, sum_cpu = 0;
    for (long i = 0; i < n_tok; i++) sum_cu += y[i] != -1 ? mc.host_losses[i] : 0.0;
    for (int r0 = 0; r0 < BI; r0 += B) {
        const int n = BI - r0 < B ? BI - r0 : B;
        sum_cpu += (double)gpt_forward(&mr, x + (long)r0 * T, y + (long)r0 * T, n, T, false, 0, 0, NULL) * mr.n_valid;
        assert_close_rel(lg + (long)r0 * T * V, mr.acts.logits, (long)n * T * V, 1e-5, "logits, cuda vs cpu");
    }
    print_message("    %d rows (training batch %d): loss sum cuda %.6f, cpu %.6f\n", BI, B, sum_cu, sum_cpu);
    assert_true(fabs(sum_cu - sum_cpu) <= 1e-5 * fabs(sum_cpu));
    free(x); free(y); free(lg_fwd); free(lg_inf); free(lg);
    gpt_free(&mc); gpt_free(&mr);
    cu->destroy(cu); cpu->destroy(cpu);
}

static void test_incremental_inference(void **state) {
    Backend *cu = cuda(), *cpu = backend_cpu_create(DTYPE_FP32);
    GPT mc, mr;
    build(&mc, cu, false);
    build(&mr, cpu, false);   // the same weights (gpt_init_weights computes them on the host)
    GPTInfer g;
    char err[512], what[64];
    if (gpt_infer_begin(&g, &mc, err, sizeof err)) fail_msg("gpt_infer_begin: %s", err);
    enum { N_CTX = 2 * T + 5 };
    int32_t ctx[N_CTX];
    TestRng r = test_rng(5);
    tokens(&r, ctx, N_CTX);
    for (int n = 1; n <= N_CTX; n++) {   // minGPT's generate: the last min(n, T) tokens
        const int w = n < T ? n : T;
        gpt_forward(&mr, ctx + (n - w), NULL, 1, w, false, 0, 0, NULL);
        snprintf(what, sizeof what, "context %d, cuda incremental vs cpu forward", n);
        assert_close_rel(gpt_infer_next(&g, ctx, n), mr.acts.logits + (size_t)(w - 1) * V, V, 1e-5, what);
    }
    // chunks of new tokens after a reset: positions p0 > 0 with several rows at once
    gpt_forward(&mr, ctx, NULL, 1, T, false, 0, 0, NULL);
    gpt_infer_reset(&g);
    const int chunks[] = { 3, 1, 4, 4 };   // sums to T
    for (int c = 0, p0 = 0; c < 4; p0 += chunks[c], c++) {
        snprintf(what, sizeof what, "chunk of %d at position %d", chunks[c], p0);
        assert_close_rel(gpt_infer_feed(&g, ctx + p0, chunks[c]), mr.acts.logits + (size_t)(p0 + chunks[c] - 1) * V, V,
                         1e-5, what);
    }
    assert_null(gpt_infer_feed(&g, ctx, 1));   // the cache is full
    gpt_infer_end(&g);
    gpt_free(&mc); gpt_free(&mr);
    cu->destroy(cu); cpu->destroy(cpu);
}

typedef struct { GPT m; AdamW opt; LossScaler ls; } Run;

static void run_init(Run *r, Backend *be, bool ckpt) {
    build(&r->m, be, ckpt);
    if (adamw_init(&r->opt, be, r->m.num_params)) fail_msg("adamw_init");
    loss_scaler_init(&r->ls, 0);
}

static StepResult run_step(Run *r, Comm *comm, int s, const int32_t *x, const int32_t *y) {
    TrainStep ts = { .model = &r->m, .opt = &r->opt, .scaler = &r->ls, .comm = comm, .grad_clip = 1.0, .lr = 1e-3f,
                     .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f };
    MicroBatch mb = { x, y, B };
    StepResult res;
    if (train_step(&ts, &mb, 1, B, T, 1337, (uint64_t)s, 0, &res)) fail_msg("train_step");
    assert_int_equal(res.applied, 1);
    return res;
}

static void checkpointing(ComputeDtype dt) {
    Backend *cu = cuda_dt(dt), *cpu = backend_cpu_create(dt);
    Comm *comm = comm_single_create();
    Run plain, ckpt, ref;
    run_init(&plain, cu, false);
    run_init(&ckpt, cu, true);
    run_init(&ref, cpu, true);
    assert_true(ckpt.m.num_acts < plain.m.num_acts);
    // bf16: the GELU outputs and c_fc's output gradient only as the copies the epilogues write
    // (no fp32 GELU output in either layout; the working set's copy recomputed by checkpointing)
    for (int l = 0; l < SHAPE.n_layer; l++) {
        const bool lp = dt != DTYPE_FP32;
        assert_true((plain.m.acts.h[l].fch_gelu == NULL) == lp && (plain.m.acts.h[l].fch_gelu_lp != NULL) == lp);
        assert_true((ckpt.m.acts.h[l].fch_gelu == NULL) == lp && (ckpt.m.acts.h[l].fch_gelu_lp != NULL) == lp);
        assert_true((plain.m.scratch.dfch_lp != NULL) == lp && (ckpt.m.scratch.dfch_lp != NULL) == lp);
        assert_null(ref.m.acts.h[l].fch_gelu_lp);   // the CPU: its separate ops, fp32 GELU outputs
        // hs 16: the fused attention, which reads qkv only as c_attn's copy
        assert_true((plain.m.acts.h[l].qkv == NULL) == lp && (plain.m.acts.h[l].qkv_lp != NULL) == lp);
        assert_true((ckpt.m.acts.h[l].qkv == NULL) == lp && (ckpt.m.acts.h[l].qkv_lp != NULL) == lp);
        assert_true(ref.m.acts.h[l].qkv != NULL && ref.m.acts.h[l].qkv_lp == NULL);   // the CPU: fp32 qkv
    }
    const size_t P = plain.m.num_params;
    TestRng r = test_rng(4);
    for (int s = 0; s < STEPS; s++) {
        int32_t x[B * T], y[B * T];
        tokens(&r, x, B * T);
        tokens(&r, y, B * T);
        const StepResult a = run_step(&plain, comm, s, x, y), b = run_step(&ckpt, comm, s, x, y),
                         c = run_step(&ref, comm, s, x, y);
        print_message("    step %d: loss cuda %.7f, cuda checkpointing %.7f, cpu checkpointing %.7f\n", s, a.loss,
                      b.loss, c.loss);
        assert_memory_equal(&a.loss, &b.loss, sizeof a.loss);
        assert_memory_equal(&a.norm, &b.norm, sizeof a.norm);
        float *ga = download(cu, plain.m.grads_memory, P), *gb = download(cu, ckpt.m.grads_memory, P);
        float *pa = download(cu, plain.m.params_memory, P), *pb = download(cu, ckpt.m.params_memory, P);
        assert_memory_equal(ga, gb, P * 4);
        assert_memory_equal(pa, pb, P * 4);
        free(ga); free(gb); free(pa); free(pb);
        // bf16: the CPU's bf16 GEMMs round the same operands but sum in another order, so an
        // intermediate may round to a neighbouring bf16: test_cuda_train's loss tolerance, 2^-11
        assert_true(fabs(b.loss - c.loss) <= (dt == DTYPE_FP32 ? 1e-4 : 0x1p-11) * c.loss);
    }
    Run *runs[] = { &plain, &ckpt, &ref };
    for (int k = 0; k < 3; k++) { adamw_free(&runs[k]->opt); gpt_free(&runs[k]->m); }
    comm->destroy(comm);
    cu->destroy(cu); cpu->destroy(cpu);
}
static void test_checkpointing(void **state) { checkpointing(DTYPE_FP32); }

// bf16 without a gradient buffer (ZeRO stage 2: each tensor's gradient bound by the caller):
// the model then makes mlp.c_proj's backward, the GELU backward and c_fc's backward separately
// (matmul_backward_dgelu would write c_fc's bias gradient before its place is bound), mlp.c_proj
// taking the GELU output's bf16 copy (no fp32 GELU output is kept). Against the same backend
// without matmul_backward_dgelu (no copies of the GELU output: fp32 kept and rounded per call,
// the same separate calls): the loss and every gradient bitwise.
static void test_no_grad_buffer_bf16(void **state) {
    Backend *cu = cuda_dt(DTYPE_BF16);
    Backend plain = *cu;
    plain.matmul_backward_dgelu = NULL;
    char err[512];
    GPT a, b;
    build(&a, &plain, false);
    const GPTBuildOptions nog = { .no_grad_buffer = true };
    if (gpt_build_with(&b, &SHAPE, B, T, cu, &nog, err, sizeof err)) fail_msg("gpt_build_with: %s", err);
    gpt_init_weights(&b, 17);
    assert_null(b.grads_memory);
    assert_true(b.acts.h[0].fch_gelu == NULL && b.acts.h[0].fch_gelu_lp != NULL);
    assert_true(a.acts.h[0].fch_gelu != NULL && a.acts.h[0].fch_gelu_lp == NULL);
    const size_t P = a.num_params;
    float *g = cu->alloc(cu, P * sizeof(float));
    assert_non_null(g);
    for (int k = 0; k < b.n_tensors; k++) gpt_bind_grad(&b, k, g + b.tensors[k].offset);
    gpt_zero_grad(&a);
    TestRng r = test_rng(5);
    int32_t x[B * T], y[B * T];
    tokens(&r, x, B * T);
    tokens(&r, y, B * T);
    const float la = gpt_forward(&a, x, y, B, T, true, 1337, 0, NULL), lb = gpt_forward(&b, x, y, B, T, true, 1337, 0, NULL);
    assert_memory_equal(&la, &lb, sizeof la);
    gpt_backward(&a, NULL, NULL);
    gpt_backward(&b, NULL, NULL);
    float *ga = download(cu, a.grads_memory, P), *gb = download(cu, g, P);
    for (int k = 0; k < a.n_tensors; k++) {
        const ParamTensor *t = &a.tensors[k];
        for (size_t i = t->offset; i < t->offset + t->numel; i++)
            if (memcmp(&ga[i], &gb[i], 4)) fail_msg("%s[%zu]: %.9g vs %.9g", t->name, i - t->offset, ga[i], gb[i]);
    }
    free(ga); free(gb);
    cu->free(cu, g);
    gpt_free(&a); gpt_free(&b);
    cu->destroy(cu);
}
static void test_checkpointing_bf16(void **state) { checkpointing(DTYPE_BF16); }

static void qkv_copy(ComputeDtype dt, bool ckpt) {
    Backend *cu = cuda_dt(dt);
    Backend fp32_qkv = *cu;
    fp32_qkv.attention_takes_lp = NULL;
    GPT a, b;
    build(&a, &fp32_qkv, ckpt);
    build(&b, cu, ckpt);
    for (int l = 0; l < SHAPE.n_layer; l++) {
        assert_true(a.acts.h[l].qkv != NULL && a.acts.h[l].qkv_lp == NULL);
        assert_true(b.acts.h[l].qkv == NULL && b.acts.h[l].qkv_lp != NULL);
        assert_true(b.infer.h[l].qkv != NULL && b.infer.h[l].qkv_lp == NULL);   // evaluation: fp32
    }
    assert_true(b.num_acts < a.num_acts);
    const size_t P = a.num_params;
    TestRng r = test_rng(6);
    for (int s = 0; s < 2; s++) {
        int32_t x[B * T], y[B * T];
        tokens(&r, x, B * T);
        tokens(&r, y, B * T);
        gpt_zero_grad(&a);
        gpt_zero_grad(&b);
        const float la = gpt_forward(&a, x, y, B, T, true, 1337, (uint64_t)s, NULL);
        const float lb = gpt_forward(&b, x, y, B, T, true, 1337, (uint64_t)s, NULL);
        assert_memory_equal(&la, &lb, sizeof la);
        gpt_backward(&a, NULL, NULL);
        gpt_backward(&b, NULL, NULL);
        float *ga = download(cu, a.grads_memory, P), *gb = download(cu, b.grads_memory, P);
        for (int k = 0; k < a.n_tensors; k++) {
            const ParamTensor *t = &a.tensors[k];
            for (size_t i = t->offset; i < t->offset + t->numel; i++)
                if (memcmp(&ga[i], &gb[i], 4)) fail_msg("%s[%zu]: %.9g vs %.9g", t->name, i - t->offset, ga[i], gb[i]);
        }
        free(ga); free(gb);
        const float ea = gpt_forward_inference(&a, x, y, B, T), eb = gpt_forward_inference(&b, x, y, B, T);
        assert_memory_equal(&ea, &eb, sizeof ea);
        print_message("    %s%s step %d: loss %.7f, evaluation %.7f, bitwise with fp32 qkv\n",
                      dt == DTYPE_BF16 ? "bf16" : "fp16", ckpt ? " checkpointing" : "", s, lb, eb);
    }
    gpt_free(&a); gpt_free(&b);
    cu->destroy(cu);
}
static void test_qkv_copy(void **state) {
    qkv_copy(DTYPE_BF16, false);
    qkv_copy(DTYPE_BF16, true);
    qkv_copy(DTYPE_FP16, false);
    qkv_copy(DTYPE_FP16, true);
}

int main(void) {
    // the fused attention kernels wherever a shape allows them (MINGPT_CUDA_ATTENTION=fused; the
    // default is the cuBLAS path, kernels/backend.h), so this suite keeps checking both paths
    setenv("MINGPT_CUDA_ATTENTION", "fused", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inference),
        cmocka_unit_test(test_incremental_inference),
        cmocka_unit_test(test_checkpointing),
        cmocka_unit_test(test_checkpointing_bf16),
        cmocka_unit_test(test_no_grad_buffer_bf16),
        cmocka_unit_test(test_qkv_copy),
    };
    return cmocka_run_group_tests_name("cuda layouts: evaluation and checkpointing", tests, NULL, NULL);
}
