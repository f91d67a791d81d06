// trainer/buckets.c — see buckets.h.
#include "trainer/buckets.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ZeRO stage 2's ring of bucket gradients (buckets_stage2).
enum { B_FREE = 0, B_PLACED, B_STARTED };
struct Zero2 {
    GPT *m;
    float *ring, *acc;       // (R) bucket gradients; (this rank's shard) the reduced gradients
    size_t R;
    size_t *at;              // (n) ring offset of each placed bucket
    int *state;              // (n) B_*
    int oldest;              // the oldest bucket still holding ring space (placed or started)
    size_t head;             // where the next bucket goes
    size_t *pts;             // the backward's hook points (gpt_grads_ready_points), npts of them
    int npts, next_pt;       // the hook expected next
    int first_micro;         // the first micro-step of the step: copy into acc, not add
    int *tensor_bucket;      // (n_tensors) the bucket of each tensor
};

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

static void zero2_free(struct Zero2 *z, Backend *be) {
    if (!z) return;
    if (z->ring) be->free(be, z->ring);
    free(z->at); free(z->state); free(z->pts); free(z->tensor_bucket);
    free(z);
}

void buckets_free(Buckets *bk) {
    free(bk->b);
    free(bk->counts);
    if (bk->z2) zero2_free(bk->z2, bk->z2->m->be);
    *bk = (Buckets){0};
}

void buckets_reset(Buckets *bk) { bk->next = 0; }

// ---- stage 2: the ring

// Ring space for n floats after the live buckets [oldest, ...) (FIFO: buckets are placed, reduced
// and released in index order), or (size_t)-1 when it does not fit now.
static size_t ring_fit(const size_t R, size_t head, int any_live, size_t tail, size_t n) {
    if (!any_live) return n <= R ? 0 : (size_t)-1;
    if (head > tail) {   // live space is [tail, head)
        if (head + n <= R) return head;
        return n <= tail ? 0 : (size_t)-1;
    }
    return head + n <= tail ? head : (size_t)-1;   // live space wraps: [tail, R) and [0, head)
}

// Simulates the placements of one backward with a ring of R floats: 0 when every bucket finds
// space (after waiting for the reductions in flight where it must), else 1.
static int ring_simulate(const Buckets *bk, const size_t *pts, int npts, const int *tb, int nt,
                         const ParamTensor *tensors, size_t R) {
    int *state = calloc((size_t)bk->n, sizeof(int));
    size_t *at = calloc((size_t)bk->n, sizeof(size_t));
    if (!state || !at) { free(state); free(at); return 1; }
    int oldest = 0, rc = 0;
    size_t head = 0, hi = tensors[nt - 1].offset + tensors[nt - 1].numel;
    for (int i = 0; i < npts && !rc; i++) {
        // the layer [pts[i], hi): place its buckets
        for (int k = nt - 1; k >= 0 && !rc; k--) {
            if (tensors[k].offset < pts[i] || tensors[k].offset >= hi) continue;
            const int b = tb[k];
            if (state[b] != B_FREE) continue;
            size_t pos = ring_fit(R, head, oldest < b, oldest < b ? at[oldest] : 0, bk->b[b].n);
            if (pos == (size_t)-1) {   // wait for the reductions in flight, then retry
                while (oldest < b && state[oldest] == B_STARTED) oldest++;
                pos = ring_fit(R, head, oldest < b, oldest < b ? at[oldest] : 0, bk->b[b].n);
            }
            if (pos == (size_t)-1) { rc = 1; break; }
            at[b] = pos; state[b] = B_PLACED; head = pos + bk->b[b].n;
        }
        // the hook after it: buckets inside [pts[i], ...) start
        for (int b = 0; b < bk->n; b++)
            if (state[b] == B_PLACED && bk->b[b].first >= pts[i]) state[b] = B_STARTED;
        hi = pts[i];
    }
    free(state); free(at);
    return rc;
}

float *buckets_stage2_grads(const Buckets *bk) { return bk->z2 ? bk->z2->acc : NULL; }

