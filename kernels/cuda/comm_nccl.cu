// kernels/cuda/comm_nccl.cu — the "nccl" communicator (dist/comm.h): the CUDA backend's
// gradient all-reduces, one GPU per rank, created from the host (MPI) communicator by
// Backend.grad_comm_create (ddp_reference.md §3).
//
// Overlap (§3.3, as llm.c): allreduce_start records an event on the compute stream behind the
// bucket's last gradient kernel, makes the comm stream wait on it, and enqueues ncclAllReduce
// (in place, fp32 SUM) there; the host never blocks, so the bucket is reduced while the
// backward pass of the earlier layers computes. allreduce_wait makes the compute stream wait on
// an event recorded behind the last bucket (the reverse fence before clipping and AdamW).
//
// ZeRO (dist/comm.h's reduce_scatter_start / allgather) with NCCL's own collectives, on the
// same stream and with the same events, fences and watchdog as the all-reduces: a bucket's
// reduce-scatter is a group (ncclGroupStart/End) of one in-place ncclReduce per rank q, root q,
// over q's counts[q] floats (NCCL's way for uneven counts; ncclReduceScatter when they are all
// equal), so each rank moves about one bucket, not the two of an all-reduce; the parameter
// all-gather is a group of ncclBroadcast, root q over its shard (ncclAllGather for equal,
// adjacent shards), ordered after the compute stream's optimizer step. Blocking (allgather) or
// started (allgather_start, one per bucket, the host does not block) and waited for by
// allgather_wait(k): the COMPUTE stream waits (cudaStreamWaitEvent) on the event recorded on
// the comm stream behind the k-th gather, so the next forward's kernels of a layer run once its
// parameters are there, the host never blocking. The gathers share the comm stream (FIFO) with
// the next backward's reduce-scatters, and the event slots with them: slots are handed out in
// order until allreduce_wait, whose host synchronisation completes everything before it (the
// gathers too), then reused. allreduce_wait_some(left) likewise makes the compute stream wait
// on the slot of the newest bucket that must be done (ZeRO stage 2's ring: the harvest and the
// reuse of the oldest buckets' space are compute-stream kernels behind it), host bookkeeping only.
//
// Instrumentation (CommStats), measured with CUDA timing events, i.e. GPU time:
//   t_busy     sum over buckets of (all-reduce end - start) on the comm stream
//   t_exposed  how long the compute stream stood at the reverse fence: the communication the
//              backward pass did not hide (allreduce_wait_some's waits are not timed)
//   t_gather   sum over all-gathers of (end - start) on the comm stream
//   t_gather_exposed  (started gathers) how long the compute stream stood at allgather_wait's
//              waits: timing events around each wait on the compute stream, GPU time, not the
//              host's (the host does not block there); the blocking allgather's is the host
//              time the trainer measures around it
// Reading them needs the events complete, so allreduce_wait also blocks the host until the
// fence is passed (the trainer's next op, the global gradient norm, synchronises anyway); the
// gathers' times are read there, or by allgather_wait once their events are complete.
// Under the emulator (no GPU running beside the host) these are host times of the emulated
// work: the emulator cannot overlap anything.
//
// Hangs (§3.5): NCCL has no collective timeout. A watchdog thread polls the oldest unfinished
// bucket (started all-gathers included: they stay on its list until the next allreduce_wait)
// with cudaEventQuery (never blocking) and ncclCommGetAsyncError; when a bucket whose
// gradients were ready (its compute-stream event complete) has not been reduced within
// Comm.timeout_s, or NCCL reports an asynchronous error, it prints what hangs, naming the rank
// and the bucket, and takes the job down: ncclCommAbort, then the host communicator's abort
// (MPI_Abort). Every error message names the rank and the collective.
#include <pthread.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <new>
#include <vector>

#include <nccl.h>

#include "config/clock.h"
#include "dist/comm.h"
#include "kernels/cuda/cuda_ops.cuh"

