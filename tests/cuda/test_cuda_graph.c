// tests/cuda/test_cuda_graph.c — the CUDA backend without host synchronisations inside a
// training micro-step, and that micro-step captured as a CUDA graph (on the emulator, whose
// stream capture refuses every host synchronisation as CUDA does: kernels/cuda/emu/README.md).
//
//   encoder backward: the token bucketing runs on the device; on duplicated tokens at odd
//     B, T, C (N below, above and exactly at a power of two; largest token id 255, 256, 70000
//     and 2^24: one to four radix passes) dwte and
//     dwpe are bitwise the previous implementation's (its host counting sort, reproduced here:
//     per token the positions in ascending order, added onto the accumulated gradient) and the
//     CPU backend's; the emulated op makes no device-to-host copy (emu_d2h_count) and is
//     captured into a stream capture without invalidating it.
//   a captured micro-step (gpt_forward_backward, Backend.graph_run): a small GPT (dropout off and 0.1,
//     fp32 and bf16, activation checkpointing off and on) trained through gpt_forward_backward
//     on one CUDA backend and through gpt_forward + gpt_backward on another gives bitwise the
//     same loss and gradients on four different batches of one shape: the first runs directly,
//     the second is captured (the capture would fail on any host synchronisation inside the
//     forward or backward), the third and fourth are replays that call no op of the backend
//     (counted through its table) yet read the new batch; a batch with another number of
//     ignored targets gets its own graph. Ten loss scales, each called three times (direct,
//     capture, replay), then the first again: the model keeps the GPT_GRAPHS most recently used
//     graphs, freeing the oldest, and every call still equals the direct one bit for bit. A
//     change of the matmul precision or a grown scratch buffer makes the next call capture again.
//   a host synchronisation inside a captured sequence (a download) ends the process with exit
//     code 1 and a message naming the refused call, that it happened inside a graph capture,
//     and MINGPT_CUDA_GRAPHS=0; the first, direct run of the same sequence is fine.
//   with dropout 0.1 (the same batch at 6 steps, so only the masks differ; rows placed as
//     data-parallel ranks from the fourth on) every step after the second replays the one
//     graph, whose kernels read the step's dropout keys from device memory: each step's loss
//     (all different) and gradients bitwise the direct launches', fp32 and bf16; graph_case
//     above with dropout 0.1 too (fp32, checkpointing, bf16), and bf16 at hs 16 (the fused
//     attention reading c_attn's output only as its bf16 copy), with and without checkpointing.
//   training steps (trainer/train_step.c, dropout off and 0.1, 1 and 2 micro-steps per step):
//     4 optimizer steps with graphs (the default) and with MINGPT_CUDA_GRAPHS=0 give bitwise the
//     same losses, norms and parameters, the first run through one graph per kind of micro-step
//     (the first after gpt_zero_grad, whose matmuls overwrite their gradients, and the others),
//     the second through none, with no bias-gradient accumulate launch in a first micro-step.
#include "tests/test_util.h"

#include <stdbool.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/backend.h"
#include "kernels/cuda/emu/emu_counters.h"
#include "model/gpt.h"
#include "trainer/train_step.h"
#include "tests/cuda/backend_util.h"

// The emulator's counters exist only in the emulated build; linked with the real CUDA objects
// (make gpu-tests) they are NULL and their checks are skipped.
#pragma weak emu_d2h_count
#pragma weak emu_launch_count
#pragma weak emu_host_wait_count

static Backend *cuda_dt(ComputeDtype dt) {
    char err[512];
    Backend *be = backend_cuda_create(dt, 0, err, sizeof err);
    if (!be) fail_msg("backend_cuda_create: %s", err);
    return be;
}
static Backend *cuda(void) { return cuda_dt(DTYPE_FP32); }

static void assert_bitwise(const char *what, const float *got, const float *want, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
            fail_msg("%s: element %zu: %.9g != %.9g (expected bitwise equality)", what, i, got[i], want[i]);
}

