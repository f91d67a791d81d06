// config/cfg_override.c — Hydra override grammar (basic subset) and struct-mode apply.
#include "config/cfg_override.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/suggest.h"

#define SEE_GRAMMAR "See https://hydra.cc/docs/1.2/advanced/override_grammar/basic for details"

typedef struct {
    const char *text;  // whole override, for messages
    const char *p;     // cursor
    char *err;
    size_t errlen;
} Parser;

// ------------------------------------------------------------------------- errors

// Parser errors Hydra reports with its "Error parsing override" prefix.
// A very long override is cut in the message, so that the reason after it is not lost.
static CfgNode *err_parse(Parser *P, const char *msg) {
    int n = (int)strlen(P->text);
    cfg_errf(P->err, P->errlen, "Error parsing override '%.*s%s'\n%s\n" SEE_GRAMMAR, n > 240 ? 200 : n, P->text,
             n > 240 ? "..." : "", msg);
    return NULL;
}

// ANTLR RecognitionExceptions: Hydra prints the bare parser message.
static CfgNode *err_mismatched(Parser *P) {
    char tok[16];
    if (*P->p) snprintf(tok, sizeof tok, "%c", *P->p);
    else snprintf(tok, sizeof tok, "<EOF>");
    cfg_errf(P->err, P->errlen, "mismatched input '%s' expecting <EOF>\n" SEE_GRAMMAR, tok);
    return NULL;
}

// A character the lexer has no token for.
static CfgNode *err_lexer(Parser *P) {
    unsigned char c = (unsigned char)*P->p;
    if (c >= 0x80) {
        // Hydra: "LexerNoViableAltException: <override>" and a caret under the character.
        size_t chars = 0;
        for (const char *s = P->text; s < P->p; s++)
            if (((unsigned char)*s & 0xC0) != 0x80) chars++;
        int col = (int)(strlen("LexerNoViableAltException: ") + chars + 1);
        cfg_errf(P->err, P->errlen, "LexerNoViableAltException: %s\n%*s\n" SEE_GRAMMAR, P->text, col, "^");
        return NULL;
    }
    char msg[64];
    snprintf(msg, sizeof msg, "token recognition error at: '%c'", c);
    return err_parse(P, msg);
}

// ------------------------------------------------------------------------- value parser

static bool is_id_start(int c) { return isalpha(c) || c == '_' || c == '$'; }
static bool is_id_char(int c) { return isalnum(c) || c == '_' || c == '$' || c == '-'; }

// Length of the ID at s (0 when there is none).
static size_t span_id(const char *s) {
    size_t i = 0;
    if (!is_id_start((unsigned char)s[0])) return 0;
    while (is_id_char((unsigned char)s[i])) i++;
    return i;
}

// Types a primitive made of a single token (Hydra's INT, FLOAT, BOOL, NULL; see
// config/cfg_number.h); anything else stays a string.
static CfgNode *typed_primitive(const char *raw, const char *value, bool single_token) {
    if (!single_token) return cfg_new_str(value);
    CfgNode *n = NULL;
    long long iv;
    double fv;
    bool big;
    if (cfg_hydra_int(raw, &iv, &big)) n = big ? NULL : cfg_new_int(iv);  // too big: a string
    else if (cfg_hydra_float(raw, &fv)) n = cfg_new_float(fv);
    else if (!strcasecmp(raw, "true") || !strcasecmp(raw, "false")) n = cfg_new_bool(tolower(raw[0]) == 't');
    else if (!strcasecmp(raw, "null")) n = cfg_new_null();
    if (!n) return cfg_new_str(value);
    n->s = cfg_strdup(raw);
    return n;
}

static void skip_ws(Parser *P) {
    while (*P->p == ' ' || *P->p == '\t') P->p++;
}

static CfgNode *parse_element(Parser *P, int depth);

// Characters that may appear unquoted in a primitive (besides ID characters and digits).
static bool is_unquoted_char(int c) { return c && strchr("/-\\+.$%*@?|:", c) != NULL; }