size_t buckets_stage2_min_ring(const Buckets *bk, const GPTShape *shape) {
    size_t largest = 0;
    for (int b = 0; b < bk->n; b++) if (bk->b[b].n > largest) largest = bk->b[b].n;
    const int nt = gpt_param_table(shape, NULL);
    size_t *pts = malloc(sizeof(size_t) * ((size_t)shape->n_layer + 2));
    int *tb = malloc(sizeof(int) * (size_t)nt);
    ParamTensor *pt = calloc((size_t)nt, sizeof *pt);
    const int npts = pts ? gpt_grads_ready_points(shape, pts) : 0;
    if (!pts || !tb || !pt || !npts) { free(pts); free(tb); free(pt); return SIZE_MAX; }
    gpt_param_table(shape, pt);
    const size_t P = pt[nt - 1].offset + pt[nt - 1].numel;
    for (int k = 0; k < nt; k++)
        for (int b = 0; b < bk->n; b++)
            if (pt[k].offset >= bk->b[b].first && pt[k].offset < bk->b[b].first + bk->b[b].n) tb[k] = b;
    size_t R = largest;
    const size_t step = largest / 8 > 16 ? largest / 8 : 16;
    while (R < P && ring_simulate(bk, pts, npts, tb, nt, pt, R)) R += step;
    free(pts); free(tb); free(pt);
    return R < P ? R : P;
}

int buckets_stage2(Buckets *bk, GPT *m, float *grad_acc, size_t ring_floats, char *err, size_t errlen) {
    const size_t min = buckets_stage2_min_ring(bk, &m->shape);
    if (ring_floats < min) {
        snprintf(err, errlen, "the stage-2 gradient ring of %zu floats is smaller than the %zu this bucket plan needs",
                 ring_floats, min);
        return 1;
    }
    struct Zero2 *z = calloc(1, sizeof *z);
    if (!z) { snprintf(err, errlen, "out of memory"); return 1; }
    bk->z2 = z;
    z->m = m;
    z->acc = grad_acc;
    z->R = ring_floats;
    z->ring = m->be->alloc(m->be, ring_floats * sizeof(float));
    z->at = calloc((size_t)bk->n, sizeof(size_t));
    z->state = calloc((size_t)bk->n, sizeof(int));
    z->pts = malloc(sizeof(size_t) * ((size_t)m->shape.n_layer + 2));
    z->tensor_bucket = malloc(sizeof(int) * (size_t)m->n_tensors);
    if (!z->ring || !z->at || !z->state || !z->pts || !z->tensor_bucket) {
        snprintf(err, errlen, "out of memory for the stage-2 gradient ring (%zu floats)", ring_floats);
        return 1;
    }
    z->npts = gpt_grads_ready_points(&m->shape, z->pts);
    for (int k = 0; k < m->n_tensors; k++)
        for (int b = 0; b < bk->n; b++)
            if (m->tensors[k].offset >= bk->b[b].first && m->tensors[k].offset < bk->b[b].first + bk->b[b].n)
                z->tensor_bucket[k] = b;
    return 0;
}

// Adds (first micro-step: copies) this rank's part of the reduced bucket b into acc: a backend
// op on backend memory, queued behind the reduction (allreduce_wait ordered the backend's work
// after it: on NCCL the compute stream waits for the comm stream).
static void harvest(Buckets *bk, int b) {
    struct Zero2 *z = bk->z2;
    const ShardPlan *sp = bk->shards;
    const int me = bk->comm->rank;
    shard_split_range(sp, bk->b[b].first, bk->b[b].n, bk->counts, me, NULL);
    size_t off = 0;
    for (int q = 0; q < me; q++) off += bk->counts[q];
    const size_t n = bk->counts[me];
    if (!n) return;
    const size_t lo = shard_lo(sp, me), start = bk->b[b].first > lo ? bk->b[b].first : lo;
    Backend *be = z->m->be;
    be->accumulate(be, z->acc + (start - lo), z->ring + z->at[b] + off, n, z->first_micro);
}

