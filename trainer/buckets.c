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
    int flush;               // ring_fit's placement, chosen by buckets_stage2
};

int buckets_plan_at(Buckets *bk, const ParamTensor *tensors, int n_tensors, size_t first_cap_bytes,
                    size_t cap_bytes, const size_t *cuts, int n_cuts, Comm *comm, float *grads) {
    *bk = (Buckets){ .comm = comm, .grads = grads };
    bk->b = calloc((size_t)n_tensors + 1, sizeof *bk->b);
    if (!bk->b) return 1;
    size_t end = 0, bytes = 0;   // the open bucket: [.., end), bytes so far
    int j = 0;                   // cuts (descending): cuts[j] is the first not above the tensor's offset
    for (int k = n_tensors - 1; k >= 0; k--) {
        const ParamTensor *t = &tensors[k];
        if (bytes == 0) end = t->offset + t->numel;
        bytes += t->numel * sizeof(float);
        const size_t cap = bk->n == 0 ? first_cap_bytes : cap_bytes;
        while (cuts && j < n_cuts && cuts[j] > t->offset) j++;
        const int may_close = !cuts || (j < n_cuts && cuts[j] == t->offset);
        if ((bytes >= cap && may_close) || k == 0) {
            bk->b[bk->n++] = (Bucket){ t->offset, end - t->offset };
            bytes = 0;
        }
    }
    return 0;
}

int buckets_plan(Buckets *bk, const ParamTensor *tensors, int n_tensors, size_t first_cap_bytes,
                 size_t cap_bytes, Comm *comm, float *grads) {
    return buckets_plan_at(bk, tensors, n_tensors, first_cap_bytes, cap_bytes, NULL, 0, comm, grads);
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
    free(bk->gather_no);
    if (bk->z2) zero2_free(bk->z2, bk->z2->m->be);
    *bk = (Buckets){0};
}

void buckets_reset(Buckets *bk) { bk->next = 0; }

// ---- stage 2: the ring

// Ring space for n floats beside the live buckets [oldest, ...) (FIFO: buckets are placed, reduced
// and released in index order), or (size_t)-1 when it does not fit now. With live space [tail,
// head), a bucket goes at head (flush 0), or flush against an end of the ring (flush 1: at R - n
// where it fits, else at 0, so that two buckets that fill the ring together alternate between its
// ends); with live space that wraps ([tail, R) and [0, head)), at head.
static size_t ring_fit(const size_t R, size_t head, int any_live, size_t tail, size_t n, int flush) {
    if (!any_live) return n <= R ? 0 : (size_t)-1;
    if (head > tail) {   // live space is [tail, head)
        if (n <= R - head) return flush ? R - n : head;
        return n <= tail ? 0 : (size_t)-1;
    }
    return head + n <= tail ? head : (size_t)-1;   // live space wraps: [tail, R) and [0, head)
}

// What ring_simulate needs of a model's shape and a bucket plan.
typedef struct {
    const Buckets *bk;
    size_t *pts;        // gpt_grads_ready_points
    int npts, nt;
    int *tb;            // (nt) the bucket of each tensor
    ParamTensor *pt;    // (nt) gpt_param_table
    size_t P;
} RingSim;

static void ring_sim_free(RingSim *rs) { free(rs->pts); free(rs->tb); free(rs->pt); }

static int ring_sim_init(RingSim *rs, const Buckets *bk, const GPTShape *shape) {
    *rs = (RingSim){ .bk = bk, .nt = gpt_param_table(shape, NULL), .npts = gpt_grads_ready_points(shape, NULL) };
    rs->pts = malloc(sizeof(size_t) * (size_t)rs->npts);
    rs->tb = malloc(sizeof(int) * (size_t)rs->nt);
    rs->pt = calloc((size_t)rs->nt, sizeof *rs->pt);
    if (!rs->pts || !rs->tb || !rs->pt || gpt_grads_ready_points(shape, rs->pts) != rs->npts) {
        ring_sim_free(rs);
        return 1;
    }
    gpt_param_table(shape, rs->pt);
    rs->P = rs->pt[rs->nt - 1].offset + rs->pt[rs->nt - 1].numel;
    for (int k = 0, b = bk->n - 1; k < rs->nt; k++) {   // buckets descend as tensors ascend
        while (b > 0 && rs->pt[k].offset >= bk->b[b].first + bk->b[b].n) b--;
        rs->tb[k] = b;
    }
    return 0;
}