// ================================================================ encoder backward
// The previous CUDA implementation's order, on the host: tokens counting-sorted into buckets
// (positions ascending inside each), each bucket's rows added in order onto dwte; dwpe sums b
// in order. Negative token ids are skipped (as it did; the CPU op has no such case).
static void prev_encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *inp,
                                  int B, int T, int C) {
    const int N = B * T;
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) {
            float acc = dwpe[(size_t)t * C + c];
            for (int b = 0; b < B; b++) acc += dout[((size_t)b * T + t) * C + c];
            dwpe[(size_t)t * C + c] = acc;
        }
    int32_t max_tok = -1;
    for (int n = 0; n < N; n++) max_tok = inp[n] > max_tok ? inp[n] : max_tok;
    int *count = calloc((size_t)max_tok + 2, sizeof(int)), *pos = malloc(((size_t)max_tok + 1) * sizeof(int));
    int *idx = malloc((size_t)N * sizeof(int)), nvalid = 0;
    for (int n = 0; n < N; n++) if (inp[n] >= 0) { count[inp[n] + 1]++; nvalid++; }
    for (int v = 0, off = 0; v <= max_tok; v++) { pos[v] = off; off += count[v + 1]; }
    for (int n = 0; n < N; n++) if (inp[n] >= 0) idx[pos[inp[n]]++] = n;
    for (int j = 0; j < nvalid;) {
        const int v = inp[idx[j]];
        int e = j;
        while (e < nvalid && inp[idx[e]] == v) e++;
        for (int c = 0; c < C; c++) {
            float acc = dwte[(size_t)v * C + c];
            for (int k = j; k < e; k++) acc += dout[(size_t)idx[k] * C + c];
            dwte[(size_t)v * C + c] = acc;
        }
        j = e;
    }
    free(count); free(pos); free(idx);
}

static void test_encoder_backward_on_device(void **state) {
    (void)state;
    // B, T, C, V, distinct tokens. One radix pass (every id < 256): N = 111 odd, C > 128;
    // N = 1024; ids up to 255; N = 1. Two passes: ids up to 256. Three: N = 1505 with ids up to
    // 70000. Four: ids up to 2^24. Negative ids (skipped; not compared with the CPU): one pass
    // and three.
    static const int cases[][5] = { {3, 37, 129, 67, 4}, {4, 256, 8, 67, 67}, {2, 45, 7, 256, 64}, {1, 1, 3, 2, 1},
                                    {2, 45, 7, 257, 64}, {5, 301, 33, 70001, 3}, {3, 41, 1, (1 << 24) + 1, 5},
                                    {3, 37, 9, 67, -4}, {5, 301, 5, 70001, -3} };
    Backend *cu = cuda(), *cpu = backend_cpu_create(DTYPE_FP32);
    assert_non_null(cpu);
    TestRng r = test_rng(77);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const int B = cases[k][0], T = cases[k][1], C = cases[k][2], V = cases[k][3];
        const int distinct = abs(cases[k][4]), negative = cases[k][4] < 0;
        const size_t N = (size_t)B * T, VC = (size_t)V * C, TC = (size_t)T * C;
        int32_t *inp = malloc(N * sizeof(int32_t));
        for (size_t n = 0; n < N; n++) inp[n] = (int32_t)(test_next(&r) % (uint64_t)distinct) * (V / distinct);
        inp[N / 2] = V - 1;
        if (negative) { inp[0] = -1; inp[N / 3] = -7; inp[N - 1] = -1; }
        float *dout = frand(&r, (long)(N * C), -1, 1), *dwte = frand(&r, (long)VC, -1, 1), *dwpe = frand(&r, (long)TC, -1, 1);
        float *p_wte = malloc(VC * sizeof(float)), *p_wpe = malloc(TC * sizeof(float));
        float *c_wte = malloc(VC * sizeof(float)), *c_wpe = malloc(TC * sizeof(float));
        memcpy(p_wte, dwte, VC * sizeof(float)); memcpy(p_wpe, dwpe, TC * sizeof(float));
        memcpy(c_wte, dwte, VC * sizeof(float)); memcpy(c_wpe, dwpe, TC * sizeof(float));
        prev_encoder_backward(p_wte, p_wpe, dout, inp, B, T, C);
        if (!negative) cpu->encoder_backward(cpu, c_wte, c_wpe, dout, inp, B, T, C);

        int32_t *d_inp = up(cu, inp, N * sizeof(int32_t));
        float *d_dout = up(cu, dout, N * C * sizeof(float));
        float *d_wte = up(cu, dwte, VC * sizeof(float)), *d_wpe = up(cu, dwpe, TC * sizeof(float));
        const long d2h = emu_d2h_count ? emu_d2h_count() : 0;
        cu->encoder_backward(cu, d_wte, d_wpe, d_dout, d_inp, B, T, C);
        if (emu_d2h_count) assert_int_equal(emu_d2h_count() - d2h, 0);
        float *g_wte = down(cu, d_wte, VC), *g_wpe = down(cu, d_wpe, TC);
        assert_bitwise("dwte vs the previous implementation", g_wte, p_wte, VC);
        assert_bitwise("dwpe vs the previous implementation", g_wpe, p_wpe, TC);
        if (!negative) {
            assert_bitwise("dwte vs the CPU backend", g_wte, c_wte, VC);
            assert_bitwise("dwpe vs the CPU backend", g_wpe, c_wpe, TC);
        }
        print_message("    B %d T %d C %d V %d: dwte, dwpe bitwise equal, no device-to-host copy\n", B, T, C, V);

        cu->free(cu, d_inp); cu->free(cu, d_dout); cu->free(cu, d_wte); cu->free(cu, d_wpe);
        free(inp); free(dout); free(dwte); free(dwpe); free(p_wte); free(p_wpe); free(c_wte); free(c_wpe);
        free(g_wte); free(g_wpe);
    }
    cu->destroy(cu);
    cpu->destroy(cpu);
}

