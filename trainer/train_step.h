// trainer/train_step.h — one optimizer step, shared by the trainer and the benchmarks:
//
//   zero_grad
//   for each micro-batch m (gradient accumulation; no communication, DDP's no_sync):
//       forward with loss, dropout rows keyed by the global batch row (rank + W*(m*B + j))
//       backward; on the last micro-step each gradient bucket's all-reduce starts as soon
//       as the backward pass has finished it (trainer/buckets.h)
//   wait for every bucket; one host all-reduce of (loss sum, tokens, stop and save requests)
//   unscale (fp16 loss scaling) + overflow check, global-norm clip: one factor, applied by
//   AdamW as it reads the gradients (the gradient buffer keeps the reduced, unscaled values)
//   no AdamW step when the loss or the norm is not finite, or the norm is an outlier
//   (SpikeDetector, trainer/spike_detector.h); else AdamW
// In one process on a backend with optimizer_tail and graphs (CUDA), without outlier skipping:
// the norm, the unscale / clip / skip decision and AdamW run on the backend at the end of the last
// micro-step's graph (Backend.optimizer_tail, the same decisions from the same values), and the
// host reads the result with the losses after the whole step is queued; the same bits, the same
// StepResult.
//
// ZeRO (TrainStep.shards): the buckets are reduce-scattered instead of all-reduced (stage 2: on
// every micro-step, into the rank's shard), the norm comes from the shards' sums of squares in
// the same host all-reduce, AdamW updates the rank's shard, and the shards are all-gathered
// (TrainStep.overlap_gather: bucket by bucket, overlapped with the next step's forward).
//
// Averaging happens once, in the loss gradient: micro-batch m's d(loss) is scaled by
// tokens_m / tokens_rank / W, so the summed all-reduce leaves the mean over every token of
// every micro-batch of every rank (ranks have equal token counts: the DistributedSampler pads).
#ifndef MINGPT_TRAIN_STEP_H
#define MINGPT_TRAIN_STEP_H

#include <stdint.h>

#include "dist/comm.h"
#include "dist/shard.h"
#include "trainer/loss_scaler.h"
#include "model/gpt.h"
#include "trainer/adamw.h"
#include "trainer/buckets.h"
#include "trainer/spike_detector.h"

typedef struct {
    GPT *model;
    AdamW *opt;
    LossScaler *scaler;     // fp16 dynamic loss scaling (disabled: scale 1)
    Comm *comm;             // host communicator: comm_single_create() in one process
    Buckets *buckets;       // the gradient buckets when comm->world_size > 1, else NULL
    double grad_clip;       // global-norm clip (<= 0: off)
    float lr, beta1, beta2, eps, weight_decay;   // this step's AdamW hyper-parameters
    SpikeDetector *spike;   // NULL: no outlier detection; else scores every applicable norm
    double skip_zscore;     // > 0: skip the update when the norm's z-score exceeds this
    // ZeRO stage 1 (NULL: stage 0): the buckets are reduce-scattered (buckets_shard), so this
    // rank's shard of the gradient buffer holds the summed gradients; the norm is the all-reduce
    // of the shards' sums of squares (in the step's one host all-reduce); unscale / clip / AdamW
    // touch this rank's shard only (opt holds its moments); the updated shards are all-gathered
    // into every rank's parameters.
    const ShardPlan *shards;
    // ZeRO, on a gradient communicator with allgather_start: 1 starts the all-gather of the
    // updated parameters per bucket and returns without waiting (buckets_gather_start); the next
    // train_step's forward waits for each layer's bucket before reading it, and whatever else
    // reads the parameters first calls buckets_gather_wait_all. 0 (or no allgather_start): one
    // blocking all-gather at the end of the step. The parameters are the same bit for bit.
    int overlap_gather;
} TrainStep;

// One micro-batch: rows windows of T tokens, host memory.
typedef struct {
    const int32_t *x, *y;   // (rows, T)
    int rows;
} MicroBatch;

typedef struct {
    double loss;            // mean token loss over every micro-batch of every rank
    double norm;            // global gradient norm before clipping (after unscaling)
    long tokens;            // tokens of the step, all ranks
    int applied;            // 1: AdamW step taken; 0: skipped (fp16 overflow, nonfinite or spike below);
                            // -1: too many fp16 overflows in a row
    int nonfinite;          // 1: the loss, or the norm of gradients about to be applied, is NaN or
                            // inf; no AdamW step (parameters and moments untouched)
    int spike;              // 1: the norm's z-score exceeded skip_zscore; no AdamW step
    double zscore;          // the norm's z-score (NaN when not scored)
    int stop;               // 1 when any rank asked for STEP_STOP (a collective decision)
    int save;               // 1 when any rank asked for STEP_SAVE
} StepResult;

// What a rank asks of the job with a step (train_step's `requests`, OR'ed): stop after this
// step (SIGINT/SIGTERM), save a snapshot after it and go on (SIGUSR1).
enum { STEP_STOP = 1, STEP_SAVE = 2 };

// Runs one optimizer step over n_micro micro-batches of at most B rows each (B = the
// configured batch_size: it places the rows in the global batch). seed/step key the dropout
// masks. `requests` is this rank's STEP_* wishes (from signals); out->stop and out->save are
// the job's decisions, taken in the step's one host all-reduce.
// Every decision depends only on all-reduced values (loss, gradients), so every rank takes the
// same one. Returns 0, or non-zero after a communicator error (message in the communicator's err).
int train_step(TrainStep *ts, const MicroBatch *mb, int n_micro, int B, int T, uint64_t seed, uint64_t step,
               int requests, StepResult *out);

#endif
