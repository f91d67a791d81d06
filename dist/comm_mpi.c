// dist/comm_mpi.c — the MPI communicator (Open MPI), built into build/libmingpt_mpi.so and
// loaded by comm_mpi_open (dist/comm.c) only when mpirun or srun started the process.
//
// Overlap on the CPU: Open MPI 4.1 moves a non-blocking collective only while the process is
// inside an MPI call (ddp_reference.md §4.3), and the backward pass calls none for tens of
// milliseconds at a time. So gradient buckets go to a communication thread that runs one
// blocking MPI_Allreduce per bucket, in the order they were started, on its own duplicate of
// MPI_COMM_WORLD; the main thread keeps computing the earlier layers' gradients meanwhile.
// ZeRO's reduce-scatters (reduce_scatter_start) and parameter all-gathers (allgather_start,
// after AdamW, waited for by the next forward) join the same queue: one order on every rank.
// Host collectives (loss, stop flags, broadcasts) run on the main thread on the world
// communicator, never while buckets are in flight. MPI_THREAD_MULTIPLE is required.
//
// The alternative, MINGPT_MPI_PROGRESS=test: the main thread starts each bucket with
// MPI_Iallreduce (MPI_Ireduce_scatter, MPI_Iallgatherv) and drives the progress engine with
// MPI_Test after every op of the backward (Comm.progress), then waits for each request in
// order. No extra thread, but the data moves only at those calls. `make bench-ddp` measures both; the thread is the default.
//
// Hangs: a watchdog thread aborts the whole job (MPI_Abort) when a collective has been in
// flight for longer than Comm.timeout_s, naming the rank, the collective and the ranks that did
// not arrive (it asks every rank's watchdog over a side channel, with a deadline); and when a
// stop signal comes while a collective waits for a rank that does not answer (mpirun sends
// SIGTERM to the others when a rank is killed). Before MPI_Abort, rank 0 records the abort
// through Comm.on_abort (summary.json), also when another rank's watchdog tells it to.
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/clock.h"
#include "dist/comm.h"

#define QCAP 4096   // buckets in flight at once (a step has at most one per tensor)

// A queued collective, in place on the n floats at buf: a gradient all-reduce, a gradient
// reduce-scatter, or a parameter all-gather (the last two with their slot's layout: MpiCtx.layout).
enum { K_ALLREDUCE = 0, K_REDUCE_SCATTER = 1, K_ALLGATHER = 2 };
typedef struct { float *buf; size_t n; int kind; } Bucket;

enum { MODE_THREAD = 0, MODE_TEST = 1 };

typedef struct {
    MPI_Comm world, grad;            // host collectives / gradient buckets
    pthread_t thread, watchdog;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done, cv_quit;
    Bucket q[QCAP];
    long started, finished;          // buckets pushed / reduced since the start
    bool quit, backward_done;
    double bucket_since;             // start of the bucket being reduced (0: none)
    double host_since;               // start of the host collective in flight (0: none)
    const char *host_what;           // its name, for the watchdog's message
    int failed;                      // an all-reduce returned an error (message in c->err)
    int mode;                        // MODE_THREAD or MODE_TEST
    MPI_Request req[QCAP];           // MODE_TEST: requests started / completed, in order
    double req_t0[QCAP];
    long n_req, n_req_done;
    long n_host;                     // host collectives entered since the start
    MPI_Comm side;                   // the watchdogs' side channel (requests and answers)
    long req_in[2];                  // the request being received
    MPI_Request req_in_req;
    long *answer;                    // [world][NSTATE]: the last answer sent to each rank
    MPI_Request *answer_req;         // [world]
    int noticed;                     // another rank's watchdog said it aborts the job (watchdog thread only)
    int *layout;                     // (QCAP x 2 world) each slot's counts then displacements, or NULL
    float *req_buf[QCAP];            // MODE_TEST: the request's buffer
    int req_kind[QCAP];              // MODE_TEST: the request's K_*
    int cur_kind;                    // the K_* of the collective in flight (for the watchdog)
    long ag_started, ag_finished;    // all-gathers queued / done since the start
    double ag_busy;                  // busy time of all-gathers done, not yet in c->stats (allgather_wait)
} MpiCtx;

static void set_err(Comm *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = snprintf(c->err, sizeof c->err, "[rank %d] ", c->rank);
    vsnprintf(c->err + k, sizeof c->err - (size_t)k, fmt, ap);
    va_end(ap);
}

static const char *mpi_errstr(int rc, char *buf) {
    int len = 0;
    if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) snprintf(buf, MPI_MAX_ERROR_STRING, "MPI error %d", rc);
    return buf;
}

static const char *kind_name(int kind) {
    return kind == K_ALLGATHER ? "the parameter all-gather"
         : kind == K_REDUCE_SCATTER ? "the gradient reduce-scatter" : "the gradient all-reduce";
}

