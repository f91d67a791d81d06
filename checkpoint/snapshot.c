// checkpoint/snapshot.c — atomic, CRC-checked snapshot files.
#include "checkpoint/snapshot.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "checkpoint/file_read.h"
#include "checkpoint/version.h"

#define SNAP_MAGIC "MINGPTSN"
#define TAG(a, b, c, d) ((uint32_t)(a) | (uint32_t)(b) << 8 | (uint32_t)(c) << 16 | (uint32_t)(d) << 24)
enum {
    TAG_CONF = TAG('C', 'O', 'N', 'F'), TAG_VOCB = TAG('V', 'O', 'C', 'B'),
    TAG_SHAP = TAG('S', 'H', 'A', 'P'), TAG_STAT = TAG('S', 'T', 'A', 'T'),
    TAG_PARM = TAG('P', 'A', 'R', 'M'), TAG_ADAM = TAG('A', 'D', 'A', 'M'),
    TAG_ADAV = TAG('A', 'D', 'A', 'V'), TAG_SCAL = TAG('S', 'C', 'A', 'L'), TAG_DIST = TAG('D', 'I', 'S', 'T'),
    TAG_WRTR = TAG('W', 'R', 'T', 'R'), TAG_EVAL = TAG('E', 'V', 'A', 'L'), TAG_TENS = TAG('T', 'E', 'N', 'S'),
    TAG_PREC = TAG('P', 'R', 'E', 'C'),
};

// Fixed-size records, stored as arrays of int64 / float so the layout is explicit.
enum { SHAP_V, SHAP_BLOCK, SHAP_L, SHAP_NH, SHAP_C, SHAP_N };
enum { STAT_ADAM_STEP, STAT_EPOCHS, STAT_ITER_IN_EPOCH, STAT_ITER_NUM, STAT_SEED,
       STAT_SCALER_GOOD, STAT_NUM_PARAMS, STAT_N };
// EVAL: f64 last test loss, f64 best test loss, i64 iteration of the best
#define EVAL_BYTES 24
// TENS: u32 count, then per tensor u32 name length, the name, i64 rows, i64 cols, i64 offset
#define TENS_NAME_MAX 63

// ---------------------------------------------------------------- writing
static void put_record(AtomicFile *a, uint32_t tag, const void *p, uint64_t n) {
    atomic_write(a, &tag, 4);
    atomic_write(a, &n, 8);
    atomic_write(a, p, (size_t)n);
}

// TENS for shape: the layout gpt_param_table gives. Returns a malloc'd payload (*n bytes).
static unsigned char *tens_payload(const GPTShape *shape, uint64_t *n) {
    const int nt = gpt_param_table(shape, NULL);
    ParamTensor *pt = calloc((size_t)nt, sizeof *pt);
    unsigned char *buf = pt ? malloc(4 + (size_t)nt * (4 + TENS_NAME_MAX + 24)) : NULL;
    if (!buf) { free(pt); return NULL; }
    gpt_param_table(shape, pt);
    size_t o = 0;
    const uint32_t count = (uint32_t)nt;
    memcpy(buf, &count, 4); o += 4;
    for (int i = 0; i < nt; i++) {
        const uint32_t len = (uint32_t)strlen(pt[i].name);
        const int64_t dims[3] = { pt[i].rows, pt[i].cols, (int64_t)pt[i].offset };
        memcpy(buf + o, &len, 4); o += 4;
        memcpy(buf + o, pt[i].name, len); o += len;
        memcpy(buf + o, dims, sizeof dims); o += sizeof dims;
    }
    free(pt);
    *n = o;
    return buf;
}

