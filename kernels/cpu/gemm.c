// kernels/cpu/gemm.c — GEMM dispatch by shape class, calibrated on this machine and cached
// (see kernels/cpu/gemm.h for the rules).
#include "kernels/cpu/gemm.h"

#include <cblas.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/clock.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm_dnnl.h"
#include "kernels/cpu/gemm_dnnl3.h"
#include "kernels/cpu/gemm_mkl.h"
#include "kernels/fatal.h"

char *openblas_get_config(void);   // OpenBLAS (not in cblas.h)

#define CACHE_FORMAT 5            // bump when the class key, the candidates or the timing change
#define MAX_CLASSES 512
#define CACHE_MAX_BYTES (256 * 1024)
// Calibration shapes are scaled down to this: a training step's products (up to a few GFLOP) are
// timed at their own shape. At 1e9 the weight gradients (K = B*T) were timed at half their K and
// ranked the libraries the other way round (M's 384x768 gradient: oneDNN 330 vs OpenBLAS 309
// GFLOP/s at K 1024; at its real K 2048, dnnl_sgemm 237 vs OpenBLAS 279-294).
#define CALIB_MAX_FLOP 4e9
// Timed rounds per class: about this long in all (at least 3, at most 20 rounds). Libraries within
// 5% of each other at a step's shapes: best-of-3 picked either of such a pair at random.
#define CALIB_BUDGET_S 0.2
#define SPLIT_ALIGN 16            // blocks of the split are multiples of 16 rows / columns

static const char *const IMPL_NAMES[GEMM_N_IMPL] = { "openblas", "openblas-split", "onednn-sgemm", "onednn-matmul",
                                                       "mkl", "onednn3" };

static struct {
    pthread_mutex_t lock;
    int have_onednn;
    int have_mkl;                      // MKL found and set up (kernels/cpu/gemm_mkl.h)
    int have_dnnl3;                    // oneDNN 3 found and set up (kernels/cpu/gemm_dnnl3.h)
    int allowed[GEMM_N_IMPL];          // MINGPT_GEMM narrows this
    int allowed16[GEMM_N_IMPL];        // the same for bf16 classes: oneDNN's matmul, MKL, oneDNN 3
    GemmClass classes[MAX_CLASSES];
    int n;
    char fingerprint[1024];
    char path[4096];                   // "" = no cache
    char notes[2048];
    int cache_failed;                  // a write failed once (said in notes)
    int calibrations;                  // classes timed by this process
} G = { .lock = PTHREAD_MUTEX_INITIALIZER };
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

const char *cpu_gemm_impl_name(int impl) { return impl >= 0 && impl < GEMM_N_IMPL ? IMPL_NAMES[impl] : "?"; }

static void note(const char *fmt, const char *a, const char *b) {
    const size_t n = strlen(G.notes);
    if (n + 2 >= sizeof G.notes) return;
    if (n) G.notes[n] = ' ';
    snprintf(G.notes + n + (n ? 1 : 0), sizeof G.notes - n - 1, fmt, a, b);
}

// Whether an implementation's library is loaded here (OpenBLAS always is).
static int available(int impl) {
    if (impl == GEMM_MKL) return G.have_mkl;
    if (impl == GEMM_ONEDNN3) return G.have_dnnl3;
    if (impl == GEMM_ONEDNN_SGEMM || impl == GEMM_ONEDNN_MATMUL) return G.have_onednn;
    return impl >= 0 && impl < GEMM_N_IMPL;
}

// Whether an implementation computes bf16 products here (oneDNN's matmul on bf16 hardware, MKL's
// cblas_gemm_bf16bf16f32 and oneDNN 3's matmul beside it).
static int available16(int impl) {
    if (impl == GEMM_ONEDNN_MATMUL) return G.have_onednn;
    if (impl == GEMM_ONEDNN3) return G.have_dnnl3;
    return impl == GEMM_MKL && G.have_mkl && mkl_has_bf16();
}

static int ceil_log2(int x) {
    int l = 0;
    while ((1L << l) < x) l++;
    return l;
}

// ============================================================================
// The candidates
// ============================================================================
static void openblas1(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                      float beta, float *C, int ldc) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A,
                lda, B, ldb, beta, C, ldc);
}