namespace {

struct BucketEvents {
    cudaEvent_t ready;     // compute stream, behind the bucket's gradients (no timing)
    cudaEvent_t t0, t1;    // comm stream, before / after the all-reduce (timing: t_busy)
};

// A timed wait of the compute stream (allgather_wait): events before / after it there.
struct WaitEvents {
    cudaEvent_t b, e;
};

// What a started bucket's collective is.
enum BucketKind { K_ALLREDUCE, K_REDUCE_SCATTER, K_ALLGATHER };
const char *kind_name(BucketKind kind) {
    return kind == K_ALLREDUCE ? "all-reduce" : kind == K_REDUCE_SCATTER ? "reduce-scatter" : "all-gather";
}

// A started bucket the watchdog has not yet seen reduced.
struct Pending {
    int k;                 // bucket index in this step (events ev[k])
    size_t n;              // floats
    BucketKind kind;
    bool enqueued;         // its NCCL call(s) returned and t1 is recorded
    double t_ready;        // when the watchdog saw its gradients ready; < 0: not yet
};

struct NcclCtx {
    Comm *host;            // the MPI communicator: host collectives, the final abort
    CudaCtx *cx;           // the backend: device and compute stream
    ncclComm_t nccl;
    cudaStream_t stream;   // the comm stream
    cudaEvent_t wait_begin, wait_end;   // compute stream around the reverse fence (timing)
    std::vector<BucketEvents> ev;       // grown to the most buckets of one step, then reused
    std::vector<int> kinds;             // BucketKind of the slots [0, nb)
    int nb;                // buckets (and all-gathers) started since the last allreduce_wait
    int nb_done;           // slots [0, nb_done) the compute stream waits for (allreduce_wait_some)
    // started all-gathers: gathers_started counts them since creation; gslot[i] is the slot of
    // gather gslot_base + i (-1: completed by an allreduce_wait), gslot_timed of them have had
    // their busy time read, gathers_waited is the most the compute stream waits for
    long gathers_started, gathers_waited, gslot_base;
    std::vector<int> gslot;
    size_t gslot_timed;
    std::vector<WaitEvents> gw;         // allgather_wait's timing events, grown, then reused
    int ngw, ngw_timed;    // pairs recorded since the last allreduce_wait / of them read
    bool backward_done;    // backward_done() was called since the last allreduce_wait
    // watchdog (everything below under mu)
    pthread_t watchdog;
    bool watchdog_running;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool quit;
    std::vector<Pending> pend;
    size_t pend_head;      // pend[pend_head..] are not known to be complete
    std::atomic<int> aborting;
};

NcclCtx *X(Comm *c) { return (NcclCtx *)c->ctx; }

__attribute__((format(printf, 2, 3)))
void set_err(Comm *c, const char *fmt, ...) {
    const int k = snprintf(c->err, sizeof c->err, "[rank %d] ", c->rank);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err + k, sizeof c->err - (size_t)k, fmt, ap);
    va_end(ap);
}

// Prints msg prefixed "[rank r] ", aborts the NCCL communicator (its kernels stop waiting for
// peers), then the host communicator takes every rank down. Only the first caller (main
// thread or watchdog) proceeds; a second one waits for the process to end.
__attribute__((noreturn)) void nccl_abort(Comm *c, int code, const char *msg) {
    NcclCtx *x = X(c);
    if (x->aborting.exchange(1)) for (;;) pause();
    fflush(stdout);
    if (msg) fprintf(stderr, "[rank %d] %s\n", c->rank, msg);
    fflush(stderr);
    if (x->nccl) ncclCommAbort(x->nccl);
    x->host->abort(x->host, code, NULL);
    _exit(code);   // not reached: the host communicator's abort does not return
}