// Primitive: a run of ID/number/unquoted characters, escapes, whitespace and ${...}.
// in_key: a dict key (stops at ':').
static CfgNode *parse_primitive(Parser *P, bool in_key) {
    const char *start = P->p;
    StrBuf val = {0};
    bool single = true;  // no escapes, whitespace or interpolation: a candidate typed token
    for (;;) {
        int c = (unsigned char)*P->p;
        if (c == '\\' && P->p[1] && strchr("\\()[]{}:=, \t", P->p[1])) {
            sb_add(&val, P->p + 1, 1);
            P->p += 2;
            single = false;
        } else if (c == '$' && P->p[1] == '{') {
            // Interpolation: kept verbatim, braces balanced.
            const char *q = P->p + 2;
            for (int level = 1; level; q++) {
                if (!*q) {
                    free(val.p);
                    return err_parse(P, "unterminated interpolation '${'");
                }
                level += *q == '{' ? 1 : *q == '}' ? -1 : 0;
            }
            sb_add(&val, P->p, (size_t)(q - P->p));
            P->p = q;
            single = false;
        } else if (c == ' ' || c == '\t' || (c && (is_id_char(c) || (is_unquoted_char(c) && !(in_key && c == ':'))))) {
            sb_add(&val, P->p++, 1);
        } else {
            break;
        }
    }
    // Trailing whitespace is not part of the value.
    const char *end = P->p;
    while (val.n && (val.p[val.n - 1] == ' ' || val.p[val.n - 1] == '\t')) val.p[--val.n] = 0;
    while (end > start && (end[-1] == ' ' || end[-1] == '\t')) end--;
    int c = (unsigned char)*P->p;
    CfgNode *node = NULL;
    if (c && !strchr(",]}[{=()'\":", c)) {
        err_lexer(P);
    } else if (end == start) {
        err_mismatched(P);
    } else {
        char *raw = cfg_strndup(start, (size_t)(end - start));
        node = typed_primitive(raw, val.p, single && !strpbrk(raw, " \t"));
        free(raw);
    }
    free(val.p);
    return node;
}

static CfgNode *parse_quoted(Parser *P) {
    char q = *P->p;
    const char *s = P->p + 1;
    StrBuf val = {0};
    for (; *s != q; s++) {
        if (!*s) {
            free(val.p);
            return err_lexer(P);  // unterminated quote: the lexer cannot match it
        }
        if (*s == '\\' && s[1] == q) s++;
        sb_add(&val, s, 1);
    }
    P->p = s + 1;
    CfgNode *node = cfg_new_str(val.p);
    node->quoted = true;
    node->quote = q;
    free(val.p);
    return node;
}

// [a, b] or {k: v, ...}, the cursor on the bracket.
static CfgNode *parse_container(Parser *P, int depth) {
    bool dict = *P->p++ == '{';
    char close = dict ? '}' : ']';
    CfgNode *c = cfg_new(dict ? CFG_MAP : CFG_LIST);
    skip_ws(P);
    if (*P->p == close) {
        P->p++;
        return c;
    }
    for (;;) {
        char *key = NULL;
        if (dict) {
            skip_ws(P);
            CfgNode *k = parse_primitive(P, true);
            if (!k) break;
            key = cfg_strdup(k->s);
            cfg_free(k);
            skip_ws(P);
            if (*P->p != ':') {
                free(key);
                err_mismatched(P);
                break;
            }
            P->p++;
        }
        CfgNode *v = parse_element(P, depth + 1);
        if (v && dict) cfg_map_put(c, key, v);
        else if (v) cfg_list_push(c, v);
        free(key);
        if (!v) break;
        skip_ws(P);
        if (*P->p == ',') {
            P->p++;
            continue;
        }
        if (*P->p == close) {
            P->p++;
            return c;
        }
        err_mismatched(P);
        break;
    }
    cfg_free(c);
    return NULL;
}

static CfgNode *parse_element(Parser *P, int depth) {
    if (depth > CFG_MAX_DEPTH) {
        char msg[96];
        snprintf(msg, sizeof msg, "value nested deeper than %d levels, the limit", CFG_MAX_DEPTH);
        return err_parse(P, msg);
    }
    skip_ws(P);
    CfgNode *n;
    switch (*P->p) {
    case '[':
    case '{': n = parse_container(P, depth); break;
    case '\'':
    case '"': n = parse_quoted(P); break;
    default: n = parse_primitive(P, false); break;
    }
    skip_ws(P);
    return n;
}

// ------------------------------------------------------------------------- sweeps

// A decimal number as mantissa * 10^exp (exact, as Python's Decimal(str(x)) sees it).
typedef struct { long long mant; int exp; } Dec;

