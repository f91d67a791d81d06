// config/config.c — the schema, composing defaults + YAML + overrides, typed binding.
#include "config/config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/cfg_interp.h"
#include "config/cfg_override.h"
#include "config/cfg_tree.h"
#include "config/suggest.h"

// ------------------------------------------------------------------------- schema

#define FIELD(sec, name, member, T) \
    .section = sec, .key = name, .type = T, .offset = offsetof(Config, member), .size = sizeof(((Config *)0)->member)

// What each key means: the members' comments in config/config.h, and README's configuration table.
static const ConfigField SCHEMA[] = {
    {FIELD("data_config", "path", data.path, CONFIG_STR), .def_str = "data/input.txt"},
    {FIELD("data_config", "block_size", data.block_size, CONFIG_INT), .def_int = 128},
    {FIELD("data_config", "train_split", data.train_split, CONFIG_FLOAT), .def_float = {0.9}},
    {FIELD("data_config", "truncate", data.truncate, CONFIG_FLOAT), .def_float = {1.0}},
    {FIELD("data_config", "split", data.split, CONFIG_STR), .def_str = "contiguous", .choices = "contiguous|random"},
    {FIELD("data_config", "eval_stride", data.eval_stride, CONFIG_INT), .def_int = 0},

    {FIELD("gpt_config", "n_layer", gpt.n_layer, CONFIG_INT), .def_int = 8},
    {FIELD("gpt_config", "n_head", gpt.n_head, CONFIG_INT), .def_int = 8},
    {FIELD("gpt_config", "n_embd", gpt.n_embd, CONFIG_INT), .def_int = 512},
    {FIELD("gpt_config", "embd_pdrop", gpt.embd_pdrop, CONFIG_FLOAT), .def_float = {0.1}},
    {FIELD("gpt_config", "resid_pdrop", gpt.resid_pdrop, CONFIG_FLOAT), .def_float = {0.1}},
    {FIELD("gpt_config", "attn_pdrop", gpt.attn_pdrop, CONFIG_FLOAT), .def_float = {0.1}},

    {FIELD("trainer_config", "max_epochs", trainer.max_epochs, CONFIG_INT), .def_int = 10},
    {FIELD("trainer_config", "batch_size", trainer.batch_size, CONFIG_INT), .def_int = 216},
    {FIELD("trainer_config", "data_loader_workers", trainer.data_loader_workers, CONFIG_INT), .def_int = 4},
    {FIELD("trainer_config", "grad_norm_clip", trainer.grad_norm_clip, CONFIG_FLOAT), .def_float = {1.0}},
    {FIELD("trainer_config", "snapshot_path", trainer.snapshot_path, CONFIG_STR), .def_str = "snapshot.bin"},
    {FIELD("trainer_config", "save_every", trainer.save_every, CONFIG_INT), .def_int = 3},
    {FIELD("trainer_config", "use_amp", trainer.use_amp, CONFIG_BOOL), .def_int = 0},
    {FIELD("trainer_config", "device", trainer.device, CONFIG_STR), .def_str = "auto", .choices = "auto|cpu|cuda"},
    {FIELD("trainer_config", "amp_dtype", trainer.amp_dtype, CONFIG_STR), .def_str = "auto", .choices = "auto|bfloat16|float16"},
    {FIELD("trainer_config", "matmul_precision", trainer.matmul_precision, CONFIG_STR), .def_str = "highest", .choices = "highest|high"},
    {FIELD("trainer_config", "seed", trainer.seed, CONFIG_U64), .def_int = 1337},
    {FIELD("trainer_config", "max_iters", trainer.max_iters, CONFIG_LONG), .def_int = 0},
    {FIELD("trainer_config", "log_every", trainer.log_every, CONFIG_INT), .def_int = 100},
    {FIELD("trainer_config", "eval_iters", trainer.eval_iters, CONFIG_INT), .def_int = 0},
    {FIELD("trainer_config", "eval_every", trainer.eval_every, CONFIG_LONG), .def_int = 0},
    {FIELD("trainer_config", "save_every_iters", trainer.save_every_iters, CONFIG_LONG), .def_int = 0},
    {FIELD("trainer_config", "keep_last", trainer.keep_last, CONFIG_INT), .def_int = 1},
    {FIELD("trainer_config", "save_best", trainer.save_best, CONFIG_BOOL), .def_int = 0},
    {FIELD("trainer_config", "init_from", trainer.init_from, CONFIG_STR), .def_str = ""},
    {FIELD("trainer_config", "grad_accum_steps", trainer.grad_accum_steps, CONFIG_INT), .def_int = 1},
    {FIELD("trainer_config", "zero_stage", trainer.zero_stage, CONFIG_INT), .def_int = 0, .choices = "0|1|2"},
    {FIELD("trainer_config", "bucket_cap_mb", trainer.bucket_cap_mb, CONFIG_FLOAT), .def_float = {25.0}},
    {FIELD("trainer_config", "collective_timeout_s", trainer.collective_timeout_s, CONFIG_FLOAT), .def_float = {300.0}},
    {FIELD("trainer_config", "skip_spike_zscore", trainer.skip_spike_zscore, CONFIG_FLOAT), .def_float = {0.0}},
    {FIELD("trainer_config", "activation_checkpointing", trainer.activation_checkpointing, CONFIG_BOOL), .def_int = 0},
    {FIELD("trainer_config", "plot_log_scale", trainer.plot_log_scale, CONFIG_BOOL), .def_int = 0},
    {FIELD("trainer_config", "peak_tflops", trainer.peak_tflops, CONFIG_FLOAT), .def_float = {NAN}, .optional = true},

    {FIELD("optimizer_config", "weight_decay", optim.weight_decay, CONFIG_FLOAT), .def_float = {0.1}},
    {FIELD("optimizer_config", "learning_rate", optim.learning_rate, CONFIG_FLOAT), .def_float = {3e-4}},
    {FIELD("optimizer_config", "betas", optim.betas, CONFIG_FLOAT_PAIR), .def_float = {0.9, 0.95}},
    {FIELD("optimizer_config", "eps", optim.eps, CONFIG_FLOAT), .def_float = {1e-8}},
    {FIELD("optimizer_config", "warmup_iters", optim.warmup_iters, CONFIG_LONG), .def_int = 0},
    {FIELD("optimizer_config", "lr_decay_iters", optim.lr_decay_iters, CONFIG_LONG), .def_int = 0},
    {FIELD("optimizer_config", "min_lr", optim.min_lr, CONFIG_FLOAT), .def_float = {0.0}},
};
#define N_SCHEMA (sizeof SCHEMA / sizeof SCHEMA[0])

