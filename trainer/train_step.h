// trainer/train_step.h — one optimizer step, shared by the trainer and the benchmarks:
//
//   zero_grad
//   for each micro-batch m (gradient accumulation; no communication, DDP's no_sync):
//       forward with loss, dropout rows keyed by the global batch row (rank + W*(m*B + j))
//       backward; on the last micro-step each gradient bucket's all-reduce starts as soon
//       as the backward pass has finished it (trainer/buckets.h)
//   wait for every bucket; one host all-reduce of (loss sum, tokens, stop flag)
//   unscale (fp16 loss scaling) + overflow check, global-norm clip, AdamW
//
// Averaging happens once, in the loss gradient: micro-batch m's d(loss) is scaled by
// tokens_m / tokens_rank / W, so the summed all-reduce leaves the mean over every token of
// every micro-batch of every rank (ranks have equal token counts: the DistributedSampler pads).
#ifndef MINGPT_TRAIN_STEP_H
#define MINGPT_TRAIN_STEP_H

#include <stdint.h>

#include "dist/comm.h"
#include "kernels/loss_scaler.h"
#include "model/gpt.h"
#include "trainer/adamw.h"
#include "trainer/buckets.h"

typedef struct {
    GPT *model;
    AdamW *opt;
    LossScaler *scaler;     // fp16 dynamic loss scaling (disabled: scale 1)
    Comm *comm;             // host communicator: comm_single_create() in one process
    Buckets *buckets;       // the gradient buckets when comm->world_size > 1, else NULL
    double grad_clip;       // global-norm clip (<= 0: off)
    float lr, beta1, beta2, eps, weight_decay;   // this step's AdamW hyper-parameters
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
    int applied;            // 1: AdamW step taken; 0: skipped (fp16 overflow); -1: too many skips in a row
    int stop;               // 1 when any rank passed stop_local != 0 (a collective decision)
} StepResult;

// Runs one optimizer step over n_micro micro-batches of at most B rows each (B = the
// configured batch_size: it places the rows in the global batch). seed/step key the dropout
// masks. stop_local is this rank's wish to stop (a signal); out->stop is the job's decision.
// Returns 0, or non-zero after a communicator error (message in the communicator's err).
int train_step(TrainStep *ts, const MicroBatch *mb, int n_micro, int B, int T, uint64_t seed, uint64_t step,
               int stop_local, StepResult *out);

#endif
