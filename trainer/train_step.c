// trainer/train_step.c — see train_step.h.
#include "trainer/train_step.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/clock.h"
#include "kernels/fatal.h"

// ZeRO: every rank's updated shard of the parameters to every rank (the same decision was taken
// everywhere, so all ranks call it or none).
static int all_gather_params(TrainStep *ts, const ShardPlan *sp) {
    Comm *gc = ts->buckets->comm;
    size_t *counts = malloc(2 * sizeof(size_t) * (size_t)sp->world), *displs = counts + sp->world;
    if (!counts) { snprintf(gc->err, sizeof gc->err, "[rank %d] out of memory for the all-gather", gc->rank); return 1; }
    for (int q = 0; q < sp->world; q++) {
        counts[q] = shard_count(sp, q);
        displs[q] = shard_lo(sp, q);
    }
    const double t0 = now_s();
    const int rc = gc->allgather(gc, ts->model->params_memory, counts, displs);
    gc->stats.t_gather_exposed += now_s() - t0;   // (the communicator counts its busy time)
    gc->stats.n_gathers++;
    free(counts);
    return rc;
}

// CUDA graphs for the micro-steps (gpt_forward_backward) unless MINGPT_CUDA_GRAPHS=0.
static int graphs_enabled(void) {
    const char *v = getenv("MINGPT_CUDA_GRAPHS");
    return !(v && strcmp(v, "0") == 0);
}

// The optimizer tail on the backend (Backend.optimizer_tail), queued after the last micro-step's
// backward, inside its graph: the gradient norm, the clip / skip decision and AdamW with no host
// wait in the step. ctx is the TrainStep (the same pointer every step, as a graph's key wants).
static void optimizer_tail(void *ctx) {
    TrainStep *ts = ctx;
    GPT *m = ts->model;
    adamw_tail_enqueue(ts->opt, m->params_memory, m->grads_memory, ts->beta1, ts->beta2, ts->eps, m->acts.losses,
                       m->targets, (size_t)m->cur_B * (size_t)m->cur_T);
}

