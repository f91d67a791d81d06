// trainer/snapshot.c — atomic, CRC-checked snapshot files.
#include "trainer/snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <dirent.h>
#include <libgen.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "kernels/loss_scaler.h"

#define SNAP_MAGIC "MINGPTSN"
#define SNAP_VERSION 1u
#define TAG(a, b, c, d) ((uint32_t)(a) | (uint32_t)(b) << 8 | (uint32_t)(c) << 16 | (uint32_t)(d) << 24)
enum {
    TAG_CONF = TAG('C', 'O', 'N', 'F'), TAG_VOCB = TAG('V', 'O', 'C', 'B'),
    TAG_SHAP = TAG('S', 'H', 'A', 'P'), TAG_STAT = TAG('S', 'T', 'A', 'T'),
    TAG_PARM = TAG('P', 'A', 'R', 'M'), TAG_ADAM = TAG('A', 'D', 'A', 'M'),
    TAG_ADAV = TAG('A', 'D', 'A', 'V'), TAG_SCAL = TAG('S', 'C', 'A', 'L'), TAG_DIST = TAG('D', 'I', 'S', 'T'),
};

// Fixed-size records, stored as arrays of int64 / float so the layout is explicit.
enum { SHAP_V, SHAP_BLOCK, SHAP_L, SHAP_NH, SHAP_C, SHAP_N };
enum { STAT_ADAM_STEP, STAT_EPOCHS, STAT_ITER_IN_EPOCH, STAT_ITER_NUM, STAT_SEED,
       STAT_SCALER_GOOD, STAT_NUM_PARAMS, STAT_N };

// ---------------------------------------------------------------- writing
typedef struct { FILE *f; uLong crc; int failed; } Writer;

static void put(Writer *w, const void *p, size_t n) {
    if (w->failed || n == 0) return;
    if (fwrite(p, 1, n, w->f) != n) { w->failed = errno ? errno : EIO; return; }
    // zlib's crc32 takes uInt lengths: feed large buffers in pieces.
    const unsigned char *b = p;
    while (n > 0) {
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        w->crc = crc32(w->crc, b, k);
        b += k; n -= k;
    }
}

static void put_record(Writer *w, uint32_t tag, const void *p, uint64_t n) {
    put(w, &tag, 4);
    put(w, &n, 8);
    put(w, p, (size_t)n);
}

