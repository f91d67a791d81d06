// data/char_dataset.c — minGPT's CharDataset (char_dataset.py / chargpt) in C.
//
// Python decodes with bytes.decode('utf-8'), which is strict: overlong forms, surrogates,
// code points above U+10FFFF and truncated sequences are errors. We reject the same set,
// so a file either loads with the same characters as in Python or not at all.
#include "data/char_dataset.h"
#include "data/sampler.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define MAX_CODE_POINT 0x10FFFFu

static void set_err(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

// ---------------------------------------------------------------- UTF-8
// Decodes one character from s[0..len). Returns its length (1..4), or 0 when the bytes
// are not valid UTF-8; then *why says what is wrong.
static int utf8_next(const unsigned char *s, size_t len, uint32_t *cp, const char **why) {
    unsigned char b = s[0];
    if (b < 0x80) { *cp = b; return 1; }
    int need;
    uint32_t c, min;
    if (b >= 0xC2 && b <= 0xDF)      { need = 1; c = b & 0x1Fu; min = 0x80; }
    else if (b >= 0xE0 && b <= 0xEF) { need = 2; c = b & 0x0Fu; min = 0x800; }
    else if (b >= 0xF0 && b <= 0xF4) { need = 3; c = b & 0x07u; min = 0x10000; }
    else {
        *why = b < 0xC0 ? "unexpected continuation byte"
             : b < 0xC2 ? "overlong encoding" : "invalid start byte";
        return 0;
    }
    for (int k = 1; k <= need; k++) {
        if ((size_t)k >= len) { *why = "truncated sequence at end of input"; return 0; }
        if ((s[k] & 0xC0) != 0x80) { *why = "truncated sequence (invalid continuation byte)"; return 0; }
        c = (c << 6) | (s[k] & 0x3Fu);
    }
    if (c < min) { *why = "overlong encoding"; return 0; }
    if (c >= 0xD800 && c <= 0xDFFF) { *why = "surrogate code point"; return 0; }
    if (c > MAX_CODE_POINT) { *why = "code point above U+10FFFF"; return 0; }
    *cp = c;
    return need + 1;
}

static int utf8_put(uint32_t cp, char *buf) {
    unsigned char *o = (unsigned char *)buf;
    if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

// ---------------------------------------------------------------- reading
static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

// zlib's gzerror text is "<path>: <message>"; keep the message only, as we add the path.
static const char *gz_message(gzFile f, const char *path, int *zerr) {
    const char *m = gzerror(f, zerr);
    size_t n = strlen(path);
    if (strncmp(m, path, n) == 0 && strncmp(m + n, ": ", 2) == 0) m += n + 2;
    return m;
}

static int grow(unsigned char **buf, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 1 << 16;
    while (c < need) c *= 2;
    unsigned char *p = realloc(*buf, c);
    if (!p) return -1;
    *buf = p;
    *cap = c;
    return 0;
}

// Reads the whole file (gunzipped when the name ends in ".gz") into *out.
static int read_file(const char *path, unsigned char **out, size_t *out_len, char *err, size_t errlen) {
    unsigned char *buf = NULL;
    size_t cap = 0, len = 0;
    *out = NULL;
    *out_len = 0;
    if (ends_with(path, ".gz")) {
        errno = 0;
        gzFile f = gzopen(path, "rb");
        if (!f) {
            set_err(err, errlen, "%s: %s", path, errno ? strerror(errno) : "cannot open with zlib");
            return -1;
        }
        for (;;) {
            if (grow(&buf, &cap, len + (1 << 16))) {
                set_err(err, errlen, "%s: out of memory", path);
                gzclose(f); free(buf);
                return -1;
            }
            int r = gzread(f, buf + len, 1 << 16);
            if (r < 0) {
                int zerr;
                const char *msg = gz_message(f, path, &zerr);
                set_err(err, errlen, "%s: gzip read error: %s", path,
                        zerr == Z_ERRNO ? strerror(errno) : msg);
                gzclose(f); free(buf);
                return -1;
            }
            if (r == 0) break;
            len += (size_t)r;
        }
        // gzread returns 0 quietly at a truncated stream; the error state says so.
        int zerr = Z_OK;
        const char *msg = gz_message(f, path, &zerr);
        if (zerr != Z_OK) {
            set_err(err, errlen, "%s: gzip stream truncated or corrupt: %s", path, msg);
            gzclose(f); free(buf);
            return -1;
        }
        gzclose(f);
    } else {
        FILE *f = fopen(path, "rb");
        if (!f) {
            set_err(err, errlen, "%s: %s", path, strerror(errno));
            return -1;
        }
        for (;;) {
            if (grow(&buf, &cap, len + (1 << 16))) {
                set_err(err, errlen, "%s: out of memory", path);
                fclose(f); free(buf);
                return -1;
            }
            size_t r = fread(buf + len, 1, cap - len, f);
            len += r;
            if (r == 0) break;
        }
        if (ferror(f)) {
            set_err(err, errlen, "%s: read error: %s", path, strerror(errno));
            fclose(f); free(buf);
            return -1;
        }
        fclose(f);
    }
    *out = buf;
    *out_len = len;
    return 0;
}

// ---------------------------------------------------------------- dataset
int chardataset_load(CharDataset *ds, const char *path, double truncate, int block_size,
                     char *err, size_t errlen) {
    memset(ds, 0, sizeof *ds);
    if (!(truncate > 0.0 && truncate <= 1.0)) {
        set_err(err, errlen, "%s: truncate (%g) must be in (0, 1]", path, truncate);
        return -1;
    }
    if (block_size < 1) {
        set_err(err, errlen, "%s: block_size (%d) must be at least 1", path, block_size);
        return -1;
    }
    unsigned char *bytes;
    size_t nbytes;
    if (read_file(path, &bytes, &nbytes, err, errlen)) return -1;
    if (nbytes == 0) {
        set_err(err, errlen, "%s: empty file", path);
        free(bytes);
        return -1;
    }

    // Decode everything first: Python decodes the whole file before truncating, so an
    // invalid byte anywhere is an error, and truncation counts characters.
    uint32_t *cps = malloc(nbytes * sizeof *cps);
    if (!cps) {
        set_err(err, errlen, "%s: out of memory", path);
        free(bytes);
        return -1;
    }
    long nch = 0;
    for (size_t off = 0; off < nbytes;) {
        const char *why = "";
        int k = utf8_next(bytes + off, nbytes - off, &cps[nch], &why);
        if (k == 0) {
            set_err(err, errlen, "%s: invalid UTF-8 at byte offset %zu: %s", path, off, why);
            free(bytes); free(cps);
            return -1;
        }
        off += (size_t)k;
        nch++;
    }
    free(bytes);

    long n = (long)((double)nch * truncate);  // data[: int(len(data) * truncate)]
    if (n <= 0) {
        set_err(err, errlen, "%s: no characters left after truncate=%g (%ld characters)", path, truncate, nch);
        free(cps);
        return -1;
    }
    if ((long)block_size >= n) {
        set_err(err, errlen, "block_size (%d) must be smaller than the number of characters (%ld) in %s",
                block_size, n, path);
        free(cps);
        return -1;
    }

    // sorted(set(data)): a bitmap over all code points gives the sorted distinct set.
    size_t words = (MAX_CODE_POINT + 64) / 64;
    uint64_t *seen = calloc(words, sizeof *seen);
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    if (!seen || !ids) {
        set_err(err, errlen, "%s: out of memory", path);
        free(seen); free(ids); free(cps);
        return -1;
    }
    int V = 0;
    for (long i = 0; i < n; i++) {
        uint64_t bit = 1ull << (cps[i] & 63);
        if (!(seen[cps[i] >> 6] & bit)) { seen[cps[i] >> 6] |= bit; V++; }
    }
    uint32_t *itos = malloc((size_t)V * sizeof *itos);
    if (!itos) {
        set_err(err, errlen, "%s: out of memory", path);
        free(seen); free(ids); free(cps);
        return -1;
    }
    int v = 0;
    for (size_t w = 0; w < words; w++)
        for (uint64_t m = seen[w]; m; m &= m - 1)
            itos[v++] = (uint32_t)(w * 64 + (size_t)__builtin_ctzll(m));
    free(seen);

    ds->itos = itos;
    ds->vocab_size = V;
    ds->block_size = block_size;
    ds->n = n;
    for (long i = 0; i < n; i++) ids[i] = chardataset_stoi(ds, cps[i]);
    ds->ids = ids;
    free(cps);
    return 0;
}

int chardataset_from_vocab(CharDataset *ds, const uint32_t *itos, int vocab_size, int block_size) {
    memset(ds, 0, sizeof *ds);
    if (vocab_size < 1 || block_size < 1 || !itos) return -1;
    for (int i = 0; i < vocab_size; i++) {
        if (itos[i] > MAX_CODE_POINT || (itos[i] >= 0xD800 && itos[i] <= 0xDFFF)) return -1;
        if (i > 0 && itos[i] <= itos[i - 1]) return -1;  // stoi's binary search needs ascending
    }
    ds->itos = malloc((size_t)vocab_size * sizeof *ds->itos);
    if (!ds->itos) return -1;
    memcpy(ds->itos, itos, (size_t)vocab_size * sizeof *itos);
    ds->vocab_size = vocab_size;
    ds->block_size = block_size;
    return 0;
}

void chardataset_free(CharDataset *ds) {
    if (!ds) return;
    free(ds->ids);
    free(ds->itos);
    memset(ds, 0, sizeof *ds);
}

// n - T; 0 for a vocabulary-only dataset (n = 0).
long chardataset_len(const CharDataset *ds) {
    return ds->n > ds->block_size ? ds->n - ds->block_size : 0;
}

int chardataset_stoi(const CharDataset *ds, uint32_t cp) {
    int lo = 0, hi = ds->vocab_size - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (ds->itos[mid] == cp) return mid;
        if (ds->itos[mid] < cp) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

// Writes cp as it would appear quoted in a message: printable as itself, controls escaped.
static void describe_char(uint32_t cp, char *buf) {
    if (cp == '\n') strcpy(buf, "\\n");
    else if (cp == '\t') strcpy(buf, "\\t");
    else if (cp == '\r') strcpy(buf, "\\r");
    else if (cp < 0x20 || cp == 0x7F) snprintf(buf, 8, "\\x%02X", (unsigned)cp);
    else buf[utf8_put(cp, buf)] = '\0';
}

long chardataset_encode(const CharDataset *ds, const char *text, int32_t *out,
                        char *err, size_t errlen) {
    const unsigned char *s = (const unsigned char *)text;
    size_t len = strlen(text);
    long n = 0;
    for (size_t off = 0; off < len;) {
        uint32_t cp;
        const char *why = "";
        int k = utf8_next(s + off, len - off, &cp, &why);
        if (k == 0) {
            set_err(err, errlen, "invalid UTF-8 at byte offset %zu: %s", off, why);
            return -1;
        }
        int id = chardataset_stoi(ds, cp);
        if (id < 0) {
            char c[8];
            describe_char(cp, c);
            set_err(err, errlen, "'%s' (U+%04X) at character %ld (byte offset %zu) is not in the vocabulary",
                    c, (unsigned)cp, n, off);
            return -1;
        }
        out[n++] = id;
        off += (size_t)k;
    }
    return n;
}

int chardataset_decode_one(const CharDataset *ds, int32_t id, char *buf) {
    if (id < 0 || id >= ds->vocab_size) return 0;
    return utf8_put(ds->itos[id], buf);
}

void chardataset_window(const CharDataset *ds, long start, int32_t *x, int32_t *y) {
    const int32_t *p = ds->ids + start;
    memcpy(x, p, (size_t)ds->block_size * sizeof *x);
    memcpy(y, p + 1, (size_t)ds->block_size * sizeof *y);
}

// ---------------------------------------------------------------- train/test split
int datasplit_make(DataSplit *s, const CharDataset *ds, const char *mode, double train_split,
                   uint64_t seed, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    if (!(train_split > 0.0 && train_split < 1.0)) {
        set_err(err, errlen, "train_split (%g) must be in (0, 1) so that both train and test hold windows",
                train_split);
        return -1;
    }
    long T = ds->block_size, n = ds->n;
    long n_train, n_test;
    if (strcmp(mode, "contiguous") == 0) {
        long n_tr = (long)floor((double)n * train_split);
        // A window at i reads characters i..i+T, so it stays inside [0, n_tr) iff i < n_tr - T.
        n_train = n_tr - T;
        n_test = n - T - n_tr;
        if (n_train <= 0 || n_test <= 0) {
            set_err(err, errlen,
                    "contiguous split of %ld characters at train_split=%g gives %ld train and %ld test "
                    "characters; with block_size=%ld that is %ld train and %ld test windows (each side "
                    "needs more than block_size characters)",
                    n, train_split, n_tr, n - n_tr, T, n_train > 0 ? n_train : 0, n_test > 0 ? n_test : 0);
            return -1;
        }
        s->train = malloc((size_t)n_train * sizeof *s->train);
        s->test = malloc((size_t)n_test * sizeof *s->test);
        if (!s->train || !s->test) goto oom;
        for (long i = 0; i < n_train; i++) s->train[i] = i;
        for (long i = 0; i < n_test; i++) s->test[i] = n_tr + i;
    } else if (strcmp(mode, "random") == 0) {
        long N = chardataset_len(ds);
        n_train = (long)((double)N * train_split);  // int(len(ds) * train_split)
        n_test = N - n_train;
        if (n_train <= 0 || n_test <= 0) {
            set_err(err, errlen,
                    "random split of %ld windows (%ld characters, block_size=%ld) at train_split=%g gives "
                    "%ld train and %ld test windows; both need at least one",
                    N, n, T, train_split, n_train, n_test);
            return -1;
        }
        long *perm = malloc((size_t)N * sizeof *perm);
        if (!perm) goto oom;
        // random_split: randperm(sum(lengths), generator), then consecutive slices.
        if (torch_randperm(N, seed, perm)) {
            free(perm);
            set_err(err, errlen, "random split: %ld windows is too many for torch's small-n randperm", N);
            return -1;
        }
        s->train = malloc((size_t)n_train * sizeof *s->train);
        s->test = malloc((size_t)n_test * sizeof *s->test);
        if (!s->train || !s->test) { free(perm); goto oom; }
        memcpy(s->train, perm, (size_t)n_train * sizeof *perm);
        memcpy(s->test, perm + n_train, (size_t)n_test * sizeof *perm);
        free(perm);
    } else {
        set_err(err, errlen, "unknown split mode '%s' (expected 'contiguous' or 'random')", mode);
        return -1;
    }
    s->n_train = n_train;
    s->n_test = n_test;
    return 0;
oom:
    datasplit_free(s);
    set_err(err, errlen, "datasplit: out of memory");
    return -1;
}

void datasplit_free(DataSplit *s) {
    if (!s) return;
    free(s->train);
    free(s->test);
    memset(s, 0, sizeof *s);
}
