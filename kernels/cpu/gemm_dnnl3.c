// kernels/cpu/gemm_dnnl3.c — oneDNN 3.x's matmul primitive through dlopen (see gemm_dnnl3.h). The
// few types and values of its C API used here are declared below, with the values of the 3.x
// headers (oneapi/dnnl/dnnl_common_types.h, dnnl_types.h): this file must not include Debian's
// 2.x headers' declarations of the same names, and the 3.x headers are not installed.
#include "kernels/cpu/gemm_dnnl3.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config/lib_path.h"

// ---- oneDNN 3.x C API (dnnl_common_types.h, dnnl_types.h of 3.2)
enum { D3_SUCCESS = 0 };
enum { D3_DT_UNDEF = 0, D3_BF16 = 2, D3_F32 = 3 };        // dnnl_data_type_t
enum { D3_CPU = 1 };                                      // dnnl_engine_kind_t: dnnl_cpu
enum { D3_STREAM_DEFAULT = 1 };                           // dnnl_stream_default_flags (in order)
enum { D3_ARG_SRC = 1, D3_ARG_DST = 17, D3_ARG_WEIGHTS = 33 };
enum { D3_MAX_NDIMS = 12 };
enum { D3_CPU_RUNTIME_OMP = 2 };                          // DNNL_RUNTIME_OMP (dnnl_config.h)
typedef int64_t D3Dims[D3_MAX_NDIMS];                     // dnnl_dims_t
typedef void *D3Handle;                                   // every dnnl_*_t is an opaque pointer
typedef struct { int arg; D3Handle memory; } D3ExecArg;   // dnnl_exec_arg_t
typedef struct {                                          // dnnl_version_t
    int major, minor, patch;
    const char *hash;
    unsigned cpu_runtime, gpu_runtime;
} D3Version;

static struct {
    int (*engine_create)(D3Handle *, int, size_t);
    int (*stream_create)(D3Handle *, D3Handle, unsigned);
    int (*stream_wait)(D3Handle);
    int (*md_create)(D3Handle *, int, const int64_t *, int, const int64_t *);
    int (*md_destroy)(D3Handle);
    int (*matmul_pd_create)(D3Handle *, D3Handle, D3Handle, D3Handle, D3Handle, D3Handle, D3Handle);
    int (*pd_destroy)(D3Handle);
    int (*attr_create)(D3Handle *);
    int (*attr_destroy)(D3Handle);
    int (*attr_set_post_ops)(D3Handle, D3Handle);
    int (*po_create)(D3Handle *);
    int (*po_destroy)(D3Handle);
    int (*po_append_sum)(D3Handle, float, int32_t, int);
    int (*prim_create)(D3Handle *, D3Handle);
    int (*prim_destroy)(D3Handle);
    int (*prim_execute)(D3Handle, D3Handle, int, const D3ExecArg *);
    int (*mem_create)(D3Handle *, D3Handle, D3Handle, void *);
    int (*mem_set_handle)(D3Handle, void *);
    int (*mem_destroy)(D3Handle);
    const D3Version *(*version)(void);
    int (*isa)(void);
} F;

static struct {
    int status;   // 0 loaded
    D3Handle engine, stream;
    char path[4400];
    char why[1200];
    char version[32], full[160];
} g = { .status = -1 };
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const NAME = "libdnnl.so.3";

// RTLD_DEEPBIND: see gemm_dnnl3.h.
static void *open_lib(const char *p) { return dlopen(p, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND); }

static int is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

// The library's handle, its path in g.path; NULL with g.why.
static void *find_library(void) {
    const char *over = getenv("MINGPT_DNNL3_LIB");
    if (over && *over) {
        snprintf(g.path, sizeof g.path, "%s", over);
        if (!is_file(over)) {
            snprintf(g.why, sizeof g.why, "no oneDNN 3 at MINGPT_DNNL3_LIB=%.1000s (no such file)", over);
            return NULL;
        }
        void *h = open_lib(over);
        if (!h) snprintf(g.why, sizeof g.why, "cannot load MINGPT_DNNL3_LIB=%.400s: %.600s", over, dlerror());
        return h;
    }
    char exe[4096];
    if (lib_path_exe_dir(exe, sizeof exe) == 0) {
        const char *dirs[] = { "build/onednn3/lib", "../onednn3/lib", "../../onednn3/lib", LIB_PATH_INSTALLED_LIBS "/onednn3" };
        for (size_t d = 0; d < sizeof dirs / sizeof *dirs; d++) {
            snprintf(g.path, sizeof g.path, "%s/%s/%s", exe, dirs[d], NAME);
            if (!is_file(g.path)) continue;
            void *h = open_lib(g.path);
            if (!h) snprintf(g.why, sizeof g.why, "cannot load %.400s: %.600s", g.path, dlerror());
            return h;
        }
    }
    void *h = open_lib(NAME);   // the loader's path
    if (h) {
        Dl_info info;
        void *sym = dlsym(h, "dnnl_version");
        snprintf(g.path, sizeof g.path, "%s", sym && dladdr(sym, &info) && info.dli_fname ? info.dli_fname : NAME);
        return h;
    }
    snprintf(g.why, sizeof g.why, "not found (build/onednn3/lib next to mingpt, which `make onednn3` fills, nor %s on the "
             "loader's path; MINGPT_DNNL3_LIB names one)", NAME);
    return NULL;
}

