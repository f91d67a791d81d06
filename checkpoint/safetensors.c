// checkpoint/safetensors.c — see safetensors.h.
#include "checkpoint/safetensors.h"

#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "checkpoint/atomic_file.h"
#include "checkpoint/file_read.h"

static const struct { const char *name; size_t size; } DTYPES[ST_N_DTYPES] = {
    [ST_BOOL] = { "BOOL", 1 },     [ST_U8] = { "U8", 1 },    [ST_I8] = { "I8", 1 },
    [ST_F8_E5M2] = { "F8_E5M2", 1 }, [ST_F8_E4M3] = { "F8_E4M3", 1 },
    [ST_I16] = { "I16", 2 },       [ST_U16] = { "U16", 2 },  [ST_F16] = { "F16", 2 },  [ST_BF16] = { "BF16", 2 },
    [ST_I32] = { "I32", 4 },       [ST_U32] = { "U32", 4 },  [ST_F32] = { "F32", 4 },
    [ST_F64] = { "F64", 8 },       [ST_I64] = { "I64", 8 },  [ST_U64] = { "U64", 8 },
};

const char *st_dtype_name(StDtype d) { return d >= 0 && d < ST_N_DTYPES ? DTYPES[d].name : NULL; }
size_t st_dtype_size(StDtype d) { return d >= 0 && d < ST_N_DTYPES ? DTYPES[d].size : 0; }

// ---------------------------------------------------------------- 16-bit floats
uint16_t st_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);   // NaN stays a (quiet) NaN
    x += 0x7fffu + ((x >> 16) & 1u);                                             // round to nearest even
    return (uint16_t)(x >> 16);
}

float st_from_bf16(uint16_t h) {
    const uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

// Rounds the integer m / 2^shift to nearest even (shift >= 1).
static uint32_t round_shift(uint32_t m, int shift) {
    const uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    return q + (rem > half || (rem == half && (q & 1u)));
}

uint16_t st_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const int exp = (int)((x >> 23) & 0xffu);
    const uint32_t man = x & 0x7fffffu;
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));   // inf, NaN
    const int e = exp - 127 + 15;                  // the half-precision exponent field
    if (e >= 31) return (uint16_t)(sign | 0x7c00u);   // overflow: inf
    if (e <= 0) {                                  // a subnormal half (or zero)
        if (e < -10) return sign;                  // below half of the smallest subnormal
        return (uint16_t)(sign | round_shift(man | 0x800000u, 14 - e));   // a carry makes it normal
    }
    // a carry out of the mantissa raises the exponent, up to inf: that is the right rounding
    return (uint16_t)(sign | round_shift(((uint32_t)e << 23) | man, 13));
}