// ================================================================ captured micro-step
enum { GV = 29, GB = 3, GT = 11 };
static const GPTShape GSHAPE = { .vocab_size = GV, .block_size = 16, .n_layer = 2, .n_head = 3, .n_embd = 24,
                                 .embd_pdrop = 0.1f, .resid_pdrop = 0.1f, .attn_pdrop = 0.1f };
// hs 16: bf16 takes the fused attention, c_attn's output kept only as the bf16 copy it reads
static const GPTShape GSHAPE_FUSED = { .vocab_size = GV, .block_size = 16, .n_layer = 2, .n_head = 2, .n_embd = 32,
                                       .embd_pdrop = 0.1f, .resid_pdrop = 0.1f, .attn_pdrop = 0.1f };
static const GPTShape *g_shape = &GSHAPE;   // the shape build_d builds

// host calls of the graph backend's encoder_forward (one per forward whose ops fn enqueued)
static long g_enc_calls;
static void (*g_enc_orig)(Backend *, float *, const int32_t *, const float *, const float *, int, int, int);
static void counting_encoder_forward(Backend *be, float *out, const int32_t *inp, const float *wte,
                                     const float *wpe, int B, int T, int C) {
    g_enc_calls++;
    g_enc_orig(be, out, inp, wte, wpe, B, T, C);
}

// dropout: GSHAPE's 0.1 at every site, else 0
static void build_d(GPT *m, Backend *be, bool checkpointing, bool dropout) {
    char err[256];
    GPTShape s = *g_shape;
    if (!dropout) s.embd_pdrop = s.resid_pdrop = s.attn_pdrop = 0.0f;
    if (gpt_build_on(m, &s, GB, GT, be, err, sizeof err)) fail_msg("gpt_build_on: %s", err);
    m->checkpointing = checkpointing;
    gpt_init_weights(m, 5);
}
static void build(GPT *m, Backend *be, bool checkpointing) { build_d(m, be, checkpointing, false); }