// ---------------------------------------------------------------- watchdog
// Returns a message (in buf) when the job must be aborted, NULL otherwise. Called with mu held.
const char *watchdog_check(Comm *c, NcclCtx *x, char *buf, size_t len) {
    ncclResult_t ae = ncclSuccess;
    if (ncclCommGetAsyncError(x->nccl, &ae) == ncclSuccess && ae != ncclSuccess && ae != ncclInProgress) {
        snprintf(buf, len, "error: NCCL communicator failed during the gradient %s: %s (%.400s); aborting the job",
                 x->pend_head < x->pend.size() ? kind_name(x->pend[x->pend_head].kind) : "communication",
                 ncclGetErrorString(ae), ncclGetLastError(x->nccl));
        return buf;
    }
    const double t = now_s(), timeout = c->timeout_s;
    while (x->pend_head < x->pend.size()) {
        Pending &p = x->pend[x->pend_head];
        const BucketEvents &e = x->ev[(size_t)p.k];
        if (p.t_ready < 0) {
            // the bucket's gradients are not computed yet: its all-reduce has not begun
            if (cudaEventQuery(e.ready) != cudaSuccess) return NULL;
            p.t_ready = t;
        }
        if (p.enqueued && cudaEventQuery(e.t1) == cudaSuccess) { x->pend_head++; continue; }
        if (timeout > 0 && t - p.t_ready > timeout) {
            char what[96];
            if (p.kind == K_ALLGATHER) snprintf(what, sizeof what, "all-gather of the parameter shards");
            else snprintf(what, sizeof what, "%s of bucket %d", kind_name(p.kind), p.k);
            snprintf(buf, len, "error: NCCL %s (%zu floats) did not complete within %g s "
                     "(trainer_config.collective_timeout_s): another rank died, hangs or skipped the collective; "
                     "aborting the NCCL communicator and the job", what, p.n, timeout);
            return buf;
        }
        return NULL;   // buckets complete in order: the later ones cannot be done either
    }
    return NULL;
}

void *watchdog_main(void *arg) {
    Comm *c = (Comm *)arg;
    NcclCtx *x = X(c);
    cudaSetDevice(x->cx->device);
    char msg[1024];
    pthread_mutex_lock(&x->mu);
    while (!x->quit) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100000000L;   // 0.1 s: the timeout's resolution
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&x->cv, &x->mu, &ts);
        if (x->quit) break;
        if (const char *m = watchdog_check(c, x, msg, sizeof msg)) {
            pthread_mutex_unlock(&x->mu);
            nccl_abort(c, 1, m);
        }
    }
    pthread_mutex_unlock(&x->mu);
    return NULL;
}

// ---------------------------------------------------------------- the collectives
// Enqueues the collective of one bucket on the comm stream; the NCCL call's name in *call.
//   K_ALLREDUCE       buf[0, n) summed over ranks (counts, displs unused)
//   K_REDUCE_SCATTER  buf[0, n) with n = sum(counts): rank q's part, at counts[0] + ... +
//                     counts[q-1], summed into place on rank q (dist/comm.h)
//   K_ALLGATHER       rank q's counts[q] floats at buf + displs[q] to every rank, in place
// Equal counts take NCCL's collective for them, the rest a group of rooted calls (counts of
// 0 skipped: every rank skips the same ones).
ncclResult_t enqueue(Comm *c, BucketKind kind, float *buf, size_t n, const size_t *counts, const size_t *displs,
                     const char **call) {
    NcclCtx *x = X(c);
    if (kind == K_ALLREDUCE) {
        *call = "ncclAllReduce";
        return ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, x->nccl, x->stream);
    }
    const int W = c->world_size, me = c->rank;
    bool equal = counts[0] > 0;
    for (int q = 1; q < W; q++) equal = equal && counts[q] == counts[0];
    if (kind == K_REDUCE_SCATTER) {
        if (equal) {
            *call = "ncclReduceScatter";
            return ncclReduceScatter(buf, buf + (size_t)me * counts[0], counts[0], ncclFloat, ncclSum, x->nccl, x->stream);
        }
        *call = "ncclReduce";
        ncclResult_t r = ncclGroupStart();
        size_t off = 0;
        for (int q = 0; q < W && r == ncclSuccess; off += counts[q], q++)
            if (counts[q]) r = ncclReduce(buf + off, buf + off, counts[q], ncclFloat, ncclSum, q, x->nccl, x->stream);
        const ncclResult_t r2 = ncclGroupEnd();
        return r != ncclSuccess ? r : r2;
    }
    for (int q = 1; q < W; q++) equal = equal && displs[q] == displs[0] + (size_t)q * counts[0];
    if (equal) {
        *call = "ncclAllGather";
        float *base = buf + displs[0];
        return ncclAllGather(base + (size_t)me * counts[0], base, counts[0], ncclFloat, x->nccl, x->stream);
    }
    *call = "ncclBroadcast";
    ncclResult_t r = ncclGroupStart();
    for (int q = 0; q < W && r == ncclSuccess; q++)
        if (counts[q]) r = ncclBroadcast(buf + displs[q], buf + displs[q], counts[q], ncclFloat, q, x->nccl, x->stream);
    const ncclResult_t r2 = ncclGroupEnd();
    return r != ncclSuccess ? r : r2;
}