static const char *isa_name(int isa) {
    switch (isa) {   // dnnl_cpu_isa_t of 3.2
    case 0xfef: return "avx512_core_amx";
    case 0xe7: return "avx512_core_bf16";
    case 0x67: return "avx512_core_vnni";
    case 0x27: return "avx512_core";
    case 0xf: return "avx2_vnni";
    case 0x7: return "avx2";
    case 0x3: return "avx";
    case 0x1: return "sse41";
    default: return "other";
    }
}

static void init_once(void) {
    g.status = 1;
    // AddressSanitizer refuses RTLD_DEEPBIND (it would abort the process): this file may be
    // (the message avoids the sanitizer's full name, which the tests' crash checks look for)
    // built without it while the program is (the emulated CUDA suites' .asan binaries link
    // libmingpt.a), so ask the running process for ASan's runtime too.
#if defined(__SANITIZE_ADDRESS__)
    const bool asan = true;
#else
    const bool asan = dlsym(RTLD_DEFAULT, "__asan_init") != NULL;
#endif
    if (asan) {
        snprintf(g.why, sizeof g.why, "not used in a sanitizer build (ASan refuses RTLD_DEEPBIND)");
        return;
    }
    void *h = find_library();
    if (!h) return;
#define SYM(field, name) (*(void **)&F.field = dlsym(h, name)) != NULL
    const int ok = SYM(engine_create, "dnnl_engine_create") && SYM(stream_create, "dnnl_stream_create") &&
                   SYM(stream_wait, "dnnl_stream_wait") && SYM(md_create, "dnnl_memory_desc_create_with_strides") &&
                   SYM(md_destroy, "dnnl_memory_desc_destroy") &&
                   SYM(matmul_pd_create, "dnnl_matmul_primitive_desc_create") &&
                   SYM(pd_destroy, "dnnl_primitive_desc_destroy") && SYM(attr_create, "dnnl_primitive_attr_create") &&
                   SYM(attr_destroy, "dnnl_primitive_attr_destroy") &&
                   SYM(attr_set_post_ops, "dnnl_primitive_attr_set_post_ops") && SYM(po_create, "dnnl_post_ops_create") &&
                   SYM(po_destroy, "dnnl_post_ops_destroy") && SYM(po_append_sum, "dnnl_post_ops_append_sum") &&
                   SYM(prim_create, "dnnl_primitive_create") && SYM(prim_destroy, "dnnl_primitive_destroy") &&
                   SYM(prim_execute, "dnnl_primitive_execute") && SYM(mem_create, "dnnl_memory_create") &&
                   SYM(mem_set_handle, "dnnl_memory_set_data_handle") && SYM(mem_destroy, "dnnl_memory_destroy") &&
                   SYM(version, "dnnl_version") && SYM(isa, "dnnl_get_effective_cpu_isa");
#undef SYM
    if (!ok) {
        snprintf(g.why, sizeof g.why, "%.600s is not oneDNN 3.x (a symbol of its C API is missing: a 2.x library?)", g.path);
        dlclose(h);
        return;
    }
    const D3Version *v = F.version();
    if (!v || v->major != 3) {
        snprintf(g.why, sizeof g.why, "%.600s is oneDNN %d.%d, not 3.x", g.path, v ? v->major : -1, v ? v->minor : -1);
        dlclose(h);
        return;
    }
    if (v->cpu_runtime != D3_CPU_RUNTIME_OMP) {
        snprintf(g.why, sizeof g.why, "%.600s is not an OpenMP build of oneDNN (its threads would not be mingpt's)", g.path);
        dlclose(h);
        return;
    }
    if (F.engine_create(&g.engine, D3_CPU, 0) != D3_SUCCESS ||
        F.stream_create(&g.stream, g.engine, D3_STREAM_DEFAULT) != D3_SUCCESS) {
        snprintf(g.why, sizeof g.why, "%.600s could not create its CPU engine", g.path);
        return;   // (not closed: it may hold state)
    }
    snprintf(g.version, sizeof g.version, "%d.%d.%d", v->major, v->minor, v->patch);
    snprintf(g.full, sizeof g.full, "%s %.40s %s", g.version, v->hash ? v->hash : "?", isa_name(F.isa()));
    g.status = 0;
}

int dnnl3_init(void) {
    pthread_once(&g_once, init_once);
    return g.status;
}

const char *dnnl3_status(void) {
    static char buf[sizeof g.path + 64];
    if (dnnl3_init()) return g.why;
    snprintf(buf, sizeof buf, "%s (%s)", g.version, g.path);
    return buf;
}