int snapshot_save_cancellable(const char *path, const Snapshot *s, const volatile sig_atomic_t *cancel, char *err,
                              size_t errlen) {
    uint64_t tens_n;
    unsigned char *tens = tens_payload(&s->shape, &tens_n);
    if (!tens) { snprintf(err, errlen, "cannot write snapshot '%s': out of memory", path); return 1; }
    AtomicFile a;
    int rc = atomic_open(&a, path, cancel, err, errlen);
    if (rc) { free(tens); goto out; }
    const uint16_t version[2] = { SNAP_FORMAT_MAJOR, SNAP_FORMAT_MINOR };
    atomic_write(&a, SNAP_MAGIC, 8);
    atomic_write(&a, version, 4);
    put_record(&a, TAG_CONF, s->config_yaml, strlen(s->config_yaml));
    put_record(&a, TAG_VOCB, s->vocab, (uint64_t)s->vocab_size * 4);
    int64_t shap[SHAP_N] = { s->shape.vocab_size, s->shape.block_size, s->shape.n_layer,
                             s->shape.n_head, s->shape.n_embd };
    put_record(&a, TAG_SHAP, shap, sizeof shap);
    int64_t stat[STAT_N] = { s->adam_step, s->epochs_run, s->iter_in_epoch, s->iter_num,
                             (int64_t)s->seed, s->scaler_good_steps, (int64_t)s->num_params };
    put_record(&a, TAG_STAT, stat, sizeof stat);
    float scale = s->loss_scale;
    put_record(&a, TAG_SCAL, &scale, 4);
    int64_t dist[2] = { s->world_size > 0 ? s->world_size : 1, s->samples_in_epoch };
    put_record(&a, TAG_DIST, dist, sizeof dist);
    put_record(&a, TAG_WRTR, MINGPT_VERSION, strlen(MINGPT_VERSION));
    unsigned char eval[EVAL_BYTES];
    const int64_t best_iter = s->best_iter;
    memcpy(eval, &s->last_test_loss, 8);
    memcpy(eval + 8, &s->best_test_loss, 8);
    memcpy(eval + 16, &best_iter, 8);
    put_record(&a, TAG_EVAL, eval, sizeof eval);
    put_record(&a, TAG_TENS, tens, tens_n);
    free(tens);
    if (s->precision[0]) put_record(&a, TAG_PREC, s->precision, strlen(s->precision));
    put_record(&a, TAG_PARM, s->params, (uint64_t)s->num_params * 4);
    if (s->adam_m && s->adam_v) {
        put_record(&a, TAG_ADAM, s->adam_m, (uint64_t)s->num_params * 4);
        put_record(&a, TAG_ADAV, s->adam_v, (uint64_t)s->num_params * 4);
    } else if (s->moments) {   // in pieces: every piece is read even after a failed write
        SnapMoments *sm = s->moments;
        for (int which = 0; which < 2; which++) {
            const uint32_t tag = which ? TAG_ADAV : TAG_ADAM;
            const uint64_t n = (uint64_t)s->num_params * 4;
            atomic_write(&a, &tag, 4);
            atomic_write(&a, &n, 8);
            for (size_t first = 0; first < s->num_params; first += sm->piece) {
                const size_t k = s->num_params - first < sm->piece ? s->num_params - first : sm->piece;
                if (sm->read(sm, which, first, k, sm->buf)) sm->failed = 1;
                if (!sm->failed) atomic_write(&a, sm->buf, k * sizeof(float));
            }
        }
        if (sm->failed && !a.failed) a.failed = EIO;   // the commit removes the temporary file
    }
    const uint32_t crc = a.crc;
    atomic_write(&a, &crc, 4);
    rc = atomic_commit(&a, err, errlen);
    if (rc == 1 && s->moments && s->moments->failed) {
        snprintf(err, errlen, "cannot write snapshot '%s': the AdamW moments could not be collected", path);
        return 1;
    }
out:
    if (rc == 1) {   // atomic_file's message names the temporary file; say which snapshot it was
        char why[1024];
        snprintf(why, sizeof why, "%s", err);
        snprintf(err, errlen, "cannot write snapshot '%s' (%s)", path, why);
    }
    return rc;
}