// Starts one bucket's collective (enqueue) on the comm stream behind the compute stream's work
// so far, with its events and its watchdog entry. The all-gather is no gradient bucket: it is
// not counted in CommStats (as the MPI communicator's), its time is t_gather.
int start_bucket(Comm *c, BucketKind kind, float *buf, size_t n, const size_t *counts, const size_t *displs) {
    NcclCtx *x = X(c);
    const int k = x->nb;
    const char *what = kind_name(kind);
    cudaError_t e = cudaSuccess;
    if ((size_t)k == x->ev.size()) {   // first step with this many buckets: one more set of events
        BucketEvents b;
        e = cudaEventCreateWithFlags(&b.ready, cudaEventDisableTiming);
        if (e == cudaSuccess) e = cudaEventCreate(&b.t0);
        if (e == cudaSuccess) e = cudaEventCreate(&b.t1);
        if (e != cudaSuccess) {
            set_err(c, "NCCL %s of bucket %d (%zu floats): cudaEventCreate failed: %s", what, k, n,
                    cudaGetErrorString(e));
            return 1;
        }
        pthread_mutex_lock(&x->mu);
        x->ev.push_back(b);
        pthread_mutex_unlock(&x->mu);
        x->kinds.push_back(K_ALLREDUCE);
    }
    x->kinds[(size_t)k] = kind;
    const BucketEvents b = x->ev[(size_t)k];
    // the comm stream starts once the bucket's last gradient kernel has run on the compute stream
    e = cudaEventRecord(b.ready, x->cx->stream);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(x->stream, b.ready, 0);
    if (e == cudaSuccess) e = cudaEventRecord(b.t0, x->stream);
    if (e != cudaSuccess) {
        set_err(c, "NCCL %s of bucket %d (%zu floats): ordering it after the compute stream's kernels "
                "failed: %s", what, k, n, cudaGetErrorString(e));
        return 1;
    }
    pthread_mutex_lock(&x->mu);
    x->pend.push_back(Pending{k, n, kind, false, -1.0});
    const size_t pi = x->pend.size() - 1;
    pthread_mutex_unlock(&x->mu);
    // may block in NCCL (or in the emulator's MPI): the watchdog covers it from here on
    const char *call = "";
    const ncclResult_t r = enqueue(c, kind, buf, n, counts, displs, &call);
    if (r != ncclSuccess) {
        pthread_mutex_lock(&x->mu);
        x->pend.pop_back();
        pthread_mutex_unlock(&x->mu);
        if (kind == K_ALLGATHER)
            set_err(c, "%s (all-gather of the parameter shards, %zu floats, %d ranks) failed: %s (%s)", call, n,
                    c->world_size, ncclGetErrorString(r), ncclGetLastError(x->nccl));
        else
            set_err(c, "%s of gradient bucket %d (%s, %zu floats, %d ranks) failed: %s (%s)", call, k, what, n,
                    c->world_size, ncclGetErrorString(r), ncclGetLastError(x->nccl));
        return 1;
    }
    e = cudaEventRecord(b.t1, x->stream);
    pthread_mutex_lock(&x->mu);
    x->pend[pi].enqueued = e == cudaSuccess;
    pthread_mutex_unlock(&x->mu);
    if (e != cudaSuccess) {
        set_err(c, "NCCL %s of bucket %d (%zu floats): cudaEventRecord failed: %s", what, k, n,
                cudaGetErrorString(e));
        return 1;
    }
    x->nb++;
    if (kind == K_ALLGATHER) return 0;
    c->stats.n_buckets++;
    c->stats.n_started_early += !x->backward_done;
    c->stats.bytes += (double)n * sizeof(float);
    return 0;
}

