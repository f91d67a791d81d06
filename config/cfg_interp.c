// config/cfg_interp.c — OmegaConf interpolation: parsing ${...}, key lookup, resolvers.
#include "config/cfg_interp.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/cfg_override.h"

#define MAX_CHAIN 128  // nesting depth of a config this code can point into
#define MAX_NEST 64    // interpolations being resolved at once (a chain a -> b -> c ...)

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

// Child `seg` (a map key or a decimal list index) of node, or NULL.
static const CfgNode *child(const CfgNode *node, const char *seg, size_t len) {
    if (node->type == CFG_MAP) {
        for (size_t i = 0; i < node->n; i++)
            if (strlen(node->kids[i]->key) == len && strncmp(node->kids[i]->key, seg, len) == 0) return node->kids[i];
        return NULL;
    }
    if (node->type != CFG_LIST || len == 0 || len > 9) return NULL;
    size_t idx = 0;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)seg[i])) return NULL;
        idx = idx * 10 + (size_t)(seg[i] - '0');
    }
    return idx < node->n ? node->kids[idx] : NULL;
}

// Extends c along a dotted path; false when a part is absent.
static bool chain_walk(Chain *c, const char *path) {
    const char *p = path;
    while (*p) {
        size_t len = strcspn(p, ".");
        const CfgNode *next = child(c->node[c->n - 1], p, len);
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
} Frame;

typedef struct {
    const CfgNode *root;
    bool throw_missing;
    Frame stack[MAX_NEST];
    size_t depth;
    char *err;
    size_t errlen;
} Resolver;

// OmegaConf message + the trailer naming the key being read (the innermost interpolation).
static CfgNode *fail(Resolver *r, const Chain *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static CfgNode *fail(Resolver *r, const Chain *at, const char *fmt, ...) {
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

// Python str() of a resolved value, appended to a growing buffer.
static void append_str(char **buf, size_t *len, const CfgNode *v) {
    char tmp[4096];
    cfg_repr(v, tmp, sizeof tmp);
    size_t add = strlen(tmp);
    *buf = realloc(*buf, *len + add + 1);
    if (!*buf) abort();
    memcpy(*buf + *len, tmp, add + 1);
    *len += add;
}

static void append_chars(char **buf, size_t *len, const char *s, size_t n) {
    *buf = realloc(*buf, *len + n + 1);
    if (!*buf) abort();
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = 0;
}

// ------------------------------------------------------------------------- ${...}

static CfgNode *eval_interp(Resolver *r, Chain *c, const char *s, size_t *pos);

// The value at `key` (as written inside ${}), relative to the chain c of the node reading it.
static CfgNode *lookup(Resolver *r, Chain *c, const char *key) {
    size_t dots = strspn(key, ".");
    Chain t = {.n = 0};
    if (dots == 0) {
        chain_push(&t, r->root);
    } else {
        if (dots >= c->n) return fail(r, c, "Interpolation key '%s' not found", key);
        for (size_t i = 0; i < c->n - dots; i++) chain_push(&t, c->node[i]);
    }
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
    if (q == '\'' || q == '"') {
        char *buf = NULL;
        size_t len = 0;
        append_chars(&buf, &len, "", 0);
        for ((*pos)++; s[*pos] && s[*pos] != q; (*pos)++) {
            if (s[*pos] == '\\' && s[*pos + 1] == q) (*pos)++;
            append_chars(&buf, &len, s + *pos, 1);
        }
        if (!s[*pos]) { free(buf); return fail(r, c, "Unterminated quoted string in '%s'", s); }
        (*pos)++;
        while (s[*pos] == ' ' || s[*pos] == '\t') (*pos)++;
        CfgNode *n = cfg_new_str(buf);
        free(buf);
        return n;
    }
    char *buf = NULL;
    size_t len = 0, pieces = 0;
    CfgNode *only = NULL;  // a lone ${...}: keeps its type
    append_chars(&buf, &len, "", 0);
    while (s[*pos] && s[*pos] != ',' && s[*pos] != '}') {
        if (s[*pos] == '$' && s[*pos + 1] == '{') {
            CfgNode *v = eval_interp(r, c, s, pos);
            if (!v) { free(buf); cfg_free(only); return NULL; }
            append_str(&buf, &len, v);
            cfg_free(only);
            only = v;
        } else {
            if (s[*pos] != ' ' && s[*pos] != '\t') pieces++;
            append_chars(&buf, &len, s + (*pos)++, 1);
        }
    }
    while (len && (buf[len - 1] == ' ' || buf[len - 1] == '\t')) buf[--len] = 0;
    CfgNode *n;
    if (only && pieces == 0) {
        n = only;
        only = NULL;
    } else {
        n = cfg_override_type_token(buf);
    }
    cfg_free(only);
    free(buf);
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
    char tmp[4096];
    cfg_repr(args[1], tmp, sizeof tmp);  // the default is str()-converted
    return cfg_new_str(tmp);
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
    Chain t = {.n = 0};
    chain_push(&t, r->root);
    if (!chain_walk(&t, key)) return cfg_new_null();
    const CfgNode *target = t.node[t.n - 1];
    if (cfg_is_missing(target)) {
        if (!r->throw_missing) return cfg_copy(target);
        return fail(r, c, "MissingMandatoryValue while resolving interpolation: Missing mandatory value: %s", key);
    }
    return resolve_node(r, &t);
}

// Evaluates the ${...} starting at s[*pos]; *pos ends past its '}'.
static CfgNode *eval_interp(Resolver *r, Chain *c, const char *s, size_t *pos) {
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
    char *key = NULL;
    size_t len = 0;
    append_chars(&key, &len, "", 0);
    while (s[*pos] && s[*pos] != '}') {
        if (s[*pos] == '$' && s[*pos + 1] == '{') {
            CfgNode *v = eval_interp(r, c, s, pos);
            if (!v) { free(key); return NULL; }
            append_str(&key, &len, v);
            cfg_free(v);
        } else if (s[*pos] == '[') {
            append_chars(&key, &len, ".", 1);
            (*pos)++;
        } else if (s[*pos] == ']' || s[*pos] == ' ') {
            (*pos)++;
        } else {
            append_chars(&key, &len, s + (*pos)++, 1);
        }
    }
    if (s[*pos] != '}') { free(key); return fail(r, c, "Unterminated interpolation in '%s'", s); }
    (*pos)++;
    CfgNode *v = len ? lookup(r, c, key) : fail(r, c, "Empty interpolation in '%s'", s);
    free(key);
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
    if (r->depth >= MAX_NEST) return fail(r, c, "Recursive interpolation detected");
    Frame *f = &r->stack[r->depth++];
    f->node = n;
    chain_full_key(c, f->full_key, sizeof f->full_key);
    f->object_type = chain_object_type(c);

    const char *s = n->s;
    CfgNode *result = NULL;
    if (whole_value(s)) {
        size_t pos = 0;
        result = eval_interp(r, c, s, &pos);
    } else {
        char *buf = NULL;
        size_t len = 0, pos = 0;
        append_chars(&buf, &len, "", 0);
        bool ok = true, throw_missing = r->throw_missing;
        r->throw_missing = true;  // a missing value cannot be pasted into a string
        while (ok && s[pos]) {
            if (s[pos] == '\\' && s[pos + 1] == '$' && s[pos + 2] == '{') {  // \${ : a literal ${
                append_chars(&buf, &len, "${", 2);
                pos += 3;
            } else if (s[pos] == '\\' && s[pos + 1] == '\\' && s[pos + 2] == '$' && s[pos + 3] == '{') {
                append_chars(&buf, &len, "\\", 1);
                pos += 2;
            } else if (s[pos] == '$' && s[pos + 1] == '{') {
                CfgNode *v = eval_interp(r, c, s, &pos);
                ok = v != NULL;
                if (v) append_str(&buf, &len, v);
                cfg_free(v);
            } else {
                append_chars(&buf, &len, s + pos++, 1);
            }
        }
        r->throw_missing = throw_missing;
        result = ok ? cfg_new_str(buf) : NULL;
        free(buf);
    }
    r->depth--;
    if (result && result->type != CFG_MAP && result->type != CFG_LIST) {
        // The value is where the interpolation was written, for later messages.
        free(result->loc.file);
        free(result->loc.override);
        result->loc.file = cfg_strdup(n->loc.file);
        result->loc.override = cfg_strdup(n->loc.override);
        result->loc.line = n->loc.line;
        result->loc.col = n->loc.col;
    }
    return result;
}

// Deep copy of the chain's last node with its interpolations resolved.
static CfgNode *resolve_node(Resolver *r, Chain *c) {
    const CfgNode *n = c->node[c->n - 1];
    CfgNode *out;
    if (n->type == CFG_MAP || n->type == CFG_LIST) {
        out = cfg_new(n->type);
        cfg_set_loc(out, n->loc.file, n->loc.line, n->loc.col);
        for (size_t i = 0; i < n->n; i++) {
            if (!chain_push(c, n->kids[i])) { cfg_free(out); return fail(r, c, "config nested too deeply"); }
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
    Resolver r = {.root = root, .throw_missing = throw_on_missing, .err = err, .errlen = errlen};
    Chain c = {.n = 0};
    chain_push(&c, root);
    if (!chain_walk(&c, path)) {
        cfg_errf(err, errlen, "Key '%s' not found", path);
        return NULL;
    }
    return resolve_node(&r, &c);
}

void cfg_error_trailer(const CfgNode *root, const char *path, char *buf, size_t len) {
    Chain c = {.n = 0};
    chain_push(&c, root);
    char fk[512];
    if (chain_walk(&c, path)) chain_full_key(&c, fk, sizeof fk);
    else snprintf(fk, sizeof fk, "%s", path);
    snprintf(buf, len, "\n    full_key: %s\n    object_type=%s", fk, chain_object_type(&c));
}
