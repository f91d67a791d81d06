// tests/ddp/mpi_fault.c — a fault injected into one rank's MPI, for the fault tests: a small
// library LD_PRELOADed under mpirun that wraps MPI_Allgatherv and MPI_Iallgatherv (ZeRO's
// parameter all-gather, dist/comm_mpi.c) and, on one rank, raises a signal on the whole process
// at the start of its N-th call, before any data has moved: the rank is then killed (KILL) or
// frozen (STOP) inside the all-gather, while the other ranks are in it or on their way.
//
//   MPI_FAULT=RANK:N:SIGNAL   e.g. "1:3:KILL" or "1:3:STOP" (OMPI_COMM_WORLD_RANK picks the rank)
//
// Every other call, on every rank, goes straight to the real function (dlsym RTLD_NEXT).
// Built by mk/dist.mk into build/tests/mpi_fault.so; used by tests/test_zero.sh.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Counts this process's all-gathers; raises the configured signal at the chosen one.
static void maybe_fault(void) {
    static long calls;
    const char *spec = getenv("MPI_FAULT"), *rank = getenv("OMPI_COMM_WORLD_RANK");
    int r, n;
    char sig[8] = "";
    if (!spec || !rank || sscanf(spec, "%d:%d:%7s", &r, &n, sig) != 3 || atoi(rank) != r) return;
    if (++calls != n) return;
    fprintf(stderr, "mpi_fault: rank %d: %s at all-gather %d\n", r, sig, n);
    fflush(stderr);
    raise(!strcmp(sig, "STOP") ? SIGSTOP : SIGKILL);
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