int nccl_allreduce_start(Comm *c, float *buf, size_t n) { return start_bucket(c, K_ALLREDUCE, buf, n, NULL, NULL); }

void nccl_backward_done(Comm *c) { X(c)->backward_done = true; }

// ---------------------------------------------------------------- ZeRO (stages 1 and 2)
int wait_all(Comm *c, bool timed);

int nccl_reduce_scatter_start(Comm *c, float *buf, const size_t *counts) {
    size_t n = 0;
    for (int q = 0; q < c->world_size; q++) n += counts[q];
    return start_bucket(c, K_REDUCE_SCATTER, buf, n, counts, NULL);
}

// Blocking, as the MPI communicator's: the comm stream starts behind the optimizer step on the
// compute stream, whose later kernels (the next forward) wait for the gathered parameters.
// (its busy time reaches t_gather through wait_all)
int nccl_allgather(Comm *c, float *buf, const size_t *counts, const size_t *displs) {
    size_t n = 0;
    for (int q = 0; q < c->world_size; q++) n += counts[q];
    return start_bucket(c, K_ALLGATHER, buf, n, counts, displs) || wait_all(c, false);
}

// Adds the busy time of the started all-gathers whose end event is complete (all of them when
// all: the caller synchronised) to t_gather, and the compute stream's time at the timed
// allgather_wait waits that are complete to t_gather_exposed. Never blocks.
void read_gather_times(Comm *c, bool all) {
    NcclCtx *x = X(c);
    float ms = 0.0f;
    for (; x->gslot_timed < x->gslot.size(); x->gslot_timed++) {
        const int s = x->gslot[x->gslot_timed];
        if (s < 0) continue;   // (only after an allreduce_wait, which read it)
        const BucketEvents &b = x->ev[(size_t)s];
        if (!all && cudaEventQuery(b.t1) != cudaSuccess) break;
        if (cudaEventElapsedTime(&ms, b.t0, b.t1) == cudaSuccess) c->stats.t_gather += ms * 1e-3;
    }
    for (; x->ngw_timed < x->ngw; x->ngw_timed++) {
        const WaitEvents &w = x->gw[(size_t)x->ngw_timed];
        if (!all && cudaEventQuery(w.e) != cudaSuccess) break;
        if (cudaEventElapsedTime(&ms, w.b, w.e) == cudaSuccess) c->stats.t_gather_exposed += ms * 1e-3;
    }
    (void)cudaGetLastError();   // a failed query only loses a statistic
    // the gathers waited for and timed are done with
    size_t drop = 0;
    while (drop < x->gslot_timed && x->gslot_base + (long)drop < x->gathers_waited) drop++;
    if (drop) {
        x->gslot.erase(x->gslot.begin(), x->gslot.begin() + (long)drop);
        x->gslot_base += (long)drop;
        x->gslot_timed -= drop;
    }
}

// Started, not waited for: the comm stream runs it behind the compute stream's work so far (the
// optimizer step), the host goes on.
int nccl_allgather_start(Comm *c, float *buf, const size_t *counts, const size_t *displs) {
    NcclCtx *x = X(c);
    size_t n = 0;
    for (int q = 0; q < c->world_size; q++) n += counts[q];
    const int slot = x->nb;
    if (start_bucket(c, K_ALLGATHER, buf, n, counts, displs)) return 1;
    x->gslot.push_back(slot);
    x->gathers_started++;
    c->stats.n_gathers++;
    return 0;
}

