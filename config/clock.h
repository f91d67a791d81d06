// config/clock.h — monotonic time (CLOCK_MONOTONIC: never steps back with the wall clock), the
// one definition for every room that times something or keeps a deadline: the MPI and NCCL
// communicators' watchdogs and all-reduce timings (dist/comm_mpi.c, kernels/cuda/comm_nccl.cu),
// the GEMM calibration and op counters (kernels/cpu/gemm.c), the benchmarks (bench/).
//
// Why config/: it is the lowest floor (docs/architecture.md), the one room every user of a clock
// may include, dist/ on floor 1 among them. It is not configuration; like config/lib_path.h it is
// a leaf utility that needs nothing but libc. Why a header of static inline functions: the
// MPI communicator is a shared library of its own (build/libmingpt_mpi.so) and the CUDA files
// are C++ in a shared library of their own, neither linked with libmingpt.a, so a function
// defined once in a .c file would need a copy in each; an inline definition is compiled into
// each user and links nowhere.
#ifndef MINGPT_CLOCK_H
#define MINGPT_CLOCK_H

#include <stdint.h>
#include <time.h>

// Nanoseconds since an arbitrary fixed point (integer: exact differences, atomic counters).
static inline uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

// Seconds since the same point.
static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
