// config/cfg_interp.c — OmegaConf interpolation: parsing ${...}, key lookup, resolvers.
#include "config/cfg_interp.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/cfg_override.h"

// Nodes from the root down to any node of a composed config: a file nests at most CFG_MAX_DEPTH,
// an override adds at most CFG_MAX_DEPTH key parts and as many levels of value below them.
#define MAX_CHAIN (3 * CFG_MAX_DEPTH + 8)

// ------------------------------------------------------------------------- the process timestamp

// The one mutable global of config/: ${now:} must give every job of a sweep the same value.
static time_t g_now;

time_t cfg_now(void) {
    if (!g_now) g_now = time(NULL);
    return g_now;
}

void cfg_set_now(time_t t) { g_now = t; }

// ------------------------------------------------------------------------- chains

// The nodes from the root down to one node: what relative keys and full keys need.
typedef struct {
    const CfgNode *node[MAX_CHAIN];
    size_t n;
} Chain;

static bool chain_push(Chain *c, const CfgNode *n) {
    if (c->n >= MAX_CHAIN) return false;
    c->node[c->n++] = n;
    return true;
}

// OmegaConf's full key of the chain's last node: a.b[0].c
static void chain_full_key(const Chain *c, char *buf, size_t len) {
    size_t o = 0;
    buf[0] = 0;
    for (size_t i = 1; i < c->n && o < len; i++) {
        const CfgNode *p = c->node[i - 1];
        int w;
        if (p->type == CFG_LIST) {
            size_t idx = 0;
            while (idx < p->n && p->kids[idx] != c->node[i]) idx++;
            w = snprintf(buf + o, len - o, "[%zu]", idx);
        } else {
            w = snprintf(buf + o, len - o, "%s%s", o ? "." : "", c->node[i]->key);
        }
        if (w < 0) return;
        o += (size_t)w;
    }
}

static const char *chain_object_type(const Chain *c) {
    return c->n >= 2 && c->node[c->n - 2]->type == CFG_LIST ? "list" : "dict";
}

// Extends c along a dotted path; false when a part is absent.
static bool chain_walk(Chain *c, const char *path) {
    const char *p = path;
    while (*p) {
        size_t len = strcspn(p, ".");
        const CfgNode *parent = c->node[c->n - 1];
        // (an index of more than 9 digits reads nothing here, as it always has)
        const CfgNode *next = parent->type == CFG_LIST && len > 9 ? NULL : cfg_child(parent, p, len);
        if (!next || !chain_push(c, next)) return false;
        p += len;
        if (*p == '.') p++;
    }
    return true;
}

// ------------------------------------------------------------------------- resolver state

typedef struct {
    const CfgNode *node;  // an interpolation being resolved
    char full_key[512];   // its key, for the error trailer
    const char *object_type;
    int nest;             // the resolver's nesting when this frame began (restored at its end)
} Frame;

typedef struct {
    const CfgNode *root;
    bool throw_missing;
    Frame stack[CFG_INTERP_MAX_CHAIN];
    size_t depth;
    int nest;             // ${ nested inside the value being read (CFG_INTERP_MAX_NEST)
    size_t work;          // steps of the interpolation being read at the top (CFG_INTERP_MAX_WORK)
    size_t total;         // steps of this cfg_resolve call (CFG_INTERP_MAX_TOTAL_WORK)
    const char *path;     // what cfg_resolve was asked for, for the message
    bool over;            // a budget was exceeded: the message is in err, stop everywhere
    char *err;
    size_t errlen;
} Resolver;