int train_step(TrainStep *ts, const MicroBatch *mb, int n_micro, int B, int T, uint64_t seed, uint64_t step,
               int requests, StepResult *out) {
    GPT *m = ts->model;
    Comm *comm = ts->comm;
    const int W = comm->world_size, r = comm->rank;
    long rows = 0;
    for (int k = 0; k < n_micro; k++) rows += mb[k].rows;
    const double tokens_rank = (double)rows * T;
    const float scale = loss_scaler_scale(ts->scaler);

    // ---- forward + backward of every micro-batch; communication on the last only (stage 2: on each)
    // ZeRO stage 2: every micro-step's buckets are reduce-scattered into the rank's shard
    Buckets *z2 = ts->buckets && ts->buckets->z2 ? ts->buckets : NULL;
    // ZeRO with the all-gather overlapped: the last step's all-gathers may be in flight; the
    // forward waits for each layer's parameters before it reads them
    const int overlap = ts->buckets && ts->shards && ts->overlap_gather && ts->buckets->comm->allgather_start;
    // The step's end on the backend (one process, graphs, no outlier skip: its decision needs the
    // norm on the host before the update): every decision of the host path below, from the same
    // values with the same arithmetic, taken on the backend; the host then reads the result once.
    const bool tail = !ts->buckets && !ts->shards && comm->world_size == 1 && !(ts->spike && ts->skip_zscore > 0) &&
                      !overlap && m->be->graph_run && graphs_enabled() && m->grads_memory &&
                      adamw_tail_prepare(ts->opt, m->tensors, m->n_tensors, ts->lr, ts->beta1, ts->beta2,
                                         ts->weight_decay, scale, ts->grad_clip);
    gpt_zero_grad(m);   // (stage 2: no gradient buffer; each bucket's ring space is zeroed when placed)
    double loss_sum = 0.0;
    for (int k = 0; k < n_micro; k++) {
        // on the last micro-step each bucket's all-reduce starts when the backward finishes it
        GPTGradsReady ready = NULL;
        if (z2) {
            buckets_micro_begin(z2, k == 0);
            ready = buckets_on_grads_ready;
        } else if (k == n_micro - 1 && ts->buckets) {
            buckets_reset(ts->buckets);
            ready = buckets_on_grads_ready;
        }
        GPTStepArgs args = GPT_STEP_ARGS_DEFAULT;
        args.batch_row0 = r + (int64_t)W * k * B;
        args.batch_row_stride = W;
        args.loss_scale = (float)(scale * ((double)mb[k].rows * T / tokens_rank) / W);
        if (overlap) {
            args.params_needed = buckets_params_needed;
            args.params_ctx = ts->buckets;
        }
        float loss;
        if (!ready && !overlap && m->be->graph_run && graphs_enabled()) {
            // no hook between the ops: the micro-step may run as one captured graph (the model
            // falls back to the two calls where a graph cannot serve: see gpt_forward_backward);
            // the last one's losses are read after the gradient norm, whose read-back waits for
            // the backend anyway (one host wait per step instead of two)
            args.defer_loss = k == n_micro - 1 && !z2;
            if (tail && k == n_micro - 1) {
                args.tail = optimizer_tail;
                args.tail_ctx = ts;
            }
            loss = gpt_forward_backward(m, mb[k].x, mb[k].y, mb[k].rows, T, true, seed, step, &args);
        } else {
            loss = gpt_forward(m, mb[k].x, mb[k].y, mb[k].rows, T, true, seed, step, &args);
            // (the forward has waited for every parameter; this only makes sure of it)
            if (overlap && buckets_gather_wait_all(ts->buckets)) return 1;
            gpt_backward(m, ready, ts->buckets);
        }
        if (z2 && buckets_micro_end(z2)) return 1;
        if (!m->loss_pending) loss_sum += (double)loss * m->n_valid;   // (else: read below)
    }
    const bool loss_deferred = m->loss_pending;
    if (ts->buckets && !z2) {
        Comm *gc = ts->buckets->comm;   // the gradient communicator (NCCL on CUDA)
        gc->backward_done(gc);
        if (buckets_start_rest(ts->buckets) || gc->allreduce_wait(gc)) return 1;
    }

    // ---- the job's loss and its stop / save decisions in one collective (identity in one
    // process): a summed flag is > 0 when any rank asked
    // (ZeRO: and the sum of squares of every shard's reduced gradients, the global norm's square)
    const ShardPlan *sp = ts->buckets ? ts->shards : NULL;
    const size_t lo = sp ? shard_lo(sp, r) : 0, n_mine = sp ? shard_count(sp, r) : m->num_params;
    float *grads = z2 ? buckets_stage2_grads(z2) : m->grads_memory + lo;
    // the sum of squares of this rank's gradients (ZeRO: of its shard), then the deferred loss
    // (with the tail: both read back with one wait)
    double ssq_mine;
    if (tail) {
        adamw_tail_fetch(ts->opt);
        m->be->download_wait(m->be);
        ssq_mine = ts->opt->tail_res.ssq;
    } else {
        ssq_mine = m->be->sum_squares(m->be, grads, n_mine);
    }
    if (loss_deferred) loss_sum += (double)gpt_loss_wait(m) * m->n_valid;
    double v[5] = { loss_sum, tokens_rank, requests & STEP_STOP ? 1.0 : 0.0, requests & STEP_SAVE ? 1.0 : 0.0,
                    ssq_mine };
    if (comm->allreduce_host(comm, v, sp ? 5 : 4, COMM_SUM)) return 1;
    out->loss = v[1] > 0 ? v[0] / v[1] : NAN;
    out->tokens = (long)v[1];
    out->stop = v[2] > 0;
    out->save = v[3] > 0;

    // ---- unscale, overflow check, clip, AdamW (identical on every rank: same gradients)
    // (the unscale and clip factor is applied by AdamW as it reads the gradients: no pass of its own)
    out->norm = 0.0;
    float grad_scale = 1.0f;
    const double ssq = sp ? v[4] : ssq_mine;
    out->applied = loss_scaler_unscale_clip_coef(ts->scaler, ssq, ts->grad_clip, &out->norm, &grad_scale);
    // A NaN or inf that reaches AdamW poisons the parameters and the moments for good: without
    // a loss scaler (fp32, bf16) nothing else catches it.
    out->nonfinite = !isfinite(out->loss) || (out->applied > 0 && !isfinite(out->norm));
    if (out->nonfinite && out->applied > 0) out->applied = 0;
    out->spike = 0;
    out->zscore = NAN;
    if (out->applied > 0 && ts->spike) {
        out->zscore = spike_observe(ts->spike, out->norm);
        if (ts->skip_zscore > 0 && out->zscore > ts->skip_zscore) {
            out->spike = 1;
            out->applied = 0;
        }
    }
    if (tail) {
        // the backend took the same decision with the same factor (a mismatch is a bug of ours)
        const OptimizerTailResult *tr = adamw_tail_commit(ts->opt);
        if ((out->applied > 0) != (tr->applied != 0) || (out->applied > 0 && tr->grad_scale != grad_scale))
            fatal_error("train_step: the backend's optimizer tail decided %s (factor %a), the host %s (factor %a)",
                        tr->applied ? "to update" : "to skip", (double)tr->grad_scale,
                        out->applied > 0 ? "to update" : "to skip", (double)grad_scale);
        if (out->applied > 0) gpt_params_changed(m);   // the next forward casts the new weights
    } else if (out->applied > 0) {
        adamw_step_range(ts->opt, m->params_memory, grads, m->tensors, m->n_tensors, lo, lo + n_mine, ts->lr,
                         ts->beta1, ts->beta2, ts->eps, ts->weight_decay, grad_scale);
        if (sp && (overlap ? buckets_gather_start(ts->buckets, m->params_memory) : all_gather_params(ts, sp))) return 1;
        gpt_params_changed(m);   // the next forward casts the new weights (Backend.cast_weights)
    }
    return 0;
}