// The compute stream's later work waits for the first k gathers (the event behind the k-th:
// the comm stream is FIFO), timed by a pair of events around the wait there.
int nccl_allgather_wait(Comm *c, long k) {
    NcclCtx *x = X(c);
    if (k > x->gathers_started) {
        set_err(c, "allgather_wait(%ld): only %ld parameter all-gathers were started", k, x->gathers_started);
        return 1;
    }
    if (k > x->gathers_waited) {
        const int s = x->gslot[(size_t)(k - 1 - x->gslot_base)];
        x->gathers_waited = k;
        if (s >= 0) {   // (-1: an allreduce_wait completed it, and ordered the compute stream after it)
            cudaError_t e = cudaSuccess;
            if ((size_t)x->ngw == x->gw.size()) {
                WaitEvents w;
                e = cudaEventCreate(&w.b);
                if (e == cudaSuccess) e = cudaEventCreate(&w.e);
                if (e == cudaSuccess) x->gw.push_back(w);
            }
            if (e == cudaSuccess) {
                const WaitEvents w = x->gw[(size_t)x->ngw];
                e = cudaEventRecord(w.b, x->cx->stream);
                if (e == cudaSuccess) e = cudaStreamWaitEvent(x->cx->stream, x->ev[(size_t)s].t1, 0);
                if (e == cudaSuccess) e = cudaEventRecord(w.e, x->cx->stream);
                if (e == cudaSuccess) x->ngw++;
            }
            if (e != cudaSuccess) {
                set_err(c, "waiting for the NCCL all-gather %ld of the parameter shards failed: %s", k,
                        cudaGetErrorString(e));
                return 1;
            }
        }
    }
    ncclResult_t ae = ncclSuccess;
    if (ncclCommGetAsyncError(x->nccl, &ae) != ncclSuccess || (ae != ncclSuccess && ae != ncclInProgress)) {
        set_err(c, "NCCL all-gather of the parameter shards failed: %s (%s)", ncclGetErrorString(ae),
                ncclGetLastError(x->nccl));
        return 1;
    }
    read_gather_times(c, false);
    return 0;
}

// ZeRO stage 2: the compute stream's later work (the harvest of the oldest buckets, the reuse of
// their ring space) waits until at most `left` of the started slots are still in flight: on the
// end event of the newest slot that must be done (the comm stream is FIFO). The host does not
// block; the reverse fence (allreduce_wait) times and checks them all.
int nccl_allreduce_wait_some(Comm *c, size_t left) {
    NcclCtx *x = X(c);
    if ((size_t)x->nb <= left) return 0;
    const int target = x->nb - (int)left;
    if (target <= x->nb_done) return 0;
    const cudaError_t e = cudaStreamWaitEvent(x->cx->stream, x->ev[(size_t)target - 1].t1, 0);
    if (e != cudaSuccess) {
        set_err(c, "waiting for the NCCL %s of bucket %d failed: %s", kind_name((BucketKind)x->kinds[(size_t)target - 1]),
                target - 1, cudaGetErrorString(e));
        return 1;
    }
    x->nb_done = target;
    return 0;
}

