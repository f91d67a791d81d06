// bench/bench_train.c — mingpt's training-step, sgemm-peak and sampling benchmarks
// (driven by bench/run_bench.py through `make bench`; not part of `make test`).
//
//   bench_train train  --n_layer L --n_head H --n_embd C --block T --batch B [--vocab V]
//                      [--dropout P] [--warmup W] [--iters N] [--keep_gelu 1] [--checkpointing 1]
//       One training iteration = the trainer's own train_step (trainer/train_step.h): zero_grad,
//       forward with loss, backward, global-norm clip (1.0), AdamW (minGPT's decay groups). Random
//       tokens; W untimed warm-up iterations, then N timed ones. Prints one RESULT line:
//       median ms/iter, tokens/s, model FLOPs per iteration, peak RSS (VmHWM) and the
//       memory the config needs (params + grads + AdamW state + activations); gemm_share, the
//       part of the timed iterations spent in the library GEMMs (kernels/cpu/gemm.h:
//       cpu_gemm_totals), and gemm_gflops, their own speed there.
//       --keep_gelu 1 removes gelu_forward from the backend, so the model keeps every block's
//       GELU output instead of recomputing it in the backward (the trade-off, measured).
//       --checkpointing 1 builds the model with activation checkpointing (model/gpt.h:
//       trainer_config.activation_checkpointing), so time and peak RSS compare with a run without.
//       --profile 1 times every Backend op of the timed iterations (kernels/backend_profile.h) and
//       prints, after the RESULT line, one "PROF" line per op (matmuls split by role): calls per
//       step, ms per step, share of the step, GEMM ms; then the step's time outside every op
//       ("(rest)") and the step ("(step)"). docs/performance.md has how to read it.
//       --losses 1 prints "LOSS it=I loss=X" (X exact, C's %a) for every iteration, warm-up included.
//   bench_train sgemm  [--n N] [--reps R]
//       GFLOP/s of every GEMM implementation (kernels/cpu/gemm.h: OpenBLAS threaded and split,
//       dnnl_sgemm, oneDNN's matmul, MKL and oneDNN 3 when present) on N x N x N with all OpenMP threads; the
//       best is the MFU peak. Then a "BF16GEMM" line: bf16 products of that size on oneDNN's
//       matmul, on MKL's cblas_gemm_bf16bf16f32 and on oneDNN 3's matmul (0 where unavailable).
//   bench_train train ... [--amp fp32|bf16|fp16] runs the backend's matmuls in that dtype, and
//       prints after the RESULT line one GEMMCLASS line per shape class of the dispatch table.
//   bench_train sample --n_layer L --n_head H --n_embd C --block T [--vocab V] [--tokens N]
//       chars/s of KV-cache sampling (model/gpt.h: gpt_infer_next, the path of `mingpt sample`) from a
//       random-init model on the CPU backend.
//   bench_train init   --n_layer L --n_head H --n_embd C --block T --vocab V --seed S --out P
//       Writes gpt_init_weights' parameters: P.bin (fp32, flat layout) and P.txt (one line
//       per tensor: name rows cols offset), so bench/bench_quality.py starts PyTorch from
//       mingpt's exact initial weights.
//
// Model FLOPs per token: gpt_flops_per_token (model/gpt_cost.h, nanoGPT / PaLM convention).
#include <math.h>
#include <mcheck.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/clock.h"
#include "kernels/backend_profile.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm.h"
#include "model/gpt.h"
#include "model/gpt_cost.h"
#include "trainer/adamw.h"
#include "trainer/train_step.h"

// Peak resident set size in KiB (VmHWM of /proc/self/status).
static long peak_rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0) { kib = strtol(line + 6, NULL, 10); break; }
    fclose(f);
    return kib;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    int n_layer, n_head, n_embd, block, batch, vocab, warmup, iters, n, reps, tokens;
    double dropout;
    long seed;
    const char *out;
    int keep_gelu;   // 1: the backend without gelu_forward, so the model keeps GELU outputs
    int checkpointing;   // 1: activation checkpointing (recompute each block in the backward)
    const char *amp; // "fp32" (default), "bf16" or "fp16": the backend's matmul dtype
    int profile;     // 1: time every Backend op (kernels/backend_profile.h)
    int losses;      // 1: print every iteration's loss exactly
} Args;