static bool dec_parse(const CfgNode *n, Dec *d) {
    if (n->type == CFG_INT) { d->mant = n->i; d->exp = 0; return true; }
    if (n->type != CFG_FLOAT || !isfinite(n->f)) return false;
    char buf[64];
    cfg_format_float(n->f, buf, sizeof buf, false);  // str(float): shortest round-trip digits
    long long m = 0;
    int exp = 0, digits = 0;
    bool neg = buf[0] == '-', frac = false;
    const char *p = buf + neg;
    for (; *p && *p != 'e'; p++) {
        if (*p == '.') { frac = true; continue; }
        if (++digits > 17) return false;
        m = m * 10 + (*p - '0');
        if (frac) exp--;
    }
    if (*p == 'e') exp += atoi(p + 1);
    d->mant = neg ? -m : m;
    d->exp = exp;
    return true;
}

// x * 10^k for k >= 0 without overflow.
static bool dec_scale(long long x, int k, long long *out) {
    for (; k > 0; k--) {
        if (x > LLONG_MAX / 10 || x < LLONG_MIN / 10) return false;
        x *= 10;
    }
    *out = x;
    return true;
}

// Value v (an integer count of 10^exp units) as a float node, via its decimal text.
static CfgNode *dec_float(long long v, int exp) {
    char buf[64];
    snprintf(buf, sizeof buf, "%llde%d", v, exp);
    return cfg_new_float(strtod(buf, NULL));
}

#define MAX_SWEEP 100000  // a sweep larger than this is surely a mistake (range(0,1,1e-9))

// A range() argument error, with the override whole (Hydra's text).
static int err_range(Parser *P, const char *what) {
    return cfg_errf(P->err, P->errlen, "Error parsing override '%s'\nrange() %s\n" SEE_GRAMMAR, P->text, what);
}

// Python's range(start, stop, step) appended to the list out; any float argument switches to
// exact decimal stepping (Hydra converts through Decimal), giving floats.
static int expand_range(Parser *P, CfgNode *args[3], CfgNode *out) {
    Dec d[3];
    bool any_float = false;
    for (int i = 0; i < 3; i++) {
        if (!args[i] || !dec_parse(args[i], &d[i])) return err_range(P, "arguments must be numbers");
        any_float |= args[i]->type == CFG_FLOAT;
    }
    int exp = d[0].exp < d[1].exp ? d[0].exp : d[1].exp;
    if (d[2].exp < exp) exp = d[2].exp;
    long long v[3];
    for (int i = 0; i < 3; i++)
        if (!dec_scale(d[i].mant, d[i].exp - exp, &v[i])) return err_range(P, "arguments have too many digits");
    if (v[2] == 0) return err_range(P, "arg 3 must not be zero");
    for (long long x = v[0]; v[2] > 0 ? x < v[1] : x > v[1]; x += v[2]) {
        if (out->n >= MAX_SWEEP) return cfg_errf(P->err, P->errlen, "Sweep '%s' has more than %d values", P->text, MAX_SWEEP);
        cfg_list_push(out, any_float ? dec_float(x, exp) : cfg_new_int(x));
        if ((v[2] > 0 && x > LLONG_MAX - v[2]) || (v[2] < 0 && x < LLONG_MIN - v[2])) break;
    }
    return 0;
}

// `name=` at the cursor (a keyword argument); advances past it.
static bool keyword_arg(Parser *P, char *name, size_t len) {
    size_t i = span_id(P->p), j = i;
    while (P->p[j] == ' ' || P->p[j] == '\t') j++;
    if (!i || P->p[j] != '=' || i >= len) return false;
    snprintf(name, len, "%.*s", (int)i, P->p);
    P->p += j + 1;
    return true;
}

