// trainer/trainer.c — the training loop in the shape of the PyTorch minGPT-DDP tutorial's
// Trainer, on one process or on the ranks of an `mpirun`/`srun` job. Its methods keep the
// tutorial's names without the leading underscore (C reserves file-scope names that start with
// one); the tutorial's name of each is in brackets:
//
//   trainer_run          (__init__) setup: backend (GPU = local rank), data, split, model, AdamW, buckets
//     load_snapshot      (_load_snapshot) every rank reads the same snapshot; else init + rank 0's
//                        weights broadcast
//     train              (train) epochs until max_epochs / max_iters / a collective stop; evaluation
//                        and a snapshot at each epoch's end
//       run_epoch        (_run_epoch) this rank's share of the epoch's permutation, from the resume
//                        point; each iteration as llm.c's loop:
//         run_batch      (_run_batch) train_step (trainer/train_step.h): micro-steps, bucketed
//                        all-reduce, AdamW
//         log_step       the training line and its metrics.jsonl line (trainer/metrics.h), the
//                        status line and the time estimate (trainer/progress.h)
//         maybe_evaluate every eval_every iterations
//         maybe_save     every save_every_iters iterations, or asked for by a signal; a stop
//       evaluate         (not in the tutorial) the evaluation windows split over the ranks, one
//                        global mean loss (trainer/evaluate.h); a signal stops it between batches
//       save_snapshot    (_save_snapshot) rank 0 writes; replicas are checked to be identical
//                        first; numbered and best copies (checkpoint/retention.h)
//
// Results do not depend on the number of ranks: with the DistributedSampler's interleaving the
// ranks' rows of one iteration are exactly the rows of one process with batch B*W, and the
// dropout masks are keyed by the global row (model/gpt.h, GPTStepArgs.batch_row0).
#include "trainer/trainer.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "data/char_dataset.h"
#include "data/sampler.h"
#include "dist/shard.h"
#include "kernels/backend.h"
#include "config/clock.h"
#include "kernels/fatal.h"
#include "trainer/loss_scaler.h"
#include "model/gpt.h"
#include "model/gpt_cost.h"
#include "trainer/adamw.h"
#include "trainer/amp.h"
#include "trainer/buckets.h"
#include "trainer/evaluate.h"
#include "process/log.h"
#include "trainer/metrics.h"
#include "trainer/progress.h"
#include "trainer/resume_check.h"
#include "checkpoint/atomic_file.h"
#include "checkpoint/retention.h"
#include "checkpoint/snapshot.h"
#include "checkpoint/state_dict.h"
#include "dist/kill_grace.h"
#include "process/signal_thread.h"
#include "trainer/train_step.h"

#define ERRLEN 2048

// ============================================================================
// Signals: the handler only sets flags; the next step's collective (or the one between epochs)
// decides, so that every rank acts at the same iteration.
//   SIGINT, SIGTERM  save a snapshot and stop (exit 75)
//   SIGUSR1          save a snapshot and go on (Slurm's `--signal=USR1@90`)
//   a second SIGINT or SIGTERM while a snapshot is being written abandons that write (the
//   file on disk keeps the previous snapshot) and stops at once (exit 130)
// ============================================================================
static volatile sig_atomic_t g_stop_signal = 0;   // the stop signal received, 0 for none
static volatile sig_atomic_t g_save_requests = 0; // SIGUSR1s received (the trainer counts those it served)
static volatile sig_atomic_t g_saving = 0;        // a snapshot is being written
static volatile sig_atomic_t g_cancel_save = 0;   // a second stop signal came while writing one
static void on_signal(int sig) {
    if (sig == SIGUSR1) { g_save_requests++; return; }
    if (g_stop_signal && g_saving) g_cancel_save = 1;
    g_stop_signal = sig;
}

// ============================================================================
// The trainer's state
// ============================================================================
typedef struct {
    long epochs_run;         // completed epochs
    long samples_in_epoch;   // samples of epoch epochs_run+1's global order consumed (a prefix)
    long iter_num;           // optimizer steps since the start of training
    uint64_t seed;
    LossScaler scaler;       // fp16 dynamic loss scale (disabled: scale 1)
    double last_test_loss;   // the last evaluation's test loss (NaN: none yet)
    double best_test_loss;   // the lowest so far and its iteration (NaN / -1: none)
    long best_iter;
} Progress;

typedef struct {
    const Config *cfg;
    Comm *comm;              // host communicator (not owned)
    Comm *grad_comm;         // gradients: the backend's (NCCL) or comm itself
    int rank, world;         // comm->rank, comm->world_size
    Backend *be;
    ComputeDtype dtype;
    CharDataset ds;
    DataSplit split;
    GPT model;
    AdamW opt;               // ZeRO: the moments of this rank's shard only
    Buckets buckets;
    int zero;                // the ZeRO stage in effect: trainer_config.zero_stage, 0 on one rank
    int ring_overlap;        // ZeRO stage 2: MINGPT_ZERO2_RING=overlap (buckets_stage2_min_ring)
    ShardPlan shards;        // ZeRO: the shards of the flat parameter buffer (dist/shard.h)
    int gather_overlap;      // ZeRO: the all-gather overlapped with the next forward (MINGPT_ZERO_GATHER)
    float *grad_acc;         // ZeRO stage 2: (shards.shard) this rank's reduced gradients
    Progress pr;
    int B, T, A;             // batch_size (per rank, per micro-step), block_size, grad_accum_steps
    DistributedSampler train_sampler;
    long *order, *scratch;   // this rank's sample indices for the epoch; sampler scratch
    Evaluator eval;          // the evaluation windows and their order
    int32_t *x, *y;          // (max(A*B, B_infer), T) this iteration's rows, or an evaluation batch
    MicroBatch *mb;          // (A) this iteration's micro-batches
    SpikeDetector spike;     // gradient-norm outliers (trainer_config.skip_spike_zscore)
    TrainResult r;
    double tokens, train_time;
    CommStats comm_total;    // all-reduce statistics summed over the run
    long comm_iters;
    long saved_iter;         // iteration the stable snapshot on disk holds (-1: none)
    int save_requests_seen;  // SIGUSR1s already turned into a save request
    // What the run reports over time (rank 0): metrics.jsonl, the status line, the estimates.
    const char *run_dir;     // where metrics.jsonl goes (NULL: nowhere)
    Metrics metrics;
    MetricsWindow since_log; // the iterations since the last training line
    StatusLine status;
    ProgressClock clock;     // the time estimates
    double t_start;          // monotonic seconds when this process started the run
    // mpirun's SIGTERM-to-SIGKILL grace against one iteration plus a save (dist/kill_grace.h)
    double grace_s;          // -1: not under mpirun, or not rank 0 of several
    bool grace_warned;
    double iter_s_sum;       // iterations of this run after the first: their time, their count
    long iter_s_n;
    double save_s;           // the last stable snapshot write on rank 0 (-1: none yet)
    double time_before;      // training wall seconds of earlier processes of this run (metrics.jsonl)
    double tokens_total;     // training tokens of all ranks since iteration 0
    long total_iters;        // the iteration this run ends at
    const TrainerHook *hook; // after each evaluation and at the end (rank 0 with a run_dir), the scaler's
                             // growth interval; or NULL
} Trainer;

// Every rank's rc; the job agrees on the largest, so that all ranks take the same branch.
static int agree(Trainer *t, int rc) {
    if (t->world == 1) return rc;
    double v = rc;
    if (t->comm->allreduce_host(t->comm, &v, 1, COMM_MAX)) t->comm->abort(t->comm, EXIT_RUNTIME, t->comm->err);
    return (int)v;
}

// A communicator error in the middle of training: no rank can go on; take the job down.
static void comm_failed(Trainer *t, Comm *c) { t->comm->abort(t->comm, EXIT_RUNTIME, c->err); }

// ZeRO with the overlapped all-gather: waits for the all-gathers the last step started (the
// next step's forward waits for them layer by layer; anything else that reads the parameters
// calls this first: evaluation, snapshots, the end of training). Their times go to the run's
// statistics. Nothing to do when none is in flight.
static void gathers_wait(Trainer *t) {
    if (!t->zero || t->buckets.gathers_done == t->buckets.gathers_started) return;
    Comm *gc = t->grad_comm;
    comm_stats_reset(gc);   // (nothing else is in flight: an all-gather's times are added by the wait)
    if (buckets_gather_wait_all(&t->buckets)) comm_failed(t, gc);
    comm_stats_add(&t->comm_total, &gc->stats);
    comm_stats_add(&t->since_log.comm, &gc->stats);
    comm_stats_reset(gc);
}

// kernels/fatal.h's handler while a job trains: an op that cannot go on takes every rank down.
static void on_fatal(const char *msg, void *ctx) {
    Comm *c = ctx;
    c->abort(c, EXIT_RUNTIME, msg);
}

static bool file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

// x for a message: %g, but "nan" whatever its sign bit (printf writes "-nan" for some).
static const char *fmt_num(double x, char *buf, size_t len) {
    if (isnan(x)) snprintf(buf, len, "nan");
    else snprintf(buf, len, "%g", x);
    return buf;
}

