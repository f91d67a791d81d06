// config/lib_path.c — see lib_path.h.
#include "config/lib_path.h"

#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int lib_path_exe_dir(char *out, size_t len) {
    char exe[4096];
    const ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0) return -1;
    exe[k] = 0;
    const int w = snprintf(out, len, "%s", dirname(exe));
    return w < 0 || (size_t)w >= len ? -1 : 0;
}

static int exists(const char *p, mode_t type) {
    struct stat st;
    return stat(p, &st) == 0 && (st.st_mode & S_IFMT) == type;
}

int lib_path(const char *env, const char *rel, char *out, size_t len) {
    const char *over = env ? getenv(env) : NULL;
    if (over && *over) {
        snprintf(out, len, "%s", over);
        return LIB_PATH_OK;
    }
    if (!rel) return LIB_PATH_NOT_BUILT;
    char dir[4096], installed_dir[4200], installed[4400];
    if (lib_path_exe_dir(dir, sizeof dir)) return LIB_PATH_NO_EXE;
    snprintf(out, len, "%s/%s", dir, rel);
    if (exists(out, S_IFREG)) return LIB_PATH_OK;
    const char *base = strrchr(rel, '/');
    char *slash = strrchr(dir, '/');  // <exe dir>/../lib/mingpt, written without the ".."
    if (slash) *slash = 0;
    snprintf(installed_dir, sizeof installed_dir, "%s/%s", dir, &LIB_PATH_INSTALLED_LIBS[3]);
    snprintf(installed, sizeof installed, "%s/%s", installed_dir, base ? base + 1 : rel);
    if (exists(installed, S_IFREG) || exists(installed_dir, S_IFDIR)) snprintf(out, len, "%s", installed);
    return LIB_PATH_OK;
}

void *lib_open(const LibSpec *s, char *path, size_t pathlen, char *why, size_t whylen) {
    const int where = lib_path(s->env, s->built, path, pathlen);
    if (where == LIB_PATH_NOT_BUILT) { snprintf(why, whylen, "%s", s->not_built); return NULL; }
    if (where == LIB_PATH_NO_EXE) { snprintf(why, whylen, "cannot locate the mingpt executable"); return NULL; }
    if (access(path, F_OK) != 0) {
        const char *over = getenv(s->env);
        if (over && *over) snprintf(why, whylen, "no %s at %s=%.600s (no such file)", s->what, s->env, path);
        else snprintf(why, whylen, "no %s at %.600s (%s)", s->what, path, s->hint);
        return NULL;
    }
    void *lib = dlopen(path, s->flags);
    if (!lib) snprintf(why, whylen, "cannot load the %s: %s", s->what, dlerror());
    return lib;
}

void lib_describe(const LibSpec *s, const char *label, const char *version_sym, char *buf, size_t len) {
    char path[4600], why[1024], ver[512];
    if (lib_path(s->env, s->built, path, sizeof path) == LIB_PATH_NOT_BUILT) {
        snprintf(buf, len, "%s: not built\n", label);
        return;
    }
    void *lib = lib_open(s, path, sizeof path, why, sizeof why);
    if (!lib) {
        if (access(path, F_OK) != 0) snprintf(buf, len, "%s: library not found: %s\n", label, path);
        else snprintf(buf, len, "%s: %s\n", label, why);
        return;
    }
    lib_path_call_version(lib, version_sym, ver, sizeof ver);
    snprintf(buf, len, "%s: %s (%s)\n", label, ver, path);
}

void lib_path_call_version(void *lib, const char *sym, char *buf, size_t len) {
    typedef void (*VersionFn)(char *, size_t);
    VersionFn fn = (VersionFn)dlsym(lib, sym);
    if (fn) fn(buf, len);
    else snprintf(buf, len, "version unknown (no %s in the library)", sym);
}