// choice(a, b, ...) and range([start,] stop[, step]) with keyword forms, P->p past '(': the
// list of the sweep's values, or NULL with the message.
static CfgNode *parse_sweep_function(Parser *P, bool is_range) {
    CfgNode *rargs[3] = {NULL, NULL, NULL};  // start, stop, step
    CfgNode *pos = cfg_new_list(), *out = NULL;
    skip_ws(P);
    while (*P->p != ')') {
        char kw[32];
        bool has_kw = keyword_arg(P, kw, sizeof kw);
        CfgNode *v = parse_element(P, 1);
        if (!v) goto done;
        if (!has_kw) {
            cfg_list_push(pos, v);
        } else if (is_range && (!strcmp(kw, "start") || !strcmp(kw, "stop") || !strcmp(kw, "step"))) {
            int k = kw[2] == 'a' ? 0 : kw[2] == 'o' ? 1 : 2;
            cfg_free(rargs[k]);
            rargs[k] = v;
        } else {
            cfg_free(v);
            char msg[96];
            snprintf(msg, sizeof msg, "%s() got an unexpected keyword argument '%s'", is_range ? "range" : "choice", kw);
            err_parse(P, msg);
            goto done;
        }
        if (*P->p == ',') { P->p++; skip_ws(P); continue; }
        if (*P->p != ')') { err_mismatched(P); goto done; }
    }
    P->p++;  // ')'
    skip_ws(P);
    if (*P->p) { err_mismatched(P); goto done; }
    if (!is_range) {
        if (!pos->n) {
            err_parse(P, "choice() needs at least one value");
        } else {
            out = pos;
            pos = NULL;
        }
        goto done;
    }
    // range(stop) / range(start, stop[, step]); omitted ones: start 0, step 1.
    if (pos->n > 3 || (pos->n == 0 && !rargs[1] && !rargs[0])) { err_parse(P, "range() takes 1 to 3 arguments"); goto done; }
    CfgNode **pv = pos->kids;
    if (pos->n == 1 && !rargs[1]) { rargs[1] = rargs[0]; rargs[0] = pv[0]; pv[0] = NULL; }
    for (size_t i = 0; i < pos->n; i++)
        if (pv[i]) { cfg_free(rargs[i]); rargs[i] = pv[i]; pv[i] = NULL; }
    if (!rargs[1]) { rargs[1] = rargs[0]; rargs[0] = NULL; }  // range(stop=..) / range(-5, step=-1)
    if (!rargs[0]) rargs[0] = cfg_new_int(0);
    if (!rargs[2]) rargs[2] = cfg_new_int(1);
    out = cfg_new_list();
    if (expand_range(P, rargs, out)) {
        cfg_free(out);
        out = NULL;
    }
done:
    for (int i = 0; i < 3; i++) cfg_free(rargs[i]);
    cfg_free(pos);
    return out;
}

// The value after '='. Without `multirun`, a sweep is an error (Hydra's texts); with it, a
// sweep's values go to the new list *sweep and the function returns NULL with no error.
static CfgNode *parse_value(Parser *P, bool multirun, CfgNode **sweep) {
    skip_ws(P);
    if (!*P->p) return cfg_new_str("");  // `key=`: the empty string
    size_t fn_len = span_id(P->p);
    if (fn_len && fn_len < 64 && P->p[fn_len] == '(') {  // name(...): a sweep or a function
        char fn[64];
        snprintf(fn, sizeof fn, "%.*s", (int)fn_len, P->p);
        static const char *const sweeps[] = {"choice", "range", "interval", "glob", "sort", "shuffle", "tag", NULL};
        bool known = false;
        for (const char *const *s = sweeps; *s; s++) known |= strcmp(fn, *s) == 0;
        if (known && !multirun) {
            cfg_errf(P->err, P->errlen, "Sweep parameters '%s' requires --multirun", P->text);
            return NULL;
        }
        if (!strcmp(fn, "choice") || !strcmp(fn, "range")) {
            P->p += fn_len + 1;
            *sweep = parse_sweep_function(P, fn[0] == 'r');
            return NULL;
        }
        if (!strcmp(fn, "interval")) {
            cfg_errf(P->err, P->errlen, "BasicSweeper does not support sweep type : INTERVAL_SWEEP");
            return NULL;
        }
        char msg[128];
        snprintf(msg, sizeof msg, "function '%s' is not supported", fn);
        return err_parse(P, msg);
    }
    CfgNode *v = parse_element(P, 0);
    if (v && *P->p == ',' && !multirun) {
        cfg_free(v);
        cfg_errf(P->err, P->errlen,
                 "Ambiguous value for argument '%s'\n"
                 "1. To use it as a list, use key=[value1,value2]\n"
                 "2. To use it as string, quote the value: key=\\'value1,value2\\'\n"
                 "3. To sweep over it, add --multirun to your command line",
                 P->text);
        return NULL;
    }
    if (v && *P->p == ',') {  // a,b,c
        CfgNode *list = cfg_new_list();
        cfg_list_push(list, v);
        while (v && *P->p == ',') {
            P->p++;
            if ((v = parse_element(P, 0))) cfg_list_push(list, v);
        }
        if (v && *P->p) err_mismatched(P);
        if (v && !*P->p) *sweep = list;
        else cfg_free(list);
        return NULL;
    }
    if (v && *P->p) {
        cfg_free(v);
        return err_mismatched(P);
    }
    return v;
}

