// dist/comm.h — the communicator: what data-parallel training needs from MPI or NCCL.
//
// One small interface, three implementations:
//   "single"  one process, no launcher: every collective is the identity (dist/comm.c)
//   "mpi"     the host communicator of `mpirun`/`srun` ranks (dist/comm_mpi.c, built into
//             build/libmingpt_mpi.so and dlopen'ed only when a launcher is detected, so a plain
//             ./mingpt never loads or initialises MPI)
//   "nccl"    the CUDA backend's gradient communicator (kernels/cuda/comm_nccl.cu), created from
//             the host one by Backend.grad_comm_create; its host collectives go to the host one.
//
// Rules (as MPI's): every rank calls the same collectives in the same order with the same
// counts. Gradient all-reduces are asynchronous: allreduce_start enqueues an in-place SUM of one
// contiguous bucket and returns at once; allreduce_wait returns when every started bucket is
// reduced. Host collectives (allreduce_host, bcast_host, barrier) block, and must not be called
// while buckets are in flight. Errors: the functions return non-zero and leave a message naming
// the rank and the collective in c->err; the caller then calls c->abort, which takes the whole
// job down (MPI_Abort after ncclCommAbort), never a bare exit() that would leave peers waiting.
#ifndef MINGPT_COMM_H
#define MINGPT_COMM_H

#include <signal.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { COMM_SUM = 0, COMM_MAX = 1, COMM_MIN = 2 } CommOp;

// Per-step instrumentation of the gradient all-reduces (seconds, CLOCK_MONOTONIC).
typedef struct {
    int n_buckets;            // buckets started since comm_stats_reset
    int n_started_early;      // of those, started before the backward pass finished
    double t_busy;            // time some bucket was being reduced
    double t_exposed;         // time allreduce_wait blocked (the part not hidden by the backward)
    double bytes;             // bytes all-reduced (or reduce-scattered)
    // ZeRO's parameter all-gathers. Blocking (Comm.allgather): it adds its time to t_gather (the
    // trainer counts it in n_gathers and t_gather_exposed too: nothing hides it). Started (Comm.allgather_start, one per bucket): n_gathers counts them,
    // t_gather is the time some all-gather was moving data, t_gather_exposed the time
    // allgather_wait blocked (the part the next forward did not hide). A started all-gather's
    // times land in the stats of the allgather_wait that finds it complete. "nccl": GPU times
    // from CUDA events (t_gather: each gather's on the comm stream; t_gather_exposed: how long
    // the compute stream stood at allgather_wait's waits, not the host, which does not block),
    // read once complete, at the latest by the next allreduce_wait.
    int n_gathers;            // all-gathers started (or blocking ones done) since comm_stats_reset
    double t_gather;          // time in the parameter all-gathers (busy)
    double t_gather_exposed;  // time the caller blocked on them
} CommStats;

typedef struct Comm Comm;
struct Comm {
    const char *name;         // "single", "mpi", "nccl"
    int rank, world_size;     // global rank r in [0, W)
    int local_rank, local_size;   // rank among the processes on this machine
    double timeout_s;         // collective_timeout_s: a collective in flight longer aborts the job (0: never)
    CommStats stats;
    char err[512];            // the last error, naming the rank and the collective
    void *ctx;
    // Published by the trainer (comm_publish_iter): the iteration this rank is working on, which
    // a collective timeout reports for the ranks that did not arrive (0: not training).
    long iter;
    // Optional (NULL: none): called on this rank with the exit code just before the job is taken
    // down (abort, or the "mpi" communicator's watchdog), from whichever thread does it; the run's
    // owner records the failure there (rank 0 writes summary.json). The "mpi" watchdog also calls
    // it on rank 0 when another rank reports a timeout. At most once per process.
    void (*on_abort)(void *ctx, int code);
    void *on_abort_ctx;
    // Optional (NULL: none): the trainer's stop-signal flag (SIGINT/SIGTERM received). The "mpi"
    // watchdog reads it: a stop signal while this rank waits in a collective for a rank that does
    // not answer (killed: mpirun then sends SIGTERM to the others) aborts at once with exit 1,
    // through on_abort, before mpirun's SIGKILL.
    const volatile sig_atomic_t *stop_flag;
    int abort_notified;       // comm_notify_abort has run

