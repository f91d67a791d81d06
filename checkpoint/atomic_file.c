// checkpoint/atomic_file.c — see atomic_file.h.
#include "checkpoint/atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

enum { CHUNK = 1 << 20 };

void atomic_remove_stale(const char *path) {
    char dirbuf[4096], basebuf[4096];
    snprintf(dirbuf, sizeof dirbuf, "%s", path);
    snprintf(basebuf, sizeof basebuf, "%s", path);
    const char *dir = dirname(dirbuf), *base = basename(basebuf);
    const size_t bl = strlen(base);
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        const char *n = e->d_name;
        if (strncmp(n, base, bl) != 0 || strncmp(n + bl, ".tmp.", 5) != 0) continue;
        char *endp;
        errno = 0;
        long pid = strtol(n + bl + 5, &endp, 10);
        if (errno || *endp || pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char full[8192];
        snprintf(full, sizeof full, "%s/%s", dir, n);
        unlink(full);
    }
    closedir(d);
}

int same_file(const char *a, const char *b) {
    struct stat sa, sb;
    if (!a || !b || !a[0] || !b[0] || stat(a, &sa) != 0 || stat(b, &sb) != 0) return 0;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int output_is_input(const char *output, const char *out_what, const char *input, const char *in_what, char *err,
                    size_t errlen) {
    if (!same_file(output, input)) return 0;
    snprintf(err, errlen, "%s '%s' is the same file as %s '%s': writing it would destroy the input", out_what, output,
             in_what, input);
    return 1;
}

// What a file of mode m is, for the refusal of a path that is no regular file.
static const char *kind_of(mode_t m) {
    return S_ISDIR(m) ? "a directory" : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "a special file";
}

int atomic_open(AtomicFile *a, const char *path, const volatile sig_atomic_t *cancel, char *err, size_t errlen) {
    memset(a, 0, sizeof *a);
    a->cancel = cancel;
    a->crc = (uint32_t)crc32(0L, Z_NULL, 0);
    char real[PATH_MAX];
    struct stat st;
    const int exists = stat(path, &st) == 0;   // through symbolic links (and /proc's fd links)
    if (exists && !S_ISREG(st.st_mode)) {
        if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode)) {
            snprintf(err, errlen, "cannot write '%s': it is %s, not a regular file, a character device or a FIFO", path,
                     kind_of(st.st_mode));
            return 1;
        }
        // A device (/dev/stdout on a terminal, /dev/null) or a FIFO: written in place, never renamed over.
        a->direct = 1;
        snprintf(a->path, sizeof a->path, "%s", path);
        snprintf(a->tmp, sizeof a->tmp, "%s", path);
        a->f = fopen(path, "wb");
        if (!a->f) {
            snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
            return 1;
        }
        return 0;
    }
    // A symbolic link is followed: the regular file it names is replaced, the link stays.
    struct stat lst;
    if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) {
        if (!exists || !realpath(path, real)) {
            snprintf(err, errlen, "cannot write '%s': a symbolic link that does not resolve (%s)", path,
                     strerror(exists ? errno : ENOENT));
            return 1;
        }
        path = real;
    }
    snprintf(a->path, sizeof a->path, "%s", path);
    atomic_remove_stale(path);
    snprintf(a->tmp, sizeof a->tmp, "%s.tmp.%ld", path, (long)getpid());
    a->f = fopen(a->tmp, "wb");
    if (!a->f) {
        snprintf(err, errlen, "cannot write '%s': %s", a->tmp, strerror(errno));
        return 1;
    }
    return 0;
}

static int cancelled(const AtomicFile *a) { return a->cancel && *a->cancel; }

void atomic_write(AtomicFile *a, const void *p, size_t n) {
    const unsigned char *b = p;
    while (n > 0 && !a->failed && !cancelled(a)) {
        const size_t k = n < CHUNK ? n : CHUNK;
        errno = 0;
        if (fwrite(b, 1, k, a->f) != k) { a->failed = errno ? errno : EIO; return; }
        a->crc = (uint32_t)crc32(a->crc, b, (uInt)k);
        b += k;
        n -= k;
    }
}

int atomic_commit(AtomicFile *a, char *err, size_t errlen) {
    int failed = a->failed;
    if (!failed && fflush(a->f) != 0) failed = errno ? errno : EIO;
    if (!failed && !a->direct && !cancelled(a) && fsync(fileno(a->f)) != 0) failed = errno;
    if (fclose(a->f) != 0 && !failed) failed = errno ? errno : EIO;
    a->f = NULL;
    if (a->direct) {   // nothing to rename or remove: what was written is there
        if (failed) snprintf(err, errlen, "cannot write '%s': %s", a->path, strerror(failed));
        return failed ? 1 : cancelled(a) ? ATOMIC_CANCELLED : 0;
    }
    if (failed || cancelled(a)) {
        unlink(a->tmp);
        if (!failed) return ATOMIC_CANCELLED;
        snprintf(err, errlen, "cannot write '%s': %s", a->tmp, strerror(failed));
        return 1;
    }
    if (rename(a->tmp, a->path) != 0) {
        snprintf(err, errlen, "cannot rename '%s' to '%s': %s", a->tmp, a->path, strerror(errno));
        unlink(a->tmp);
        return 1;
    }
    // Make the rename itself durable.
    char dirbuf[4096];
    snprintf(dirbuf, sizeof dirbuf, "%s", a->path);
    int dfd = open(dirname(dirbuf), O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) { fsync(dfd); close(dfd); }
    return 0;
}