static void graph_case(ComputeDtype dt, bool checkpointing, bool dropout) {
    Backend *bd = cuda_dt(dt), *bg = cuda_dt(dt);
    g_enc_orig = bg->encoder_forward;
    bg->encoder_forward = counting_encoder_forward;
    GPT md, mg;
    build_d(&md, bd, checkpointing, dropout);
    build_d(&mg, bg, checkpointing, dropout);
    const bool qkv_lp = g_shape == &GSHAPE_FUSED && dt != DTYPE_FP32;
    for (int l = 0; l < g_shape->n_layer; l++)
        assert_true((mg.acts.h[l].qkv_lp != NULL) == qkv_lp && (mg.acts.h[l].qkv == NULL) == qkv_lp);
    TestRng r = test_rng(99);
    const size_t N = (size_t)GB * GT, P = md.num_params;
    int32_t x[GB * GT], y[GB * GT];
    float *gd = malloc(P * sizeof(float)), *gg = malloc(P * sizeof(float));
    // batches 0-3: all targets valid; batch 4: two ignored (another graph)
    const long enc_expected[] = { 1, 2, 2, 2, 3 };
    float last_loss = NAN;
    for (int k = 0; k < 5; k++) {
        for (size_t i = 0; i < N; i++) { x[i] = (int32_t)(test_next(&r) % GV); y[i] = (int32_t)(test_next(&r) % GV); }
        if (k == 4) { y[0] = -1; y[N - 1] = -1; }
        GPTStepArgs args = GPT_STEP_ARGS_DEFAULT;
        args.loss_scale = 0.75f;
        gpt_zero_grad(&md);
        gpt_zero_grad(&mg);
        const float ld = gpt_forward(&md, x, y, GB, GT, true, 1, (uint64_t)k, &args);
        gpt_backward(&md, NULL, NULL);
        const float lg = gpt_forward_backward(&mg, x, y, GB, GT, true, 1, (uint64_t)k, &args);
        if (memcmp(&ld, &lg, sizeof ld) != 0) fail_msg("batch %d: loss %.9g (graph) != %.9g (direct)", k, lg, ld);
        assert_true(ld != last_loss);   // a new batch, a new loss: the replay read it
        last_loss = ld;
        bd->download(bd, gd, md.grads_memory, P * sizeof(float));
        bg->download(bg, gg, mg.grads_memory, P * sizeof(float));
        assert_bitwise("gradients (graph vs direct)", gg, gd, P);
        assert_int_equal(mg.n_valid, md.n_valid);
        if (g_enc_calls != enc_expected[k])
            fail_msg("batch %d: the graph backend's ops were called %ld times, expected %ld (direct, capture, replays)",
                     k, g_enc_calls, enc_expected[k]);
    }
    assert_int_equal(mg.n_graphs, 2);
    print_message("    %s%s%s%s: loss and %zu gradients bitwise equal on 5 batches (direct, capture, 2 replays, new graph)\n",
                  dt == DTYPE_FP32 ? "fp32" : "bf16", checkpointing ? ", checkpointing" : "",
                  dropout ? ", dropout 0.1" : "", qkv_lp ? ", hs 16: qkv as its bf16 copy" : "", P);
    free(gd); free(gg);
    gpt_free(&md); gpt_free(&mg);
    g_enc_calls = 0;
    bd->destroy(bd); bg->destroy(bg);
}

static void test_captured_micro_step(void **state) {
    (void)state;
    graph_case(DTYPE_FP32, false, false);
    graph_case(DTYPE_FP32, true, false);
    graph_case(DTYPE_BF16, false, false);
    graph_case(DTYPE_FP32, false, true);
    graph_case(DTYPE_FP32, true, true);
    graph_case(DTYPE_BF16, false, true);
    g_shape = &GSHAPE_FUSED;   // the fused attention from c_attn's copy, checkpointing's recompute too
    graph_case(DTYPE_BF16, false, true);
    graph_case(DTYPE_BF16, true, true);
    g_shape = &GSHAPE;
}

static void test_graph_table_keeps_the_recent(void **state) {
    (void)state;
    Backend *bd = cuda(), *bg = cuda();
    GPT md, mg;
    build(&md, bd, false);
    build(&mg, bg, false);
    TestRng r = test_rng(5);
    int32_t x[GB * GT], y[GB * GT];
    const size_t P = md.num_params;
    float *gd = malloc(P * sizeof(float)), *gg = malloc(P * sizeof(float));
    const int scales[] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0 };
    for (size_t k = 0; k < sizeof scales / sizeof scales[0]; k++) {
        for (int rep = 0; rep < 3; rep++) {
            for (int i = 0; i < GB * GT; i++) { x[i] = (int32_t)(test_next(&r) % GV); y[i] = (int32_t)(test_next(&r) % GV); }
            GPTStepArgs args = GPT_STEP_ARGS_DEFAULT;
            args.loss_scale = 1.0f + 0.5f * (float)scales[k];
            const float ld = gpt_forward(&md, x, y, GB, GT, true, 1, 0, &args);
            gpt_backward(&md, NULL, NULL);
            const float lg = gpt_forward_backward(&mg, x, y, GB, GT, true, 1, 0, &args);
            assert_memory_equal(&ld, &lg, sizeof ld);
        }
        assert_int_equal(mg.n_graphs, k < GPT_GRAPHS ? (int)k + 1 : GPT_GRAPHS);
    }
    bd->download(bd, gd, md.grads_memory, P * sizeof(float));
    bg->download(bg, gg, mg.grads_memory, P * sizeof(float));
    assert_bitwise("gradients accumulated over 33 micro-steps", gg, gd, P);
    bool found = false;   // the last key (scale 1.0) is held again, the oldest ones are gone
    for (int k = 0; k < mg.n_graphs; k++) {
        found |= mg.graphs[k].loss_scale == 1.0f;
        assert_true(mg.graphs[k].loss_scale != 1.5f && mg.graphs[k].loss_scale != 2.0f);
    }
    assert_true(found);
    free(gd); free(gg);
    gpt_free(&md); gpt_free(&mg);
    bd->destroy(bd); bg->destroy(bg);
}

