// kernels/cpu/gemm.h — the one GEMM every CPU op calls (kernels/cpu/matmul.c, fused.c, the
// sampler), on whichever library is faster for the shape, as measured on this machine.
//
// Two well-kept libraries, each good where the other is not:
//   * OpenBLAS (cblas_sgemm, OpenMP build): picks its kernels by the CPU's model number, so a
//     CPU it does not know (a newer model, or one a hypervisor disguises) gets its SSE3 kernels;
//   * oneDNN (dnnl_sgemm and the matmul primitive): JIT-compiles for the ISA cpuid reports
//     (AVX2, AVX-512, AVX512-BF16, AMX), and is the only one with bf16 GEMMs.
// fp32 products are dispatched per shape class (transposes, whether C is read (beta != 0), and
// each of M, N, K rounded up to a power of two; per OpenMP thread count) to the fastest of: OpenBLAS threaded by itself,
// OpenBLAS split across our OpenMP threads (one single-threaded call per block of rows or
// columns: no per-call job allocation or hand-off spin), dnnl_sgemm, and oneDNN's fp32 matmul
// primitive. The first product of a class times every candidate on scratch operands of its shape
// (scaled down to at most 4 GFLOP, so a training step's products are timed as they are; about
// 0.2 s a class) and keeps the fastest; the table is cached
// in a file per machine (CPU model and flags, library versions), so later runs never calibrate
// again and every run on the machine makes the same choices (resume is bitwise exact).
// The real product is then computed by the chosen library alone: the calibration never touches
// the caller's memory. Each output element is computed by one thread (K is never split across
// threads by our split), so results are deterministic for a given machine and thread count.
//
// Cache: $MINGPT_CACHE_DIR, else $XDG_CACHE_HOME/mingpt, else $HOME/.cache/mingpt;
// gemm-<fingerprint>.txt, written atomically. A file that does not parse is ignored (and
// rewritten); an unwritable directory means calibrating once per process (said in the status).
// Processes sharing the file agree on every class (the ranks of a job on one machine: otherwise
// two ranks measuring a class at once could pick different libraries, and their products differ in
// the last bits): a class missing from the table is measured under an exclusive flock on
// gemm-<fingerprint>.txt.lock, after reading the file again; a process that finds it there (another
// measured it meanwhile) takes that result.
// A third library when it is there: Intel oneMKL (cblas_sgemm; kernels/cpu/gemm_mkl.h says where it
// is looked for), loaded with dlopen, a fifth candidate of every class; its version is part of the
// fingerprint; its bf16 GEMM is a second candidate of bf16 classes (timed like the fp32 ones).
// Without it nothing changes but the missing column.
// A fourth when it is there: oneDNN 3.x (its matmul primitive; kernels/cpu/gemm_dnnl3.h says where
// it is looked for and how it lives beside Debian's oneDNN 2.x), loaded with dlopen, a sixth
// candidate of every fp32 class and a further one of every bf16 class; its version is part of the
// fingerprint too. bf16 classes are measured (and cached) only where there is a second bf16 GEMM
// (MKL's or oneDNN 3's); else every bf16 product runs on oneDNN 2's matmul, untimed.
// MINGPT_GEMM=openblas|onednn|mkl|onednn3 forces one library for every fp32 class (for
// comparisons); bf16 classes then run on MKL for mkl, on oneDNN 3 for onednn3, else on oneDNN.
#ifndef MINGPT_CPU_GEMM_H
#define MINGPT_CPU_GEMM_H

#include <stddef.h>
#include <stdint.h>

typedef enum { GEMM_F32 = 0, GEMM_BF16 = 1 } GemmType;

// Row-major C (M,N) = op(A) op(B) + beta C; op transposes when ta / tb is non-zero; lda, ldb,
// ldc are the row strides of A, B and C as stored. fp32 in, fp32 out. Must not be called from
// inside an OpenMP parallel region with other threads calling it (the class table is locked,
// the libraries' threading then runs serially).
void cpu_sgemm(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B,
               int ldb, float beta, float *C, int ldc);

// The same with A and B in bf16 (kernels/cpu/bf16.h), products accumulated in fp32, C fp32:
// oneDNN's matmul primitive (AMX tiles or AVX512-BF16 where the CPU has them), or MKL's
// cblas_gemm_bf16bf16f32 or oneDNN 3's matmul where present and measured faster for the shape
// class (bf16 classes are calibrated and cached as the fp32 ones, only when MKL or oneDNN 3 is
// there; inside a parallel region: oneDNN). Only
// valid when cpu_gemm_bf16_fast() (else the process stops with a message through kernels/fatal.h).
void cpu_gemm_bf16(int ta, int tb, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B,
                   int ldb, float beta, float *C, int ldc);

// batch bf16 products at once (oneDNN's batched matmul): product i reads A + i*sa, B + i*sb and
// writes C + i*sc (strides in elements). Only valid when cpu_gemm_bf16_fast().
void cpu_gemm_bf16_batched(int batch, int ta, int tb, int M, int N, int K, const uint16_t *A, int lda, long sa,
                           const uint16_t *B, int ldb, long sb, float beta, float *C, int ldc, long sc);

