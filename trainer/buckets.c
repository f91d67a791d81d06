// trainer/buckets.c — see buckets.h.
#include "trainer/buckets.h"

#include <stdlib.h>

int buckets_plan(Buckets *bk, const ParamTensor *tensors, int n_tensors, size_t first_cap_bytes,
                 size_t cap_bytes, Comm *comm, float *grads) {
    *bk = (Buckets){ .comm = comm, .grads = grads };
    bk->b = calloc((size_t)n_tensors + 1, sizeof *bk->b);
    if (!bk->b) return 1;
    size_t end = 0, bytes = 0;   // the open bucket: [.., end), bytes so far
    for (int k = n_tensors - 1; k >= 0; k--) {
        const ParamTensor *t = &tensors[k];
        if (bytes == 0) end = t->offset + t->numel;
        bytes += t->numel * sizeof(float);
        const size_t cap = bk->n == 0 ? first_cap_bytes : cap_bytes;
        if (bytes >= cap || k == 0) {
            bk->b[bk->n++] = (Bucket){ t->offset, end - t->offset };
            bytes = 0;
        }
    }
    return 0;
}

int buckets_shard(Buckets *bk, const ShardPlan *p) {
    free(bk->counts);
    bk->counts = malloc(sizeof(size_t) * (size_t)p->world);
    if (!bk->counts) return 1;
    bk->shards = p;
    return 0;
}

void buckets_free(Buckets *bk) {
    free(bk->b);
    free(bk->counts);
    *bk = (Buckets){0};
}

void buckets_reset(Buckets *bk) { bk->next = 0; }

// Starts bucket bk->next; a communicator error aborts the job (the hook cannot return it).
static void start_next(Buckets *bk) {
    const Bucket *b = &bk->b[bk->next++];
    int rc;
    if (bk->shards) {
        shard_split_range(bk->shards, b->first, b->n, bk->counts, bk->comm->rank, NULL);
        rc = bk->comm->reduce_scatter_start(bk->comm, bk->grads + b->first, bk->counts);
    } else {
        rc = bk->comm->allreduce_start(bk->comm, bk->grads + b->first, b->n);
    }
    if (rc) bk->comm->abort(bk->comm, 1, bk->comm->err);
}

void buckets_on_grads_ready(void *ctx, size_t first) {
    Buckets *bk = ctx;
    // first == 0: the backward pass has finished; what starts now is not overlapped.
    if (first == 0) bk->comm->backward_done(bk->comm);
    while (bk->next < bk->n && bk->b[bk->next].first >= first) start_next(bk);
    if (bk->comm->progress) bk->comm->progress(bk->comm);
}

int buckets_start_rest(Buckets *bk) {
    while (bk->next < bk->n) start_next(bk);
    return 0;
}