// A graph is captured again when what it baked in changes: the matmul precision (TF32 on: the
// emulator rounds the GEMM inputs, so a stale replay would differ in the bits) and a scratch
// buffer it uses (grown by a larger encoder backward: a stale replay would use freed memory,
// which the AddressSanitizer build reports).
static void test_stale_graph_captured_again(void **state) {
    (void)state;
    Backend *bd = cuda(), *bg = cuda();
    g_enc_orig = bg->encoder_forward;
    bg->encoder_forward = counting_encoder_forward;
    g_enc_calls = 0;
    GPT md, mg;
    build(&md, bd, false);
    build(&mg, bg, false);
    TestRng r = test_rng(21);
    int32_t x[GB * GT], y[GB * GT];
    // calls 0-2 fp32 (direct, capture, replay); TF32 on; 3-4 (capture, replay); the scratch
    // grows; 5-6 (capture, replay)
    const long enc_expected[] = { 1, 2, 2, 3, 3, 4, 4 };
    for (int k = 0; k < 7; k++) {
        if (k == 3) { bd->set_matmul_precision(bd, 1); bg->set_matmul_precision(bg, 1); }
        if (k == 5) {
            enum { N = 2000, C = 4, V = 8 };
            int32_t *tok = calloc(N, sizeof(int32_t));
            float *z = calloc((size_t)N * C, sizeof(float));
            int32_t *d_tok = up(bg, tok, N * sizeof(int32_t));
            float *d_out = up(bg, z, (size_t)N * C * sizeof(float)), *d_wte = up(bg, z, V * C * sizeof(float));
            float *d_wpe = up(bg, z, (size_t)N * C * sizeof(float));
            bg->encoder_backward(bg, d_wte, d_wpe, d_out, d_tok, 1, N, C);
            bg->free(bg, d_tok); bg->free(bg, d_out); bg->free(bg, d_wte); bg->free(bg, d_wpe);
            free(tok); free(z);
        }
        for (int i = 0; i < GB * GT; i++) { x[i] = (int32_t)(test_next(&r) % GV); y[i] = (int32_t)(test_next(&r) % GV); }
        const float ld = gpt_forward(&md, x, y, GB, GT, true, 1, 0, NULL);
        gpt_backward(&md, NULL, NULL);
        const float lg = gpt_forward_backward(&mg, x, y, GB, GT, true, 1, 0, NULL);
        if (memcmp(&ld, &lg, sizeof ld) != 0) fail_msg("call %d: loss %.9g (graph) != %.9g (direct)", k, lg, ld);
        if (g_enc_calls != enc_expected[k])
            fail_msg("call %d: the graph backend's ops were called %ld times, expected %ld", k, g_enc_calls, enc_expected[k]);
    }
    const size_t P = md.num_params;
    float *gd = malloc(P * sizeof(float)), *gg = malloc(P * sizeof(float));
    bd->download(bd, gd, md.grads_memory, P * sizeof(float));
    bg->download(bg, gg, mg.grads_memory, P * sizeof(float));
    assert_bitwise("gradients accumulated over 7 micro-steps", gg, gd, P);
    free(gd); free(gg);
    gpt_free(&md); gpt_free(&mg);
    g_enc_calls = 0;
    bd->destroy(bd); bg->destroy(bg);
}

