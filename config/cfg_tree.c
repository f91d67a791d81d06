// config/cfg_tree.c — generic config tree, YAML 1.1 scalar typing, libyaml load and dump.
#include "config/cfg_tree.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

// ------------------------------------------------------------------------- helpers

static void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) abort();  // out of memory: nothing sensible to report through err
    return q;
}

char *cfg_strdup(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = xrealloc(NULL, n);
    memcpy(d, s, n);
    return d;
}

static char *strndup_x(const char *s, size_t n) {
    char *d = xrealloc(NULL, n + 1);
    memcpy(d, s, n);
    d[n] = 0;
    return d;
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

size_t cfg_edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    size_t *row = xrealloc(NULL, (lb + 1) * sizeof *row);
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    size_t d = row[lb];
    free(row);
    return d;
}

// Growable string used for repr and the YAML emitter.
typedef struct { char *p; size_t n, cap; } Sb;

static void sb_add(Sb *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (b->n + n + 1 > cap) cap *= 2;
        b->p = xrealloc(b->p, cap);
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void sb_str(Sb *b, const char *s) { sb_add(b, s, strlen(s)); }

// ------------------------------------------------------------------------- nodes

CfgNode *cfg_new(CfgType type) {
    CfgNode *n = calloc(1, sizeof *n);
    if (!n) abort();
    n->type = type;
    return n;
}
CfgNode *cfg_new_null(void) { return cfg_new(CFG_NULL); }
CfgNode *cfg_new_bool(bool b) { CfgNode *n = cfg_new(CFG_BOOL); n->b = b; return n; }
CfgNode *cfg_new_int(long long i) { CfgNode *n = cfg_new(CFG_INT); n->i = i; return n; }
CfgNode *cfg_new_float(double f) { CfgNode *n = cfg_new(CFG_FLOAT); n->f = f; return n; }
CfgNode *cfg_new_str(const char *s) { CfgNode *n = cfg_new(CFG_STRING); n->s = cfg_strdup(s ? s : ""); return n; }
CfgNode *cfg_new_str_n(const char *s, size_t n) { CfgNode *c = cfg_new(CFG_STRING); c->s = strndup_x(s, n); return c; }
CfgNode *cfg_new_list(void) { return cfg_new(CFG_LIST); }
CfgNode *cfg_new_map(void) { return cfg_new(CFG_MAP); }

static void loc_clear(CfgLoc *l) {
    free(l->file);
    free(l->override);
    memset(l, 0, sizeof *l);
}
static void loc_copy(CfgLoc *d, const CfgLoc *s) {
    d->file = cfg_strdup(s->file);
    d->override = cfg_strdup(s->override);
    d->line = s->line;
    d->col = s->col;
}

// ------------------------------------------------------------------------- key index

// Maps with many keys (a crafted file can hold 100k) get an open-addressing hash of their
// keys, so that loading, merging and looking up stay linear instead of quadratic. It is kept
// up to date by push_kid / cfg_list_del / cfg_copy, the only places that add or remove entries.
#define INDEX_MIN 16  // below this many keys a linear scan is as fast

typedef struct {
    size_t pos;   // position + 1 of an entry in kids, 0 for an empty slot
    size_t hash;  // its key's hash (compared first: no trip to the key's memory on a mismatch)
} IndexSlot;

struct CfgIndex {
    size_t cap;       // power of two, at least twice the number of keys
    IndexSlot *slot;
};

static size_t key_hash(const char *k) {
    size_t h = 1469598103934665603ull;  // FNV-1a
    for (; *k; k++) h = (h ^ (unsigned char)*k) * 1099511628211ull;
    h ^= h >> 32;  // FNV's low bits depend only on the characters' low bits: mix the high ones in
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 29);
}

static void index_free(CfgNode *m) {
    if (!m->index) return;
    free(m->index->slot);
    free(m->index);
    m->index = NULL;
}

static void index_insert(struct CfgIndex *x, const CfgNode *m, size_t pos) {
    if (!m->kids[pos]->key) return;
    size_t h = key_hash(m->kids[pos]->key), i = h & (x->cap - 1);
    while (x->slot[i].pos) i = (i + 1) & (x->cap - 1);
    x->slot[i] = (IndexSlot){pos + 1, h};
}

// (Re)builds m's index from its entries (maps of INDEX_MIN keys or more).
static void index_build(CfgNode *m) {
    index_free(m);
    if (m->type != CFG_MAP || m->n < INDEX_MIN) return;
    struct CfgIndex *x = calloc(1, sizeof *x);
    if (!x) abort();
    x->cap = 64;
    while (x->cap < 2 * m->n) x->cap *= 2;
    x->slot = calloc(x->cap, sizeof *x->slot);
    if (!x->slot) abort();
    for (size_t i = 0; i < m->n; i++) index_insert(x, m, i);
    m->index = x;
}

// Keeps the index after kids[n - 1] was appended.
static void index_appended(CfgNode *m) {
    if (m->type != CFG_MAP || m->n < INDEX_MIN) return;
    if (!m->index || 2 * m->n > m->index->cap) index_build(m);
    else index_insert(m->index, m, m->n - 1);
}

void cfg_free(CfgNode *n) {
    if (!n) return;
    index_free(n);
    for (size_t i = 0; i < n->n; i++) cfg_free(n->kids[i]);
    free(n->kids);
    free(n->s);
    free(n->key);
    loc_clear(&n->loc);
    loc_clear(&n->key_loc);
    free(n);
}

CfgNode *cfg_copy(const CfgNode *n) {
    if (!n) return NULL;
    CfgNode *c = cfg_new(n->type);
    c->b = n->b;
    c->i = n->i;
    c->f = n->f;
    c->s = cfg_strdup(n->s);
    c->quoted = n->quoted;
    c->quote = n->quote;
    c->key = cfg_strdup(n->key);
    c->merged = n->merged;
    loc_copy(&c->loc, &n->loc);
    loc_copy(&c->key_loc, &n->key_loc);
    if (n->n) {
        c->kids = xrealloc(NULL, n->n * sizeof *c->kids);
        c->cap = c->n = n->n;
        for (size_t i = 0; i < n->n; i++) c->kids[i] = cfg_copy(n->kids[i]);
        index_build(c);
    }
    return c;
}

