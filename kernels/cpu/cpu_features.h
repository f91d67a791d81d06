// kernels/cpu/cpu_features.h — what this CPU can do (cpuid + the OS's XSAVE state), and what
// OpenBLAS made of it.
//
// OpenBLAS picks its kernels from the CPU's model number (DYNAMIC_ARCH), not from its feature
// flags: a CPU newer than the OpenBLAS build (or a hypervisor that hides the model) gets an old
// core such as Prescott (SSE3), 4-5x slower than the AVX-512 kernels the CPU could run. This
// file names both sides so that the start-up header can say so, and so that kernels/cpu/gemm.c
// knows which oneDNN paths (AVX512-BF16, AMX) are real.
#ifndef MINGPT_CPU_FEATURES_H
#define MINGPT_CPU_FEATURES_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    bool avx2, fma;          // Haswell-class
    bool avx512;             // AVX-512 F + BW + VL + DQ, with the OS saving ZMM state
    bool avx512_bf16;        // VCVTNE2PS2BF16 / VDPBF16PS
    bool amx_bf16;           // AMX tiles with bf16 (TMUL); OS support for tile state in XCR0
    bool avx512_fp16;
    char brand[64];          // cpuid's brand string, trimmed ("" when absent)
} CpuFeatures;

// Detected once (thread-safe), then cached. Never NULL.
const CpuFeatures *cpu_features(void);

// The best SIMD level the CPU offers, as a short name: "avx512_amx", "avx512_bf16", "avx512",
// "avx2", "sse".
const char *cpu_isa_name(const CpuFeatures *f);

// One line such as "AVX2 FMA AVX-512 AVX512-BF16 AMX-BF16 AVX512-FP16" (what is present).
void cpu_features_describe(const CpuFeatures *f, char *buf, size_t len);

// OpenBLAS's chosen kernel set (openblas_get_corename(), e.g. "SkylakeX", "Haswell", "Prescott")
// and the SIMD level those kernels use, in cpu_isa_name's terms (AMX and BF16 never: OpenBLAS
// 0.3.21's sgemm does not use them). Unknown names count as "sse".
const char *openblas_core(void);
const char *openblas_core_isa(const char *core);

// 1 when OpenBLAS's kernels use less SIMD than the CPU offers (e.g. Prescott on an AVX-512 CPU),
// comparing vector width only (AVX-512 > AVX2 > SSE).
int openblas_core_is_weaker(const CpuFeatures *f, const char *core);

#endif