// With dropout on, the steps replay one graph: the same batch at steps 0..5 (only the masks
// differ, so a replay that kept the captured keys would repeat a loss), with the rows placed
// as rank 0 or 1 of 2 data-parallel ranks from step 3 on (row0, row_stride in the keys' buffer
// too), and each step's loss and gradients are bitwise gpt_forward + gpt_backward's.
static void dropout_replay_case(ComputeDtype dt) {
    Backend *bd = cuda_dt(dt), *bg = cuda_dt(dt);
    g_enc_orig = bg->encoder_forward;
    bg->encoder_forward = counting_encoder_forward;
    g_enc_calls = 0;
    GPT md, mg;
    build_d(&md, bd, false, true);
    build_d(&mg, bg, false, true);
    TestRng r = test_rng(3);
    int32_t x[GB * GT], y[GB * GT];
    for (int i = 0; i < GB * GT; i++) { x[i] = (int32_t)(test_next(&r) % GV); y[i] = (int32_t)(test_next(&r) % GV); }
    const size_t P = md.num_params;
    float *gd = malloc(P * sizeof(float)), *gg = malloc(P * sizeof(float));
    float losses[6];
    for (int k = 0; k < 6; k++) {
        GPTStepArgs args = GPT_STEP_ARGS_DEFAULT;
        if (k >= 3) { args.batch_row0 = k % 2; args.batch_row_stride = 2; }
        gpt_zero_grad(&md);
        gpt_zero_grad(&mg);
        const float ld = gpt_forward(&md, x, y, GB, GT, true, 7, (uint64_t)k, &args);
        gpt_backward(&md, NULL, NULL);
        const float lg = gpt_forward_backward(&mg, x, y, GB, GT, true, 7, (uint64_t)k, &args);
        if (memcmp(&ld, &lg, sizeof ld) != 0) fail_msg("step %d: loss %.9g (graph) != %.9g (direct)", k, lg, ld);
        for (int j = 0; j < k; j++)
            if (losses[j] == ld) fail_msg("steps %d and %d: the same loss %.9g (the masks did not change)", j, k, ld);
        losses[k] = ld;
        bd->download(bd, gd, md.grads_memory, P * sizeof(float));
        bg->download(bg, gg, mg.grads_memory, P * sizeof(float));
        assert_bitwise("gradients with dropout (graph vs direct)", gg, gd, P);
        const long expected = k == 0 ? 1 : 2;   // direct, capture, then replays only
        if (g_enc_calls != expected)
            fail_msg("step %d: the graph backend's ops were called %ld times, expected %ld", k, g_enc_calls, expected);
    }
    assert_int_equal(mg.n_graphs, 1);
    print_message("    %s: 6 steps with dropout 0.1 (direct, capture, 4 replays) bitwise equal to direct launches\n",
                  dt == DTYPE_FP32 ? "fp32" : "bf16");
    free(gd); free(gg);
    gpt_free(&md); gpt_free(&mg);
    g_enc_calls = 0;
    bd->destroy(bd); bg->destroy(bg);
}

static void test_dropout_steps_replayed(void **state) {
    (void)state;
    dropout_replay_case(DTYPE_FP32);
    dropout_replay_case(DTYPE_BF16);
}

// ================================================================ a host sync inside a capture
static Backend *g_be;
static float *g_buf;
static void zero_then_download(void *ctx) {
    float h[4];
    (void)ctx;
    g_be->zero(g_be, g_buf, sizeof h);
    g_be->download(g_be, h, g_buf, sizeof h);
}

// The child: run it directly (fine), then capture it (refused: the backend exits 1). A process of
// its own, started by exec: a real GPU's driver does not carry over a fork of a process that
// has used it (the child's device selection fails).
#define HOST_SYNC_CHILD "--host-sync-child"
static int host_sync_child(void) {
    g_be = cuda();
    g_buf = g_be->alloc(g_be, 16);
    static void *graph;   // (static: reachable for LeakSanitizer at the exit)
    if (g_be->graph_run(g_be, &graph, zero_then_download, NULL) != 1) return 3;
    g_be->graph_run(g_be, &graph, zero_then_download, NULL);
    return 0;   // not reached
}

static void test_host_sync_in_capture_is_reported(void **state) {
    (void)state;
    char path[] = "/tmp/mingpt_graph_XXXXXX";
    const int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(NULL);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fd, 2);
        execl("/proc/self/exe", "test_cuda_graph", HOST_SYNC_CHILD, (char *)NULL);
        _exit(4);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    char msg[4096] = "";
    const ssize_t n = pread(fd, msg, sizeof msg - 1, 0);
    close(fd);
    unlink(path);
    msg[n > 0 ? n : 0] = 0;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 1) fail_msg("exit status %d, expected 1; stderr: %s", st, msg);
    // the call that refuses first names itself: cudaStreamSynchronize in the emulator, where a
    // real GPU may already refuse the copy before it (cudaMemcpyAsync to pageable host memory)
    if (!strstr(msg, "mingpt: error: CUDA backend: cuda") ||
        !strstr(msg, "inside a CUDA graph capture (MINGPT_CUDA_GRAPHS=0 trains without graphs)"))
        fail_msg("the refused host synchronisation is not reported as expected; stderr: %s", msg);
    if (emu_launch_count && (!strstr(msg, "mingpt: error: CUDA backend: cudaStreamSynchronize") ||
                             !strstr(msg, "operation not permitted when stream is capturing")))
        fail_msg("emulated: expected cudaStreamSynchronize's refusal; stderr: %s", msg);
}