float st_from_f16(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    uint32_t x;
    if (exp == 0x1f) x = sign | 0x7f800000u | (man << 13);
    else if (exp != 0) x = sign | ((exp + 112) << 23) | (man << 13);
    else {
        const float v = ldexpf((float)man, -24);   // subnormal (exact)
        return sign ? -v : v;
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}

float st_get_float(const StTensor *t, uint64_t i) {
    switch (t->dtype) {
    case ST_F32: { float v; memcpy(&v, t->data + 4 * i, 4); return v; }
    case ST_F64: { double v; memcpy(&v, t->data + 8 * i, 8); return (float)v; }
    case ST_F16: { uint16_t v; memcpy(&v, t->data + 2 * i, 2); return st_from_f16(v); }
    case ST_BF16: { uint16_t v; memcpy(&v, t->data + 2 * i, 2); return st_from_bf16(v); }
    default: return NAN;
    }
}

// ---------------------------------------------------------------- reading
#define failf(err, errlen, name, ...) file_malformed(err, errlen, "safetensors file", name, __VA_ARGS__)

void safetensors_free(SafeTensors *st) {
    for (int i = 0; i < st->n_tensors; i++) free(st->tensors[i].name);
    for (int i = 0; i < st->n_meta; i++) { free(st->meta_keys[i]); free(st->meta_values[i]); }
    free(st->tensors);
    free(st->meta_keys);
    free(st->meta_values);
    free(st->owned);
    memset(st, 0, sizeof *st);
}

// A JSON integer >= 0 (jansson refuses integers beyond int64 when parsing).
static int nonneg_int(const json_t *j, int64_t *out) {
    if (!json_is_integer(j) || json_integer_value(j) < 0) return 0;
    *out = (int64_t)json_integer_value(j);
    return 1;
}

static int parse_meta(const json_t *m, SafeTensors *st, const char *name, char *err, size_t errlen) {
    if (!json_is_object(m)) return failf(err, errlen, name, "__metadata__ is not an object");
    const size_t n = json_object_size(m);
    st->meta_keys = calloc(n + 1, sizeof *st->meta_keys);
    st->meta_values = calloc(n + 1, sizeof *st->meta_values);
    if (!st->meta_keys || !st->meta_values) { snprintf(err, errlen, "'%s': out of memory", name); return 1; }
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)m, key, v) {
        if (!json_is_string(v)) return failf(err, errlen, name, "__metadata__ value of '%s' is not a string", key);
        st->meta_keys[st->n_meta] = strdup(key);
        st->meta_values[st->n_meta] = strdup(json_string_value(v));
        if (!st->meta_keys[st->n_meta] || !st->meta_values[st->n_meta++]) {
            snprintf(err, errlen, "'%s': out of memory", name);
            return 1;
        }
    }
    return 0;
}

// One tensor entry of the header; data_len is the size of the data section.
static int parse_tensor(const char *key, const json_t *e, const unsigned char *data, uint64_t data_len, StTensor *t,
                        uint64_t *begin, const char *name, char *err, size_t errlen) {
    if (!json_is_object(e)) return failf(err, errlen, name, "tensor '%s' is not an object", key);
    const json_t *dt = json_object_get(e, "dtype"), *sh = json_object_get(e, "shape"),
                 *off = json_object_get(e, "data_offsets");
    if (!dt || !sh || !off || json_object_size(e) != 3)
        return failf(err, errlen, name, "tensor '%s' must have exactly the keys dtype, shape and data_offsets", key);
    int d = 0;
    while (d < ST_N_DTYPES && !(json_is_string(dt) && strcmp(json_string_value(dt), DTYPES[d].name) == 0)) d++;
    if (d == ST_N_DTYPES) return failf(err, errlen, name, "tensor '%s' has an unknown dtype", key);
    t->dtype = (StDtype)d;
    if (!json_is_array(sh) || json_array_size(sh) > ST_MAX_DIMS)
        return failf(err, errlen, name, "tensor '%s': shape is not a list of at most %d integers", key, ST_MAX_DIMS);
    t->ndim = (int)json_array_size(sh);
    bool empty = false;
    for (int i = 0; i < t->ndim; i++) {
        if (!nonneg_int(json_array_get(sh, (size_t)i), &t->shape[i]))
            return failf(err, errlen, name, "tensor '%s': shape[%d] is not an integer >= 0", key, i);
        empty |= t->shape[i] == 0;
    }
    uint64_t numel = empty ? 0 : 1;
    for (int i = 0; !empty && i < t->ndim; i++)
        if (__builtin_mul_overflow(numel, (uint64_t)t->shape[i], &numel) || numel > data_len)
            return failf(err, errlen, name, "tensor '%s': its shape holds more elements than the data has bytes", key);
    int64_t b, en;
    if (!json_is_array(off) || json_array_size(off) != 2 || !nonneg_int(json_array_get(off, 0), &b) ||
        !nonneg_int(json_array_get(off, 1), &en))
        return failf(err, errlen, name, "tensor '%s': data_offsets is not a list of two integers >= 0", key);
    if (b > en || (uint64_t)en > data_len)
        return failf(err, errlen, name, "tensor '%s': data_offsets [%lld, %lld] is not inside the %llu bytes of data",
                     key, (long long)b, (long long)en, (unsigned long long)data_len);
    if (numel > data_len || numel * DTYPES[d].size != (uint64_t)(en - b))
        return failf(err, errlen, name, "tensor '%s': %llu bytes at data_offsets, but its shape and dtype %s need %llu",
                     key, (unsigned long long)(en - b), DTYPES[d].name,
                     numel > data_len ? 0ull : (unsigned long long)(numel * DTYPES[d].size));
    t->numel = numel;
    t->nbytes = (uint64_t)(en - b);
    t->data = data + b;
    *begin = (uint64_t)b;
    t->name = strdup(key);
    if (!t->name) { snprintf(err, errlen, "'%s': out of memory", name); return 1; }
    return 0;
}

