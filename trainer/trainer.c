// trainer/trainer.c — the training loop, readable top-down:
//   load data -> split -> build model -> resume or init -> epochs of iterations
//   (forward, backward, clip, AdamW) -> evaluate -> snapshot.
#include "trainer/trainer.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "data/char_dataset.h"
#include "data/sampler.h"
#include "kernels/backend.h"
#include "kernels/loss_scaler.h"
#include "model/gpt.h"
#include "trainer/adamw.h"
#include "trainer/log.h"
#include "trainer/snapshot.h"

#define ERRLEN 2048

// ============================================================================
// Interruption: the handler only sets a flag; the loop saves and stops.
// ============================================================================
static volatile sig_atomic_t g_stop_signal = 0;
static void on_signal(int sig) { g_stop_signal = sig; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// ============================================================================
// Batches: rows of a batch are the windows picked by the sampler's indices.
// ============================================================================
typedef struct {
    int32_t *x, *y;   // (B,T)
} Batch;

// Fills rows 0..n-1 of b with the windows windows[order[first + r]].
static void make_batch(Batch *b, const CharDataset *ds, const long *windows, const long *order,
                       long first, int n, int T) {
    for (int r = 0; r < n; r++)
        chardataset_window(ds, windows[order[first + r]], b->x + (long)r * T, b->y + (long)r * T);
}

// ============================================================================
// Evaluation: mean token loss over the first max_batches batches of the test
// split (all when 0), dropout off. The order is the test sampler's epoch 0, so
// every evaluation sees the same batches.
// ============================================================================
static double evaluate(GPT *m, Batch *b, const CharDataset *ds, const DataSplit *split,
                       const long *test_order, long n_order, int B, int T, long max_batches) {
    long n_batches = (n_order + B - 1) / B;
    if (max_batches > 0 && max_batches < n_batches) n_batches = max_batches;
    double sum = 0.0;
    long count = 0;
    for (long k = 0; k < n_batches; k++) {
        int n = (int)((k + 1) * B <= n_order ? B : n_order - k * B);
        make_batch(b, ds, split->test, test_order, k * B, n, T);
        float loss = gpt_forward(m, b->x, b->y, n, T, false, 0, 0);
        sum += (double)loss * m->n_valid;
        count += m->n_valid;
    }
    return count ? sum / count : NAN;
}

// ============================================================================
// Snapshot helpers
// ============================================================================
typedef struct {
    long epochs_run, iter_in_epoch, iter_num;
    uint64_t seed;
    LossScaler scaler;      // fp16 dynamic loss scale (disabled: scale 1)
} Progress;

// A host-readable view of n floats of backend memory: the buffer itself when the
// backend's memory is host memory, else a downloaded copy in *tmp (caller frees).
static const float *host_view(Backend *be, const float *p, size_t n, float **tmp) {
    *tmp = NULL;
    if (be->host_memory) return p;
    *tmp = malloc(n * sizeof(float));
    if (*tmp) be->download(be, *tmp, p, n * sizeof(float));
    return *tmp;
}

static int save_snapshot(const Config *cfg, const GPT *m, const AdamW *opt, const CharDataset *ds,
                         const Progress *pr) {
    char err[ERRLEN];
    char *yaml = config_to_yaml(cfg);
    float *tp, *tm, *tv;
    const float *params = host_view(m->be, m->params_memory, m->num_params, &tp);
    const float *adam_m = host_view(m->be, opt->m, m->num_params, &tm);
    const float *adam_v = host_view(m->be, opt->v, m->num_params, &tv);
    int rc = 1;
    if (!yaml || !params || !adam_m || !adam_v) {
        snprintf(err, sizeof err, "out of memory while saving a snapshot");
    } else {
        Snapshot s = {
            .config_yaml = yaml, .vocab = ds->itos, .vocab_size = ds->vocab_size, .shape = m->shape,
            .num_params = m->num_params, .params = (float *)params, .adam_m = (float *)adam_m,
            .adam_v = (float *)adam_v, .adam_step = opt->step, .epochs_run = pr->epochs_run,
            .iter_in_epoch = pr->iter_in_epoch, .iter_num = pr->iter_num, .seed = pr->seed,
            .loss_scale = pr->scaler.scale, .scaler_good_steps = pr->scaler.good_steps,
        };
        rc = snapshot_save(cfg->trainer.snapshot_path, &s, err, sizeof err);
    }
    free(yaml); free(tp); free(tm); free(tv);
    if (rc) { log_error("mingpt: error: %s\n", err); return 1; }
    log_info("Snapshot saved at epoch %ld, iteration %ld: %s\n", pr->epochs_run, pr->iter_num,
           cfg->trainer.snapshot_path);
    fflush(stdout);
    return 0;
}

// Checks that a snapshot belongs to this config's model and vocabulary.
static int check_snapshot_matches(const Snapshot *s, const GPTShape *shape, const CharDataset *ds,
                                  const char *path) {
    struct { const char *key; long cfg, snap; } dims[] = {
        {"gpt_config.n_layer", shape->n_layer, s->shape.n_layer},
        {"gpt_config.n_head", shape->n_head, s->shape.n_head},
        {"gpt_config.n_embd", shape->n_embd, s->shape.n_embd},
        {"data_config.block_size", shape->block_size, s->shape.block_size},
        {"vocabulary size", shape->vocab_size, s->shape.vocab_size},
    };
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i].cfg != dims[i].snap) {
            log_error("mingpt: error: snapshot '%s' does not match the config: %s is %ld here but %ld "
                    "in the snapshot (delete the snapshot or set trainer_config.snapshot_path to start a new run)\n",
                    path, dims[i].key, dims[i].cfg, dims[i].snap);
            return 1;
        }
    if (memcmp(s->vocab, ds->itos, (size_t)ds->vocab_size * 4) != 0) {
        log_error("mingpt: error: snapshot '%s' does not match the data: the vocabulary differs "
                "(data_config.path or data_config.truncate changed?)\n", path);
        return 1;
    }
    return 0;
}