// ================================================================ training steps
typedef struct { Backend *be; GPT m; AdamW opt; LossScaler ls; TrainStep ts; } Run;
// What a case varies besides dropout and micro-steps: the matmul dtype, fp16 loss scaling (and its
// initial scale: 2^40 makes the first steps overflow, so they are skipped), the clip.
typedef struct { ComputeDtype dt; int scaler; float init_scale; double clip; } StepCase;
static const StepCase FP32_CASE = { DTYPE_FP32, 0, 0.0f, 1.0 };
static void run_init(Run *r, Comm *comm, bool dropout, StepCase c) {
    r->be = cuda_dt(c.dt);
    build_d(&r->m, r->be, false, dropout);
    if (adamw_init(&r->opt, r->be, r->m.num_params)) fail_msg("adamw_init");
    loss_scaler_init(&r->ls, c.scaler);
    if (c.scaler && c.init_scale > 0) r->ls.scale = c.init_scale;
    r->ts = (TrainStep){ .model = &r->m, .opt = &r->opt, .scaler = &r->ls, .comm = comm, .grad_clip = c.clip,
                         .lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f };
}

// n_micro micro-steps per step (gradient accumulation): the first of each step runs as the
// first backward after gpt_zero_grad (GRAD_OVERWRITE: the matmuls write their gradients, no
// bias-gradient accumulate launch), the others accumulate; with graphs each kind has its own
// graph, so a replay of one never stands in for the other (which would drop or double a
// micro-step's gradients: the norms and parameters would differ from the direct run's).
//
// The optimizer tail (Backend.optimizer_tail): with graphs, the last micro-step's graph also holds
// the gradient norm, the clip / skip decision and AdamW, taken on the device; without graphs the
// host takes them (sum_squares read back, loss_scaler_unscale_clip_coef, adamw_update_segments). The
// two agree bit for bit: loss, norm, applied, the loss scaler's state, the optimizer's step count
// and the parameters, with the clip active or not, under fp16 loss scaling, and on skipped steps.
static void train_steps_case(bool dropout, int n_micro, StepCase c) {
    Comm *comm = comm_single_create();
    Run g, d;
    run_init(&g, comm, dropout, c);
    run_init(&d, comm, dropout, c);
    int skipped = 0;
    TestRng r = test_rng(11);
    int32_t x[2][GB * GT], y[2][GB * GT];
    for (int step = 0; step < 4; step++) {
        MicroBatch mb[2];
        for (int k = 0; k < n_micro; k++) {
            for (int i = 0; i < GB * GT; i++) {
                x[k][i] = (int32_t)(test_next(&r) % GV);
                y[k][i] = (int32_t)(test_next(&r) % GV);
            }
            mb[k] = (MicroBatch){ x[k], y[k], GB };
        }
        StepResult rg, rd;
        unsetenv("MINGPT_CUDA_GRAPHS");
        const long w0 = emu_host_wait_count ? emu_host_wait_count() : 0;
        const long t0 = emu_launch_count ? emu_launch_count("ssq_final_tail_kernel") : 0;
        assert_int_equal(train_step(&g.ts, mb, n_micro, GB, GT, 3, (uint64_t)step, 0, &rg), 0);
        if (emu_launch_count) assert_int_equal(emu_launch_count("ssq_final_tail_kernel") - t0, 1);   // the tail ran
        assert_false(g.m.loss_pending);
        // from the third step on the micro-steps replay: the last one's losses are read with the
        // gradient norm (one host wait), an earlier micro-step's at once
        if (emu_host_wait_count && step >= 2)
            assert_int_equal(emu_host_wait_count() - w0, n_micro);
        setenv("MINGPT_CUDA_GRAPHS", "0", 1);
        const long acc0 = emu_launch_count ? emu_launch_count("accumulate_kernel") : 0;
        const long t1 = emu_launch_count ? emu_launch_count("ssq_final_tail_kernel") : 0;
        assert_int_equal(train_step(&d.ts, mb, n_micro, GB, GT, 3, (uint64_t)step, 0, &rd), 0);
        if (emu_launch_count) assert_int_equal(emu_launch_count("ssq_final_tail_kernel") - t1, 0);   // the host decided
        // one accumulate per bias gradient of a cuBLASLt epilogue (4 per layer), only in the
        // micro-steps after the first; none under MINGPT_CUDA_EPILOGUES=off (the column sums add)
        const char *epi = getenv("MINGPT_CUDA_EPILOGUES");
        const long per_layer = epi && strcmp(epi, "off") == 0 ? 0 : 4;
        if (emu_launch_count)
            assert_int_equal(emu_launch_count("accumulate_kernel") - acc0, per_layer * GSHAPE.n_layer * (n_micro - 1));
        unsetenv("MINGPT_CUDA_GRAPHS");
        assert_int_equal(rg.applied, rd.applied);
        assert_int_equal(rg.nonfinite, rd.nonfinite);
        assert_int_equal(g.opt.step, d.opt.step);
        assert_memory_equal(&g.ls.scale, &d.ls.scale, sizeof g.ls.scale);
        assert_int_equal(g.ls.good_steps, d.ls.good_steps);
        skipped += rg.applied <= 0;
        assert_memory_equal(&rg.loss, &rd.loss, sizeof rg.loss);
        if (rg.applied > 0 || !isnan(rg.norm)) assert_memory_equal(&rg.norm, &rd.norm, sizeof rg.norm);
    }
    // the case's point: steps that overflow skipped (on the device and on the host alike), else none
    if (c.init_scale > 0) assert_true(skipped >= 1);
    else assert_int_equal(skipped, 0);
    const size_t P = g.m.num_params;
    float *pg = malloc(P * sizeof(float)), *pd = malloc(P * sizeof(float));
    gpt_get_params(&g.m, pg);
    gpt_get_params(&d.m, pd);
    assert_bitwise("parameters after 4 steps (graphs vs MINGPT_CUDA_GRAPHS=0)", pg, pd, P);
    // one graph per kind of micro-step (a loss scale that changes keys graphs of its own); the last
    // micro-step's holds the optimizer tail
    if (!c.scaler) assert_int_equal(g.m.n_graphs, n_micro);
    for (int k = 0; k < (c.scaler ? 0 : g.m.n_graphs); k++) {
        assert_non_null(g.m.graphs[k].graph);
        assert_int_equal(g.m.graphs[k].grad_overwrite, k == 0);   // the first micro-step's came first
        assert_true((g.m.graphs[k].tail != NULL) == (k == n_micro - 1));
    }
    assert_int_equal(d.m.n_graphs, 0);
    print_message("    %s%s, clip %g, dropout %s, %d micro-step(s): 4 steps bitwise equal with and without graphs "
                  "(%d skipped)\n", c.dt == DTYPE_FP16 ? "fp16" : c.dt == DTYPE_BF16 ? "bf16" : "fp32",
                  c.scaler ? " + loss scaling" : "", c.clip, dropout ? "0.1" : "off", n_micro, skipped);
    free(pg); free(pd);
    adamw_free(&g.opt); gpt_free(&g.m); g.be->destroy(g.be);
    adamw_free(&d.opt); gpt_free(&d.m); d.be->destroy(d.be);
    comm->destroy(comm);
}

