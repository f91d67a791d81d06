// tests/test_gpt_cost.c — model/gpt_cost.h: what a run costs before it is built.
//   * FLOPs per token against a count from the parameter table (every Linear weight: the
//     tensors AdamW decays) and against a shape worked out by hand;
//   * the memory estimate's parts against what gpt_build_with and adamw_init really allocate
//     (num_params, num_acts) in both activation layouts, and the low-precision weight copy;
//   * the estimate against the peak RSS of real training steps of a model large enough that
//     its memory dominates the process: within 10% + 24 MiB (the allowance covers the GEMM
//     libraries' buffers and oneDNN's JIT code, the batch and the allocator's slack; the
//     ratio is 1.03-1.12x here; skipped under AddressSanitizer, whose shadow memory is not the program's);
//   * a refused shape gives gpt_check_build's message.
#include "tests/test_util.h"

#include "dist/comm.h"
#include "model/gpt.h"
#include "model/gpt_cost.h"
#include "trainer/adamw.h"
#include "trainer/train_step.h"

// A /proc/self/status value in bytes ("VmRSS", "VmHWM").
static double status_bytes(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    assert_non_null(f);
    char line[256];
    long kib = -1;
    const size_t n = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0 && line[n] == ':') kib = strtol(line + n + 1, NULL, 10);
    fclose(f);
    assert_true(kib >= 0);
    return kib * 1024.0;
}

static void test_flops(void **state) {
    // by hand: L 1, C 4, V 3, T 2: N_linear = 12 C^2 + V C = 192 + 12 = 204; 6 N + 12 L C T = 1224 + 96
    GPTShape h = { .vocab_size = 3, .block_size = 2, .n_layer = 1, .n_head = 1, .n_embd = 4 };
    assert_true(gpt_flops_per_token(&h, 2) == 1320.0);
    // from the table: the Linear weights are the tensors with weight decay
    GPTShape s = { .vocab_size = 65, .block_size = 64, .n_layer = 3, .n_head = 4, .n_embd = 48 };
    const int nt = gpt_param_table(&s, NULL);
    ParamTensor *t = calloc((size_t)nt, sizeof *t);
    gpt_param_table(&s, t);
    double n_linear = 0;
    for (int i = 0; i < nt; i++)
        if (t[i].decay) n_linear += (double)t[i].numel;
    free(t);
    assert_true(gpt_flops_per_token(&s, 64) == 6 * n_linear + 12.0 * 3 * 48 * 64);
}

// The parts equal what building the model allocates.
static void check_parts(const GPTShape *s, int B, int T, bool ckpt, ComputeDtype dt) {
    Backend *be = backend_cpu_create(dt);
    GPTBuildOptions opt = { .activation_checkpointing = ckpt };
    GPTMemory mem;
    char err[256];
    assert_int_equal(gpt_memory_estimate(s, B, T, be, dt, &opt, &mem, err, sizeof err), 0);
    GPT m;
    assert_int_equal(gpt_build_with(&m, s, B, T, be, &opt, err, sizeof err), 0);
    assert_int_equal(mem.num_params, m.num_params);
    assert_int_equal(mem.params, 4 * m.num_params);
    assert_int_equal(mem.grads, 4 * m.num_params);
    assert_int_equal(mem.adamw, 8 * m.num_params);
    assert_int_equal(mem.acts, 4 * m.num_acts);
    assert_int_equal(mem.weight_cast, dt == DTYPE_FP32 ? 0 : 2 * m.num_params);
    assert_int_equal(mem.total, mem.params + mem.grads + mem.adamw + mem.acts + mem.weight_cast);
    gpt_free(&m);
    be->destroy(be);
}

static void test_parts(void **state) {
    GPTShape s = { .vocab_size = 65, .block_size = 32, .n_layer = 3, .n_head = 4, .n_embd = 32,
                   .embd_pdrop = 0.1f, .resid_pdrop = 0.1f, .attn_pdrop = 0.1f };
    check_parts(&s, 5, 32, false, DTYPE_FP32);
    check_parts(&s, 5, 17, true, DTYPE_FP32);
    check_parts(&s, 2, 32, false, DTYPE_BF16);
}

static void test_refused(void **state) {
    GPTShape s = { .vocab_size = 65, .block_size = 32, .n_layer = 1, .n_head = 3, .n_embd = 32 };
    Backend *be = backend_cpu_create(DTYPE_FP32);
    GPTMemory mem;
    char err[256] = "";
    assert_int_not_equal(gpt_memory_estimate(&s, 4, 32, be, DTYPE_FP32, NULL, &mem, err, sizeof err), 0);
    assert_non_null(strstr(err, "divisible"));
    s.n_head = 4;
    assert_int_not_equal(gpt_memory_estimate(&s, 4, 33, be, DTYPE_FP32, NULL, &mem, err, sizeof err), 0);
    assert_non_null(strstr(err, "block_size"));
    be->destroy(be);
}