// a + b for b >= 0, saturating at LONG_MAX (iteration counts from a snapshot may be huge).
static long add_sat(long a, long b) { return a > LONG_MAX - b ? LONG_MAX : a + b; }

// The 1-based epoch of the last iteration run, the number the progress lines print: inside an
// epoch the one in progress, right after an epoch's last iteration that epoch (1 before any).
// Every message that names an epoch uses it.
static long epoch_now(const Progress *pr) {
    return pr->samples_in_epoch > 0 || pr->epochs_run == 0 ? pr->epochs_run + 1 : pr->epochs_run;
}

// Training wall seconds since the run first started (earlier processes included).
static double run_time_s(const Trainer *t) { return t->time_before + now_s() - t->t_start; }

// The snapshot is written as <path>.tmp.<pid>, then renamed: check now, not at the first
// save (hours later), that its directory exists and takes that file, by creating and
// removing it (a stale file of that name, left by a killed run with the same pid, would be
// overwritten by the save anyway). Returns 0, or EXIT_RUNTIME after reporting (as an output
// directory that cannot be created).
// The run's snapshots (the stable file and, with save_best, its .best.bin copy) must not be the
// files it reads, data_config.path or trainer_config.init_from: a save would replace them (same
// device and inode: another spelling of the path, a symbolic or a hard link count). Returns 0, or
// EXIT_RUNTIME after naming both.
static int check_outputs_not_inputs(const TrainerConfig *tc, const DataConfig *dc) {
    char best[CFG_STR_MAX + 16], err[3 * CFG_STR_MAX];
    const char *outputs[2][2] = {{tc->snapshot_path, "trainer_config.snapshot_path"}, {NULL, "the save_best copy of trainer_config.snapshot_path"}};
    if (tc->save_best && !retention_path(tc->snapshot_path, ".best.bin", best, sizeof best)) outputs[1][0] = best;
    for (int i = 0; i < 2; i++)
        if (output_is_input(outputs[i][0], outputs[i][1], dc->path, "data_config.path", err, sizeof err) ||
            output_is_input(outputs[i][0], outputs[i][1], tc->init_from, "trainer_config.init_from", err, sizeof err)) {
            log_error("mingpt: error: %s\n", err);
            return EXIT_RUNTIME;
        }
    return 0;
}

static int check_snapshot_dir(const char *path) {
    char dir[CFG_STR_MAX], tmp[CFG_STR_MAX + 32];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        log_error("mingpt: error: trainer_config.snapshot_path '%s' is a directory; it must name a file\n", path);
        return EXIT_RUNTIME;
    }
    const int st_rc = stat(dir, &st);
    if (st_rc != 0 || !S_ISDIR(st.st_mode)) {
        log_error("mingpt: error: cannot write snapshot '%s': directory '%s': %s\n", path, dir,
                  st_rc == 0 ? "not a directory" : strerror(errno));
        return EXIT_RUNTIME;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    const int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        log_error("mingpt: error: cannot write snapshot '%s' in directory '%s': %s\n", path, dir, strerror(errno));
        return EXIT_RUNTIME;
    }
    close(fd);
    unlink(tmp);
    return 0;
}

// A host-readable view of n floats of backend memory: the buffer itself when the
// backend's memory is host memory, else a downloaded copy in *tmp (caller frees).
static const float *host_view(Backend *be, const float *p, size_t n, float **tmp) {
    *tmp = NULL;
    if (be->host_memory) return p;
    *tmp = malloc(n * sizeof(float));
    if (*tmp) be->download(be, *tmp, p, n * sizeof(float));
    return *tmp;
}

// ============================================================================
// Evaluation (trainer/evaluate.h): the test loss, or a stop on a signal (every rank alike)
// ============================================================================
static void gathers_wait(Trainer *t);

static int evaluate(Trainer *t) {
    gathers_wait(t);   // the parameters, all of them
    double loss;
    const int rc = evaluator_run(&t->eval, &t->model, &t->ds, t->comm, &g_stop_signal, t->x, t->y, &loss);
    if (rc == EVAL_COMM_ERROR) comm_failed(t, t->comm);
    if (rc == EVAL_DONE) t->r.test_loss = loss;
    return rc;
}

// ============================================================================
// Snapshots
// ============================================================================
// Sum of the parameters in double: equal on every rank while the replicas are identical.
static int replicas_identical(Trainer *t, const float *params) {
    if (t->world == 1) return 1;
    double s = 0.0;
    for (size_t i = 0; i < t->model.num_params; i++) s += params[i];
    double lo = s, hi = s;
    if (t->comm->allreduce_host(t->comm, &lo, 1, COMM_MIN) || t->comm->allreduce_host(t->comm, &hi, 1, COMM_MAX))
        comm_failed(t, t->comm);
    return lo == hi;
}

// ZeRO: the shards' AdamW moments reach rank 0's snapshot writer one shard at a time, so that
// the file holds the ADAM/ADAV records of an unsharded run and rank 0 never holds more than one
// shard beside its own. Every rank takes part in the same sequence of 2 x (ranks with a non-empty
// shard) gathers: moment m then v, shards in rank order; in each only the shard's owner sends.
typedef struct {
    Trainer *t;
    int done;                // gathers taken part in so far
} MomentsFeed;

// The next gather of the sequence: shard q of moment `which` into buf (used at rank 0 only).
// Through the host communicator: the owner of a shard in device memory downloads it first.
static void gather_piece(Trainer *t, int which, int q, float *buf) {
    const int W = t->world;
    size_t *counts = calloc(2 * (size_t)W, sizeof(size_t));
    if (!counts) t->comm->abort(t->comm, EXIT_RUNTIME, "out of memory while saving a snapshot");
    counts[q] = shard_count(&t->shards, q);   // displacements (counts + W): all 0
    const float *mine = which ? t->opt.v : t->opt.m;
    float *tmp = NULL;
    if (q == t->rank && counts[q] && !t->be->host_memory) {
        mine = tmp = malloc(counts[q] * sizeof(float));
        if (!tmp) t->comm->abort(t->comm, EXIT_RUNTIME, "out of memory while saving a snapshot");
        t->be->download(t->be, tmp, which ? t->opt.v : t->opt.m, counts[q] * sizeof(float));
    }
    if (t->comm->gather(t->comm, mine, buf, counts, counts + W, 0)) comm_failed(t, t->comm);
    free(tmp);
    free(counts);
}

static int pieces_of(const Trainer *t) {
    int n = 0;
    for (int q = 0; q < t->world; q++) n += shard_count(&t->shards, q) > 0;
    return 2 * n;
}

// Takes part in the gathers of the sequence from feed->done on (rank 0: into buf, discarded).
static void feed_rest(MomentsFeed *feed, float *buf) {
    Trainer *t = feed->t;
    const int per = pieces_of(t) / 2;
    for (; feed->done < 2 * per; feed->done++) gather_piece(t, feed->done / per, feed->done % per, buf);
}

// SnapMoments.read at rank 0: the writer asks for shard q = first / shard of moment `which`.
static int read_piece(SnapMoments *sm, int which, size_t first, size_t n, float *buf) {
    MomentsFeed *feed = sm->ctx;
    Trainer *t = feed->t;
    const int per = pieces_of(t) / 2, q = (int)(first / t->shards.shard);
    if (feed->done != which * per + q || n != shard_count(&t->shards, q)) return 1;   // out of sequence
    gather_piece(t, which, q, buf);
    feed->done++;
    return 0;
}

// What a save is for: it decides the file and what a failed write does (docs/snapshots.md).
typedef enum {
    SAVE_PERIODIC,    // save_every, save_every_iters: a failed write warns and the run goes on
    SAVE_REQUESTED,   // SIGUSR1: as periodic
    SAVE_BEST,        // save_best, to <stem>.best.bin: as periodic
    SAVE_FINAL,       // after the last iteration: a failed write stops the run (exit 1)
    SAVE_INTERRUPT,   // SIGINT / SIGTERM: as final
} SaveKind;

// save_snapshot's results, the same on every rank.
enum { SAVE_OK = 0, SAVE_FAILED = 1, SAVE_CANCELLED = ATOMIC_CANCELLED };