void cfg_set_loc(CfgNode *n, const char *file, int line, int col) {
    loc_clear(&n->loc);
    n->loc.file = cfg_strdup(file);
    n->loc.line = line;
    n->loc.col = col;
}

void cfg_set_override(CfgNode *n, const char *text) {
    loc_clear(&n->loc);
    n->loc.override = cfg_strdup(text);
    if (n->key) {
        loc_clear(&n->key_loc);
        n->key_loc.override = cfg_strdup(text);
    }
    for (size_t i = 0; i < n->n; i++) cfg_set_override(n->kids[i], text);
}

static void push_kid(CfgNode *p, CfgNode *v) {
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 4;
        p->kids = xrealloc(p->kids, p->cap * sizeof *p->kids);
    }
    p->kids[p->n++] = v;
    index_appended(p);
}

long cfg_map_find(const CfgNode *m, const char *key) {
    if (!m || m->type != CFG_MAP) return -1;
    if (m->index) {
        const struct CfgIndex *x = m->index;
        size_t h = key_hash(key);
        for (size_t i = h & (x->cap - 1); x->slot[i].pos; i = (i + 1) & (x->cap - 1)) {
            if (x->slot[i].hash != h) continue;
            const CfgNode *k = m->kids[x->slot[i].pos - 1];
            if (k->key && strcmp(k->key, key) == 0) return (long)(x->slot[i].pos - 1);
        }
        return -1;
    }
    for (size_t i = 0; i < m->n; i++)
        if (strcmp(m->kids[i]->key, key) == 0) return (long)i;
    return -1;
}

CfgNode *cfg_map_get(const CfgNode *m, const char *key) {
    long i = cfg_map_find(m, key);
    return i < 0 ? NULL : m->kids[i];
}

void cfg_map_put(CfgNode *m, const char *key, CfgNode *v) {
    char *k = cfg_strdup(key);  // key may point into the entry being replaced
    free(v->key);
    v->key = k;
    long i = cfg_map_find(m, key);
    if (i < 0) {
        push_kid(m, v);
        return;
    }
    CfgNode *old = m->kids[i];
    if (!v->key_loc.file && !v->key_loc.override) {
        loc_clear(&v->key_loc);
        loc_copy(&v->key_loc, &old->key_loc);
    }
    cfg_free(old);
    m->kids[i] = v;
}

bool cfg_map_del(CfgNode *m, const char *key) {
    long i = cfg_map_find(m, key);
    if (i < 0) return false;
    cfg_list_del(m, (size_t)i);
    return true;
}

void cfg_list_push(CfgNode *l, CfgNode *v) {
    free(v->key);
    v->key = NULL;
    push_kid(l, v);
}

void cfg_list_del(CfgNode *l, size_t i) {
    cfg_free(l->kids[i]);
    memmove(l->kids + i, l->kids + i + 1, (l->n - i - 1) * sizeof *l->kids);
    l->n--;
    if (l->index) index_build(l);  // positions moved
}

// Parses a list index: decimal digits only.
static bool parse_index(const char *s, size_t len, size_t *out) {
    if (len == 0 || len > 18) return false;
    size_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)s[i])) return false;
        v = v * 10 + (size_t)(s[i] - '0');
    }
    *out = v;
    return true;
}

CfgNode *cfg_select(const CfgNode *root, const char *path) {
    const CfgNode *cur = root;
    const char *p = path;
    while (cur && *p) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        if (cur->type == CFG_MAP) {
            char *k = strndup_x(p, len);
            cur = cfg_map_get(cur, k);
            free(k);
        } else if (cur->type == CFG_LIST) {
            size_t idx;
            cur = parse_index(p, len, &idx) && idx < cur->n ? cur->kids[idx] : NULL;
        } else {
            cur = NULL;
        }
        p += len;
        if (*p == '.') p++;
    }
    return (CfgNode *)cur;
}

void cfg_merge(CfgNode *dst, const CfgNode *src) {
    for (size_t i = 0; i < src->n; i++) {
        const CfgNode *s = src->kids[i];
        CfgNode *d = cfg_map_get(dst, s->key);
        if (d && d->type == CFG_MAP && s->type == CFG_MAP) {
            cfg_merge(d, s);
            // The merged map now "comes from" src for messages about it.
            loc_clear(&d->loc);
            loc_copy(&d->loc, &s->loc);
            loc_clear(&d->key_loc);
            loc_copy(&d->key_loc, &s->key_loc);
        } else {
            cfg_map_put(dst, s->key, cfg_copy(s));
        }
    }
}

static bool is_number(const CfgNode *n) { return n->type == CFG_INT || n->type == CFG_FLOAT; }
static double num_value(const CfgNode *n) { return n->type == CFG_INT ? (double)n->i : n->f; }

bool cfg_equal(const CfgNode *a, const CfgNode *b) {
    if (is_number(a) && is_number(b)) {
        if (a->type == CFG_INT && b->type == CFG_INT) return a->i == b->i;
        return num_value(a) == num_value(b);
    }
    if (a->type != b->type) return false;
    switch (a->type) {
    case CFG_NULL: return true;
    case CFG_BOOL: return a->b == b->b;
    case CFG_STRING: return strcmp(a->s, b->s) == 0;
    case CFG_LIST:
        if (a->n != b->n) return false;
        for (size_t i = 0; i < a->n; i++)
            if (!cfg_equal(a->kids[i], b->kids[i])) return false;
        return true;
    case CFG_MAP:
        if (a->n != b->n) return false;
        for (size_t i = 0; i < a->n; i++) {
            const CfgNode *o = cfg_map_get(b, a->kids[i]->key);
            if (!o || !cfg_equal(a->kids[i], o)) return false;
        }
        return true;
    default: return false;
    }
}

// ------------------------------------------------------------------------- rendering

const char *cfg_type_name(CfgType t) {
    switch (t) {
    case CFG_NULL: return "NoneType";
    case CFG_BOOL: return "bool";
    case CFG_INT: return "int";
    case CFG_FLOAT: return "float";
    case CFG_STRING: return "str";
    case CFG_LIST: return "list";
    case CFG_MAP: return "dict";
    }
    return "?";
}

