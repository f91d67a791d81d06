// tests/tools/snapedit.c — crafts snapshot files for the bad-input tests: edits records of
// a mingpt snapshot (checkpoint/snapshot.h's format) and recomputes the CRC32, so the file
// reaches the record checks behind the checksum. Independent of the loader on purpose:
// it knows only the container (magic, version, [tag][u64 len][payload]..., CRC32).
//
//   snapedit IN OUT OP [OP...]     ops, applied left to right:
//     set TAG I VALUE   int64 element I of record TAG (STAT, SHAP, DIST) := VALUE
//     setf TAG I VALUE  float element I of record TAG (SCAL, PARM, ...) := VALUE
//     len TAG N         the length field of TAG := N (payload untouched)
//     resize TAG N      payload of TAG cut or zero-extended to N bytes (length updated)
//     dup TAG           TAG's record written twice
//     drop TAG          TAG's record removed
//     add TAG N         a new record TAG of N zero bytes at the end
//     version N         format version word := N (u16 major | u16 minor << 16: 1 is 1.0, 131073 is 1.2)
//     trunc N           keep the first N bytes (no CRC recomputed after this)
//     flip OFF          XOR byte OFF with 0x01 (no CRC recomputed after this)
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

typedef struct { char tag[4]; uint64_t n; size_t have; unsigned char *p; } Rec;   // n: length field, have: payload bytes

static void die(const char *m) { fprintf(stderr, "snapedit: %s\n", m); exit(2); }

static Rec *find(Rec *r, int n, const char *tag) {
    for (int i = 0; i < n; i++) if (memcmp(r[i].tag, tag, 4) == 0) return &r[i];
    die("no such record");
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 4) die("usage: snapedit IN OUT OP [OP...]");
    FILE *f = fopen(argv[1], "rb");
    if (!f) die("cannot open IN");
    static unsigned char buf[1 << 26];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    if (len < 16) die("IN too short");
    uint32_t version;
    memcpy(&version, buf + 8, 4);
    Rec r[64];
    int nr = 0;
    for (size_t off = 12; off + 12 <= len - 4 && nr < 64;) {
        memcpy(r[nr].tag, buf + off, 4);
        memcpy(&r[nr].n, buf + off + 4, 8);
        if (r[nr].n > len - 4 - off - 12) die("IN has a record longer than the file");
        r[nr].have = (size_t)r[nr].n;
        r[nr].p = malloc(r[nr].have ? r[nr].have : 1);
        memcpy(r[nr].p, buf + off + 12, r[nr].have);
        off += 12 + r[nr].n;
        nr++;
    }
    long trunc = -1, flip = -1;
    for (int i = 3; i < argc; i++) {
        const char *op = argv[i];
        if (!strcmp(op, "set") || !strcmp(op, "setf")) {
            Rec *x = find(r, nr, argv[i + 1]);
            size_t k = (size_t)atol(argv[i + 2]), w = !strcmp(op, "set") ? 8 : 4;
            if ((k + 1) * w > x->have) die("element index outside the record");
            if (!strcmp(op, "set")) { int64_t v = strtoll(argv[i + 3], NULL, 0); memcpy(x->p + 8 * k, &v, 8); }
            else { float v = strtof(argv[i + 3], NULL); memcpy(x->p + 4 * k, &v, 4); }
            i += 3;
        } else if (!strcmp(op, "len")) { find(r, nr, argv[i + 1])->n = strtoull(argv[i + 2], NULL, 0); i += 2; }
        else if (!strcmp(op, "resize")) {
            Rec *x = find(r, nr, argv[i + 1]);
            uint64_t n = strtoull(argv[i + 2], NULL, 0);
            if (n > (1u << 25)) die("resize too large");
            x->p = realloc(x->p, n ? n : 1);
            if (n > x->have) memset(x->p + x->have, 0, n - x->have);
            x->n = x->have = (size_t)n;
            i += 2;
        } else if (!strcmp(op, "dup")) {
            Rec *x = find(r, nr, argv[i + 1]);
            r[nr] = *x;
            r[nr].p = malloc(x->have ? x->have : 1);
            memcpy(r[nr].p, x->p, x->have);
            nr++;
            i += 1;
        } else if (!strcmp(op, "drop")) {
            Rec *x = find(r, nr, argv[i + 1]);
            free(x->p);
            memmove(x, x + 1, (size_t)(r + nr - x - 1) * sizeof *x);
            nr--;
            i += 1;
        } else if (!strcmp(op, "add")) {
            if (nr == 64 || strlen(argv[i + 1]) != 4) die("add: a 4-character tag, at most 64 records");
            uint64_t n = strtoull(argv[i + 2], NULL, 0);
            if (n > (1u << 20)) die("add: too large");
            memcpy(r[nr].tag, argv[i + 1], 4);
            r[nr].n = r[nr].have = (size_t)n;
            r[nr].p = calloc(n ? n : 1, 1);
            nr++;
            i += 2;
        } else if (!strcmp(op, "version")) { version = (uint32_t)atol(argv[i + 1]); i += 1; }
        else if (!strcmp(op, "trunc")) { trunc = atol(argv[i + 1]); i += 1; }
        else if (!strcmp(op, "flip")) { flip = atol(argv[i + 1]); i += 1; }
        else die("unknown op");
    }
    // Write: magic, version, records (after a "len" edit: the edited length field with the
    // original payload), CRC over everything before it.
    static unsigned char out[1 << 26];
    size_t o = 0;
    memcpy(out, buf, 8); o = 8;
    memcpy(out + o, &version, 4); o += 4;
    for (int k = 0; k < nr; k++) {
        memcpy(out + o, r[k].tag, 4); o += 4;
        memcpy(out + o, &r[k].n, 8); o += 8;
        const size_t n = r[k].have;
        memcpy(out + o, r[k].p, n); o += n;
    }
    uint32_t crc = (uint32_t)crc32(0L, out, (uInt)o);
    memcpy(out + o, &crc, 4); o += 4;
    if (flip >= 0 && (size_t)flip < o) out[flip] ^= 1;
    if (trunc >= 0 && (size_t)trunc < o) o = (size_t)trunc;
    for (int k = 0; k < nr; k++) free(r[k].p);
    f = fopen(argv[2], "wb");
    if (!f || fwrite(out, 1, o, f) != o || fclose(f)) die("cannot write OUT");
    return 0;
}
