// data/char_dataset.c — minGPT's CharDataset (char_dataset.py / chargpt) in C.
//
// Python decodes with bytes.decode('utf-8'), which is strict: overlong forms, surrogates,
// code points above U+10FFFF and truncated sequences are errors. We reject the same set,
// so a file either loads with the same characters as in Python or not at all.
#include "data/char_dataset.h"
#include "data/sampler.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
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

// Writes cp as it would appear quoted in a message: printable as itself, controls escaped.
static void describe_char(uint32_t cp, char *buf) {
    if (cp == '\n') strcpy(buf, "\\n");
    else if (cp == '\t') strcpy(buf, "\\t");
    else if (cp == '\r') strcpy(buf, "\\r");
    else if (cp < 0x20 || cp == 0x7F) snprintf(buf, 8, "\\x%02X", (unsigned)cp);
    else buf[utf8_put(cp, buf)] = '\0';
}

// ---------------------------------------------------------------- budget
// Loading holds the text and a 4-byte id per character (at most one per byte), so up to 5
// bytes of memory per byte of text. By default the text may take a tenth of physical
// memory, which keeps the load under half of it.
#define CORPUS_LIMIT_ENV "MINGPT_MAX_CORPUS_BYTES"
#define CORPUS_LIMIT_FALLBACK_PHYS (8ull << 30)  // when sysconf cannot tell

// Parses "N", "NK", "NM", "NG" or "NT" (powers of 1024) into *out (> 0, below SIZE_MAX/2 so
// limit + 1 never wraps). Returns -1 on anything else.
static int parse_size(const char *s, size_t *out) {
    if (*s < '0' || *s > '9') return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno) return -1;
    unsigned shift = 0;
    if (*end) {
        const char *units = "KMGT", *u = strchr(units, *end == 'k' ? 'K' : *end);
        if (!u || end[1] != '\0') return -1;
        shift = 10u * (unsigned)(u - units + 1);
    }
    if (v == 0 || v > ((unsigned long long)(SIZE_MAX / 2) >> shift)) return -1;
    *out = (size_t)(v << shift);
    return 0;
}