// OmegaConf message + the trailer naming the key being read (the innermost interpolation). Once
// a budget was exceeded its message stands.
static CfgNode *fail(Resolver *r, const Chain *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static CfgNode *fail(Resolver *r, const Chain *at, const char *fmt, ...) {
    if (r->over) return NULL;
    char msg[1024], fk[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *type;
    if (r->depth) {
        snprintf(fk, sizeof fk, "%s", r->stack[r->depth - 1].full_key);
        type = r->stack[r->depth - 1].object_type;
    } else {
        chain_full_key(at, fk, sizeof fk);
        type = chain_object_type(at);
    }
    cfg_errf(r->err, r->errlen, "%s\n    full_key: %s\n    object_type=%s", msg, fk, type);
    return NULL;
}

static CfgNode *resolve_node(Resolver *r, Chain *c);

// Counts n steps of work; false (with the message) past CFG_INTERP_MAX_WORK. Values that paste
// another value twice (s1: ${s0}${s0}, s2: ${s1}${s1}, ...) take 2^depth steps: this is what
// stops them, in a fraction of a second, where OmegaConf would run for hours.
// Many interpolations, each within the limit, are bounded in all by CFG_INTERP_MAX_TOTAL_WORK.
static bool work(Resolver *r, const Chain *c, size_t n) {
    if (r->over) return false;
    if (n <= CFG_INTERP_MAX_WORK - r->work && n <= CFG_INTERP_MAX_TOTAL_WORK - r->total) {
        r->work += n;
        r->total += n;
        return true;
    }
    if (n > CFG_INTERP_MAX_WORK - r->work) {
        char start[512];
        if (r->depth) snprintf(start, sizeof start, "%s", r->stack[0].full_key);
        else chain_full_key(c, start, sizeof start);
        fail(r, c, "Interpolation too costly: resolving %s takes more than %u steps, the limit (does a value paste "
                   "another one several times, level after level?)", start, CFG_INTERP_MAX_WORK);
    } else {
        fail(r, c, "Interpolation too costly: resolving %s takes more than %u steps in all, the limit",
             *r->path ? r->path : "the config", CFG_INTERP_MAX_TOTAL_WORK);
    }
    r->over = true;  // the first message stands
    return false;
}

// Appends n bytes; false (with the message) when the text would pass CFG_MAX_SCALAR_BYTES or
// the work budget.
static bool buf_add(Resolver *r, const Chain *c, StrBuf *b, const char *s, size_t n) {
    if (!work(r, c, n + 1)) return false;
    if (n > CFG_MAX_SCALAR_BYTES - b->n) {
        fail(r, c, "Interpolation result too long: more than %u bytes, the limit for a config value",
             CFG_MAX_SCALAR_BYTES);
        r->over = true;
        return false;
    }
    sb_add(b, s, n);
    return true;
}

// Python str() of a resolved value, appended like buf_add.
static bool buf_add_str(Resolver *r, const Chain *c, StrBuf *b, const CfgNode *v) {
    if (v->type == CFG_STRING) return buf_add(r, c, b, v->s, strlen(v->s));
    size_t n;
    char *tmp = cfg_repr_alloc(v, &n);
    bool ok = buf_add(r, c, b, tmp, n);
    free(tmp);
    return ok;
}

// ------------------------------------------------------------------------- ${...}

static CfgNode *eval_interp(Resolver *r, Chain *c, const char *s, size_t *pos);

// The value at `key` (as written inside ${}), relative to the chain c of the node reading it.
static CfgNode *lookup(Resolver *r, Chain *c, const char *key) {
    size_t dots = strspn(key, ".");
    Chain t;  // not zero-filled: only node[0..n) is read
    t.n = 0;
    if (dots == 0) {
        chain_push(&t, r->root);
    } else {
        if (dots >= c->n) return fail(r, c, "Interpolation key '%s' not found", key);
        for (size_t i = 0; i < c->n - dots; i++) chain_push(&t, c->node[i]);
    }
    if (!work(r, c, t.n + strlen(key))) return NULL;
    if (!chain_walk(&t, key + dots)) return fail(r, c, "Interpolation key '%s' not found", key);
    const CfgNode *target = t.node[t.n - 1];
    for (size_t i = 0; i + 1 < c->n; i++)
        if (c->node[i] == target) return fail(r, c, "Interpolation to parent node detected");
    if (cfg_is_missing(target)) {
        if (!r->throw_missing) return cfg_copy(target);
        char fk[512];
        chain_full_key(&t, fk, sizeof fk);
        return fail(r, c, "MissingMandatoryValue while resolving interpolation: Missing mandatory value: %s", fk);
    }
    return resolve_node(r, &t);
}

// One resolver argument: a quoted string, a nested interpolation, or a typed token. *pos is
// left at the ',' or '}' that ends it.
static CfgNode *parse_arg(Resolver *r, Chain *c, const char *s, size_t *pos) {
    while (s[*pos] == ' ' || s[*pos] == '\t') (*pos)++;
    char q = s[*pos];
    StrBuf b = {0};
    if (q == '\'' || q == '"') {
        for ((*pos)++; s[*pos] && s[*pos] != q; (*pos)++) {
            if (s[*pos] == '\\' && s[*pos + 1] == q) (*pos)++;
            if (!buf_add(r, c, &b, s + *pos, 1)) { free(b.p); return NULL; }
        }
        if (!s[*pos]) { free(b.p); return fail(r, c, "Unterminated quoted string in '%s'", s); }
        (*pos)++;
        while (s[*pos] == ' ' || s[*pos] == '\t') (*pos)++;
        CfgNode *n = cfg_new_str(b.p);
        free(b.p);
        return n;
    }
    size_t pieces = 0;
    CfgNode *only = NULL;  // a lone ${...}: keeps its type
    while (s[*pos] && s[*pos] != ',' && s[*pos] != '}') {
        if (s[*pos] == '$' && s[*pos + 1] == '{') {
            CfgNode *v = eval_interp(r, c, s, pos);
            if (!v || !buf_add_str(r, c, &b, v)) { free(b.p); cfg_free(only); cfg_free(v); return NULL; }
            cfg_free(only);
            only = v;
        } else {
            if (s[*pos] != ' ' && s[*pos] != '\t') pieces++;
            if (!buf_add(r, c, &b, s + (*pos)++, 1)) { free(b.p); cfg_free(only); return NULL; }
        }
    }
    while (b.n && (b.p[b.n - 1] == ' ' || b.p[b.n - 1] == '\t')) b.p[--b.n] = 0;
    CfgNode *n;
    if (only && pieces == 0) {
        n = only;
        only = NULL;
    } else {
        n = cfg_override_type_token(b.p ? b.p : "");
    }
    cfg_free(only);
    free(b.p);
    return n;
}

// Arguments up to the closing '}' (consumed).
static int parse_args(Resolver *r, Chain *c, const char *s, size_t *pos, CfgNode **args, size_t max, size_t *n) {
    *n = 0;
    while (s[*pos] == ' ') (*pos)++;
    if (s[*pos] == '}') { (*pos)++; return 0; }
    for (;;) {
        CfgNode *a = parse_arg(r, c, s, pos);
        if (!a) return -1;
        if (*n < max) args[(*n)++] = a;
        else cfg_free(a);
        if (s[*pos] == ',') { (*pos)++; continue; }
        if (s[*pos] == '}') { (*pos)++; return 0; }
        fail(r, c, "Unterminated interpolation in '%s'", s);
        return -1;
    }
}

static CfgNode *resolver_env(Resolver *r, Chain *c, CfgNode **args, size_t n) {
    if (n < 1 || args[0]->type != CFG_STRING) return fail(r, c, "oc.env needs a variable name");
    const char *v = getenv(args[0]->s);
    if (v) return cfg_new_str(v);
    if (n < 2)
        return fail(r, c, "KeyError raised while resolving interpolation: \"Environment variable '%s' not found\"",
                    args[0]->s);
    if (args[1]->type == CFG_NULL) return cfg_new_null();
    char *text = cfg_repr_alloc(args[1], NULL);  // the default is str()-converted
    CfgNode *out = cfg_new_str(text);
    free(text);
    return out;
}

static CfgNode *resolver_now(Resolver *r, Chain *c, CfgNode **args, size_t n) {
    char pattern[256] = "", out[512];
    if (n >= 1) cfg_repr(args[0], pattern, sizeof pattern);
    time_t t = cfg_now();
    struct tm tm;
    localtime_r(&t, &tm);
    size_t w = strftime(out, sizeof out, pattern, &tm);
    if (w == 0 && pattern[0]) return fail(r, c, "now: cannot format '%s'", pattern);
    out[w] = 0;
    return cfg_new_str(out);
}

// ${hydra:key}: hydra.<key> of the same tree; null when absent (like OmegaConf.select).
static CfgNode *resolver_hydra(Resolver *r, Chain *c, CfgNode **args, size_t n) {
    char key[512], tmp[480] = "";
    if (n >= 1) cfg_repr(args[0], tmp, sizeof tmp);
    snprintf(key, sizeof key, "hydra%s%s", tmp[0] ? "." : "", tmp);
    Chain t;  // not zero-filled: only node[0..n) is read
    t.n = 0;
    chain_push(&t, r->root);
    if (!chain_walk(&t, key)) return cfg_new_null();
    const CfgNode *target = t.node[t.n - 1];
    if (cfg_is_missing(target)) {
        if (!r->throw_missing) return cfg_copy(target);
        return fail(r, c, "MissingMandatoryValue while resolving interpolation: Missing mandatory value: %s", key);
    }
    return resolve_node(r, &t);
}

static CfgNode *eval_interp_at(Resolver *r, Chain *c, const char *s, size_t *pos);

// Evaluates the ${...} starting at s[*pos]; *pos ends past its '}'. Nested ${} recurse: their
// depth inside one value is capped so that a crafted value cannot overflow the stack.
static CfgNode *eval_interp(Resolver *r, Chain *c, const char *s, size_t *pos) {
    if (r->nest >= CFG_INTERP_MAX_NEST) {
        fail(r, c, "Interpolation nested too deeply: more than %d levels of ${...} in one value, the limit",
             CFG_INTERP_MAX_NEST);
        r->over = true;
        return NULL;
    }
    r->nest++;
    CfgNode *v = eval_interp_at(r, c, s, pos);
    r->nest--;
    return v;
}

static CfgNode *eval_interp_at(Resolver *r, Chain *c, const char *s, size_t *pos) {
    *pos += 2;
    while (s[*pos] == ' ') (*pos)++;
    size_t start = *pos, i = *pos;
    if (isalpha((unsigned char)s[i]) || s[i] == '_') {
        while (isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == '.' || s[i] == '-') i++;
    }
    if (i > start && s[i] == ':') {  // resolver call
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(i - start), s + start);
        *pos = i + 1;
        CfgNode *args[8] = {0};
        size_t n = 0;
        CfgNode *v = NULL;
        if (parse_args(r, c, s, pos, args, 8, &n) == 0) {
            if (!strcmp(name, "oc.env")) v = resolver_env(r, c, args, n);
            else if (!strcmp(name, "now")) v = resolver_now(r, c, args, n);
            else if (!strcmp(name, "hydra")) v = resolver_hydra(r, c, args, n);
            else v = fail(r, c, "Unsupported interpolation type %s", name);
        }
        for (size_t k = 0; k < n; k++) cfg_free(args[k]);
        return v;
    }
    // A key: nested ${} pieces are pasted in as text, [i] becomes .i
    StrBuf key = {0};
    bool ok = true;
    while (ok && s[*pos] && s[*pos] != '}') {
        if (s[*pos] == '$' && s[*pos + 1] == '{') {
            CfgNode *v = eval_interp(r, c, s, pos);
            ok = v && buf_add_str(r, c, &key, v);
            cfg_free(v);
        } else if (s[*pos] == '[') {
            ok = buf_add(r, c, &key, ".", 1);
            (*pos)++;
        } else if (s[*pos] == ']' || s[*pos] == ' ') {
            (*pos)++;
        } else {
            ok = buf_add(r, c, &key, s + (*pos)++, 1);
        }
    }
    if (!ok) { free(key.p); return NULL; }
    if (s[*pos] != '}') { free(key.p); return fail(r, c, "Unterminated interpolation in '%s'", s); }
    (*pos)++;
    CfgNode *v = key.n ? lookup(r, c, key.p) : fail(r, c, "Empty interpolation in '%s'", s);
    free(key.p);
    return v;
}

// True when s is exactly one ${...} (so the result keeps the target's type).
static bool whole_value(const char *s) {
    if (strncmp(s, "${", 2) != 0) return false;
    int level = 0;
    for (const char *p = s; *p; p++) {
        if (p[0] == '$' && p[1] == '{') { level++; p++; continue; }
        if (*p == '}' && --level == 0) return p[1] == 0;
    }
    return false;
}

// The value of the interpolation string at the end of chain c.
static CfgNode *resolve_string(Resolver *r, Chain *c) {
    const CfgNode *n = c->node[c->n - 1];
    for (size_t i = 0; i < r->depth; i++)
        if (r->stack[i].node == n) return fail(r, c, "Recursive interpolation detected");
    if (r->depth == 0) r->work = 0;  // a new interpolation read from the tree: its own budget
    if (!work(r, c, 64)) return NULL;  // a frame costs far more than a pasted byte
    if (r->depth >= CFG_INTERP_MAX_CHAIN) {
        // Not a cycle (that is caught above, however long): a chain of keys, each an
        // interpolation of the next, longer than the stack this resolver keeps.
        fail(r, c, "Interpolation chain too deep: more than %d interpolations, each reading the next, the limit "
                   "(the chain starts at %s)",
             CFG_INTERP_MAX_CHAIN, r->stack[0].full_key);
        r->over = true;
        return NULL;
    }
    Frame *f = &r->stack[r->depth++];
    f->node = n;
    f->nest = r->nest;
    r->nest = 0;  // the nesting limit is per value
    chain_full_key(c, f->full_key, sizeof f->full_key);
    f->object_type = chain_object_type(c);

    const char *s = n->s;
    CfgNode *result = NULL;
    if (whole_value(s)) {
        size_t pos = 0;
        result = eval_interp(r, c, s, &pos);
    } else {
        StrBuf b = {0};
        size_t pos = 0;
        bool ok = true, throw_missing = r->throw_missing;
        r->throw_missing = true;  // a missing value cannot be pasted into a string
        while (ok && s[pos]) {
            if (s[pos] == '\\' && s[pos + 1] == '$' && s[pos + 2] == '{') {  // \${ : a literal ${
                ok = buf_add(r, c, &b, "${", 2);
                pos += 3;
            } else if (s[pos] == '\\' && s[pos + 1] == '\\' && s[pos + 2] == '$' && s[pos + 3] == '{') {
                ok = buf_add(r, c, &b, "\\", 1);
                pos += 2;
            } else if (s[pos] == '$' && s[pos + 1] == '{') {
                CfgNode *v = eval_interp(r, c, s, &pos);
                ok = v && buf_add_str(r, c, &b, v);
                cfg_free(v);
            } else {
                ok = buf_add(r, c, &b, s + pos++, 1);
            }
        }
        r->throw_missing = throw_missing;
        result = ok ? cfg_new_str(b.p) : NULL;
        free(b.p);
    }
    r->nest = f->nest;
    r->depth--;
    if (result && result->type != CFG_MAP && result->type != CFG_LIST) {
        cfg_loc_copy(&result->loc, &n->loc);  // where the interpolation was written, for later messages
    }
    return result;
}

// Deep copy of the chain's last node with its interpolations resolved.
static CfgNode *resolve_node(Resolver *r, Chain *c) {
    const CfgNode *n = c->node[c->n - 1];
    // What an interpolation copies counts (['${s0}', '${s0}'] per level doubles trees); the tree's
    // own nodes, read at depth 0, are bounded by the file's budgets already.
    bool counted = r->depth > 0;
    if (counted && !work(r, c, 1)) return NULL;
    CfgNode *out;
    if (n->type == CFG_MAP || n->type == CFG_LIST) {
        out = cfg_new(n->type);
        cfg_set_loc(out, n->loc.file, n->loc.line, n->loc.col);
        for (size_t i = 0; i < n->n; i++) {
            if (!chain_push(c, n->kids[i])) {
                cfg_free(out);
                fail(r, c, "config nested too deeply: more than %d levels below the root, the limit", MAX_CHAIN - 1);
                r->over = true;
                return NULL;
            }
            CfgNode *k = resolve_node(r, c);
            c->n--;
            if (!k) { cfg_free(out); return NULL; }
            if (n->type == CFG_MAP) cfg_map_put(out, n->kids[i]->key, k);
            else cfg_list_push(out, k);
        }
    } else if (cfg_is_missing(n)) {
        if (r->throw_missing) {
            char fk[512];
            chain_full_key(c, fk, sizeof fk);
            return fail(r, c, "Missing mandatory value: %s", fk);
        }
        out = cfg_copy(n);
    } else if (cfg_is_interpolation(n)) {
        out = resolve_string(r, c);
    } else {
        if (counted && n->s && !work(r, c, strlen(n->s))) return NULL;
        out = cfg_copy(n);
    }
    if (out) {
        free(out->key);
        out->key = cfg_strdup(n->key);
    }
    return out;
}

// ------------------------------------------------------------------------- public

bool cfg_is_missing(const CfgNode *n) { return n && n->type == CFG_STRING && strcmp(n->s, "???") == 0; }

bool cfg_is_interpolation(const CfgNode *n) { return n && n->type == CFG_STRING && strstr(n->s, "${") != NULL; }

CfgNode *cfg_resolve(const CfgNode *root, const char *path, bool throw_on_missing, char *err, size_t errlen) {
    Resolver r = {.root = root, .throw_missing = throw_on_missing, .path = path, .err = err, .errlen = errlen};
    Chain c;  // not zero-filled: only node[0..n) is read
    c.n = 0;
    chain_push(&c, root);
    if (!chain_walk(&c, path)) {
        cfg_errf(err, errlen, "Key '%s' not found", path);
        return NULL;
    }
    return resolve_node(&r, &c);
}