// Peak RSS of training steps (model, gradients, AdamW, activations all touched) against the
// estimate. The first step calibrates the GEMMs (scratch operands, freed again); the peak is
// reset after it (/proc/self/clear_refs 5) and taken over the next steps.
static void step_small(const GPTShape *s, Backend *be, Comm *comm) {
    GPT m;
    AdamW opt;
    char err[256];
    int32_t x[4 * 32] = {0}, y[4 * 32] = {0};
    assert_int_equal(gpt_build_on(&m, s, 4, 32, be, err, sizeof err), 0);
    assert_int_equal(adamw_init(&opt, be, m.num_params), 0);
    LossScaler scaler;
    loss_scaler_init(&scaler, false);
    TrainStep ts = { .model = &m, .opt = &opt, .scaler = &scaler, .comm = comm, .lr = 1e-3f, .beta1 = 0.9f,
                     .beta2 = 0.95f, .eps = 1e-8f };
    MicroBatch mb = { x, y, 4 };
    StepResult res;
    assert_int_equal(train_step(&ts, &mb, 1, 4, 32, 7, 0, 0, &res), 0);
    adamw_free(&opt);
    gpt_free(&m);
}

static void test_rss(void **state) {
#ifdef __SANITIZE_ADDRESS__
    skip();   // AddressSanitizer's shadow memory and quarantine are not the program's memory
#endif
    GPTShape s = { .vocab_size = 65, .block_size = 128, .n_layer = 4, .n_head = 4, .n_embd = 256,
                   .embd_pdrop = 0.1f, .resid_pdrop = 0.1f, .attn_pdrop = 0.1f };
    const int B = 16, T = 128;
    Backend *be = backend_cpu_create(DTYPE_FP32);
    Comm *comm = comm_single_create();
    int32_t *x = malloc(sizeof(int32_t) * B * T), *y = malloc(sizeof(int32_t) * B * T);
    TestRng r = test_rng(3);
    for (int i = 0; i < B * T; i++) { x[i] = (int32_t)(test_next(&r) % 65); y[i] = (int32_t)(test_next(&r) % 65); }
    GPTMemory mem;
    char err[256];
    assert_int_equal(gpt_memory_estimate(&s, B, T, be, DTYPE_FP32, NULL, &mem, err, sizeof err), 0);
    // the libraries' own buffers (OpenBLAS's per-thread pool, oneDNN) come with the first
    // products: a small model's step starts them before the baseline is read
    GPTShape small = s;
    small.n_layer = 1;
    small.n_embd = 64;
    step_small(&small, be, comm);
    const double before = status_bytes("VmRSS");
    GPT m;
    AdamW opt;
    assert_int_equal(gpt_build_on(&m, &s, B, T, be, err, sizeof err), 0);
    assert_int_equal(adamw_init(&opt, be, m.num_params), 0);
    assert_int_equal(gpt_init_weights(&m, 1), 0);
    LossScaler scaler;
    loss_scaler_init(&scaler, false);
    TrainStep ts = { .model = &m, .opt = &opt, .scaler = &scaler, .comm = comm, .grad_clip = 1.0, .lr = 1e-3f,
                     .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f };
    MicroBatch mb = { x, y, B };
    StepResult res;
    assert_int_equal(train_step(&ts, &mb, 1, B, T, 7, 0, 0, &res), 0);
    FILE *f = fopen("/proc/self/clear_refs", "w");
    assert_non_null(f);
    assert_true(fputs("5", f) >= 0);
    assert_int_equal(fclose(f), 0);
    for (int step = 1; step < 3; step++) assert_int_equal(train_step(&ts, &mb, 1, B, T, 7, step, 0, &res), 0);
    const double used = status_bytes("VmHWM") - before, est = (double)mem.total;
    print_message("memory estimate %.1f MiB, peak RSS growth %.1f MiB (%.3fx)\n", est / 1048576, used / 1048576,
                  used / est);
    assert_true(est > 100.0 * 1048576);   // large enough that the model's memory dominates
    assert_true(fabs(used - est) <= 0.10 * est + 24.0 * 1048576);
    adamw_free(&opt);
    gpt_free(&m);
    comm->destroy(comm);
    be->destroy(be);
    free(x); free(y);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flops),
        cmocka_unit_test(test_parts),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_rss),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
