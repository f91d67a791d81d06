// checkpoint/retention.c — see retention.h.
#include "checkpoint/retention.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// Length of the stem of path: everything before the last '.' of its file name (the whole path
// when the name has no extension or is a dot file).
static size_t stem_len(const char *path) {
    const char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : path, *dot = strrchr(name, '.');
    return dot && dot > name ? (size_t)(dot - path) : strlen(path);
}

int retention_path(const char *snapshot_path, const char *suffix, char *out, size_t len) {
    const int w = snprintf(out, len, "%.*s%s", (int)stem_len(snapshot_path), snapshot_path, suffix);
    return w < 0 || (size_t)w >= len ? -1 : 0;
}

// Copies src to dst through dst's temporary name (file systems without hard links).
static int copy_file(const char *src, const char *dst) {
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", dst, (long)getpid());
    FILE *in = fopen(src, "rb"), *out = in ? fopen(tmp, "wb") : NULL;
    int ok = in && out;
    static char buf[1 << 16];
    for (size_t n; ok && (n = fread(buf, 1, sizeof buf, in)) > 0;) ok = fwrite(buf, 1, n, out) == n;
    ok = ok && !ferror(in) && fflush(out) == 0 && fsync(fileno(out)) == 0;
    if (in) fclose(in);
    if (out && fclose(out) != 0) ok = 0;
    if (ok && rename(tmp, dst) == 0) return 0;
    const int e = errno;
    unlink(tmp);
    errno = e ? e : EIO;
    return -1;
}

static int cmp_long_desc(const void *a, const void *b) {
    const long x = *(const long *)a, y = *(const long *)b;
    return (x < y) - (x > y);
}

int retention_keep(const char *snapshot_path, long iter, int keep_last, char *err, size_t errlen) {
    if (keep_last <= 1) return 0;
    char numbered[4200], suffix[64];
    snprintf(suffix, sizeof suffix, ".iter%ld.bin", iter);
    if (retention_path(snapshot_path, suffix, numbered, sizeof numbered)) {
        snprintf(err, errlen, "the snapshot path '%s' is too long for its numbered copies", snapshot_path);
        return -1;
    }
    unlink(numbered);   // the same iteration saved again (a SIGUSR1 save, then the final one)
    if (link(snapshot_path, numbered) != 0 && copy_file(snapshot_path, numbered) != 0) {
        snprintf(err, errlen, "cannot keep snapshot '%s' as '%s': %s", snapshot_path, numbered, strerror(errno));
        return -1;
    }
    char dirbuf[4096], basebuf[4096];
    snprintf(dirbuf, sizeof dirbuf, "%s", snapshot_path);
    const char *dir = dirname(dirbuf);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) { fsync(dfd); close(dfd); }   // the new numbered file is durable before any is deleted
    // The numbered files of this stem: their iterations, newest first.
    const size_t sl = stem_len(snapshot_path);
    snprintf(basebuf, sizeof basebuf, "%.*s.iter", (int)sl, snapshot_path);
    const char *prefix = basename(basebuf);
    const size_t pl = strlen(prefix);
    DIR *d = opendir(dir);
    if (!d) { snprintf(err, errlen, "cannot list '%s': %s", dir, strerror(errno)); return -1; }
    long *iters = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        const char *name = e->d_name;
        if (strncmp(name, prefix, pl) != 0) continue;
        char *end;
        errno = 0;
        const long it = strtol(name + pl, &end, 10);
        if (errno || end == name + pl || strcmp(end, ".bin") != 0 || it < 0 || it == iter) continue;
        if (n == cap) {
            long *grown = realloc(iters, sizeof *iters * (cap = cap ? 2 * cap : 16));
            if (!grown) break;
            iters = grown;
        }
        iters[n++] = it;
    }
    closedir(d);
    if (n > 1) qsort(iters, n, sizeof *iters, cmp_long_desc);
    int rc = 0;
    for (size_t i = (size_t)keep_last - 1; i < n; i++) {   // keep the new one and the keep_last - 1 newest others
        char old[4200];
        snprintf(suffix, sizeof suffix, ".iter%ld.bin", iters[i]);
        if (retention_path(snapshot_path, suffix, old, sizeof old) == 0 && unlink(old) != 0 && errno != ENOENT && !rc) {
            snprintf(err, errlen, "cannot delete the old snapshot '%s': %s", old, strerror(errno));
            rc = -1;
        }
    }
    free(iters);
    return rc;
}