static int parse(int argc, char **argv, Args *a) {
    *a = (Args){ 4, 4, 128, 64, 12, 65, 3, 20, 4096, 3, 2000, 0.0, 1337, NULL, 0, 0, "fp32", 0, 0 };
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--n_layer")) a->n_layer = atoi(v);
        else if (!strcmp(k, "--n_head")) a->n_head = atoi(v);
        else if (!strcmp(k, "--n_embd")) a->n_embd = atoi(v);
        else if (!strcmp(k, "--block")) a->block = atoi(v);
        else if (!strcmp(k, "--batch")) a->batch = atoi(v);
        else if (!strcmp(k, "--vocab")) a->vocab = atoi(v);
        else if (!strcmp(k, "--warmup")) a->warmup = atoi(v);
        else if (!strcmp(k, "--iters")) a->iters = atoi(v);
        else if (!strcmp(k, "--n")) a->n = atoi(v);
        else if (!strcmp(k, "--reps")) a->reps = atoi(v);
        else if (!strcmp(k, "--tokens")) a->tokens = atoi(v);
        else if (!strcmp(k, "--dropout")) a->dropout = atof(v);
        else if (!strcmp(k, "--seed")) a->seed = atol(v);
        else if (!strcmp(k, "--out")) a->out = v;
        else if (!strcmp(k, "--keep_gelu")) a->keep_gelu = atoi(v);
        else if (!strcmp(k, "--checkpointing")) a->checkpointing = atoi(v);
        else if (!strcmp(k, "--amp")) a->amp = v;
        else if (!strcmp(k, "--profile")) a->profile = atoi(v);
        else if (!strcmp(k, "--losses")) a->losses = atoi(v);
        else { fprintf(stderr, "bench_train: unknown option %s\n", k); return 2; }
    }
    return 0;
}

static GPTShape shape_of(const Args *a) {
    GPTShape s = { a->vocab, a->block, a->n_layer, a->n_head, a->n_embd,
                   (float)a->dropout, (float)a->dropout, (float)a->dropout };
    return s;
}

// One line per GEMM shape class the run calibrated or found in the cache (kernels/cpu/gemm.h).
static void print_gemm_classes(void) {
    GemmClass c[128];
    const int n = cpu_gemm_classes(c, 128);
    for (int i = 0; i < n && i < 128; i++) {
        printf("GEMMCLASS op=%c%c%s%s class=2^%d:2^%d:2^%d timed=%dx%dx%d threads=%d impl=%s", c[i].ta ? 'T' : 'N',
               c[i].tb ? 'T' : 'N', c[i].beta0 ? ",beta=0" : "", c[i].bf16 ? ",bf16" : "", c[i].m_log2, c[i].n_log2, c[i].k_log2, c[i].m, c[i].n,
               c[i].k, c[i].threads, cpu_gemm_impl_name(c[i].impl));
        for (int k = 0; k < GEMM_N_IMPL; k++) printf(" %s=%.1f", cpu_gemm_impl_name(k), c[i].gflops[k]);
        printf("\n");
    }
}

