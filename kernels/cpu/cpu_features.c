// kernels/cpu/cpu_features.c — cpuid and XGETBV (Intel SDM vol. 2A, CPUID leaf 07H; vol. 1,
// 13.3 "XSAVE-enabled features"), and OpenBLAS's core name.
#include "kernels/cpu/cpu_features.h"

#include <cpuid.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

char *openblas_get_corename(void);   // OpenBLAS (not in cblas.h)

static uint64_t xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static CpuFeatures g_features;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void detect(void) {
    CpuFeatures *f = &g_features;
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    const bool osxsave = c & (1u << 27), avx = c & (1u << 28);
    f->fma = c & (1u << 12);
    const uint64_t xcr0 = osxsave ? xgetbv0() : 0;
    const bool ymm_os = (xcr0 & 0x6) == 0x6;             // SSE + AVX state
    const bool zmm_os = (xcr0 & 0xe6) == 0xe6;           // + opmask, ZMM_Hi256, Hi16_ZMM
    const bool amx_os = (xcr0 & 0x60000) == 0x60000;     // XTILECFG + XTILEDATA
    if (__get_cpuid_max(0, NULL) >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        f->avx2 = avx && ymm_os && (b & (1u << 5));
        f->fma = f->fma && f->avx2;
        // F (16), DQ (17), BW (30), VL (31)
        const uint32_t need = (1u << 16) | (1u << 17) | (1u << 30) | (1u << 31);
        f->avx512 = zmm_os && (b & need) == need;
        f->avx512_fp16 = f->avx512 && (d & (1u << 23));
        const bool amx_tile = d & (1u << 24), amx_bf16 = d & (1u << 22);
        f->amx_bf16 = f->avx512 && amx_os && amx_tile && amx_bf16;
        unsigned a1, b1, c1, d1;
        __cpuid_count(7, 1, a1, b1, c1, d1);
        f->avx512_bf16 = f->avx512 && (a1 & (1u << 5));
    }
    if ((unsigned)__get_cpuid_max(0x80000000, NULL) >= 0x80000004u) {
        unsigned r[12];
        for (unsigned i = 0; i < 3; i++) __cpuid(0x80000002 + i, r[4 * i], r[4 * i + 1], r[4 * i + 2], r[4 * i + 3]);
        char s[49];
        memcpy(s, r, 48);
        s[48] = 0;
        const char *p = s;
        while (*p == ' ') p++;
        snprintf(f->brand, sizeof f->brand, "%s", p);
        for (size_t n = strlen(f->brand); n > 0 && f->brand[n - 1] == ' '; n--) f->brand[n - 1] = 0;
    }
}

const CpuFeatures *cpu_features(void) {
    pthread_once(&g_once, detect);
    return &g_features;
}

const char *cpu_isa_name(const CpuFeatures *f) {
    return f->amx_bf16 ? "avx512_amx" : f->avx512_bf16 ? "avx512_bf16" : f->avx512 ? "avx512" : f->avx2 ? "avx2" : "sse";
}

void cpu_features_describe(const CpuFeatures *f, char *buf, size_t len) {
    snprintf(buf, len, "%s%s%s%s%s%s", f->avx2 ? "AVX2 " : "", f->fma ? "FMA " : "", f->avx512 ? "AVX-512 " : "",
             f->avx512_bf16 ? "AVX512-BF16 " : "", f->amx_bf16 ? "AMX-BF16 " : "",
             f->avx512_fp16 ? "AVX512-FP16 " : "");
    const size_t n = strlen(buf);
    if (n > 0 && buf[n - 1] == ' ') buf[n - 1] = 0;
    if (!buf[0]) snprintf(buf, len, "SSE only");
}

const char *openblas_core(void) {
    const char *c = openblas_get_corename();
    return c && *c ? c : "unknown";
}

// OpenBLAS 0.3.21's x86-64 cores (driver/others/dynamic.c) by the widest vectors their sgemm uses.
const char *openblas_core_isa(const char *core) {
    static const char *const avx512[] = { "SkylakeX", "Cooperlake", "SapphireRapids" };
    static const char *const avx2[] = { "Haswell", "Zen", "Excavator", "Steamroller", "Piledriver", "Bulldozer",
                                        "Sandybridge" };   // Sandybridge: AVX (256-bit), no FMA
    for (size_t i = 0; i < sizeof avx512 / sizeof *avx512; i++)
        if (strcasecmp(core, avx512[i]) == 0) return "avx512";
    for (size_t i = 0; i < sizeof avx2 / sizeof *avx2; i++)
        if (strcasecmp(core, avx2[i]) == 0) return "avx2";
    return "sse";
}

static int isa_rank(const char *isa) {
    return strncmp(isa, "avx512", 6) == 0 ? 2 : strcmp(isa, "avx2") == 0 ? 1 : 0;
}

int openblas_core_is_weaker(const CpuFeatures *f, const char *core) {
    return isa_rank(openblas_core_isa(core)) < isa_rank(cpu_isa_name(f));
}
