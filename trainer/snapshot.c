// trainer/snapshot.c — atomic, CRC-checked snapshot files.
#include "trainer/snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define SNAP_MAGIC "MINGPTSN"
#define SNAP_VERSION 1u
#define TAG(a, b, c, d) ((uint32_t)(a) | (uint32_t)(b) << 8 | (uint32_t)(c) << 16 | (uint32_t)(d) << 24)
enum {
    TAG_CONF = TAG('C', 'O', 'N', 'F'), TAG_VOCB = TAG('V', 'O', 'C', 'B'),
    TAG_SHAP = TAG('S', 'H', 'A', 'P'), TAG_STAT = TAG('S', 'T', 'A', 'T'),
    TAG_PARM = TAG('P', 'A', 'R', 'M'), TAG_ADAM = TAG('A', 'D', 'A', 'M'),
    TAG_ADAV = TAG('A', 'D', 'A', 'V'),
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

int snapshot_save(const char *path, const Snapshot *s, char *err, size_t errlen) {
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
    put_record(&w, TAG('S', 'C', 'A', 'L'), &scale, 4);
    int64_t dist[2] = { s->world_size > 0 ? s->world_size : 1, s->samples_in_epoch };
    put_record(&w, TAG('D', 'I', 'S', 'T'), dist, sizeof dist);
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
static unsigned char *read_all(const char *path, size_t *len, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) { snprintf(err, errlen, "cannot open snapshot '%s': %s", path, strerror(errno)); return NULL; }
    unsigned char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : (1u << 20);
            unsigned char *nb = realloc(buf, cap);
            if (!nb) { free(buf); fclose(f); snprintf(err, errlen, "snapshot '%s': out of memory", path); return NULL; }
            buf = nb;
        }
        size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (k == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) { free(buf); snprintf(err, errlen, "cannot read snapshot '%s'", path); return NULL; }
    *len = n;
    return buf;
}

static int copy_floats(float **dst, const unsigned char *p, uint64_t len, size_t want) {
    if (len != (uint64_t)want * 4) return 1;
    *dst = malloc(want ? want * 4 : 1);
    if (!*dst) return 1;
    memcpy(*dst, p, want * 4);
    return 0;
}

int snapshot_load(const char *path, Snapshot *s, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    size_t len;
    unsigned char *buf = read_all(path, &len, err, errlen);
    if (!buf) return 1;
    int rc = 1;
    if (len < 16 || memcmp(buf, SNAP_MAGIC, 8) != 0) {
        snprintf(err, errlen, "'%s' is not a mingpt snapshot (bad magic)", path);
        goto done;
    }
    uint32_t version, stored_crc;
    memcpy(&version, buf + 8, 4);
    if (version != SNAP_VERSION) {
        snprintf(err, errlen, "snapshot '%s' has format version %u; this mingpt reads version %u", path, version, SNAP_VERSION);
        goto done;
    }
    memcpy(&stored_crc, buf + len - 4, 4);
    uLong crc = crc32(0L, Z_NULL, 0);
    for (size_t off = 0; off < len - 4;) {
        uInt k = (len - 4 - off) > (1u << 30) ? (1u << 30) : (uInt)(len - 4 - off);
        crc = crc32(crc, buf + off, k);
        off += k;
    }
    if ((uint32_t)crc != stored_crc) {
        snprintf(err, errlen, "snapshot '%s' is corrupt or truncated (CRC32 mismatch)", path);
        goto done;
    }
    int have_shap = 0, have_stat = 0;
    int64_t stat[STAT_N] = {0};
    const unsigned char *p = buf + 12, *end = buf + len - 4;
    // PARM/ADAM/ADAV are checked against num_params from STAT, which precedes them.
    while (p < end) {
        uint32_t tag; uint64_t n;
        if (end - p < 12) goto malformed;
        memcpy(&tag, p, 4); memcpy(&n, p + 4, 8); p += 12;
        if ((uint64_t)(end - p) < n) goto malformed;
        switch (tag) {
        case TAG_CONF:
            s->config_yaml = malloc(n + 1);
            if (!s->config_yaml) goto malformed;
            memcpy(s->config_yaml, p, n); s->config_yaml[n] = 0;
            break;
        case TAG_VOCB:
            if (n % 4 || n == 0) goto malformed;
            s->vocab_size = (int)(n / 4);
            s->vocab = malloc(n);
            if (!s->vocab) goto malformed;
            memcpy(s->vocab, p, n);
            break;
        case TAG_SHAP: {
            int64_t shap[SHAP_N];
            if (n != sizeof shap) goto malformed;
            memcpy(shap, p, n);
            s->shape.vocab_size = (int)shap[SHAP_V]; s->shape.block_size = (int)shap[SHAP_BLOCK];
            s->shape.n_layer = (int)shap[SHAP_L]; s->shape.n_head = (int)shap[SHAP_NH];
            s->shape.n_embd = (int)shap[SHAP_C];
            have_shap = 1;
            break;
        }
        case TAG_STAT:
            if (n != sizeof stat) goto malformed;
            memcpy(stat, p, n);
            s->adam_step = stat[STAT_ADAM_STEP]; s->epochs_run = stat[STAT_EPOCHS];
            s->iter_in_epoch = stat[STAT_ITER_IN_EPOCH]; s->iter_num = stat[STAT_ITER_NUM];
            s->seed = (uint64_t)stat[STAT_SEED]; s->scaler_good_steps = stat[STAT_SCALER_GOOD];
            s->num_params = (size_t)stat[STAT_NUM_PARAMS];
            have_stat = 1;
            break;
        case TAG('S', 'C', 'A', 'L'):
            if (n != 4) goto malformed;
            memcpy(&s->loss_scale, p, 4);
            break;
        case TAG('D', 'I', 'S', 'T'): {
            int64_t dist[2];
            if (n != sizeof dist) goto malformed;
            memcpy(dist, p, n);
            if (dist[0] < 1 || dist[0] > INT32_MAX || dist[1] < 0) goto malformed;
            s->world_size = (int)dist[0];
            s->samples_in_epoch = dist[1];
            break;
        }
        case TAG_PARM: if (!have_stat || copy_floats(&s->params, p, n, s->num_params)) goto malformed; break;
        case TAG_ADAM: if (!have_stat || copy_floats(&s->adam_m, p, n, s->num_params)) goto malformed; break;
        case TAG_ADAV: if (!have_stat || copy_floats(&s->adam_v, p, n, s->num_params)) goto malformed; break;
        default: break;   // unknown records from newer writers are skipped
        }
        p += n;
    }
    if (!s->config_yaml || !s->vocab || !have_shap || !have_stat || !s->params) goto malformed;
    if (s->shape.vocab_size != s->vocab_size) goto malformed;
    rc = 0;
    goto done;
malformed:
    snprintf(err, errlen, "snapshot '%s' is malformed (missing or inconsistent records)", path);
    snapshot_free(s);
done:
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