// Rank 0 writes the snapshot (the stable file, then its numbered copy; or the best file); every
// rank returns the job's result. A failed write leaves the file on disk as it was.
static int save_snapshot(Trainer *t, SaveKind kind) {
    gathers_wait(t);   // the parameters, all of them
    const Config *cfg = t->cfg;
    const TrainerConfig *tc = &cfg->trainer;
    char err[ERRLEN] = "", path[CFG_STR_MAX + 64];
    float *tp = NULL, *tm = NULL, *tv = NULL;
    int rc = SAVE_OK;
    if (kind != SAVE_BEST) snprintf(path, sizeof path, "%s", tc->snapshot_path);
    else if (retention_path(tc->snapshot_path, ".best.bin", path, sizeof path)) {
        snprintf(err, sizeof err, "the snapshot path '%s' is too long for its .best.bin copy", tc->snapshot_path);
        rc = SAVE_FAILED;
    }
    const float *params = rc ? NULL : host_view(t->be, t->model.params_memory, t->model.num_params, &tp);
    if (!rc && !params) {
        snprintf(err, sizeof err, "out of memory while saving a snapshot");
        rc = SAVE_FAILED;
    }
    if (agree(t, rc)) goto out;
    if (!replicas_identical(t, params)) {
        snprintf(err, sizeof err, "the ranks' parameters differ (replicas diverged); the snapshot is not written");
        rc = SAVE_FAILED;
        goto out;
    }
    MomentsFeed feed = { .t = t };
    SnapMoments sm = { .read = read_piece, .ctx = &feed, .piece = t->shards.shard };
    if (t->zero && t->rank == 0 && !(sm.buf = malloc(sm.piece * sizeof(float)))) {
        snprintf(err, sizeof err, "out of memory while saving a snapshot");
        rc = SAVE_FAILED;
    }
    if (t->zero && agree(t, rc)) goto out;
    if (t->zero && t->rank != 0) feed_rest(&feed, NULL);   // this rank's shards to rank 0's writer
    if (t->rank == 0) {
        char *yaml = config_to_yaml(cfg);
        const float *adam_m = t->zero ? NULL : host_view(t->be, t->opt.m, t->model.num_params, &tm);
        const float *adam_v = t->zero ? NULL : host_view(t->be, t->opt.v, t->model.num_params, &tv);
        const long per_iter = (long)t->B * t->A * t->world;
        if (!yaml || (!t->zero && (!adam_m || !adam_v))) {
            snprintf(err, sizeof err, "out of memory while saving a snapshot");
            rc = SAVE_FAILED;
        } else {
            Snapshot s = {
                .config_yaml = yaml, .vocab = t->ds.itos, .vocab_size = t->ds.vocab_size, .shape = t->model.shape,
                .num_params = t->model.num_params, .params = (float *)params, .adam_m = (float *)adam_m,
                .adam_v = (float *)adam_v, .moments = t->zero ? &sm : NULL, .adam_step = t->opt.step, .epochs_run = t->pr.epochs_run,
                .iter_in_epoch = (t->pr.samples_in_epoch + per_iter - 1) / per_iter, .iter_num = t->pr.iter_num,
                .seed = t->pr.seed, .loss_scale = t->pr.scaler.scale, .scaler_good_steps = t->pr.scaler.good_steps,
                .world_size = t->world, .samples_in_epoch = t->pr.samples_in_epoch,
                .last_test_loss = t->pr.last_test_loss, .best_test_loss = t->pr.best_test_loss,
                .best_iter = t->pr.best_iter,
            };
            snprintf(s.precision, sizeof s.precision, "%s", amp_dtype_name(t->dtype));
            g_saving = 1;
            const double t_save = now_s();
            rc = snapshot_save_cancellable(path, &s, &g_cancel_save, err, sizeof err);
            if (rc == SAVE_OK && kind != SAVE_BEST) t->save_s = now_s() - t_save;
            g_saving = 0;
            char why[ERRLEN];
            if (rc == SAVE_OK && kind != SAVE_BEST &&
                retention_keep(path, t->pr.iter_num, tc->keep_last, why, sizeof why))
                log_error("mingpt: warning: %s (the snapshot itself is saved)\n", why);
        }
        free(yaml);
        if (t->zero) feed_rest(&feed, sm.buf);   // the gathers the writer did not ask for (it failed early)
    }
out:
    free(sm.buf);
    free(tp); free(tm); free(tv);
    if (rc == SAVE_FAILED && err[0]) {
        // One message: what failed, that the file on disk is unchanged, and whether the run goes on.
        char held[CFG_STR_MAX + 128];
        if (kind == SAVE_BEST) snprintf(held, sizeof held, "'%s' is unchanged", path);
        else if (t->saved_iter >= 0)
            snprintf(held, sizeof held, "'%s' still holds the snapshot of iteration %ld", path, t->saved_iter);
        else snprintf(held, sizeof held, "no snapshot of this run is on disk");
        const bool goes_on = kind == SAVE_PERIODIC || kind == SAVE_REQUESTED || kind == SAVE_BEST;
        log_error("mingpt: %s: %s; %s%s\n", goes_on ? "warning" : "error", err, held,
                  goes_on ? "; training goes on" : "");
    }
    rc = agree(t, rc);   // the largest: a cancelled write wins over a failed one
    if (rc == SAVE_OK) {
        if (kind != SAVE_BEST) t->saved_iter = t->pr.iter_num;
        if (kind == SAVE_BEST)
            log_info("Best snapshot saved (test loss %.4f) at epoch %ld, iteration %ld: %s\n", t->pr.best_test_loss,
                     epoch_now(&t->pr), t->pr.iter_num, path);
        else
            log_info("Snapshot saved at epoch %ld, iteration %ld: %s\n", epoch_now(&t->pr), t->pr.iter_num, path);
    }
    log_flush_stdout();
    return rc;
}

// The hook after an evaluation and at the end (trainer.h): rank 0, in a run directory.
static void after_eval(Trainer *t) {
    if (t->run_dir && t->hook && t->hook->after_eval) t->hook->after_eval(t->hook->ctx, t->run_dir, t->cfg);
}

// After an evaluation at the current iteration: its log line and its metrics.jsonl line (record:
// false for the re-evaluation of a run that has nothing left to train, whose line is there).
// Whatever else follows an evaluation hooks in here.
static void report_eval(Trainer *t, long epoch, bool record) {
    log_info("epoch %ld | iter %ld | test loss %.4f\n", epoch, t->pr.iter_num, t->r.test_loss);
    log_flush_stdout();
    if (record) metrics_eval(&t->metrics, t->pr.iter_num, epoch, t->r.test_loss, t->tokens_total, run_time_s(t));
    after_eval(t);
}

// After an evaluation (t->r.test_loss): remembers it for the snapshot and, with save_best, keeps
// <stem>.best.bin when it is the lowest so far. The loss is all-reduced, so every rank decides
// alike. Returns save_snapshot's result (a failed best save only warns).
static int note_test_loss(Trainer *t) {
    const double loss = t->r.test_loss;
    if (isnan(loss)) return SAVE_OK;
    t->pr.last_test_loss = loss;
    if (!(isnan(t->pr.best_test_loss) || loss < t->pr.best_test_loss)) return SAVE_OK;
    t->pr.best_test_loss = loss;
    t->pr.best_iter = t->pr.iter_num;
    return t->cfg->trainer.save_best ? save_snapshot(t, SAVE_BEST) : SAVE_OK;
}

// Any rank received SIGINT/SIGTERM (a collective: call it on every rank at the same point).
static bool stop_requested(Trainer *t) {
    return agree(t, g_stop_signal != 0) != 0;
}

// A second stop signal abandoned the write: say what is on disk; the job exits with 130.
static int save_cancelled(Trainer *t) {
    char held[CFG_STR_MAX + 96];
    if (t->saved_iter >= 0)
        snprintf(held, sizeof held, "'%s' still holds the snapshot of iteration %ld", t->cfg->trainer.snapshot_path,
                 t->saved_iter);
    else snprintf(held, sizeof held, "no snapshot of this run was written");
    log_error("mingpt: interrupted again while saving: the snapshot being written was abandoned; %s\n", held);
    return EXIT_ABORTED;
}

// SIGINT / SIGTERM: save (unless the snapshot on disk is of this iteration) and stop.
static int stop_saving(Trainer *t, const char *where) {
    log_info("Interrupted by a signal%s at iteration %ld: saving a snapshot\n", where, t->pr.iter_num);
    log_flush_stdout();   // said now, not after the save
    const int rc = t->saved_iter == t->pr.iter_num ? SAVE_OK : save_snapshot(t, SAVE_INTERRUPT);
    return rc == SAVE_OK ? EXIT_INTERRUPTED : rc == SAVE_CANCELLED ? save_cancelled(t) : EXIT_RUNTIME;
}
static int stop_with_snapshot(Trainer *t) { return stop_saving(t, ""); }

// An evaluation stopped by a signal: the progress so far is saved (the evaluation is redone
// after resuming, when it is due), exit 75.
static int eval_interrupted(Trainer *t) { return stop_saving(t, " during the evaluation"); }

// Puts rank 0's parameters on every rank (DDP's construction-time broadcast).
static int bcast_params(Trainer *t) {
    if (t->world == 1) return 0;
    float *tmp;
    const float *p = host_view(t->be, t->model.params_memory, t->model.num_params, &tmp);
    if (!p) return 1;
    int rc = t->comm->bcast_host(t->comm, (void *)p, t->model.num_params * sizeof(float), 0);
    if (!rc && tmp) gpt_set_params(&t->model, tmp);
    else if (!rc) gpt_params_changed(&t->model);   // written in place (host memory)
    free(tmp);
    if (rc) comm_failed(t, t->comm);
    return 0;
}

