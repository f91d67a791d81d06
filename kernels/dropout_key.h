// kernels/dropout_key.h — DropoutKey, the dropout argument of the Backend ops (kernels/backend.h).
// Plain C, no device qualifiers, so that every header can include it; the functions that use it
// are in kernels/dropout_rng.h.
#ifndef MINGPT_DROPOUT_KEY_H
#define MINGPT_DROPOUT_KEY_H

#include <stdint.h>

// One dropout site of one step, and where the op's batch rows sit in the global batch.
// Masks are keyed by the GLOBAL element index, so that N data-parallel ranks with batch B
// draw exactly the masks of one process with batch N*B: local row j of the op's input is
// global row row0 + j * row_stride (rank r of W: row0 = r, row_stride = W; micro-step m of a
// gradient accumulation adds W*m*B to row0). One process: {key, 0, 1}, global = local.
// dev (backends with device memory, CUDA): NULL, or a DropoutKey in backend memory whose key,
// row0 and row_stride the kernels read when they run instead of the three fields here (which
// still hold the same values, for backends that ignore dev). A CUDA graph repeats its kernels'
// arguments, so a captured step reads the per-step key from a fixed buffer that the host
// rewrites before each replay (model/gpt.c, gpt_forward_backward).
typedef struct DropoutKey {
    uint64_t key;         // dropout_key(seed, rng_stream(RNG_DOMAIN_DROPOUT, ...))
    int64_t row0;         // global row of local row 0
    int64_t row_stride;   // global rows between consecutive local rows
    const struct DropoutKey *dev;   // NULL: the fields above; else read from there at run time
} DropoutKey;

#endif
