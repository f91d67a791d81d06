// process/signal_thread.h — the asynchronous signals the trainer serves (SIGINT, SIGTERM,
// SIGUSR1) run their handlers on one idle thread of their own, never on a computing thread.
//
// Why: a handler runs on the stack of the thread the signal lands on, and the kernel writes
// its frame just below that thread's stack pointer. oneDNN's JIT GEMM kernels (up to oneDNN
// 3.11; Debian 12 ships 2.6) point the stack pointer into a heap workspace while they run, so a
// signal landing there corrupts the heap (oneDNN issue #4845; tests/test_snapshot_files.sh sends
// a burst of SIGUSR1 during oneDNN GEMMs). Blocking the three signals in every computing thread
// and leaving them unblocked in one thread that only waits makes the kernel deliver them there.
#pragma once

// Blocks SIGINT, SIGTERM and SIGUSR1 in the calling thread (threads it starts afterwards
// inherit the mask: OpenMP's workers, MPI's and CUDA's threads) and starts the thread that
// receives them. Call it first in main, before any other thread exists; later calls (the
// trainer makes one) only block the signals in the calling thread. Handlers and dispositions
// are set with signal()/sigaction() as usual: the default action of a signal received by the
// waiting thread still ends the process. When the thread cannot be started the signals stay
// unblocked (the previous behaviour) and a warning goes to stderr.
void signal_thread_start(void);