// Simulates the placements of one backward with a ring of R floats: 0 when every bucket finds
// space, else 1. A bucket that does not fit waits for the oldest reductions in flight, one by one
// (they finish in the order started); with overlap, never for one started at the hook just before
// (the one the backward has just finished: the ring must hold it and the next one together, so
// that its reduction runs while the backward computes the next).
static int ring_simulate(const RingSim *rs, size_t R, int overlap, int flush) {
    const Buckets *bk = rs->bk;
    const ParamTensor *tensors = rs->pt;
    int *state = calloc((size_t)bk->n, sizeof(int)), *hook = calloc((size_t)bk->n, sizeof(int));
    size_t *at = calloc((size_t)bk->n, sizeof(size_t));
    if (!state || !hook || !at) { free(state); free(hook); free(at); return 1; }
    int oldest = 0, rc = 0, k = rs->nt - 1, next_start = 0;
    size_t head = 0;
    for (int i = 0; i < rs->npts && !rc; i++) {
        // the gradients [pts[i], pts[i - 1]), written after hook i - 1: place their buckets
        for (; k >= 0 && tensors[k].offset >= rs->pts[i] && !rc; k--) {
            const int b = rs->tb[k];
            if (state[b] != B_FREE) continue;
            size_t pos = ring_fit(R, head, oldest < b, oldest < b ? at[oldest] : 0, bk->b[b].n, flush);
            while (pos == (size_t)-1 && oldest < b && state[oldest] == B_STARTED && (!overlap || hook[oldest] < i - 1)) {
                oldest++;   // wait for the oldest reduction, release its space, retry
                pos = ring_fit(R, head, oldest < b, oldest < b ? at[oldest] : 0, bk->b[b].n, flush);
            }
            if (pos == (size_t)-1) { rc = 1; break; }
            at[b] = pos; state[b] = B_PLACED; head = pos + bk->b[b].n;
        }
        // hook i: buckets inside [pts[i], ...) start, in order
        for (; next_start < bk->n && state[next_start] == B_PLACED && bk->b[next_start].first >= rs->pts[i]; next_start++) {
            state[next_start] = B_STARTED;
            hook[next_start] = i;
        }
    }
    free(state); free(hook); free(at);
    return rc;
}

// The smallest ring in [largest bucket, P] that works with this placement: steps of
// an eighth of the largest bucket, then halving back. P always works without flush (every bucket
// has its own space).
static size_t ring_search(const RingSim *rs, int overlap, int flush) {
    const size_t largest = buckets_largest(rs->bk);
    const size_t step = largest / 8 > 16 ? largest / 8 : 16;
    size_t R = largest < rs->P ? largest : rs->P;
    if (!ring_simulate(rs, R, overlap, flush)) return R;
    size_t lo = R;   // fails
    for (;;) {
        R = lo + step;
        if (R >= rs->P) {
            R = rs->P;
            if (flush && ring_simulate(rs, R, overlap, flush)) return SIZE_MAX;
            break;
        }
        if (!ring_simulate(rs, R, overlap, flush)) break;
        lo = R;
    }
    while (R - lo > 1) {   // lo fails, R works
        const size_t mid = lo + (R - lo) / 2;
        if (ring_simulate(rs, mid, overlap, flush)) lo = mid; else R = mid;
    }
    return R;
}

float *buckets_stage2_grads(const Buckets *bk) { return bk->z2 ? bk->z2->acc : NULL; }

size_t buckets_largest(const Buckets *bk) {
    size_t largest = 0;
    for (int b = 0; b < bk->n; b++) if (bk->b[b].n > largest) largest = bk->b[b].n;
    return largest;
}

int buckets_stage2_plan(Buckets *bk, const ParamTensor *tensors, int n_tensors, const GPTShape *shape,
                        size_t first_cap_bytes, size_t cap_bytes, Comm *comm) {
    const int npts = gpt_grads_ready_points(shape, NULL);
    size_t *pts = malloc(sizeof(size_t) * (size_t)npts);
    if (!pts || gpt_grads_ready_points(shape, pts) != npts) { free(pts); *bk = (Buckets){0}; return 1; }
    const int rc = buckets_plan_at(bk, tensors, n_tensors, first_cap_bytes, cap_bytes, pts, npts, comm, NULL);
    free(pts);
    return rc;
}

size_t buckets_stage2_min_ring(const Buckets *bk, const GPTShape *shape, int overlap) {
    RingSim rs;
    if (ring_sim_init(&rs, bk, shape)) return SIZE_MAX;
    const size_t a = ring_search(&rs, overlap, 0), b = ring_search(&rs, overlap, 1);
    ring_sim_free(&rs);
    return a <= b ? a : b;
}

