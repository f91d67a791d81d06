// config/cfg_yaml.c — YAML in and out of a config tree: OmegaConf's scalar typing, the emitter,
// and the loader with its budgets.
#include "config/cfg_yaml.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "config/cfg_number.h"
#include "config/cfg_tree.h"

// ------------------------------------------------------------------------- typing

static bool one_of(const char *s, const char *const *words) {
    for (; *words; words++)
        if (strcmp(s, *words) == 0) return true;
    return false;
}

void cfg_resolve_plain(CfgNode *n, const char *text) {
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL", NULL};
    static const char *const trues[] = {"yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON", NULL};
    static const char *const falses[] = {"no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF", NULL};
    bool big;
    if (one_of(text, nulls)) {
        n->type = CFG_NULL;
    } else if (one_of(text, trues) || one_of(text, falses)) {
        n->type = CFG_BOOL;
        n->b = one_of(text, trues);
    } else if (cfg_yaml_int(text, &n->i, &big) && !big) {
        n->type = CFG_INT;
    } else if (cfg_yaml_float(text, &n->f)) {
        n->type = CFG_FLOAT;
    } else {
        n->type = CFG_STRING;
        if (!n->s) n->s = cfg_strdup(text);
    }
}

// ------------------------------------------------------------------------- output

static int emit_write(void *data, unsigned char *buffer, size_t size) {
    sb_add(data, (const char *)buffer, size);
    return 1;
}

// True when a plain scalar with this text would be read back as something else. Mirrors
// OmegaConf's dumper: PyYAML quotes whatever its resolver would type (null, YAML 1.1 bools,
// ints, floats, timestamps, '<<', '='), and OmegaConf also quotes y/n and anything Python's
// float() accepts.
static bool needs_quotes(const char *s) {
    static const char *const yn[] = {"y", "Y", "n", "N", "<<", "=", NULL};
    CfgNode tmp = {.type = CFG_STRING};
    cfg_resolve_plain(&tmp, s);
    // Digits beyond 64 bits are how the tree holds a big unsigned int (a seed): written plain.
    bool big_int = tmp.type == CFG_STRING && s[strspn(s, "0123456789")] == 0 && strlen(s) > 18;
    double f;
    bool q = tmp.type != CFG_STRING || one_of(s, yn) || (cfg_py_float(s, &f) != CONV_BAD && !big_int) ||
             cfg_yaml_timestamp(s);
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
    bool map = n->type == CFG_MAP;
    switch (n->type) {
    case CFG_NULL: return emit_scalar(e, "null", false);
    case CFG_BOOL: return emit_scalar(e, n->b ? "true" : "false", false);
    case CFG_INT: snprintf(tmp, sizeof tmp, "%lld", n->i); return emit_scalar(e, tmp, false);
    case CFG_FLOAT: cfg_format_float(n->f, tmp, sizeof tmp, true); return emit_scalar(e, tmp, false);
    case CFG_STRING: return emit_scalar(e, n->s, needs_quotes(n->s));
    case CFG_LIST:
    case CFG_MAP: {  // block style, or [] / {} when empty
        int started = map ? yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, n->n ? YAML_BLOCK_MAPPING_STYLE
                                                                                       : YAML_FLOW_MAPPING_STYLE)
                          : yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, n->n ? YAML_BLOCK_SEQUENCE_STYLE
                                                                                         : YAML_FLOW_SEQUENCE_STYLE);
        if (!started || !yaml_emitter_emit(e, &ev)) return 0;
        for (size_t i = 0; i < n->n; i++) {
            if (map && !emit_scalar(e, n->kids[i]->key, needs_quotes(n->kids[i]->key))) return 0;
            if (!emit_node(e, n->kids[i])) return 0;
        }
        return (map ? yaml_mapping_end_event_initialize(&ev) : yaml_sequence_end_event_initialize(&ev)) &&
               yaml_emitter_emit(e, &ev);
    }
    }
    return 0;
}