static const char *const SECTIONS[] = {"data_config", "gpt_config", "trainer_config", "optimizer_config", NULL};

// Top-level keys whose subtrees are plain dicts (not struct): Hydra's own settings.
static const char *const OPEN_KEYS[] = {"hydra", NULL};

const ConfigField *config_schema(size_t *n) {
    if (n) *n = N_SCHEMA;
    return SCHEMA;
}

static const ConfigField *find_field(const char *section, const char *key) {
    for (size_t i = 0; i < N_SCHEMA; i++)
        if (strcmp(SCHEMA[i].section, section) == 0 && strcmp(SCHEMA[i].key, key) == 0) return &SCHEMA[i];
    return NULL;
}

static bool is_section(const char *name) {
    for (const char *const *s = SECTIONS; *s; s++)
        if (strcmp(*s, name) == 0) return true;
    return false;
}

static void *field_ptr(Config *cfg, const ConfigField *f) { return (char *)cfg + f->offset; }
static const void *field_cptr(const Config *cfg, const ConfigField *f) { return (const char *)cfg + f->offset; }

static void store_default(Config *cfg, const ConfigField *f) {
    void *p = field_ptr(cfg, f);
    switch (f->type) {
    case CONFIG_INT: *(int *)p = (int)f->def_int; break;
    case CONFIG_LONG: *(long *)p = (long)f->def_int; break;
    case CONFIG_U64: *(uint64_t *)p = (uint64_t)f->def_int; break;
    case CONFIG_FLOAT: *(double *)p = f->def_float[0]; break;
    case CONFIG_BOOL: *(bool *)p = f->def_int != 0; break;
    case CONFIG_STR: snprintf(p, f->size, "%s", f->def_str); break;
    case CONFIG_FLOAT_PAIR: ((double *)p)[0] = f->def_float[0]; ((double *)p)[1] = f->def_float[1]; break;
    }
}

void config_defaults(Config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < N_SCHEMA; i++) store_default(cfg, &SCHEMA[i]);
}

// Node for one field's value as stored in cfg.
static CfgNode *field_node(const Config *cfg, const ConfigField *f) {
    const void *p = field_cptr(cfg, f);
    switch (f->type) {
    case CONFIG_INT: return cfg_new_int(*(const int *)p);
    case CONFIG_LONG: return cfg_new_int(*(const long *)p);
    case CONFIG_U64: {
        uint64_t v = *(const uint64_t *)p;
        if (v <= (uint64_t)LLONG_MAX) return cfg_new_int((long long)v);
        char buf[32];  // beyond int64: a plain decimal string, read back by the u64 binder
        snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
        return cfg_new_str(buf);
    }
    case CONFIG_FLOAT: {
        const double v = *(const double *)p;
        return f->optional && isnan(v) ? cfg_new_null() : cfg_new_float(v);
    }
    case CONFIG_BOOL: return cfg_new_bool(*(const bool *)p);
    case CONFIG_STR: {
        const char *s = p;
        return cfg_new_str_n(s, strnlen(s, f->size));
    }
    case CONFIG_FLOAT_PAIR: {
        CfgNode *l = cfg_new_list();
        cfg_list_push(l, cfg_new_float(((const double *)p)[0]));
        cfg_list_push(l, cfg_new_float(((const double *)p)[1]));
        return l;
    }
    }
    return cfg_new_null();
}

void config_field_repr(const Config *cfg, const ConfigField *f, char *buf, size_t len) {
    CfgNode *n = field_node(cfg, f);
    cfg_repr(n, buf, len);
    cfg_free(n);
}

// The four sections of cfg as a tree, in schema order.
static CfgNode *config_tree(const Config *cfg) {
    CfgNode *root = cfg_new_map();
    for (size_t i = 0; i < N_SCHEMA; i++) {
        const ConfigField *f = &SCHEMA[i];
        CfgNode *sec = cfg_map_get(root, f->section);
        if (!sec) {
            cfg_map_put(root, f->section, cfg_new_map());
            sec = cfg_map_get(root, f->section);
        }
        cfg_map_put(sec, f->key, field_node(cfg, f));
    }
    return root;
}

CfgNode *config_defaults_tree(void) {
    Config d;
    config_defaults(&d);
    return config_tree(&d);
}

int config_path(char *out, size_t outlen, const char *config_dir, const char *config_name) {
    size_t nl = strlen(config_name);
    const char *ext = nl >= 5 && strcmp(config_name + nl - 5, ".yaml") == 0 ? "" : ".yaml";
    bool bare = !config_dir || !*config_dir || strcmp(config_dir, ".") == 0 || config_name[0] == '/';
    size_t dl = config_dir ? strlen(config_dir) : 0;
    const char *sep = !bare && dl && config_dir[dl - 1] != '/' ? "/" : "";
    int w = snprintf(out, outlen, "%s%s%s%s", bare ? "" : config_dir, bare ? "" : sep, config_name, ext);
    return w < 0 || (size_t)w >= outlen;
}

// ------------------------------------------------------------------------- messages