// ============================================================================
// The communication thread: one blocking collective per queued bucket, in order
// ============================================================================
static int allreduce_floats(MPI_Comm comm, float *buf, size_t n) {
    for (size_t off = 0; off < n; off += (size_t)1 << 30) {   // MPI counts are int
        size_t k = n - off < ((size_t)1 << 30) ? n - off : ((size_t)1 << 30);
        int rc = MPI_Allreduce(MPI_IN_PLACE, buf + off, (int)k, MPI_FLOAT, MPI_SUM, comm);
        if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
}

// MPI_Reduce_scatter with MPI_IN_PLACE leaves this rank's part at the start of buf: move it to
// where it lies in buf (after the parts of the lower ranks), as reduce_scatter_start promises.
static void place_part(const Comm *c, float *buf, const int *counts) {
    size_t off = 0;
    for (int q = 0; q < c->rank; q++) off += (size_t)counts[q];
    if (off && counts[c->rank]) memmove(buf + off, buf, (size_t)counts[c->rank] * sizeof(float));
}

static int reduce_scatter_in_place(const Comm *c, MPI_Comm comm, float *buf, const int *counts) {
    const int rc = MPI_Reduce_scatter(MPI_IN_PLACE, buf, counts, MPI_FLOAT, MPI_SUM, comm);
    if (rc == MPI_SUCCESS) place_part(c, buf, counts);
    return rc;
}

static void *comm_thread(void *arg) {
    Comm *c = arg;
    MpiCtx *x = c->ctx;
    pthread_mutex_lock(&x->mu);
    for (;;) {
        while (!x->quit && x->finished == x->started) pthread_cond_wait(&x->cv_work, &x->mu);
        if (x->quit) break;
        Bucket b = x->q[x->finished % QCAP];
        // the slot's layout stays put until finished moves past it (queue_request waits for that)
        const int *lay = b.kind == K_ALLREDUCE ? NULL : x->layout + (x->finished % QCAP) * 2 * c->world_size;
        const double t0 = now_s();
        x->bucket_since = t0;
        x->cur_kind = b.kind;
        pthread_mutex_unlock(&x->mu);
        int rc = b.kind == K_REDUCE_SCATTER ? reduce_scatter_in_place(c, x->grad, b.buf, lay)
               : b.kind == K_ALLGATHER ? MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b.buf, lay,
                                                        lay + c->world_size, MPI_FLOAT, x->grad)
               : allreduce_floats(x->grad, b.buf, b.n);
        const double t1 = now_s();
        pthread_mutex_lock(&x->mu);
        x->bucket_since = 0;
        if (b.kind == K_ALLGATHER) {
            x->ag_busy += t1 - t0;
            x->ag_finished++;
        } else {
            c->stats.t_busy += t1 - t0;
        }
        if (rc != MPI_SUCCESS && !x->failed) {
            char s[MPI_MAX_ERROR_STRING];
            set_err(c, "%s of %s %ld (%zu floats) failed: %s",
                    b.kind == K_REDUCE_SCATTER ? "MPI_Reduce_scatter" : b.kind == K_ALLGATHER ? "MPI_Allgatherv"
                                                                                          : "MPI_Allreduce",
                    b.kind == K_ALLGATHER ? "parameter bucket" : "gradient bucket", x->finished, b.n,
                    mpi_errstr(rc, s));
            x->failed = 1;
        }
        x->finished++;
        pthread_cond_broadcast(&x->cv_done);
    }
    pthread_mutex_unlock(&x->mu);
    return NULL;
}

// ============================================================================
// The side channel: which ranks did not arrive
// ============================================================================
// Each rank's watchdog thread keeps a receive posted on its own duplicate of MPI_COMM_WORLD and
// answers every request with this rank's state; a rank whose collective times out asks the
// others (non-blocking, with a deadline: a killed or stopped rank cannot make it hang) and
// names those that have not entered the collective it waits in. Requests are two longs
// {kind, code}; answers are NSTATE longs (my_state).
enum { TAG_REQ = 1, TAG_ANSWER = 2 };
enum { REQ_QUERY = 0, REQ_NOTICE = 1 };   // notice: the job aborts with `code` (told to rank 0)
enum { S_ITER, S_HOST, S_IN_HOST, S_BUCKETS, NSTATE };

// This rank's state for an answer; the caller holds x->mu.
static void my_state(Comm *c, long *s) {
    MpiCtx *x = c->ctx;
    s[S_ITER] = __atomic_load_n(&c->iter, __ATOMIC_RELAXED);
    s[S_HOST] = x->n_host;
    s[S_IN_HOST] = x->host_since > 0;
    s[S_BUCKETS] = x->mode == MODE_TEST ? x->n_req : x->started;
}

static void post_request_receive(MpiCtx *x) {
    if (MPI_Irecv(x->req_in, 2, MPI_LONG, MPI_ANY_SOURCE, TAG_REQ, x->side, &x->req_in_req) != MPI_SUCCESS)
        x->req_in_req = MPI_REQUEST_NULL;
}

// Takes mu within 0.1 s, or returns 0: a thread that holds it longer hangs, and the watchdog
// must answer anyway.
static int lock_briefly(pthread_mutex_t *mu) {
    for (int i = 0; i < 50; i++) {
        if (pthread_mutex_trylock(mu) == 0) return 1;
        nanosleep(&(struct timespec){0, 2000000L}, NULL);
    }
    return 0;
}