// allreduce_wait; timed: adds the buckets' times to t_busy and t_exposed (not for the all-gather).
int wait_all(Comm *c, bool timed) {
    NcclCtx *x = X(c);
    const int nb = x->nb;
    x->nb = 0;
    x->nb_done = 0;
    x->backward_done = false;   // the next bucket belongs to the next backward pass
    if (nb == 0) return 0;
    const BucketEvents last = x->ev[(size_t)nb - 1];
    cudaError_t e = cudaEventRecord(x->wait_begin, x->cx->stream);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(x->cx->stream, last.t1, 0);
    if (e == cudaSuccess) e = cudaEventRecord(x->wait_end, x->cx->stream);
    if (e == cudaSuccess) e = cudaEventSynchronize(x->wait_end);   // the watchdog covers a hang here
    char what[96];
    if (timed) snprintf(what, sizeof what, "all-reduce or reduce-scatter of %d gradient buckets", nb);
    else snprintf(what, sizeof what, "all-gather of the parameter shards");
    if (e != cudaSuccess) {
        set_err(c, "waiting for the NCCL %s failed: %s", what, cudaGetErrorString(e));
        return 1;
    }
    ncclResult_t ae = ncclSuccess;
    if (ncclCommGetAsyncError(x->nccl, &ae) != ncclSuccess || ae != ncclSuccess) {
        set_err(c, "NCCL %s failed: %s (%s)", what, ncclGetErrorString(ae), ncclGetLastError(x->nccl));
        return 1;
    }
    float ms = 0.0f;
    // everything started is complete: the gathers' times, then their slots are free
    read_gather_times(c, true);
    for (int &s : x->gslot) s = -1;
    x->ngw = x->ngw_timed = 0;
    if (timed) {
        if (cudaEventElapsedTime(&ms, x->wait_begin, x->wait_end) == cudaSuccess) c->stats.t_exposed += ms * 1e-3;
        for (int k = 0; k < nb; k++)
            if (x->kinds[(size_t)k] != K_ALLGATHER &&
                cudaEventElapsedTime(&ms, x->ev[(size_t)k].t0, x->ev[(size_t)k].t1) == cudaSuccess)
                c->stats.t_busy += ms * 1e-3;
    } else if (cudaEventElapsedTime(&ms, x->ev[(size_t)nb - 1].t0, x->ev[(size_t)nb - 1].t1) == cudaSuccess) {
        c->stats.t_gather += ms * 1e-3;   // the blocking all-gather: the last slot
    }
    (void)cudaGetLastError();   // a failed elapsed-time query only loses a statistic
    pthread_mutex_lock(&x->mu);
    x->pend.clear();
    x->pend_head = 0;
    pthread_mutex_unlock(&x->mu);
    return 0;
}

int nccl_allreduce_wait(Comm *c) { return wait_all(c, true); }

// ---------------------------------------------------------------- host collectives: the host comm's
int nccl_allreduce_host(Comm *c, double *v, int n, CommOp op) {
    Comm *h = X(c)->host;
    if (h->allreduce_host(h, v, n, op) == 0) return 0;
    snprintf(c->err, sizeof c->err, "%s", h->err);
    return 1;
}

int nccl_bcast_host(Comm *c, void *buf, size_t bytes, int root) {
    Comm *h = X(c)->host;
    if (h->bcast_host(h, buf, bytes, root) == 0) return 0;
    snprintf(c->err, sizeof c->err, "%s", h->err);
    return 1;
}

// ---------------------------------------------------------------- teardown
void release(NcclCtx *x) {
    if (x->watchdog_running) {
        pthread_mutex_lock(&x->mu);
        x->quit = true;
        pthread_cond_broadcast(&x->cv);
        pthread_mutex_unlock(&x->mu);
        pthread_join(x->watchdog, NULL);
    }
    if (x->stream) cudaStreamSynchronize(x->stream);
    if (x->nccl) ncclCommDestroy(x->nccl);
    for (const BucketEvents &b : x->ev) {
        cudaEventDestroy(b.ready);
        cudaEventDestroy(b.t0);
        cudaEventDestroy(b.t1);
    }
    for (const WaitEvents &w : x->gw) {
        cudaEventDestroy(w.b);
        cudaEventDestroy(w.e);
    }
    if (x->wait_begin) cudaEventDestroy(x->wait_begin);
    if (x->wait_end) cudaEventDestroy(x->wait_end);
    if (x->stream) cudaStreamDestroy(x->stream);
    pthread_mutex_destroy(&x->mu);
    pthread_cond_destroy(&x->cv);
    delete x;
}

void nccl_destroy(Comm *c) {
    if (!c) return;
    release(X(c));
    free(c);
}

}  // namespace