static void test_train_steps_with_graphs(void **state) {
    (void)state;
    train_steps_case(false, 1, FP32_CASE);
    train_steps_case(true, 1, FP32_CASE);
    train_steps_case(false, 2, FP32_CASE);
    train_steps_case(true, 2, FP32_CASE);
    // the clip active on every step (coef < 1); fp16 with loss scaling; its first two steps overflowing
    train_steps_case(true, 1, (StepCase){ DTYPE_FP32, 0, 0.0f, 1e-3 });
    train_steps_case(true, 2, (StepCase){ DTYPE_FP16, 1, 0.0f, 1.0 });
    train_steps_case(false, 1, (StepCase){ DTYPE_FP16, 1, 0x1p40f, 0.5 });
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], HOST_SYNC_CHILD) == 0) return host_sync_child();
    // the fused attention kernels wherever a shape allows them (MINGPT_CUDA_ATTENTION=fused; the
    // default is the cuBLAS path, kernels/backend.h), so this suite keeps checking both paths
    setenv("MINGPT_CUDA_ATTENTION", "fused", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encoder_backward_on_device),
        cmocka_unit_test(test_captured_micro_step),
        cmocka_unit_test(test_graph_table_keeps_the_recent),
        cmocka_unit_test(test_stale_graph_captured_again),
        cmocka_unit_test(test_dropout_steps_replayed),
        cmocka_unit_test(test_train_steps_with_graphs),
        cmocka_unit_test(test_host_sync_in_capture_is_reported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
