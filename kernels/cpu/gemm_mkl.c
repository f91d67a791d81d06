// kernels/cpu/gemm_mkl.c — oneMKL through dlopen (see gemm_mkl.h). Only MKL's C entry points
// with values are used (MKL_Set_Threading_Layer, ...): the lower-case mkl_set_* names of
// libmkl_rt are the Fortran ones and take pointers.
#include "kernels/cpu/gemm_mkl.h"

#include <dlfcn.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/lib_path.h"

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };   // cblas.h's values
enum { MKL_THREADING_GNU = 3, MKL_INTERFACE_LP64 = 0, MKL_CBWR_AUTO = 2, MKL_CBWR_SUCCESS = 0 };

typedef void (*SgemmFn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *,
                        int);
typedef void (*Bf16Fn)(int, int, int, int, int, int, float, const uint16_t *, int, const uint16_t *, int, float,
                       float *, int);

static struct {
    int status;                  // 0 loaded
    SgemmFn sgemm;
    Bf16Fn bf16;
    void (*set_num_threads)(int);
    int threads;                 // the count last given to MKL
    char path[4400];
    char why[1200];
    char version[256], version_short[32];
} g_mkl = { .status = -1 };
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const NAMES[] = { "libmkl_rt.so.3", "libmkl_rt.so.2" };

static int is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

// The library's handle, its path in g_mkl.path; NULL with g_mkl.why.
static void *find_library(void) {
    const char *over = getenv("MINGPT_MKL_LIB");
    if (over && *over) {
        snprintf(g_mkl.path, sizeof g_mkl.path, "%s", over);
        if (!is_file(over)) {
            snprintf(g_mkl.why, sizeof g_mkl.why, "no MKL at MINGPT_MKL_LIB=%.1000s (no such file)", over);
            return NULL;
        }
        void *h = dlopen(over, RTLD_NOW | RTLD_LOCAL);
        if (!h) snprintf(g_mkl.why, sizeof g_mkl.why, "cannot load MINGPT_MKL_LIB=%.400s: %.600s", over, dlerror());
        return h;
    }
    char exe[4096];
    if (lib_path_exe_dir(exe, sizeof exe) == 0) {
        const char *dirs[] = { "build/mkl/lib", "../mkl/lib", "../../mkl/lib", LIB_PATH_INSTALLED_LIBS "/mkl" };
        for (size_t d = 0; d < sizeof dirs / sizeof *dirs; d++)
            for (size_t n = 0; n < sizeof NAMES / sizeof *NAMES; n++) {
                snprintf(g_mkl.path, sizeof g_mkl.path, "%s/%s/%s", exe, dirs[d], NAMES[n]);
                if (!is_file(g_mkl.path)) continue;
                void *h = dlopen(g_mkl.path, RTLD_NOW | RTLD_LOCAL);
                if (!h) snprintf(g_mkl.why, sizeof g_mkl.why, "cannot load %.400s: %.600s", g_mkl.path, dlerror());
                return h;
            }
    }
    for (size_t n = 0; n < sizeof NAMES / sizeof *NAMES; n++) {   // the loader's path
        void *h = dlopen(NAMES[n], RTLD_NOW | RTLD_LOCAL);
        if (h) {
            Dl_info info;
            void *sym = dlsym(h, "cblas_sgemm");
            snprintf(g_mkl.path, sizeof g_mkl.path, "%s", sym && dladdr(sym, &info) && info.dli_fname ? info.dli_fname : NAMES[n]);
            return h;
        }
    }
    snprintf(g_mkl.why, sizeof g_mkl.why, "not found (build/mkl/lib next to mingpt, which `make deps` fills, nor %s on the "
             "loader's path; MINGPT_MKL_LIB names one)", NAMES[0]);
    return NULL;
}