// Answers the requests that have arrived (watchdog thread, x->mu not held). A notice makes
// this rank record the abort (comm_notify_abort: rank 0 writes summary.json) before answering.
static void serve_requests(Comm *c) {
    MpiCtx *x = c->ctx;
    for (;;) {
        int done = 0;
        MPI_Status st;
        if (x->req_in_req == MPI_REQUEST_NULL || MPI_Test(&x->req_in_req, &done, &st) != MPI_SUCCESS || !done) return;
        const int src = st.MPI_SOURCE;
        if (x->req_in[0] == REQ_NOTICE) {   // another rank aborts the job and has said why
            x->noticed = 1;
            comm_notify_abort(c, (int)x->req_in[1]);
        }
        int free_slot = 1;
        if (x->answer_req[src] != MPI_REQUEST_NULL) MPI_Test(&x->answer_req[src], &free_slot, MPI_STATUS_IGNORE);
        if (free_slot) {   // else the previous answer to src is still on its way: src asks again
            long *a = &x->answer[(size_t)src * NSTATE];
            if (lock_briefly(&x->mu)) {
                my_state(c, a);
                pthread_mutex_unlock(&x->mu);
            } else {   // the main thread hangs holding the lock: the iteration alone (not in a collective)
                a[S_ITER] = __atomic_load_n(&c->iter, __ATOMIC_RELAXED);
                a[S_HOST] = a[S_BUCKETS] = -1;
                a[S_IN_HOST] = 0;
            }
            MPI_Isend(&x->answer[(size_t)src * NSTATE], NSTATE, MPI_LONG, src, TAG_ANSWER, x->side, &x->answer_req[src]);
        }
        post_request_receive(x);
    }
}