// ------------------------------------------------------------------------- rendering

// Hydra's Override._get_value_element_as_str.
static void render(const CfgNode *v, StrBuf *b) {
    char tmp[64];
    switch (v->type) {
    case CFG_NULL: sb_puts(b, "null"); return;
    case CFG_BOOL: sb_puts(b, v->b ? "True" : "False"); return;
    case CFG_INT: sb_printf(b, "%lld", v->i); return;
    case CFG_FLOAT: cfg_format_float(v->f, tmp, sizeof tmp, false); sb_puts(b, tmp); return;
    case CFG_STRING:
        if (v->quote) sb_add(b, &v->quote, 1);  // QuotedString.with_quotes()
        for (const char *s = v->s; *s; s++) {
            // escaped: the quote inside a quoted string, else escape_special_characters()
            if (v->quote ? *s == v->quote : strchr("\\()[]{}:=, \t", *s) != NULL) sb_puts(b, "\\");
            sb_add(b, s, 1);
        }
        if (v->quote) sb_add(b, &v->quote, 1);
        return;
    case CFG_LIST:
    case CFG_MAP:
        sb_puts(b, v->type == CFG_MAP ? "{" : "[");
        for (size_t i = 0; i < v->n; i++) {
            if (i) sb_puts(b, ",");
            if (v->type == CFG_MAP) {
                render(&(CfgNode){.type = CFG_STRING, .s = v->kids[i]->key}, b);
                sb_puts(b, ":");
            }
            render(v->kids[i], b);
        }
        sb_puts(b, v->type == CFG_MAP ? "}" : "]");
        return;
    }
}

char *cfg_override_render(const CfgNode *v) {
    StrBuf b = {0};
    render(v, &b);
    return sb_take(&b);
}

CfgNode *cfg_override_type_token(const char *text) { return typed_primitive(text, text, true); }

// ------------------------------------------------------------------------- override

void cfg_override_free(CfgOverride *ov) {
    for (size_t i = 0; i < ov->n_sweep; i++) cfg_free(ov->sweep[i]);
    free(ov->sweep);
    free(ov->key);
    free(ov->text);
    cfg_free(ov->value);
    memset(ov, 0, sizeof *ov);
}

int cfg_override_parse(const char *text, CfgOverride *ov, char *err, size_t errlen) {
    return cfg_override_parse_ex(text, false, ov, err, errlen);
}