static void init_once(void) {
    g_mkl.status = 1;
    // MKL's GNU threading layer needs libgomp in the process (mingpt's own OpenMP runtime).
    if (!dlsym(RTLD_DEFAULT, "GOMP_parallel")) {
        snprintf(g_mkl.why, sizeof g_mkl.why, "not used: the OpenMP runtime is not libgomp (MKL's GNU threading layer needs it)");
        return;
    }
    void *h = find_library();
    if (!h) return;
    int (*set_layer)(int) = (int (*)(int))dlsym(h, "MKL_Set_Threading_Layer");
    int (*set_iface)(int) = (int (*)(int))dlsym(h, "MKL_Set_Interface_Layer");
    int (*cbwr)(int) = (int (*)(int))dlsym(h, "MKL_CBWR_Set");
    void (*dynamic)(int) = (void (*)(int))dlsym(h, "MKL_Set_Dynamic");
    void (*version)(char *, int) = (void (*)(char *, int))dlsym(h, "MKL_Get_Version_String");
    g_mkl.set_num_threads = (void (*)(int))dlsym(h, "MKL_Set_Num_Threads");
    g_mkl.sgemm = (SgemmFn)dlsym(h, "cblas_sgemm");
    g_mkl.bf16 = (Bf16Fn)dlsym(h, "cblas_gemm_bf16bf16f32");
    if (!set_layer || !set_iface || !cbwr || !dynamic || !version || !g_mkl.set_num_threads || !g_mkl.sgemm) {
        snprintf(g_mkl.why, sizeof g_mkl.why, "%.600s is not MKL's runtime library (a symbol is missing)", g_mkl.path);
        dlclose(h);
        return;
    }
    // Before any other call: the layers, then reproducibility.
    if (set_iface(MKL_INTERFACE_LP64) < 0 || set_layer(MKL_THREADING_GNU) != MKL_THREADING_GNU) {
        snprintf(g_mkl.why, sizeof g_mkl.why, "%.600s refused the GNU OpenMP threading layer", g_mkl.path);
        return;   // (not closed: MKL may hold state)
    }
    if (cbwr(MKL_CBWR_AUTO) != MKL_CBWR_SUCCESS) {
        snprintf(g_mkl.why, sizeof g_mkl.why, "%.600s refused its reproducible mode (MKL_CBWR_AUTO)", g_mkl.path);
        return;
    }
    dynamic(0);
    g_mkl.threads = omp_get_max_threads();
    g_mkl.set_num_threads(g_mkl.threads);
    version(g_mkl.version, sizeof g_mkl.version);
    g_mkl.version[sizeof g_mkl.version - 1] = 0;
    const char *v = strstr(g_mkl.version, "Version ");
    snprintf(g_mkl.version_short, sizeof g_mkl.version_short, "%s", v ? v + 8 : "?");
    g_mkl.version_short[strcspn(g_mkl.version_short, "- ")] = 0;
    g_mkl.status = 0;
}

int mkl_init(void) {
    pthread_once(&g_once, init_once);
    return g_mkl.status;
}

const char *mkl_status(void) {
    static char buf[sizeof g_mkl.path + 64];
    if (mkl_init()) return g_mkl.why;
    snprintf(buf, sizeof buf, "%s (%s)", g_mkl.version_short, g_mkl.path);
    return buf;
}

const char *mkl_version_full(void) { return mkl_init() ? "" : g_mkl.version; }
const char *mkl_version_short(void) { return mkl_init() ? "" : g_mkl.version_short; }
int mkl_has_bf16(void) { return mkl_init() == 0 && g_mkl.bf16 != NULL; }

// MKL's thread count follows OpenMP's (omp_set_num_threads after start-up included).
static void sync_threads(void) {
    const int t = omp_get_max_threads();
    pthread_mutex_lock(&g_lock);
    if (t != g_mkl.threads) {
        g_mkl.set_num_threads(t);
        g_mkl.threads = t;
    }
    pthread_mutex_unlock(&g_lock);
}

int mkl_sgemm(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb, float beta,
              float *C, int ldc) {
    if (mkl_init()) return 1;
    sync_threads();
    g_mkl.sgemm(CBLAS_ROW_MAJOR, ta ? CBLAS_TRANS : CBLAS_NO_TRANS, tb ? CBLAS_TRANS : CBLAS_NO_TRANS, M, N, K, 1.0f, A,
            lda, B, ldb, beta, C, ldc);
    return 0;
}

int mkl_gemm_bf16(int ta, int tb, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B, int ldb,
                  float beta, float *C, int ldc) {
    if (mkl_init() || !g_mkl.bf16) return 1;
    sync_threads();
    g_mkl.bf16(CBLAS_ROW_MAJOR, ta ? CBLAS_TRANS : CBLAS_NO_TRANS, tb ? CBLAS_TRANS : CBLAS_NO_TRANS, M, N, K, 1.0f, A,
           lda, B, ldb, beta, C, ldc);
    return 0;
}
