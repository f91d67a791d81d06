// dist/comm.c — the single-process communicator, launcher detection and loading the MPI one.
#include "dist/comm.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/lib_path.h"

#ifndef MINGPT_MPI_LIB
#define MINGPT_MPI_LIB NULL   // this build has no such library (the makefile passes its path)
#endif

static const LibSpec MPI_LIB = {"MINGPT_MPI_LIB", MINGPT_MPI_LIB, RTLD_NOW | RTLD_GLOBAL, "MPI support library",
                               "this mingpt was built without MPI support (build with libopenmpi-dev installed)",
                               "launched by mpirun/srun, but this mingpt was built without MPI support: install "
                               "libopenmpi-dev and rebuild"};

// ============================================================================
// One process: every collective is the identity
// ============================================================================
static int single_allreduce_host(Comm *c, double *x, int n, CommOp op) { return 0; }
static int single_bcast_host(Comm *c, void *buf, size_t bytes, int root) { return 0; }
static int single_allreduce_start(Comm *c, float *buf, size_t n) {
    c->stats.n_buckets++;
    return 0;
}
static int single_allreduce_wait(Comm *c) { return 0; }
static int single_reduce_scatter_start(Comm *c, float *buf, const size_t *counts) {
    c->stats.n_buckets++;
    return 0;
}
static int single_allgather(Comm *c, float *buf, const size_t *counts, const size_t *displs) { return 0; }
static int single_gather(Comm *c, const float *send, float *recv, const size_t *counts, const size_t *displs,
                         int root) {
    if (recv + displs[0] != send) memmove(recv + displs[0], send, counts[0] * sizeof(float));
    return 0;
}
static void single_backward_done(Comm *c) {}
static void single_abort(Comm *c, int code, const char *msg) {
    if (msg) fprintf(stderr, "%s\n", msg);
    comm_notify_abort(c, code);
    exit(code);
}
static void single_destroy(Comm *c) { free(c); }

Comm *comm_single_create(void) {
    Comm *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    *c = (Comm){
        .name = "single", .rank = 0, .world_size = 1, .local_rank = 0, .local_size = 1,
        .allreduce_host = single_allreduce_host, .bcast_host = single_bcast_host,
        .allreduce_start = single_allreduce_start, .allreduce_wait = single_allreduce_wait,
        .reduce_scatter_start = single_reduce_scatter_start, .allgather = single_allgather,
        .gather = single_gather, .backward_done = single_backward_done, .abort = single_abort, .destroy = single_destroy,
    };
    return c;
}

void comm_stats_reset(Comm *c) { memset(&c->stats, 0, sizeof c->stats); }

void comm_stats_add(CommStats *sum, const CommStats *s) {
    sum->n_buckets += s->n_buckets;
    sum->n_started_early += s->n_started_early;
    sum->t_busy += s->t_busy;
    sum->t_exposed += s->t_exposed;
    sum->bytes += s->bytes;
    sum->n_gathers += s->n_gathers;
    sum->t_gather += s->t_gather;
    sum->t_gather_exposed += s->t_gather_exposed;
}

// ============================================================================
// Launcher detection (ddp_reference.md §4.1): environment only, no MPI call
// ============================================================================
static long env_long(const char *name, long dflt) {
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : dflt;
}

int comm_launched(char *err, size_t errlen) {
    if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK")) return 1;
    // SLURM_STEP_NUM_TASKS is srun's (the job step's) task count; a batch script's own shell has
    // SLURM_NTASKS and SLURM_PROCID too, and a plain ./mingpt there is one process.
    if (env_long("SLURM_STEP_NUM_TASKS", 1) > 1 && getenv("SLURM_PROCID")) {
        snprintf(err, errlen, "started by srun as task %ld of %ld without an MPI plugin: each task would train "
                 "alone. Use `srun --mpi=pmix ./mingpt` (see README, Data-parallel training)",
                 env_long("SLURM_PROCID", 0), env_long("SLURM_STEP_NUM_TASKS", 1));
        return -1;
    }
    return 0;
}

// ============================================================================
// The MPI communicator lives in build/libmingpt_mpi.so (dist/comm_mpi.c), loaded only here,
// so that a plain ./mingpt neither links nor initialises MPI.
// ============================================================================
typedef Comm *(*MpiCreateFn)(int *, char ***, char *, size_t);

// The MPI communicator's library, opened (RTLD_GLOBAL: libmpi's own plugins, dlopen'ed by Open
// MPI, resolve against it); the path tried goes into path. NULL with the message in err.
static void *open_mpi_library(char *path, size_t pathlen, char *err, size_t errlen) {
    return lib_open(&MPI_LIB, path, pathlen, err, errlen);
}

void comm_mpi_describe_build(char *buf, size_t len) {
    lib_describe(&MPI_LIB, "MPI", "comm_mpi_version", buf, len);
}

Comm *comm_mpi_open(int *argc, char ***argv, char *err, size_t errlen) {
    char path[4600];
    void *lib = open_mpi_library(path, sizeof path, err, errlen);
    if (!lib) return NULL;
    MpiCreateFn fn = (MpiCreateFn)dlsym(lib, "comm_mpi_create");
    if (!fn) { snprintf(err, errlen, "%.600s has no comm_mpi_create", path); return NULL; }
    return fn(argc, argv, err, errlen);
}