// Sends request {kind, code} to rank `only` (or to every other rank when -1) and waits up to
// wait_s for the answers, serving the others' requests meanwhile (they may be asking this rank
// at the same time). st gets the answers (NSTATE longs per rank), answered[r] whether rank r
// answered. Requests left unanswered are freed (their buffers stay allocated: the job aborts).
static void ask_ranks(Comm *c, long kind, long code, int only, double wait_s, long *st, char *answered) {
    MpiCtx *x = c->ctx;
    const int W = c->world_size;
    MPI_Request *rq = malloc(2 * (size_t)W * sizeof *rq);
    long *out = malloc(2 * (size_t)W * sizeof *out);
    if (!rq || !out) { free(rq); free(out); return; }
    int pending = 0;
    for (int r = 0; r < W; r++) {
        rq[2 * r] = rq[2 * r + 1] = MPI_REQUEST_NULL;
        answered[r] = 0;
        if (r == c->rank || (only >= 0 && r != only)) continue;
        out[2 * r] = kind;
        out[2 * r + 1] = code;
        if (MPI_Irecv(&st[(size_t)r * NSTATE], NSTATE, MPI_LONG, r, TAG_ANSWER, x->side, &rq[2 * r + 1]) != MPI_SUCCESS ||
            MPI_Isend(&out[2 * r], 2, MPI_LONG, r, TAG_REQ, x->side, &rq[2 * r]) != MPI_SUCCESS)
            continue;
        pending++;
    }
    const double deadline = now_s() + wait_s;
    while (pending > 0 && now_s() < deadline) {
        serve_requests(c);
        for (int r = 0; r < W; r++) {
            int done = 0;
            if (rq[2 * r + 1] == MPI_REQUEST_NULL) continue;
            if (MPI_Test(&rq[2 * r + 1], &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done) { answered[r] = 1; pending--; }
        }
        nanosleep(&(struct timespec){0, 2000000L}, NULL);
    }
    for (int r = 0; r < 2 * W; r++)
        if (rq[r] != MPI_REQUEST_NULL) {
            if (r % 2) MPI_Cancel(&rq[r]);
            MPI_Request_free(&rq[r]);
        }
    free(rq);
    if (pending == 0) free(out);   // else a send may still read it
}

// "rank 1 did not arrive (no answer ...); rank 3 did not arrive (it is at iteration 12, ...)": the ranks that
// have not entered the collective this rank waits in (host: its mine[S_HOST]-th host
// collective; else gradient bucket number `bucket`). A rank already past it (a later iteration,
// or this host collective left) is listed as such: then this rank is the one that is behind (its
// main thread stopped or hangs after its part was sent), not the one kept waiting. Returns how
// many did not arrive; *passed gets how many have passed it.
static int not_arrived(const Comm *c, const long *st, const char *answered, const long *mine, int host, long bucket,
                       double wait_s, char *buf, size_t len, int *passed) {
    int n = 0;
    size_t k = 0;
    buf[0] = 0;
    *passed = 0;
    for (int r = 0; r < c->world_size && k < len; r++) {
        if (r == c->rank) continue;
        const long *s = &st[(size_t)r * NSTATE];
        const char *sep = n + *passed ? "; " : "";
        int w;
        if (!answered[r])
            w = snprintf(buf + k, len - k, "%srank %d did not arrive (no answer within %.1f s: killed, stopped or "
                         "unreachable)", sep, r, wait_s);
        else if (s[S_ITER] > mine[S_ITER] ||
                 (host && (s[S_HOST] > mine[S_HOST] || (s[S_HOST] == mine[S_HOST] && !s[S_IN_HOST])))) {
            w = snprintf(buf + k, len - k, "%srank %d has passed it (it is at iteration %ld)", sep, r, s[S_ITER]);
            (*passed)++;
            k += w > 0 ? (size_t)w : 0;
            continue;
        } else if (host ? !(s[S_IN_HOST] && s[S_HOST] == mine[S_HOST]) : s[S_BUCKETS] <= bucket)
            w = snprintf(buf + k, len - k, "%srank %d did not arrive (it is at iteration %ld, not in this collective)",
                         sep, r, s[S_ITER]);
        else
            continue;
        n++;
        k += w > 0 ? (size_t)w : 0;
    }
    if (n == 0 && *passed && k < len)
        snprintf(buf + k, len - k, ": this rank is behind (its main thread stopped or hangs)");
    return n;
}

// Prints msg, has rank 0 record the abort (this rank itself, or a notice to rank 0's watchdog,
// answered within 2 s when it runs), then takes the job down.
static void abort_from_watchdog(Comm *c, const char *msg, int rank0_answers) {
    fprintf(stderr, "%s\n", msg);
    fflush(stderr);
    long *st = rank0_answers ? calloc((size_t)c->world_size * NSTATE, sizeof *st) : NULL;
    char *answered = st ? calloc((size_t)c->world_size, 1) : NULL;
    if (c->rank != 0 && answered) ask_ranks(c, REQ_NOTICE, 1, 0, 2.0, st, answered);
    comm_notify_abort(c, 1);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

// What this rank waits in: its name, since when, whether a host collective, and the bucket
// number for a gradient all-reduce. 0 when nothing is in flight. Caller holds x->mu.
static int in_flight(MpiCtx *x, const char **what, double *since, int *host, long *bucket) {
    if (x->host_since > 0) { *what = x->host_what; *since = x->host_since; *host = 1; *bucket = -1; return 1; }
    if (x->bucket_since > 0) {
        *what = kind_name(x->mode == MODE_TEST ? x->req_kind[x->n_req_done % QCAP] : x->cur_kind);
        *since = x->bucket_since;
        *host = 0;
        *bucket = x->mode == MODE_TEST ? x->n_req_done : x->finished;
        return 1;
    }
    return 0;
}

// How long a stop check waits for answers: it must be over before mpirun's SIGKILL, which comes
// odls_base_sigkill_timeout seconds (1 by default) after its SIGTERM; half of that, 0.5 s at
// least (a busy machine may be slow to schedule a watchdog), 5 at most; 2 s without mpirun.
static double stop_wait_s(void) {
    if (!getenv("OMPI_MCA_orte_hnp_uri")) return 2.0;
    const char *v = getenv("OMPI_MCA_odls_base_sigkill_timeout");
    const double g = v && *v ? strtod(v, NULL) : 1;
    return g / 2 < 0.5 ? 0.5 : g / 2 > 5 ? 5 : g / 2;
}

// A collective older than timeout_s: ask the other ranks, name those that did not arrive, abort.
// A stop signal (c->stop_flag) while waiting for a rank that does not answer: the same at once.
static void check_collective(Comm *c, const char *what, double since, int host, long bucket, int stop) {
    MpiCtx *x = c->ctx;
    const int W = c->world_size;
    const double wait_s = stop ? stop_wait_s() : 2.0, waited = now_s() - since;
    long mine[NSTATE];
    pthread_mutex_lock(&x->mu);
    my_state(c, mine);
    pthread_mutex_unlock(&x->mu);
    long *st = calloc((size_t)W * NSTATE, sizeof *st);
    char *answered = calloc((size_t)W, 1);
    char who[1000] = "", msg[1400];
    int n = 0, passed = 0;
    if (st && answered) {
        ask_ranks(c, REQ_QUERY, 0, -1, wait_s, st, answered);
        n = not_arrived(c, st, answered, mine, host, bucket, wait_s, who, sizeof who, &passed);
    }
    int silent = 0;
    for (int r = 0; st && answered && r < W; r++) silent += r != c->rank && !answered[r];
    if (stop && silent == 0) { free(st); free(answered); return; }   // every rank is there: a normal stop
    if (stop)
        snprintf(msg, sizeof msg, "[rank %d] mingpt: error: a stop signal came while %s was waiting: %s; "
                 "aborting the job", c->rank, what, who);
    else
        snprintf(msg, sizeof msg, "[rank %d] mingpt: error: %s has not completed after %.0f s "
                 "(trainer_config.collective_timeout_s = %g): %s; aborting the job", c->rank, what, waited,
                 c->timeout_s, n + passed ? who : "another rank died or hangs");
    abort_from_watchdog(c, msg, c->rank != 0 && answered && answered[0]);
}

// Answers the other ranks' requests; aborts the job when a collective has been in flight for
// longer than timeout_s, or when a stop signal comes while it waits for a rank that is gone.
static void *watchdog_thread(void *arg) {
    Comm *c = arg;
    MpiCtx *x = c->ctx;
    double stop_checked = 0;   // the collective (its start time) a stop signal was checked in
    pthread_mutex_lock(&x->mu);
    while (!x->quit) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50000000L;
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&x->cv_quit, &x->mu, &ts);
        if (x->quit) break;
        pthread_mutex_unlock(&x->mu);
        serve_requests(c);
        pthread_mutex_lock(&x->mu);
        const char *what;
        double since;
        int host;
        long bucket;
        if (x->quit || !in_flight(x, &what, &since, &host, &bucket)) continue;
        const double t = now_s();
        const int timed_out = c->timeout_s > 0 && t - since > c->timeout_s;
        const int stop = !timed_out && c->stop_flag && *c->stop_flag && t - since > 0.1 && since != stop_checked;
        if ((!timed_out && !stop) || x->noticed) continue;   // noticed: the reporting rank takes the job down
        if (stop) stop_checked = since;
        pthread_mutex_unlock(&x->mu);
        check_collective(c, what, since, host, bucket, stop);   // returns only after a stop with every rank there
        pthread_mutex_lock(&x->mu);
    }
    pthread_mutex_unlock(&x->mu);
    return NULL;
}