int snapshot_save(const char *path, const Snapshot *s, char *err, size_t errlen) {
    return snapshot_save_cancellable(path, s, NULL, err, errlen);
}

// ---------------------------------------------------------------- reading
// One validated loader: every count, length and shape in the file is checked against the
// file and against the shape before anything is sized or copied from it, so a file whose
// CRC was recomputed after an edit is refused like a damaged one.

#define failf(err, errlen, name, ...) file_malformed(err, errlen, "snapshot", name, __VA_ARGS__)

static void tag_name(uint32_t tag, char out[5]) {
    for (int i = 0; i < 4; i++) {
        unsigned char c = (unsigned char)(tag >> (8 * i));
        out[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    out[4] = 0;
}

// The records this reader knows; each may appear at most once.
static const uint32_t KNOWN[] = { TAG_CONF, TAG_VOCB, TAG_SHAP, TAG_STAT, TAG_SCAL, TAG_DIST,
                                  TAG_PARM, TAG_ADAM, TAG_ADAV, TAG_WRTR, TAG_EVAL, TAG_TENS, TAG_PREC };
enum { N_KNOWN = sizeof KNOWN / sizeof KNOWN[0] };
enum { R_CONF, R_VOCB, R_SHAP, R_STAT, R_SCAL, R_DIST, R_PARM, R_ADAM, R_ADAV, R_WRTR, R_EVAL, R_TENS, R_PREC };

typedef struct { const unsigned char *p; uint64_t n; size_t off; uint32_t tag; } Rec;

static int all_finite(const float *x, size_t n, int nonneg) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]) || (nonneg && x[i] < 0.0f)) return 0;
    return 1;
}

// Where the file keeps each tensor of this mingpt's layout: src[i] is the element offset in
// PARM of pt[i]; `moved` when some src[i] != pt[i].offset (a file of another layout).
typedef struct {
    ParamTensor *pt;
    int nt;
    size_t *src;
    bool moved;
} Layout;

static int take_floats(float **dst, const Rec *r, size_t want, int nonneg, const Layout *lay, const char *name,
                       char *err, size_t errlen) {
    char t[5];
    tag_name(r->tag, t);
    if (r->n != (uint64_t)want * 4)
        return failf(err, errlen, name, "record %s holds %llu bytes; the model's %zu parameters need %llu", t,
                     (unsigned long long)r->n, want, (unsigned long long)want * 4);
    *dst = malloc(want * 4);
    if (!*dst) { snprintf(err, errlen, "snapshot '%s': out of memory for %zu parameters", name, want); return 1; }
    if (!lay->moved) memcpy(*dst, r->p, want * 4);
    else
        for (int i = 0; i < lay->nt; i++)
            memcpy(*dst + lay->pt[i].offset, r->p + 4 * lay->src[i], lay->pt[i].numel * 4);
    if (!all_finite(*dst, want, nonneg))
        return failf(err, errlen, name, "record %s holds %s values", t, nonneg ? "negative or non-finite" : "non-finite");
    return 0;
}

static const ParamTensor *g_sort_pt;   // qsort has no context argument; single-threaded use
static int by_name(const void *a, const void *b) {
    return strcmp(g_sort_pt[*(const int *)a].name, g_sort_pt[*(const int *)b].name);
}
static const size_t *g_sort_src;
static int by_src(const void *a, const void *b) {
    const size_t x = g_sort_src[*(const int *)a], y = g_sort_src[*(const int *)b];
    return (x > y) - (x < y);
}

