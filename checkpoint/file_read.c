// checkpoint/file_read.c — see file_read.h.
#include "checkpoint/file_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int file_read_regular(const char *path, const char *what, unsigned char **buf, size_t *len, char *err, size_t errlen) {
    return file_read_capped(path, what, SIZE_MAX, buf, len, NULL, err, errlen);
}

int file_read_capped(const char *path, const char *what, size_t max_bytes, unsigned char **buf, size_t *len,
                     int *errno_out, char *err, size_t errlen) {
    *buf = NULL;
    *len = 0;
    if (errno_out) *errno_out = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno_out) *errno_out = errno;
        snprintf(err, errlen, "cannot open %s '%s': %s", what, path, strerror(errno));
        return 1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s '%s' is not a regular file", what, path);
        close(fd);
        return 1;
    }
    const size_t n = (size_t)st.st_size;
    if (n > max_bytes) {
        snprintf(err, errlen, "%s '%s' is %zu bytes, more than the limit of %zu", what, path, n, max_bytes);
        close(fd);
        return 1;
    }
    unsigned char *b = malloc(n ? n : 1);
    if (!b) {
        snprintf(err, errlen, "%s '%s': out of memory reading %zu bytes", what, path, n);
        close(fd);
        return 1;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, b + got, n - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fd);
    if (got != n) {
        snprintf(err, errlen, "cannot read %s '%s' (%zu of %zu bytes)", what, path, got, n);
        free(b);
        return 1;
    }
    *buf = b;
    *len = n;
    return 0;
}

int file_malformed(char *err, size_t errlen, const char *what, const char *name, const char *fmt, ...) {
    int k = snprintf(err, errlen, "%s '%s' is malformed: ", what, name);
    if (k < 0 || (size_t)k >= errlen) return 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + k, errlen - (size_t)k, fmt, ap);
    va_end(ap);
    return 1;
}
