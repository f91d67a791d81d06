// checkpoint/state_dict.c — see state_dict.h.
#include "checkpoint/state_dict.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "data/char_dataset.h"
#include "checkpoint/version.h"

#define MASK_SUFFIX "attn.bias"

// ---------------------------------------------------------------- export
// minGPT's causal-mask buffer of one layer, (1, 1, T, T): 1 on and below the diagonal.
static void fill_mask(const void *ctx, uint64_t first, size_t n, float *out) {
    const uint64_t T = (uint64_t)*(const int *)ctx;
    for (size_t i = 0; i < n; i++) out[i] = (first + i) % T <= (first + i) / T ? 1.0f : 0.0f;
}

// The shape of a parameter tensor as PyTorch has it: biases and LayerNorm weights are 1-D
// (the flat layout gives them cols 1, as it may an (n, 1) matrix when n_embd is 1).
static int torch_shape(const ParamTensor *p, int64_t *shape) {
    const size_t n = strlen(p->name);
    shape[0] = p->rows;
    shape[1] = p->cols;
    return (n > 5 && strcmp(p->name + n - 5, ".bias") == 0) || strstr(p->name, ".ln_") ? 1 : 2;
}

int state_dict_export(const Snapshot *s, const char *path, StDtype dtype, char *err, size_t errlen) {
    const GPTShape *sh = &s->shape;
    const int np = gpt_param_table(sh, NULL), n = np + sh->n_layer;
    ParamTensor *pt = calloc((size_t)np, sizeof *pt);
    StWrite *w = calloc((size_t)n, sizeof *w);
    char (*mask_names)[64] = calloc((size_t)sh->n_layer, 64);
    CharDataset ds = {0};
    json_t *vocab = json_array();
    char *vocab_text = NULL;
    int rc = 1;
    if (!pt || !w || !mask_names || !vocab || chardataset_from_vocab(&ds, s->vocab, s->vocab_size, sh->block_size)) {
        snprintf(err, errlen, "cannot export to '%s': out of memory", path);
        goto out;
    }
    gpt_param_table(sh, pt);
    // minGPT's order: each block's attn.bias after its attn.c_proj (it is registered there).
    int k = 0;
    for (int i = 0; i < np; i++) {
        w[k] = (StWrite){ .name = pt[i].name, .data = s->params + pt[i].offset };
        w[k].ndim = torch_shape(&pt[i], w[k].shape);
        k++;
        int layer;
        char rest[64];
        if (sh->block_size <= STATE_DICT_MASK_MAX_BLOCK &&
            sscanf(pt[i].name, "transformer.h.%d.%63s", &layer, rest) == 2 && strcmp(rest, "attn.c_proj.bias") == 0) {
            snprintf(mask_names[layer], 64, "transformer.h.%d." MASK_SUFFIX, layer);
            w[k++] = (StWrite){ .name = mask_names[layer], .ndim = 4, .shape = { 1, 1, sh->block_size, sh->block_size },
                                .fill = fill_mask, .ctx = &sh->block_size };
        }
    }
    for (int i = 0; i < s->vocab_size; i++) {
        char c[8];
        const int len = chardataset_decode_one(&ds, i, c);
        json_array_append_new(vocab, json_stringn(c, (size_t)len));
    }
    vocab_text = json_dumps(vocab, JSON_COMPACT);
    if (!vocab_text || json_array_size(vocab) != (size_t)s->vocab_size) {
        snprintf(err, errlen, "cannot export to '%s': out of memory", path);
        goto out;
    }
    char dims[6][32];
    snprintf(dims[0], 32, "%d", sh->vocab_size);
    snprintf(dims[1], 32, "%d", sh->block_size);
    snprintf(dims[2], 32, "%d", sh->n_layer);
    snprintf(dims[3], 32, "%d", sh->n_head);
    snprintf(dims[4], 32, "%d", sh->n_embd);
    snprintf(dims[5], 32, "%ld", s->iter_num);
    const char *keys[] = { "format", "mingpt", "vocab", "vocab_size", "block_size", "n_layer", "n_head", "n_embd",
                           "iteration", "config" };
    const char *values[] = { "pt", MINGPT_VERSION, vocab_text, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5],
                             s->config_yaml };
    rc = safetensors_write(path, w, k, dtype, keys, values, (int)(sizeof keys / sizeof keys[0]), err, errlen);
out:
    free(vocab_text);
    json_decref(vocab);
    chardataset_free(&ds);
    free(mask_names);
    free(w);
    free(pt);
    return rc;
}

