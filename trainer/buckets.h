// trainer/buckets.h — gradient buckets: contiguous slices of the flat gradient buffer whose
// all-reduce starts as soon as the backward pass has finished them (PyTorch DDP's Reducer,
// without copies: the gradients are already one flat buffer).
//
// The backward pass finishes gradients from the end of the buffer towards the start (lm_head
// and ln_f, then the blocks from the last to the first, then wte/wpe; model/gpt.h), so the
// buckets are cut from the end: bucket 0 is the last tensors of the buffer. A bucket holds
// whole tensors and closes once it reaches its cap (it may overshoot by its last tensor; a
// tensor larger than the cap sits alone), as DDP's compute_bucket_assignment_by_size. The
// first bucket's cap is small (1 MiB, DDP's first_bucket_bytes) so communication starts early.
// Buckets are started strictly in index order, identical on every rank.
#ifndef MINGPT_BUCKETS_H
#define MINGPT_BUCKETS_H

#include <stddef.h>

#include "dist/comm.h"
#include "dist/shard.h"
#include "model/gpt.h"

typedef struct {
    size_t first, n;   // gradient elements [first, first + n)
} Bucket;

typedef struct {
    Bucket *b;
    int n;             // number of buckets
    int next;          // the next bucket to start
    Comm *comm;        // the gradient communicator
    float *grads;      // the flat gradient buffer (backend memory of comm)
    // ZeRO (buckets_shard): each bucket is reduce-scattered in place instead of all-reduced;
    // NULL: all-reduced in place.
    const ShardPlan *shards;
    size_t *counts;    // (world) scratch: a bucket's floats per shard
    struct Zero2 *z2;  // ZeRO stage 2 (buckets_stage2), else NULL
    // ZeRO's overlapped parameter all-gather (buckets_gather_start): the number of the all-gather
    // of each bucket on comm (Comm.allgather_wait's k; 0: none started), how many were started and
    // how many are known complete.
    long *gather_no;
    long gathers_started, gathers_done;
} Buckets;

// Cuts the tensors of `tensors` (the flat layout, ascending offsets) into buckets: the first
// closes at first_cap_bytes, the others at cap_bytes. Non-zero when out of memory.
int buckets_plan(Buckets *bk, const ParamTensor *tensors, int n_tensors, size_t first_cap_bytes,
                 size_t cap_bytes, Comm *comm, float *grads);
// buckets_plan where a bucket may close only at a tensor whose offset is one of cuts (n_cuts of
// them, descending; NULL: at any tensor); the last bucket still closes at tensor 0.
int buckets_plan_at(Buckets *bk, const ParamTensor *tensors, int n_tensors, size_t first_cap_bytes,
                    size_t cap_bytes, const size_t *cuts, int n_cuts, Comm *comm, float *grads);
// The largest bucket's floats.
size_t buckets_largest(const Buckets *bk);
void buckets_free(Buckets *bk);

// ZeRO: from now on each bucket is reduce-scattered in place over the shards of p
// (dist/shard.h): afterwards the part of the gradient buffer inside rank q's shard holds, on rank
// q, the gradients summed over the ranks; the rest of the bucket is undefined. p must outlive bk.
// Non-zero when out of memory.
int buckets_shard(Buckets *bk, const ShardPlan *p);

// ZeRO stage 2's bucket plan (grads NULL): buckets_plan_at cut only at gpt_backward's hook points
// (gpt_grads_ready_points), so that every bucket holds whole ops and is final, and starts, at a hook:
// the backward never writes into two buckets between two hooks, and the ring below needs room for
// one bucket at least (buckets_plan may put an op's weight and bias in two buckets, which must
// then have ring space together). Non-zero when out of memory.
int buckets_stage2_plan(Buckets *bk, const ParamTensor *tensors, int n_tensors, const GPTShape *shape,
                        size_t first_cap_bytes, size_t cap_bytes, Comm *comm);