static int bench_train(const Args *a) {
    char err[512];
    GPTShape s = shape_of(a);
    const int B = a->batch, T = a->block, C = a->n_embd, L = a->n_layer, V = a->vocab;
    GPT m;
    const ComputeDtype dt = !strcmp(a->amp, "bf16") ? DTYPE_BF16 : !strcmp(a->amp, "fp16") ? DTYPE_FP16 : DTYPE_FP32;
    Backend *be = backend_cpu_create(dt);
    if (!be) { fprintf(stderr, "bench_train: out of memory\n"); return 1; }
    if (a->keep_gelu) be->gelu_forward = NULL;
    if (a->profile && backend_profile_install(be, err, sizeof err)) { fprintf(stderr, "bench_train: %s\n", err); return 1; }
    const GPTBuildOptions build = { .activation_checkpointing = a->checkpointing != 0 };
    if (gpt_build_with(&m, &s, B, T, be, &build, err, sizeof err)) { fprintf(stderr, "bench_train: %s\n", err); return 1; }
    gpt_init_weights(&m, 1337);
    AdamW opt;
    if (adamw_init(&opt, m.be, m.num_params)) { fprintf(stderr, "bench_train: out of memory\n"); return 1; }

    // A few distinct random batches, cycled (the step's cost does not depend on the data).
    enum { NB = 4 };
    int32_t *x = malloc(sizeof(int32_t) * NB * B * T), *y = malloc(sizeof(int32_t) * NB * B * T);
    uint64_t r = 88172645463325252ULL;
    for (long i = 0; i < (long)NB * B * T; i++) {
        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
        x[i] = (int32_t)(r % (uint64_t)V);
        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
        y[i] = (int32_t)(r % (uint64_t)V);
    }
    double *ms = malloc(sizeof(double) * (a->iters > 0 ? a->iters : 1));
    LossScaler scaler;
    loss_scaler_init(&scaler, 0);
    Comm *comm = comm_single_create();
    if (!comm) { fprintf(stderr, "bench_train: out of memory\n"); return 1; }
    TrainStep ts = { .model = &m, .opt = &opt, .scaler = &scaler, .comm = comm, .buckets = NULL, .grad_clip = 1.0,
                     .lr = 1e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f };
    float loss = 0.0f;
    double gemm_s0 = 0, gemm_f0 = 0, gemm_s1 = 0, gemm_f1 = 0;
    for (int it = 0; it < a->warmup + a->iters; it++) {
        if (it == a->warmup) cpu_gemm_totals(&gemm_s0, &gemm_f0);
        if (it == a->warmup && a->profile) backend_profile_reset();
        // With MALLOC_TRACE=file and LD_PRELOAD=libc_malloc_debug.so, every malloc/free of the
        // timed iterations is logged (the check that the loop allocates nothing).
        if (it == a->warmup) mtrace();
        const int32_t *bx = x + (long)(it % NB) * B * T, *by = y + (long)(it % NB) * B * T;
        const double t0 = now_s();
        // the trainer's step (trainer/train_step.h): one micro-batch, one process
        MicroBatch mb = { bx, by, B };
        StepResult res;
        if (train_step(&ts, &mb, 1, B, T, 1337, (uint64_t)it, 0, &res)) return 1;
        loss = (float)res.loss;
        if (a->losses) printf("LOSS it=%d loss=%a\n", it, res.loss);
        const double t1 = now_s();
        if (it >= a->warmup) ms[it - a->warmup] = 1e3 * (t1 - t0);
    }
    muntrace();
    cpu_gemm_totals(&gemm_s1, &gemm_f1);
    double total_ms = 0;
    for (int i = 0; i < a->iters; i++) total_ms += ms[i];
    qsort(ms, a->iters, sizeof *ms, cmp_double);
    const double med = a->iters % 2 ? ms[a->iters / 2] : 0.5 * (ms[a->iters / 2 - 1] + ms[a->iters / 2]);

    const double flops_tok = gpt_flops_per_token(&m.shape, T);
    const double flops_iter = flops_tok * B * T;
    // Memory the config needs: params, grads, AdamW m and v (4 x num_params floats) and the
    // activation buffer gpt_build carves for (B,T) (forward activations + backward scratch).
    const double need_bytes = 4.0 * (4.0 * (double)m.num_params + (double)m.num_acts);
    printf("RESULT train L=%d H=%d C=%d T=%d B=%d V=%d dropout=%g checkpointing=%d threads=%d params=%zu "
           "ms_median=%.3f ms_min=%.3f ms_max=%.3f tok_s=%.1f flops_iter=%.6e gflops=%.2f "
           "rss_kib=%ld need_kib=%.0f acts_floats=%zu loss=%.4f amp=%s lowp_fast=%d "
           "gemm_share=%.4f gemm_gflops=%.2f\n",
           L, a->n_head, C, T, B, V, a->dropout, a->checkpointing, omp_get_max_threads(), m.num_params, med, ms[0],
           ms[a->iters - 1], B * T / (med * 1e-3), flops_iter, flops_iter / (med * 1e-3) / 1e9,
           peak_rss_kib(), need_bytes / 1024.0, m.num_acts, loss, a->amp,
           dt != DTYPE_FP32 && backend_cpu_low_precision_is_fast(be),
           total_ms > 0 ? 1e3 * (gemm_s1 - gemm_s0) / total_ms : 0.0,
           gemm_s1 > gemm_s0 ? (gemm_f1 - gemm_f0) / (gemm_s1 - gemm_s0) / 1e9 : 0.0);
    print_gemm_classes();
    if (a->profile) {
        backend_profile_print(stdout, a->iters, 1e-3 * total_ms);
        backend_profile_uninstall();
    }
    free(ms); free(x); free(y);
    comm->destroy(comm);
    adamw_free(&opt);
    gpt_free(&m);
    be->destroy(be);
    return 0;
}