// ============================================================================
// The Comm functions
// ============================================================================
static void host_begin(MpiCtx *x, const char *what) {
    pthread_mutex_lock(&x->mu);
    x->host_since = now_s();
    x->host_what = what;
    x->n_host++;
    pthread_mutex_unlock(&x->mu);
}
static void host_end(MpiCtx *x) {
    pthread_mutex_lock(&x->mu);
    x->host_since = 0;
    pthread_mutex_unlock(&x->mu);
}

static int mpi_allreduce_host(Comm *c, double *v, int n, CommOp op) {
    MpiCtx *x = c->ctx;
    MPI_Op mop = op == COMM_MAX ? MPI_MAX : op == COMM_MIN ? MPI_MIN : MPI_SUM;
    host_begin(x, "MPI_Allreduce (host values)");
    int rc = MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, mop, x->world);
    host_end(x);
    if (rc != MPI_SUCCESS) {
        char s[MPI_MAX_ERROR_STRING];
        set_err(c, "MPI_Allreduce of %d host values failed: %s", n, mpi_errstr(rc, s));
        return 1;
    }
    return 0;
}

static int mpi_bcast_host(Comm *c, void *buf, size_t bytes, int root) {
    MpiCtx *x = c->ctx;
    host_begin(x, "MPI_Bcast");
    int rc = MPI_SUCCESS;
    for (size_t off = 0; off < bytes && rc == MPI_SUCCESS; off += (size_t)1 << 30) {
        size_t k = bytes - off < ((size_t)1 << 30) ? bytes - off : ((size_t)1 << 30);
        rc = MPI_Bcast((char *)buf + off, (int)k, MPI_BYTE, root, x->world);
    }
    host_end(x);
    if (rc != MPI_SUCCESS) {
        char s[MPI_MAX_ERROR_STRING];
        set_err(c, "MPI_Bcast of %zu bytes from rank %d failed: %s", bytes, root, mpi_errstr(rc, s));
        return 1;
    }
    return 0;
}

// ---- MODE_TEST: non-blocking collectives driven from the main thread
static void test_completed(Comm *c, MpiCtx *x, double t) {
    const long i = x->n_req_done % QCAP;
    if (x->req_kind[i] == K_REDUCE_SCATTER) place_part(c, x->req_buf[i], x->layout + i * 2 * c->world_size);
    pthread_mutex_lock(&x->mu);
    if (x->req_kind[i] == K_ALLGATHER) {
        x->ag_busy += t - x->req_t0[i];
        x->ag_finished++;
    } else {
        c->stats.t_busy += t - x->req_t0[i];
    }
    x->n_req_done++;
    x->bucket_since = x->n_req_done < x->n_req ? x->req_t0[x->n_req_done % QCAP] : 0;
    pthread_mutex_unlock(&x->mu);
}

// MODE_TEST: waits for the oldest request and completes it. Non-zero on an error (in c->err).
static int test_finish_oldest(Comm *c, MpiCtx *x) {
    const long i = x->n_req_done % QCAP;
    const int rc = MPI_Wait(&x->req[i], MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
        char s[MPI_MAX_ERROR_STRING];
        set_err(c, "%s (request %ld) failed: %s", kind_name(x->req_kind[i]), x->n_req_done, mpi_errstr(rc, s));
        return 1;
    }
    test_completed(c, x, now_s());
    return 0;
}

// counts (and displs, when not NULL) as MPI's ints in lay (counts, then displacements).
static void fill_layout(int *lay, int W, const size_t *counts, const size_t *displs) {
    for (int q = 0; q < W; q++) {
        lay[q] = (int)counts[q];
        lay[W + q] = displs ? (int)displs[q] : 0;
    }
}