// The output split into one block of rows (or columns, whichever dimension is larger) per OpenMP
// thread, a single-threaded OpenBLAS call each (OpenBLAS runs serially inside a parallel region).
static void openblas_split(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B,
                           int ldb, float beta, float *C, int ldc) {
    const int split_m = M >= N, D = split_m ? M : N;
    const int nb = (D + SPLIT_ALIGN - 1) / SPLIT_ALIGN;
    #pragma omp parallel
    {
        const int t = omp_get_thread_num(), T = omp_get_num_threads();
        const int d0 = (int)((long)nb * t / T) * SPLIT_ALIGN;
        int d1 = (int)((long)nb * (t + 1) / T) * SPLIT_ALIGN;
        if (d1 > D) d1 = D;
        if (d1 > d0) {
            if (split_m)   // rows d0..d1 of C and of op(A)
                openblas1(ta, tb, d1 - d0, N, K, ta ? A + d0 : A + (size_t)d0 * lda, lda, B, ldb, beta,
                          C + (size_t)d0 * ldc, ldc);
            else           // columns d0..d1 of C and of op(B)
                openblas1(ta, tb, M, d1 - d0, K, A, lda, tb ? B + (size_t)d0 * ldb : B + d0, ldb, beta, C + d0, ldc);
        }
    }
}

static void run_impl(int impl, int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B,
                     int ldb, float beta, float *C, int ldc) {
    int s = 0;
    switch (impl) {
    case GEMM_OPENBLAS_SPLIT: openblas_split(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc); return;
    case GEMM_ONEDNN_SGEMM: s = onednn_sgemm(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc); break;
    case GEMM_ONEDNN_MATMUL: s = onednn_matmul(GEMM_F32, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc); break;
    case GEMM_MKL:
        if (mkl_sgemm(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc)) fatal_error("MKL is not loaded (%s)", mkl_status());
        return;
    case GEMM_ONEDNN3:
        if ((s = dnnl3_matmul(GEMM_F32, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc)))
            fatal_error("oneDNN 3 matmul failed (status %d) on a %dx%dx%d product (%s)", s, M, N, K, dnnl3_status());
        return;
    default: openblas1(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc); return;
    }
    if (s) fatal_error("oneDNN %s failed (status %d) on a %dx%dx%d product", IMPL_NAMES[impl], s, M, N, K);
}