// Best GFLOP/s of n x n x n on every GEMM implementation available here (kernels/cpu/gemm.h),
// all OpenMP threads; "best" is the MFU peak.
static int bench_sgemm(const Args *a) {
    const int n = a->n;
    float *A = malloc(sizeof(float) * n * n), *Bm = malloc(sizeof(float) * n * n),
          *Cm = malloc(sizeof(float) * n * n);
    for (long i = 0; i < (long)n * n; i++) { A[i] = (float)(i % 7) * 0.1f; Bm[i] = (float)(i % 5) * 0.1f; Cm[i] = 0; }
    double g[GEMM_N_IMPL] = {0}, best_g = 0;
    int best = GEMM_OPENBLAS;
    for (int impl = 0; impl < GEMM_N_IMPL; impl++) {
        if (cpu_sgemm_with(impl, 0, 0, n, n, n, A, n, Bm, n, 0.0f, Cm, n)) continue;   // unavailable
        double t = 1e30;
        for (int r = 0; r < a->reps; r++) {
            const double t0 = now_s();
            cpu_sgemm_with(impl, 0, 0, n, n, n, A, n, Bm, n, 0.0f, Cm, n);
            const double dt = now_s() - t0;
            if (dt < t) t = dt;
        }
        g[impl] = 2.0 * n * (double)n * n / t / 1e9;
        if (g[impl] > best_g) { best_g = g[impl]; best = impl; }
    }
    char desc[512];
    cpu_gemm_describe(desc, sizeof desc);
    printf("GEMM %s\n", desc);
    printf("RESULT sgemm library=%s openblas_core=%s n=%d threads=%d gflops=%.1f", cpu_gemm_impl_name(best),
           openblas_core(), n, omp_get_max_threads(), best_g);
    for (int impl = 0; impl < GEMM_N_IMPL; impl++) printf(" %s=%.1f", cpu_gemm_impl_name(impl), g[impl]);
    printf("\n");
    // bf16 products (bf16 A and B, fp32 C) of the same size: oneDNN's matmul (what bf16 training
    // uses, where the CPU has bf16 hardware) against MKL's cblas_gemm_bf16bf16f32 and oneDNN 3's
    // matmul (when present); 0 = unavailable.
    uint16_t *Ab = malloc(2 * (size_t)n * n), *Bb = malloc(2 * (size_t)n * n);
    for (long i = 0; i < (long)n * n; i++) { Ab[i] = bf16_from_float(A[i]); Bb[i] = bf16_from_float(Bm[i]); }
    const int libs16[3] = { GEMM_ONEDNN_MATMUL, GEMM_MKL, GEMM_ONEDNN3 };
    double gb[3] = {0};
    for (int lib = 0; lib < 3; lib++) {
        double t = 1e30;
        for (int r = 0; r <= a->reps; r++) {   // the first one warms up (primitive creation, JIT)
            const double t0 = now_s();
            if (cpu_gemm_bf16_with(libs16[lib], 0, 0, n, n, n, Ab, n, Bb, n, 0.0f, Cm, n)) break;
            const double dt = now_s() - t0;
            if (r > 0 && dt < t) t = dt;
        }
        if (t < 1e30) gb[lib] = 2.0 * n * (double)n * n / t / 1e9;
    }
    printf("BF16GEMM n=%d threads=%d onednn-matmul=%.1f mkl=%.1f onednn3=%.1f\n", n, omp_get_max_threads(), gb[0], gb[1],
           gb[2]);
    free(Ab); free(Bb);
    free(A); free(Bm); free(Cm);
    return 0;
}


// chars/s of sampling: gpt_infer_next on a growing context (what `mingpt sample` does per
// character), the next token drawn from softmax(logits) with a fixed xorshift stream.
//   in-window: from a 1-token prompt up to block_size tokens (the cache only grows), repeated
//              until 2000 tokens are drawn;
//   long:      one sequence of --tokens tokens from a 1-token prompt; past block_size every
//              character slides the window, which minGPT's cropping makes a full-window
//              recompute.
typedef struct { uint64_t r; double *pr; int V; } Draw;
static int32_t draw(Draw *d, const float *logits) {
    double maxv = logits[0], sum = 0;
    for (int v = 1; v < d->V; v++) maxv = logits[v] > maxv ? logits[v] : maxv;
    for (int v = 0; v < d->V; v++) { d->pr[v] = exp(logits[v] - maxv); sum += d->pr[v]; }
    d->r ^= d->r << 13; d->r ^= d->r >> 7; d->r ^= d->r << 17;
    double u = (d->r >> 11) / 9007199254740992.0 * sum, acc = 0;
    for (int v = 0; v < d->V; v++) { acc += d->pr[v]; if (u < acc) return v; }
    return d->V - 1;
}