// The most bytes of (decompressed) text a load accepts; `how` gets where that number comes
// from and how to change it, for the message that refuses a larger corpus.
static int corpus_limit(size_t *limit, char *how, size_t howlen, char *err, size_t errlen) {
    const char *env = getenv(CORPUS_LIMIT_ENV);
    if (env && *env) {
        if (parse_size(env, limit)) {
            set_err(err, errlen, "%s='%s' is not a size in bytes (a positive integer, optionally with a "
                    "K, M, G or T suffix, e.g. 20G)", CORPUS_LIMIT_ENV, env);
            return -1;
        }
        set_err(how, howlen, "set by %s; raise it to load more", CORPUS_LIMIT_ENV);
        return 0;
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    unsigned long long phys = pages > 0 && page > 0 ? (unsigned long long)pages * (unsigned long long)page
                                                    : CORPUS_LIMIT_FALLBACK_PHYS;
    *limit = (size_t)(phys / 10);
    set_err(how, howlen, "a tenth of the %.1f GiB of physical memory%s: loading takes up to 5 bytes per byte "
            "of text, the text and a 4-byte id per character; set %s=BYTES (e.g. 20G) to raise it",
            (double)phys / (1 << 30), pages > 0 && page > 0 ? "" : " assumed", CORPUS_LIMIT_ENV);
    return 0;
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

static const char *file_kind(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO (named pipe)";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "a special file";
}

static int not_regular(const char *path, mode_t m, char *err, size_t errlen) {
    set_err(err, errlen, "%s: is %s, not a regular file; the data path must name a UTF-8 text file "
            "(or a gzip-compressed one ending in .gz)", path, file_kind(m));
    return -1;
}

// Reads the whole file (gunzipped when the name ends in ".gz") into *out, at most `limit`
// bytes of text: a larger file is refused before reading, a gzip stream that inflates past
// the limit as soon as it does. Only regular files are read: a directory, FIFO, device or
// socket is refused before it is opened (a FIFO would block, /dev/zero never ends).
static int read_file(const char *path, size_t limit, const char *how, unsigned char **out, size_t *out_len,
                     char *err, size_t errlen) {
    *out = NULL;
    *out_len = 0;
    struct stat st;
    if (stat(path, &st)) {
        set_err(err, errlen, "cannot open '%s': %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) return not_regular(path, st.st_mode, err, errlen);
    // O_NONBLOCK: if the path became a FIFO since stat, open must not wait for a writer.
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        set_err(err, errlen, "cannot open '%s': %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st)) {
        set_err(err, errlen, "%s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) { close(fd); return not_regular(path, st.st_mode, err, errlen); }
    const int gz = ends_with(path, ".gz");
    const size_t fsize = (size_t)st.st_size;
    if (!gz && fsize > limit) {
        set_err(err, errlen, "%s: %zu bytes is larger than the corpus limit of %zu bytes (%s)",
                path, fsize, limit, how);
        close(fd);
        return -1;
    }
    gzFile f = NULL;
    if (gz) {
        f = gzdopen(fd, "rb");
        if (!f) {
            set_err(err, errlen, "%s: cannot open with zlib", path);
            close(fd);
            return -1;
        }
        gzbuffer(f, 1 << 17);
    }

    // The buffer never grows past limit + 1 bytes: a full buffer of that size is over budget.
    // A plain file starts at its size + 1, so the read that finds the end needs no growth.
    size_t cap = gz ? (fsize < limit / 4 ? 4 * fsize : limit) + 1 : fsize + 1;
    if (cap < 4096 && limit >= 4096) cap = 4096;
    if (cap > limit + 1) cap = limit + 1;
    size_t len = 0;
    unsigned char *buf = malloc(cap);
    if (!buf) goto oom;
    for (;;) {
        if (len == cap) {
            if (cap > limit) {
                if (gz)
                    set_err(err, errlen, "%s: decompresses to more than the corpus limit of %zu bytes (%s); "
                            "stopped reading there", path, limit, how);
                else
                    set_err(err, errlen, "%s: grew past the corpus limit of %zu bytes while being read (%s)",
                            path, limit, how);
                goto fail;
            }
            size_t c = cap <= (limit + 1) / 2 ? 2 * cap : limit + 1;
            unsigned char *p = realloc(buf, c);
            if (!p) goto oom;
            buf = p;
            cap = c;
        }
        size_t want = cap - len;
        if (want > (1u << 30)) want = 1u << 30;  // gzread and read take an int / ssize_t count
        if (gz) {
            int r = gzread(f, buf + len, (unsigned)want);
            if (r < 0) {
                int zerr;
                const char *msg = gz_message(f, path, &zerr);
                set_err(err, errlen, "%s: gzip read error: %s", path, zerr == Z_ERRNO ? strerror(errno) : msg);
                goto fail;
            }
            if (r == 0) break;
            len += (size_t)r;
        } else {
            ssize_t r = read(fd, buf + len, want);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) {
                set_err(err, errlen, "%s: read error: %s", path, strerror(errno));
                goto fail;
            }
            if (r == 0) break;
            len += (size_t)r;
        }
    }
    if (gz) {
        // gzread returns 0 quietly at a truncated stream; the error state says so.
        int zerr = Z_OK;
        const char *msg = gz_message(f, path, &zerr);
        if (zerr != Z_OK) {
            set_err(err, errlen, "%s: gzip stream truncated or corrupt: %s", path, msg);
            goto fail;
        }
        gzclose(f);
    } else {
        close(fd);
    }
    *out = buf;
    *out_len = len;
    return 0;
oom:
    set_err(err, errlen, "%s: out of memory after reading %zu bytes", path, len);
fail:
    free(buf);
    if (gz) gzclose(f); else close(fd);
    return -1;
}

// ---------------------------------------------------------------- dataset
static int check_params(const char *name, double truncate, int block_size, char *err, size_t errlen) {
    if (!(truncate > 0.0 && truncate <= 1.0)) {
        set_err(err, errlen, "%s: truncate (%g) must be in (0, 1]", name, truncate);
        return -1;
    }
    if (block_size < 1) {
        set_err(err, errlen, "%s: block_size (%d) must be at least 1", name, block_size);
        return -1;
    }
    return 0;
}

// The dataset from text in memory; `where` is added after byte offsets in messages
// (" of the decompressed text" for a .gz file).
static int build(CharDataset *ds, const unsigned char *text, size_t len, const char *name, const char *where,
                 double truncate, int block_size, char *err, size_t errlen) {
    memset(ds, 0, sizeof *ds);
    if (check_params(name, truncate, block_size, err, errlen)) return -1;
    if (len == 0) {
        set_err(err, errlen, "%s: empty file (the corpus has no characters)", name);
        return -1;
    }

    // Validate and count everything first: Python decodes the whole file before truncating,
    // so an invalid byte anywhere is an error, and truncation counts characters.
    long nch = 0, line = 1;
    for (size_t off = 0; off < len;) {
        uint32_t cp;
        const char *why = "";
        int k = utf8_next(text + off, len - off, &cp, &why);
        if (k == 0) {
            set_err(err, errlen, "%s: invalid UTF-8 at byte offset %zu%s (line %ld): %s", name, off, where, line,
                    why);
            return -1;
        }
        line += cp == '\n';
        off += (size_t)k;
        nch++;
    }

    long n = (long)((double)nch * truncate);  // data[: int(len(data) * truncate)]
    if (n <= 0) {
        set_err(err, errlen, "%s: no characters left after truncate=%g (%ld characters)", name, truncate, nch);
        return -1;
    }
    if ((long)block_size >= n) {
        char kept[96] = "";
        if (n < nch) snprintf(kept, sizeof kept, " of %ld after truncate=%g", nch, truncate);
        set_err(err, errlen, "block_size (%d) must be smaller than the number of characters (%ld%s) in %s: "
                "a training window needs block_size+1 characters", block_size, n, kept, name);
        return -1;
    }

    // sorted(set(data)): a bitmap over all code points gives the sorted distinct set, and
    // a code point's id is the number of set bits below it.
    enum { WORDS = (MAX_CODE_POINT + 64) / 64 };
    uint64_t *seen = calloc(WORDS, sizeof *seen);
    int32_t *rank = malloc(WORDS * sizeof *rank);
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    uint32_t *itos = NULL;
    if (!seen || !rank || !ids) goto oom;
    size_t off = 0;
    for (long i = 0; i < n; i++) {
        uint32_t cp;
        const char *why;
        off += (size_t)utf8_next(text + off, len - off, &cp, &why);  // validated above
        seen[cp >> 6] |= 1ull << (cp & 63);
    }
    int V = 0;
    for (int w = 0; w < WORDS; w++) {
        rank[w] = V;
        V += __builtin_popcountll(seen[w]);
    }
    if (V < 2) {
        uint32_t cp = 0;
        for (int w = 0; w < WORDS; w++)
            if (seen[w]) { cp = (uint32_t)w * 64 + (uint32_t)__builtin_ctzll(seen[w]); break; }
        char c[8];
        describe_char(cp, c);
        set_err(err, errlen, "%s: the corpus (%ld characters) holds only one distinct character, '%s' (U+%04X); "
                "a character model needs at least 2", name, n, c, (unsigned)cp);
        free(seen); free(rank); free(ids);
        return -1;
    }
    itos = malloc((size_t)V * sizeof *itos);
    if (!itos) goto oom;
    int v = 0;
    for (int w = 0; w < WORDS; w++)
        for (uint64_t m = seen[w]; m; m &= m - 1)
            itos[v++] = (uint32_t)w * 64 + (uint32_t)__builtin_ctzll(m);
    off = 0;
    for (long i = 0; i < n; i++) {
        uint32_t cp;
        const char *why;
        off += (size_t)utf8_next(text + off, len - off, &cp, &why);
        ids[i] = rank[cp >> 6] + __builtin_popcountll(seen[cp >> 6] & ((1ull << (cp & 63)) - 1));
    }
    free(seen);
    free(rank);
    ds->ids = ids;
    ds->n = n;
    ds->itos = itos;
    ds->vocab_size = V;
    ds->block_size = block_size;
    return 0;
oom:
    set_err(err, errlen, "%s: out of memory for %ld character ids", name, n);
    free(seen); free(rank); free(ids); free(itos);
    return -1;
}

int chardataset_from_text(CharDataset *ds, const void *text, size_t len, const char *name, double truncate,
                          int block_size, char *err, size_t errlen) {
    return build(ds, text, len, name, "", truncate, block_size, err, errlen);
}

int chardataset_load(CharDataset *ds, const char *path, double truncate, int block_size,
                     char *err, size_t errlen) {
    memset(ds, 0, sizeof *ds);
    if (check_params(path, truncate, block_size, err, errlen)) return -1;  // before reading anything
    size_t limit;
    char how[256];
    if (corpus_limit(&limit, how, sizeof how, err, errlen)) return -1;
    unsigned char *bytes;
    size_t nbytes;
    if (read_file(path, limit, how, &bytes, &nbytes, err, errlen)) return CHARDATASET_UNREADABLE;
    int rc = build(ds, bytes, nbytes, path, ends_with(path, ".gz") ? " of the decompressed text" : "",
                   truncate, block_size, err, errlen);
    free(bytes);
    return rc;
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

long chardataset_encode_n(const CharDataset *ds, const char *text, size_t len, int32_t *out,
                          char *err, size_t errlen) {
    const unsigned char *s = (const unsigned char *)text;
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

long chardataset_encode(const CharDataset *ds, const char *text, int32_t *out, char *err, size_t errlen) {
    return chardataset_encode_n(ds, text, strlen(text), out, err, errlen);
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

void chardataset_rows(const CharDataset *ds, const long *starts, const long *order, long first, int n, int32_t *x,
                      int32_t *y) {
    const long T = ds->block_size;
    for (int r = 0; r < n; r++) chardataset_window(ds, starts[order[first + r]], x + r * T, y + r * T);
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