// Waits for every reduction in flight and releases their ring space (the backend's later work,
// the harvest and the zeroing of a new bucket's space there, is ordered after the reductions).
// Aborts on an error.
static void wait_release(Buckets *bk) {
    struct Zero2 *z = bk->z2;
    if (bk->comm->allreduce_wait(bk->comm)) bk->comm->abort(bk->comm, 1, bk->comm->err);
    while (z->oldest < bk->n && z->state[z->oldest] == B_STARTED) {
        harvest(bk, z->oldest);
        z->state[z->oldest++] = B_FREE;
    }
}

// Ring space for bucket b, zeroed, its tensors' gradients pointed into it.
static void place(Buckets *bk, int b) {
    struct Zero2 *z = bk->z2;
    const size_t n = bk->b[b].n;
    const int live = z->oldest < b;
    size_t pos = ring_fit(z->R, z->head, live, live ? z->at[z->oldest] : 0, n);
    if (pos == (size_t)-1) {
        wait_release(bk);
        const int live2 = z->oldest < b;
        pos = ring_fit(z->R, z->head, live2, live2 ? z->at[z->oldest] : 0, n);
    }
    if (pos == (size_t)-1) bk->comm->abort(bk->comm, 1, "the stage-2 gradient ring is too small (a bug: buckets_stage2 checked it)");
    z->at[b] = pos;
    z->state[b] = B_PLACED;
    z->head = pos + n;
    GPT *m = z->m;
    m->be->zero(m->be, z->ring + pos, n * sizeof(float));
    for (int k = 0; k < m->n_tensors; k++)
        if (z->tensor_bucket[k] == b) gpt_bind_grad(m, k, z->ring + pos + (m->tensors[k].offset - bk->b[b].first));
}

// Places the buckets of the layer [lo, hi) that have no space yet.
static void place_layer(Buckets *bk, size_t lo, size_t hi) {
    struct Zero2 *z = bk->z2;
    const GPT *m = z->m;
    for (int k = m->n_tensors - 1; k >= 0; k--) {
        const size_t o = m->tensors[k].offset;
        if (o >= lo && o < hi && z->state[z->tensor_bucket[k]] == B_FREE && z->tensor_bucket[k] >= z->oldest)
            place(bk, z->tensor_bucket[k]);
    }
}

void buckets_micro_begin(Buckets *bk, int first) {
    struct Zero2 *z = bk->z2;
    bk->next = 0;
    z->first_micro = first;
    z->oldest = 0;
    z->head = 0;
    for (int b = 0; b < bk->n; b++) z->state[b] = B_FREE;
    z->next_pt = 0;
    place_layer(bk, z->pts[0], z->m->num_params);
}

static void start_next(Buckets *bk);

int buckets_micro_end(Buckets *bk) {
    // (the hook at 0 started them all, unless the backward had nothing to do: no valid target)
    for (int b = bk->next; b < bk->n; b++)
        if (bk->z2->state[b] == B_FREE) place(bk, b);   // a zero gradient
    while (bk->next < bk->n) start_next(bk);
    wait_release(bk);
    return 0;
}

// Starts bucket bk->next; a communicator error aborts the job (the hook cannot return it).
static void start_next(Buckets *bk) {
    if (bk->z2) bk->z2->state[bk->next] = B_STARTED;
    const Bucket *b = &bk->b[bk->next++];
    int rc;
    if (bk->shards) {
        shard_split_range(bk->shards, b->first, b->n, bk->counts, bk->comm->rank, NULL);
        rc = bk->comm->reduce_scatter_start(bk->comm, bk->z2 ? bk->z2->ring + bk->z2->at[b - bk->b] : bk->grads + b->first,
                                            bk->counts);
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
    if (bk->z2 && first > 0) {   // the next layer's gradients: [the next hook point, first)
        struct Zero2 *z = bk->z2;
        while (z->next_pt < z->npts && z->pts[z->next_pt] >= first) z->next_pt++;
        if (z->next_pt < z->npts) place_layer(bk, z->pts[z->next_pt], first);
    }
    if (bk->comm->progress) bk->comm->progress(bk->comm);
}

int buckets_start_rest(Buckets *bk) {
    while (bk->next < bk->n) start_next(bk);
    return 0;
}