int buckets_stage2(Buckets *bk, GPT *m, float *grad_acc, size_t ring_floats, char *err, size_t errlen) {
    // the placement: one that lets reductions overlap in this ring if any, else one that works
    RingSim rs;
    if (ring_sim_init(&rs, bk, &m->shape)) { snprintf(err, errlen, "out of memory"); return 1; }
    int flush = -1;
    for (int t = 0; t < 4 && flush < 0; t++)
        if (!ring_simulate(&rs, ring_floats, t < 2, t % 2)) flush = t % 2;
    ring_sim_free(&rs);
    if (flush < 0) {
        snprintf(err, errlen, "the stage-2 gradient ring of %zu floats is smaller than the %zu this bucket plan needs",
                 ring_floats, buckets_stage2_min_ring(bk, &m->shape, 0));
        return 1;
    }
    struct Zero2 *z = calloc(1, sizeof *z);
    if (!z) { snprintf(err, errlen, "out of memory"); return 1; }
    bk->z2 = z;
    z->m = m;
    z->acc = grad_acc;
    z->R = ring_floats;
    z->flush = flush;
    z->ring = m->be->alloc(m->be, ring_floats * sizeof(float));
    z->at = calloc((size_t)bk->n, sizeof(size_t));
    z->state = calloc((size_t)bk->n, sizeof(int));
    z->pts = malloc(sizeof(size_t) * (size_t)gpt_grads_ready_points(&m->shape, NULL));
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

// Waits for the oldest reduction in flight only (all of them where the communicator cannot wait
// for some) and releases its ring space. Aborts on an error.
static void wait_release_oldest(Buckets *bk) {
    struct Zero2 *z = bk->z2;
    Comm *c = bk->comm;
    if (!c->allreduce_wait_some) { wait_release(bk); return; }
    // in flight: the started buckets [oldest, next), all reduce-scatters of this micro-step
    if (c->allreduce_wait_some(c, (size_t)(bk->next - z->oldest - 1))) c->abort(c, 1, c->err);
    harvest(bk, z->oldest);
    z->state[z->oldest++] = B_FREE;
}

// Ring space for bucket b, zeroed, its tensors' gradients pointed into it.
static void place(Buckets *bk, int b) {
    struct Zero2 *z = bk->z2;
    const size_t n = bk->b[b].n;
    size_t pos = ring_fit(z->R, z->head, z->oldest < b, z->oldest < b ? z->at[z->oldest] : 0, n, z->flush);
    while (pos == (size_t)-1 && z->oldest < b && z->state[z->oldest] == B_STARTED) {
        wait_release_oldest(bk);
        pos = ring_fit(z->R, z->head, z->oldest < b, z->oldest < b ? z->at[z->oldest] : 0, n, z->flush);
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

// Places the buckets of the gradients [lo, hi) (the backward's next op) that have no space yet.
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
    if (bk->z2 && first > 0) {   // the next op's gradients: [the next hook point, first)
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

// ---- ZeRO: the parameter all-gather, one per bucket, waited for by the next forward

int buckets_gather_start(Buckets *bk, float *params) {
    Comm *c = bk->comm;
    const int W = c->world_size;
    if (!bk->gather_no && !(bk->gather_no = calloc((size_t)bk->n, sizeof(long)))) {
        snprintf(c->err, sizeof c->err, "[rank %d] out of memory for the all-gather's bucket numbers", c->rank);
        return 1;
    }
    size_t *displs = malloc(sizeof(size_t) * (size_t)W);
    if (!displs) {
        snprintf(c->err, sizeof c->err, "[rank %d] out of memory for the all-gather", c->rank);
        return 1;
    }
    int rc = 0;
    for (int b = bk->n - 1; b >= 0 && !rc; b--) {   // the forward's order: the start of the buffer first
        shard_split_range(bk->shards, bk->b[b].first, bk->b[b].n, bk->counts, c->rank, NULL);
        size_t off = 0;
        for (int q = 0; q < W; q++) { displs[q] = off; off += bk->counts[q]; }
        rc = c->allgather_start(c, params + bk->b[b].first, bk->counts, displs);
        if (!rc) bk->gather_no[b] = ++bk->gathers_started;
    }
    free(displs);
    return rc;
}

// Waits for the first k all-gathers. Non-zero on a communicator error.
static int gather_wait(Buckets *bk, long k) {
    if (k <= bk->gathers_done) return 0;
    if (bk->comm->allgather_wait(bk->comm, k)) return 1;
    bk->gathers_done = k;
    return 0;
}

void buckets_params_needed(void *ctx, size_t lo, size_t hi) {
    Buckets *bk = ctx;
    if (bk->gathers_done == bk->gathers_started) return;
    long k = 0;
    for (int b = 0; b < bk->n; b++)
        if (bk->b[b].first < hi && bk->b[b].first + bk->b[b].n > lo && bk->gather_no[b] > k) k = bk->gather_no[b];
    if (gather_wait(bk, k)) bk->comm->abort(bk->comm, 1, bk->comm->err);
}

int buckets_gather_wait_all(Buckets *bk) { return gather_wait(bk, bk->gathers_started); }