// Resume state from the snapshot when it exists (rank 0 decides, so all ranks agree).
static int load_snapshot(Trainer *t, Snapshot *snap, bool *resumed) {
    const char *path = t->cfg->trainer.snapshot_path;
    double exists = path[0] && file_exists(path);
    if (t->comm->bcast_host(t->comm, &exists, sizeof exists, 0)) comm_failed(t, t->comm);
    *resumed = exists != 0;
    if (!*resumed) return 0;
    char err[ERRLEN];
    if (snapshot_load(path, snap, err, sizeof err)) {
        log_error("mingpt: error: %s\n", err);
        return EXIT_RUNTIME;
    }
    if (snap->note[0]) log_info("note: %s\n", snap->note);
    Progress *pr = &t->pr;
    pr->epochs_run = snap->epochs_run;
    pr->iter_num = snap->iter_num;
    pr->seed = snap->seed;   // resume_check_config refuses a config with another seed
    // The fp16 loss scale carries over from a float16 run (or a file from before PREC, whose
    // scale is 1 unless it was one); after another precision the scaler starts afresh.
    if (!snap->precision[0] || strcmp(snap->precision, "float16") == 0)
        loss_scaler_restore(&pr->scaler, snap->loss_scale, snap->scaler_good_steps);
    pr->last_test_loss = snap->last_test_loss;
    pr->best_test_loss = snap->best_test_loss;
    pr->best_iter = snap->best_iter;
    t->saved_iter = snap->iter_num;
    return 0;
}

// A resume in another precision than the snapshot's (fp16 on a GPU, then bf16 on a CPU) goes on,
// as a PyTorch run whose autocast dtype changed would: one note says so.
static void note_precision_change(const Trainer *t, const Snapshot *snap) {
    const char *now = amp_dtype_name(t->dtype);
    if (!snap->precision[0] || strcmp(snap->precision, now) == 0) return;
    log_info("note: snapshot '%s' was trained in %s, this run trains in %s (use_amp=%s, amp_dtype=%s on the %s "
             "backend): it continues from the snapshot's fp32 weights and AdamW state%s\n",
             t->cfg->trainer.snapshot_path, snap->precision, now, t->cfg->trainer.use_amp ? "true" : "false",
             t->cfg->trainer.amp_dtype, t->be->name,
             t->dtype == DTYPE_FP16 ? ", the fp16 loss scale starting afresh" : "");
}

// t->be for trainer_config.device at t->dtype, or non-zero after saying why: backend_select's
// message with the key in front.
static int open_backend(Trainer *t, const char *device) {
    char why[ERRLEN];
    switch (backend_select(device, t->comm->local_rank, t->dtype, &t->be, why, sizeof why)) {
    case BACKEND_OK: return 0;
    case BACKEND_NO_CUDA: log_error("mingpt: error: trainer_config.device=%s: %s\n", device, why); break;
    case BACKEND_BAD_DEVICE: log_error("mingpt: error: trainer_config.device %s\n", why); break;
    default: log_error("mingpt: error: %s\n", why); break;
    }
    return 1;
}

// ============================================================================
// Setup, in phases separated by agree(): a phase that fails on one rank fails on all,
// and no rank is left waiting in a collective that another skipped.
//   setup_local   backend, data (no communication)
//   setup_model   resume state, split, model, optimizer, samplers, evaluation windows
//   setup_buckets the gradient communicator and its buckets
// ============================================================================
static int setup_local(Trainer *t) {
    const Config *cfg = t->cfg;
    const DataConfig *dc = &cfg->data;
    const TrainerConfig *tc = &cfg->trainer;
    char err[ERRLEN];

    // ---- where snapshots go (rank 0 writes them)
    if (t->rank == 0) {
        const int rc = check_snapshot_dir(tc->snapshot_path);
        if (rc) return rc;
        if (check_outputs_not_inputs(tc, dc)) return EXIT_RUNTIME;
    }

    // ---- backend. use_amp: matmul inputs in amp_dtype (fp16 with a dynamic loss scaler),
    // fp32 master weights, as torch.autocast + GradScaler. One GPU per rank: the local rank's.
    // The backend opens at the dtype asked for (auto: CUDA's float16), then amp_resolve decides
    // for the backend it is (trainer/amp.h: auto is bfloat16 or fp32 on the CPU) and it reopens
    // when that differs (a CPU backend: nothing costly to redo).
    t->dtype = !tc->use_amp ? DTYPE_FP32 : strcmp(tc->amp_dtype, "bfloat16") == 0 ? DTYPE_BF16 : DTYPE_FP16;
    if (open_backend(t, tc->device)) return EXIT_USAGE;
    const bool on_cpu = strcmp(t->be->name, "cpu") == 0;
    char amp_note[256];
    const ComputeDtype dtype = amp_resolve(tc->use_amp, tc->amp_dtype, !on_cpu, on_cpu && backend_cpu_bf16_fast(),
                                           amp_note, sizeof amp_note);
    if (amp_note[0]) log_info("note: %s\n", amp_note);
    if (dtype != t->dtype) {
        t->be->destroy(t->be);
        t->dtype = dtype;
        if (open_backend(t, tc->device)) return EXIT_USAGE;
    }
    // matmul_precision=high: TF32 for fp32 matmuls where the backend has it (PyTorch's
    // set_float32_matmul_precision("high")); the CPU has none and says so.
    const bool tf32 = strcmp(tc->matmul_precision, "high") == 0;
    if (tf32 && t->be->set_matmul_precision) t->be->set_matmul_precision(t->be, 1);
    else if (tf32) log_info("note: matmul_precision=high: the %s backend has no TF32 matmuls; fp32 matmuls stay true fp32\n", t->be->name);
    log_info("Backend: %s, %s%s\n", t->be->name,
             t->dtype == DTYPE_FP32 ? "fp32"
             : t->dtype == DTYPE_BF16 ? "mixed precision (bfloat16 matmul inputs, fp32 master weights)"
             : "mixed precision (float16 matmul inputs, fp32 master weights, dynamic loss scaling)",
             tf32 && t->be->set_matmul_precision ? "; fp32 matmuls on TF32 tensor cores (matmul_precision=high)" : "");
    if (t->be->describe) {   // the libraries under the ops, one log line each
        char desc[4096];
        t->be->describe(t->be, desc, sizeof desc);
        for (char *line = desc, *nl; *line; line = nl + 1) {
            if (!(nl = strchr(line, '\n'))) break;
            log_info("%.*s\n", (int)(nl - line), line);
        }
    }

    // ---- data
    const int load_rc = chardataset_load(&t->ds, dc->path, dc->truncate, dc->block_size, err, sizeof err);
    if (load_rc) {   // a file that cannot be read is named with the key that gave it
        log_error("mingpt: error: %s%s\n", load_rc == CHARDATASET_UNREADABLE ? "data_config.path: " : "", err);
        return EXIT_USAGE;
    }
    log_info("Data has %ld characters, %d unique.\n", t->ds.n, t->ds.vocab_size);
    return 0;
}

// Stage 2's bucket plan (buckets_stage2_plan) for the model's tensors and trainer_config.bucket_cap_mb.
static int stage2_plan(const Trainer *t, Buckets *bk, const ParamTensor *pt, int nt, const GPTShape *shape, Comm *comm) {
    const size_t cap = (size_t)(t->cfg->trainer.bucket_cap_mb * 1024 * 1024);
    const size_t first_cap = cap < ((size_t)1 << 20) ? cap : ((size_t)1 << 20);   // DDP: 1 MiB first
    return buckets_stage2_plan(bk, pt, nt, shape, first_cap, cap, comm);
}

// Stage 2's ring of bucket gradients (floats) before the model exists: the one setup_buckets will
// allocate for its plan (buckets_stage2_min_ring).
static size_t stage2_ring(const Trainer *t, const GPTShape *shape, size_t num_params) {
    const int nt = gpt_param_table(shape, NULL);
    ParamTensor *pt = calloc((size_t)nt, sizeof *pt);
    Buckets bk;
    size_t ring = num_params;
    if (pt) {
        gpt_param_table(shape, pt);
        if (!stage2_plan(t, &bk, pt, nt, shape, t->comm)) {
            ring = buckets_stage2_min_ring(&bk, shape, t->ring_overlap);
            buckets_free(&bk);
        }
    }
    free(pt);
    return ring < num_params ? ring : num_params;
}

// What the run costs, said before anything large is allocated: parameters, tokens per iteration,
// the memory estimate (model/gpt_cost.h); and an error when that exceeds the memory available.
// Returns 0 or EXIT_USAGE / EXIT_RUNTIME after reporting.
static int check_cost(Trainer *t, const GPTShape *shape, const GPTBuildOptions *build) {
    GPTMemory mem;
    char err[ERRLEN], desc[512];
    if (gpt_memory_estimate(shape, t->B, t->T, t->be, t->dtype, build, &mem, err, sizeof err)) {
        log_error("mingpt: error: %s\n", err);
        return EXIT_USAGE;
    }
    GPTMemory unsharded = mem;
    if (t->zero) {   // per rank: the moments of one shard (gradients: the whole buffer, reduce-scattered in place)
        const ShardPlan sp = shard_plan(mem.num_params, t->world);
        mem.adamw = 2 * sp.shard * sizeof(float);
        // stage 2: the reduced shard and the ring of bucket gradients
        if (t->zero == 2) mem.grads = (sp.shard + stage2_ring(t, shape, mem.num_params)) * sizeof(float);
        mem.total = mem.total - unsharded.adamw - unsharded.grads + mem.adamw + mem.grads;
    }
    gpt_memory_describe(&mem, t->be, desc, sizeof desc);
    log_info("Cost: %.2fM parameters, %ld tokens per iteration (batch_size %d x block_size %d x grad_accum_steps %d x "
             "world_size %d), %s\n", mem.num_params / 1e6, (long)t->B * t->T * t->A * t->world, t->B, t->T, t->A,
             t->world, desc);
    if (t->world > 1)
        log_info("Memory per rank (zero_stage %d, %d ranks): parameters %zu bytes, gradients %zu bytes, optimizer "
                 "state %zu bytes (zero_stage 0: %zu, %zu, %zu), activations %zu bytes, %zu bytes in all\n", t->zero,
                 t->world, mem.params, mem.grads, mem.adamw, unsharded.params, unsharded.grads, unsharded.adamw, mem.acts,
                 mem.total);
    log_flush_stdout();
    if (gpt_memory_check(&mem, t->be, err, sizeof err)) {
        log_error("mingpt: error: %s\n", err);
        return EXIT_RUNTIME;
    }
    return 0;
}

