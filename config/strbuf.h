// config/strbuf.h — the strings of config/: one growable string builder for every text built
// piece by piece (Python reprs, YAML output, override rendering, interpolation results, help and
// completion texts) and the allocation helpers around it.
//
// Allocation failure aborts, here and in the whole of config/: config text is small, and there
// is nothing sensible to report through an error buffer when malloc fails.
#ifndef MINGPT_STRBUF_H
#define MINGPT_STRBUF_H

#include <stddef.h>

// A string that grows: start from {0}, append, then sb_take it (or free p).
typedef struct {
    char *p;        // the text, NUL-terminated; NULL until something is appended
    size_t n, cap;  // its length, and the bytes allocated
} StrBuf;

// Appends the n bytes at s.
void sb_add(StrBuf *b, const char *s, size_t n);

// Appends the NUL-terminated s.
void sb_puts(StrBuf *b, const char *s);

// Appends printf's output.
void sb_printf(StrBuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// The text as a malloc'd string ("" when nothing was appended); b is left empty.
char *sb_take(StrBuf *b);

// realloc that aborts on failure (n == 0 allocates one byte).
void *cfg_realloc(void *p, size_t n);

// strdup that aborts on allocation failure; NULL in gives NULL out.
char *cfg_strdup(const char *s);

// The first n bytes of s as a new NUL-terminated string.
char *cfg_strndup(const char *s, size_t n);

// printf into a new malloc'd string.
char *cfg_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// snprintf into err (when err != NULL and errlen > 0). Returns -1 so callers can
// `return cfg_errf(...)`.
int cfg_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