// Queues one collective of `kind` on the n floats at buf (counts and displs: its layout, copied
// into its slot; NULL for an all-reduce; each below 2^31, n too in MODE_TEST), in order after
// every one queued before: for the communication thread (MODE_THREAD), or started at once with
// MPI_I* (MODE_TEST; when QCAP are in flight, the oldest is finished first). Non-zero on an
// error (message in c->err).
static int queue_request(Comm *c, int kind, float *buf, size_t n, const size_t *counts, const size_t *displs) {
    MpiCtx *x = c->ctx;
    const int W = c->world_size;
    if (counts && !x->layout && !(x->layout = calloc((size_t)QCAP * 2 * (size_t)W, sizeof(int)))) {
        set_err(c, "out of memory for the collectives' counts");
        return 1;
    }
    if (x->mode == MODE_THREAD) {
        pthread_mutex_lock(&x->mu);
        while (x->started - x->finished >= QCAP) pthread_cond_wait(&x->cv_done, &x->mu);
        const long i = x->started % QCAP;
        if (counts) fill_layout(x->layout + i * 2 * W, W, counts, displs);
        x->q[i] = (Bucket){ buf, n, kind };
        x->started++;
        x->ag_started += kind == K_ALLGATHER;
        pthread_cond_signal(&x->cv_work);
        pthread_mutex_unlock(&x->mu);
        return 0;
    }
    if (x->n_req - x->n_req_done >= QCAP && test_finish_oldest(c, x)) return 1;   // full: finish the oldest
    const long i = x->n_req % QCAP;
    int *lay = counts ? x->layout + i * 2 * W : NULL;
    if (lay) fill_layout(lay, W, counts, displs);
    x->req_t0[i] = now_s();
    x->req_buf[i] = buf;
    x->req_kind[i] = kind;
    const int rc = kind == K_REDUCE_SCATTER ? MPI_Ireduce_scatter(MPI_IN_PLACE, buf, lay, MPI_FLOAT, MPI_SUM, x->grad, &x->req[i])
                 : kind == K_ALLGATHER ? MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, lay, lay + W, MPI_FLOAT,
                                                         x->grad, &x->req[i])
                 : MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, x->grad, &x->req[i]);
    if (rc != MPI_SUCCESS) {
        char s[MPI_MAX_ERROR_STRING];
        set_err(c, "%s of %s %ld (%zu floats) failed: %s",
                kind == K_REDUCE_SCATTER ? "MPI_Ireduce_scatter" : kind == K_ALLGATHER ? "MPI_Iallgatherv" : "MPI_Iallreduce",
                kind == K_ALLGATHER ? "parameter bucket" : "gradient bucket", x->n_req, n, mpi_errstr(rc, s));
        return 1;
    }
    pthread_mutex_lock(&x->mu);
    if (x->n_req == x->n_req_done) x->bucket_since = x->req_t0[i];
    x->n_req++;
    x->ag_started += kind == K_ALLGATHER;
    pthread_mutex_unlock(&x->mu);
    return 0;
}

static void mpi_progress(Comm *c) {
    MpiCtx *x = c->ctx;
    while (x->n_req_done < x->n_req) {
        int done = 0;
        MPI_Test(&x->req[x->n_req_done % QCAP], &done, MPI_STATUS_IGNORE);
        if (!done) break;
        test_completed(c, x, now_s());
    }
}

static int test_wait(Comm *c) {
    MpiCtx *x = c->ctx;
    const double t0 = now_s();
    while (x->n_req_done < x->n_req)
        if (test_finish_oldest(c, x)) return 1;
    c->stats.t_exposed += now_s() - t0;
    x->backward_done = false;
    return 0;
}

// The statistics of a gradient bucket being started.
static void count_bucket(Comm *c, MpiCtx *x, size_t n) {
    pthread_mutex_lock(&x->mu);
    c->stats.n_buckets++;
    c->stats.n_started_early += !x->backward_done;
    c->stats.bytes += (double)n * sizeof(float);
    pthread_mutex_unlock(&x->mu);
}

static int mpi_allreduce_start(Comm *c, float *buf, size_t n) {
    MpiCtx *x = c->ctx;
    count_bucket(c, x, n);
    if (x->mode == MODE_THREAD) return queue_request(c, K_ALLREDUCE, buf, n, NULL, NULL);   // chunked by the thread
    for (size_t off = 0; off < n; off += (size_t)1 << 30) {   // MPI counts are int
        const size_t k = n - off < ((size_t)1 << 30) ? n - off : ((size_t)1 << 30);
        if (queue_request(c, K_ALLREDUCE, buf + off, k, NULL, NULL)) return 1;
    }
    return 0;
}

static int mpi_reduce_scatter_start(Comm *c, float *buf, const size_t *counts) {
    MpiCtx *x = c->ctx;
    size_t n = 0;
    for (int q = 0; q < c->world_size; q++) {
        if (counts[q] > INT_MAX) {
            set_err(c, "a reduce-scatter of %zu floats to rank %d is larger than MPI's int counts", counts[q], q);
            return 1;
        }
        n += counts[q];
    }
    count_bucket(c, x, n);
    return queue_request(c, K_REDUCE_SCATTER, buf, n, counts, NULL);
}

static int mpi_allgather_start(Comm *c, float *buf, const size_t *counts, const size_t *displs) {
    size_t n = 0;
    for (int q = 0; q < c->world_size; q++) {
        if (counts[q] > INT_MAX || displs[q] > INT_MAX) {
            set_err(c, "MPI_Allgatherv: %zu floats at offset %zu for rank %d exceed MPI's int counts", counts[q],
                    displs[q], q);
            return 1;
        }
        n += counts[q];
    }
    c->stats.n_gathers++;
    return queue_request(c, K_ALLGATHER, buf, n, counts, displs);
}