static int bench_sample(const Args *a) {
    char err[512];
    GPTShape s = shape_of(a);
    s.embd_pdrop = s.resid_pdrop = s.attn_pdrop = 0.0f;
    GPT m;
    if (gpt_build(&m, &s, 1, 1, err, sizeof err)) { fprintf(stderr, "bench_train: %s\n", err); return 1; }
    gpt_init_weights(&m, 1337);
    GPTInfer inf;
    if (gpt_infer_begin(&inf, &m, err, sizeof err)) { fprintf(stderr, "bench_train: %s\n", err); return 1; }
    const int V = a->vocab, T = a->block, n = a->tokens;
    const int n_ctx = (n > T ? n : T) + 1;
    int32_t *ctx = malloc(sizeof(int32_t) * n_ctx);
    Draw d = { 88172645463325252ULL, malloc(sizeof(double) * V), V };
    // in-window
    long drawn = 0;
    double t0 = now_s();
    for (int rep = 0; drawn < 2000; rep++) {
        ctx[0] = rep % V;
        for (long len = 1; len < T; len++, drawn++) ctx[len] = draw(&d, gpt_infer_next(&inf, ctx, len));
    }
    const double in_cs = drawn / (now_s() - t0);
    // long
    ctx[0] = 0;
    t0 = now_s();
    for (long len = 1; len <= n; len++) ctx[len] = draw(&d, gpt_infer_next(&inf, ctx, len));
    const double long_cs = n / (now_s() - t0);
    printf("RESULT sample L=%d H=%d C=%d T=%d V=%d threads=%d tokens=%d chars_s=%.1f "
           "in_window_tokens=%ld in_window_chars_s=%.1f\n", a->n_layer, a->n_head, a->n_embd, T, V,
           omp_get_max_threads(), n, long_cs, drawn, in_cs);
    free(ctx); free(d.pr);
    gpt_infer_end(&inf);
    gpt_free(&m);
    return 0;
}

static int dump_init(const Args *a) {
    char err[512], path[4096];
    if (!a->out) { fprintf(stderr, "bench_train init: --out PATH is required\n"); return 2; }
    GPTShape s = shape_of(a);
    GPT m;
    if (gpt_build(&m, &s, 1, 1, err, sizeof err)) { fprintf(stderr, "bench_train: %s\n", err); return 1; }
    gpt_init_weights(&m, (uint64_t)a->seed);
    snprintf(path, sizeof path, "%s.bin", a->out);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(m.params_memory, sizeof(float), m.num_params, f) != m.num_params || fclose(f)) {
        fprintf(stderr, "bench_train: cannot write %s\n", path);
        return 1;
    }
    snprintf(path, sizeof path, "%s.txt", a->out);
    f = fopen(path, "w");
    if (!f) { fprintf(stderr, "bench_train: cannot write %s\n", path); return 1; }
    for (int k = 0; k < m.n_tensors; k++)
        fprintf(f, "%s %d %d %zu\n", m.tensors[k].name, m.tensors[k].rows, m.tensors[k].cols, m.tensors[k].offset);
    fclose(f);
    gpt_free(&m);
    return 0;
}

int main(int argc, char **argv) {
    Args a;
    if (argc < 2 || parse(argc, argv, &a)) {
        fprintf(stderr, "usage: bench_train train|sgemm|sample|init [--key value ...]\n");
        return 2;
    }
    if (!strcmp(argv[1], "train")) return bench_train(&a);
    if (!strcmp(argv[1], "sgemm")) return bench_sgemm(&a);
    if (!strcmp(argv[1], "sample")) return bench_sample(&a);
    if (!strcmp(argv[1], "init")) return dump_init(&a);
    fprintf(stderr, "bench_train: unknown mode %s\n", argv[1]);
    return 2;
}