int cfg_override_parse_ex(const char *text, bool multirun, CfgOverride *ov, char *err, size_t errlen) {
    memset(ov, 0, sizeof *ov);
    size_t text_len = strlen(text);
    if (text_len > CFG_MAX_SCALAR_BYTES) {
        cfg_errf(err, errlen, "Error parsing override '%.60s...'\nthe override is %zu bytes long, more than %u bytes, the limit",
                 text, text_len, CFG_MAX_SCALAR_BYTES);
        return -1;
    }
    Parser P = {.text = text, .p = text, .err = err, .errlen = errlen};
    if (strncmp(P.p, "++", 2) == 0) { ov->kind = CFG_OV_FORCE_ADD; P.p += 2; }
    else if (*P.p == '+') { ov->kind = CFG_OV_ADD; P.p++; }
    else if (*P.p == '~') { ov->kind = CFG_OV_DELETE; P.p++; }
    else ov->kind = CFG_OV_CHANGE;
    skip_ws(&P);

    // key: (ID | INDEX) ('.' (ID | INDEX))*
    const char *ks = P.p;
    while (is_id_char((unsigned char)*P.p) || *P.p == '.') P.p++;
    if (P.p == ks) {
        if (!*P.p || *P.p == '=') err_parse(&P, *P.p ? "missing key before '='" : "missing key");
        else err_lexer(&P);
        return -1;
    }
    char *key = cfg_strndup(ks, (size_t)(P.p - ks)), msg[300] = "";
    size_t nparts = 0;
    for (const char *part = key, *dot; part && !msg[0]; part = dot ? dot + 1 : NULL) {
        dot = strchr(part, '.');
        size_t len = dot ? (size_t)(dot - part) : strlen(part), nd = strspn(part, "0123456789");
        bool digits = len > 0 && nd >= len, id = len > 0 && span_id(part) == len;
        if (++nparts > CFG_MAX_DEPTH)
            snprintf(msg, sizeof msg, "the key has more than %d parts, the limit", CFG_MAX_DEPTH);
        else if (nparts > 1 && nd > 0 && nd < len)  // k.1a=2: the lexer reads k.1, then 'a' is unexpected
            snprintf(msg, sizeof msg, "extraneous input '%s' expecting EQUAL", part + nd);
        else if (!id && !(digits && (dot || nparts > 1)))  // each part is an ID or a list index
            snprintf(msg, 160, "token recognition error at: '%.*s'", (int)(len ? len : 1), len ? part : ".");
    }
    skip_ws(&P);
    if (msg[0]) {
        err_parse(&P, msg);
    } else if (*P.p == '@' || *P.p == '/') {
        err_parse(&P, "config groups and packages are not supported");
    } else if (!*P.p && ov->kind == CFG_OV_DELETE) {  // ~key
        ov->key = key;
        ov->text = cfg_strdup(text);
        return 0;
    } else if (!*P.p) {
        err_parse(&P, "missing EQUAL at '<EOF>'");
    } else if (*P.p != '=') {
        if ((unsigned char)*P.p >= 0x80 || !strchr(",]}[{()'\":", *P.p)) err_lexer(&P);
        else cfg_errf(err, errlen, "mismatched input '%c' expecting EQUAL\n" SEE_GRAMMAR, *P.p);
    } else {
        P.p++;
        if (err && errlen) err[0] = 0;
        CfgNode *sweep = NULL, *v = parse_value(&P, multirun, &sweep);
        if (v || (sweep && sweep->n)) {  // (an empty range() fails with an empty message)
            if (v) cfg_set_override(v, text);
            if (sweep) {
                cfg_set_override(sweep, text);
                ov->sweep = sweep->kids;  // the values move to ov
                ov->n_sweep = sweep->n;
                sweep->kids = NULL;
                sweep->n = 0;
            }
            cfg_free(sweep);
            ov->key = key;
            ov->value = v;
            ov->text = cfg_strdup(text);
            return 0;
        }
        cfg_free(sweep);
    }
    free(key);
    return -1;
}

// ------------------------------------------------------------------------- apply

void cfg_full_key(const CfgNode *root, const char *path, char *buf, size_t len) {
    const CfgNode *cur = root;
    size_t o = 0;
    buf[0] = 0;
    const char *p = path;
    while (*p) {
        const char *dot = strchr(p, '.');
        int plen = (int)(dot ? dot - p : (long)strlen(p));
        bool list = cur && cur->type == CFG_LIST;
        int w = list ? snprintf(buf + o, len - o, "[%.*s]", plen, p)
                     : snprintf(buf + o, len - o, "%s%.*s", o ? "." : "", plen, p);
        if (w < 0 || (size_t)w >= len - o) return;
        o += (size_t)w;
        cur = cur ? cfg_child(cur, p, (size_t)plen) : NULL;
        p += plen;
        if (*p == '.') p++;
    }
}

typedef struct {
    CfgNode *root;
    const CfgOverride *ov;
    bool force;  // + / ++: struct mode does not apply
    bool open;   // below an open (non-struct) top-level key
    char *err;
    size_t errlen;
} Apply;

// "\nDid you mean 'x.y'?" for the key closest to `want` in root (config/suggest.h), or "".
static void suggestion(const CfgNode *root, const char *want, char *buf, size_t len) {
    Suggest s;
    suggest_init(&s, want, true);
    suggest_tree(&s, root);
    const char *pick = suggest_result(&s);
    if (pick) snprintf(buf, len, "\nDid you mean '%s'?", pick);
    else buf[0] = 0;
}