const char *dnnl3_version(void) { return dnnl3_init() ? "" : g.version; }
const char *dnnl3_version_full(void) { return dnnl3_init() ? "" : g.full; }

// ============================================================================
// Matmul primitives, one per (type, transposes, shape, strides, beta, threads), reused
// ============================================================================
typedef struct {
    int t, ta, tb, M, N, K, lda, ldb, ldc, threads;
    float beta;
    int pad;   // 0: no padding bytes, as the key is hashed and compared as bytes
} PrimKey;

typedef struct {
    int used;
    PrimKey k;
    D3Handle prim, a, b, c;
} Prim;

#define N_PRIMS 256
static Prim g_prims[N_PRIMS];

static void prim_destroy(Prim *p) {
    if (p->prim) F.prim_destroy(p->prim);
    if (p->a) F.mem_destroy(p->a);
    if (p->b) F.mem_destroy(p->b);
    if (p->c) F.mem_destroy(p->c);
    memset(p, 0, sizeof *p);
}

// A (rows x cols) operand stored row-major with row stride ld, read transposed when trans.
static int operand_desc(D3Handle *d, int dt, int rows, int cols, int trans, int ld) {
    const D3Dims dims = { rows, cols }, str = { trans ? 1 : ld, trans ? ld : 1 };
    return F.md_create(d, 2, dims, dt, str);
}

static int prim_create(Prim *p, const PrimKey *k) {
    const int dt = k->t == GEMM_BF16 ? D3_BF16 : D3_F32;
    D3Handle ad = NULL, bd = NULL, cd = NULL, attr = NULL, po = NULL, pd = NULL;
    int s = operand_desc(&ad, dt, k->M, k->K, k->ta, k->lda);
    if (!s) s = operand_desc(&bd, dt, k->K, k->N, k->tb, k->ldb);
    if (!s) s = operand_desc(&cd, D3_F32, k->M, k->N, 0, k->ldc);
    if (!s) s = F.attr_create(&attr);
    if (!s && k->beta != 0.0f) {
        s = F.po_create(&po);
        if (!s) s = F.po_append_sum(po, k->beta, 0, D3_DT_UNDEF);
        if (!s) s = F.attr_set_post_ops(attr, po);
    }
    if (!s) s = F.matmul_pd_create(&pd, g.engine, ad, bd, NULL, cd, attr);
    if (!s) s = F.prim_create(&p->prim, pd);
    if (!s) s = F.mem_create(&p->a, ad, g.engine, NULL);
    if (!s) s = F.mem_create(&p->b, bd, g.engine, NULL);
    if (!s) s = F.mem_create(&p->c, cd, g.engine, NULL);
    if (pd) F.pd_destroy(pd);
    if (po) F.po_destroy(po);
    if (attr) F.attr_destroy(attr);
    if (ad) F.md_destroy(ad);
    if (bd) F.md_destroy(bd);
    if (cd) F.md_destroy(cd);
    if (s) { prim_destroy(p); return s; }
    p->used = 1;
    p->k = *k;
    return 0;
}

static Prim *prim_get(const PrimKey *k, int *status) {
    uint64_t h = 1469598103934665603ull;
    const unsigned char *b = (const unsigned char *)k;
    for (size_t i = 0; i < sizeof *k; i++) h = (h ^ b[i]) * 1099511628211ull;
    for (int probe = 0; probe < N_PRIMS; probe++) {
        Prim *p = &g_prims[(h + probe) % N_PRIMS];
        if (!p->used) {
            *status = prim_create(p, k);
            return *status ? NULL : p;
        }
        if (memcmp(&p->k, k, sizeof *k) == 0) return p;
    }
    for (int i = 0; i < N_PRIMS; i++) prim_destroy(&g_prims[i]);   // full: start over
    *status = prim_create(&g_prims[h % N_PRIMS], k);
    return *status ? NULL : &g_prims[h % N_PRIMS];
}

int dnnl3_matmul(GemmType t, int ta, int tb, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
                 float beta, float *C, int ldc) {
    if (dnnl3_init()) return 1;
    _Static_assert(sizeof(PrimKey) == 12 * sizeof(int), "PrimKey has padding");
    const PrimKey k = { (int)t, ta, tb, M, N, K, lda, ldb, ldc, omp_get_max_threads(), beta, 0 };
    pthread_mutex_lock(&g_lock);
    int s = 0;
    Prim *p = prim_get(&k, &s);
    if (p) {
        s = F.mem_set_handle(p->a, (void *)A);
        if (!s) s = F.mem_set_handle(p->b, (void *)B);
        if (!s) s = F.mem_set_handle(p->c, C);
        const D3ExecArg args[3] = { { D3_ARG_SRC, p->a }, { D3_ARG_WEIGHTS, p->b }, { D3_ARG_DST, p->c } };
        if (!s) s = F.prim_execute(p->prim, g.stream, 3, args);
        if (!s) s = F.stream_wait(g.stream);
    }
    pthread_mutex_unlock(&g_lock);
    return s;
}
