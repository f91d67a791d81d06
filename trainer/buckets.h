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
} Buckets;

// Cuts the tensors of `tensors` (the flat layout, ascending offsets) into buckets: the first
// closes at first_cap_bytes, the others at cap_bytes. Non-zero when out of memory.
int buckets_plan(Buckets *bk, const ParamTensor *tensors, int n_tensors, size_t first_cap_bytes,
                 size_t cap_bytes, Comm *comm, float *grads);
void buckets_free(Buckets *bk);

// ZeRO: from now on each bucket is reduce-scattered in place over the shards of p
// (dist/shard.h): afterwards the part of the gradient buffer inside rank q's shard holds, on rank
// q, the gradients summed over the ranks; the rest of the bucket is undefined. p must outlive bk.
// Non-zero when out of memory.
int buckets_shard(Buckets *bk, const ShardPlan *p);

// Before a backward pass whose gradients will be all-reduced: nothing started yet.
void buckets_reset(Buckets *bk);

// model/gpt.h's GPTGradsReady hook of gpt_backward (ctx = Buckets*): gradients [first, end) are final, so
// start, in order, every bucket not started yet that lies inside them.
void buckets_on_grads_ready(void *ctx, size_t first);

// Starts every bucket not started yet (after the backward pass). Returns non-zero on a
// communicator error (message in comm->err).
int buckets_start_rest(Buckets *bk);

#endif
