// trainer/trainer.h — the training loop: epochs over a DistributedSampler, AdamW,
// clipping, evaluation, snapshots and exact resume.
#ifndef MINGPT_TRAINER_H
#define MINGPT_TRAINER_H

#include "config/config.h"

// Exit codes of the mingpt binary (documented in README.md).
enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2, EXIT_INTERRUPTED = 75 };

typedef struct {
    double final_train_loss;  // loss of the last training iteration (NaN if none ran)
    double test_loss;         // last evaluation on the test split (NaN if none ran)
    long iters;               // total iterations since the start of training
    long iters_this_run;      // iterations run by this process
    double tokens_per_s;      // training throughput of this run
    double wall_s;            // wall time of this run
} TrainResult;

// Trains as cfg says, resuming from cfg->trainer.snapshot_path when that file exists.
// Logs to stdout, errors to stderr (naming the file or key). On SIGINT/SIGTERM it
// finishes the current iteration, saves a snapshot and returns EXIT_INTERRUPTED.
// Returns one of the exit codes above; *res (may be NULL) receives the results.
int trainer_run(const Config *cfg, TrainResult *res);

#endif
