// trainer/evaluate.c — see evaluate.h.
#include "trainer/evaluate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/sampler.h"

int evaluator_init(Evaluator *ev, const DataSplit *split, bool contiguous, int T, int eval_stride, int eval_iters,
                   int batch_size, int world_size, uint64_t seed, char *err, size_t errlen) {
    memset(ev, 0, sizeof *ev);
    ev->stride = eval_stride == 0 ? T : eval_stride;
    if (evalwindows_make(&ev->windows, split, contiguous, T, ev->stride, err, errlen)) return 1;
    const long n = ev->windows.n;
    DistributedSampler sampler;
    dsampler_init(&sampler, n, 1, 0, true, seed, false);
    ev->order = malloc(sizeof(long) * (size_t)(n + 1));
    long *scratch = malloc(sizeof(long) * (size_t)(n + 1));
    if (!ev->order || !scratch || dsampler_indices(&sampler, ev->order, scratch) != n) {
        free(scratch);
        evaluator_free(ev);
        snprintf(err, errlen, "out of memory for the order of %ld evaluation windows", n);
        return 1;
    }
    free(scratch);
    // eval_iters counts global batches (batch_size x world_size windows), compared as a batch
    // count so that a huge eval_iters cannot overflow
    const long per_batch = (long)batch_size * world_size;
    ev->n_eval = n;
    if (eval_iters > 0 && eval_iters < (n + per_batch - 1) / per_batch) ev->n_eval = eval_iters * per_batch;
    return 0;
}

void evaluator_free(Evaluator *ev) {
    evalwindows_free(&ev->windows);
    free(ev->order);
    memset(ev, 0, sizeof *ev);
}

int evaluator_run(const Evaluator *ev, GPT *m, const CharDataset *ds, Comm *comm,
                  const volatile sig_atomic_t *stop, int32_t *x, int32_t *y, double *loss) {
    const int W = comm->world_size, T = ds->block_size, rows = m->B_infer;
    const long n_eval = ev->n_eval;
    // rank 0 has the most windows (r, r+W, ... < n_eval): every rank runs its batch count
    const long most = (n_eval + W - 1) / W, n_batches = (most + rows - 1) / rows;
    double sums[2] = { 0.0, 0.0 };   // loss, targets
    *loss = NAN;
    long k = comm->rank;
    for (long b = 0; b < n_batches; b++) {
        double want_stop = *stop ? 1.0 : 0.0;
        if (comm->allreduce_host(comm, &want_stop, 1, COMM_MAX)) return EVAL_COMM_ERROR;
        if (want_stop > 0) return EVAL_STOPPED;
        int n = 0;
        for (; n < rows && k < n_eval; n++, k += W)
            evalwindows_get(&ev->windows, ds, ev->order[k], x + (long)n * T, y + (long)n * T);
        if (n == 0) continue;
        gpt_forward_inference(m, x, y, n, T);
        // summed in double in a fixed order: per token, not per batch mean
        for (long i = 0; i < (long)n * T; i++)
            if (y[i] != -1) { sums[0] += m->host_losses[i]; sums[1] += 1.0; }
    }
    if (comm->allreduce_host(comm, sums, 2, COMM_SUM)) return EVAL_COMM_ERROR;
    *loss = sums[1] > 0 ? sums[0] / sums[1] : NAN;
    return EVAL_DONE;
}
