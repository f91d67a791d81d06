// config/cfg_tree.c — the generic config tree: nodes, maps with a key index, lists, paths,
// merging, equality and Python's str() of a node.
#include "config/cfg_tree.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
CfgNode *cfg_new_str_n(const char *s, size_t n) { CfgNode *c = cfg_new(CFG_STRING); c->s = cfg_strndup(s, n); return c; }
CfgNode *cfg_new_list(void) { return cfg_new(CFG_LIST); }
CfgNode *cfg_new_map(void) { return cfg_new(CFG_MAP); }

static void loc_clear(CfgLoc *l) {
    free(l->file);
    free(l->override);
    memset(l, 0, sizeof *l);
}

void cfg_loc_copy(CfgLoc *dst, const CfgLoc *src) {
    CfgLoc c = {.file = cfg_strdup(src->file), .line = src->line, .col = src->col, .override = cfg_strdup(src->override)};
    loc_clear(dst);  // after the copy: src may be dst
    *dst = c;
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
    cfg_loc_copy(&c->loc, &n->loc);
    cfg_loc_copy(&c->key_loc, &n->key_loc);
    if (n->n) {
        c->kids = cfg_realloc(NULL, n->n * sizeof *c->kids);
        c->cap = c->n = n->n;
        for (size_t i = 0; i < n->n; i++) c->kids[i] = cfg_copy(n->kids[i]);
        index_build(c);
    }
    return c;
}

void cfg_set_loc(CfgNode *n, const char *file, int line, int col) {
    cfg_loc_copy(&n->loc, &(CfgLoc){.file = (char *)file, .line = line, .col = col});
}

void cfg_set_override(CfgNode *n, const char *text) {
    const CfgLoc loc = {.override = (char *)text};
    cfg_loc_copy(&n->loc, &loc);
    if (n->key) cfg_loc_copy(&n->key_loc, &loc);
    for (size_t i = 0; i < n->n; i++) cfg_set_override(n->kids[i], text);
}

static void push_kid(CfgNode *p, CfgNode *v) {
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 4;
        p->kids = cfg_realloc(p->kids, p->cap * sizeof *p->kids);
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
    if (!v->key_loc.file && !v->key_loc.override) cfg_loc_copy(&v->key_loc, &old->key_loc);
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

CfgNode *cfg_child(const CfgNode *n, const char *seg, size_t len) {
    if (n->type == CFG_MAP) {
        char small[128], *key = len < sizeof small ? small : cfg_realloc(NULL, len + 1);
        memcpy(key, seg, len);
        key[len] = 0;
        CfgNode *c = cfg_map_get(n, key);
        if (key != small) free(key);
        return c;
    }
    if (n->type != CFG_LIST || len == 0 || len > 18) return NULL;
    size_t idx = 0;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)seg[i])) return NULL;
        idx = idx * 10 + (size_t)(seg[i] - '0');
    }
    return idx < n->n ? n->kids[idx] : NULL;
}

CfgNode *cfg_select(const CfgNode *root, const char *path) {
    const CfgNode *cur = root;
    for (const char *p = path; cur && *p;) {
        size_t len = strcspn(p, ".");
        cur = cfg_child(cur, p, len);
        p += len + (p[len] == '.');
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
            cfg_loc_copy(&d->loc, &s->loc);
            cfg_loc_copy(&d->key_loc, &s->key_loc);
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

static void repr_rec(StrBuf *b, const CfgNode *n, bool nested) {
    char tmp[64];
    switch (n->type) {
    case CFG_NULL: sb_puts(b, "None"); break;
    case CFG_BOOL: sb_puts(b, n->b ? "True" : "False"); break;
    case CFG_INT: snprintf(tmp, sizeof tmp, "%lld", n->i); sb_puts(b, tmp); break;
    case CFG_FLOAT: cfg_format_float(n->f, tmp, sizeof tmp, false); sb_puts(b, tmp); break;
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
            sb_puts(b, n->s);
        }
        break;
    case CFG_LIST:
        sb_puts(b, "[");
        for (size_t i = 0; i < n->n; i++) {
            if (i) sb_puts(b, ", ");
            repr_rec(b, n->kids[i], true);
        }
        sb_puts(b, "]");
        break;
    case CFG_MAP:
        sb_puts(b, "{");
        for (size_t i = 0; i < n->n; i++) {
            if (i) sb_puts(b, ", ");
            CfgNode k = {.type = CFG_STRING, .s = n->kids[i]->key};
            repr_rec(b, &k, true);
            sb_puts(b, ": ");
            repr_rec(b, n->kids[i], true);
        }
        sb_puts(b, "}");
        break;
    }
}

void cfg_repr(const CfgNode *n, char *buf, size_t len) {
    StrBuf b = {0};
    repr_rec(&b, n, false);
    snprintf(buf, len, "%s", b.p ? b.p : "");
    free(b.p);
}

char *cfg_repr_alloc(const CfgNode *n, size_t *len) {
    StrBuf b = {0};
    repr_rec(&b, n, false);
    if (len) *len = b.n;
    return sb_take(&b);
}

size_t cfg_count(const CfgNode *n) {
    if (!n) return 0;
    size_t c = 1;
    for (size_t i = 0; i < n->n; i++) c += cfg_count(n->kids[i]);
    return c;
}