// jansson's allocator while a header is parsed: malloc and free, counting this thread's bytes
// against a budget (ST_MAX_HEADER_MEMORY) when one is set. Compatible with plain malloc/free, so
// objects jansson made elsewhere (other threads, other files) are freed alike.
typedef struct { size_t used, cap; int over; } Budget;
static _Thread_local Budget *g_budget;

static void *budget_malloc(size_t n) {
    Budget *b = g_budget;
    if (b && n > b->cap - b->used) { b->over = 1; return NULL; }
    void *p = malloc(n);
    if (p && b) b->used += malloc_usable_size(p);
    return p;
}

static void budget_free(void *p) {
    Budget *b = g_budget;
    if (p && b) {
        const size_t u = malloc_usable_size(p);
        b->used -= u < b->used ? u : b->used;
    }
    free(p);
}

// json_loadb of the header within ST_MAX_HEADER_MEMORY; NULL with the message in err.
static json_t *load_header(const unsigned char *text, uint64_t n, const char *name, char *err, size_t errlen) {
    json_set_alloc_funcs(budget_malloc, budget_free);
    Budget b = {.cap = ST_MAX_HEADER_MEMORY};
    g_budget = &b;
    json_error_t je;
    errno = 0;
    json_t *root = json_loadb((const char *)text, (size_t)n, JSON_REJECT_DUPLICATES, &je);
    const int oom = !root && (json_error_code(&je) == json_error_out_of_memory || errno == ENOMEM);
    g_budget = NULL;
    if (root) return root;
    if (b.over)
        snprintf(err, errlen, "safetensors file '%s': its header of %llu bytes needs more than %zu MiB of memory to "
                 "parse, the limit (ST_MAX_HEADER_MEMORY: about 300000 tensors)", name, (unsigned long long)n,
                 ST_MAX_HEADER_MEMORY >> 20);
    else if (oom)
        snprintf(err, errlen, "safetensors file '%s': out of memory parsing its header of %llu bytes", name,
                 (unsigned long long)n);
    else
        failf(err, errlen, name, "the header is not valid JSON: %s (at byte %d of the header)", je.text, je.position);
    return NULL;
}

int safetensors_tensor_count_ok(size_t n_entries, int has_metadata) {
    return n_entries - (has_metadata && n_entries > 0) <= ST_MAX_TENSORS;
}

typedef struct { uint64_t begin, end; int index; } Span;
static int by_begin(const void *a, const void *b) {
    const Span *x = a, *y = b;
    return x->begin != y->begin ? (x->begin > y->begin) - (x->begin < y->begin) : (x->end > y->end) - (x->end < y->end);
}