// cpu_sgemm or cpu_gemm_bf16 by type; A and B point to fp32 or bf16 elements accordingly.
void cpu_gemm(GemmType t, int ta, int tb, int M, int N, int K, const void *A, int lda, const void *B,
              int ldb, float beta, float *C, int ldc);

// 1 when bf16 GEMMs run on bf16 hardware (AVX512-BF16 or AMX) through oneDNN, so a bf16 product
// is faster than an fp32 one; 0 when the CPU lacks it (bf16 would then be emulated).
int cpu_gemm_bf16_fast(void);

// One line for the start-up header and --version, e.g.
// "OpenBLAS 0.3.21 (SkylakeX kernels: AVX-512) + oneDNN 2.6.3 (avx512_core_amx), per shape class".
void cpu_gemm_describe(char *buf, size_t len);

// Notes worth a log line (an OpenBLAS core weaker than the CPU, a cache that could not be read or
// written, MINGPT_GEMM); "" when none. Stable until the next GEMM call.
const char *cpu_gemm_notes(void);

// The classes calibrated or loaded so far, for summaries and the benchmark.
enum { GEMM_OPENBLAS, GEMM_OPENBLAS_SPLIT, GEMM_ONEDNN_SGEMM, GEMM_ONEDNN_MATMUL, GEMM_MKL, GEMM_ONEDNN3, GEMM_N_IMPL };
typedef struct {
    int bf16;                                      // 1: a class of bf16 products (cpu_gemm_bf16)
    int ta, tb, beta0;                             // the class: transposes, beta == 0 (C only written),
    int m_log2, n_log2, k_log2, threads;           // ceil(log2) of M, N, K, OpenMP threads
    int m, n, k;                                   // the shape it was timed at
    int impl;                                      // GEMM_* chosen
    double gflops[GEMM_N_IMPL];                    // measured; 0 = not a candidate here
} GemmClass;
const char *cpu_gemm_impl_name(int impl);         // "openblas", "openblas-split", "onednn-sgemm", "onednn-matmul",
                                                  // "mkl", "onednn3"
int cpu_gemm_classes(GemmClass *out, int max);    // returns the count (fills at most max)
const char *cpu_gemm_cache_path(void);            // "" when there is no cache file
// cpu_sgemm on one given implementation (GEMM_*), bypassing the dispatch: for tests and the
// benchmark. Returns non-zero (computing nothing) when that implementation is unavailable here.
int cpu_sgemm_with(int impl, int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B,
                   int ldb, float beta, float *C, int ldc);
// The same for a bf16 product (as cpu_gemm_bf16) on GEMM_ONEDNN_MATMUL, GEMM_MKL (MKL's
// cblas_gemm_bf16bf16f32) or GEMM_ONEDNN3. Returns non-zero, computing nothing, where that one has
// no bf16 GEMM here (oneDNN's needs cpu_gemm_bf16_fast(); MKL's needs MKL; oneDNN 3's needs
// oneDNN 3, and non-zero too when it refuses the product).
int cpu_gemm_bf16_with(int impl, int ta, int tb, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B,
                       int ldb, float beta, float *C, int ldc);

// Where MKL was found ("2026.2 (<path>)") or why it is not used (kernels/cpu/gemm_mkl.h).
const char *cpu_gemm_mkl_status(void);

// Where oneDNN 3 was found ("3.2.0 (<path>)") or why it is not used (kernels/cpu/gemm_dnnl3.h).
const char *cpu_gemm_dnnl3_status(void);

// The version oneDNN 2.x (the linked one, e.g. "2.6.3") and oneDNN 3 ("3.2.0"; "" when not loaded)
// each report through their own dnnl_version(): for the test that the two live apart in one process.
void cpu_gemm_dnnl_versions(char *v2, char *v3, size_t len);

// How many shape classes this process has calibrated (0 when every one came from the cache).
int cpu_gemm_calibrations(void);

// Wall time (seconds) spent in the products of cpu_sgemm, cpu_gemm_bf16 and cpu_gemm_bf16_batched
// called outside OpenMP parallel regions (every product of a training step; calibration excluded),
// and their FLOPs (2 M N K each), since the process started. For the benchmark: the step's GEMM
// time apart from everything else, so its MFU can be read against the libraries' own speed.
void cpu_gemm_totals(double *seconds, double *flop);

// The cache file's parser, the one reader of that file (exposed for tests and the fuzzer):
// buf holds len bytes (not NUL-terminated) written for `fingerprint` (cpu_gemm_fingerprint()).
// Returns the classes stored into out (at most max), or -1 with *why naming the first bad line:
// any malformed line, unknown implementation, out-of-range value, NUL byte or a line over
// 1023 bytes makes the whole file count as absent.
int cpu_gemm_cache_parse(const char *buf, size_t len, const char *fingerprint, GemmClass *out, int max, char *why,
                         size_t whylen);
const char *cpu_gemm_fingerprint(void);

#endif
