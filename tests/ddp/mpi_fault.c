// tests/ddp/mpi_fault.c — a fault injected into one rank's MPI, for the fault tests: a small
// library LD_PRELOADed under mpirun that wraps MPI_Allgatherv and MPI_Iallgatherv (ZeRO's
// parameter all-gather, dist/comm_mpi.c) and MPI_Allreduce, and on one rank
//   * STOP / KILL: raises the signal on the whole process at the start of its N-th all-gather,
//     before any data has moved: the rank is then killed or frozen inside the all-gather, while
//     the other ranks are in it or on their way;
//   * HANG: makes the main thread hang (60 s) right after its N-th MPI_Allreduce has returned
//     (the host values: the loss, the gradient norm): its part has been sent and the others go
//     on, while this rank's collective is still open and its watchdog thread runs.
//
//   MPI_FAULT=RANK:N:ACTION   e.g. "1:3:KILL", "1:3:STOP", "0:40:HANG" (OMPI_COMM_WORLD_RANK picks the rank)
//
// Every other call, on every rank, goes straight to the real function (dlsym RTLD_NEXT).
// Built by mk/dist.mk into build/tests/mpi_fault.so; used by tests/test_zero.sh and
// tests/ddp/test_ddp_faults.sh.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

// The configured action if this process is the chosen rank and `calls` (this kind's count, incremented
// here) has reached N; "" otherwise.
static const char *fault_due(long *calls, char *action, size_t len) {
    const char *spec = getenv("MPI_FAULT"), *rank = getenv("OMPI_COMM_WORLD_RANK");
    int r, n;
    char a[8] = "";
    if (!spec || !rank || sscanf(spec, "%d:%d:%7s", &r, &n, a) != 3 || atoi(rank) != r) return "";
    if (++*calls != n) return "";
    snprintf(action, len, "%s", a);
    return action;
}

// Counts this process's all-gathers; raises the configured signal at the chosen one.
static void maybe_fault(void) {
    static long calls;
    char a[8];
    const char *act = fault_due(&calls, a, sizeof a);
    if (strcmp(act, "STOP") && strcmp(act, "KILL")) return;
    fprintf(stderr, "mpi_fault: rank %s: %s at all-gather %ld\n", getenv("OMPI_COMM_WORLD_RANK"), act, calls);
    fflush(stderr);
    raise(!strcmp(act, "STOP") ? SIGSTOP : SIGKILL);
}

int MPI_Allreduce(const void *send, void *recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    static int (*real)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
    static long calls;
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "MPI_Allreduce");
    const int rc = real(send, recv, count, type, op, comm);
    if (syscall(SYS_gettid) != getpid()) return rc;   // the main thread's only (not the gradient buckets')
    char a[8];
    if (strcmp(fault_due(&calls, a, sizeof a), "HANG")) return rc;
    fprintf(stderr, "mpi_fault: rank %s: the main thread hangs after MPI_Allreduce %ld\n", getenv("OMPI_COMM_WORLD_RANK"),
            calls);
    fflush(stderr);
    for (int i = 0; i < 600; i++) nanosleep(&(struct timespec){0, 100000000L}, NULL);
    return rc;
}

int MPI_Allgatherv(const void *send, int sendcount, MPI_Datatype sendtype, void *recv, const int recvcounts[],
                   const int displs[], MPI_Datatype recvtype, MPI_Comm comm) {
    static int (*real)(const void *, int, MPI_Datatype, void *, const int[], const int[], MPI_Datatype, MPI_Comm);
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "MPI_Allgatherv");
    maybe_fault();
    return real(send, sendcount, sendtype, recv, recvcounts, displs, recvtype, comm);
}

int MPI_Iallgatherv(const void *send, int sendcount, MPI_Datatype sendtype, void *recv, const int recvcounts[],
                    const int displs[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
    static int (*real)(const void *, int, MPI_Datatype, void *, const int[], const int[], MPI_Datatype, MPI_Comm,
                       MPI_Request *);
    if (!real) *(void **)&real = dlsym(RTLD_NEXT, "MPI_Iallgatherv");
    maybe_fault();
    return real(send, sendcount, sendtype, recv, recvcounts, displs, recvtype, comm, request);
}