// Removes `<path>.tmp.<pid>` files whose writer is gone (a writer killed mid-save, e.g. by
// SIGKILL, cannot clean up after itself). A live writer's file (kill(pid, 0) succeeds or is
// refused with EPERM) is left alone. Same-host writers only: snapshots are written by rank 0.
static void remove_stale_temps(const char *path) {
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

int snapshot_save(const char *path, const Snapshot *s, char *err, size_t errlen) {
    remove_stale_temps(path);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) { snprintf(err, errlen, "cannot write snapshot '%s': %s", tmp, strerror(errno)); return 1; }
    Writer w = { f, crc32(0L, Z_NULL, 0), 0 };
    uint32_t version = SNAP_VERSION;
    put(&w, SNAP_MAGIC, 8);
    put(&w, &version, 4);
    put_record(&w, TAG_CONF, s->config_yaml, strlen(s->config_yaml));
    put_record(&w, TAG_VOCB, s->vocab, (uint64_t)s->vocab_size * 4);
    int64_t shap[SHAP_N] = { s->shape.vocab_size, s->shape.block_size, s->shape.n_layer,
                             s->shape.n_head, s->shape.n_embd };
    put_record(&w, TAG_SHAP, shap, sizeof shap);
    int64_t stat[STAT_N] = { s->adam_step, s->epochs_run, s->iter_in_epoch, s->iter_num,
                             (int64_t)s->seed, s->scaler_good_steps, (int64_t)s->num_params };
    put_record(&w, TAG_STAT, stat, sizeof stat);
    float scale = s->loss_scale;
    put_record(&w, TAG_SCAL, &scale, 4);
    int64_t dist[2] = { s->world_size > 0 ? s->world_size : 1, s->samples_in_epoch };
    put_record(&w, TAG_DIST, dist, sizeof dist);
    put_record(&w, TAG_PARM, s->params, (uint64_t)s->num_params * 4);
    if (s->adam_m && s->adam_v) {
        put_record(&w, TAG_ADAM, s->adam_m, (uint64_t)s->num_params * 4);
        put_record(&w, TAG_ADAV, s->adam_v, (uint64_t)s->num_params * 4);
    }
    uint32_t crc = (uint32_t)w.crc;
    if (!w.failed && fwrite(&crc, 1, 4, f) != 4) w.failed = errno ? errno : EIO;
    if (!w.failed && fflush(f) != 0) w.failed = errno;
    if (!w.failed && fsync(fileno(f)) != 0) w.failed = errno;
    if (fclose(f) != 0 && !w.failed) w.failed = errno ? errno : EIO;
    if (w.failed) {
        snprintf(err, errlen, "cannot write snapshot '%s': %s", tmp, strerror(w.failed));
        unlink(tmp);
        return 1;
    }
    if (rename(tmp, path) != 0) {
        snprintf(err, errlen, "cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
        unlink(tmp);
        return 1;
    }
    // Make the rename itself durable.
    char dirbuf[4096];
    snprintf(dirbuf, sizeof dirbuf, "%s", path);
    int dfd = open(dirname(dirbuf), O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) { fsync(dfd); close(dfd); }
    return 0;
}

// ---------------------------------------------------------------- reading
// One validated loader: every count, length and shape in the file is checked against the
// file and against the shape before anything is sized or copied from it, so a file whose
// CRC was recomputed after an edit is refused like a damaged one.

static int failf(char *err, size_t errlen, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int failf(char *err, size_t errlen, const char *name, const char *fmt, ...) {
    int k = snprintf(err, errlen, "snapshot '%s' is malformed: ", name);
    if (k < 0 || (size_t)k >= errlen) return 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + k, errlen - (size_t)k, fmt, ap);
    va_end(ap);
    return 1;
}

static void tag_name(uint32_t tag, char out[5]) {
    for (int i = 0; i < 4; i++) {
        unsigned char c = (unsigned char)(tag >> (8 * i));
        out[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    out[4] = 0;
}

// The records this reader knows; each may appear at most once.
static const uint32_t KNOWN[] = { TAG_CONF, TAG_VOCB, TAG_SHAP, TAG_STAT, TAG_SCAL, TAG_DIST,
                                  TAG_PARM, TAG_ADAM, TAG_ADAV };
enum { N_KNOWN = sizeof KNOWN / sizeof KNOWN[0] };

typedef struct { const unsigned char *p; uint64_t n; size_t off; uint32_t tag; } Rec;

static int all_finite(const float *x, size_t n, int nonneg) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]) || (nonneg && x[i] < 0.0f)) return 0;
    return 1;
}

static int take_floats(float **dst, const Rec *r, size_t want, int nonneg, const char *name, char *err,
                       size_t errlen) {
    char t[5];
    tag_name(r->tag, t);
    if (r->n != (uint64_t)want * 4)
        return failf(err, errlen, name, "record %s holds %llu bytes; the model's %zu parameters need %llu", t,
                     (unsigned long long)r->n, want, (unsigned long long)want * 4);
    *dst = malloc(want * 4);
    if (!*dst) { snprintf(err, errlen, "snapshot '%s': out of memory for %zu parameters", name, want); return 1; }
    memcpy(*dst, r->p, want * 4);
    if (!all_finite(*dst, want, nonneg))
        return failf(err, errlen, name, "record %s holds %s values", t, nonneg ? "negative or non-finite" : "non-finite");
    return 0;
}