int cfg_format_float(double x, char *buf, size_t n, bool yaml_style) {
    if (isnan(x)) return snprintf(buf, n, "%s", yaml_style ? ".nan" : "nan");
    if (isinf(x)) return snprintf(buf, n, "%s%s", x < 0 ? "-" : "", yaml_style ? ".inf" : "inf");
    // Shortest precision that reads back exactly (what Python's repr does).
    char tmp[48];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, x);
        if (strtod(tmp, NULL) == x) break;
    }
    // tmp = [-]d[.ddd]e[+-]XX -> sign, digit string, decimal exponent.
    const char *p = tmp;
    bool neg = *p == '-';
    if (neg) p++;
    char dig[24];
    size_t nd = 0;
    for (; *p && *p != 'e'; p++)
        if (isdigit((unsigned char)*p) && nd < sizeof dig - 1) dig[nd++] = *p;
    while (nd > 1 && dig[nd - 1] == '0') nd--;
    dig[nd] = 0;
    int e = atoi(p + 1);
    char out[64];
    size_t o = 0;
    if (neg) out[o++] = '-';
    if (e >= -4 && e < 16) {
        if (e >= 0) {
            for (int i = 0; i <= e; i++) out[o++] = (size_t)i < nd ? dig[i] : '0';
            out[o++] = '.';
            if ((size_t)e + 1 < nd)
                for (size_t i = (size_t)e + 1; i < nd; i++) out[o++] = dig[i];
            else
                out[o++] = '0';
        } else {
            out[o++] = '0';
            out[o++] = '.';
            for (int i = 0; i < -e - 1; i++) out[o++] = '0';
            for (size_t i = 0; i < nd; i++) out[o++] = dig[i];
        }
        out[o] = 0;
    } else {
        out[o++] = dig[0];
        if (nd > 1) {
            out[o++] = '.';
            for (size_t i = 1; i < nd; i++) out[o++] = dig[i];
        } else if (yaml_style) {
            // PyYAML writes 1.0e-08: YAML 1.1 floats need a dot.
            out[o++] = '.';
            out[o++] = '0';
        }
        snprintf(out + o, sizeof out - o, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    }
    return snprintf(buf, n, "%s", out);
}

static void repr_rec(Sb *b, const CfgNode *n, bool nested) {
    char tmp[64];
    switch (n->type) {
    case CFG_NULL: sb_str(b, "None"); break;
    case CFG_BOOL: sb_str(b, n->b ? "True" : "False"); break;
    case CFG_INT: snprintf(tmp, sizeof tmp, "%lld", n->i); sb_str(b, tmp); break;
    case CFG_FLOAT: cfg_format_float(n->f, tmp, sizeof tmp, false); sb_str(b, tmp); break;
    case CFG_STRING:
        if (nested) {
            // Python repr: single quotes unless the text has a ' and no ".
            char q = strchr(n->s, '\'') && !strchr(n->s, '"') ? '"' : '\'';
            sb_add(b, &q, 1);
            for (const char *s = n->s; *s; s++) {
                if (*s == q || *s == '\\') sb_add(b, "\\", 1);
                sb_add(b, s, 1);
            }
            sb_add(b, &q, 1);
        } else {
            sb_str(b, n->s);
        }
        break;
    case CFG_LIST:
        sb_str(b, "[");
        for (size_t i = 0; i < n->n; i++) {
            if (i) sb_str(b, ", ");
            repr_rec(b, n->kids[i], true);
        }
        sb_str(b, "]");
        break;
    case CFG_MAP:
        sb_str(b, "{");
        for (size_t i = 0; i < n->n; i++) {
            if (i) sb_str(b, ", ");
            CfgNode k = {.type = CFG_STRING, .s = n->kids[i]->key};
            repr_rec(b, &k, true);
            sb_str(b, ": ");
            repr_rec(b, n->kids[i], true);
        }
        sb_str(b, "}");
        break;
    }
}

void cfg_repr(const CfgNode *n, char *buf, size_t len) {
    Sb b = {0};
    repr_rec(&b, n, false);
    snprintf(buf, len, "%s", b.p ? b.p : "");
    free(b.p);
}

char *cfg_repr_alloc(const CfgNode *n, size_t *len) {
    Sb b = {0};
    repr_rec(&b, n, false);
    if (!b.p) sb_str(&b, "");
    if (len) *len = b.n;
    return b.p;
}

size_t cfg_count(const CfgNode *n) {
    if (!n) return 0;
    size_t c = 1;
    for (size_t i = 0; i < n->n; i++) c += cfg_count(n->kids[i]);
    return c;
}

// ------------------------------------------------------------------------- YAML 1.1 typing

// Digits (or '_') of the given class; returns the count consumed.
static size_t span_digits(const char *s, int base) {
    size_t i = 0;
    for (;; i++) {
        int c = (unsigned char)s[i];
        if (c == '_') continue;
        if (base == 2 && (c == '0' || c == '1')) continue;
        if (base == 8 && c >= '0' && c <= '7') continue;
        if (base == 10 && isdigit(c)) continue;
        if (base == 16 && isxdigit(c)) continue;
        break;
    }
    return i;
}

// Copy of s without '_' (YAML 1.1 allows them as digit separators).
static char *strip_underscores(const char *s) {
    char *d = cfg_strdup(s), *w = d;
    for (const char *r = s; *r; r++)
        if (*r != '_') *w++ = *r;
    *w = 0;
    return d;
}

// `(:[0-5]?[0-9])+` starting at s; returns the length matched (0 if none).
static size_t span_sexagesimal_tail(const char *s) {
    size_t i = 0, groups = 0;
    while (s[i] == ':') {
        size_t j = i + 1;
        if (isdigit((unsigned char)s[j]) && isdigit((unsigned char)s[j + 1])) {
            if (s[j] > '5') break;
            j += 2;
        } else if (isdigit((unsigned char)s[j])) {
            j += 1;
        } else {
            break;
        }
        i = j;
        groups++;
    }
    return groups ? i : 0;
}