// The ZeRO stage in effect (t->zero): trainer_config.zero_stage on several ranks, 0 on one (with a
// note). Sharding needs the gradient communicator's reduce-scatter and all-gather: the MPI one
// with the CPU backend, NCCL's with the CUDA backend. Returns 0, or EXIT_USAGE after saying why.
static int zero_decide(Trainer *t) {
    const int stage = t->cfg->trainer.zero_stage;
    t->zero = 0;
    if (stage == 0) return 0;
    const char *g = getenv("MINGPT_ZERO_GATHER");
    if (g && *g && strcmp(g, "overlap") && strcmp(g, "blocking")) {
        log_error("mingpt: error: MINGPT_ZERO_GATHER must be overlap or blocking (got '%s')\n", g);
        return EXIT_USAGE;
    }
    t->gather_overlap = !(g && !strcmp(g, "blocking"));
    const char *ring = getenv("MINGPT_ZERO2_RING");   // stage 2's ring: the smallest, or room to overlap
    if (stage == 2 && ring && strcmp(ring, "min") && strcmp(ring, "overlap")) {
        log_error("mingpt: error: MINGPT_ZERO2_RING must be min or overlap, got '%s'\n", ring);
        return EXIT_USAGE;
    }
    t->ring_overlap = stage == 2 && ring && !strcmp(ring, "overlap");
    if (t->world == 1) {
        log_info("note: trainer_config.zero_stage=%d on one rank behaves as 0 (there is nothing to shard over)\n", stage);
        return 0;
    }
    // the snapshot's moments are gathered through the host communicator; the gradients and
    // parameters through the gradient communicator (checked in setup_buckets when it is the backend's)
    if (!t->comm->gather || (!t->be->grad_comm_create && (!t->comm->reduce_scatter_start || !t->comm->allgather))) {
        log_error("mingpt: error: trainer_config.zero_stage=%d needs the MPI communicator for now (the %s "
                  "communicator has no reduce-scatter, all-gather or gather): use trainer_config.zero_stage=0\n", stage,
                  t->comm->name);
        return EXIT_USAGE;
    }
    t->zero = stage;
    return 0;
}

static int setup_model(Trainer *t) {
    const Config *cfg = t->cfg;
    const DataConfig *dc = &cfg->data;
    const TrainerConfig *tc = &cfg->trainer;
    char err[ERRLEN];

    // ---- resume state first: its seed governs the split, the batch order and dropout
    t->pr.seed = tc->seed;
    t->pr.last_test_loss = t->pr.best_test_loss = NAN;
    t->pr.best_iter = -1;
    loss_scaler_init(&t->pr.scaler, t->dtype == DTYPE_FP16);
    if (t->hook && t->hook->loss_scaler_growth_interval > 0)
        t->pr.scaler.growth_interval = t->hook->loss_scaler_growth_interval;
    t->B = tc->batch_size;
    t->T = dc->block_size;
    t->A = tc->grad_accum_steps;
    Snapshot snap = {0};
    bool resumed = false;
    int rc = load_snapshot(t, &snap, &resumed);
    if (!rc && datasplit_make(&t->split, &t->ds, dc->split, dc->train_split, t->pr.seed, err, sizeof err)) {
        log_error("mingpt: error: %s\n", err);
        rc = EXIT_USAGE;
    }
    if (rc) { snapshot_free(&snap); return rc; }
    log_info("Split (%s): %ld train windows, %ld test windows of %d characters\n", dc->split, t->split.n_train,
             t->split.n_test, dc->block_size);
    // torch's DistributedSampler would give the ranks beyond the windows copies of others
    // (its padding), weighing those windows twice in every step: refuse instead.
    if (t->split.n_train < t->world) {
        log_error("mingpt: error: the training split has %ld window%s, fewer than the %d ranks of this job: every "
                  "rank needs at least one (run fewer ranks, or raise data_config.truncate or train_split)\n",
                  t->split.n_train, t->split.n_train == 1 ? "" : "s", t->world);
        rc = EXIT_USAGE;
    }
    // data/sampler.h: torch's randperm algorithm is exact below this many windows
    const long perm_max = 4294967295L / 20;
    if (!rc && (t->split.n_train >= perm_max || t->split.n_test >= perm_max)) {
        log_error("mingpt: error: %ld training and %ld test windows: the sampler handles fewer than %ld per split "
                  "(lower data_config.truncate)\n", t->split.n_train, t->split.n_test, perm_max);
        rc = EXIT_USAGE;
    }
    if (!rc && resumed) rc = resume_check_point(&snap, t->split.n_train, t->B, t->world, tc->snapshot_path,
                                                &t->pr.samples_in_epoch);
    if (rc) { snapshot_free(&snap); return rc; }

    // ---- model and optimizer
    GPTShape shape = {
        .vocab_size = t->ds.vocab_size, .block_size = t->T, .n_layer = cfg->gpt.n_layer,
        .n_head = cfg->gpt.n_head, .n_embd = cfg->gpt.n_embd, .embd_pdrop = (float)cfg->gpt.embd_pdrop,
        .resid_pdrop = (float)cfg->gpt.resid_pdrop, .attn_pdrop = (float)cfg->gpt.attn_pdrop,
    };
    GPTBuildOptions build = { .activation_checkpointing = tc->activation_checkpointing };
    if (!(rc = zero_decide(t))) build.no_grad_buffer = t->zero == 2;
    if (rc || (rc = check_cost(t, &shape, &build))) { snapshot_free(&snap); return rc; }
    if (gpt_build_with(&t->model, &shape, t->B, t->T, t->be, &build, err, sizeof err)) {
        log_error("mingpt: error: %s\n", err);
        snapshot_free(&snap);
        return EXIT_USAGE;
    }
    log_info("number of parameters: %.2fM (%zu)\n", t->model.num_params / 1e6, t->model.num_params);
    if (t->model.checkpointing)
        log_info("Activation checkpointing: %.1f MiB of activations (%.1f MiB without)\n",
                 t->model.num_acts * 4.0 / 1048576.0, gpt_count_acts(&shape, t->B, t->T, t->be, NULL) * 4.0 / 1048576.0);
    t->shards = shard_plan(t->model.num_params, t->world);
    if (adamw_init(&t->opt, t->be, t->zero ? t->shards.shard : t->model.num_params)) {
        log_error("mingpt: error: out of memory\n");
        snapshot_free(&snap);
        return EXIT_RUNTIME;
    }
    if (resumed) {
        rc = resume_check_model(&snap, &shape, t->model.num_params, t->ds.itos, tc->snapshot_path);
        if (!rc) rc = resume_check_config(cfg, t->world, &snap, tc->snapshot_path);
        if (!rc) note_precision_change(t, &snap);
        if (!rc && tc->init_from[0])
            log_info("note: trainer_config.init_from is not used: the run resumes from its snapshot\n");
        if (!rc) {
            gpt_set_params(&t->model, snap.params);
            if (snap.adam_m && snap.adam_v) {   // ZeRO: this rank's slice of the whole moments
                const size_t lo = t->zero ? shard_lo(&t->shards, t->rank) : 0;
                const size_t n = t->zero ? shard_count(&t->shards, t->rank) : t->model.num_params;
                t->be->upload(t->be, t->opt.m, snap.adam_m + lo, n * sizeof(float));
                t->be->upload(t->be, t->opt.v, snap.adam_v + lo, n * sizeof(float));
                t->opt.step = snap.adam_step;
            }
            log_info("Resuming training from snapshot at Epoch %ld, iteration %ld\n", epoch_now(&t->pr),
                     t->pr.iter_num);
        }
        snapshot_free(&snap);
        if (rc) return rc;
    } else if (tc->init_from[0]) {
        // A new run from given weights (fine-tuning): every rank reads the file; AdamW starts fresh.
        float *w = malloc(t->model.num_params * sizeof(float));
        char note[1024];
        rc = w ? state_dict_import(tc->init_from, &shape, t->ds.itos, w, note, sizeof note, err, sizeof err) : EXIT_RUNTIME;
        if (rc) log_error("mingpt: error: trainer_config.init_from: %s\n", w ? err : "out of memory");
        else {
            if (note[0]) log_info("note: %s\n", note);
            gpt_set_params(&t->model, w);
            log_info("Snapshot not found. Training from the weights in %s (trainer_config.init_from)\n", tc->init_from);
        }
        free(w);
        if (rc) return rc;
    } else {
        log_info("Snapshot not found. Training model from scratch\n");
        if (gpt_init_weights(&t->model, t->pr.seed)) { log_error("mingpt: error: out of memory\n"); return EXIT_RUNTIME; }
    }

    // ---- samplers, evaluation windows, batch buffers (an evaluation batch may be larger)
    dsampler_init(&t->train_sampler, t->split.n_train, t->world, t->rank, true, t->pr.seed, false);
    if (evaluator_init(&t->eval, &t->split, strcmp(dc->split, "contiguous") == 0, t->T, dc->eval_stride,
                       tc->eval_iters, t->B, t->world, t->pr.seed, err, sizeof err)) {
        log_error("mingpt: error: %s\n", err);
        return EXIT_RUNTIME;
    }
    const long rows = (long)t->A * t->B > t->model.B_infer ? (long)t->A * t->B : t->model.B_infer;
    t->order = malloc(sizeof(long) * (t->train_sampler.num_samples + 1));
    t->scratch = malloc(sizeof(long) * (t->split.n_train + (long)t->world + 1) * 2);
    t->x = malloc(sizeof(int32_t) * (size_t)rows * t->T);
    t->y = malloc(sizeof(int32_t) * (size_t)rows * t->T);
    t->mb = malloc(sizeof(MicroBatch) * (size_t)t->A);
    spike_init(&t->spike, SPIKE_WINDOW_MAX);
    if (!t->order || !t->scratch || !t->x || !t->y || !t->mb) {
        log_error("mingpt: error: out of memory\n");
        return EXIT_RUNTIME;
    }
    log_info("Evaluation: %ld of %ld windows (eval_stride %d%s), batches of up to %d rows\n", t->eval.n_eval,
             t->eval.windows.n, t->eval.stride,
             t->eval.windows.tail_ignore > 0 ? ", a tail window for the end of the split" : "", t->model.B_infer);
    return 0;
}