// "Key 'k' is not in struct": wrapped in Hydra's "Could not override" text for key=value,
// followed by mingpt's suggestion of the closest known key.
static int err_struct(Apply *A, const char *missing_key, const char *full_key) {
    char hint[600], want[1024];
    // The key that was meant: the override's key, or the merged dict's key (a={...new:1}).
    snprintf(want, sizeof want, "%s", strlen(full_key) > strlen(A->ov->key) ? full_key : A->ov->key);
    suggestion(A->root, want, hint, sizeof hint);
    if (A->ov->kind == CFG_OV_CHANGE)
        return cfg_errf(A->err, A->errlen,
                        "Could not override '%s'.\nTo append to your config use +%s\n"
                        "Key '%s' is not in struct\n    full_key: %s\n    object_type=dict%s",
                        A->ov->key, A->ov->text, missing_key, full_key, hint);
    return cfg_errf(A->err, A->errlen, "Error merging override %s\nKey '%s' is not in struct\n    full_key: %s\n    object_type=dict%s",
                    A->ov->text, missing_key, full_key, hint);
}

static int err_index(Apply *A, const char *full_key, const char *what) {
    return cfg_errf(A->err, A->errlen, "Error merging override %s\n%s\n    full_key: %s\n    object_type=list",
                    A->ov->text, what, full_key);
}

static bool list_index(const char *s, const CfgNode *list, size_t *idx) {
    if (!*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 18) return false;
    *idx = (size_t)strtoull(s, NULL, 10);
    return *idx < list->n;
}

// Merges map src into map dst; new keys need force/open (struct mode).
static int merge_struct(Apply *A, CfgNode *dst, const CfgNode *src, const char *full) {
    for (size_t i = 0; i < src->n; i++) {
        const CfgNode *s = src->kids[i];
        char fk[1024];
        snprintf(fk, sizeof fk, "%s.%s", full, s->key);
        CfgNode *d = cfg_map_get(dst, s->key);
        if (!d && !A->force && !A->open) return err_struct(A, s->key, fk);
        if (d && d->type == CFG_MAP && s->type == CFG_MAP) {
            if (merge_struct(A, d, s, fk)) return -1;
        } else {
            cfg_map_put(dst, s->key, cfg_copy(s));
        }
    }
    return 0;
}

// Stores value at child `part` of container node (merging dicts into dicts).
static int set_child(Apply *A, CfgNode *node, const char *part, const char *full) {
    const CfgNode *value = A->ov->value;
    if (node->type == CFG_LIST) {
        size_t idx;
        if (!list_index(part, node, &idx))
            return err_index(A, full, strspn(part, "0123456789") == strlen(part) ? "list index out of range"
                                                                                 : "list indices must be integers");
        CfgNode *cur = node->kids[idx];
        if (cur->type == CFG_MAP && value->type == CFG_MAP) return merge_struct(A, cur, value, full);
        CfgNode *c = cfg_copy(value);
        free(c->key);
        c->key = NULL;
        cfg_free(cur);
        node->kids[idx] = c;
        return 0;
    }
    CfgNode *cur = cfg_map_get(node, part);
    if (!cur && !A->force && !A->open) return err_struct(A, part, full);
    if (cur && cur->type == CFG_MAP && value->type == CFG_MAP) return merge_struct(A, cur, value, full);
    cfg_map_put(node, part, cfg_copy(value));
    return 0;
}

static int update(Apply *A) {
    char *path = cfg_strdup(A->ov->key);
    CfgNode *node = A->root;
    char full[1024] = "";
    int rc = 0;
    char *part = path;
    for (;;) {
        char *dot = strchr(part, '.');
        if (dot) *dot = 0;
        // full key of this part, OmegaConf style (list items in brackets)
        size_t o = strlen(full);
        if (node->type == CFG_LIST) snprintf(full + o, sizeof full - o, "[%s]", part);
        else snprintf(full + o, sizeof full - o, "%s%s", o ? "." : "", part);
        if (!dot) {
            rc = set_child(A, node, part, full);
            break;
        }
        CfgNode *child;
        size_t idx = 0;
        if (node->type == CFG_LIST) {
            if (!list_index(part, node, &idx)) {
                rc = err_index(A, full, "list index out of range");
                break;
            }
            child = node->kids[idx];
        } else {
            child = cfg_map_get(node, part);
            if (!child) {
                if (!A->force && !A->open) {
                    rc = err_struct(A, part, full);
                    break;
                }
                child = cfg_new_map();
                cfg_set_override(child, A->ov->text);
                cfg_map_put(node, part, child);
            }
        }
        if (child->type != CFG_MAP && child->type != CFG_LIST) {
            // OmegaConf.update replaces a scalar on the path with an empty dict.
            CfgNode *m = cfg_new_map();
            cfg_set_override(m, A->ov->text);
            if (node->type == CFG_LIST) {
                cfg_free(node->kids[idx]);
                node->kids[idx] = m;
            } else {
                cfg_map_put(node, part, m);
            }
            child = m;
        }
        node = child;
        part = dot + 1;
    }
    free(path);
    return rc;
}