int safetensors_parse(const unsigned char *buf, size_t len, const char *name, SafeTensors *st, char *err,
                      size_t errlen) {
    memset(st, 0, sizeof *st);
    if (len < 8) {
        snprintf(err, errlen, "safetensors file '%s' is truncated: %zu bytes, fewer than its 8-byte header length", name,
                 len);
        return 1;
    }
    uint64_t n;
    memcpy(&n, buf, 8);
    if (n > len - 8) {
        snprintf(err, errlen, "safetensors file '%s' is truncated or malformed: its header length %llu runs past the "
                 "end of the file (%zu bytes)", name, (unsigned long long)n, len);
        return 1;
    }
    if (n > ST_MAX_HEADER) return failf(err, errlen, name, "a header of %llu bytes (at most %d)", (unsigned long long)n,
                                        ST_MAX_HEADER);
    if (n < 2 || buf[8] != '{') return failf(err, errlen, name, "the header does not start with '{'");
    json_t *root = load_header(buf + 8, n, name, err, errlen);
    if (!root) return 1;
    int rc = 1;
    const unsigned char *data = buf + 8 + n;
    const uint64_t data_len = len - 8 - n;
    Span *spans = NULL;
    if (!json_is_object(root)) { failf(err, errlen, name, "the header is not a JSON object"); goto out; }
    const size_t entries = json_object_size(root);
    const int has_meta = json_object_get(root, "__metadata__") != NULL;
    if (!safetensors_tensor_count_ok(entries, has_meta)) {
        failf(err, errlen, name, "%zu tensors, more than the limit of %d", entries - (size_t)has_meta, ST_MAX_TENSORS);
        goto out;
    }
    st->tensors = calloc(entries + 1, sizeof *st->tensors);
    spans = calloc(entries + 1, sizeof *spans);
    if (!st->tensors || !spans) { snprintf(err, errlen, "'%s': out of memory", name); goto out; }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (strcmp(key, "__metadata__") == 0) {
            if (parse_meta(v, st, name, err, errlen)) goto out;
            continue;
        }
        if (!key[0]) { failf(err, errlen, name, "a tensor has an empty name"); goto out; }
        StTensor *t = &st->tensors[st->n_tensors];
        if (parse_tensor(key, v, data, data_len, t, &spans[st->n_tensors].begin, name, err, errlen)) goto out;
        spans[st->n_tensors].end = spans[st->n_tensors].begin + t->nbytes;
        spans[st->n_tensors].index = st->n_tensors;
        st->n_tensors++;
    }
    // The tensors tile the data section: sorted by offset, each starts where the last ended.
    qsort(spans, (size_t)st->n_tensors, sizeof *spans, by_begin);
    uint64_t end = 0;
    for (int i = 0; i < st->n_tensors; i++) {
        const char *tn = st->tensors[spans[i].index].name;
        if (spans[i].begin < end) {
            failf(err, errlen, name, "tensor '%s' at data offset %llu overlaps '%s', which ends at %llu", tn,
                  (unsigned long long)spans[i].begin, st->tensors[spans[i - 1].index].name, (unsigned long long)end);
            goto out;
        }
        if (spans[i].begin > end) {
            failf(err, errlen, name, "bytes %llu to %llu of the data belong to no tensor", (unsigned long long)end,
                  (unsigned long long)spans[i].begin - 1);
            goto out;
        }
        end = spans[i].end;
    }
    if (end != data_len) {
        failf(err, errlen, name, "the data section has %llu bytes, but the tensors end at %llu",
              (unsigned long long)data_len, (unsigned long long)end);
        goto out;
    }
    rc = 0;
out:
    free(spans);
    json_decref(root);
    if (rc) safetensors_free(st);
    return rc;
}

int safetensors_load(const char *path, SafeTensors *st, char *err, size_t errlen) {
    memset(st, 0, sizeof *st);
    unsigned char *buf;
    size_t len;
    if (file_read_regular(path, "safetensors file", &buf, &len, err, errlen)) return 1;
    if (safetensors_parse(buf, len, path, st, err, errlen)) { free(buf); return 1; }
    st->owned = buf;
    return 0;
}

const StTensor *safetensors_find(const SafeTensors *st, const char *name) {
    for (int i = 0; i < st->n_tensors; i++)
        if (strcmp(st->tensors[i].name, name) == 0) return &st->tensors[i];
    return NULL;
}

const char *safetensors_meta(const SafeTensors *st, const char *key) {
    for (int i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta_keys[i], key) == 0) return st->meta_values[i];
    return NULL;
}