// Collective over the ranks of `host` (every rank calls it): rank 0 makes the ncclUniqueId, the
// host communicator broadcasts it, ncclCommInitRank joins the ranks on the backend's device.
// The result takes rank, size and timeout_s from host; destroy it before host (MPI_Finalize).
Comm *cuda_grad_comm_create(Backend *be, Comm *host, char *err, size_t errlen) {
    CudaCtx *cx = (CudaCtx *)be->ctx;
    const int rank = host->rank, W = host->world_size;
    cudaError_t ce = cudaSetDevice(cx->device);
    if (ce != cudaSuccess) {
        snprintf(err, errlen, "[rank %d] NCCL communicator: cudaSetDevice(%d) failed: %s", rank, cx->device,
                 cudaGetErrorString(ce));
        return NULL;
    }
    // rank 0's id, or its failure, reaches every rank (nobody is left waiting in the init)
    struct { int ok; ncclUniqueId id; } msg;
    memset(&msg, 0, sizeof msg);
    if (rank == 0) {
        const ncclResult_t r = ncclGetUniqueId(&msg.id);
        msg.ok = r == ncclSuccess;
        if (!msg.ok)
            snprintf(err, errlen, "[rank 0] NCCL communicator: ncclGetUniqueId failed: %s (%s)", ncclGetErrorString(r),
                     ncclGetLastError(NULL));
    }
    if (host->bcast_host(host, &msg, sizeof msg, 0) != 0) {
        snprintf(err, errlen, "%s (broadcasting the ncclUniqueId)", host->err);
        return NULL;
    }
    if (!msg.ok) {
        if (rank != 0) snprintf(err, errlen, "[rank %d] NCCL communicator: rank 0 could not make an ncclUniqueId", rank);
        return NULL;
    }
    Comm *c = (Comm *)calloc(1, sizeof *c);
    NcclCtx *x = new (std::nothrow) NcclCtx();
    if (!c || !x) {
        free(c);
        delete x;
        snprintf(err, errlen, "[rank %d] NCCL communicator: out of host memory", rank);
        return NULL;
    }
    x->host = host;
    x->cx = cx;
    pthread_mutex_init(&x->mu, NULL);
    pthread_cond_init(&x->cv, NULL);
    c->name = "nccl";
    c->rank = rank;
    c->world_size = W;
    c->local_rank = host->local_rank;
    c->local_size = host->local_size;
    c->timeout_s = host->timeout_s;
    c->ctx = x;
    c->allreduce_host = nccl_allreduce_host;
    c->bcast_host = nccl_bcast_host;
    c->allreduce_start = nccl_allreduce_start;
    c->allreduce_wait = nccl_allreduce_wait;
    c->backward_done = nccl_backward_done;
    c->reduce_scatter_start = nccl_reduce_scatter_start;
    c->allgather = nccl_allgather;   // (gather: none; the trainer gathers through the host communicator)
    c->allgather_start = nccl_allgather_start;
    c->allgather_wait = nccl_allgather_wait;
    c->allreduce_wait_some = nccl_allreduce_wait_some;
    c->abort = nccl_abort;
    c->destroy = nccl_destroy;

    const ncclResult_t r = ncclCommInitRank(&x->nccl, W, msg.id, rank);
    if (r != ncclSuccess) {
        snprintf(err, errlen, "[rank %d] NCCL communicator: ncclCommInitRank (%d ranks, device %d) failed: %s (%s)", rank,
                 W, cx->device, ncclGetErrorString(r), ncclGetLastError(NULL));
        x->nccl = NULL;
        nccl_destroy(c);
        return NULL;
    }
    ce = cudaStreamCreateWithFlags(&x->stream, cudaStreamNonBlocking);
    if (ce == cudaSuccess) ce = cudaEventCreate(&x->wait_begin);
    if (ce == cudaSuccess) ce = cudaEventCreate(&x->wait_end);
    if (ce != cudaSuccess) {
        snprintf(err, errlen, "[rank %d] NCCL communicator: creating its stream and events failed: %s", rank,
                 cudaGetErrorString(ce));
        nccl_destroy(c);
        return NULL;
    }
    if (pthread_create(&x->watchdog, NULL, watchdog_main, c) != 0) {
        snprintf(err, errlen, "[rank %d] NCCL communicator: cannot start its watchdog thread", rank);
        nccl_destroy(c);
        return NULL;
    }
    x->watchdog_running = true;
    return c;
}