static int mpi_allgather_wait(Comm *c, long k) {
    MpiCtx *x = c->ctx;
    const double t0 = now_s();
    int failed = 0;
    if (k > x->ag_started) {
        set_err(c, "internal error: waiting for all-gather %ld of %ld started", k, x->ag_started);
        return 1;
    }
    if (x->mode == MODE_TEST) {
        while (x->ag_finished < k && !failed) failed = test_finish_oldest(c, x);
        pthread_mutex_lock(&x->mu);
    } else {
        pthread_mutex_lock(&x->mu);
        while (x->ag_finished < k) pthread_cond_wait(&x->cv_done, &x->mu);
        failed = x->failed;
    }
    const double busy = x->ag_busy;
    x->ag_busy = 0;
    pthread_mutex_unlock(&x->mu);
    c->stats.t_gather += busy;
    c->stats.t_gather_exposed += now_s() - t0;
    return failed;
}

// counts and displacements as MPI's ints, or non-zero after naming what does not fit.
static int int_layout(Comm *c, const char *what, const size_t *counts, const size_t *displs, int **ic, int **id) {
    const int W = c->world_size;
    *ic = malloc(sizeof(int) * (size_t)W);
    *id = malloc(sizeof(int) * (size_t)W);
    if (!*ic || !*id) { set_err(c, "out of memory for the %s counts", what); return 1; }
    for (int q = 0; q < W; q++) {
        if (counts[q] > INT_MAX || displs[q] > INT_MAX) {
            set_err(c, "%s: %zu floats at offset %zu for rank %d exceed MPI's int counts", what, counts[q], displs[q], q);
            return 1;
        }
        (*ic)[q] = (int)counts[q];
        (*id)[q] = (int)displs[q];
    }
    return 0;
}

static int mpi_allgather(Comm *c, float *buf, const size_t *counts, const size_t *displs) {
    MpiCtx *x = c->ctx;
    int *ic = NULL, *id = NULL, rc = 1;
    if (!int_layout(c, "MPI_Allgatherv", counts, displs, &ic, &id)) {
        host_begin(x, "MPI_Allgatherv (the updated parameter shards)");
        const double t0 = now_s();
        rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, ic, id, MPI_FLOAT, x->world);
        c->stats.t_gather += now_s() - t0;
        host_end(x);
        if (rc != MPI_SUCCESS) {
            char s[MPI_MAX_ERROR_STRING];
            set_err(c, "MPI_Allgatherv of the parameter shards failed: %s", mpi_errstr(rc, s));
            rc = 1;
        }
    }
    free(ic);
    free(id);
    return rc;
}

static int mpi_gather(Comm *c, const float *send, float *recv, const size_t *counts, const size_t *displs, int root) {
    MpiCtx *x = c->ctx;
    int *ic = NULL, *id = NULL, rc = 1;
    if (!int_layout(c, "MPI_Gatherv", counts, displs, &ic, &id)) {
        host_begin(x, "MPI_Gatherv (optimizer state shards)");
        rc = MPI_Gatherv(send, ic[c->rank], MPI_FLOAT, recv, ic, id, MPI_FLOAT, root, x->world);
        host_end(x);
        if (rc != MPI_SUCCESS) {
            char s[MPI_MAX_ERROR_STRING];
            set_err(c, "MPI_Gatherv of %zu floats to rank %d failed: %s", counts[c->rank], root, mpi_errstr(rc, s));
            rc = 1;
        }
    }
    free(ic);
    free(id);
    return rc;
}

static void mpi_backward_done(Comm *c) {
    MpiCtx *x = c->ctx;
    pthread_mutex_lock(&x->mu);
    x->backward_done = true;
    pthread_mutex_unlock(&x->mu);
}

static int mpi_allreduce_wait(Comm *c) {
    MpiCtx *x = c->ctx;
    if (x->mode == MODE_TEST) return test_wait(c);
    const double t0 = now_s();
    pthread_mutex_lock(&x->mu);
    while (x->finished < x->started) pthread_cond_wait(&x->cv_done, &x->mu);
    x->backward_done = false;   // the next bucket belongs to the next backward pass
    int failed = x->failed;
    pthread_mutex_unlock(&x->mu);
    c->stats.t_exposed += now_s() - t0;
    return failed;
}

static int mpi_allreduce_wait_some(Comm *c, size_t left) {
    MpiCtx *x = c->ctx;
    const double t0 = now_s();
    int failed = 0;
    if (x->mode == MODE_TEST) {
        while (!failed && x->n_req - x->n_req_done > (long)left) failed = test_finish_oldest(c, x);
    } else {
        pthread_mutex_lock(&x->mu);
        while (x->started - x->finished > (long)left) pthread_cond_wait(&x->cv_done, &x->mu);
        failed = x->failed;
        pthread_mutex_unlock(&x->mu);
    }
    c->stats.t_exposed += now_s() - t0;
    return failed;
}

static void mpi_abort(Comm *c, int code, const char *msg) {
    if (msg && strncmp(msg, "[rank", 5) == 0) fprintf(stderr, "%s\n", msg);
    else if (msg) fprintf(stderr, "[rank %d] %s\n", c->rank, msg);
    fflush(stdout);
    fflush(stderr);
    comm_notify_abort(c, code);
    MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);   // not reached
}