    // In place over n doubles of host memory, blocking.
    int (*allreduce_host)(Comm *c, double *x, int n, CommOp op);
    // bytes of host memory from root to every rank, blocking.
    int (*bcast_host)(Comm *c, void *buf, size_t bytes, int root);
    // Starts the in-place SUM of n fp32 at buf (backend memory of the comm's backend: host
    // memory for "mpi", device memory for "nccl"). Buckets complete in the order started.
    int (*allreduce_start)(Comm *c, float *buf, size_t n);
    // Waits for every started all-reduce (on "nccl": orders the compute stream after them).
    int (*allreduce_wait)(Comm *c);
    // Optional (NULL: use allreduce_wait): waits until at most `left` of the started buckets
    // (reduce-scatters: one each) are still in flight, the oldest finishing first; the backward
    // may still be running (ZeRO stage 2 frees the ring space of the oldest buckets so). Started
    // all-gathers count as in flight too (none are during a backward: the forward waited for
    // them all). "nccl": the compute stream waits for the oldest buckets (the host does not
    // block; the backend's later work, the harvest, is ordered after them).
    int (*allreduce_wait_some)(Comm *c, size_t left);
    // Sharded data parallelism (ZeRO, trainer_config.zero_stage; dist/shard.h cuts the buffer).
    // NULL on "single" (one rank has nothing to shard over).
    // Starts the in-place SUM over ranks of the sum(counts) fp32 at buf (the same range of the
    // flat gradient buffer on every rank, backend memory), scattered in rank order: when it is
    // done, rank q's buf + (counts[0] + ... + counts[q-1]) holds the sums of its counts[q]
    // floats there, and the rest of buf is undefined (MPI_Reduce_scatter with MPI_IN_PLACE,
    // the part moved to its place). Queued with the all-reduces (same order, same thread),
    // finished by allreduce_wait. counts has world_size entries, each below 2^31; it is copied.
    int (*reduce_scatter_start)(Comm *c, float *buf, const size_t *counts);
    // Blocking, in place (MPI_Allgatherv): rank q's counts[q] floats at buf + displs[q] reach every
    // rank. Not while buckets are in flight.
    int (*allgather)(Comm *c, float *buf, const size_t *counts, const size_t *displs);
    // Optional (NULL: none, use allgather): the all-gather above, started and
    // not waited for: queued after everything started before it (all-reduces, reduce-scatters,
    // all-gathers: one queue, one order on every rank) and done in the order started (on the
    // "mpi" communicator's communication thread with MPI_Allgatherv in place, or with
    // MPI_Iallgatherv under MINGPT_MPI_PROGRESS=test; "nccl": on its comm stream). buf must not be read or written until it is
    // waited for; counts and displs are copied. Returns non-zero on an error (message in c->err).
    // Host collectives and allreduce_start / reduce_scatter_start may be called while all-gathers
    // are in flight; allreduce_wait waits for them too.
    int (*allgather_start)(Comm *c, float *buf, const size_t *counts, const size_t *displs);
    // With allgather_start: waits until the first k all-gathers started on c (counted from 1 since
    // its creation) are complete, k at most the number started; returns at once when they are.
    // "nccl": does not block the host; orders the compute stream's later work after them.
    // Adds the time it blocked to stats.t_gather_exposed and the busy time of the all-gathers
    // completed since the last call to stats.t_gather. Non-zero on an error (message in c->err).
    int (*allgather_wait)(Comm *c, long k);
    // Blocking (MPI_Gatherv): rank q's counts[q] floats at send land at root's recv + displs[q]
    // (recv is used at root only). Not while buckets are in flight.
    int (*gather)(Comm *c, const float *send, float *recv, const size_t *counts, const size_t *displs, int root);
    // Marks the end of the backward pass (for CommStats.n_started_early).
    void (*backward_done)(Comm *c);
    // Optional (NULL: nothing to do): lets started all-reduces advance; called between the
    // backward's ops by trainer/buckets.c (MPI's non-blocking mode, MINGPT_MPI_PROGRESS=test).
    void (*progress)(Comm *c);
    // Prints msg (when not NULL) prefixed "[rank r] " (unless it already starts with "[rank"),
    // then takes every rank down with code.
    void (*abort)(Comm *c, int code, const char *msg);   // never returns
    // Finishes cleanly (MPI_Finalize on the host communicator); frees c.
    void (*destroy)(Comm *c);
};

// The single-process communicator (rank 0 of 1): collectives are the identity.
Comm *comm_single_create(void);

// Detects a launcher from the environment without touching MPI (OMPI_COMM_WORLD_SIZE from
// mpirun, PMIX_RANK from srun --mpi=pmix or mpirun, PMI_RANK from MPICH-style launchers).
// Returns 1 when launched as a rank of a job, 0 for a plain process; -1 with a message
// when srun started several tasks (SLURM_STEP_NUM_TASKS > 1) without an MPI plugin (each
// would train alone).
int comm_launched(char *err, size_t errlen);

// The host communicator of a launched job: loads build/libmingpt_mpi.so next to the
// executable, initialises MPI with MPI_THREAD_MULTIPLE (the communication thread, and the
// emulated NCCL's stream threads, call MPI while the main thread may too, each on its own
// duplicate of MPI_COMM_WORLD), checks rank and size against the launcher's variables.
// NULL with a message when MPI cannot be loaded or initialised.
Comm *comm_mpi_open(int *argc, char ***argv, char *err, size_t errlen);

// For --version: "MPI: Open MPI 4.1.4, MPI 3.1 (<library>)\n", the MPI the communicator's
// library was compiled with (its comm_mpi_version; loading it starts nothing, MPI_Init is not
// called), or "MPI: not built\n" / "MPI: library not found: <path>\n".
void comm_mpi_describe_build(char *buf, size_t len);

// Sets c->iter (atomically: the watchdog thread reads it). Inline: build/libmingpt_mpi.so
// cannot call into the executable.
static inline void comm_publish_iter(Comm *c, long iter) { __atomic_store_n(&c->iter, iter, __ATOMIC_RELAXED); }

// Calls c->on_abort(c->on_abort_ctx, code) the first time it is called for c (the watchdog and
// the main thread may both get there); later calls do nothing.
static inline void comm_notify_abort(Comm *c, int code) {
    if (__atomic_exchange_n(&c->abort_notified, 1, __ATOMIC_ACQ_REL)) return;
    if (c->on_abort) c->on_abort(c->on_abort_ctx, code);
}

void comm_stats_reset(Comm *c);
// Adds every count and time of s to sum (statistics over several steps).
void comm_stats_add(CommStats *sum, const CommStats *s);

#ifdef __cplusplus
}
#endif

#endif
