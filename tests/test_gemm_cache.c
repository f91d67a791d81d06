// tests/test_gemm_cache.c — the GEMM calibration cache file (kernels/cpu/gemm.h): created on
// first use, reused without calibrating again, its numbers are what decides, a malformed file is
// ignored and rewritten, an unwritable place is said and still computes, MINGPT_GEMM narrows the
// choice (mkl and onednn3 included: said and ignored without the library), a run without MKL or
// oneDNN 3 calibrates as before on its own cache file, a cache naming oneDNN 3 read where it is
// absent falls back cleanly, XDG_CACHE_HOME is honoured.
//
// The GEMM module reads its environment and cache once per process, so every case runs in a
// child process (fork before this process touches OpenMP or oneDNN) that reports one line.
#include "tests/test_util.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/gemm.h"

typedef struct {
    char impl[32], impl16[32];   // impl16 (TEST_BF16=1): the bf16 class's; "direct" without a class (oneDNN
                                 // alone: nothing measured); "nohw" without bf16 hardware; else "none"
    int calibrations, correct;
    char notes[2048], path[4096];
} Report;

// In a child: env (NAME=VALUE pairs, NULL-terminated; VALUE "" unsets), then one 96 x 80 x 72
// product checked against a naive loop; the report comes back through a pipe (*rfd, read by
// collect_child).
static pid_t spawn_child(const char *const *env, int *rfd) {
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        for (int i = 0; env && env[i]; i += 2) {
            if (env[i + 1][0]) setenv(env[i], env[i + 1], 1);
            else unsetenv(env[i]);
        }
        enum { M = 96, N = 80, K = 72 };
        static float A[M * K], B[N * K], C[M * N];
        for (int i = 0; i < M * K; i++) A[i] = (float)(i % 13) - 6.0f;
        for (int i = 0; i < N * K; i++) B[i] = (float)(i % 7) - 3.0f;
        cpu_sgemm(0, 1, M, N, K, A, K, B, K, 0.0f, C, N);
        int correct = 1;
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double s = 0;
                for (int k = 0; k < K; k++) s += (double)A[i * K + k] * B[j * K + k];
                correct &= C[i * N + j] == (float)s;   // small integers: exact in any order
            }
        GemmClass c[64];
        const int n = cpu_gemm_classes(c, 64);
        const char *impl = "none";
        for (int i = 0; i < n && i < 64; i++)
            if (!c[i].bf16 && c[i].ta == 0 && c[i].tb == 1 && c[i].m_log2 == 7 && c[i].n_log2 == 7 && c[i].k_log2 == 7)
                impl = cpu_gemm_impl_name(c[i].impl);   // the fp32 class (a cached bf16 one has the same key)
        const char *impl16 = "none";
        const char *want16 = getenv("TEST_BF16");
        if (want16 && *want16 && !cpu_gemm_bf16_fast()) impl16 = "nohw";
        if (want16 && *want16 && cpu_gemm_bf16_fast()) {   // the same product in bf16 (small integers: exact)
            impl16 = "direct";
            static uint16_t a[M * K], b[N * K];
            for (int i = 0; i < M * K; i++) a[i] = bf16_from_float(A[i]);
            for (int i = 0; i < N * K; i++) b[i] = bf16_from_float(B[i]);
            static float C16[M * N];
            cpu_gemm_bf16(0, 1, M, N, K, a, K, b, K, 0.0f, C16, N);
            for (int i = 0; i < M * N; i++) correct &= C16[i] == C[i];
            const int n16 = cpu_gemm_classes(c, 64);
            for (int i = 0; i < n16 && i < 64; i++)
                if (c[i].bf16 && c[i].ta == 0 && c[i].tb == 1 && c[i].m_log2 == 7 && c[i].n_log2 == 7 && c[i].k_log2 == 7)
                    impl16 = cpu_gemm_impl_name(c[i].impl);
        }
        dprintf(fd[1], "%s\n%s\n%d\n%d\n%s\n%s\n", impl, impl16, cpu_gemm_calibrations(), correct, cpu_gemm_notes(),
                cpu_gemm_cache_path());
        _exit(0);
    }
    close(fd[1]);
    *rfd = fd[0];
    return pid;
}