// ZeRO stage 2, after buckets_shard, for a model built with no_grad_buffer: no rank holds the
// whole gradient. Each bucket's gradients live in a ring buffer of ring_floats (at least the
// largest bucket) while the backward writes them; gpt_bind_grad points each tensor into it just
// before the backward reaches the tensor (the hook's points, gpt_grads_ready_points). A bucket is
// reduce-scattered in place as soon as the backward has finished it, and its part of this rank's
// shard is added into grad_acc (shard_count floats of this rank, backend memory, as the ring)
// by Backend.accumulate once reduced; its place in the ring is then reused: a bucket that finds
// no room waits for the oldest reductions in flight, one at a time (Comm.allreduce_wait_some; all
// of them where the communicator has none). Where a bucket goes in the ring (after the
// newest, or flush against an end) is chosen here by simulating one backward: a placement in
// which no bucket waits for the reduction of the bucket finished just before it where this ring
// has one. Every micro-step communicates: buckets_micro_begin before each backward,
// buckets_micro_end after. Non-zero when out of memory or ring_floats is too small for the
// model's plan (the message then says the smallest that works).
int buckets_stage2(Buckets *bk, GPT *m, float *grad_acc, size_t ring_floats, char *err, size_t errlen);

// Stage 2: grad_acc, this rank's reduced gradients.
float *buckets_stage2_grads(const Buckets *bk);

// The smallest ring (floats) for a model of this shape and this bucket plan (the whole gradient
// when memory runs out, or when nothing smaller works). overlap 0: the smallest buckets_stage2
// accepts (for a buckets_stage2_plan, the largest bucket: the next bucket may wait there for the
// reduction of the one the backward has just finished, communication not hidden); 1: the smallest
// where a bucket never waits for the reduction of the bucket finished just before it, only for
// older ones (about the two largest consecutive buckets: each reduction overlaps the backward of
// the next bucket).
size_t buckets_stage2_min_ring(const Buckets *bk, const GPTShape *shape, int overlap);

// Stage 2: before micro-step's backward (first: the step's first micro-step, whose gradients
// replace grad_acc rather than add to it): places the first layer's gradients.
void buckets_micro_begin(Buckets *bk, int first);
// Stage 2: after the backward: every bucket reduced and added into grad_acc. Non-zero on a
// communicator error (message in comm->err).
int buckets_micro_end(Buckets *bk);

// ZeRO, after AdamW updated this rank's shard of params (the flat parameter buffer, backend
// memory of comm), on a communicator with allgather_start: starts one all-gather per bucket (the
// bucket's range of the parameters, split over the shards as its reduce-scatter), in the order
// the forward reads them: from the last bucket (wte, wpe, block 0) to bucket 0 (ln_f, lm_head).
// Nothing waits for them here: buckets_params_needed (the next forward) and
// buckets_gather_wait_all do. Non-zero on a communicator error (message in comm->err).
int buckets_gather_start(Buckets *bk, float *params);

// model/gpt.h's GPTStepArgs.params_needed (ctx = Buckets*): waits for the all-gathers of the
// buckets that overlap the parameters [lo, hi) (and, the queue being in order, of every one
// started before them). A communicator error aborts the job (the hook cannot return it).
void buckets_params_needed(void *ctx, size_t lo, size_t hi);

// Waits for every all-gather buckets_gather_start started (nothing to do when none is in
// flight). Whatever reads the parameters outside the next training forward (evaluation,
// snapshots, the replicas' check, sampling) calls it first. Non-zero on a communicator error.
int buckets_gather_wait_all(Buckets *bk);

// Before a backward pass whose gradients will be all-reduced: nothing started yet.
void buckets_reset(Buckets *bk);

// model/gpt.h's GPTGradsReady hook of gpt_backward (ctx = Buckets*): gradients [first, end) are final, so
// start, in order, every bucket not started yet that lies inside them.
void buckets_on_grads_ready(void *ctx, size_t first);

// Starts every bucket not started yet (after the backward pass). Returns non-zero on a
// communicator error (message in comm->err).
int buckets_start_rest(Buckets *bk);

#endif
