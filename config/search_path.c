// config/search_path.c — see search_path.h.
#include "config/search_path.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/strbuf.h"
#include "config/lib_path.h"

void search_path_absolute(const char *p, char *out, size_t len) {
    char cwd[PATH_MAX];
    if (p[0] == '/' || !getcwd(cwd, sizeof cwd)) {
        snprintf(out, len, "%s", p);
        return;
    }
    int w;
    if (!strcmp(p, ".") || !strcmp(p, "./")) w = snprintf(out, len, "%s", cwd);
    else w = snprintf(out, len, "%s/%s", cwd, strncmp(p, "./", 2) == 0 ? p + 2 : p);
    if (w < 0 || (size_t)w >= len) out[len - 1] = 0;  // truncated: still a string
}

static void add(SearchPath *sp, const char *provider, const char *schema, const char *path, const char *lookup) {
    sp->dirs = cfg_realloc(sp->dirs, (size_t)(sp->n + 1) * sizeof *sp->dirs);
    SearchDir *d = &sp->dirs[sp->n++];
    snprintf(d->provider, sizeof d->provider, "%s", provider);
    snprintf(d->schema, sizeof d->schema, "%s", schema);
    d->path = cfg_strdup(path);
    d->lookup = lookup ? cfg_strdup(lookup) : NULL;
}

// A file:// place, unless the same directory is listed already (compared resolved).
static void add_dir(SearchPath *sp, const char *provider, const char *given) {
    char abs[PATH_MAX], real[PATH_MAX], other[PATH_MAX];
    search_path_absolute(given, abs, sizeof abs);
    const char *key = realpath(abs, real) ? real : abs;
    for (int i = 0; i < sp->n; i++) {
        if (strcmp(sp->dirs[i].schema, "file") != 0) continue;
        const char *o = realpath(sp->dirs[i].path, other) ? other : sp->dirs[i].path;
        if (!strcmp(o, key)) return;
    }
    add(sp, provider, "file", abs, given);
}

void search_path_build(SearchPath *sp, const char *config_path, const char *const *config_dirs, int n_dirs) {
    sp->dirs = NULL;
    sp->n = 0;
    add(sp, "hydra", "pkg", "hydra.conf", NULL);
    if (config_path) {  // alone, and never deduplicated away
        char abs[PATH_MAX];
        search_path_absolute(config_path, abs, sizeof abs);
        add(sp, "main", "file", abs, config_path);
    } else {
        add_dir(sp, "main", ".");
        char exe[PATH_MAX], share[PATH_MAX + 32];
        if (lib_path_exe_dir(exe, sizeof exe) == 0) {
            add_dir(sp, "mingpt", exe);
            // <exe dir>/../share/mingpt, written without the "..": <parent of exe dir>/share/mingpt
            char *slash = strrchr(exe, '/');
            if (slash) *slash = 0;
            snprintf(share, sizeof share, "%s/%s", exe, &LIB_PATH_INSTALLED_SHARE[3]);
            add_dir(sp, "mingpt", share);
        }
    }
    for (int i = 0; i < n_dirs; i++) {
        char abs[PATH_MAX];
        search_path_absolute(config_dirs[i], abs, sizeof abs);
        add(sp, "command-line", "file", abs, config_dirs[i]);
    }
    add(sp, "schema", "structured", "", NULL);
}

void search_path_free(SearchPath *sp) {
    for (int i = 0; i < sp->n; i++) {
        free(sp->dirs[i].path);
        free(sp->dirs[i].lookup);
    }
    free(sp->dirs);
    sp->dirs = NULL;
    sp->n = 0;
}

void search_path_lines(const SearchPath *sp, char *buf, size_t len) {
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < sp->n && o < len; i++) {
        const int w = snprintf(buf + o, len - o, "\tprovider=%s, path=%s://%s\n", sp->dirs[i].provider,
                               sp->dirs[i].schema, sp->dirs[i].path);
        if (w < 0) break;
        o += (size_t)w;
    }
}

static void dashes(FILE *out, size_t n, char c) {
    for (size_t i = 0; i < n; i++) fputc(c, out);
    fputc('\n', out);
}

void search_path_print(FILE *out, const SearchPath *sp) {
    int wp = (int)strlen("Provider"), wu = (int)strlen("Search path");
    for (int i = 0; i < sp->n; i++) {
        const int p = (int)strlen(sp->dirs[i].provider);
        const int u = (int)(strlen(sp->dirs[i].schema) + 3 + strlen(sp->dirs[i].path));
        if (p > wp) wp = p;
        if (u > wu) wu = u;
    }
    fputs("\nConfig search path\n", out);
    dashes(out, strlen("Config search path"), '*');
    const size_t row = (size_t)wp + (size_t)wu + 7;  // "| " + " | " + " |"
    fprintf(out, "| %-*s | %-*s |\n", wp, "Provider", wu, "Search path");
    dashes(out, row, '-');
    for (int i = 0; i < sp->n; i++) {
        char url[PATH_MAX + 32];
        snprintf(url, sizeof url, "%s://%s", sp->dirs[i].schema, sp->dirs[i].path);
        fprintf(out, "| %-*s | %-*s |\n", wp, sp->dirs[i].provider, wu, url);
    }
    dashes(out, row, '-');
}