// Data parallelism: the gradient communicator and its buckets, after every rank has its model.
static int setup_buckets(Trainer *t) {
    const TrainerConfig *tc = &t->cfg->trainer;
    if (t->world == 1) return 0;
    t->comm->timeout_s = tc->collective_timeout_s;
    char err[ERRLEN];
    t->grad_comm = t->comm;
    if (t->be->grad_comm_create) {
        t->grad_comm = t->be->grad_comm_create(t->be, t->comm, err, sizeof err);
        if (!t->grad_comm) t->comm->abort(t->comm, EXIT_RUNTIME, err);
        t->grad_comm->timeout_s = tc->collective_timeout_s;
        if (t->zero && (!t->grad_comm->reduce_scatter_start || !t->grad_comm->allgather)) {
            log_error("mingpt: error: trainer_config.zero_stage=%d: the %s communicator has no reduce-scatter or "
                      "all-gather: use trainer_config.zero_stage=0\n", t->zero, t->grad_comm->name);
            return EXIT_USAGE;
        }
    }
    const size_t cap = (size_t)(tc->bucket_cap_mb * 1024 * 1024);
    const size_t first_cap = cap < ((size_t)1 << 20) ? cap : ((size_t)1 << 20);   // DDP: 1 MiB first
    // stage 2: buckets cut only between the backward's ops (the ring then needs one bucket)
    if (t->zero == 2 ? stage2_plan(t, &t->buckets, t->model.tensors, t->model.n_tensors, &t->model.shape, t->grad_comm)
                     : buckets_plan(&t->buckets, t->model.tensors, t->model.n_tensors, first_cap, cap, t->grad_comm,
                                    t->model.grads_memory)) {
        log_error("mingpt: error: out of memory\n");
        return EXIT_RUNTIME;
    }
    log_info("Data parallel: %d ranks (%s), %d gradient bucket%s (cap %g MiB, first %g MiB) over %zu parameters\n",
             t->world, t->grad_comm->name, t->buckets.n, t->buckets.n == 1 ? "" : "s", tc->bucket_cap_mb,
             first_cap / 1048576.0, t->model.num_params);
    if (t->zero) {
        if (buckets_shard(&t->buckets, &t->shards)) {
            log_error("mingpt: error: out of memory\n");
            return EXIT_RUNTIME;
        }
        log_info("ZeRO stage %d: %d shards of %zu parameters (%zu on this rank); each rank keeps the AdamW moments of "
                 "its shard, gradients are reduce-scattered and the updated parameters all-gathered\n", t->zero,
                 t->world, t->shards.shard, shard_count(&t->shards, t->rank));
        if (t->zero == 2) {   // no gradient buffer: the reduced shard, and a ring for the buckets in flight
            const size_t ring = buckets_stage2_min_ring(&t->buckets, &t->model.shape, t->ring_overlap);
            t->grad_acc = t->be->alloc(t->be, t->shards.shard * sizeof(float));
            if (!t->grad_acc || buckets_stage2(&t->buckets, &t->model, t->grad_acc, ring, err, sizeof err)) {
                log_error("mingpt: error: %s\n", t->grad_acc ? err : "out of memory");
                return EXIT_RUNTIME;
            }
            log_info("ZeRO stage 2: no rank holds the whole gradient: %zu bytes of reduced shard and a %zu-byte ring of "
                     "bucket gradients (MINGPT_ZERO2_RING=%s: %s; the largest bucket: %zu; the whole gradient: %zu)\n",
                     t->shards.shard * sizeof(float), ring * sizeof(float), t->ring_overlap ? "overlap" : "min",
                     t->ring_overlap ? "room for a bucket's reduction to overlap the next bucket's backward"
                                     : "the smallest that works, about the largest bucket",
                     buckets_largest(&t->buckets) * sizeof(float), t->model.num_params * sizeof(float));
        }
    }
    return 0;
}

// ============================================================================
// Training
// ============================================================================
// Iterations in an epoch that starts at global sample `start` (this rank's share / rows per step).
static long iters_from(const Trainer *t, long start) {
    const long n = t->split.n_train - start, w = t->world;
    const long rows = n <= 0 ? 0 : (n + w - 1) / w;
    return (rows + (long)t->A * t->B - 1) / ((long)t->A * t->B);
}

// Outcome of a part of an epoch: go on, or stop the run with an exit code.
enum { GO_ON = -1 };

// One iteration on this rank's rows [first, first + n) of the epoch's order: micro-batches of B,
// one train_step (forward, backward, all-reduce, AdamW). The iteration counts even when its
// update was skipped (fp16 overflow, outlier norm). Returns GO_ON, or EXIT_RUNTIME when training
// cannot go on (a non-finite loss, too many fp16 overflows in a row).
static int run_batch(Trainer *t, long first, int n, StepResult *res) {
    const OptimizerConfig *oc = &t->cfg->optim;
    const TrainerConfig *tc = &t->cfg->trainer;
    const double t0 = now_s();
    comm_publish_iter(t->comm, t->pr.iter_num + 1);
    chardataset_rows(&t->ds, t->split.train, t->order, first, n, t->x, t->y);
    int n_micro = 0;
    for (int done = 0; done < n; done += t->B, n_micro++)
        t->mb[n_micro] = (MicroBatch){ t->x + (long)done * t->T, t->y + (long)done * t->T,
                                       n - done < t->B ? n - done : t->B };
    TrainStep ts = {
        .model = &t->model, .opt = &t->opt, .scaler = &t->pr.scaler, .comm = t->comm,
        .buckets = t->world > 1 ? &t->buckets : NULL, .grad_clip = tc->grad_norm_clip,
        .lr = (float)lr_at(oc, t->pr.iter_num), .beta1 = (float)oc->betas[0], .beta2 = (float)oc->betas[1],
        .eps = (float)oc->eps, .weight_decay = (float)oc->weight_decay,
        .spike = tc->skip_spike_zscore > 0 ? &t->spike : NULL, .skip_zscore = tc->skip_spike_zscore,
        .shards = t->zero ? &t->shards : NULL, .overlap_gather = t->gather_overlap,
    };
    if (t->grad_comm) comm_stats_reset(t->grad_comm);
    // SIGUSR1s not yet served become one save request (the count only grows in the handler)
    const int usr1 = g_save_requests, requests = (g_stop_signal ? STEP_STOP : 0) |
                                                 (usr1 != t->save_requests_seen ? STEP_SAVE : 0);
    t->save_requests_seen = usr1;
    if (train_step(&ts, t->mb, n_micro, t->B, t->T, t->pr.seed, (uint64_t)t->pr.iter_num, requests, res))
        comm_failed(t, t->grad_comm ? t->grad_comm : t->comm);
    if (t->grad_comm) {
        comm_stats_add(&t->comm_total, &t->grad_comm->stats);
        comm_stats_add(&t->since_log.comm, &t->grad_comm->stats);
        t->comm_iters++;
    }
    if (res->nonfinite) {   // the update was not applied: parameters and snapshot stay good
        char loss[32], norm[32];
        log_error("mingpt: error: the training loss is %s (gradient norm %s) at iteration %ld: the update is "
                  "not applied; stopping (the last snapshot is intact; a lower optimizer_config.learning_rate "
                  "may help)\n", fmt_num(res->loss, loss, sizeof loss), fmt_num(res->norm, norm, sizeof norm),
                  t->pr.iter_num + 1);
        return EXIT_RUNTIME;
    }
    if (res->spike) {
        log_info("iter %ld: gradient norm %.4g is an outlier (z-score %.2f > trainer_config.skip_spike_zscore "
                 "%g): update skipped\n", t->pr.iter_num + 1, res->norm, res->zscore, tc->skip_spike_zscore);
    } else if (res->applied == 0) {
        log_info("iter %ld: gradient overflow, step skipped; loss scale now %g\n", t->pr.iter_num + 1,
                 (double)t->pr.scaler.scale);
    } else if (res->applied < 0) {
        log_error("mingpt: error: gradients are not finite for %d steps in a row at iteration %ld; "
                  "stopping (the last snapshot is intact)\n", LOSS_SCALER_MAX_SKIPS, t->pr.iter_num + 1);
        return EXIT_RUNTIME;
    }
    t->pr.iter_num++;
    t->pr.samples_in_epoch += (long)n * t->world;
    t->r.iters_this_run++;
    t->r.final_train_loss = res->loss;
    t->tokens += (double)res->tokens;
    t->tokens_total += (double)res->tokens;
    t->since_log.tokens += (double)res->tokens;
    t->since_log.iters++;
    t->train_time += now_s() - t0;
    if (t->r.iters_this_run > 1) { t->iter_s_sum += now_s() - t0; t->iter_s_n++; }
    return GO_ON;
}

