// tests/tools/slow_fsync.c — an LD_PRELOAD shim for the signal tests: every fsync() first sleeps
// MINGPT_TEST_FSYNC_MS milliseconds (default 0), so that a snapshot save lasts long enough to be
// interrupted while it runs. Test code only; mingpt itself has no such hook.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    const char *ms = getenv("MINGPT_TEST_FSYNC_MS");
    const long d = ms ? atol(ms) : 0;
    if (d > 0) {
        struct timespec ts = { d / 1000, (d % 1000) * 1000000L };
        while (nanosleep(&ts, &ts) != 0) {}
    }
    return real(fd);
}
