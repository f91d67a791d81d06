// model/gpt_infer.h — GPT inference with a key/value cache, for sampling (`mingpt sample`).
//
// The model is model/gpt.h's (same flat parameter layout); this path only runs forward on
// host memory, one sequence at a time. Feeding tokens appends their keys and values to a
// per-layer cache, so each new token costs one token's worth of work (matrix-vector
// products and attention over the cached positions) instead of a forward over the whole
// context: generating n <= block_size tokens is linear in n.
//
// gpt_infer_next keeps minGPT's generate() semantics exactly: the context is cropped to
// its last block_size tokens. While the cropped window only grows, the cache is extended;
// once it slides (the context is longer than block_size), every position of the window
// changes, so the window is recomputed (one batched forward over block_size tokens, with
// only the last position carried through the last block). The logits equal gpt_forward's
// at the window's last position up to fp32 rounding (tests/test_infer.c: 1e-5).
#ifndef MINGPT_GPT_INFER_H
#define MINGPT_GPT_INFER_H

#include <stddef.h>
#include <stdint.h>

#include "model/gpt.h"

typedef struct {
    GPTShape shape;
    GPTParams p;            // views into the caller's host parameter buffer (not owned)
    int pos;                // positions held by the cache
    int32_t *tokens;        // (block_size) the cached tokens
    float *kcache, *vcache; // (n_layer, block_size, C)
    // Scratch for up to block_size rows.
    float *x, *ln, *mean, *rstd, *qkv, *atty, *fch, *branch, *logits;
    float *att;             // (n_head, block_size, block_size) attention probabilities
} GPTInfer;

// Binds the host parameter buffer `params` (gpt_param_table layout for shape s; it must
// outlive g) and allocates the cache and scratch. Dropout is never applied. Returns non-zero
// with a message in err on a bad shape or out of memory.
int gpt_infer_init(GPTInfer *g, const GPTShape *s, const float *params, char *err, size_t errlen);
void gpt_infer_free(GPTInfer *g);

// Empties the cache (the next token is at position 0).
void gpt_infer_reset(GPTInfer *g);

// Appends n >= 1 tokens at positions pos .. pos+n-1 (pos + n <= block_size) and returns the
// logits (V,) after the last of them (valid until the next call).
const float *gpt_infer_feed(GPTInfer *g, const int32_t *tokens, int n);

// Logits (V,) for the token after ctx[0..n) (n >= 1), as gpt_forward on the last
// min(n, block_size) tokens gives at its last position. Reuses the cache when the cropped
// window extends the cached tokens, else refills it.
const float *gpt_infer_next(GPTInfer *g, const int32_t *ctx, long n);

#endif
