// config/strbuf.c — the string builder and allocation helpers of config/.
#include "config/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *cfg_realloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) abort();  // out of memory: nothing sensible to report through err
    return q;
}

// Room for n more bytes and the NUL.
static void reserve(StrBuf *b, size_t n) {
    if (b->n + n + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 64;
    while (b->n + n + 1 > cap) cap *= 2;
    b->p = cfg_realloc(b->p, cap);
    b->cap = cap;
}

void sb_add(StrBuf *b, const char *s, size_t n) {
    reserve(b, n);
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void sb_puts(StrBuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static void sb_vprintf(StrBuf *b, const char *fmt, va_list ap) {
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    reserve(b, n > 0 ? (size_t)n : 0);
    b->p[b->n] = 0;
    if (n > 0) b->n += (size_t)vsnprintf(b->p + b->n, b->cap - b->n, fmt, again);
    va_end(again);
}

void sb_printf(StrBuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(b, fmt, ap);
    va_end(ap);
}

char *sb_take(StrBuf *b) {
    char *p = b->p ? b->p : cfg_strdup("");
    *b = (StrBuf){0};
    return p;
}

char *cfg_strndup(const char *s, size_t n) {
    char *d = cfg_realloc(NULL, n + 1);
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

char *cfg_strdup(const char *s) { return s ? cfg_strndup(s, strlen(s)) : NULL; }

char *cfg_printf(const char *fmt, ...) {
    StrBuf b = {0};
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(&b, fmt, ap);
    va_end(ap);
    return sb_take(&b);
}

int cfg_errf(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}