// TENS against the shape's layout: exactly its tensors, each once, with its shape, tiling PARM
// without gap or overlap. Fills lay->src and lay->moved.
static int parse_tens(const Rec *r, Layout *lay, size_t num_params, const char *name, char *err, size_t errlen) {
    const ParamTensor *pt = lay->pt;
    const int nt = lay->nt;
    int *order = malloc(sizeof(int) * (size_t)nt);
    bool *seen = calloc((size_t)nt, 1);
    int rc = 1;
    if (!order || !seen) { snprintf(err, errlen, "snapshot '%s': out of memory", name); goto out; }
    for (int i = 0; i < nt; i++) order[i] = i;
    g_sort_pt = pt;
    qsort(order, (size_t)nt, sizeof *order, by_name);
    uint32_t count;
    if (r->n < 4) { failf(err, errlen, name, "record TENS holds %llu bytes", (unsigned long long)r->n); goto out; }
    memcpy(&count, r->p, 4);
    if (count != (uint32_t)nt) {
        failf(err, errlen, name, "TENS lists %u tensors; the shape in SHAP has %d", count, nt);
        goto out;
    }
    size_t o = 4;
    for (uint32_t k = 0; k < count; k++) {
        uint32_t len;
        if (r->n - o < 4) { failf(err, errlen, name, "TENS is cut short at tensor %u", k); goto out; }
        memcpy(&len, r->p + o, 4);
        o += 4;
        if (len < 1 || len > TENS_NAME_MAX || r->n - o < (uint64_t)len + 24) {
            failf(err, errlen, name, "TENS tensor %u: a name of %u bytes (at most %d, inside the record)", k, len,
                  TENS_NAME_MAX);
            goto out;
        }
        char tname[TENS_NAME_MAX + 1];
        memcpy(tname, r->p + o, len);
        tname[len] = 0;
        o += len;
        int64_t dims[3];
        memcpy(dims, r->p + o, sizeof dims);
        o += sizeof dims;
        for (size_t c = 0; c < len; c++)
            if (tname[c] < 0x21 || tname[c] > 0x7e) tname[c] = '?';   // printable in messages
        // find the tensor of this name in the layout (binary search over the sorted names)
        int lo = 0, hi = nt - 1, hit = -1;
        while (lo <= hi && hit < 0) {
            const int mid = lo + (hi - lo) / 2, c = strcmp(tname, pt[order[mid]].name);
            if (c == 0) hit = order[mid];
            else if (c < 0) hi = mid - 1;
            else lo = mid + 1;
        }
        if (hit < 0 || strlen(tname) != len) {
            failf(err, errlen, name, "TENS names a tensor '%s' that a model of this shape does not have", tname);
            goto out;
        }
        if (seen[hit]) { failf(err, errlen, name, "TENS lists tensor '%s' twice", tname); goto out; }
        seen[hit] = true;
        if (dims[0] != pt[hit].rows || dims[1] != pt[hit].cols) {
            failf(err, errlen, name, "TENS gives tensor '%s' the shape (%lld, %lld); this model's is (%d, %d)", tname,
                  (long long)dims[0], (long long)dims[1], pt[hit].rows, pt[hit].cols);
            goto out;
        }
        if (dims[2] < 0 || (uint64_t)dims[2] > num_params || pt[hit].numel > num_params - (size_t)dims[2]) {
            failf(err, errlen, name, "TENS places tensor '%s' at offset %lld, outside the %zu parameters", tname,
                  (long long)dims[2], num_params);
            goto out;
        }
        lay->src[hit] = (size_t)dims[2];
        if (lay->src[hit] != pt[hit].offset) lay->moved = true;
    }
    if (o != r->n) { failf(err, errlen, name, "TENS has %llu bytes after its last tensor", (unsigned long long)(r->n - o)); goto out; }
    // Every tensor once with its size, each inside PARM: they tile it iff consecutive by offset.
    g_sort_src = lay->src;
    qsort(order, (size_t)nt, sizeof *order, by_src);
    size_t end = 0;
    for (int i = 0; i < nt; i++) {
        const ParamTensor *t = &pt[order[i]];
        const size_t at = lay->src[order[i]];
        if (at < end) {
            failf(err, errlen, name, "TENS: tensor '%s' at offset %zu overlaps '%s', which ends at %zu", t->name, at,
                  pt[order[i - 1]].name, end);
            goto out;
        }
        if (at > end) {
            failf(err, errlen, name, "TENS: tensor '%s' at offset %zu leaves parameters %zu to %zu unused", t->name, at,
                  end, at - 1);
            goto out;
        }
        end += t->numel;
    }
    rc = 0;
out:
    free(order);
    free(seen);
    return rc;
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
    uint16_t version[2];
    uint32_t stored_crc;
    memcpy(version, buf + 8, 4);
    const unsigned major = version[0], minor = version[1];
    if (major > SNAP_FORMAT_MAJOR) {
        snprintf(err, errlen, "snapshot '%s' has format version %u.%u, written by a newer mingpt; this mingpt reads "
                 "format %d (up to %d.%d): use the mingpt that wrote it", name, major, minor, SNAP_FORMAT_MAJOR,
                 SNAP_FORMAT_MAJOR, SNAP_FORMAT_MINOR);
        return 1;
    }
    if (major != SNAP_FORMAT_MAJOR)
        return failf(err, errlen, name, "format version %u.%u is not one mingpt ever wrote", major, minor);
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
    (void)crc;
#endif

    // 1. Split into records: every header and payload inside the file, each known tag once,
    //    unknown ones only from a newer minor version.
    Rec rec[N_KNOWN] = {{0}};
    int n_records = 0, n_skipped = 0;
    char skipped[64] = "";
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
        int k = 0;
        while (k < N_KNOWN && KNOWN[k] != tag) k++;
        if (k < N_KNOWN) {
            if (rec[k].p) return failf(err, errlen, name, "record %s appears twice (offsets %zu and %zu)", t,
                                       rec[k].off, off);
            rec[k] = (Rec){ p, n, off, tag };
        } else if (minor > SNAP_FORMAT_MINOR) {   // added by a newer writer of this major version
            if (n_skipped++ < 8) snprintf(skipped + strlen(skipped), sizeof skipped - strlen(skipped), "%s%s",
                                          n_skipped > 1 ? ", " : "", t);
        } else {
            return failf(err, errlen, name, "record %s at offset %zu is not part of format %u.%u", t, off, major, minor);
        }
        p += n;
    }
    if (n_skipped)
        snprintf(s->note, sizeof s->note, "snapshot '%s' has format version %u.%u, newer than this mingpt's %d.%d: "
                 "skipped %d record%s it does not know (%s%s)", name, major, minor, SNAP_FORMAT_MAJOR,
                 SNAP_FORMAT_MINOR, n_skipped, n_skipped == 1 ? "" : "s", skipped, n_skipped > 8 ? ", ..." : "");
    const Rec *conf = &rec[R_CONF], *vocb = &rec[R_VOCB], *shap = &rec[R_SHAP], *stat = &rec[R_STAT],
              *scal = &rec[R_SCAL], *dist = &rec[R_DIST], *parm = &rec[R_PARM], *adam = &rec[R_ADAM],
              *adav = &rec[R_ADAV], *wrtr = &rec[R_WRTR], *eval = &rec[R_EVAL], *tens = &rec[R_TENS],
              *prec = &rec[R_PREC];
    const char *missing = !conf->p ? "CONF" : !vocb->p ? "VOCB" : !shap->p ? "SHAP" : !stat->p ? "STAT"
                        : !parm->p ? "PARM" : NULL;
    if (missing) return failf(err, errlen, name, "record %s is missing", missing);
    if (!adam->p != !adav->p) return failf(err, errlen, name, "records ADAM and ADAV must come together");
    char note[sizeof s->note];
    memcpy(note, s->note, sizeof note);

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
    Layout lay = { NULL, 0, NULL, false };
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
        if (!(s->loss_scale > 0.0f && s->loss_scale <= SNAP_MAX_LOSS_SCALE))
            { failf(err, errlen, name, "SCAL loss scale %g is outside (0, %g]", (double)s->loss_scale,
                    (double)SNAP_MAX_LOSS_SCALE); goto fail; }
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

    // 4. Format 1.1: the writer, the test losses.
    if (wrtr->p) {
        if (wrtr->n < 1 || wrtr->n >= sizeof s->writer)
            { failf(err, errlen, name, "record WRTR holds %llu bytes (1 to %zu)", (unsigned long long)wrtr->n,
                    sizeof s->writer - 1); goto fail; }
        for (uint64_t i = 0; i < wrtr->n; i++)
            if (wrtr->p[i] < 0x20 || wrtr->p[i] > 0x7e) { failf(err, errlen, name, "record WRTR is not printable text"); goto fail; }
        memcpy(s->writer, wrtr->p, wrtr->n);
    }
    s->last_test_loss = s->best_test_loss = NAN;
    s->best_iter = -1;
    if (eval->p) {
        int64_t best_iter;
        if (eval->n != EVAL_BYTES) { failf(err, errlen, name, "record EVAL holds %llu bytes, not %d",
                                           (unsigned long long)eval->n, EVAL_BYTES); goto fail; }
        memcpy(&s->last_test_loss, eval->p, 8);
        memcpy(&s->best_test_loss, eval->p + 8, 8);
        memcpy(&best_iter, eval->p + 16, 8);
        const double l[2] = { s->last_test_loss, s->best_test_loss };
        for (int i = 0; i < 2; i++)
            if (!isnan(l[i]) && !(isfinite(l[i]) && l[i] >= 0))
                { failf(err, errlen, name, "EVAL %s test loss is %g", i ? "best" : "last", l[i]); goto fail; }
        if (best_iter < -1) { failf(err, errlen, name, "EVAL best iteration is %lld", (long long)best_iter); goto fail; }
        s->best_iter = (long)best_iter;
    }

    // Format 1.2: the precision the run trained in (its resolved amp dtype).
    if (prec->p) {
        static const char *const NAMES[] = { "float32", "bfloat16", "float16" };
        int ok = 0;
        for (int i = 0; i < 3; i++)
            ok |= prec->n == strlen(NAMES[i]) && memcmp(prec->p, NAMES[i], prec->n) == 0;
        if (!ok) { failf(err, errlen, name, "record PREC is not float32, bfloat16 or float16"); goto fail; }
        memcpy(s->precision, prec->p, prec->n);
    }

    // 5. Tensors: where TENS puts them (or this layout), exactly the shape's parameter count,
    //    finite values (the second moment >= 0).
    lay.nt = gpt_param_table(&s->shape, NULL);
    lay.pt = calloc((size_t)lay.nt, sizeof *lay.pt);
    lay.src = calloc((size_t)lay.nt, sizeof *lay.src);
    if (!lay.pt || !lay.src) goto oom;
    gpt_param_table(&s->shape, lay.pt);
    if (tens->p && parse_tens(tens, &lay, num_params, name, err, errlen)) goto fail;
    if (take_floats(&s->params, parm, num_params, 0, &lay, name, err, errlen)) goto fail;
    if (adam->p && (take_floats(&s->adam_m, adam, num_params, 0, &lay, name, err, errlen) ||
                    take_floats(&s->adam_v, adav, num_params, 1, &lay, name, err, errlen))) goto fail;
    free(lay.pt);
    free(lay.src);
    s->format_major = major;
    s->format_minor = minor;
    s->file_bytes = len;
    s->crc = stored_crc;
    memcpy(s->note, note, sizeof note);
    return 0;
oom:
    snprintf(err, errlen, "snapshot '%s': out of memory", name);
fail:
    free(lay.pt);
    free(lay.src);
    snapshot_free(s);
    return 1;
}

int snapshot_load(const char *path, Snapshot *s, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    unsigned char *buf;
    size_t len;
    if (file_read_regular(path, "snapshot", &buf, &len, err, errlen)) return 1;
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