// ---------------------------------------------------------------- import
static int mismatch(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int mismatch(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return 2;
}

// The model's sizes, for messages.
static void describe_shape(const GPTShape *s, char *buf, size_t len) {
    snprintf(buf, len, "this model: vocab_size %d (from the data), data_config.block_size %d, gpt_config.n_layer %d, "
             "n_head %d, n_embd %d", s->vocab_size, s->block_size, s->n_layer, s->n_head, s->n_embd);
}

// The file's sizes against the model's: 0 when they agree, else 2 with every size that differs
// named, the file's then the config's ("'m.safetensors' has n_layer 1, n_embd 32 but the config
// has n_layer 2, n_embd 64"). A size the file does not give (< 0) is not compared.
static int check_shape(const char *path, const GPTShape *file, const GPTShape *model, char *err, size_t errlen) {
    const struct { const char *name; int there, here; } dims[] = {
        {"n_layer", file->n_layer, model->n_layer}, {"n_head", file->n_head, model->n_head},
        {"n_embd", file->n_embd, model->n_embd}, {"block_size", file->block_size, model->block_size},
        {"vocab_size", file->vocab_size, model->vocab_size},
    };
    char there[256] = "", here[256] = "";
    size_t a = 0, b = 0;
    bool vocab = false;
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        if (dims[i].there < 0 || dims[i].there == dims[i].here) continue;
        a += (size_t)snprintf(there + a, sizeof there - a, "%s%s %d", a ? ", " : "", dims[i].name, dims[i].there);
        b += (size_t)snprintf(here + b, sizeof here - b, "%s%s %d", b ? ", " : "", dims[i].name, dims[i].here);
        vocab |= i == 4;
    }
    if (!a) return 0;
    return mismatch(err, errlen, "'%s' has %s but the config has %s (gpt_config.n_layer, n_head, n_embd and "
                    "data_config.block_size set the model%s)", path, there, here,
                    vocab ? "; the data, data_config.path and data_config.truncate, its vocab_size" : "");
}

// A metadata size of a safetensors file: the number, or -1 when the file does not give it.
static int meta_int(const SafeTensors *st, const char *key) {
    const char *v = safetensors_meta(st, key);
    char *end;
    const long x = v ? strtol(v, &end, 10) : -1;
    return v && end != v && !*end && x >= 0 && x <= INT_MAX ? (int)x : -1;
}

// The sizes of the model in a safetensors file: its metadata where it gives them, else what
// its tensors show (wte's rows and columns, wpe's rows, the blocks' count); -1 where neither
// tells (n_head has no tensor of its own).
static void safetensors_shape(const SafeTensors *st, GPTShape *s) {
    const StTensor *wte = safetensors_find(st, "transformer.wte.weight"), *wpe = safetensors_find(st, "transformer.wpe.weight");
    int layers = -1;
    for (int i = 0; i < st->n_tensors; i++) {
        int l, end = 0;
        if (sscanf(st->tensors[i].name, "transformer.h.%d.%n", &l, &end) == 1 && end > 0 && l >= layers) layers = l + 1;
    }
    const bool wte2 = wte && wte->ndim == 2 && wte->shape[0] <= INT_MAX && wte->shape[1] <= INT_MAX;
    const bool wpe2 = wpe && wpe->ndim == 2 && wpe->shape[0] <= INT_MAX;
    s->n_layer = meta_int(st, "n_layer");
    if (s->n_layer < 0) s->n_layer = layers;
    s->n_head = meta_int(st, "n_head");
    s->n_embd = meta_int(st, "n_embd");
    if (s->n_embd < 0 && wte2) s->n_embd = (int)wte->shape[1];
    s->block_size = meta_int(st, "block_size");
    if (s->block_size < 0 && wpe2) s->block_size = (int)wpe->shape[0];
    s->vocab_size = meta_int(st, "vocab_size");
    if (s->vocab_size < 0 && wte2) s->vocab_size = (int)wte->shape[0];
}

// The one code point of a UTF-8 string (jansson has checked it is UTF-8), or -1.
static long one_code_point(const char *s, size_t len) {
    const unsigned char *u = (const unsigned char *)s;
    if (len == 0) return -1;
    const size_t n = u[0] < 0x80 ? 1 : u[0] < 0xE0 ? 2 : u[0] < 0xF0 ? 3 : 4;
    if (n != len) return -1;
    long cp = n == 1 ? u[0] : u[0] & (0x3F >> (n - 1));
    for (size_t i = 1; i < n; i++) cp = (cp << 6) | (u[i] & 0x3F);
    return cp;
}

