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
// Matmul primitives, one per (type, transposes, shape, strides, beta), reused
// ============================================================================
typedef struct {
    int used, t, ta, tb, M, N, K, lda, ldb, ldc;
    float beta;
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, c;
} Prim;

#define N_PRIMS 256   // a model has ~20 shapes; evaluation and odd last batches add a few
static Prim g_prims[N_PRIMS];

static void prim_destroy(Prim *p) {
    if (p->prim) dnnl_primitive_destroy(p->prim);
    if (p->a) dnnl_memory_destroy(p->a);
    if (p->b) dnnl_memory_destroy(p->b);
    if (p->c) dnnl_memory_destroy(p->c);
    memset(p, 0, sizeof *p);
}

static int prim_create(Prim *p, GemmType t, int ta, int tb, int M, int N, int K, int lda, int ldb, int ldc,
                       float beta) {
    const dnnl_data_type_t dt = t == GEMM_BF16 ? dnnl_bf16 : dnnl_f32;
    // Logical A (M,K), B (K,N), C (M,N), row-major storage described by strides.
    dnnl_dims_t as = { M, K }, bs = { K, N }, cs = { M, N };
    dnnl_dims_t astr = { ta ? 1 : lda, ta ? lda : 1 }, bstr = { tb ? 1 : ldb, tb ? ldb : 1 }, cstr = { ldc, 1 };
    dnnl_memory_desc_t ad, bd, cd;
    dnnl_status_t s = dnnl_memory_desc_init_by_strides(&ad, 2, as, dt, astr);
    if (!s) s = dnnl_memory_desc_init_by_strides(&bd, 2, bs, dt, bstr);
    if (!s) s = dnnl_memory_desc_init_by_strides(&cd, 2, cs, dnnl_f32, cstr);
    if (s) return (int)s;
    dnnl_matmul_desc_t md;
    if ((s = dnnl_matmul_desc_init(&md, &ad, &bd, NULL, &cd))) return (int)s;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    s = dnnl_primitive_attr_create(&attr);
    if (!s && beta != 0.0f) {
        s = dnnl_post_ops_create(&po);
        if (!s) s = dnnl_post_ops_append_sum(po, beta);
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
    *p = (Prim){ 1, t, ta, tb, M, N, K, lda, ldb, ldc, beta, p->prim, p->a, p->b, p->c };
    return 0;
}

static Prim *prim_get(GemmType t, int ta, int tb, int M, int N, int K, int lda, int ldb, int ldc, float beta,
                      int *status) {
    uint64_t h = 1469598103934665603ull;
    const int key[] = { (int)t, ta, tb, M, N, K, lda, ldb, ldc };
    for (size_t i = 0; i < sizeof key / sizeof *key; i++) h = (h ^ (uint32_t)key[i]) * 1099511628211ull;
    uint32_t bb;
    memcpy(&bb, &beta, 4);
    h = (h ^ bb) * 1099511628211ull;
    for (int probe = 0; probe < N_PRIMS; probe++) {
        Prim *p = &g_prims[(h + probe) % N_PRIMS];
        if (!p->used) {
            *status = prim_create(p, t, ta, tb, M, N, K, lda, ldb, ldc, beta);
            return *status ? NULL : p;
        }
        if (p->t == (int)t && p->ta == ta && p->tb == tb && p->M == M && p->N == N && p->K == K && p->lda == lda &&
            p->ldb == ldb && p->ldc == ldc && p->beta == beta)
            return p;
    }
    // Full (hundreds of distinct shapes): start over rather than grow without bound.
    for (int i = 0; i < N_PRIMS; i++) prim_destroy(&g_prims[i]);
    *status = prim_create(&g_prims[h % N_PRIMS], t, ta, tb, M, N, K, lda, ldb, ldc, beta);
    return *status ? NULL : &g_prims[h % N_PRIMS];
}

int onednn_matmul(GemmType t, int ta, int tb, int M, int N, int K, const void *A, int lda, const void *B,
                  int ldb, float beta, float *C, int ldc) {
    if (onednn_init()) return 1;
    pthread_mutex_lock(&g_lock);
    int s = 0;
    Prim *p = prim_get(t, ta, tb, M, N, K, lda, ldb, ldc, beta, &s);
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