// The next multiple of `every` after iteration `it` (LONG_MAX when every <= 0).
static long next_multiple(long it, long every) { return every > 0 ? add_sat(it - it % every, every) : LONG_MAX; }
static long min3(long a, long b, long c) { return a < b ? (a < c ? a : c) : (b < c ? b : c); }

// After each iteration: the training line and its metrics.jsonl line every log_every iterations
// (and the first and the last; trainer/metrics.h), then the status line and the time estimate
// (trainer/progress.h). epoch_end: the iteration that ends this epoch.
static void log_step(Trainer *t, long epoch, long epoch_end, const StepResult *res) {
    const TrainerConfig *tc = &t->cfg->trainer;
    const long it = t->pr.iter_num, end = t->total_iters;
    if (it % tc->log_every == 0 || it == 1 || it == end) {
        MetricsTrain m = {
            .iter = it, .epoch = epoch, .loss = res->loss, .lr = lr_at(&t->cfg->optim, it - 1), .grad_norm = res->norm,
            .loss_scale = t->pr.scaler.scale, .tokens = t->tokens_total, .time_s = run_time_s(t),
        };
        metrics_log_train(&t->metrics, &t->since_log, &m, end, now_s());
    }
    const StatusInfo in = {
        .epoch = epoch, .iter = it, .total_iters = end, .loss = res->loss,
        .tokens_per_s = t->train_time > 0 ? t->tokens / t->train_time : NAN, .elapsed_s = now_s() - t->t_start,
        .next_eval = min3(next_multiple(it, tc->eval_every), epoch_end, end),
        .next_save = min3(next_multiple(it, tc->save_every_iters), epoch % tc->save_every == 0 ? epoch_end : LONG_MAX,
                          end),
    };
    progress_note(&t->status, &t->clock, &in, iters_from(t, 0));
}

// An evaluation every eval_every iterations (the last iteration's is train's). Returns GO_ON or
// the exit code to stop with.
static int maybe_evaluate(Trainer *t, long epoch) {
    const TrainerConfig *tc = &t->cfg->trainer;
    if (tc->eval_every <= 0 || t->pr.iter_num % tc->eval_every != 0 || t->pr.iter_num == t->total_iters) return GO_ON;
    if (evaluate(t) == EVAL_STOPPED) return eval_interrupted(t);
    report_eval(t, epoch, true);
    t->since_log.t0 = now_s();   // the next training line's rates leave the evaluation out
    return note_test_loss(t) == SAVE_CANCELLED ? save_cancelled(t) : GO_ON;
}

// A snapshot every save_every_iters iterations (the last iteration's is train's) or when a
// signal asked for one (SIGUSR1): a failed write warns and training goes on. Then a stop that a
// signal asked for (SIGINT, SIGTERM) saves and stops. Returns GO_ON or the exit code to stop with.
static int maybe_save(Trainer *t, const StepResult *res) {
    const TrainerConfig *tc = &t->cfg->trainer;
    int saved = SAVE_OK;
    if (tc->save_every_iters > 0 && t->pr.iter_num % tc->save_every_iters == 0 && t->pr.iter_num != t->total_iters)
        saved = save_snapshot(t, SAVE_PERIODIC);
    else if (res->save && t->saved_iter != t->pr.iter_num) {
        log_info("Snapshot requested by a signal (SIGUSR1) at iteration %ld\n", t->pr.iter_num);
        log_flush_stdout();
        saved = save_snapshot(t, SAVE_REQUESTED);
    }
    if (saved == SAVE_CANCELLED) return save_cancelled(t);
    if (res->stop) return stop_with_snapshot(t);   // a signal reached some rank: all stop here
    return GO_ON;
}

// Rank 0 under mpirun, once two iterations after the first are timed: warns once when one
// iteration plus one save (timed, or estimated from the snapshot's size) exceeds mpirun's grace.
static void check_kill_grace(Trainer *t) {
    if (t->grace_s < 0 || t->grace_warned || t->iter_s_n < 2) return;
    const double bytes = 3.0 * (double)t->model.num_params * sizeof(float);
    const bool measured = t->save_s >= 0;
    char msg[1024];
    if (!kill_grace_warning(t->grace_s, t->iter_s_sum / (double)t->iter_s_n,
                            measured ? t->save_s : bytes / KILL_GRACE_WRITE_BPS, measured, bytes,
                            t->cfg->trainer.save_every_iters, msg, sizeof msg))
        return;
    log_error("%s\n", msg);
    t->grace_warned = true;
}

// This rank's share of the rest of the epoch, one iteration at a time, as llm.c's loop: the
// step, its log, then evaluation and snapshots when due. Returns GO_ON or the exit code to stop with.
static int run_epoch(Trainer *t, long epoch) {
    const TrainerConfig *tc = &t->cfg->trainer;
    dsampler_set_epoch(&t->train_sampler, epoch);
    const long n_order = dsampler_indices_from(&t->train_sampler, t->pr.samples_in_epoch, t->order, t->scratch);
    const long rows_per_iter = (long)t->A * t->B;
    const long epoch_end = add_sat(t->pr.iter_num, (n_order + rows_per_iter - 1) / rows_per_iter);
    metrics_window_start(&t->since_log, now_s());
    for (long first = 0; first < n_order; first += rows_per_iter) {
        if (tc->max_iters > 0 && t->pr.iter_num >= tc->max_iters) return GO_ON;
        StepResult res;
        int rc = run_batch(t, first, (int)(n_order - first < rows_per_iter ? n_order - first : rows_per_iter), &res);
        if (rc != GO_ON) return rc;
        log_step(t, epoch, epoch_end, &res);
        check_kill_grace(t);
        if ((rc = maybe_evaluate(t, epoch)) != GO_ON || (rc = maybe_save(t, &res)) != GO_ON) return rc;
    }
    return GO_ON;
}

