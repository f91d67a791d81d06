// trainer/trainer.h — the training loop: epochs over a DistributedSampler, AdamW,
// clipping, evaluation, snapshots and exact resume.
#ifndef MINGPT_TRAINER_H
#define MINGPT_TRAINER_H

#include "config/config.h"
#include "dist/comm.h"

// Exit codes of the mingpt binary (documented in README.md).
// EXIT_ABORTED: a second SIGINT/SIGTERM while a snapshot was being written abandoned it (the
// file on disk keeps the previous snapshot); 128 + SIGINT, as a shell reports Ctrl-C.
enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2, EXIT_INTERRUPTED = 75, EXIT_ABORTED = 130 };

typedef struct {
    double final_train_loss;  // loss of the last training iteration (NaN if none ran)
    double test_loss;         // last evaluation on the test split (NaN if none ran)
    long iters;               // total iterations since the start of training
    long iters_this_run;      // iterations run by this process
    double tokens_per_s;      // training throughput of this run
    double wall_s;            // wall time of this run
    // Data-parallel runs (0 in one process): gradient all-reduce per iteration.
    double allreduce_ms;      // time a bucket was being reduced, ms per iteration
    double allreduce_hidden;  // fraction of it the backward pass hid (1 - exposed / busy)
    double buckets_early;     // buckets per iteration started before the backward finished
} TrainResult;

// Trains as cfg says, resuming from cfg->trainer.snapshot_path when that file exists, on
// this process's rank of `comm` (comm_single_create() for one process; every rank of a
// data-parallel job calls it with the same cfg). Logs to stdout (rank 0), errors to stderr
// (naming the file or key; "[rank r] " on other ranks). On SIGINT/SIGTERM to any rank, every
// rank finishes the same iteration (or, during an evaluation, stops before the same next batch),
// rank 0 saves a snapshot, and all return EXIT_INTERRUPTED; on SIGUSR1 to any rank, rank 0 saves
// a snapshot after the current iteration and training goes on; a second SIGINT/SIGTERM while
// saving abandons the write and returns EXIT_ABORTED.
// Returns one of the exit codes above, the same on every rank; *res (may be NULL) receives
// the results. A communicator failure aborts the whole job (comm->abort).
int trainer_run(const Config *cfg, Comm *comm, TrainResult *res);

// What a caller of trainer_run_in adds to a run.
// after_eval: what rank 0 runs in a run directory after each evaluation (once its metrics.jsonl
// line is written) and at the end of the run. app/hydra_app.c passes report/'s loss.svg writer
// (report_loss_svg_hook, report/loss_plot.h), so that trainer/ depends on nothing of report/.
// It reports its own failures and never stops training.
// loss_scaler_growth_interval: the fp16 loss scaler's clean steps before the scale doubles
// (LossScaler.growth_interval, trainer/loss_scaler.h); 0 keeps LOSS_SCALER_GROWTH_INTERVAL.
// No config key sets it: tests shorten it to cross scale changes within a few iterations. Every
// rank, and every run that resumes the same snapshot, must pass the same value.
// started (may be NULL): set to true once the setup succeeded on every rank and training
// begins (before the first iteration), so that a caller can tell a run that failed before
// training from one that failed in it.
typedef struct {
    void (*after_eval)(void *ctx, const char *run_dir, const Config *cfg);
    void *ctx;
    long loss_scaler_growth_interval;
    bool *started;
} TrainerHook;

// trainer_run in a run directory: rank 0 also writes <run_dir>/metrics.jsonl there
// (trainer/metrics.h; a failure to write it is a warning), calls hook->after_eval (hook may be
// NULL) and, on a terminal, draws the live status line (trainer/progress.h). run_dir NULL: as
// trainer_run (with the hook's loss_scaler_growth_interval).
int trainer_run_in(const Config *cfg, Comm *comm, const char *run_dir, const TrainerHook *hook, TrainResult *res);

#endif