char *cfg_to_yaml(const CfgNode *root) {
    yaml_emitter_t e;
    yaml_event_t ev;
    StrBuf out = {0};
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
    if (!ok) free(out.p);
    return ok ? sb_take(&out) : NULL;
}

// ------------------------------------------------------------------------- input

typedef struct {
    yaml_parser_t parser;
    const char *origin;  // file name or origin used in messages and locations
    const char *text;    // the input (for reader-error positions)
    size_t len;
    char *err;
    size_t errlen;
    CfgNode *anchors;    // a map: anchor name -> a copy of its node (a later anchor replaces one)
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

static bool tag_is(const char *tag, const char *name) {
    static const char prefix[] = "tag:yaml.org,2002:";
    return strncmp(tag, prefix, sizeof prefix - 1) == 0 && strcmp(tag + sizeof prefix - 1, name) == 0;
}

static CfgNode *load_node(Loader *L, yaml_event_t *ev, const char *path);

// Builds a scalar node from its event (typing plain scalars; honouring explicit tags).
static CfgNode *load_scalar(Loader *L, yaml_event_t *ev, const char *path) {
    int line = (int)ev->start_mark.line + 1, col = (int)ev->start_mark.column + 1;
    if (!scalar_fits(L, ev->data.scalar.length, line, col, path)) return NULL;
    CfgNode *n = cfg_new_str_n((const char *)ev->data.scalar.value, ev->data.scalar.length);
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

// One key and its value into map m; false with the message in L->err.
static bool load_entry(Loader *L, CfgNode *m, yaml_event_t *kev, const char *path) {
    int kl = (int)kev->start_mark.line + 1, kc = (int)kev->start_mark.column + 1;
    if (kev->type != YAML_SCALAR_EVENT) {
        cfg_errf(L->err, L->errlen, "%s:%d:%d: %s: only scalar mapping keys are supported", L->origin, kl, kc,
                 *path ? path : "(root)");
        return false;
    }
    if (!scalar_fits(L, kev->data.scalar.length, kl, kc, path)) return false;
    char *key = cfg_strndup((const char *)kev->data.scalar.value, kev->data.scalar.length);
    bool merge_key = kev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && strcmp(key, "<<") == 0;
    char *cpath = cfg_printf("%s%s%s", path, *path ? "." : "", key);
    yaml_event_t vev;
    CfgNode *v = next_event(L, &vev) ? load_node(L, &vev, cpath) : NULL;
    bool ok = v != NULL;
    long idx = v && !merge_key ? cfg_map_find(m, key) : -1;
    if (v && merge_key) {
        ok = apply_merge_key(L, m, v, kl, kc, path);
        cfg_free(v);
    } else if (idx >= 0 && !m->kids[idx]->merged) {
        // PyYAML's words ("found duplicate key <key>"), then the full key and both lines.
        cfg_errf(L->err, L->errlen, "%s:%d:%d: found duplicate key %s (%s was first defined at line %d)", L->origin,
                 kl, kc, key, cpath, m->kids[idx]->key_loc.line);
        cfg_free(v);
        ok = false;
    } else if (v) {
        cfg_loc_copy(&v->key_loc, &(CfgLoc){.file = (char *)L->origin, .line = kl, .col = kc});
        cfg_map_put(m, key, v);
    }
    free(cpath);
    free(key);
    return ok;
}

static CfgNode *load_mapping(Loader *L, CfgNode *m, const char *path) {
    for (;;) {
        yaml_event_t kev;
        if (!next_event(L, &kev)) return NULL;
        bool end = kev.type == YAML_MAPPING_END_EVENT, ok = end || load_entry(L, m, &kev, path);
        yaml_event_delete(&kev);
        if (end || !ok) return ok ? m : NULL;
    }
}

static CfgNode *load_sequence(Loader *L, CfgNode *l, const char *path) {
    for (;;) {
        yaml_event_t ev;
        if (!next_event(L, &ev)) return NULL;
        if (ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            return l;
        }
        char *cpath = cfg_printf("%s%s%zu", path, *path ? "." : "", l->n);
        CfgNode *v = load_node(L, &ev, cpath);
        free(cpath);
        if (!v) return NULL;
        cfg_list_push(l, v);
    }
}

// A copy of the node an alias names, within the budgets.
static CfgNode *load_alias(Loader *L, const char *name, int line, int col) {
    const CfgNode *a = cfg_map_get(L->anchors, name);
    size_t count = cfg_count(a);
    if (!a) {
        cfg_errf(L->err, L->errlen, "%s:%d:%d: found undefined alias '*%s'", L->origin, line, col, name);
    } else if (count > CFG_MAX_ALIAS_NODES - L->alias_nodes) {
        // Checked before copying: x1: [*x0 x10], x2: [*x1 x10] ... grows tenfold per line.
        cfg_errf(L->err, L->errlen,
                 "%s:%d:%d: aliases expand to more than %u nodes in all (an alias bomb?), the limit for a config",
                 L->origin, line, col, CFG_MAX_ALIAS_NODES);
    } else if (budget_nodes(L, count, line, col)) {
        L->alias_nodes += count;
        return cfg_copy(a);
    }
    return NULL;
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
    switch (ok ? ev->type : YAML_NO_EVENT) {
    case YAML_NO_EVENT: break;
    case YAML_ALIAS_EVENT: n = load_alias(L, (const char *)ev->data.alias.anchor, line, col); break;
    case YAML_SCALAR_EVENT:
        anchor = cfg_strdup((const char *)ev->data.scalar.anchor);
        n = load_scalar(L, ev, path);
        break;
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT: {
        bool map = ev->type == YAML_MAPPING_START_EVENT;
        anchor = cfg_strdup((const char *)(map ? ev->data.mapping_start.anchor : ev->data.sequence_start.anchor));
        n = cfg_new(map ? CFG_MAP : CFG_LIST);
        cfg_set_loc(n, L->origin, line, col);
        yaml_event_delete(ev);  // before the children's events (deleting it again below is harmless)
        if (!(map ? load_mapping(L, n, path) : load_sequence(L, n, path))) {
            cfg_free(n);
            n = NULL;
        }
        break;
    }
    default: cfg_errf(L->err, L->errlen, "%s:%d:%d: unexpected YAML event", L->origin, line, col); break;
    }
    yaml_event_delete(ev);
    if (n && anchor) cfg_map_put(L->anchors, anchor, cfg_copy(n));
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

// The whole file, read only up to one byte past the limit; NULL with the message in err. Only
// a regular file is read: a FIFO would block the open, a device (/dev/zero) never ends.
static char *read_config_file(const char *path, size_t *len, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    FILE *f = NULL;
    if (fd < 0 || fstat(fd, &st) != 0) {
        cfg_errf(err, errlen, "cannot open config file '%s': %s", path, strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        cfg_errf(err, errlen, "cannot read config file '%s': %s", path,
                 S_ISDIR(st.st_mode) ? "it is a directory" : "not a regular file");
    } else if (!(f = fdopen(fd, "rb"))) {
        cfg_errf(err, errlen, "cannot open config file '%s': %s", path, strerror(errno));
    }
    if (!f) {
        if (fd >= 0) close(fd);
        return NULL;
    }
    StrBuf b = {0};
    char chunk[64 << 10];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0 && b.n + got <= CFG_MAX_FILE_BYTES) sb_add(&b, chunk, got);
    bool ok = got == 0 && !ferror(f);
    if (got > 0)
        cfg_errf(err, errlen, "config file '%s' is larger than %u MiB, the limit for a config file", path,
                 CFG_MAX_FILE_BYTES >> 20);
    else if (!ok)
        cfg_errf(err, errlen, "cannot read config file '%s': %s", path, strerror(errno));
    fclose(f);
    *len = b.n;
    if (!ok) free(b.p);
    return ok ? sb_take(&b) : NULL;
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
    L.anchors = cfg_new_map();
    CfgNode *root = load_stream(&L);
    cfg_free(L.anchors);
    yaml_parser_delete(&L.parser);
    return root;
}