static int train(Trainer *t) {
    const TrainerConfig *tc = &t->cfg->trainer;
    const long per_epoch = iters_from(t, 0);
    // Iterations this run will reach: the rest of the current epoch, then whole epochs.
    long total_iters = t->pr.iter_num;
    if (t->pr.epochs_run < tc->max_epochs)   // per_epoch < 2^28 (the sampler's limit), epochs < 2^31
        total_iters = add_sat(total_iters, iters_from(t, t->pr.samples_in_epoch) +
                                               per_epoch * (tc->max_epochs - t->pr.epochs_run - 1));
    if (tc->max_iters > 0 && tc->max_iters < total_iters) total_iters = tc->max_iters;
    if (total_iters < t->pr.iter_num) total_iters = t->pr.iter_num;
    t->total_iters = total_iters;
    log_info("Training: %ld iterations per epoch, %d epochs, %ld iterations in all, batch %d x %d tokens\n",
             per_epoch, tc->max_epochs, total_iters, t->B, t->T);
    log_info("Global batch: %ld sequences = batch_size %d x grad_accum_steps %d x world_size %d\n",
             (long)t->B * t->A * t->world, t->B, t->A, t->world);
    log_flush_stdout();

    bool done = t->pr.iter_num >= total_iters || t->pr.epochs_run >= tc->max_epochs;
    if (done) {
        log_info("Nothing to train: the snapshot already has %ld iterations\n", t->pr.iter_num);
        if (evaluate(t) == EVAL_STOPPED) return eval_interrupted(t);
        report_eval(t, epoch_now(&t->pr), false);
    }
    while (!done) {
        const long epoch = t->pr.epochs_run + 1;   // 1-based, as in the tutorial
        const int rc = run_epoch(t, epoch);
        if (rc != GO_ON) return rc;
        const bool epoch_done = iters_from(t, t->pr.samples_in_epoch) == 0;
        if (epoch_done) { t->pr.epochs_run = epoch; t->pr.samples_in_epoch = 0; }
        done = t->pr.iter_num >= total_iters || t->pr.epochs_run >= tc->max_epochs;
        // Evaluate at every epoch end and at the end of training; snapshot every
        // save_every epochs and always after the last iteration.
        if (evaluate(t) == EVAL_STOPPED) return eval_interrupted(t);
        report_eval(t, epoch, true);
        int saved = note_test_loss(t) == SAVE_CANCELLED ? SAVE_CANCELLED : SAVE_OK;   // a failed best save warns
        // The final save must succeed (exit 1 otherwise); an epoch's periodic one may fail.
        if (saved == SAVE_OK && done) saved = save_snapshot(t, SAVE_FINAL);
        else if (saved == SAVE_OK && epoch_done && t->pr.epochs_run % tc->save_every == 0)
            saved = save_snapshot(t, SAVE_PERIODIC) == SAVE_CANCELLED ? SAVE_CANCELLED : SAVE_OK;
        if (saved == SAVE_CANCELLED) return save_cancelled(t);
        if (saved != SAVE_OK) return EXIT_RUNTIME;
        // Between epochs (or after the last iteration): a signal during the evaluation or the
        // save is acted on here, before another batch.
        if (stop_requested(t)) return stop_with_snapshot(t);
    }
    return EXIT_OK;
}

static void teardown(Trainer *t) {
    free(t->x); free(t->y); free(t->mb);
    free(t->order); free(t->scratch);
    evaluator_free(&t->eval);
    buckets_free(&t->buckets);
    if (t->grad_acc) t->be->free(t->be, t->grad_acc);
    if (t->grad_comm && t->grad_comm != t->comm) t->grad_comm->destroy(t->grad_comm);
    adamw_free(&t->opt);
    gpt_free(&t->model);
    if (t->be) t->be->destroy(t->be);
    datasplit_free(&t->split);
    chardataset_free(&t->ds);
}

// Why a run stopped before its first iteration, in words, for its last line: "the snapshot is at
// iteration 2000 (max_iters 2000)".
static void nothing_to_train(const Trainer *t, char *buf, size_t len) {
    const TrainerConfig *tc = &t->cfg->trainer;
    const long it = t->pr.iter_num;
    const char *at = t->saved_iter >= 0 ? "the snapshot is at" : "training is at";
    if (tc->max_iters > 0 && it >= tc->max_iters)
        snprintf(buf, len, "%s iteration %ld (max_iters %ld)", at, it, tc->max_iters);
    else if (t->pr.epochs_run >= tc->max_epochs)
        snprintf(buf, len, "%s iteration %ld, the end of epoch %ld (max_epochs %d)", at, it, t->pr.epochs_run,
                 tc->max_epochs);
    else
        snprintf(buf, len, "%s iteration %ld, where this run ends", at, it);
}

// ============================================================================
// The run
// ============================================================================
int trainer_run(const Config *cfg, Comm *comm, TrainResult *res) { return trainer_run_in(cfg, comm, NULL, NULL, res); }

int trainer_run_in(const Config *cfg, Comm *comm, const char *run_dir, const TrainerHook *hook, TrainResult *res) {
    Trainer t = { .cfg = cfg, .comm = comm, .rank = comm->rank, .world = comm->world_size, .saved_iter = -1,
                  .run_dir = comm->rank == 0 ? run_dir : NULL, .hook = hook, .save_s = -1,
                  .grace_s = comm->rank == 0 && comm->world_size > 1 ? kill_grace_mpirun() : -1 };
    t.r = (TrainResult){ NAN, NAN, 0, 0, 0, 0, 0, 0, 0 };
    const double t_start = now_s();
    t.t_start = t_start;
    comm->timeout_s = cfg->trainer.collective_timeout_s;
    fatal_set_handler(on_fatal, comm);
    signal_thread_start();   // mingpt's main started it; a program embedding the trainer gets it here
    // SIGUSR1 from the start, and left installed after (its default action ends the process,
    // e.g. between the jobs of a sweep); one received from here on is served at the first
    // iteration. SIGINT/SIGTERM keep their default (nothing to save) until training.
    g_saving = g_cancel_save = 0;
    t.save_requests_seen = g_save_requests;
    signal(SIGUSR1, on_signal);
    int rc = agree(&t, setup_local(&t));
    if (!rc) rc = agree(&t, setup_model(&t));
    if (!rc) rc = agree(&t, setup_buckets(&t));
    if (!rc) rc = bcast_params(&t);
    if (!rc) {
        // tokens since iteration 0: whole epochs of this world's padded order, then this epoch's part
        t.tokens_total = (double)t.T * ((double)t.pr.epochs_run * t.train_sampler.total_size + t.pr.samples_in_epoch);
        char err[ERRLEN];
        if (hook && hook->started) *hook->started = true;
        if (metrics_open(&t.metrics, t.run_dir, t.pr.iter_num, &t.time_before, err, sizeof err))
            log_error("mingpt: warning: %s; the run goes on without metrics.jsonl\n", err);
        status_init(&t.status, t.rank);
        // the training lines' MFU: a NaN peak_tflops (unknown) writes null
        t.since_log = (MetricsWindow){ .show_comm = t.world > 1, .flops_per_token = gpt_flops_per_token(&t.model.shape, t.T),
                                       .peak_flops = cfg->trainer.peak_tflops * 1e12 * t.world };
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        g_stop_signal = 0;
        comm->stop_flag = &g_stop_signal;   // the watchdog: a stop while waiting for a killed rank
        rc = train(&t);
        gathers_wait(&t);   // (a step that ends training: its all-gathers, before the statistics and teardown)
        comm->stop_flag = NULL;
        comm_publish_iter(comm, 0);
        status_end(&t.status);
        metrics_close(&t.metrics);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
    }
    // The end: the last lines too, also after a stop; not after a second signal (EXIT_ABORTED),
    // which asks to exit now (drawing a plot can take seconds: fonts, fsync).
    if (t.r.iters_this_run > 0 && rc != EXIT_ABORTED) after_eval(&t);
    t.r.iters = t.pr.iter_num;
    t.r.tokens_per_s = t.train_time > 0 ? t.tokens / t.train_time : 0;
    t.r.wall_s = now_s() - t_start;
    if (t.comm_iters > 0) {
        const CommStats *s = &t.comm_total;
        t.r.allreduce_ms = 1e3 * s->t_busy / t.comm_iters;
        t.r.allreduce_hidden = s->t_busy > 0 ? 1.0 - fmin(1.0, s->t_exposed / s->t_busy) : 1.0;
        t.r.buckets_early = (double)s->n_started_early / t.comm_iters;
        log_info("all-reduce: %.1f buckets per iteration, %.1f started before the backward finished, "
                 "%.2f MB per iteration, %.1f ms busy and %.1f ms exposed per iteration (%.0f%% hidden)\n",
                 (double)s->n_buckets / t.comm_iters, t.r.buckets_early, s->bytes / t.comm_iters / 1e6,
                 t.r.allreduce_ms, 1e3 * s->t_exposed / t.comm_iters, 100 * t.r.allreduce_hidden);
        if (t.zero) {   // the parameter all-gathers: overlapped with the next forward, or blocking
            const bool overlapped = t.gather_overlap && t.grad_comm->allgather_start;
            log_info("all-gather: %s, %.1f per iteration%s, %.2f ms busy and %.2f ms exposed per iteration "
                     "(%.0f%% hidden)\n", overlapped ? "overlapped" : "blocking", (double)s->n_gathers / t.comm_iters,
                     overlapped ? " started before the next forward" : "", 1e3 * s->t_gather / t.comm_iters,
                     1e3 * s->t_gather_exposed / t.comm_iters,
                     100 * (s->t_gather > 0 ? 1.0 - fmin(1.0, s->t_gather_exposed / s->t_gather) : 0.0));
        }
    }
    if (rc == EXIT_OK && t.r.iters_this_run == 0) {   // a rerun of a finished run: no train loss to give
        char why[160], loss[48] = "";
        nothing_to_train(&t, why, sizeof why);
        if (isfinite(t.r.test_loss)) snprintf(loss, sizeof loss, ", test loss %.4f", t.r.test_loss);
        log_info("done: nothing to train: %s%s, %.1f s\n", why, loss, t.r.wall_s);
    } else if (rc == EXIT_OK) {
        log_info("done: %ld iterations (%ld this run), train loss %.4f, test loss %.4f, %.0f tok/s, %.1f s\n",
                 t.r.iters, t.r.iters_this_run, t.r.final_train_loss, t.r.test_loss, t.r.tokens_per_s, t.r.wall_s);
    }
    if (res) *res = t.r;
    teardown(&t);
    fatal_set_handler(NULL, NULL);
    return rc;
}