static bool file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

// ============================================================================
// The run
// ============================================================================
int trainer_run(const Config *cfg, TrainResult *res) {
    const DataConfig *dc = &cfg->data;
    const TrainerConfig *tc = &cfg->trainer;
    const OptimizerConfig *oc = &cfg->optim;
    char err[ERRLEN];
    int rc = EXIT_RUNTIME;
    TrainResult r = { NAN, NAN, 0, 0, 0, 0 };
    const double t_start = now_s();

    CharDataset ds = {0};
    DataSplit split = {0};
    GPT model = {0};
    AdamW opt = {0};
    Snapshot snap = {0};
    Batch batch = {0};
    long *train_order = NULL, *test_order = NULL, *scratch = NULL;

    // ---- backend. use_amp: matmul inputs in amp_dtype (fp16 with a dynamic loss scaler),
    // fp32 master weights, as torch.autocast + GradScaler.
    const ComputeDtype dtype = !tc->use_amp ? DTYPE_FP32
                             : strcmp(tc->amp_dtype, "bfloat16") == 0 ? DTYPE_BF16 : DTYPE_FP16;
    Backend *be = backend_create(tc->device, dtype, err, sizeof err);
    if (!be) { log_error("mingpt: error: %s\n", err); return EXIT_USAGE; }
    log_info("Backend: %s, %s\n", be->name,
             dtype == DTYPE_FP32 ? "fp32"
             : dtype == DTYPE_BF16 ? "mixed precision (bfloat16 matmul inputs, fp32 master weights)"
             : "mixed precision (float16 matmul inputs, fp32 master weights, dynamic loss scaling)");

    // ---- data
    if (chardataset_load(&ds, dc->path, dc->truncate, dc->block_size, err, sizeof err)) {
        log_error("mingpt: error: %s\n", err);
        be->destroy(be);
        return EXIT_USAGE;
    }
    log_info("Data has %ld characters, %d unique.\n", ds.n, ds.vocab_size);

    // ---- resume state (its seed governs the split, the batch order and dropout)
    const char *snap_path = tc->snapshot_path;
    bool resume = snap_path[0] && file_exists(snap_path);
    Progress pr = { .seed = tc->seed };
    loss_scaler_init(&pr.scaler, dtype == DTYPE_FP16);
    if (resume) {
        if (snapshot_load(snap_path, &snap, err, sizeof err)) {
            log_error("mingpt: error: %s\n", err);
            rc = EXIT_RUNTIME;
            goto out;
        }
        pr.epochs_run = snap.epochs_run;
        pr.iter_in_epoch = snap.iter_in_epoch;
        pr.iter_num = snap.iter_num;
        pr.seed = snap.seed;
        loss_scaler_restore(&pr.scaler, snap.loss_scale, snap.scaler_good_steps);
        if (snap.seed != tc->seed)
            log_info("note: resuming with the snapshot's seed %llu (the config says %llu)\n",
                   (unsigned long long)snap.seed, (unsigned long long)tc->seed);
    }

    if (datasplit_make(&split, &ds, dc->split, dc->train_split, pr.seed, err, sizeof err)) {
        log_error("mingpt: error: %s\n", err);
        rc = EXIT_USAGE;
        goto out;
    }
    log_info("Split (%s): %ld train windows, %ld test windows of %d characters\n", dc->split,
           split.n_train, split.n_test, dc->block_size);

    // ---- model and optimizer
    const int B = tc->batch_size, T = dc->block_size;
    GPTShape shape = {
        .vocab_size = ds.vocab_size, .block_size = T, .n_layer = cfg->gpt.n_layer,
        .n_head = cfg->gpt.n_head, .n_embd = cfg->gpt.n_embd, .embd_pdrop = (float)cfg->gpt.embd_pdrop,
        .resid_pdrop = (float)cfg->gpt.resid_pdrop, .attn_pdrop = (float)cfg->gpt.attn_pdrop,
    };
    if (gpt_build_on(&model, &shape, B, T, be, err, sizeof err)) {
        log_error("mingpt: error: %s\n", err);
        rc = EXIT_USAGE;
        goto out;
    }
    log_info("number of parameters: %.2fM (%zu)\n", model.num_params / 1e6, model.num_params);
    if (adamw_init(&opt, be, model.num_params)) { log_error("mingpt: error: out of memory\n"); goto out; }
    if (resume) {
        if (check_snapshot_matches(&snap, &shape, &ds, snap_path)) { rc = EXIT_USAGE; goto out; }
        gpt_set_params(&model, snap.params);
        if (snap.adam_m && snap.adam_v) {
            be->upload(be, opt.m, snap.adam_m, model.num_params * sizeof(float));
            be->upload(be, opt.v, snap.adam_v, model.num_params * sizeof(float));
            opt.step = snap.adam_step;
        }
        log_info("Resuming training from snapshot at Epoch %ld, iteration %ld\n", pr.epochs_run, pr.iter_num);
        snapshot_free(&snap);
    } else {
        log_info("Snapshot not found. Training model from scratch\n");
        gpt_init_weights(&model, pr.seed);
    }

    // ---- samplers and batch buffers
    DistributedSampler train_sampler, test_sampler;
    dsampler_init(&train_sampler, split.n_train, 1, 0, true, pr.seed, false);
    dsampler_init(&test_sampler, split.n_test, 1, 0, true, pr.seed, false);
    long scratch_n = split.n_train > split.n_test ? split.n_train : split.n_test;
    train_order = malloc(sizeof(long) * (train_sampler.total_size + 1));
    test_order = malloc(sizeof(long) * (test_sampler.total_size + 1));
    scratch = malloc(sizeof(long) * (scratch_n + 1) * 2);
    batch.x = malloc(sizeof(int32_t) * B * T);
    batch.y = malloc(sizeof(int32_t) * B * T);
    if (!train_order || !test_order || !scratch || !batch.x || !batch.y) {
        log_error("mingpt: error: out of memory\n");
        goto out;
    }
    const long n_test_order = dsampler_indices(&test_sampler, test_order, scratch);
    const long iters_per_epoch = (train_sampler.num_samples + B - 1) / B;
    long total_iters = iters_per_epoch * tc->max_epochs;
    if (tc->max_iters > 0 && tc->max_iters < total_iters) total_iters = tc->max_iters;
    log_info("Training: %ld iterations per epoch, %d epochs, %ld iterations in all, batch %d x %d tokens\n",
           iters_per_epoch, tc->max_epochs, total_iters, B, T);
    fflush(stdout);

    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    g_stop_signal = 0;

    // ---- epochs
    double tokens = 0, train_time = 0;
    bool done = pr.iter_num >= total_iters || pr.epochs_run >= tc->max_epochs;
    if (done) {
        log_info("Nothing to train: the snapshot already has %ld iterations\n", pr.iter_num);
        r.test_loss = evaluate(&model, &batch, &ds, &split, test_order, n_test_order, B, T, tc->eval_iters);
        log_info("epoch %ld | iter %ld | test loss %.4f\n", pr.epochs_run, pr.iter_num, r.test_loss);
    }
    while (!done) {
        const long epoch = pr.epochs_run + 1;   // 1-based, as in the tutorial
        dsampler_set_epoch(&train_sampler, epoch);
        const long n_order = dsampler_indices(&train_sampler, train_order, scratch);
        double t_log = now_s();
        long iters_since_log = 0;
        double tokens_since_log = 0;
        for (long k = pr.iter_in_epoch; k < iters_per_epoch; k++) {
            if (pr.iter_num >= total_iters) { done = true; break; }
            const double t0 = now_s();
            const int n = (int)((k + 1) * B <= n_order ? B : n_order - k * B);
            make_batch(&batch, &ds, split.train, train_order, k * B, n, T);

            // forward, backward, clip, step
            const double lr = lr_at(oc, pr.iter_num);
            model.loss_scale = loss_scaler_scale(&pr.scaler);
            const float loss = gpt_forward(&model, batch.x, batch.y, n, T, true, pr.seed, (uint64_t)pr.iter_num);
            gpt_zero_grad(&model);
            gpt_backward(&model);
            // unscale (fp16), overflow check, global norm, clip; then step unless it overflowed
            double norm = 0.0;
            const int apply = loss_scaler_unscale_clip(&pr.scaler, be, model.grads_memory, model.num_params,
                                                       tc->grad_norm_clip, &norm);
            if (apply > 0) {
                adamw_step(&opt, model.params_memory, model.grads_memory, model.tensors, model.n_tensors,
                           (float)lr, (float)oc->betas[0], (float)oc->betas[1], (float)oc->eps,
                           (float)oc->weight_decay);
            } else if (apply == 0) {
                log_info("iter %ld: gradient overflow, step skipped; loss scale now %g\n",
                         pr.iter_num + 1, (double)pr.scaler.scale);
            } else {
                log_error("mingpt: error: gradients are not finite for %d steps in a row at iteration %ld; "
                          "stopping (the last snapshot is intact)\n", LOSS_SCALER_MAX_SKIPS, pr.iter_num + 1);
                goto out;
            }
            pr.iter_num++;
            pr.iter_in_epoch = k + 1;
            r.iters_this_run++;
            r.final_train_loss = loss;
            tokens += (double)n * T;
            tokens_since_log += (double)n * T;
            iters_since_log++;
            train_time += now_s() - t0;

            if (!isfinite(loss)) {
                log_error("mingpt: error: the training loss is %f at iteration %ld; stopping "
                        "(the last snapshot is intact)\n", loss, pr.iter_num);
                goto out;
            }
            if (pr.iter_num % tc->log_every == 0 || pr.iter_num == 1 || pr.iter_num == total_iters) {
                double dt = now_s() - t_log;
                log_info("epoch %ld | iter %ld/%ld | loss %.4f | lr %.2e | norm %.3f | %.1f ms/iter | %.0f tok/s\n",
                       epoch, pr.iter_num, total_iters, loss, lr, norm, 1e3 * dt / iters_since_log,
                       tokens_since_log / dt);
                fflush(stdout);
                t_log = now_s();
                iters_since_log = 0;
                tokens_since_log = 0;
            }
            if (tc->eval_every > 0 && pr.iter_num % tc->eval_every == 0 && pr.iter_num < total_iters) {
                r.test_loss = evaluate(&model, &batch, &ds, &split, test_order, n_test_order, B, T, tc->eval_iters);
                log_info("epoch %ld | iter %ld | test loss %.4f\n", epoch, pr.iter_num, r.test_loss);
                fflush(stdout);
                t_log = now_s();
            }
            if (tc->save_every_iters > 0 && pr.iter_num % tc->save_every_iters == 0 && pr.iter_num < total_iters)
                if (save_snapshot(cfg, &model, &opt, &ds, &pr)) goto out;
            if (g_stop_signal) {
                log_info("Interrupted by signal %d at iteration %ld: saving a snapshot\n", (int)g_stop_signal, pr.iter_num);
                rc = save_snapshot(cfg, &model, &opt, &ds, &pr) ? EXIT_RUNTIME : EXIT_INTERRUPTED;
                goto out;
            }
        }
        bool epoch_done = pr.iter_in_epoch >= iters_per_epoch;
        if (epoch_done) { pr.epochs_run = epoch; pr.iter_in_epoch = 0; }
        if (pr.iter_num >= total_iters || pr.epochs_run >= tc->max_epochs) done = true;

        // Evaluate at every epoch end and at the end of training; snapshot every
        // save_every epochs and always after the last iteration.
        r.test_loss = evaluate(&model, &batch, &ds, &split, test_order, n_test_order, B, T, tc->eval_iters);
        log_info("epoch %ld | iter %ld | test loss %.4f\n", epoch, pr.iter_num, r.test_loss);
        fflush(stdout);
        if (done || (epoch_done && pr.epochs_run % tc->save_every == 0))
            if (save_snapshot(cfg, &model, &opt, &ds, &pr)) goto out;
    }
    r.iters = pr.iter_num;
    r.tokens_per_s = train_time > 0 ? tokens / train_time : 0;
    r.wall_s = now_s() - t_start;
    log_info("done: %ld iterations (%ld this run), train loss %.4f, test loss %.4f, %.0f tok/s, %.1f s\n",
           r.iters, r.iters_this_run, r.final_train_loss, r.test_loss, r.tokens_per_s, r.wall_s);
    rc = EXIT_OK;

out:
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (res) { r.iters = pr.iter_num; r.wall_s = now_s() - t_start; *res = r; }
    free(batch.x); free(batch.y);
    free(train_order); free(test_order); free(scratch);
    snapshot_free(&snap);
    adamw_free(&opt);
    gpt_free(&model);
    be->destroy(be);
    datasplit_free(&split);
    chardataset_free(&ds);
    return rc;
}