static int apply_delete(CfgNode *root, const CfgOverride *ov, char *err, size_t errlen) {
    CfgNode *cur = cfg_select(root, ov->key);
    if (!cur || cur->type == CFG_NULL)
        return cfg_errf(err, errlen, "Could not delete from config. '%s' does not exist.", ov->key);
    if (ov->value && !cfg_equal(cur, ov->value)) {
        char a[512], b[512];
        cfg_repr(cur, a, sizeof a);
        cfg_repr(ov->value, b, sizeof b);
        return cfg_errf(err, errlen, "Could not delete from config. The value of '%s' is %s and not %s.", ov->key, a, b);
    }
    char *parent_path = cfg_strdup(ov->key);
    char *dot = strrchr(parent_path, '.');
    const char *last = dot ? dot + 1 : parent_path;
    if (dot) *dot = 0;
    CfgNode *parent = dot ? cfg_select(root, parent_path) : root;
    if (parent->type == CFG_LIST) {
        size_t idx = (size_t)strtoull(last, NULL, 10);
        cfg_list_del(parent, idx);
    } else {
        cfg_map_del(parent, last);
    }
    free(parent_path);
    return 0;
}

// Levels of a value as a YAML reader counts them: a scalar 1, a map or list 1 + its deepest item.
static int value_levels(const CfgNode *v) {
    int deepest = 0;
    if (v->type == CFG_MAP || v->type == CFG_LIST)
        for (size_t i = 0; i < v->n; i++) {
            const int d = value_levels(v->kids[i]);
            if (d > deepest) deepest = d;
        }
    return 1 + deepest;
}

int cfg_override_apply(CfgNode *root, const CfgOverride *ov, const char *const *open_keys, char *err,
                       size_t errlen) {
    if (!root || root->type != CFG_MAP) return cfg_errf(err, errlen, "Error merging override %s\nthe config is not a mapping", ov->text);
    if (ov->kind == CFG_OV_DELETE) return apply_delete(root, ov, err, errlen);
    // The composed config is printed (--cfg, .hydra/) and read back as YAML: an override may
    // not nest it deeper than a config file may be (the key's parts, then its value's levels).
    int parts = 1;
    for (const char *c = ov->key; *c; c++) parts += *c == '.';
    const int levels = parts + (ov->value ? value_levels(ov->value) : 1);
    if (levels > CFG_MAX_DEPTH)
        return cfg_errf(err, errlen, "Error merging override %s\nthe config would be nested %d levels deep (%d key "
                        "parts and a value of %d levels), deeper than %d levels, the limit for a config", ov->text,
                        levels, parts, levels - parts, CFG_MAX_DEPTH);

    Apply A = {.root = root, .ov = ov, .err = err, .errlen = errlen};
    size_t first_len = strcspn(ov->key, ".");
    for (const char *const *k = open_keys; k && *k; k++)
        if (strlen(*k) == first_len && strncmp(*k, ov->key, first_len) == 0 && ov->key[first_len] == '.') A.open = true;

    if (ov->kind == CFG_OV_ADD) {
        const CfgNode *cur = cfg_select(root, ov->key);
        if (cur && cur->type != CFG_NULL && ov->value->type != CFG_MAP && ov->value->type != CFG_LIST)
            return cfg_errf(err, errlen,
                            "Could not append to config. An item is already at '%s'.\n"
                            "Either remove + prefix: '%s'\n"
                            "Or add a second + to add or override '%s': '+%s'\n",
                            ov->key, ov->text + 1, ov->key, ov->text);
    }
    A.force = ov->kind != CFG_OV_CHANGE;
    return update(&A);
}