// ---------------------------------------------------------------- writing
static uint64_t numel_of(const StWrite *t) {
    uint64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= (uint64_t)t->shape[i];
    return n;
}

// The header: __metadata__, then each tensor at its offset; NULL when out of memory or a
// string is not UTF-8.
static char *header_json(const StWrite *tensors, int n, StDtype dtype, const char *const *mk,
                         const char *const *mv, int n_meta) {
    json_t *root = json_object(), *meta = json_object();
    int bad = !root || !meta;
    for (int i = 0; !bad && i < n_meta; i++) bad = json_object_set_new(meta, mk[i], json_string(mv[i])) != 0;
    if (!bad && n_meta) bad = json_object_set(root, "__metadata__", meta) != 0;
    uint64_t off = 0;
    for (int i = 0; !bad && i < n; i++) {
        const uint64_t bytes = numel_of(&tensors[i]) * DTYPES[dtype].size;
        json_t *shape = json_array();
        for (int d = 0; shape && d < tensors[i].ndim; d++) json_array_append_new(shape, json_integer(tensors[i].shape[d]));
        json_t *e = json_pack("{s:s, s:o, s:[I, I]}", "dtype", DTYPES[dtype].name, "shape", shape, "data_offsets",
                              (json_int_t)off, (json_int_t)(off + bytes));
        bad = !e || json_object_set_new(root, tensors[i].name, e) != 0;
        off += bytes;
    }
    char *text = bad ? NULL : json_dumps(root, JSON_COMPACT);
    json_decref(meta);
    json_decref(root);
    return text;
}

int safetensors_write(const char *path, const StWrite *tensors, int n, StDtype dtype, const char *const *meta_keys,
                      const char *const *meta_values, int n_meta, char *err, size_t errlen) {
    if (dtype != ST_F32 && dtype != ST_BF16 && dtype != ST_F16) {
        snprintf(err, errlen, "cannot write '%s': dtype %s is not written", path, st_dtype_name(dtype));
        return 1;
    }
    char *header = header_json(tensors, n, dtype, meta_keys, meta_values, n_meta);
    if (!header) { snprintf(err, errlen, "cannot write '%s': out of memory (or a name that is not UTF-8)", path); return 1; }
    const size_t hl = strlen(header), padded = (hl + 8 + 7) / 8 * 8 - 8;   // data starts 8-byte aligned
    enum { CHUNK = 1 << 16 };
    float *in = malloc(CHUNK * sizeof(float));
    unsigned char *out = malloc(CHUNK * sizeof(float));
    AtomicFile a;
    int rc = !in || !out ? -1 : atomic_open(&a, path, NULL, err, errlen);
    if (rc < 0) snprintf(err, errlen, "cannot write '%s': out of memory", path);
    if (rc == 0) {
        const uint64_t n_header = padded;
        atomic_write(&a, &n_header, 8);
        atomic_write(&a, header, hl);
        for (size_t i = hl; i < padded; i++) atomic_write(&a, " ", 1);
        const size_t es = DTYPES[dtype].size;
        for (int i = 0; i < n; i++) {
            const uint64_t total = numel_of(&tensors[i]);
            for (uint64_t first = 0; first < total; first += CHUNK) {
                const size_t k = total - first < CHUNK ? (size_t)(total - first) : CHUNK;
                const float *src = tensors[i].data ? tensors[i].data + first : in;
                if (!tensors[i].data) tensors[i].fill(tensors[i].ctx, first, k, in);
                for (size_t j = 0; j < k; j++) {
                    const uint16_t h = dtype == ST_BF16 ? st_to_bf16(src[j]) : dtype == ST_F16 ? st_to_f16(src[j]) : 0;
                    if (dtype == ST_F32) memcpy(out + 4 * j, &src[j], 4);
                    else memcpy(out + 2 * j, &h, 2);
                }
                atomic_write(&a, out, k * es);
            }
        }
        rc = atomic_commit(&a, err, errlen);
    }
    free(in);
    free(out);
    free(header);
    return rc ? 1 : 0;
}