static void run_bf16(int impl, int ta, int tb, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B,
                     int ldb, float beta, float *C, int ldc) {
    if (impl == GEMM_MKL) {
        if (mkl_gemm_bf16(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc)) fatal_error("MKL's bf16 GEMM is not loaded (%s)", mkl_status());
        return;
    }
    if (impl == GEMM_ONEDNN3) {
        const int s = dnnl3_matmul(GEMM_BF16, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
        if (s) fatal_error("oneDNN 3 bf16 matmul failed (status %d) on a %dx%dx%d product (%s)", s, M, N, K, dnnl3_status());
        return;
    }
    const int s = onednn_matmul(GEMM_BF16, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
    if (s) fatal_error("oneDNN bf16 matmul failed (status %d) on a %dx%dx%d product", s, M, N, K);
}

// ============================================================================
// The cache file: one validated loader, atomic writes
// ============================================================================
//   mingpt-gemm-cache <CACHE_FORMAT>
//   fingerprint <text up to the end of the line>
//   class <ta> <tb> <beta0> <m_log2> <n_log2> <k_log2> <threads> <m> <n> <k> <impl> <gflops x GEMM_N_IMPL>
//   (GEMM_N_IMPL = 6 columns: openblas, openblas-split, onednn-sgemm, onednn-matmul, mkl, onednn3)
//   bf16 class <the same fields>   (a class of bf16 products: onednn-matmul, mkl and onednn3 columns only)
static int parse_class(const char *line, GemmClass *c) {
    int used = 0;
    c->bf16 = strncmp(line, "bf16 ", 5) == 0;   // "bf16 class ...": a class of bf16 products
    if (c->bf16) line += 5;
    const int k = sscanf(line, "class %d %d %d %d %d %d %d %d %d %d %d %lf %lf %lf %lf %lf %lf%n", &c->ta,
                         &c->tb, &c->beta0, &c->m_log2, &c->n_log2, &c->k_log2, &c->threads, &c->m, &c->n, &c->k,
                         &c->impl, &c->gflops[0], &c->gflops[1], &c->gflops[2], &c->gflops[3], &c->gflops[4],
                         &c->gflops[5], &used);
    _Static_assert(GEMM_N_IMPL == 6, "the class line's gflops columns");
    if (k != 11 + GEMM_N_IMPL || line[used] != 0) return 1;
    if ((c->ta | c->tb | c->beta0) & ~1 || c->impl < 0 || c->impl >= GEMM_N_IMPL || c->threads < 1 || c->threads > 4096)
        return 1;
    const int logs[3] = { c->m_log2, c->n_log2, c->k_log2 }, dims[3] = { c->m, c->n, c->k };
    for (int i = 0; i < 3; i++)
        if (logs[i] < 0 || logs[i] > 31 || dims[i] < 1 || ceil_log2(dims[i]) > logs[i]) return 1;
    for (int i = 0; i < GEMM_N_IMPL; i++)
        if (!(c->gflops[i] >= 0 && c->gflops[i] < 1e7)) return 1;   // NaN fails too
    if (c->bf16 && c->impl != GEMM_ONEDNN_MATMUL && c->impl != GEMM_MKL && c->impl != GEMM_ONEDNN3)
        return 1;   // the bf16 libraries
    return c->gflops[c->impl] > 0 ? 0 : 1;
}

int cpu_gemm_cache_parse(const char *buf, size_t len, const char *fingerprint, GemmClass *out, int max, char *why,
                         size_t whylen) {
    why[0] = 0;
    int line_no = 0, count = 0;
    for (size_t pos = 0; pos < len;) {
        const char *nl = memchr(buf + pos, '\n', len - pos);
        const size_t n = nl ? (size_t)(nl - (buf + pos)) : len - pos;
        char line[1024 + 16];
        line_no++;
        int bad = n >= 1024 || memchr(buf + pos, 0, n) != NULL;
        if (!bad) {
            memcpy(line, buf + pos, n);
            line[n] = 0;
        }
        if (bad) {
        } else if (line_no == 1) {
            int fmt = 0, used = 0;
            bad = sscanf(line, "mingpt-gemm-cache %d%n", &fmt, &used) != 1 || line[used] != 0 || fmt != CACHE_FORMAT;
        } else if (line_no == 2) {
            bad = strncmp(line, "fingerprint ", 12) != 0 || strcmp(line + 12, fingerprint) != 0;
        } else if (count < max) {
            bad = parse_class(line, &out[count]);
            count += !bad;
        }
        if (bad) {
            snprintf(why, whylen, "line %d", line_no);
            return -1;
        }
        pos += n + 1;
    }
    if (line_no < 2) {
        snprintf(why, whylen, "no header");
        return -1;
    }
    return count;
}

// Reads the cache at G.path into out (at most max); returns the count, or -1 when the file is
// absent (*why empty), unreadable or malformed (*why says which line).
static int load_cache(GemmClass *out, int max, char *why, size_t whylen) {
    why[0] = 0;
    const int fd = open(G.path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st;
    char *buf = NULL;
    int n = -1;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > CACHE_MAX_BYTES) {
        snprintf(why, whylen, "not a regular file of at most %d bytes", CACHE_MAX_BYTES);
    } else if (!(buf = malloc((size_t)st.st_size + 1)) || read(fd, buf, (size_t)st.st_size) != st.st_size) {
        snprintf(why, whylen, "read failed");
    } else {
        n = cpu_gemm_cache_parse(buf, (size_t)st.st_size, G.fingerprint, out, max, why, whylen);
    }
    free(buf);
    close(fd);
    return n;
}

static int same_class(const GemmClass *a, const GemmClass *b) {
    return a->bf16 == b->bf16 && a->ta == b->ta && a->tb == b->tb && a->beta0 == b->beta0 && a->m_log2 == b->m_log2 && a->n_log2 == b->n_log2 &&
           a->k_log2 == b->k_log2 && a->threads == b->threads;
}

static int mkdir_p(const char *dir) {
    char p[4096];
    snprintf(p, sizeof p, "%s", dir);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(p, 0755) && errno != EEXIST) return -1;
            *s = '/';
        }
    return mkdir(p, 0755) && errno != EEXIST ? -1 : 0;
}