int snapshot_parse(const unsigned char *buf, size_t len, const char *name, Snapshot *s, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    if (len < 16 && memcmp(buf, SNAP_MAGIC, len < 8 ? len : 8) == 0) {   // a snapshot cut short
        snprintf(err, errlen, "snapshot '%s' is corrupt or truncated (%zu bytes)", name, len);
        return 1;
    }
    if (len < 8 || memcmp(buf, SNAP_MAGIC, 8) != 0) {
        snprintf(err, errlen, "'%s' is not a mingpt snapshot (bad magic)", name);
        return 1;
    }
    uint32_t version, stored_crc;
    memcpy(&version, buf + 8, 4);
    if (version > SNAP_VERSION) {
        snprintf(err, errlen, "snapshot '%s' has format version %u, written by a newer mingpt; this mingpt reads "
                 "version %u (use the mingpt that wrote it)", name, version, SNAP_VERSION);
        return 1;
    }
    if (version != SNAP_VERSION) return failf(err, errlen, name, "format version %u is not one mingpt ever wrote", version);
    memcpy(&stored_crc, buf + len - 4, 4);
    uLong crc = crc32(0L, Z_NULL, 0);
    for (size_t off = 0; off < len - 4;) {
        uInt k = (len - 4 - off) > (1u << 30) ? (1u << 30) : (uInt)(len - 4 - off);
        crc = crc32(crc, buf + off, k);
        off += k;
    }
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION   // the fuzzer must reach the record parser
    if ((uint32_t)crc != stored_crc) {
        snprintf(err, errlen, "snapshot '%s' is corrupt or truncated (CRC32 mismatch)", name);
        return 1;
    }
#else
    (void)crc; (void)stored_crc;
#endif

    // 1. Split into records: every header and payload inside the file, each known tag once.
    Rec rec[N_KNOWN] = {{0}};
    int n_records = 0;
    const unsigned char *p = buf + 12, *end = buf + len - 4;
    while (p < end) {
        const size_t off = (size_t)(p - buf);
        uint32_t tag; uint64_t n;
        if (end - p < 12) return failf(err, errlen, name, "a record header at offset %zu is cut short", off);
        memcpy(&tag, p, 4); memcpy(&n, p + 4, 8); p += 12;
        char t[5];
        tag_name(tag, t);
        if ((uint64_t)(end - p) < n)
            return failf(err, errlen, name, "record %s at offset %zu claims %llu bytes; %zu remain", t, off,
                         (unsigned long long)n, (size_t)(end - p));
        if (++n_records > SNAP_MAX_RECORDS)
            return failf(err, errlen, name, "more than %d records", SNAP_MAX_RECORDS);
        for (int k = 0; k < N_KNOWN; k++)
            if (KNOWN[k] == tag) {
                if (rec[k].p) return failf(err, errlen, name, "record %s appears twice (offsets %zu and %zu)", t,
                                           rec[k].off, off);
                rec[k] = (Rec){ p, n, off, tag };
            }
        p += n;   // unknown records (from newer writers of this format version) are skipped
    }
    const Rec *conf = &rec[0], *vocb = &rec[1], *shap = &rec[2], *stat = &rec[3], *scal = &rec[4],
              *dist = &rec[5], *parm = &rec[6], *adam = &rec[7], *adav = &rec[8];
    const char *missing = !conf->p ? "CONF" : !vocb->p ? "VOCB" : !shap->p ? "SHAP" : !stat->p ? "STAT"
                        : !parm->p ? "PARM" : NULL;
    if (missing) return failf(err, errlen, name, "record %s is missing", missing);
    if (!adam->p != !adav->p) return failf(err, errlen, name, "records ADAM and ADAV must come together");

    // 2. Shape and vocabulary: sizes range-checked as int64 before they become ints.
    int64_t sh[SHAP_N];
    if (shap->n != sizeof sh) return failf(err, errlen, name, "record SHAP holds %llu bytes, not %zu",
                                           (unsigned long long)shap->n, sizeof sh);
    memcpy(sh, shap->p, sizeof sh);
    static const char *const SHAP_NAMES[SHAP_N] = { "vocab_size", "block_size", "n_layer", "n_head", "n_embd" };
    for (int i = 0; i < SHAP_N; i++)
        if (sh[i] < 1 || sh[i] > INT32_MAX)
            return failf(err, errlen, name, "SHAP %s is %lld", SHAP_NAMES[i], (long long)sh[i]);
    s->shape = (GPTShape){ (int)sh[SHAP_V], (int)sh[SHAP_BLOCK], (int)sh[SHAP_L], (int)sh[SHAP_NH], (int)sh[SHAP_C],
                           0, 0, 0 };
    size_t num_params;
    char why[256];
    if (gpt_shape_check(&s->shape, &num_params, why, sizeof why))
        return failf(err, errlen, name, "SHAP: %s", why);
    if (vocb->n == 0 || vocb->n % 4 || vocb->n / 4 != (uint64_t)s->shape.vocab_size)
        return failf(err, errlen, name, "record VOCB holds %llu bytes; vocab_size %d needs %llu",
                     (unsigned long long)vocb->n, s->shape.vocab_size, (unsigned long long)s->shape.vocab_size * 4);
    s->vocab_size = s->shape.vocab_size;
    s->vocab = malloc(vocb->n);
    if (!s->vocab) goto oom;
    memcpy(s->vocab, vocb->p, vocb->n);
    for (int i = 0; i < s->vocab_size; i++) {
        const uint32_t c = s->vocab[i];
        if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
            { failf(err, errlen, name, "VOCB entry %d is not a Unicode scalar value (0x%X)", i, c); goto fail; }
        if (i > 0 && c <= s->vocab[i - 1])
            { failf(err, errlen, name, "VOCB is not strictly ascending at entry %d", i); goto fail; }
    }
    if (conf->n > SNAP_MAX_CONFIG_BYTES || memchr(conf->p, 0, conf->n))
        { failf(err, errlen, name, "record CONF is not a config text of at most %d bytes", SNAP_MAX_CONFIG_BYTES); goto fail; }
    s->config_yaml = malloc(conf->n + 1);
    if (!s->config_yaml) goto oom;
    memcpy(s->config_yaml, conf->p, conf->n);
    s->config_yaml[conf->n] = 0;

    // 3. Counters: none negative; the parameter count is the shape's.
    int64_t st[STAT_N];
    if (stat->n != sizeof st) { failf(err, errlen, name, "record STAT holds %llu bytes, not %zu",
                                      (unsigned long long)stat->n, sizeof st); goto fail; }
    memcpy(st, stat->p, sizeof st);
    static const char *const STAT_NAMES[STAT_N] = { "adam_step", "epochs_run", "iter_in_epoch", "iter_num", "seed",
                                                    "scaler_good_steps", "num_params" };
    for (int i = 0; i < STAT_N; i++)
        if (i != STAT_SEED && st[i] < 0)
            { failf(err, errlen, name, "STAT %s is %lld", STAT_NAMES[i], (long long)st[i]); goto fail; }
    if ((uint64_t)st[STAT_NUM_PARAMS] != num_params)
        { failf(err, errlen, name, "STAT num_params is %lld but the shape in SHAP has %zu parameters",
                (long long)st[STAT_NUM_PARAMS], num_params); goto fail; }
    s->adam_step = st[STAT_ADAM_STEP]; s->epochs_run = st[STAT_EPOCHS];
    s->iter_in_epoch = st[STAT_ITER_IN_EPOCH]; s->iter_num = st[STAT_ITER_NUM];
    s->seed = (uint64_t)st[STAT_SEED]; s->scaler_good_steps = st[STAT_SCALER_GOOD];
    s->num_params = num_params;

    s->loss_scale = 1.0f;
    if (scal->p) {
        if (scal->n != 4) { failf(err, errlen, name, "record SCAL holds %llu bytes, not 4", (unsigned long long)scal->n); goto fail; }
        memcpy(&s->loss_scale, scal->p, 4);
        if (!(s->loss_scale > 0.0f && s->loss_scale <= LOSS_SCALER_MAX))
            { failf(err, errlen, name, "SCAL loss scale %g is outside (0, %g]", (double)s->loss_scale,
                    (double)LOSS_SCALER_MAX); goto fail; }
    }
    if (dist->p) {
        int64_t d[2];
        if (dist->n != sizeof d) { failf(err, errlen, name, "record DIST holds %llu bytes, not %zu",
                                         (unsigned long long)dist->n, sizeof d); goto fail; }
        memcpy(d, dist->p, sizeof d);
        if (d[0] < 1 || d[0] > SNAP_MAX_WORLD) { failf(err, errlen, name, "DIST world_size is %lld", (long long)d[0]); goto fail; }
        if (d[1] < 0) { failf(err, errlen, name, "DIST samples_in_epoch is %lld", (long long)d[1]); goto fail; }
        s->world_size = (int)d[0];
        s->samples_in_epoch = d[1];
    }

    // 4. Tensors: exactly the shape's parameter count, finite values (the second moment >= 0).
    if (take_floats(&s->params, parm, num_params, 0, name, err, errlen)) goto fail;
    if (adam->p && (take_floats(&s->adam_m, adam, num_params, 0, name, err, errlen) ||
                    take_floats(&s->adam_v, adav, num_params, 1, name, err, errlen))) goto fail;
    return 0;
oom:
    snprintf(err, errlen, "snapshot '%s': out of memory", name);
fail:
    snapshot_free(s);
    return 1;
}

int snapshot_load(const char *path, Snapshot *s, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) { snprintf(err, errlen, "cannot open snapshot '%s': %s", path, strerror(errno)); return 1; }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "snapshot '%s' is not a regular file", path);
        close(fd);
        return 1;
    }
    const size_t len = (size_t)st.st_size;
    unsigned char *buf = malloc(len ? len : 1);
    if (!buf) {
        snprintf(err, errlen, "snapshot '%s': out of memory reading %zu bytes", path, len);
        close(fd);
        return 1;
    }
    size_t got = 0;
    while (got < len) {
        ssize_t k = read(fd, buf + got, len - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    int bad = got != len;
    close(fd);
    if (bad) { snprintf(err, errlen, "cannot read snapshot '%s' (%zu of %zu bytes)", path, got, len); free(buf); return 1; }
    int rc = snapshot_parse(buf, len, path, s, err, errlen);
    free(buf);
    return rc;
}

void snapshot_free(Snapshot *s) {
    free(s->config_yaml);
    free(s->vocab);
    free(s->params);
    free(s->adam_m);
    free(s->adam_v);
    memset(s, 0, sizeof *s);
}
