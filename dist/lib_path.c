// dist/lib_path.c — see lib_path.h.
#include "dist/lib_path.h"

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int lib_path(const char *env, const char *rel, char *out, size_t len) {
    const char *over = env ? getenv(env) : NULL;
    if (over && *over) {
        snprintf(out, len, "%s", over);
        return LIB_PATH_OK;
    }
    if (!rel) return LIB_PATH_NOT_BUILT;
    char exe[4096];
    const ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0) return LIB_PATH_NO_EXE;
    exe[k] = 0;
    snprintf(out, len, "%s/%s", dirname(exe), rel);
    return LIB_PATH_OK;
}