// The report of the child pid (spawn_child), once it has exited.
static Report collect_child(pid_t pid, int rfd) {
    int fd[1] = { rfd };
    static char buf[16384];
    size_t len = 0;
    ssize_t k;
    while ((k = read(fd[0], buf + len, sizeof buf - 1 - len)) > 0) len += (size_t)k;
    buf[len] = 0;
    close(fd[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    Report r = {0};
    char *save, *line = strtok_r(buf, "\n", &save);
    assert_non_null(line); snprintf(r.impl, sizeof r.impl, "%s", line);
    line = strtok_r(NULL, "\n", &save); assert_non_null(line); snprintf(r.impl16, sizeof r.impl16, "%s", line);
    line = strtok_r(NULL, "\n", &save); assert_non_null(line); r.calibrations = atoi(line);
    line = strtok_r(NULL, "\n", &save); assert_non_null(line); r.correct = atoi(line);
    line = strtok_r(NULL, "\n", &save); assert_non_null(line);
    // notes may be empty: then this line is the path
    if (line[0] == '/') { snprintf(r.path, sizeof r.path, "%s", line); }
    else {
        snprintf(r.notes, sizeof r.notes, "%s", line);
        line = strtok_r(NULL, "\n", &save);
        if (line) snprintf(r.path, sizeof r.path, "%s", line);
    }
    return r;
}

static Report run_child(const char *const *env) {
    int fd;
    const pid_t pid = spawn_child(env, &fd);
    return collect_child(pid, fd);
}

static char g_dir[256];
#define NO_DNNL3 "/no/such/libdnnl.so.3"   // MINGPT_DNNL3_LIB for a run without oneDNN 3

static int setup(void **state) {
    return test_tmpdir(g_dir, sizeof g_dir, "gemm_cache");
}
static int teardown(void **state) {
    return test_rmtree(g_dir);
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[1 << 16];
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

static void test_created_then_reused(void **state) {
    const char *env[] = { "MINGPT_CACHE_DIR", g_dir, "MINGPT_GEMM", "", NULL };
    const Report a = run_child(env);
    assert_true(a.correct);
    assert_int_equal(a.calibrations, 1);
    assert_non_null(strstr(a.path, g_dir));
    const char *text = slurp(a.path);
    assert_non_null(text);
    assert_true(strncmp(text, "mingpt-gemm-cache ", 18) == 0);
    assert_non_null(strstr(text, "\nclass 0 1 1 7 7 7 "));   // NT, beta = 0, 128^3
    const Report b = run_child(env);   // the second process finds it and times nothing
    assert_true(b.correct);
    assert_int_equal(b.calibrations, 0);
    assert_string_equal(b.impl, a.impl);
}

// The cache's numbers decide: make OpenBLAS (threaded) the fastest on paper and it is chosen.
// Processes started together on an empty cache (the ranks of a job) agree: one of them measures
// the class, the others wait for it and take its choice (a flock on the cache), so their products
// are the same bits. Each measuring on its own would count one calibration per process.
static void test_concurrent_processes_agree(void **state) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/together", g_dir);
    const char *env[] = { "MINGPT_CACHE_DIR", dir, "MINGPT_GEMM", "", NULL };
    enum { P = 4 };
    pid_t pid[P];
    int fd[P];
    for (int p = 0; p < P; p++) pid[p] = spawn_child(env, &fd[p]);
    int calibrations = 0;
    Report r[P];
    for (int p = 0; p < P; p++) {
        r[p] = collect_child(pid[p], fd[p]);
        assert_true(r[p].correct);
        calibrations += r[p].calibrations;
        assert_string_equal(r[p].impl, r[0].impl);
    }
    assert_int_equal(calibrations, 1);
}

static void test_cache_numbers_decide(void **state) {
    const char *env[] = { "MINGPT_CACHE_DIR", g_dir, "MINGPT_GEMM", "", NULL };
    const Report a = run_child(env);   // exists from the previous test or is made now
    char *text = slurp(a.path);
    assert_non_null(text);
    char *cls = strstr(text, "\nclass 0 1 1 7 7 7 ");   // beta = 0 in the child's product
    assert_non_null(cls);
    int ta, tb, b0, ml, nl, kl, th, m, n, k, impl;
    double g[6];
    assert_int_equal(sscanf(cls + 1, "class %d %d %d %d %d %d %d %d %d %d %d %lf %lf %lf %lf %lf %lf", &ta, &tb, &b0, &ml,
                            &nl, &kl, &th, &m, &n, &k, &impl, &g[0], &g[1], &g[2], &g[3], &g[4], &g[5]), 17);
    char *end = strchr(cls + 1, '\n');
    char rest[1 << 15];
    snprintf(rest, sizeof rest, "%s", end ? end : "");
    sprintf(cls + 1, "class %d %d %d %d %d %d %d %d %d %d 0 99999.0 %.1f %.1f %.1f %.1f %.1f%s", ta, tb, b0, ml, nl, kl, th,
            m, n, k, g[1], g[2], g[3], g[4], g[5], rest);
    FILE *f = fopen(a.path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    const Report b = run_child(env);
    assert_int_equal(b.calibrations, 0);
    assert_string_equal(b.impl, "openblas");
    assert_true(b.correct);
}

static void test_malformed_cache_is_ignored_and_rewritten(void **state) {
    const char *env[] = { "MINGPT_CACHE_DIR", g_dir, "MINGPT_GEMM", "", NULL };
    const Report a = run_child(env);
    FILE *f = fopen(a.path, "w");
    assert_non_null(f);
    fputs("mingpt-gemm-cache 5\nfingerprint somewhere else\nclass 1 2 3\n", f);
    fclose(f);
    const Report b = run_child(env);
    assert_true(b.correct);
    assert_int_equal(b.calibrations, 1);
    assert_non_null(strstr(b.notes, "ignoring the malformed GEMM calibration cache"));
    assert_non_null(strstr(b.notes, "(line 2)"));
    const Report c = run_child(env);   // rewritten: valid again
    assert_int_equal(c.calibrations, 0);
    // no note about the cache any more (notes about the machine, e.g. OpenBLAS running weaker
    // kernels than the CPU has under OPENBLAS_CORETYPE, may remain)
    assert_null(strstr(c.notes, "cache"));
    assert_string_equal(c.notes, a.notes);
}

static void test_unwritable_cache_dir(void **state) {
    char file[512], dir[600];
    snprintf(file, sizeof file, "%s/a-file", g_dir);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    snprintf(dir, sizeof dir, "%s/sub", file);   // under a regular file: cannot exist
    const char *env[] = { "MINGPT_CACHE_DIR", dir, "MINGPT_GEMM", "", NULL };
    const Report r = run_child(env);
    assert_true(r.correct);
    assert_int_equal(r.calibrations, 1);
    assert_non_null(strstr(r.notes, "cannot write the GEMM calibration cache"));
}

static void test_forced_library(void **state) {
    const char *blas[] = { "MINGPT_CACHE_DIR", g_dir, "MINGPT_GEMM", "openblas", NULL };
    const Report a = run_child(blas);
    assert_true(a.correct);
    assert_true(strncmp(a.impl, "openblas", 8) == 0);
    assert_non_null(strstr(a.notes, "MINGPT_GEMM=openblas"));
    const char *dnnl[] = { "MINGPT_CACHE_DIR", g_dir, "MINGPT_GEMM", "onednn", NULL };
    const Report b = run_child(dnnl);
    assert_true(b.correct);
    assert_true(strncmp(b.impl, "onednn", 6) == 0);
    const char *bogus[] = { "MINGPT_CACHE_DIR", g_dir, "MINGPT_GEMM", "blis", NULL };
    const Report c = run_child(bogus);
    assert_true(c.correct);
    assert_non_null(strstr(c.notes, "MINGPT_GEMM=blis is not openblas, onednn, mkl, onednn3 or auto"));
    // MKL: used alone where it is (make deps installs it), said and ignored where it is not
    // (bf16 products too: on MKL for mkl, on oneDNN's matmul for the others, where the CPU has bf16)
    // (without oneDNN 3, another bf16 candidate: MINGPT_DNNL3_LIB points nowhere)
    const char *mkl[] = { "MINGPT_CACHE_DIR", g_dir, "MINGPT_GEMM", "mkl", "TEST_BF16", "1", "MINGPT_DNNL3_LIB", NO_DNNL3, NULL };
    const Report d = run_child(mkl);
    assert_true(d.correct);
    const int hw = strcmp(d.impl16, "nohw") != 0, have_mkl = strstr(d.notes, "MINGPT_GEMM=mkl: fp32 GEMMs use MKL only") != NULL;
    if (have_mkl) {
        assert_string_equal(d.impl, "mkl");
        if (hw) assert_string_equal(d.impl16, "mkl");
    } else {
        assert_non_null(strstr(d.notes, "MINGPT_GEMM=mkl, but MKL is not available here"));
        if (hw) assert_string_equal(d.impl16, "direct");   // oneDNN's, the one bf16 GEMM: no class, no timing
    }
    const char *dnnl16[] = { "MINGPT_CACHE_DIR", g_dir, "MINGPT_GEMM", "onednn", "TEST_BF16", "1", "MINGPT_DNNL3_LIB", NO_DNNL3, NULL };
    const Report d2 = run_child(dnnl16);
    assert_true(d2.correct);
    assert_string_equal(d2.impl16, !hw ? "nohw" : have_mkl ? "onednn-matmul" : "direct");
    const char *none[] = { "MINGPT_CACHE_DIR", g_dir, "MINGPT_GEMM", "mkl", "MINGPT_MKL_LIB", "/no/such/libmkl_rt.so.3", NULL };
    const Report e = run_child(none);
    assert_true(e.correct);
    assert_string_not_equal(e.impl, "mkl");
    assert_non_null(strstr(e.notes, "MINGPT_GEMM=mkl, but MKL is not available here (no MKL at "
                                    "MINGPT_MKL_LIB=/no/such/libmkl_rt.so.3 (no such file)): ignored."));
}

// Without MKL (MINGPT_MKL_LIB pointing nowhere) the calibration runs as before: its own cache file
// (the fingerprint names the MKL version, or none), MKL's column 0, a correct product. With MKL
// (where make deps installed it) the class has MKL's column measured.
static void test_without_mkl(void **state) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/nomkl", g_dir);
    const char *off[] = { "MINGPT_CACHE_DIR", dir, "MINGPT_GEMM", "", "MINGPT_MKL_LIB", "/no/such/libmkl_rt.so.3",
                          "TEST_BF16", "1", "MINGPT_DNNL3_LIB", NO_DNNL3, NULL };
    const Report a = run_child(off);
    assert_true(a.correct);
    assert_int_equal(a.calibrations, 1);   // the fp32 class; the bf16 product (on bf16 hardware) times nothing
    assert_true(strcmp(a.impl16, "direct") == 0 || strcmp(a.impl16, "nohw") == 0);
    assert_string_not_equal(a.impl, "mkl");
    const char *text = slurp(a.path);
    assert_non_null(text);
    assert_non_null(strstr(text, "; mkl=none; "));
    assert_null(strstr(text, "\nbf16 class "));
    const char *cls = strstr(text, "\nclass 0 1 1 7 7 7 ");
    assert_non_null(cls);
    double g[5];
    assert_int_equal(sscanf(cls + 1, "class %*d %*d %*d %*d %*d %*d %*d %*d %*d %*d %*d %lf %lf %lf %lf %lf", &g[0], &g[1],
                            &g[2], &g[3], &g[4]), 5);
    assert_true(g[0] > 0 && g[4] == 0);
    const char *on[] = { "MINGPT_CACHE_DIR", dir, "MINGPT_GEMM", "", "MINGPT_MKL_LIB", "", "MINGPT_DNNL3_LIB", NO_DNNL3, NULL };
    const Report b = run_child(on);
    assert_true(b.correct);
    if (strcmp(b.path, a.path) != 0) {   // MKL found: another fingerprint, its column measured
        text = slurp(b.path);
        assert_non_null(text);
        assert_null(strstr(text, "; mkl=none; "));
        assert_non_null(strstr(text, "; mkl=Intel(R) oneAPI Math Kernel Library Version "));
        cls = strstr(text, "\nclass 0 1 1 7 7 7 ");
        assert_non_null(cls);
        assert_int_equal(sscanf(cls + 1, "class %*d %*d %*d %*d %*d %*d %*d %*d %*d %*d %*d %lf %lf %lf %lf %lf", &g[0],
                                &g[1], &g[2], &g[3], &g[4]), 5);
        assert_true(g[4] > 0);
    } else {
        assert_int_equal(b.calibrations, 0);
    }
}

// oneDNN 3 (kernels/cpu/gemm_dnnl3.h; `make onednn3` installs it). Without it (MINGPT_DNNL3_LIB
// pointing nowhere; MKL off too, so oneDNN 2's matmul is the only bf16 GEMM): the fingerprint says
// onednn3=none, its column is 0, bf16 products are not timed. A cache whose class names oneDNN 3
// (as one written where it is present would) read where it is absent: nothing is measured again,
// the product runs on the fastest library that is there. With it: another cache file (its version
// is in the fingerprint), its fp32 column measured and a bf16 class measured (two bf16 GEMMs), and
// MINGPT_GEMM=onednn3 puts both products on it; without it that choice is said and ignored.
static void test_dnnl3_candidate(void **state) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/dnnl3", g_dir);
    const char *off[] = { "MINGPT_CACHE_DIR", dir, "MINGPT_GEMM", "", "MINGPT_MKL_LIB", "/no/such/libmkl_rt.so.3",
                          "MINGPT_DNNL3_LIB", NO_DNNL3, "TEST_BF16", "1", NULL };
    const Report a = run_child(off);
    assert_true(a.correct);
    assert_int_equal(a.calibrations, 1);
    assert_true(strcmp(a.impl16, "direct") == 0 || strcmp(a.impl16, "nohw") == 0);
    assert_string_not_equal(a.impl, "onednn3");
    char *text = slurp(a.path);
    assert_non_null(text);
    assert_non_null(strstr(text, "; onednn3=none; "));
    char *cls = strstr(text, "\nclass 0 1 1 7 7 7 ");
    assert_non_null(cls);
    double g[6];
    assert_int_equal(sscanf(cls + 1, "class %*d %*d %*d %*d %*d %*d %*d %*d %*d %*d %*d %lf %lf %lf %lf %lf %lf", &g[0],
                            &g[1], &g[2], &g[3], &g[4], &g[5]), 6);
    assert_true(g[0] > 0 && g[5] == 0);
    // the class as a process with oneDNN 3 might have written it: impl 5, by far the fastest
    char *end = strchr(cls + 1, '\n');
    char rest[1 << 15];
    snprintf(rest, sizeof rest, "%s", end ? end : "");
    int f[10];
    assert_int_equal(sscanf(cls + 1, "class %d %d %d %d %d %d %d %d %d %d", &f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[6],
                            &f[7], &f[8], &f[9]), 10);
    sprintf(cls + 1, "class %d %d %d %d %d %d %d %d %d %d 5 %.17g %.17g %.17g %.17g 0 99999%s", f[0], f[1], f[2], f[3], f[4],
            f[5], f[6], f[7], f[8], f[9], g[0], g[1], g[2], g[3], rest);
    FILE *fp = fopen(a.path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
    const Report b = run_child(off);
    assert_true(b.correct);
    assert_int_equal(b.calibrations, 0);
    assert_string_not_equal(b.impl, "onednn3");   // not there: the fastest measured of the others
    assert_null(strstr(b.notes, "malformed"));
    // MINGPT_GEMM=onednn3 without it: said and ignored
    const char *force_off[] = { "MINGPT_CACHE_DIR", dir, "MINGPT_GEMM", "onednn3", "MINGPT_DNNL3_LIB", NO_DNNL3, NULL };
    const Report c = run_child(force_off);
    assert_true(c.correct);
#if defined(__SANITIZE_ADDRESS__)   // make test SAN=1: refused before the library is looked for
    assert_non_null(strstr(c.notes, "MINGPT_GEMM=onednn3, but oneDNN 3 is not available here (not used in a "
                                     "sanitizer build (ASan refuses RTLD_DEEPBIND)): ignored."));
#else
    assert_non_null(strstr(c.notes, "MINGPT_GEMM=onednn3, but oneDNN 3 is not available here (no oneDNN 3 at "
                                     "MINGPT_DNNL3_LIB=" NO_DNNL3 " (no such file)): ignored."));
#endif

    const char *on[] = { "MINGPT_CACHE_DIR", dir, "MINGPT_GEMM", "", "MINGPT_MKL_LIB", "/no/such/libmkl_rt.so.3",
                         "MINGPT_DNNL3_LIB", "", "TEST_BF16", "1", NULL };
    const Report d = run_child(on);
    assert_true(d.correct);
    if (strcmp(d.path, a.path) == 0) {   // not installed here: the same file, nothing measured
        assert_int_equal(d.calibrations, 0);
        return;
    }
    const int hw = strcmp(d.impl16, "nohw") != 0;
    assert_int_equal(d.calibrations, hw ? 2 : 1);   // the fp32 class, and the bf16 one (two bf16 GEMMs)
    if (hw) assert_true(strcmp(d.impl16, "onednn-matmul") == 0 || strcmp(d.impl16, "onednn3") == 0);
    text = slurp(d.path);
    assert_non_null(text);
    assert_null(strstr(text, "; onednn3=none; "));
    assert_non_null(strstr(text, "; onednn3=3."));
    cls = strstr(text, "\nclass 0 1 1 7 7 7 ");
    assert_non_null(cls);
    assert_int_equal(sscanf(cls + 1, "class %*d %*d %*d %*d %*d %*d %*d %*d %*d %*d %*d %lf %lf %lf %lf %lf %lf", &g[0],
                            &g[1], &g[2], &g[3], &g[4], &g[5]), 6);
    assert_true(g[5] > 0 && g[4] == 0);
    if (hw) {
        cls = strstr(text, "\nbf16 class 0 1 1 7 7 7 ");
        assert_non_null(cls);
        assert_int_equal(sscanf(cls + 1, "bf16 class %*d %*d %*d %*d %*d %*d %*d %*d %*d %*d %*d %lf %lf %lf %lf %lf %lf",
                                &g[0], &g[1], &g[2], &g[3], &g[4], &g[5]), 6);
        assert_true(g[3] > 0 && g[5] > 0 && g[0] == 0 && g[4] == 0);
    }
    const Report e = run_child(on);   // reused
    assert_int_equal(e.calibrations, 0);
    assert_string_equal(e.impl, d.impl);
    assert_string_equal(e.impl16, d.impl16);
    const char *force_on[] = { "MINGPT_CACHE_DIR", dir, "MINGPT_GEMM", "onednn3", "MINGPT_DNNL3_LIB", "", "TEST_BF16", "1",
                               "MINGPT_MKL_LIB", "/no/such/libmkl_rt.so.3", NULL };
    const Report h = run_child(force_on);
    assert_true(h.correct);
    assert_non_null(strstr(h.notes, "MINGPT_GEMM=onednn3: fp32 GEMMs use oneDNN 3 only."));
    assert_string_equal(h.impl, "onednn3");
    if (hw) assert_string_equal(h.impl16, "onednn3");
}

static void test_xdg_cache_home(void **state) {
    char xdg[512];
    snprintf(xdg, sizeof xdg, "%s/xdg", g_dir);
    const char *env[] = { "MINGPT_CACHE_DIR", "", "XDG_CACHE_HOME", xdg, "MINGPT_GEMM", "", NULL };
    const Report r = run_child(env);
    char want[600];
    snprintf(want, sizeof want, "%s/mingpt/gemm-", xdg);
    assert_true(strncmp(r.path, want, strlen(want)) == 0);
    struct stat st;
    assert_int_equal(stat(r.path, &st), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_created_then_reused),
        cmocka_unit_test(test_concurrent_processes_agree),
        cmocka_unit_test(test_cache_numbers_decide),
        cmocka_unit_test(test_malformed_cache_is_ignored_and_rewritten),
        cmocka_unit_test(test_unwritable_cache_dir),
        cmocka_unit_test(test_forced_library),
        cmocka_unit_test(test_without_mkl),
        cmocka_unit_test(test_dnnl3_candidate),
        cmocka_unit_test(test_xdg_cache_home),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