// The vocabulary in metadata `vocab` (a JSON list of one-character strings) against the data's.
static int check_vocab(const char *text, const GPTShape *shape, const uint32_t *vocab, const char *path, char *err,
                       size_t errlen) {
    json_error_t je;
    json_t *list = json_loads(text, JSON_ALLOW_NUL, &je);
    int rc = 0;
    if (!json_is_array(list)) {
        rc = mismatch(err, errlen, "'%s': metadata vocab is not a JSON list of characters", path);
        goto out;
    }
    const size_t n = json_array_size(list);
    for (size_t i = 0; i < n && i < (size_t)shape->vocab_size; i++) {
        const json_t *e = json_array_get(list, i);
        const long cp = json_is_string(e) ? one_code_point(json_string_value(e), json_string_length(e)) : -1;
        if (cp < 0) { rc = mismatch(err, errlen, "'%s': metadata vocab entry %zu is not one character", path, i); goto out; }
        if ((uint32_t)cp != vocab[i]) {
            rc = mismatch(err, errlen, "the vocabulary of '%s' differs from the data's at token %zu: U+%04lX in the "
                          "file, U+%04X in the data (data_config.path and data_config.truncate decide the vocabulary)",
                          path, i, cp, vocab[i]);
            goto out;
        }
    }
    if (n != (size_t)shape->vocab_size)
        rc = mismatch(err, errlen, "the vocabulary of '%s' has %zu characters, the data's %d (data_config.path and "
                      "data_config.truncate decide the vocabulary)", path, n, shape->vocab_size);
out:
    json_decref(list);
    return rc;
}