// "<file>:<line>:<col>: msg", "msg (from override '...')" or "msg", from where n came from.
static int located(const CfgLoc *loc, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int located(const CfgLoc *loc, char *err, size_t errlen, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (loc && loc->file && loc->line > 0) return cfg_errf(err, errlen, "%s:%d:%d: %s", loc->file, loc->line, loc->col, msg);
    if (loc && loc->override) return cfg_errf(err, errlen, "%s (from override '%s')", msg, loc->override);
    return cfg_errf(err, errlen, "%s", msg);
}

// " (did you mean 'x'?)" for unknown key `key` of `section` (NULL: the top level), or "": the
// closest key there (config/suggest.h), else a field of that name in another section.
static void suggest_key(const char *section, const char *key, char *buf, size_t len) {
    Suggest s;
    suggest_init(&s, key, false);
    for (const char *const *t = SECTIONS; !section && *t; t++) suggest_offer(&s, t, 1, *t);
    if (!section) suggest_offer(&s, (const char *const[]){"hydra"}, 1, "hydra");
    for (size_t i = 0; i < N_SCHEMA; i++) {
        char path[64];
        snprintf(path, sizeof path, "%s.%s", SCHEMA[i].section, SCHEMA[i].key);
        if (section && strcmp(SCHEMA[i].section, section) == 0) suggest_offer(&s, &SCHEMA[i].key, 1, path);
        suggest_offer_name(&s, SCHEMA[i].key, path);
    }
    const char *pick = suggest_result(&s);
    if (pick) snprintf(buf, len, " (did you mean '%s'?)", pick);
    else buf[0] = 0;
}

// How a value reads in a message from the file: its source text, or its kind.
static void describe(const CfgNode *n, char *buf, size_t len) {
    switch (n->type) {
    case CFG_NULL: snprintf(buf, len, "null"); return;
    case CFG_LIST: snprintf(buf, len, "a list"); return;
    case CFG_MAP: snprintf(buf, len, "a mapping"); return;
    default: break;
    }
    if (n->s) {
        snprintf(buf, len, "'%s'", n->s);
        return;
    }
    char r[512];
    cfg_repr(n, r, sizeof r);
    snprintf(buf, len, "'%s'", r);
}

// OmegaConf's object_type of the container holding full_key: list items end in "]".
static const char *object_type(const char *full_key) {
    size_t n = strlen(full_key);
    return n && full_key[n - 1] == ']' ? "list" : "dict";
}

// A value of the wrong type. From an override: Hydra's text (hydra_msg); otherwise
// "<where>: <full_key>: expected <what>, got <value>".
static int type_error(const CfgNode *n, const char *full_key, const char *what, const char *hydra_msg, char *err,
                      size_t errlen) {
    if (n->loc.override)
        return cfg_errf(err, errlen, "Error merging override %s\n%s\n    full_key: %s\n    object_type=%s",
                        n->loc.override, hydra_msg, full_key, object_type(full_key));
    char got[600];
    describe(n, got, sizeof got);
    if (n->loc.file && n->loc.line > 0)
        return cfg_errf(err, errlen, "%s:%d:%d: %s: expected %s, got %s", n->loc.file, n->loc.line, n->loc.col,
                        full_key, what, got);
    return cfg_errf(err, errlen, "%s: expected %s, got %s", full_key, what, got);
}

// ------------------------------------------------------------------------- conversions

static CfgConv conv_int(const CfgNode *n, long long *out) {
    if (n->type == CFG_NULL) return CONV_NULL;
    if (n->type == CFG_INT) { *out = n->i; return CONV_OK; }
    return n->type == CFG_STRING ? cfg_py_int(n->s, out, NULL, NULL) : CONV_BAD;
}

static CfgConv conv_u64(const CfgNode *n, uint64_t *out) {
    if (n->type == CFG_NULL) return CONV_NULL;
    if (n->type == CFG_INT) {
        if (n->i < 0) return CONV_RANGE;
        *out = (uint64_t)n->i;
        return CONV_OK;
    }
    if (n->type == CFG_STRING) {
        bool neg;
        unsigned long long v;
        CfgConv c = cfg_py_int(n->s, NULL, &v, &neg);
        if (c != CONV_OK) return c;
        if (neg && v) return CONV_RANGE;
        *out = v;
        return CONV_OK;
    }
    return CONV_BAD;
}

static CfgConv conv_float(const CfgNode *n, double *out) {
    if (n->type == CFG_NULL) return CONV_NULL;
    if (n->type == CFG_INT) { *out = (double)n->i; return CONV_OK; }
    if (n->type == CFG_FLOAT) { *out = n->f; return CONV_OK; }
    if (n->type == CFG_STRING) return cfg_py_float(n->s, out);
    return CONV_BAD;
}

// OmegaConf BooleanNode: bool, int (!= 0), numeric string, yes/y/on/true/no/n/off/false.
static CfgConv conv_bool(const CfgNode *n, bool *out) {
    if (n->type == CFG_NULL) return CONV_NULL;
    if (n->type == CFG_BOOL) { *out = n->b; return CONV_OK; }
    if (n->type == CFG_INT) { *out = n->i != 0; return CONV_OK; }
    if (n->type != CFG_STRING) return CONV_BAD;
    long long v;
    if (cfg_py_int(n->s, &v, NULL, NULL) == CONV_OK) { *out = v != 0; return CONV_OK; }
    static const char *const t[] = {"yes", "y", "on", "true"}, *const f[] = {"no", "n", "off", "false"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(n->s, t[i]) == 0) { *out = true; return CONV_OK; }
        if (strcasecmp(n->s, f[i]) == 0) { *out = false; return CONV_OK; }
    }
    return CONV_BAD;
}

// ------------------------------------------------------------------------- binding