// Value of "a:b:c" base 60 (underscores already removed); the last part may be fractional.
static double sexagesimal(const char *s) {
    double v = 0;
    const char *p = s;
    for (;;) {
        char *end;
        double part = strtod(p, &end);
        v = v * 60 + part;
        if (*end != ':') break;
        p = end + 1;
    }
    return v;
}

// YAML 1.1 int; false if text is not an int. *big set when it is one but overflows.
static bool yaml_int(const char *text, long long *out, bool *big) {
    *big = false;
    const char *s = text;
    bool neg = false;
    if (*s == '-' || *s == '+') neg = *s++ == '-';
    int base;
    size_t start;
    bool sexa = false;
    if (s[0] == '0' && s[1] == 'b') {
        base = 2; start = 2;
        if (span_digits(s + 2, 2) != strlen(s + 2) || !s[2]) return false;
    } else if (s[0] == '0' && s[1] == 'x') {
        base = 16; start = 2;
        if (span_digits(s + 2, 16) != strlen(s + 2) || !s[2]) return false;
    } else if (s[0] == '0' && s[1]) {
        base = 8; start = 1;
        if (span_digits(s + 1, 8) != strlen(s + 1)) return false;
    } else if (s[0] == '0') {
        *out = 0;
        return true;
    } else if (s[0] >= '1' && s[0] <= '9') {
        base = 10; start = 0;
        size_t d = span_digits(s, 10);
        if (s[d]) {
            size_t t = span_sexagesimal_tail(s + d);
            if (!t || s[d + t]) return false;
            sexa = true;
        }
    } else {
        return false;
    }
    char *clean = strip_underscores(s + start);
    if (!*clean) { free(clean); return false; }  // "0b_": PyYAML would fail; keep it a string
    if (sexa) {
        double v = sexagesimal(clean);
        free(clean);
        if (v > 9.2e18) { *big = true; return true; }
        *out = neg ? -(long long)v : (long long)v;
        return true;
    }
    errno = 0;
    unsigned long long u = strtoull(clean, NULL, base);
    free(clean);
    if (errno == ERANGE || u > (unsigned long long)LLONG_MAX + (neg ? 1u : 0u)) {
        *big = true;
        return true;
    }
    *out = neg ? (long long)(0 - u) : (long long)u;
    return true;
}

// `[eE][-+]?[0-9]+` (sign optional unless need_sign) at s; returns length or 0.
static size_t span_exponent(const char *s, bool need_sign) {
    if (*s != 'e' && *s != 'E') return 0;
    size_t i = 1;
    if (s[i] == '-' || s[i] == '+') i++;
    else if (need_sign) return 0;
    size_t d = 0;
    while (isdigit((unsigned char)s[i + d])) d++;
    return d ? i + d : 0;
}

// YAML 1.1 float (PyYAML's pattern united with OmegaConf's, which adds 1e-3 forms).
static bool yaml_float(const char *text, double *out) {
    const char *s = text;
    bool signed_ = false, neg = false;
    if (*s == '-' || *s == '+') { neg = *s == '-'; s++; signed_ = true; }
    if (strcmp(s, ".inf") == 0 || strcmp(s, ".Inf") == 0 || strcmp(s, ".INF") == 0) {
        *out = neg ? -INFINITY : INFINITY;
        return true;
    }
    if (!signed_ && (strcmp(s, ".nan") == 0 || strcmp(s, ".NaN") == 0 || strcmp(s, ".NAN") == 0)) {
        *out = NAN;
        return true;
    }
    bool ok = false, sexa = false;
    if (isdigit((unsigned char)*s)) {
        size_t i = span_digits(s, 10);
        if (s[i] == '.') {                        // 1.5  1.  1.5e-3  1.5e3
            i++;
            i += span_digits(s + i, 10);
            i += span_exponent(s + i, false);
            ok = s[i] == 0;
        } else if (s[i] == ':') {                 // 1:30.5 (sexagesimal float)
            size_t t = span_sexagesimal_tail(s + i);
            if (t && s[i + t] == '.') {
                i += t + 1;
                i += span_digits(s + i, 10);
                ok = s[i] == 0;
                sexa = ok;
            }
        } else {                                  // 1e-3 (OmegaConf)
            size_t t = span_exponent(s + i, false);
            ok = t && s[i + t] == 0;
        }
    } else if (*s == '.' && !signed_) {           // .5  .5e-3
        size_t i = 1 + span_digits(s + 1, 10);
        if (i > 1) {
            i += span_exponent(s + i, true);
            ok = s[i] == 0;
        }
    }
    if (!ok) return false;
    char *clean = strip_underscores(s);
    bool good = strspn(clean, "0123456789") > 0 || (clean[0] == '.' && isdigit((unsigned char)clean[1]));
    double v = 0;
    if (good) {
        if (sexa) {
            v = sexagesimal(clean);
        } else {
            char *end;
            v = strtod(clean, &end);
            good = *end == 0;
        }
    }
    free(clean);
    if (!good) return false;
    *out = neg ? -v : v;
    return true;
}

static bool one_of(const char *s, const char *const *words) {
    for (; *words; words++)
        if (strcmp(s, *words) == 0) return true;
    return false;
}

void cfg_resolve_plain(CfgNode *n, const char *text) {
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL", NULL};
    static const char *const trues[] = {"yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON", NULL};
    static const char *const falses[] = {"no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF", NULL};
    long long iv;
    double fv;
    bool big;
    if (one_of(text, nulls)) {
        n->type = CFG_NULL;
    } else if (one_of(text, trues) || one_of(text, falses)) {
        n->type = CFG_BOOL;
        n->b = one_of(text, trues);
    } else if (yaml_int(text, &iv, &big) && !big) {
        n->type = CFG_INT;
        n->i = iv;
    } else if (yaml_float(text, &fv)) {
        n->type = CFG_FLOAT;
        n->f = fv;
    } else {
        n->type = CFG_STRING;
        if (!n->s) n->s = cfg_strdup(text);
    }
}

// ------------------------------------------------------------------------- YAML output

static int emit_write(void *data, unsigned char *buffer, size_t size) {
    sb_add((Sb *)data, (const char *)buffer, size);
    return 1;
}

