// trainer/evaluate.h — the test loss: the mean next-character loss over the evaluation windows
// (data/eval_windows.h: every data_config.eval_stride-th test window, by default block_size, so
// each test character is predicted once), dropout off, forward only.
//
//   windows   the evaluation windows of the test split
//   order     the test sampler's epoch-0 order of them (a DistributedSampler of one rank, seeded
//             like training, data/sampler.h); trainer_config.eval_iters > 0 keeps its first
//             eval_iters batches of batch_size x world_size windows, 0 keeps them all
//   batches   rank r takes order[r], order[r+W], ... in batches of up to GPT.B_infer rows (the
//             most the training activations' memory holds in gpt_forward_inference's layout);
//             every rank runs the same number of batches and the loss sums are all-reduced, so
//             the result does not depend on the number of ranks (up to float rounding: a window's
//             logits come from GEMMs of other shapes in other batches)
//   stop      before each batch the ranks all-reduce their stop flags (a signal): when any is set
//             every rank stops there, within one batch of the signal
#ifndef MINGPT_EVALUATE_H
#define MINGPT_EVALUATE_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "data/char_dataset.h"
#include "data/eval_windows.h"
#include "dist/comm.h"
#include "model/gpt.h"

typedef struct {
    EvalWindows windows;
    long *order;       // (windows.n) indices into windows, the test sampler's epoch-0 order
    long n_eval;       // the first n_eval of order are evaluated
    int stride;        // the stride in effect (eval_stride, or block_size for 0)
} Evaluator;

// Builds the evaluation of split's test side: block_size T, eval_stride in [0, T] (0 = T),
// eval_iters >= 0 batches of batch_size x world_size windows (0 = all), the sampler seeded with
// seed. Returns 0, or non-zero with a message in err (out of memory, a bad stride).
int evaluator_init(Evaluator *ev, const DataSplit *split, bool contiguous, int T, int eval_stride, int eval_iters,
                   int batch_size, int world_size, uint64_t seed, char *err, size_t errlen);
void evaluator_free(Evaluator *ev);

enum { EVAL_DONE = 0, EVAL_STOPPED = 1, EVAL_COMM_ERROR = -1 };

// Runs one evaluation of m (built for T = ds->block_size) on this rank of comm, x and y (host,
// m->B_infer * T int32 each) as batch buffers; every rank of comm calls it together. *stop is
// this rank's wish to stop (a signal handler's flag), polled between batches. Returns EVAL_DONE
// with *loss the mean over every evaluated target (NaN when there is none), EVAL_STOPPED when a
// rank's stop flag was set (*loss NaN, on every rank alike), or EVAL_COMM_ERROR after a
// communicator failure (message in comm->err).
int evaluator_run(const Evaluator *ev, GPT *m, const CharDataset *ds, Comm *comm,
                  const volatile sig_atomic_t *stop, int32_t *x, int32_t *y, double *loss);

#endif
