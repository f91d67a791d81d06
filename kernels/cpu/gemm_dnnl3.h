// kernels/cpu/gemm_dnnl3.h — oneDNN 3.x behind kernels/cpu/gemm.c (internal to kernels/cpu/): an
// optional library, loaded with dlopen only when it is there, so that mingpt builds, runs and
// tests without it. Its fp32 and bf16 matmul primitives are candidates of the calibration beside
// Debian's oneDNN 2.x (kernels/cpu/gemm_dnnl.h), which stays linked in and keeps every other use
// (dnnl_sgemm, the batched bf16 products, the bf16 probe).
//
// Both libraries export the same dnnl_* names (and C++ internals). libdnnl.so.3 is opened with
// RTLD_LOCAL | RTLD_DEEPBIND: its own references bind to its own definitions first (without
// DEEPBIND its internal calls to exported functions would resolve to the 2.x copies already in
// the global scope), and none of its names enter the global scope (so ./mingpt's calls still
// reach 2.x). Every 3.x function is called through a pointer from dlsym on that handle.
//
// Where it is looked for, first found wins:
//   * $MINGPT_DNNL3_LIB when set (a path to libdnnl.so.3; only that one: a wrong path turns it
//     off, which is how a run without it is forced);
//   * build/onednn3/lib/ next to the executable (`make onednn3` puts the PyPI wheel's library there,
//     tests/tools/onednn3.sh), or ../onednn3/lib and ../../onednn3/lib (test and benchmark
//     programs under build/), or <prefix>/lib/mingpt/onednn3/ of an installed mingpt;
//   * libdnnl.so.3 on the loader's path.
// It must be a GNU OpenMP build (the wheel's is): its threads are then mingpt's own OpenMP
// threads, omp_get_max_threads() of them at each call (primitives are kept per thread count).
#ifndef MINGPT_CPU_GEMM_DNNL3_H
#define MINGPT_CPU_GEMM_DNNL3_H

#include <stddef.h>

#include "kernels/cpu/gemm.h"

// 0 when oneDNN 3 was found and its CPU engine created (once; thread-safe); else non-zero,
// dnnl3_status() says why.
int dnnl3_init(void);

// "3.2.0 (<path>)" when loaded, else why not ("not found (looked in ...)", "no oneDNN 3 at
// MINGPT_DNNL3_LIB=<path> (no such file)", "cannot load ...: <dlerror>", "... is oneDNN 2.x").
const char *dnnl3_status(void);

// "3.2.0" (dnnl_version() of the loaded library); "" when not loaded.
const char *dnnl3_version(void);

// Its version with the git hash and the ISA it dispatches to, for the calibration cache's
// fingerprint ("3.2.0 04b180b avx512_core_bf16"); "" when not loaded.
const char *dnnl3_version_full(void);

// Row-major C (M,N) = op(A) op(B) + beta C through a oneDNN 3 matmul primitive, A and B of type
// t (fp32, or bf16 with fp32 accumulation), fp32 C; beta is a sum post-op (none when 0: C is only
// written). Primitives are created once per (type, shape, strides, beta, OpenMP threads) and
// reused. Returns 0, 1 when oneDNN 3 is not loaded, or oneDNN's status (e.g. unimplemented).
int dnnl3_matmul(GemmType t, int ta, int tb, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
                 float beta, float *C, int ldc);

#endif