// Python's int(s) / float(s) accept s: optional surrounding whitespace and sign, digits with
// single '_' between them; floats also 1., .5, exponents, inf, infinity and nan (any case).
static bool py_number(const char *s, bool allow_float) {
    while (isspace((unsigned char)*s)) s++;
    if (*s == '+' || *s == '-') s++;
    if (allow_float && (strncasecmp(s, "inf", 3) == 0 || strncasecmp(s, "nan", 3) == 0)) {
        s += strncasecmp(s, "infinity", 8) == 0 ? 8 : 3;
    } else {
        size_t digits = 0, frac = 0;
        for (; isdigit((unsigned char)*s) || (*s == '_' && digits && isdigit((unsigned char)s[1])); s++) digits++;
        if (allow_float && *s == '.') {
            for (s++; isdigit((unsigned char)*s) || (*s == '_' && frac && isdigit((unsigned char)s[1])); s++) frac++;
        }
        if (!digits && !frac) return false;
        if (allow_float && (*s == 'e' || *s == 'E')) {
            s++;
            if (*s == '+' || *s == '-') s++;
            if (!isdigit((unsigned char)*s)) return false;
            while (isdigit((unsigned char)*s)) s++;
        }
    }
    while (isspace((unsigned char)*s)) s++;
    return *s == 0;
}

// PyYAML's implicit timestamp: 2023-09-16, or a date followed by a time (T or spaces).
static bool yaml_timestamp(const char *s) {
    if (!(isdigit((unsigned char)s[0]) && isdigit((unsigned char)s[1]) && isdigit((unsigned char)s[2]) &&
          isdigit((unsigned char)s[3]) && s[4] == '-'))
        return false;
    const char *p = s + 5;
    for (int part = 0; part < 2; part++) {  // month, day: one or two digits
        if (!isdigit((unsigned char)*p)) return false;
        p += isdigit((unsigned char)p[1]) ? 2 : 1;
        if (part == 0 && *p++ != '-') return false;
    }
    if (!*p) return p - s == 10;  // the date-only form needs two-digit month and day
    if (*p != 'T' && *p != 't' && *p != ' ' && *p != '\t') return false;
    while (*p == ' ' || *p == '\t') p++;
    if (*p == 'T' || *p == 't') p++;
    return isdigit((unsigned char)*p) && strchr(p, ':') != NULL;
}

// True when a plain scalar with this text would be read back as something else. Mirrors
// OmegaConf's dumper: PyYAML quotes whatever its resolver would type (null, YAML 1.1 bools,
// ints, floats, timestamps, '<<', '='), and OmegaConf also quotes y/n and anything Python's
// int() or float() accepts.
static bool needs_quotes(const char *s) {
    static const char *const yn[] = {"y", "Y", "n", "N", "<<", "=", NULL};
    CfgNode tmp = {.type = CFG_STRING};
    cfg_resolve_plain(&tmp, s);
    // Digits beyond 64 bits are how the tree holds a big unsigned int (a seed): written plain.
    bool big_int = tmp.type == CFG_STRING && s[strspn(s, "0123456789")] == 0 && strlen(s) > 18;
    bool q = tmp.type != CFG_STRING || one_of(s, yn) || (py_number(s, true) && !big_int) || yaml_timestamp(s);
    free(tmp.s);
    return q;
}

static int emit_scalar(yaml_emitter_t *e, const char *text, bool force_quotes) {
    yaml_event_t ev;
    yaml_scalar_style_t style = force_quotes ? YAML_SINGLE_QUOTED_SCALAR_STYLE : YAML_ANY_SCALAR_STYLE;
    if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)text, (int)strlen(text), 1, 1, style))
        return 0;
    return yaml_emitter_emit(e, &ev);
}

static int emit_node(yaml_emitter_t *e, const CfgNode *n) {
    yaml_event_t ev;
    char tmp[64];
    switch (n->type) {
    case CFG_NULL: return emit_scalar(e, "null", false);
    case CFG_BOOL: return emit_scalar(e, n->b ? "true" : "false", false);
    case CFG_INT: snprintf(tmp, sizeof tmp, "%lld", n->i); return emit_scalar(e, tmp, false);
    case CFG_FLOAT: cfg_format_float(n->f, tmp, sizeof tmp, true); return emit_scalar(e, tmp, false);
    case CFG_STRING: return emit_scalar(e, n->s, needs_quotes(n->s));
    case CFG_LIST:
        if (!yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
                                                  n->n ? YAML_BLOCK_SEQUENCE_STYLE : YAML_FLOW_SEQUENCE_STYLE) ||
            !yaml_emitter_emit(e, &ev))
            return 0;
        for (size_t i = 0; i < n->n; i++)
            if (!emit_node(e, n->kids[i])) return 0;
        return yaml_sequence_end_event_initialize(&ev) && yaml_emitter_emit(e, &ev);
    case CFG_MAP:
        if (!yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1,
                                                 n->n ? YAML_BLOCK_MAPPING_STYLE : YAML_FLOW_MAPPING_STYLE) ||
            !yaml_emitter_emit(e, &ev))
            return 0;
        for (size_t i = 0; i < n->n; i++) {
            if (!emit_scalar(e, n->kids[i]->key, needs_quotes(n->kids[i]->key))) return 0;
            if (!emit_node(e, n->kids[i])) return 0;
        }
        return yaml_mapping_end_event_initialize(&ev) && yaml_emitter_emit(e, &ev);
    }
    return 0;
}

char *cfg_to_yaml(const CfgNode *root) {
    yaml_emitter_t e;
    yaml_event_t ev;
    Sb out = {0};
    if (!yaml_emitter_initialize(&e)) return NULL;
    yaml_emitter_set_output(&e, emit_write, &out);
    yaml_emitter_set_unicode(&e, 1);  // keep UTF-8 paths readable instead of \u escapes
    yaml_emitter_set_width(&e, -1);   // never fold long strings
    yaml_emitter_set_indent(&e, 2);
    int ok = yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING) && yaml_emitter_emit(&e, &ev) &&
             yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1) && yaml_emitter_emit(&e, &ev) &&
             emit_node(&e, root) &&
             yaml_document_end_event_initialize(&ev, 1) && yaml_emitter_emit(&e, &ev) &&
             yaml_stream_end_event_initialize(&ev) && yaml_emitter_emit(&e, &ev) &&
             yaml_emitter_flush(&e);
    yaml_emitter_delete(&e);
    if (!ok) {
        free(out.p);
        return NULL;
    }
    if (!out.p) sb_str(&out, "");
    return out.p;
}