static void mpi_destroy(Comm *c) {
    MpiCtx *x = c->ctx;
    pthread_mutex_lock(&x->mu);
    x->quit = true;
    pthread_cond_broadcast(&x->cv_work);
    pthread_cond_broadcast(&x->cv_quit);
    pthread_mutex_unlock(&x->mu);
    pthread_join(x->thread, NULL);
    pthread_join(x->watchdog, NULL);
    if (x->req_in_req != MPI_REQUEST_NULL) {
        MPI_Cancel(&x->req_in_req);
        MPI_Wait(&x->req_in_req, MPI_STATUS_IGNORE);
    }
    for (int r = 0; r < c->world_size; r++)
        if (x->answer_req[r] != MPI_REQUEST_NULL) MPI_Request_free(&x->answer_req[r]);
    MPI_Comm_free(&x->side);
    MPI_Comm_free(&x->grad);
    MPI_Comm_free(&x->world);
    free(x->answer);
    free(x->answer_req);
    MPI_Finalize();
    free(x->layout);
    free(x);
    free(c);
}

// ============================================================================
// Creation (exported: dlsym'ed by comm_mpi_open)
// ============================================================================
static long env_long(const char *name, long dflt) {
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : dflt;
}

// For --version (comm_mpi_describe_build): the MPI library this file was compiled against,
// from mpi.h's constants (no MPI call: MPI is not initialised then).
__attribute__((visibility("default")))
void comm_mpi_version(char *buf, size_t len) {
#ifdef OMPI_MAJOR_VERSION
    snprintf(buf, len, "Open MPI %d.%d.%d, MPI %d.%d", OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION, OMPI_RELEASE_VERSION,
             MPI_VERSION, MPI_SUBVERSION);
#else
    snprintf(buf, len, "MPI %d.%d", MPI_VERSION, MPI_SUBVERSION);
#endif
}

__attribute__((visibility("default")))
Comm *comm_mpi_create(int *argc, char ***argv, char *err, size_t errlen) {
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        snprintf(err, errlen, "MPI_Init_thread failed");
        return NULL;
    }
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided < MPI_THREAD_MULTIPLE) {
        snprintf(err, errlen, "[rank %d] this MPI library does not provide MPI_THREAD_MULTIPLE (got level %d), "
                 "which the communication thread needs", rank, provided);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const long env_size = env_long("OMPI_COMM_WORLD_SIZE", size), env_rank = env_long("OMPI_COMM_WORLD_RANK", rank);
    if (env_size != size || env_rank != rank) {
        snprintf(err, errlen, "MPI says rank %d of %d but the launcher says rank %ld of %ld", rank, size, env_rank,
                 env_size);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    Comm *c = calloc(1, sizeof *c);
    MpiCtx *x = calloc(1, sizeof *x);
    if (!c || !x) { snprintf(err, errlen, "[rank %d] out of memory", rank); MPI_Abort(MPI_COMM_WORLD, 1); }
    MPI_Comm node;
    int local_rank = 0, local_size = 1;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local_rank);
    MPI_Comm_size(node, &local_size);
    MPI_Comm_free(&node);
    MPI_Comm_dup(MPI_COMM_WORLD, &x->world);
    MPI_Comm_dup(MPI_COMM_WORLD, &x->grad);
    MPI_Comm_dup(MPI_COMM_WORLD, &x->side);
    MPI_Comm_set_errhandler(x->side, MPI_ERRORS_RETURN);
    x->answer = calloc((size_t)size * NSTATE, sizeof *x->answer);
    x->answer_req = malloc((size_t)size * sizeof *x->answer_req);
    if (!x->answer || !x->answer_req) { snprintf(err, errlen, "[rank %d] out of memory", rank); MPI_Abort(MPI_COMM_WORLD, 1); }
    for (int r = 0; r < size; r++) x->answer_req[r] = MPI_REQUEST_NULL;
    post_request_receive(x);
    MPI_Comm_set_errhandler(x->world, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(x->grad, MPI_ERRORS_RETURN);
    pthread_mutex_init(&x->mu, NULL);
    pthread_cond_init(&x->cv_work, NULL);
    pthread_cond_init(&x->cv_done, NULL);
    pthread_cond_init(&x->cv_quit, NULL);
    *c = (Comm){
        .name = "mpi", .rank = rank, .world_size = size, .local_rank = local_rank, .local_size = local_size,
        .timeout_s = 300, .ctx = x,
        .allreduce_host = mpi_allreduce_host, .bcast_host = mpi_bcast_host,
        .allreduce_start = mpi_allreduce_start, .allreduce_wait = mpi_allreduce_wait,
        .allreduce_wait_some = mpi_allreduce_wait_some,
        .reduce_scatter_start = mpi_reduce_scatter_start, .allgather = mpi_allgather,
        .allgather_start = mpi_allgather_start, .allgather_wait = mpi_allgather_wait, .gather = mpi_gather,
        .backward_done = mpi_backward_done, .abort = mpi_abort, .destroy = mpi_destroy,
    };
    const char *mode = getenv("MINGPT_MPI_PROGRESS");
    if (mode && !strcmp(mode, "test")) {
        x->mode = MODE_TEST;
        c->progress = mpi_progress;
    } else if (mode && *mode && strcmp(mode, "thread")) {
        snprintf(err, errlen, "[rank %d] MINGPT_MPI_PROGRESS must be thread or test (got '%s')", rank, mode);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (pthread_create(&x->thread, NULL, comm_thread, c) || pthread_create(&x->watchdog, NULL, watchdog_thread, c)) {
        snprintf(err, errlen, "[rank %d] cannot start the communication thread", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return c;
}
