// kernels/cpu/gemm_mkl.h — Intel oneMKL behind kernels/cpu/gemm.c (internal to kernels/cpu/):
// an optional library, loaded with dlopen only when it is there, so that mingpt builds, runs
// and tests without it. Where it is looked for, first found wins:
//   * $MINGPT_MKL_LIB when set (a path to libmkl_rt.so.*; only that one: a wrong path turns MKL
//     off, which is how a run without MKL is forced);
//   * build/mkl/lib/ next to the executable (`make deps` puts the PyPI wheel there,
//     tests/tools/mkl.sh), or ../mkl/lib and ../../mkl/lib (test and benchmark programs under
//     build/), or <prefix>/lib/mingpt/mkl/ of an installed mingpt;
//   * libmkl_rt.so.3 / libmkl_rt.so.2 on the loader's path (Debian's libmkl-rt, conda, ...).
// MKL runs on the GNU OpenMP threading layer (libgomp, the runtime mingpt itself uses: one pool of
// threads, no oversubscription) with omp_get_max_threads() threads and dynamic threading off, in
// its conditional-numerical-reproducibility mode (MKL_CBWR_AUTO), so that a product is the same
// bits on every run of a machine with the same thread count.
#ifndef MINGPT_CPU_GEMM_MKL_H
#define MINGPT_CPU_GEMM_MKL_H

#include <stddef.h>
#include <stdint.h>

// 0 when MKL was found and set up (once; thread-safe); else non-zero, mkl_status() says why.
int mkl_init(void);

// "2026.2 (<path>)" when loaded, else why not ("not found (looked in ...)", "no MKL at
// MINGPT_MKL_LIB=<path> (no such file)", "cannot load ...: <dlerror>").
const char *mkl_status(void);

// MKL's full version string (mkl_get_version_string: version and build date), for the
// calibration cache's fingerprint; "" when not loaded.
const char *mkl_version_full(void);

// "2026.2"; "" when not loaded.
const char *mkl_version_short(void);

// Row-major C (M,N) = op(A) op(B) + beta C through MKL's cblas_sgemm. Returns 0, or 1 (computing
// nothing) when MKL is not loaded.
int mkl_sgemm(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb, float beta,
              float *C, int ldc);

// 1 when the loaded MKL has cblas_gemm_bf16bf16f32; 0 otherwise.
int mkl_has_bf16(void);

// The same with bf16 A and B (cblas_gemm_bf16bf16f32), fp32 C. Returns 1 when MKL is not loaded
// or has no bf16 GEMM.
int mkl_gemm_bf16(int ta, int tb, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B, int ldb,
                  float beta, float *C, int ldc);

#endif