// Merges what another process may have written since, then replaces the file atomically.
static void save_cache(void) {
    if (!G.path[0] || G.cache_failed) return;
    static GemmClass merged[MAX_CLASSES];
    char why[64];
    int n = load_cache(merged, MAX_CLASSES, why, sizeof why);
    if (n < 0) n = 0;
    for (int i = 0; i < G.n; i++) {
        int j = 0;
        while (j < n && !same_class(&merged[j], &G.classes[i])) j++;
        if (j < MAX_CLASSES) merged[j] = G.classes[i];
        if (j == n && n < MAX_CLASSES) n++;
    }
    char dir[4096], tmp[4200];
    snprintf(dir, sizeof dir, "%s", G.path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", G.path, (long)getpid());
    errno = 0;
    FILE *f = mkdir_p(dir) ? NULL : fopen(tmp, "w");
    int ok = f != NULL, failure = errno;
    if (f) {
        fprintf(f, "mingpt-gemm-cache %d\nfingerprint %s\n", CACHE_FORMAT, G.fingerprint);
        for (int i = 0; i < n; i++) {
            const GemmClass *c = &merged[i];
            fprintf(f, "%sclass %d %d %d %d %d %d %d %d %d %d %d", c->bf16 ? "bf16 " : "", c->ta, c->tb, c->beta0, c->m_log2, c->n_log2, c->k_log2,
                    c->threads, c->m, c->n, c->k, c->impl);
            // %.17g reads back as the same double, so a later process's choose() decides as this
            // one did (with %.1f two close timings could print alike and tie the other way)
            for (int k = 0; k < GEMM_N_IMPL; k++) fprintf(f, " %.17g", c->gflops[k]);
            fputc('\n', f);
        }
        errno = 0;
        ok = fflush(f) == 0 && !ferror(f);
        failure = errno;
        if (fclose(f) != 0 && ok) { ok = 0; failure = errno; }
        if (ok && rename(tmp, G.path) != 0) { ok = 0; failure = errno; }
        if (!ok) unlink(tmp);
    }
    if (!ok) {
        // Once a process (the calibration goes on, in memory): the status line is printed before
        // the first calibration, so this is said on stderr as it happens.
        G.cache_failed = 1;
        const char *reason = strerror(failure ? failure : EIO);
        note("cannot write the GEMM calibration cache %.1000s (%.200s): every run calibrates again.", G.path, reason);
        fprintf(stderr, "mingpt: note: cannot write the GEMM calibration cache '%s': %s; calibrating every run\n",
                G.path, reason);
    }
}

// ============================================================================
// Set-up: libraries, fingerprint, cache
// ============================================================================
static uint64_t fnv1a(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static void init_once(void) {
    const CpuFeatures *f = cpu_features();
    G.have_onednn = onednn_init() == 0;
    G.have_mkl = mkl_init() == 0;
    G.have_dnnl3 = dnnl3_init() == 0;
    for (int i = 0; i < GEMM_N_IMPL; i++) G.allowed[i] = available(i), G.allowed16[i] = available16(i);
    const char *force = getenv("MINGPT_GEMM");
    if (force && *force && strcmp(force, "auto") != 0) {
        const int blas = strcmp(force, "openblas") == 0, dnnl = strcmp(force, "onednn") == 0,
                  mkl = strcmp(force, "mkl") == 0, dnnl3 = strcmp(force, "onednn3") == 0;
        if (blas || (dnnl && G.have_onednn) || (mkl && G.have_mkl) || (dnnl3 && G.have_dnnl3)) {
            for (int i = 0; i < GEMM_N_IMPL; i++)
                G.allowed[i] = blas ? i < GEMM_ONEDNN_SGEMM : mkl ? i == GEMM_MKL : dnnl3 ? i == GEMM_ONEDNN3
                                                                : i == GEMM_ONEDNN_SGEMM || i == GEMM_ONEDNN_MATMUL;
            // bf16: MKL's or oneDNN 3's when forced and there, else oneDNN's (OpenBLAS has none)
            const int b16 = mkl && available16(GEMM_MKL) ? GEMM_MKL : dnnl3 ? GEMM_ONEDNN3 : GEMM_ONEDNN_MATMUL;
            for (int i = 0; i < GEMM_N_IMPL; i++) G.allowed16[i] = i == b16 && available16(i);
            note("MINGPT_GEMM=%s: fp32 GEMMs use %s only.", force,
                 blas ? "OpenBLAS" : mkl ? "MKL" : dnnl3 ? "oneDNN 3" : "oneDNN");
        } else if (mkl) {
            note("MINGPT_GEMM=mkl, but MKL is not available here (%.1300s): ignored.", mkl_status(), "");
        } else if (dnnl3) {
            note("MINGPT_GEMM=onednn3, but oneDNN 3 is not available here (%.1300s): ignored.", dnnl3_status(), "");
        } else {
            note("MINGPT_GEMM=%s is not openblas, onednn, mkl, onednn3 or auto%s: ignored.", force,
                 dnnl ? " available here (oneDNN did not start)" : "");
        }
    }
    const char *core = openblas_core();
    if (openblas_core_is_weaker(f, core)) {
        char msg[256];
        snprintf(msg, sizeof msg, "OpenBLAS runs its %s kernels (%s) on this %s CPU", core, openblas_core_isa(core),
                 cpu_isa_name(f));
        note("%s%s", msg, G.have_onednn ? "; oneDNN takes every shape class where it is faster." : ".");
    }
    const char *ct = getenv("OPENBLAS_CORETYPE");
    if (ct && *ct) note("OPENBLAS_CORETYPE=%s is set: OpenBLAS uses the %s kernels (respected).", ct, core);

    char flags[160], dnnl[32] = "none";
    cpu_features_describe(f, flags, sizeof flags);
    if (G.have_onednn) onednn_version(dnnl, sizeof dnnl);
    const char *cfg = openblas_get_config();
    snprintf(G.fingerprint, sizeof G.fingerprint, "cpu=%s; flags=%s; openblas=%s; core=%s; onednn=%s %s; mkl=%s; onednn3=%s; gemm=%d",
             f->brand[0] ? f->brand : "?", flags, cfg ? cfg : "?", core, dnnl, G.have_onednn ? onednn_isa() : "-",
             G.have_mkl ? mkl_version_full() : "none", G.have_dnnl3 ? dnnl3_version_full() : "none", CACHE_FORMAT);
    for (char *p = G.fingerprint; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';

    const char *dir = getenv("MINGPT_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char base[3072] = "";
    if (dir && *dir) snprintf(base, sizeof base, "%s", dir);
    else if (xdg && *xdg) snprintf(base, sizeof base, "%s/mingpt", xdg);
    else if (home && *home) snprintf(base, sizeof base, "%s/.cache/mingpt", home);
    if (base[0]) {
        snprintf(G.path, sizeof G.path, "%s/gemm-%016llx.txt", base, (unsigned long long)fnv1a(G.fingerprint));
        char why[64];
        const int n = load_cache(G.classes, MAX_CLASSES, why, sizeof why);
        if (n >= 0) G.n = n;
        else if (why[0]) note("ignoring the malformed GEMM calibration cache %.1000s (%.200s); calibrating again.", G.path, why);
    } else {
        note("%s%s", "no cache directory (HOME unset): every run calibrates its GEMMs again.", "");
    }
}

// ============================================================================
// Calibration
// ============================================================================
// The operands a calibration times its candidates on: fp32, or their bf16 copies for a bf16 class.
typedef struct {
    int bf16, ta, tb, M, N, K, lda, ldb;
    float beta;
    const float *A, *B;
    const uint16_t *A16, *B16;
    float *C;
} CalibOperands;

// One product of candidate impl on the calibration operands. Non-zero when oneDNN 3 refused it
// (the optional library: it is then no candidate of the class); the others stop the process.
static int calib_run(const CalibOperands *o, int impl) {
    if (impl == GEMM_ONEDNN3)
        return dnnl3_matmul(o->bf16 ? GEMM_BF16 : GEMM_F32, o->ta, o->tb, o->M, o->N, o->K,
                            o->bf16 ? (const void *)o->A16 : (const void *)o->A, o->lda,
                            o->bf16 ? (const void *)o->B16 : (const void *)o->B, o->ldb, o->beta, o->C, o->N);
    if (o->bf16) run_bf16(impl, o->ta, o->tb, o->M, o->N, o->K, o->A16, o->lda, o->B16, o->ldb, o->beta, o->C, o->N);
    else run_impl(impl, o->ta, o->tb, o->M, o->N, o->K, o->A, o->lda, o->B, o->ldb, o->beta, o->C, o->N);
    return 0;
}

// Times every available candidate of the class (fp32: the fp32 libraries; bf16: oneDNN's matmul,
// MKL's bf16 GEMM and oneDNN 3's matmul, when there) on operands of (a scaled-down copy of) this shape, interleaved
// round by round; keeps each one's best time.
static void calibrate(GemmClass *c, int ta, int tb, int M, int N, int K) {
    const float beta = c->beta0 ? 0.0f : 1.0f;   // as the products of the class (OpenBLAS clears C in a pass of its own)
    while (2.0 * M * N * K > CALIB_MAX_FLOP) {   // halve the largest dimension
        if (M >= N && M >= K) M = (M + 1) / 2;
        else if (N >= K) N = (N + 1) / 2;
        else K = (K + 1) / 2;
    }
    const size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
    float *A = malloc(na * sizeof(float)), *B = malloc(nb * sizeof(float)), *C = calloc(nc, sizeof(float));
    uint16_t *A16 = c->bf16 ? malloc(na * sizeof(uint16_t)) : NULL, *B16 = c->bf16 ? malloc(nb * sizeof(uint16_t)) : NULL;
    if (!A || !B || !C || (c->bf16 && (!A16 || !B16)))
        fatal_error("out of memory calibrating a %dx%dx%d%s GEMM", M, N, K, c->bf16 ? " bf16" : "");
    for (size_t i = 0; i < na; i++) A[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
    for (size_t i = 0; i < nb; i++) B[i] = (float)((i * 40503u) % 1000) * 1e-3f - 0.5f;
    if (c->bf16) {
        for (size_t i = 0; i < na; i++) A16[i] = bf16_from_float(A[i]);
        for (size_t i = 0; i < nb; i++) B16[i] = bf16_from_float(B[i]);
    }
    const CalibOperands o = { .bf16 = c->bf16, .ta = ta, .tb = tb, .M = M, .N = N, .K = K, .lda = ta ? M : K,
                              .ldb = tb ? K : N, .beta = beta, .A = A, .B = B, .A16 = A16, .B16 = B16, .C = C };
    int cand[GEMM_N_IMPL], nc_ = 0;
    for (int i = 0; i < GEMM_N_IMPL; i++)
        if (c->bf16 ? available16(i) : available(i) && (i != GEMM_OPENBLAS_SPLIT || c->threads > 1)) cand[nc_++] = i;
    double best[GEMM_N_IMPL], warm = 1e30;
    for (int j = 0; j < nc_; j++) {   // warm-up: JIT, primitive creation, first touch
        const double t0 = now_s();
        if (calib_run(&o, cand[j])) {   // refused: not a candidate here
            memmove(&cand[j], &cand[j + 1], sizeof *cand * (size_t)(nc_ - j - 1));
            nc_--, j--;
            continue;
        }
        best[cand[j]] = 1e30;
        warm = fmin(warm, now_s() - t0);
    }
    int rounds = (int)(CALIB_BUDGET_S / (nc_ * fmax(warm, 1e-6)));
    rounds = rounds < 3 ? 3 : rounds > 20 ? 20 : rounds;
    for (int r = 0; r < rounds; r++)
        for (int j = 0; j < nc_; j++) {
            const double t0 = now_s();
            calib_run(&o, cand[j]);
            best[cand[j]] = fmin(best[cand[j]], now_s() - t0);
        }
    c->m = M; c->n = N; c->k = K;
    for (int i = 0; i < GEMM_N_IMPL; i++) c->gflops[i] = 0;
    for (int j = 0; j < nc_; j++) c->gflops[cand[j]] = 2.0 * M * N * K / fmax(best[cand[j]], 1e-9) / 1e9;
    free(A); free(B); free(C); free(A16); free(B16);
}

// The implementation for a class: the fastest measured one among those allowed (OpenBLAS, or
// oneDNN's matmul for bf16, when none is).
static int choose(const GemmClass *c) {
    const int *allowed = c->bf16 ? G.allowed16 : G.allowed, fallback = c->bf16 ? GEMM_ONEDNN_MATMUL : GEMM_OPENBLAS;
    int impl = fallback;
    for (int i = 0; i < GEMM_N_IMPL; i++)
        if (allowed[i] && c->gflops[i] > 0 && (!allowed[impl] || c->gflops[i] > c->gflops[impl])) impl = i;
    return allowed[impl] ? impl : fallback;
}

// Processes that share the cache (the ranks of a data-parallel job on one machine, above all) must
// agree on every class: ranks that measured a class each on their own could pick different
// libraries, and their products would differ in the last bits (a run would then depend on which
// rank measured what). So a class missing here is looked up again in the file, and measured only
// when still missing there, under an exclusive flock on <cache>.lock held until it is saved: the
// first process measures it, the others wait and take its result. -1 when there is no cache file
// to share (no directory, or it cannot be created): each process then measures alone.
static int lock_cache(void) {
    if (!G.path[0] || G.cache_failed) return -1;
    char dir[4096], lock[4200];
    snprintf(dir, sizeof dir, "%s", G.path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    snprintf(lock, sizeof lock, "%s.lock", G.path);
    const int fd = mkdir_p(dir) ? -1 : open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    while (flock(fd, LOCK_EX) != 0)
        if (errno != EINTR) { close(fd); return -1; }
    return fd;
}

// Under lock_cache: the class key as another process saved it since start-up, into *out (1), or 0.
static int class_from_file(const GemmClass *key, GemmClass *out) {
    static GemmClass file[MAX_CLASSES];
    char why[64];
    const int n = load_cache(file, MAX_CLASSES, why, sizeof why);
    for (int j = 0; j < n; j++)
        if (same_class(&file[j], key)) { *out = file[j]; return 1; }
    return 0;
}

static int impl_for(int bf16, int ta, int tb, int beta0, int M, int N, int K, int threads) {
    const GemmClass key = { .bf16 = bf16, .ta = ta, .tb = tb, .beta0 = beta0, .m_log2 = ceil_log2(M), .n_log2 = ceil_log2(N),
                            .k_log2 = ceil_log2(K), .threads = threads };
    pthread_mutex_lock(&G.lock);
    int i = 0;
    while (i < G.n && !same_class(&G.classes[i], &key)) i++;
    if (i == G.n) {
        if (G.n == MAX_CLASSES) G.n = 0;   // hundreds of classes: forget them rather than grow
        i = G.n;
        G.classes[i] = key;
        const int lock = lock_cache();
        if (lock < 0 || !class_from_file(&key, &G.classes[i])) {
            calibrate(&G.classes[i], ta, tb, M, N, K);
            G.calibrations++;
            G.classes[i].impl = choose(&G.classes[i]);
            G.n++;
            save_cache();
        } else {
            G.n++;   // measured by another process since this one read the file
        }
        if (lock >= 0) close(lock);   // (releases the flock)
    }
    const int impl = choose(&G.classes[i]);
    pthread_mutex_unlock(&G.lock);
    return impl;
}

// ============================================================================
// The API
// ============================================================================
// cpu_gemm_totals: nanoseconds and FLOPs of the timed products.
static _Atomic uint64_t g_gemm_ns, g_gemm_flop;
static void count_product(uint64_t t0, int M, int N, int K, long batch) {
    atomic_fetch_add(&g_gemm_ns, now_ns() - t0);
    atomic_fetch_add(&g_gemm_flop, 2u * (uint64_t)M * (uint64_t)N * (uint64_t)K * (uint64_t)batch);
}
void cpu_gemm_totals(double *seconds, double *flop) {
    if (seconds) *seconds = 1e-9 * (double)atomic_load(&g_gemm_ns);
    if (flop) *flop = (double)atomic_load(&g_gemm_flop);
}

void cpu_sgemm(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb, float beta,
               float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0 || omp_in_parallel()) {   // degenerate, or already on one thread of a parallel region
        openblas1(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    pthread_once(&g_once, init_once);
    const int impl = impl_for(0, ta, tb, beta == 0.0f, M, N, K, omp_get_max_threads());   // may calibrate: not timed
    const uint64_t t0 = now_ns();
    run_impl(impl, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
    count_product(t0, M, N, K, 1);
}

int cpu_sgemm_with(int impl, int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B,
                   int ldb, float beta, float *C, int ldc) {
    pthread_once(&g_once, init_once);
    if (!available(impl)) return 1;
    if (M > 0 && N > 0) run_impl(impl, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
    return 0;
}

static int g_bf16_fast = -1;
static pthread_once_t g_bf16_once = PTHREAD_ONCE_INIT;

// bf16 hardware, and oneDNN computes a small bf16 product exactly (every product of bf16 values
// is exact in fp32 and the sums here are small integers).
static void probe_bf16(void) {
    const CpuFeatures *f = cpu_features();
    g_bf16_fast = 0;
    if (!(f->amx_bf16 || f->avx512_bf16) || onednn_init()) return;
    enum { P = 32 };
    uint16_t a[P * P], b[P * P];
    float c[P * P];
    for (int i = 0; i < P * P; i++) {
        a[i] = bf16_from_float((float)(i % 5 - 2));
        b[i] = bf16_from_float((float)(i % 3 - 1));
    }
    if (onednn_matmul(GEMM_BF16, 0, 0, P, P, P, a, P, b, P, 0.0f, c, P)) return;
    for (int i = 0; i < P; i++)
        for (int j = 0; j < P; j++) {
            float s = 0;
            for (int k = 0; k < P; k++) s += (float)((i * P + k) % 5 - 2) * (float)((k * P + j) % 3 - 1);
            if (c[i * P + j] != s) return;
        }
    g_bf16_fast = 1;
}

int cpu_gemm_bf16_fast(void) {
    pthread_once(&g_bf16_once, probe_bf16);
    return g_bf16_fast;
}

void cpu_gemm_bf16(int ta, int tb, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B, int ldb,
                   float beta, float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    if (!cpu_gemm_bf16_fast()) fatal_error("bf16 GEMM asked for on a CPU without AVX512-BF16 or AMX");
    if (K <= 0) {   // C = beta C
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] *= beta;
        return;
    }
    if (omp_in_parallel()) {   // one thread of a parallel region: oneDNN, untimed, no calibration
        run_bf16(GEMM_ONEDNN_MATMUL, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    pthread_once(&g_once, init_once);
    if (!available16(GEMM_MKL) && !available16(GEMM_ONEDNN3)) {   // oneDNN's is the only bf16 GEMM: nothing to measure
        const uint64_t t0 = now_ns();
        run_bf16(GEMM_ONEDNN_MATMUL, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
        count_product(t0, M, N, K, 1);
        return;
    }
    const int impl = impl_for(1, ta, tb, beta == 0.0f, M, N, K, omp_get_max_threads());   // may calibrate: not timed
    const uint64_t t0 = now_ns();
    run_bf16(impl, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
    count_product(t0, M, N, K, 1);
}

int cpu_gemm_bf16_with(int impl, int ta, int tb, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B,
                       int ldb, float beta, float *C, int ldc) {
    pthread_once(&g_once, init_once);
    if (!available16(impl) || (impl == GEMM_ONEDNN_MATMUL && !cpu_gemm_bf16_fast())) return 1;
    if (impl == GEMM_ONEDNN3) return M > 0 && N > 0 ? dnnl3_matmul(GEMM_BF16, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc) : 0;
    if (M > 0 && N > 0) run_bf16(impl, ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
    return 0;
}

void cpu_gemm_bf16_batched(int batch, int ta, int tb, int M, int N, int K, const uint16_t *A, int lda, long sa,
                           const uint16_t *B, int ldb, long sb, float beta, float *C, int ldc, long sc) {
    if (batch <= 0 || M <= 0 || N <= 0 || K <= 0) return;
    if (!cpu_gemm_bf16_fast()) fatal_error("bf16 GEMM asked for on a CPU without AVX512-BF16 or AMX");
    const uint64_t t0 = now_ns();
    const int s = onednn_matmul_batched(GEMM_BF16, batch, ta, tb, M, N, K, A, lda, sa, B, ldb, sb, beta, C, ldc, sc);
    if (!omp_in_parallel()) count_product(t0, M, N, K, batch);
    if (s) fatal_error("oneDNN bf16 batched matmul failed (status %d) on %d %dx%dx%d products", s, batch, M, N, K);
}

void cpu_gemm(GemmType t, int ta, int tb, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
              float beta, float *C, int ldc) {
    if (t == GEMM_BF16) cpu_gemm_bf16(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
    else cpu_sgemm(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
}

void cpu_gemm_describe(char *buf, size_t len) {
    pthread_once(&g_once, init_once);
    const char *cfg = openblas_get_config(), *core = openblas_core();
    char ver[64] = "OpenBLAS", dnnl[32] = "", mkl[96] = "", missing[64] = "";
    if (cfg && sscanf(cfg, "OpenBLAS %31s", ver + 9) == 1) ver[8] = ' ';
    if (G.have_onednn) onednn_version(dnnl, sizeof dnnl);
    snprintf(mkl, sizeof mkl, "%s%s%s%s", G.have_mkl ? " + MKL " : "", mkl_version_short(),
             G.have_dnnl3 ? " + oneDNN " : "", dnnl3_version());
    snprintf(missing, sizeof missing, "%s%s", G.have_mkl ? "" : "; MKL not found", G.have_dnnl3 ? "" : "; oneDNN 3 not found");
    const int more16 = available16(GEMM_MKL) || available16(GEMM_ONEDNN3);
    if (G.have_onednn)
        snprintf(buf, len, "%s (%s kernels: %s) + oneDNN %s (%s)%s, fp32 per shape class by measurement%s%s", ver, core,
                 openblas_core_isa(core), dnnl, onednn_isa(), mkl,
                 !cpu_gemm_bf16_fast() ? "" : more16 ? "; bf16 per shape class by measurement" : "; bf16 on oneDNN",
                 missing);
    else
        snprintf(buf, len, "%s (%s kernels: %s)%s; oneDNN unavailable%s", ver, core, openblas_core_isa(core), mkl, missing);
}

const char *cpu_gemm_notes(void) {
    pthread_once(&g_once, init_once);
    return G.notes;
}

int cpu_gemm_classes(GemmClass *out, int max) {
    pthread_once(&g_once, init_once);
    pthread_mutex_lock(&G.lock);
    const int n = G.n;
    for (int i = 0; i < n && i < max; i++) {
        out[i] = G.classes[i];
        out[i].impl = choose(&G.classes[i]);
    }
    pthread_mutex_unlock(&G.lock);
    return n;
}

const char *cpu_gemm_cache_path(void) {
    pthread_once(&g_once, init_once);
    return G.path;
}

int cpu_gemm_calibrations(void) {
    pthread_mutex_lock(&G.lock);
    const int n = G.calibrations;
    pthread_mutex_unlock(&G.lock);
    return n;
}

const char *cpu_gemm_fingerprint(void) {
    pthread_once(&g_once, init_once);
    return G.fingerprint;
}

const char *cpu_gemm_mkl_status(void) { return mkl_status(); }

const char *cpu_gemm_dnnl3_status(void) { return dnnl3_status(); }

void cpu_gemm_dnnl_versions(char *v2, char *v3, size_t len) {
    v2[0] = 0;
    if (onednn_init() == 0) onednn_version(v2, len);
    snprintf(v3, len, "%s", dnnl3_version());
}