// ------------------------------------------------------------------------- YAML input

typedef struct {
    char *name;
    CfgNode *node;
    size_t count;  // nodes in node: what each use of the alias adds to the budget
} Anchor;

typedef struct {
    yaml_parser_t parser;
    const char *origin;  // file name or origin used in messages and locations
    const char *text;    // the input (for reader-error positions)
    size_t len;
    char *err;
    size_t errlen;
    Anchor *anchors;
    size_t n_anchors, cap_anchors;
    int depth;
    size_t nodes;        // nodes made so far, aliases expanded (CFG_MAX_NODES)
    size_t alias_nodes;  // of which copies made for aliases (CFG_MAX_ALIAS_NODES)
} Loader;

static void parser_error(Loader *L) {
    yaml_parser_t *p = &L->parser;
    if (p->error == YAML_MEMORY_ERROR) {
        cfg_errf(L->err, L->errlen, "%s: out of memory while reading YAML", L->origin);
        return;
    }
    const char *problem = p->problem ? p->problem : "unknown error";
    if (p->error == YAML_READER_ERROR) {
        // The reader (encoding) errors carry only a byte offset: turn it into line:col.
        size_t line = 1, col = 1;
        for (size_t i = 0; i < p->problem_offset && i < L->len; i++, col++)
            if (L->text[i] == '\n') { line++; col = 0; }
        cfg_errf(L->err, L->errlen, "%s:%zu:%zu: YAML syntax error: %s (byte offset %zu)", L->origin, line, col,
                 problem, p->problem_offset);
    } else if (p->context) {
        cfg_errf(L->err, L->errlen, "%s:%zu:%zu: YAML syntax error: %s (%s started at line %zu, column %zu)",
                 L->origin, p->problem_mark.line + 1, p->problem_mark.column + 1, problem, p->context,
                 p->context_mark.line + 1, p->context_mark.column + 1);
    } else {
        cfg_errf(L->err, L->errlen, "%s:%zu:%zu: YAML syntax error: %s", L->origin, p->problem_mark.line + 1,
                 p->problem_mark.column + 1, problem);
    }
}

static bool next_event(Loader *L, yaml_event_t *ev) {
    if (yaml_parser_parse(&L->parser, ev)) return true;
    parser_error(L);
    return false;
}

// The anchors' own copies are not counted: each is no larger than the node it copies, which was.
static void add_anchor(Loader *L, const char *name, const CfgNode *n) {
    for (size_t i = 0; i < L->n_anchors; i++)
        if (strcmp(L->anchors[i].name, name) == 0) {  // YAML lets a later anchor shadow an earlier one
            cfg_free(L->anchors[i].node);
            L->anchors[i].node = cfg_copy(n);
            L->anchors[i].count = cfg_count(n);
            return;
        }
    if (L->n_anchors == L->cap_anchors) {
        L->cap_anchors = L->cap_anchors ? 2 * L->cap_anchors : 8;
        L->anchors = xrealloc(L->anchors, L->cap_anchors * sizeof *L->anchors);
    }
    L->anchors[L->n_anchors].name = cfg_strdup(name);
    L->anchors[L->n_anchors].node = cfg_copy(n);
    L->anchors[L->n_anchors].count = cfg_count(n);
    L->n_anchors++;
}

// Counts `add` more nodes against CFG_MAX_NODES; false (with the message) when over budget.
static bool budget_nodes(Loader *L, size_t add, int line, int col) {
    if (add <= CFG_MAX_NODES - L->nodes) {
        L->nodes += add;
        return true;
    }
    cfg_errf(L->err, L->errlen,
             "%s:%d:%d: the YAML document expands to more than %u nodes (each use of an alias counts all of "
             "its nodes), the limit for a config",
             L->origin, line, col, CFG_MAX_NODES);
    return false;
}

// A scalar or key longer than CFG_MAX_SCALAR_BYTES: false with the message.
static bool scalar_fits(Loader *L, size_t len, int line, int col, const char *path) {
    if (len <= CFG_MAX_SCALAR_BYTES) return true;
    cfg_errf(L->err, L->errlen, "%s:%d:%d: %s: a scalar of %zu bytes is longer than %u bytes, the limit for a config value",
             L->origin, line, col, *path ? path : "(root)", len, CFG_MAX_SCALAR_BYTES);
    return false;
}

static char *child_path(const char *path, const char *key) {
    size_t n = strlen(path) + strlen(key) + 2;
    char *p = xrealloc(NULL, n);
    snprintf(p, n, "%s%s%s", path, *path ? "." : "", key);
    return p;
}

static bool tag_is(const char *tag, const char *name) {
    static const char prefix[] = "tag:yaml.org,2002:";
    return strncmp(tag, prefix, sizeof prefix - 1) == 0 && strcmp(tag + sizeof prefix - 1, name) == 0;
}

static CfgNode *load_node(Loader *L, yaml_event_t *ev, const char *path);