// Strict UTF-8 (no overlongs, surrogates or code points past U+10FFFF). Strings must be
// valid so that config_to_yaml (libyaml) can always write them back.
static bool valid_utf8(const char *str) {
    const unsigned char *s = (const unsigned char *)str;
    while (*s) {
        unsigned c = *s;
        int n = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : -1;
        if (n < 0) return false;
        unsigned cp = n == 0 ? c : c & (0x3Fu >> n);
        for (int i = 1; i <= n; i++) {
            if ((s[i] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (s[i] & 0x3Fu);
        }
        static const unsigned min_cp[] = {0, 0x80, 0x800, 0x10000};
        if (cp < min_cp[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        s += n + 1;
    }
    return true;
}

static void full_key(const ConfigField *f, char *buf, size_t len) { snprintf(buf, len, "%s.%s", f->section, f->key); }

// An interpolation or `???`: its type is checked once it is resolved (config_resolve).
static bool deferred(const CfgNode *n) { return cfg_is_missing(n) || cfg_is_interpolation(n); }

static int bind_float_node(const CfgNode *n, const char *fk, double *out, char *err, size_t errlen) {
    char repr[512], msg[700];
    switch (conv_float(n, out)) {
    case CONV_OK: return 0;
    case CONV_NULL:
        snprintf(msg, sizeof msg, "field '%s' is not Optional", fk);
        return type_error(n, fk, "a number", msg, err, errlen);
    default:
        cfg_repr(n, repr, sizeof repr);
        snprintf(msg, sizeof msg, "Value '%s' of type '%s' could not be converted to Float", repr, cfg_type_name(n->type));
        return type_error(n, fk, "a number", msg, err, errlen);
    }
}

// Converts node n into field f of cfg; type errors only (ranges are checked later). With
// `lenient`, interpolations and `???` are skipped (the field keeps its default).
static int bind_field(Config *cfg, const ConfigField *f, const CfgNode *n, bool lenient, char *err, size_t errlen) {
    char fk[256], repr[512], msg[800];
    full_key(f, fk, sizeof fk);
    if (lenient && deferred(n)) {
        store_default(cfg, f);
        return 0;
    }
    cfg_repr(n, repr, sizeof repr);
    void *p = field_ptr(cfg, f);
    if (n->type == CFG_NULL && f->type != CONFIG_FLOAT) {
        snprintf(msg, sizeof msg, "field '%s' is not Optional", fk);
        static const char *const what[] = {"an integer", "an integer", "a non-negative integer", "a number",
                                           "a boolean", "a string", "a list of 2 numbers"};
        return type_error(n, fk, what[f->type], msg, err, errlen);
    }
    switch (f->type) {
    case CONFIG_INT:
    case CONFIG_LONG: {
        long long v = 0;
        CfgConv c = conv_int(n, &v);
        long long lo = f->type == CONFIG_INT ? INT_MIN : LONG_MIN, hi = f->type == CONFIG_INT ? INT_MAX : LONG_MAX;
        if (c == CONV_OK && (v < lo || v > hi)) c = CONV_RANGE;
        if (c == CONV_RANGE) return located(&n->loc, err, errlen, "%s: %s is out of range (%lld..%lld)", fk, repr, lo, hi);
        if (c != CONV_OK) {
            snprintf(msg, sizeof msg, "Value '%s' of type '%s' could not be converted to Integer", repr, cfg_type_name(n->type));
            if (!f->choices) return type_error(n, fk, "an integer", msg, err, errlen);
            // an enumerated integer (zero_stage): the message names the values allowed
            char what[160];
            snprintf(what, sizeof what, "one of %s", f->choices);
            snprintf(msg + strlen(msg), sizeof msg - strlen(msg), " (%s must be one of %s)", fk, f->choices);
            return type_error(n, fk, what, msg, err, errlen);
        }
        if (f->type == CONFIG_INT) *(int *)p = (int)v;
        else *(long *)p = (long)v;
        return 0;
    }
    case CONFIG_U64: {
        CfgConv c = conv_u64(n, (uint64_t *)p);
        if (c == CONV_RANGE)
            return located(&n->loc, err, errlen, "%s must be a non-negative integer below 2^64, got %s", fk, repr);
        if (c != CONV_OK) {
            snprintf(msg, sizeof msg, "Value '%s' of type '%s' could not be converted to Integer", repr, cfg_type_name(n->type));
            return type_error(n, fk, "a non-negative integer", msg, err, errlen);
        }
        return 0;
    }
    case CONFIG_FLOAT:
        if (f->optional && n->type == CFG_NULL) {   // Optional[float]: null is "not set"
            *(double *)p = NAN;
            return 0;
        }
        return bind_float_node(n, fk, (double *)p, err, errlen);
    case CONFIG_BOOL:
        if (conv_bool(n, (bool *)p) != CONV_OK) {
            snprintf(msg, sizeof msg, "Value '%s' is not a valid bool (type %s)", repr, cfg_type_name(n->type));
            return type_error(n, fk, "a boolean (true/false)", msg, err, errlen);
        }
        return 0;
    case CONFIG_STR: {
        if (n->type == CFG_LIST || n->type == CFG_MAP) {
            snprintf(msg, sizeof msg, "Cannot convert '%s' to string: '%s'", cfg_type_name(n->type), repr);
            return type_error(n, fk, "a string", msg, err, errlen);
        }
        // Scalars keep the text they were written with (`path: 010` stays "010").
        const char *s = n->type == CFG_STRING || n->s ? n->s : repr;
        if (strlen(s) >= f->size)
            return located(&n->loc, err, errlen, "%s is longer than %zu bytes", fk, f->size - 1);
        if (!valid_utf8(s)) return located(&n->loc, err, errlen, "%s is not valid UTF-8", fk);
        memcpy(p, s, strlen(s) + 1);
        return 0;
    }
    case CONFIG_FLOAT_PAIR: {
        if (n->type != CFG_LIST) {
            snprintf(msg, sizeof msg, "Invalid value assigned: %s is not a ListConfig, list or tuple.", cfg_type_name(n->type));
            return type_error(n, fk, "a list of 2 numbers", msg, err, errlen);
        }
        if (n->n != 2) {
            snprintf(msg, sizeof msg, "expected a list of 2 numbers, got %zu item%s", n->n, n->n == 1 ? "" : "s");
            if (n->loc.override)
                return cfg_errf(err, errlen, "Error merging override %s\n%s\n    full_key: %s\n    object_type=dict",
                                n->loc.override, msg, fk);
            return located(&n->loc, err, errlen, "%s: %s", fk, msg);
        }
        for (size_t i = 0; i < 2; i++) {
            char ek[300];
            snprintf(ek, sizeof ek, "%s[%zu]", fk, i);
            if (lenient && deferred(n->kids[i])) continue;
            if (bind_float_node(n->kids[i], ek, (double *)p + i, err, errlen)) return -1;
        }
        return 0;
    }
    }
    return 0;
}

// "unknown key 'section.key'" (with a suggestion, where the key was written) for the first key of
// the map sec that the schema does not know. Keys a `+`/`++` override added are Hydra's escape
// hatch: kept in the tree, not bound.
static int check_section_keys(const char *section, const CfgNode *sec, char *err, size_t errlen) {
    for (size_t i = 0; i < sec->n; i++) {
        const CfgNode *k = sec->kids[i];
        if (find_field(section, k->key) || k->loc.override) continue;
        char hint[160];
        suggest_key(section, k->key, hint, sizeof hint);
        // Keys added by an override carry the override on the value only.
        const CfgLoc *where = k->key_loc.file || k->key_loc.override ? &k->key_loc : &k->loc;
        return located(where, err, errlen, "unknown key '%s.%s'%s", section, k->key, hint);
    }
    return 0;
}

static const CfgNode *lookup(const CfgNode *tree, const char *section, const char *key) {
    return cfg_map_get(cfg_map_get(tree, section), key);
}

// Binds all fields (types only); absent fields get their defaults.
static int bind_types(Config *cfg, const CfgNode *tree, bool lenient, char *err, size_t errlen) {
    if (tree && tree->type != CFG_MAP && tree->type != CFG_NULL)
        return located(&tree->loc, err, errlen, "the configuration must be a mapping of sections");
    for (const char *const *s = SECTIONS; tree && tree->type == CFG_MAP && *s; s++) {
        const CfgNode *sec = cfg_map_get(tree, *s);
        if (!sec) continue;
        if (sec->type != CFG_MAP) {
            char repr[512], msg[700];
            cfg_repr(sec, repr, sizeof repr);
            snprintf(msg, sizeof msg, "Value '%s' of type '%s' is not a mapping", repr, cfg_type_name(sec->type));
            return type_error(sec, *s, "a mapping", msg, err, errlen);
        }
        if (check_section_keys(*s, sec, err, errlen)) return -1;
    }
    for (size_t i = 0; i < N_SCHEMA; i++) {
        const ConfigField *f = &SCHEMA[i];
        const CfgNode *n = lookup(tree, f->section, f->key);
        if (!n) store_default(cfg, f);
        else if (bind_field(cfg, f, n, lenient, err, errlen)) return -1;
    }
    return 0;
}

// ------------------------------------------------------------------------- validation

// The message about section.key, prefixed with where the key's value came from in tree.
static int invalid_v(const CfgNode *tree, const char *section, const char *key, char *err, size_t errlen,
                     const char *fmt, va_list ap) {
    char msg[1500];
    vsnprintf(msg, sizeof msg, fmt, ap);
    const CfgNode *n = lookup(tree, section, key);
    return located(n ? &n->loc : NULL, err, errlen, "%s", msg);
}

static int invalid(const CfgNode *tree, const char *section, const char *key, char *err, size_t errlen,
                   const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static int invalid(const CfgNode *tree, const char *section, const char *key, char *err, size_t errlen,
                   const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const int rc = invalid_v(tree, section, key, err, errlen, fmt, ap);
    va_end(ap);
    return rc;
}

int config_invalid(const CfgNode *tree, const char *section, const char *key, char *err, size_t errlen,
                   const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const int rc = invalid_v(tree, section, key, err, errlen, fmt, ap);
    va_end(ap);
    return rc;
}

bool config_key_given(const CfgNode *tree, const char *section, const char *key) {
    const CfgNode *n = lookup(tree, section, key);
    return n && (n->loc.file || n->loc.override);
}

static int min_int(const CfgNode *t, const char *sec, const char *key, long long v, long long min, char *err, size_t errlen) {
    if (v >= min) return 0;
    return invalid(t, sec, key, err, errlen, "%s.%s must be >= %lld, got %lld", sec, key, min, v);
}

// An upper bound that keeps later sizes from overflowing or running for minutes; `why` names
// the limit in the message.
static int max_int(const CfgNode *t, const char *sec, const char *key, long long v, long long max, const char *why,
                   char *err, size_t errlen) {
    if (v <= max) return 0;
    return invalid(t, sec, key, err, errlen, "%s.%s must be <= %lld (%s), got %lld", sec, key, max, why, v);
}

int config_max_int(const CfgNode *tree, const char *section, const char *key, long long v, long long max,
                   const char *why, char *err, size_t errlen) {
    return max_int(tree, section, key, v, max, why, err, errlen);
}

// v must be finite and within lo..hi (open or closed ends; hi = INFINITY for no upper bound).
static int float_range(const CfgNode *t, const char *sec, const char *key, const CfgNode *node, double v, double lo,
                       bool lo_open, double hi, bool hi_open, char *err, size_t errlen) {
    char vs[40], los[40], his[40], label[200];
    cfg_format_float(v, vs, sizeof vs, false);
    cfg_format_float(lo, los, sizeof los, false);
    cfg_format_float(hi, his, sizeof his, false);
    snprintf(label, sizeof label, "%s.%s", sec, key);
    bool ok = isfinite(v) && (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
    if (ok) return 0;
    const CfgLoc *loc = node ? &node->loc : NULL;
    if (!node) {
        const CfgNode *n = lookup(t, sec, key);
        loc = n ? &n->loc : NULL;
    }
    if (!isfinite(v)) return located(loc, err, errlen, "%s must be a finite number, got %s", label, vs);
    if (isinf(hi)) return located(loc, err, errlen, "%s must be %s %s, got %s", label, lo_open ? ">" : ">=", los, vs);
    return located(loc, err, errlen, "%s must be in %c%s, %s%c, got %s", label, lo_open ? '(' : '[', los, his,
                   hi_open ? ')' : ']', vs);
}

static bool in_choices(const char *v, const char *choices) {
    size_t n = strlen(v);
    for (const char *c = choices; *c;) {
        size_t len = strcspn(c, "|");
        if (len == n && strncmp(c, v, n) == 0) return true;
        c += len;
        if (*c == '|') c++;
    }
    return false;
}

static int validate(const Config *cfg, const CfgNode *t, char *err, size_t errlen) {
    const DataConfig *d = &cfg->data;
    const GPTConfig *g = &cfg->gpt;
    const TrainerConfig *tr = &cfg->trainer;
    const OptimizerConfig *o = &cfg->optim;
    const double inf = INFINITY;
    for (size_t i = 0; i < N_SCHEMA; i++) {
        const ConfigField *f = &SCHEMA[i];
        if (f->choices && f->type == CONFIG_INT) {   // an enumerated integer
            char v[24];
            snprintf(v, sizeof v, "%d", *(const int *)field_cptr(cfg, f));
            if (!in_choices(v, f->choices))
                return invalid(t, f->section, f->key, err, errlen, "%s.%s must be one of %s, got %s", f->section,
                               f->key, f->choices, v);
        } else if (f->choices && !in_choices((const char *)field_cptr(cfg, f), f->choices))
            return invalid(t, f->section, f->key, err, errlen, "%s.%s must be one of %s, got '%s'", f->section, f->key,
                           f->choices, (const char *)field_cptr(cfg, f));
    }
    if (!d->path[0]) return invalid(t, "data_config", "path", err, errlen, "data_config.path must not be empty");
    // An empty snapshot path would train to the end and then fail to save.
    if (!tr->snapshot_path[0])
        return invalid(t, "trainer_config", "snapshot_path", err, errlen,
                       "trainer_config.snapshot_path must not be empty (it names the snapshot file)");
    const size_t sl = strlen(tr->snapshot_path);
    if (tr->snapshot_path[sl - 1] == '/')
        return invalid(t, "trainer_config", "snapshot_path", err, errlen,
                       "trainer_config.snapshot_path must name a file, not a directory: '%s'", tr->snapshot_path);
    if (min_int(t, "data_config", "block_size", d->block_size, 1, err, errlen) ||
        float_range(t, "data_config", "train_split", NULL, d->train_split, 0, true, 1, true, err, errlen) ||
        float_range(t, "data_config", "truncate", NULL, d->truncate, 0, true, 1, false, err, errlen) ||
        (d->eval_stride < 0 || d->eval_stride > d->block_size
             ? invalid(t, "data_config", "eval_stride", err, errlen,
                       "data_config.eval_stride must be in [0, %d] (0 = data_config.block_size), got %d", d->block_size,
                       d->eval_stride)
             : 0) ||
        min_int(t, "gpt_config", "n_layer", g->n_layer, 1, err, errlen) ||
        min_int(t, "gpt_config", "n_head", g->n_head, 1, err, errlen) ||
        min_int(t, "gpt_config", "n_embd", g->n_embd, 1, err, errlen))
        return -1;
    if (float_range(t, "gpt_config", "embd_pdrop", NULL, g->embd_pdrop, 0, false, 1, true, err, errlen) ||
        float_range(t, "gpt_config", "resid_pdrop", NULL, g->resid_pdrop, 0, false, 1, true, err, errlen) ||
        float_range(t, "gpt_config", "attn_pdrop", NULL, g->attn_pdrop, 0, false, 1, true, err, errlen) ||
        min_int(t, "trainer_config", "max_epochs", tr->max_epochs, 1, err, errlen) ||
        min_int(t, "trainer_config", "batch_size", tr->batch_size, 1, err, errlen) ||
        min_int(t, "trainer_config", "data_loader_workers", tr->data_loader_workers, 0, err, errlen) ||
        min_int(t, "trainer_config", "save_every", tr->save_every, 1, err, errlen) ||
        min_int(t, "trainer_config", "max_iters", tr->max_iters, 0, err, errlen) ||
        min_int(t, "trainer_config", "log_every", tr->log_every, 1, err, errlen) ||
        min_int(t, "trainer_config", "eval_iters", tr->eval_iters, 0, err, errlen) ||
        min_int(t, "trainer_config", "eval_every", tr->eval_every, 0, err, errlen) ||
        min_int(t, "trainer_config", "save_every_iters", tr->save_every_iters, 0, err, errlen) ||
        min_int(t, "trainer_config", "keep_last", tr->keep_last, 1, err, errlen) ||
        max_int(t, "trainer_config", "keep_last", tr->keep_last, CONFIG_MAX_KEEP_LAST, "CONFIG_MAX_KEEP_LAST", err,
                errlen) ||
        min_int(t, "trainer_config", "grad_accum_steps", tr->grad_accum_steps, 1, err, errlen) ||
        max_int(t, "trainer_config", "grad_accum_steps", tr->grad_accum_steps, CONFIG_MAX_GRAD_ACCUM,
                "CONFIG_MAX_GRAD_ACCUM", err, errlen) ||
        // MiB -> bytes as a size_t: 1 TiB is far beyond any model and far from overflow
        float_range(t, "trainer_config", "bucket_cap_mb", NULL, tr->bucket_cap_mb, 0, true, 1048576, false, err,
                    errlen) ||
        float_range(t, "trainer_config", "skip_spike_zscore", NULL, tr->skip_spike_zscore, 0, false, inf, false, err,
                    errlen) ||
        float_range(t, "trainer_config", "collective_timeout_s", NULL, tr->collective_timeout_s, 0, false, inf, false,
                    err, errlen) ||
        (!isnan(tr->peak_tflops) &&   // null (NaN): MFU unknown
         float_range(t, "trainer_config", "peak_tflops", NULL, tr->peak_tflops, 0, true, inf, false, err, errlen)))
        return -1;
    // grad_norm_clip: any value but NaN (<= 0 disables clipping, +inf never clips).
    if (isnan(tr->grad_norm_clip))
        return invalid(t, "trainer_config", "grad_norm_clip", err, errlen, "trainer_config.grad_norm_clip must be a number, got nan");
    if (float_range(t, "optimizer_config", "weight_decay", NULL, o->weight_decay, 0, false, inf, false, err, errlen) ||
        float_range(t, "optimizer_config", "learning_rate", NULL, o->learning_rate, 0, true, inf, false, err, errlen))
        return -1;
    const CfgNode *betas = lookup(t, "optimizer_config", "betas");
    for (int i = 0; i < 2; i++) {
        char key[32];
        snprintf(key, sizeof key, "betas[%d]", i);
        const CfgNode *item = betas && betas->type == CFG_LIST && betas->n == 2 ? betas->kids[i] : NULL;
        if (float_range(t, "optimizer_config", key, item, o->betas[i], 0, false, 1, true, err, errlen)) return -1;
    }
    if (float_range(t, "optimizer_config", "eps", NULL, o->eps, 0, true, inf, false, err, errlen) ||
        min_int(t, "optimizer_config", "warmup_iters", o->warmup_iters, 0, err, errlen) ||
        min_int(t, "optimizer_config", "lr_decay_iters", o->lr_decay_iters, 0, err, errlen) ||
        float_range(t, "optimizer_config", "min_lr", NULL, o->min_lr, 0, false, inf, false, err, errlen))
        return -1;
    return 0;
}

// True when a section of the tree holds an interpolation or `???` somewhere.
static bool has_deferred(const CfgNode *n) {
    if (deferred(n)) return true;
    for (size_t i = 0; i < n->n; i++)
        if (has_deferred(n->kids[i])) return true;
    return false;
}

CfgNode *config_resolve(const CfgNode *tree, char *err, size_t errlen) {
    CfgNode *out = cfg_new_map();
    for (const char *const *s = SECTIONS; tree && tree->type == CFG_MAP && *s; s++) {
        if (!cfg_map_get(tree, *s)) continue;
        CfgNode *sec = cfg_resolve(tree, *s, true, err, errlen);
        if (!sec) {
            cfg_free(out);
            return NULL;
        }
        cfg_map_put(out, *s, sec);
    }
    return out;
}

int config_bind(Config *cfg, const CfgNode *tree, char *err, size_t errlen) {
    bool resolve = false;
    for (const char *const *s = SECTIONS; tree && tree->type == CFG_MAP && *s; s++) {
        const CfgNode *sec = cfg_map_get(tree, *s);
        resolve |= sec && has_deferred(sec);
    }
    CfgNode *resolved = resolve ? config_resolve(tree, err, errlen) : NULL;
    if (resolve && !resolved) return -1;
    const CfgNode *t = resolved ? resolved : tree;
    int rc = bind_types(cfg, t, false, err, errlen) || validate(cfg, t, err, errlen) ? -1 : 0;
    cfg_free(resolved);
    return rc;
}

// ------------------------------------------------------------------------- composing

// `defaults: [_self_]` (Hydra's defaults list) is accepted and dropped: mingpt has no config
// groups, so `_self_` is the only entry it can hold.
static int strip_defaults_list(CfgNode *file, char *err, size_t errlen) {
    long i = cfg_map_find(file, "defaults");
    if (i < 0) return 0;
    const CfgNode *d = file->kids[i];
    if (d->type != CFG_LIST)
        return located(&d->loc, err, errlen, "defaults: expected a list (the defaults list), got %s", cfg_type_name(d->type));
    for (size_t j = 0; j < d->n; j++)
        if (d->kids[j]->type != CFG_STRING || strcmp(d->kids[j]->s, "_self_") != 0)
            return located(&d->kids[j]->loc, err, errlen,
                           "defaults: only _self_ is supported (mingpt has no config groups)");
    cfg_list_del(file, (size_t)i);
    return 0;
}

// Checks a parsed file against the schema (sections, keys) before it is merged, so that
// unknown keys are reported at their own line; drops empty (null) sections.
static int check_file(CfgNode *file, char *err, size_t errlen) {
    if (file->type == CFG_NULL) return 0;  // empty file: all defaults
    if (file->type != CFG_MAP) {
        char got[600];
        describe(file, got, sizeof got);
        return located(&file->loc, err, errlen, "the top level of a config file must be a mapping of sections, got %s", got);
    }
    if (strip_defaults_list(file, err, errlen)) return -1;
    for (size_t i = 0; i < file->n;) {
        CfgNode *sec = file->kids[i];
        bool known = is_section(sec->key);
        if (!known && strcmp(sec->key, "hydra") != 0) {
            char hint[160];
            suggest_key(NULL, sec->key, hint, sizeof hint);
            return located(&sec->key_loc, err, errlen, "unknown key '%s'%s", sec->key, hint);
        }
        if (sec->type == CFG_NULL) {  // `gpt_config:` with everything commented out
            cfg_list_del(file, i);
            continue;
        }
        if (sec->type != CFG_MAP) {
            char got[600];
            describe(sec, got, sizeof got);
            return located(&sec->loc, err, errlen, "%s: expected a mapping, got %s", sec->key, got);
        }
        if (known && check_section_keys(sec->key, sec, err, errlen)) return -1;
        i++;
    }
    return 0;
}

// Overwrites scalar node n's value with typed's (type and value), keeping where it came from.
static void retype(CfgNode *n, const CfgNode *typed) {
    n->type = typed->type;
    n->b = typed->b;
    n->i = typed->i;
    n->f = typed->f;
    if (typed->type == CFG_STRING) {
        char *s = cfg_strdup(typed->s);
        free(n->s);
        n->s = s;
    }
}

// Typed nodes convert what is assigned to them (OmegaConf's IntegerNode etc.): after a
// successful type check, each schema value in the tree takes its field's type, so that
// `trainer_config.seed=010` reads back as 10 and `use_amp=yes` as true.
static void normalize(CfgNode *tree, const Config *scratch) {
    for (size_t i = 0; i < N_SCHEMA; i++) {
        const ConfigField *f = &SCHEMA[i];
        CfgNode *n = cfg_map_get(cfg_map_get(tree, f->section), f->key);
        if (!n || deferred(n)) continue;
        CfgNode *typed = field_node(scratch, f);
        if (f->type == CONFIG_FLOAT_PAIR) {
            for (size_t k = 0; k < 2 && k < n->n && n->type == CFG_LIST; k++)
                if (!deferred(n->kids[k])) retype(n->kids[k], typed->kids[k]);
        } else {
            retype(n, typed);
        }
        cfg_free(typed);
    }
}

// Type-checks the tree (interpolations and ??? deferred) and normalizes its schema values.
static int check_types(CfgNode *tree, char *err, size_t errlen) {
    Config scratch;
    if (bind_types(&scratch, tree, true, err, errlen)) return -1;
    normalize(tree, &scratch);
    return 0;
}

// Defaults (+ `hydra` node when given) + parsed file (consumed; NULL: it did not parse, the
// message is in err) + overrides.
static CfgNode *compose_from(CfgNode *file, const CfgNode *hydra, int n_overrides, char *const *overrides,
                             bool *from_override, char *err, size_t errlen) {
    if (from_override) *from_override = false;
    if (!file || check_file(file, err, errlen)) {
        cfg_free(file);
        return NULL;
    }
    CfgNode *tree = config_defaults_tree();
    if (hydra) cfg_map_put(tree, "hydra", cfg_copy(hydra));
    if (file->type == CFG_MAP) cfg_merge(tree, file);
    cfg_free(file);
    if (check_types(tree, err, errlen)) goto fail;
    if (from_override) *from_override = true;
    for (int i = 0; i < n_overrides; i++) {
        CfgOverride ov;
        if (cfg_override_parse(overrides[i], &ov, err, errlen)) goto fail;
        // Without Hydra's own defaults the `hydra` node is a plain (open) dict.
        int rc = cfg_override_apply(tree, &ov, hydra ? NULL : OPEN_KEYS, err, errlen);
        cfg_override_free(&ov);
        if (rc || check_types(tree, err, errlen)) goto fail;
    }
    return tree;
fail:
    cfg_free(tree);
    return NULL;
}

// Binds a composed tree (consumed; NULL: composing failed) into *cfg, from `source`.
static int bind_composed(Config *cfg, CfgNode *tree, const char *source, char *err, size_t errlen) {
    int rc = tree ? config_bind(cfg, tree, err, errlen) : -1;
    cfg_free(tree);
    if (!rc) snprintf(cfg->source, sizeof cfg->source, "%s", source);
    return rc;
}

CfgNode *config_compose(const char *path, int n_overrides, char *const *overrides, char *err, size_t errlen) {
    return config_compose_hydra(path, NULL, n_overrides, overrides, NULL, err, errlen);
}

CfgNode *config_compose_hydra(const char *path, const CfgNode *hydra_defaults, int n_overrides,
                              char *const *overrides, bool *from_override, char *err, size_t errlen) {
    if (from_override) *from_override = false;
    return compose_from(cfg_parse_file(path, err, errlen), hydra_defaults, n_overrides, overrides, from_override,
                        err, errlen);
}

CfgNode *config_compose_text(const char *text, size_t len, const char *origin, const CfgNode *hydra_defaults,
                             int n_overrides, char *const *overrides, bool *from_override, char *err, size_t errlen) {
    if (from_override) *from_override = false;
    return compose_from(cfg_parse_bytes(text, len, origin ? origin : "<config>", err, errlen), hydra_defaults,
                        n_overrides, overrides, from_override, err, errlen);
}

int config_load_text(Config *cfg, const char *text, size_t len, const char *origin, int n_overrides,
                     char *const *overrides, char *err, size_t errlen) {
    if (!origin) origin = "<config>";
    return bind_composed(cfg, config_compose_text(text, len, origin, NULL, n_overrides, overrides, NULL, err, errlen),
                         origin, err, errlen);
}

int config_load(Config *cfg, const char *config_dir, const char *config_name, int n_overrides,
                char *const *overrides, char *err, size_t errlen) {
    if (!config_name || !*config_name) return cfg_errf(err, errlen, "no config name given");
    char path[CFG_STR_MAX];
    if (config_path(path, sizeof path, config_dir, config_name))
        return cfg_errf(err, errlen, "config path '%s/%s' is too long", config_dir ? config_dir : ".", config_name);
    return bind_composed(cfg, config_compose(path, n_overrides, overrides, err, errlen), path, err, errlen);
}

char *config_to_yaml(const Config *cfg) {
    CfgNode *tree = config_tree(cfg);
    char *s = cfg_to_yaml(tree);
    cfg_free(tree);
    return s;
}

int config_from_yaml_string(Config *cfg, const char *yaml, const char *origin, char *err, size_t errlen) {
    if (!origin) origin = "<string>";
    if (!yaml) return cfg_errf(err, errlen, "%s: no YAML text", origin);
    return config_load_text(cfg, yaml, strlen(yaml), origin, 0, NULL, err, errlen);
}
