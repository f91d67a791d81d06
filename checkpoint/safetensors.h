// checkpoint/safetensors.h — the safetensors file format (Hugging Face's; what
// safetensors.torch.load_file reads), written and read here with jansson for the header.
//
//   bytes 0..7      N, the header length, u64 little-endian
//   bytes 8..8+N    the header: a JSON object, UTF-8, padded with spaces (here: so that the data
//                   starts at a multiple of 8)
//                     {"__metadata__": {"key": "value", ...},          (optional, strings only)
//                      "<tensor name>": {"dtype": "F32", "shape": [r, c],
//                                        "data_offsets": [begin, end]}, ...}
//   bytes 8+N..     the data: each tensor's elements, row-major, little-endian, at [begin, end)
//                   of this section; the tensors tile it without gaps or overlaps
//
// safetensors_parse is the one validated reader (init_from and the fuzz target use it): every
// length, offset, dtype and shape is checked against the file before anything is used.
#ifndef MINGPT_SAFETENSORS_H
#define MINGPT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define ST_MAX_HEADER  100000000   // bytes of header (the reference implementation's limit)
#define ST_MAX_DIMS    8
#define ST_MAX_TENSORS (1 << 20)   // tensors (__metadata__ is no tensor)
// Memory the JSON parser (jansson) may use for the header: about 13 bytes per header byte, 870
// per tensor entry, so 256 MiB hold about 300,000 tensors (mingpt's largest model, n_layer 4096,
// has about 53,000); a header that needs more (a 100 MB one would need 1.3 GB or more) is refused
// when the parser reaches the limit, not after memory runs out.
#define ST_MAX_HEADER_MEMORY ((size_t)256 << 20)

typedef enum {
    ST_BOOL, ST_U8, ST_I8, ST_F8_E5M2, ST_F8_E4M3, ST_I16, ST_U16, ST_F16, ST_BF16, ST_I32, ST_U32, ST_F32,
    ST_F64, ST_I64, ST_U64, ST_N_DTYPES
} StDtype;

// "F32" for ST_F32, ...; NULL for a value out of range.
const char *st_dtype_name(StDtype d);
// Bytes per element.
size_t st_dtype_size(StDtype d);

typedef struct {
    char *name;                   // UTF-8 without NUL bytes
    StDtype dtype;
    int ndim;                     // 0..ST_MAX_DIMS (0: a scalar)
    int64_t shape[ST_MAX_DIMS];
    uint64_t numel;
    const unsigned char *data;    // nbytes of little-endian elements inside the parsed buffer
    uint64_t nbytes;
} StTensor;

typedef struct {
    StTensor *tensors;            // in the header's order
    int n_tensors;
    char **meta_keys, **meta_values;   // __metadata__ (n_meta pairs)
    int n_meta;
    unsigned char *owned;         // the file's bytes when read by safetensors_load
} SafeTensors;

// Parses buf[0..len) (which must outlive *st: tensors point into it); `name` (the path) is used
// in messages. Checks: the header length inside the file and at most ST_MAX_HEADER, the header a
// JSON object (no duplicate keys), __metadata__ an object of strings, every tensor an object of
// exactly dtype (a safetensors dtype), shape (at most ST_MAX_DIMS integers >= 0) and
// data_offsets ([begin, end], integers, begin <= end <= the data's size) with end - begin =
// numel x the dtype's size (no overflow), and the tensors tiling the data section exactly (no
// gap, no overlap, nothing after the last), at most ST_MAX_TENSORS. Returns 0, or non-zero with
// one message naming the file and the first problem (*st is then empty). Parsing the header uses
// at most ST_MAX_HEADER_MEMORY ("... needs more than 256 MiB of memory to parse, the limit"); a
// malloc that fails inside the JSON parser is said as "out of memory", not as invalid JSON.
int safetensors_parse(const unsigned char *buf, size_t len, const char *name, SafeTensors *st, char *err,
                      size_t errlen);

// 1 when a header of n_entries top-level keys, one of them __metadata__ when has_metadata, holds
// at most ST_MAX_TENSORS tensors; else 0 (safetensors_parse refuses it: "more than 1048576 tensors").
int safetensors_tensor_count_ok(size_t n_entries, int has_metadata);

// Reads the regular file at path and parses it (st owns the bytes). Non-zero with a message
// naming path when it is missing, not a regular file, unreadable or refused by safetensors_parse.
int safetensors_load(const char *path, SafeTensors *st, char *err, size_t errlen);

// The tensor called name, or NULL.
const StTensor *safetensors_find(const SafeTensors *st, const char *name);
// The __metadata__ value of key, or NULL.
const char *safetensors_meta(const SafeTensors *st, const char *key);
void safetensors_free(SafeTensors *st);

// Element i of an F32, F16, BF16 or F64 tensor as a float (F64 rounded to nearest).
float st_get_float(const StTensor *t, uint64_t i);

// A tensor to write: shape and fp32 values, from `data` or, when it is NULL, from
// fill(ctx, first, n, out) (elements first .. first + n - 1, for tensors computed on the fly).
typedef struct {
    const char *name;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    const float *data;
    void (*fill)(const void *ctx, uint64_t first, size_t n, float *out);
    const void *ctx;
} StWrite;

// Writes the tensors (in this order, converted from fp32 to dtype F32, BF16 or F16 with round to
// nearest even, as torch's .to() does) and the metadata pairs to path, atomically
// (checkpoint/atomic_file.h). Returns 0, or non-zero with a message naming the file.
int safetensors_write(const char *path, const StWrite *tensors, int n, StDtype dtype, const char *const *meta_keys,
                      const char *const *meta_values, int n_meta, char *err, size_t errlen);

// fp32 to the 16-bit types and back (round to nearest even; NaN stays NaN, overflow gives inf).
uint16_t st_to_bf16(float x);
uint16_t st_to_f16(float x);
float st_from_bf16(uint16_t h);
float st_from_f16(uint16_t h);

#endif