// Builds a scalar node from its event (typing plain scalars; honouring explicit tags).
static CfgNode *load_scalar(Loader *L, yaml_event_t *ev, const char *path) {
    int line = (int)ev->start_mark.line + 1, col = (int)ev->start_mark.column + 1;
    if (!scalar_fits(L, ev->data.scalar.length, line, col, path)) return NULL;
    CfgNode *n = cfg_new(CFG_STRING);
    n->s = strndup_x((const char *)ev->data.scalar.value, ev->data.scalar.length);
    cfg_set_loc(n, L->origin, line, col);
    const char *tag = (const char *)ev->data.scalar.tag;
    if (!tag) {
        if (ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) cfg_resolve_plain(n, n->s);
        else n->quoted = true;
        return n;
    }
    if (strcmp(tag, "!") == 0 || tag_is(tag, "str")) {  // non-specific or !!str: a string
        n->quoted = true;
        return n;
    }
    static const char *const names[] = {"int", "float", "bool", "null"};
    static const CfgType types[] = {CFG_INT, CFG_FLOAT, CFG_BOOL, CFG_NULL};
    for (size_t k = 0; k < 4; k++) {
        if (!tag_is(tag, names[k])) continue;
        CfgNode t = {.type = CFG_STRING, .s = n->s};  // .s set: resolve_plain copies nothing
        cfg_resolve_plain(&t, n->s);
        if (t.type == CFG_INT && types[k] == CFG_FLOAT) { t.type = CFG_FLOAT; t.f = (double)t.i; }
        if (t.type != types[k]) {
            cfg_errf(L->err, L->errlen, "%s:%d:%d: %s: cannot read '%s' as !!%s", L->origin, line, col,
                     *path ? path : "(root)", n->s, names[k]);
            cfg_free(n);
            return NULL;
        }
        n->type = t.type;
        n->b = t.b;
        n->i = t.i;
        n->f = t.f;
        return n;
    }
    cfg_errf(L->err, L->errlen, "%s:%d:%d: %s: unsupported YAML tag '%s'", L->origin, line, col,
             *path ? path : "(root)", tag);
    cfg_free(n);
    return NULL;
}

// Applies a YAML merge key (`<<: *base` or `<<: [*a, *b]`): keys not yet present are added.
static bool apply_merge_key(Loader *L, CfgNode *m, CfgNode *v, int line, int col, const char *path) {
    size_t count = v->type == CFG_LIST ? v->n : 1;
    for (size_t j = 0; j < count; j++) {
        const CfgNode *src = v->type == CFG_LIST ? v->kids[j] : v;
        if (src->type != CFG_MAP) {
            cfg_errf(L->err, L->errlen, "%s:%d:%d: %s: the merge key '<<' needs a mapping or a list of mappings",
                     L->origin, line, col, *path ? path : "(root)");
            return false;
        }
        for (size_t i = 0; i < src->n; i++) {
            if (cfg_map_find(m, src->kids[i]->key) >= 0) continue;  // explicit / earlier keys win
            CfgNode *c = cfg_copy(src->kids[i]);
            c->merged = true;
            cfg_map_put(m, src->kids[i]->key, c);
        }
    }
    return true;
}

static CfgNode *load_mapping(Loader *L, CfgNode *m, const char *path) {
    for (;;) {
        yaml_event_t kev;
        if (!next_event(L, &kev)) return NULL;
        if (kev.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&kev);
            break;
        }
        int kl = (int)kev.start_mark.line + 1, kc = (int)kev.start_mark.column + 1;
        if (kev.type != YAML_SCALAR_EVENT) {
            yaml_event_delete(&kev);
            cfg_errf(L->err, L->errlen, "%s:%d:%d: %s: only scalar mapping keys are supported", L->origin, kl, kc,
                     *path ? path : "(root)");
            return NULL;
        }
        if (!scalar_fits(L, kev.data.scalar.length, kl, kc, path)) {
            yaml_event_delete(&kev);
            return NULL;
        }
        char *key = strndup_x((const char *)kev.data.scalar.value, kev.data.scalar.length);
        bool merge_key = kev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE && strcmp(key, "<<") == 0;
        yaml_event_delete(&kev);

        char *cpath = child_path(path, key);
        yaml_event_t vev;
        CfgNode *v = next_event(L, &vev) ? load_node(L, &vev, cpath) : NULL;
        if (!v) {
            free(cpath);
            free(key);
            return NULL;
        }
        bool ok = true;
        if (merge_key) {
            ok = apply_merge_key(L, m, v, kl, kc, path);
            cfg_free(v);
        } else {
            long idx = cfg_map_find(m, key);
            if (idx >= 0 && !m->kids[idx]->merged) {
                // PyYAML's words ("found duplicate key <key>"), then the full key and both lines.
                cfg_errf(L->err, L->errlen, "%s:%d:%d: found duplicate key %s (%s was first defined at line %d)",
                         L->origin, kl, kc, key, cpath, m->kids[idx]->key_loc.line);
                cfg_free(v);
                ok = false;
            } else {
                loc_clear(&v->key_loc);
                v->key_loc.file = cfg_strdup(L->origin);
                v->key_loc.line = kl;
                v->key_loc.col = kc;
                cfg_map_put(m, key, v);
            }
        }
        free(cpath);
        free(key);
        if (!ok) return NULL;
    }
    return m;
}

static CfgNode *load_sequence(Loader *L, CfgNode *l, const char *path) {
    for (;;) {
        yaml_event_t ev;
        if (!next_event(L, &ev)) return NULL;
        if (ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            return l;
        }
        char idx[32];
        snprintf(idx, sizeof idx, "%zu", l->n);
        char *cpath = child_path(path, idx);
        CfgNode *v = load_node(L, &ev, cpath);
        free(cpath);
        if (!v) return NULL;
        cfg_list_push(l, v);
    }
}

