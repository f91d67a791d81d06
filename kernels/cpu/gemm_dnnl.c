// kernels/cpu/gemm_dnnl.c — oneDNN's dnnl_sgemm and matmul primitive (oneDNN 2.x C API:
// dnnl_memory_desc_init_by_strides, dnnl_matmul_desc_init, dnnl_primitive_desc_create).
#include "kernels/cpu/gemm_dnnl.h"

#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static dnnl_engine_t g_engine;
static dnnl_stream_t g_stream;
static int g_init_status = -1;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static void init_once(void) {
    if (dnnl_engine_create(&g_engine, dnnl_cpu, 0) != dnnl_success) { g_init_status = 1; return; }
    if (dnnl_stream_create(&g_stream, g_engine, dnnl_stream_default_flags) != dnnl_success) {
        g_init_status = 1;
        return;
    }
    g_init_status = 0;
}

int onednn_init(void) {
    pthread_once(&g_once, init_once);
    return g_init_status;
}

int onednn_sgemm(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                 float beta, float *C, int ldc) {
    return (int)dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
}

// ============================================================================
// Matmul primitives, one per (type, batch, transposes, shape, strides, beta), reused
// ============================================================================
typedef struct {
    int t, batch, ta, tb, M, N, K, lda, ldb, ldc;
    long sa, sb, sc;        // batch strides (elements); unused when batch = 1
    float beta;
    int pad;                // 0: no padding bytes, as the key is hashed and compared as bytes
} PrimKey;

typedef struct {
    int used;
    PrimKey k;
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, c;
} Prim;

#define N_PRIMS 256   // a model has ~30 shapes; evaluation and odd last batches add a few
static Prim g_prims[N_PRIMS];

static void prim_destroy(Prim *p) {
    if (p->prim) dnnl_primitive_destroy(p->prim);
    if (p->a) dnnl_memory_destroy(p->a);
    if (p->b) dnnl_memory_destroy(p->b);
    if (p->c) dnnl_memory_destroy(p->c);
    memset(p, 0, sizeof *p);
}

// A (rows x cols) operand, row-major with row stride ld, read transposed when trans: logical dims
// (rows', cols') with strides; with a batch dimension in front when batch > 1.
static dnnl_status_t operand_desc(dnnl_memory_desc_t *d, dnnl_data_type_t dt, int batch, long bstride, int rows,
                                  int cols, int trans, int ld) {
    if (batch > 1) {
        dnnl_dims_t dims = { batch, rows, cols }, str = { bstride, trans ? 1 : ld, trans ? ld : 1 };
        return dnnl_memory_desc_init_by_strides(d, 3, dims, dt, str);
    }
    dnnl_dims_t dims = { rows, cols }, str = { trans ? 1 : ld, trans ? ld : 1 };
    return dnnl_memory_desc_init_by_strides(d, 2, dims, dt, str);
}

static int prim_create(Prim *p, const PrimKey *k) {
    const dnnl_data_type_t dt = k->t == GEMM_BF16 ? dnnl_bf16 : dnnl_f32;
    // Logical A (M,K), B (K,N), C (M,N), each row-major storage described by strides.
    dnnl_memory_desc_t ad, bd, cd;
    dnnl_status_t s = operand_desc(&ad, dt, k->batch, k->sa, k->M, k->K, k->ta, k->lda);
    if (!s) s = operand_desc(&bd, dt, k->batch, k->sb, k->K, k->N, k->tb, k->ldb);
    if (!s) s = operand_desc(&cd, dnnl_f32, k->batch, k->sc, k->M, k->N, 0, k->ldc);
    if (s) return (int)s;
    dnnl_matmul_desc_t md;
    if ((s = dnnl_matmul_desc_init(&md, &ad, &bd, NULL, &cd))) return (int)s;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    s = dnnl_primitive_attr_create(&attr);
    if (!s && k->beta != 0.0f) {
        s = dnnl_post_ops_create(&po);
        if (!s) s = dnnl_post_ops_append_sum(po, k->beta);
        if (!s) s = dnnl_primitive_attr_set_post_ops(attr, po);
    }
    if (!s) s = dnnl_primitive_desc_create(&pd, &md, attr, g_engine, NULL);
    if (!s) s = dnnl_primitive_create(&p->prim, pd);
    if (!s) s = dnnl_memory_create(&p->a, &ad, g_engine, DNNL_MEMORY_NONE);
    if (!s) s = dnnl_memory_create(&p->b, &bd, g_engine, DNNL_MEMORY_NONE);
    if (!s) s = dnnl_memory_create(&p->c, &cd, g_engine, DNNL_MEMORY_NONE);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (s) { prim_destroy(p); return (int)s; }
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
    // Full (hundreds of distinct shapes): start over rather than grow without bound.
    for (int i = 0; i < N_PRIMS; i++) prim_destroy(&g_prims[i]);
    *status = prim_create(&g_prims[h % N_PRIMS], k);
    return *status ? NULL : &g_prims[h % N_PRIMS];
}

int onednn_matmul_batched(GemmType t, int batch, int ta, int tb, int M, int N, int K, const void *A, int lda,
                          long sa, const void *B, int ldb, long sb, float beta, float *C, int ldc, long sc) {
    if (onednn_init()) return 1;
    _Static_assert(sizeof(PrimKey) == 10 * sizeof(int) + 3 * sizeof(long) + sizeof(float) + sizeof(int),
                   "PrimKey has padding");
    const PrimKey k = { (int)t, batch, ta, tb, M, N, K, lda, ldb, ldc, batch > 1 ? sa : 0, batch > 1 ? sb : 0,
                        batch > 1 ? sc : 0, beta, 0 };
    pthread_mutex_lock(&g_lock);
    int s = 0;
    Prim *p = prim_get(&k, &s);
    if (p) {
        s = dnnl_memory_set_data_handle(p->a, (void *)A);
        if (!s) s = dnnl_memory_set_data_handle(p->b, (void *)B);
        if (!s) s = dnnl_memory_set_data_handle(p->c, C);
        const dnnl_exec_arg_t args[3] = { { DNNL_ARG_SRC, p->a }, { DNNL_ARG_WEIGHTS, p->b }, { DNNL_ARG_DST, p->c } };
        if (!s) s = dnnl_primitive_execute(p->prim, g_stream, 3, args);
        if (!s) s = dnnl_stream_wait(g_stream);
    }
    pthread_mutex_unlock(&g_lock);
    return s;
}

int onednn_matmul(GemmType t, int ta, int tb, int M, int N, int K, const void *A, int lda, const void *B,
                  int ldb, float beta, float *C, int ldc) {
    return onednn_matmul_batched(t, 1, ta, tb, M, N, K, A, lda, 0, B, ldb, 0, beta, C, ldc, 0);
}

void onednn_version(char *buf, size_t len) {
    const dnnl_version_t *v = dnnl_version();
    snprintf(buf, len, "%d.%d.%d", v->major, v->minor, v->patch);
}

const char *onednn_isa(void) {
    switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_sse41: return "sse41";
    default: return "other";
    }
}
