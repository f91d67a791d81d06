// tests/test_util.h — helpers shared by the cmocka test programs.
#ifndef MINGPT_TEST_UTIL_H
#define MINGPT_TEST_UTIL_H

#include <ftw.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

// Seeded xorshift64* stream for test inputs (independent of the code under test).
typedef struct { uint64_t s; } TestRng;
static inline TestRng test_rng(uint64_t seed) { TestRng r = { seed * 2654435761u + 0x9e3779b97f4a7c15ULL }; return r; }
static inline uint64_t test_next(TestRng *r) {
    r->s ^= r->s >> 12; r->s ^= r->s << 25; r->s ^= r->s >> 27;
    return r->s * 0x2545F4914F6CDD1DULL;
}
// Uniform in [lo, hi).
static inline float test_uniform(TestRng *r, float lo, float hi) {
    return lo + (hi - lo) * (float)((test_next(r) >> 40) / 16777216.0);
}
static inline void test_fill(TestRng *r, float *x, long n, float lo, float hi) {
    for (long i = 0; i < n; i++) x[i] = test_uniform(r, lo, hi);
}

// n zeroed floats (at least one), failing the test when out of memory; the caller frees.
static inline float *falloc(long n) {
    float *p = calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    assert_non_null(p);
    return p;
}
// n floats uniform in [lo, hi) from r.
static inline float *frand(TestRng *r, long n, float lo, float hi) {
    float *p = falloc(n);
    test_fill(r, p, n, lo, hi);
    return p;
}

// max |a - b| / max(max |b|, tiny): the error relative to the reference's largest magnitude.
static inline double test_max_rel_err(const float *a, const float *b, long n) {
    double num = 0, den = 1e-30;
    for (long i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > num || d != d) num = d;
        if (fabs((double)b[i]) > den) den = fabs((double)b[i]);
    }
    return num / den;
}

// Fails the current test with a message when the relative error exceeds tol.
#define assert_close_rel(got, ref, n, tol, what) do { \
    double e_ = test_max_rel_err((got), (ref), (n)); \
    if (!(e_ <= (tol))) fail_msg("%s: max rel err %.3e > %.1e", (what), e_, (double)(tol)); \
} while (0)

// A fresh empty directory for a test's files: dir (len bytes) = <tmp>/mingpt_<name>_XXXXXX made
// by mkdtemp, <tmp> being $TMPDIR when set and shorter than 32 characters (so that the paths
// the tests build under dir fit their buffers), else /tmp. 0, or -1 when the path does not fit
// or mkdtemp fails (a cmocka setup returns that; a test asserts it is 0).
static inline int test_tmpdir(char *dir, size_t len, const char *name) {
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !tmp[0] || strlen(tmp) >= 32) tmp = "/tmp";
    const int n = snprintf(dir, len, "%s/mingpt_%s_XXXXXX", tmp, name);
    if (n < 0 || (size_t)n >= len) return -1;
    return mkdtemp(dir) ? 0 : -1;
}

static inline int test_rmtree_entry_(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)st; (void)type; (void)ftw;
    return remove(path);
}
// Removes dir and everything under it (as rm -rf, without a shell: contents before their
// directory, symbolic links removed, never followed). 0, or -1 when something stays.
static inline int test_rmtree(const char *dir) {
    return nftw(dir, test_rmtree_entry_, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