static void shape_text(const int64_t *shape, int ndim, char *buf, size_t len) {
    size_t o = (size_t)snprintf(buf, len, "(");
    for (int i = 0; i < ndim && o < len; i++) o += (size_t)snprintf(buf + o, len - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (o < len) snprintf(buf + o, len - o, "%s)", ndim == 1 ? "," : "");
}

int state_dict_from_safetensors(const SafeTensors *stp, const char *path, const GPTShape *shape, const uint32_t *vocab,
                                float *params, char *note, size_t notelen, char *err, size_t errlen) {
    const SafeTensors st = *stp;
    note[0] = 0;
    char model[256], want[96], got[96];
    describe_shape(shape, model, sizeof model);
    const int np = gpt_param_table(shape, NULL);
    ParamTensor *pt = calloc((size_t)np, sizeof *pt);
    int rc = 0;
    if (!pt) { snprintf(err, errlen, "'%s': out of memory", path); rc = 1; goto out; }
    gpt_param_table(shape, pt);
    // The sizes first: a model of another shape is named as such, not by its first tensor or token.
    GPTShape there;
    safetensors_shape(&st, &there);
    if ((rc = check_shape(path, &there, shape, err, errlen))) goto out;
    const char *v = safetensors_meta(&st, "vocab"), *nh = safetensors_meta(&st, "n_head");
    if (v && (rc = check_vocab(v, shape, vocab, path, err, errlen))) goto out;
    if (!v) snprintf(note, notelen, "'%s' gives no vocabulary (metadata 'vocab'): its token ids are taken to be the "
                     "data's (%d sorted characters)", path, shape->vocab_size);
    if (nh && strtol(nh, NULL, 10) != shape->n_head) {   // metadata n_head that is no plain number
        rc = mismatch(err, errlen, "'%s' was trained with n_head %s (its metadata), but gpt_config.n_head is %d here",
                      path, nh, shape->n_head);
        goto out;
    }
    // Every tensor of the model, with its shape, finite.
    for (int i = 0; i < np; i++) {
        const StTensor *t = safetensors_find(&st, pt[i].name);
        int64_t ws[2];
        const int wd = torch_shape(&pt[i], ws);
        shape_text(ws, wd, want, sizeof want);
        if (!t) { rc = mismatch(err, errlen, "'%s' has no tensor '%s' %s (%s)", path, pt[i].name, want, model); goto out; }
        shape_text(t->shape, t->ndim, got, sizeof got);
        if (strcmp(got, want) != 0) {
            rc = mismatch(err, errlen, "tensor '%s' of '%s' has the shape %s; this model needs %s (%s)", pt[i].name,
                          path, got, want, model);
            goto out;
        }
        if (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16 && t->dtype != ST_F64) {
            rc = mismatch(err, errlen, "tensor '%s' of '%s' has dtype %s; only F32, F16, BF16 and F64 are read",
                          pt[i].name, path, st_dtype_name(t->dtype));
            goto out;
        }
        float *dst = params + pt[i].offset;
        for (uint64_t j = 0; j < t->numel; j++) dst[j] = st_get_float(t, j);
        for (uint64_t j = 0; j < t->numel; j++)
            if (!isfinite(dst[j])) {
                double v = NAN;   // an F64 value that is finite but rounds to inf as a float32
                if (t->dtype == ST_F64) memcpy(&v, t->data + 8 * j, 8);
                if (isfinite(v))
                    snprintf(err, errlen, "tensor '%s' of '%s' holds %.9g (element %llu), outside float32's range "
                             "(magnitude at most %.9g)", pt[i].name, path, v, (unsigned long long)j, (double)FLT_MAX);
                else
                    snprintf(err, errlen, "tensor '%s' of '%s' holds non-finite values", pt[i].name, path);
                rc = 1;
                goto out;
            }
    }
    // Nothing else but the causal-mask buffers.
    for (int i = 0; i < st.n_tensors; i++) {
        const StTensor *t = &st.tensors[i];
        int layer, end = 0;
        bool known = false;
        for (int k = 0; k < np && !known; k++) known = strcmp(pt[k].name, t->name) == 0;
        if (known) continue;
        const bool is_mask = sscanf(t->name, "transformer.h.%d." MASK_SUFFIX "%n", &layer, &end) == 1 &&
                             t->name[end] == 0 && end > 0 && layer >= 0 && layer < shape->n_layer;
        const int64_t ms[4] = { 1, 1, shape->block_size, shape->block_size };
        shape_text(ms, 4, want, sizeof want);
        shape_text(t->shape, t->ndim, got, sizeof got);
        if (!is_mask) {
            rc = mismatch(err, errlen, "'%s' holds a tensor '%s' that this model does not have (%s)", path, t->name,
                          model);
            goto out;
        }
        if (strcmp(got, want) != 0) {
            rc = mismatch(err, errlen, "tensor '%s' of '%s' has the shape %s; this model's causal mask is %s (%s)",
                          t->name, path, got, want, model);
            goto out;
        }
        for (uint64_t j = 0; j < t->numel; j++) {
            const uint64_t T = (uint64_t)shape->block_size, r = j / T, c = j % T;
            if (st_get_float(t, j) != (c <= r ? 1.0f : 0.0f)) {
                rc = mismatch(err, errlen, "tensor '%s' of '%s' is not minGPT's causal mask (element [%llu, %llu])",
                              t->name, path, (unsigned long long)r, (unsigned long long)c);
                goto out;
            }
        }
    }
out:
    free(pt);
    return rc;
}

static int import_safetensors(const char *path, const GPTShape *shape, const uint32_t *vocab, float *params,
                              char *note, size_t notelen, char *err, size_t errlen) {
    SafeTensors st;
    if (safetensors_load(path, &st, err, errlen)) return 1;
    const int rc = state_dict_from_safetensors(&st, path, shape, vocab, params, note, notelen, err, errlen);
    safetensors_free(&st);
    return rc;
}

static int import_snapshot(const char *path, const GPTShape *shape, const uint32_t *vocab, float *params, char *note,
                           size_t notelen, char *err, size_t errlen) {
    Snapshot s;
    if (snapshot_load(path, &s, err, errlen)) return 1;
    if (s.note[0]) snprintf(note, notelen, "%s", s.note);
    int rc = check_shape(path, &s.shape, shape, err, errlen);
    for (int i = 0; !rc && i < shape->vocab_size; i++)
        if (s.vocab[i] != vocab[i])
            rc = mismatch(err, errlen, "the vocabulary of snapshot '%s' differs from the data's at token %d: U+%04X "
                          "in the snapshot, U+%04X in the data", path, i, s.vocab[i], vocab[i]);
    if (!rc) memcpy(params, s.params, s.num_params * sizeof(float));
    snapshot_free(&s);
    return rc;
}

int state_dict_import(const char *path, const GPTShape *shape, const uint32_t *vocab, float *params, char *note,
                      size_t notelen, char *err, size_t errlen) {
    note[0] = 0;
    char magic[8] = { 0 };
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {   // a path the user gave: fixed in the config (2), unless it could not be read (1)
        const int e = errno;
        snprintf(err, errlen, "cannot open '%s': %s", path, strerror(e));
        return e == ENOENT || e == ENOTDIR ? 2 : 1;
    }
    const ssize_t got = read(fd, magic, sizeof magic);
    close(fd);
    if (got == (ssize_t)sizeof magic && memcmp(magic, "MINGPTSN", 8) == 0)
        return import_snapshot(path, shape, vocab, params, note, notelen, err, errlen);
    return import_safetensors(path, shape, vocab, params, note, notelen, err, errlen);
}