// Consumes *ev (the first event of a node) and the node's remaining events.
static CfgNode *load_node(Loader *L, yaml_event_t *ev, const char *path) {
    int line = (int)ev->start_mark.line + 1, col = (int)ev->start_mark.column + 1;
    char *anchor = NULL;
    CfgNode *n = NULL;
    bool ok = true;
    if (++L->depth > CFG_MAX_DEPTH) {
        cfg_errf(L->err, L->errlen, "%s:%d:%d: YAML nested deeper than %d levels, the limit for a config", L->origin,
                 line, col, CFG_MAX_DEPTH);
        ok = false;
    } else if (ev->type != YAML_ALIAS_EVENT) {
        ok = budget_nodes(L, 1, line, col);
    }
    if (!ok) {
        yaml_event_delete(ev);
        L->depth--;
        return NULL;
    }
    switch (ev->type) {
    case YAML_ALIAS_EVENT: {
        const char *name = (const char *)ev->data.alias.anchor;
        const Anchor *a = NULL;
        for (size_t i = 0; i < L->n_anchors && !a; i++)
            if (strcmp(L->anchors[i].name, name) == 0) a = &L->anchors[i];
        if (!a) {
            cfg_errf(L->err, L->errlen, "%s:%d:%d: found undefined alias '*%s'", L->origin, line, col, name);
        } else if (a->count > CFG_MAX_ALIAS_NODES - L->alias_nodes) {
            // Checked before copying: x1: [*x0 x10], x2: [*x1 x10] ... grows tenfold per line.
            cfg_errf(L->err, L->errlen,
                     "%s:%d:%d: aliases expand to more than %u nodes in all (an alias bomb?), the limit for a config",
                     L->origin, line, col, CFG_MAX_ALIAS_NODES);
        } else if (budget_nodes(L, a->count, line, col)) {
            L->alias_nodes += a->count;
            n = cfg_copy(a->node);
        }
        yaml_event_delete(ev);
        break;
    }
    case YAML_SCALAR_EVENT:
        anchor = cfg_strdup((const char *)ev->data.scalar.anchor);
        n = load_scalar(L, ev, path);
        yaml_event_delete(ev);
        break;
    case YAML_SEQUENCE_START_EVENT:
        anchor = cfg_strdup((const char *)ev->data.sequence_start.anchor);
        yaml_event_delete(ev);
        n = cfg_new_list();
        cfg_set_loc(n, L->origin, line, col);
        if (!load_sequence(L, n, path)) { cfg_free(n); n = NULL; }
        break;
    case YAML_MAPPING_START_EVENT:
        anchor = cfg_strdup((const char *)ev->data.mapping_start.anchor);
        yaml_event_delete(ev);
        n = cfg_new_map();
        cfg_set_loc(n, L->origin, line, col);
        if (!load_mapping(L, n, path)) { cfg_free(n); n = NULL; }
        break;
    default:
        cfg_errf(L->err, L->errlen, "%s:%d:%d: unexpected YAML event", L->origin, line, col);
        yaml_event_delete(ev);
        break;
    }
    if (n && anchor) add_anchor(L, anchor, n);
    free(anchor);
    L->depth--;
    return n;
}

// Reads the stream: zero or one document.
static CfgNode *load_stream(Loader *L) {
    yaml_event_t ev;
    CfgNode *root = NULL;
    if (!next_event(L, &ev)) return NULL;  // STREAM_START
    yaml_event_delete(&ev);
    if (!next_event(L, &ev)) return NULL;
    if (ev.type == YAML_STREAM_END_EVENT) {
        yaml_event_delete(&ev);
        return cfg_new_null();
    }
    yaml_event_delete(&ev);  // DOCUMENT_START
    if (!next_event(L, &ev)) return NULL;
    root = load_node(L, &ev, "");
    if (!root) return NULL;
    if (!next_event(L, &ev)) goto fail;  // DOCUMENT_END
    yaml_event_delete(&ev);
    if (!next_event(L, &ev)) goto fail;
    if (ev.type != YAML_STREAM_END_EVENT) {
        cfg_errf(L->err, L->errlen, "%s:%zu:%zu: expected a single YAML document, found another one", L->origin,
                 ev.start_mark.line + 1, ev.start_mark.column + 1);
        yaml_event_delete(&ev);
        goto fail;
    }
    yaml_event_delete(&ev);
    return root;
fail:
    cfg_free(root);
    return NULL;
}

static void loader_done(Loader *L) {
    for (size_t i = 0; i < L->n_anchors; i++) {
        free(L->anchors[i].name);
        cfg_free(L->anchors[i].node);
    }
    free(L->anchors);
    yaml_parser_delete(&L->parser);
}

// The whole file, read only up to one byte past the limit; NULL with the message in err. Only
// a regular file is read: a FIFO would block the open, a device (/dev/zero) never ends.
static char *read_config_file(const char *path, size_t *len, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        cfg_errf(err, errlen, "cannot open config file '%s': %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        cfg_errf(err, errlen, "cannot read config file '%s': %s", path,
                 S_ISDIR(st.st_mode) ? "it is a directory" : "not a regular file");
        close(fd);
        return NULL;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        cfg_errf(err, errlen, "cannot open config file '%s': %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    size_t cap = 64 << 10, n = 0;
    char *buf = xrealloc(NULL, cap);
    for (;;) {
        if (n == cap) {
            cap = cap * 2 > CFG_MAX_FILE_BYTES + 1 ? CFG_MAX_FILE_BYTES + 1 : cap * 2;
            buf = xrealloc(buf, cap);
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n > CFG_MAX_FILE_BYTES) {
            cfg_errf(err, errlen, "config file '%s' is larger than %u MiB, the limit for a config file", path,
                     CFG_MAX_FILE_BYTES >> 20);
            break;
        }
        if (got == 0) {
            if (!ferror(f)) {
                fclose(f);
                *len = n;
                return buf;
            }
            cfg_errf(err, errlen, "cannot read config file '%s': %s", path, strerror(errno));
            break;
        }
    }
    free(buf);
    fclose(f);
    return NULL;
}

CfgNode *cfg_parse_file(const char *path, char *err, size_t errlen) {
    size_t len;
    char *text = read_config_file(path, &len, err, errlen);
    if (!text) return NULL;
    CfgNode *root = cfg_parse_bytes(text, len, path, err, errlen);
    free(text);
    return root;
}

CfgNode *cfg_parse_string(const char *text, const char *origin, char *err, size_t errlen) {
    return cfg_parse_bytes(text, strlen(text), origin, err, errlen);
}

CfgNode *cfg_parse_bytes(const char *text, size_t len, const char *origin, char *err, size_t errlen) {
    Loader L = {.origin = origin ? origin : "<string>", .text = text, .len = len, .err = err, .errlen = errlen};
    if (len > CFG_MAX_FILE_BYTES) {
        cfg_errf(err, errlen, "%s: the config text is larger than %u MiB, the limit for a config", L.origin,
                 CFG_MAX_FILE_BYTES >> 20);
        return NULL;
    }
    if (!yaml_parser_initialize(&L.parser)) {
        cfg_errf(err, errlen, "%s: cannot initialise the YAML parser", L.origin);
        return NULL;
    }
    yaml_parser_set_input_string(&L.parser, (const unsigned char *)text, len);
    CfgNode *root = load_stream(&L);
    loader_done(&L);
    return root;
}
