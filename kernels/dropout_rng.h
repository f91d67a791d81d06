// kernels/dropout_rng.h — counter-based dropout masks shared by every backend.
//
// Whether element `idx` of a dropout site is kept depends only on (seed, stream, idx),
// never on thread count or execution order, so the CPU and CUDA backends draw the same
// mask, the backward pass recomputes the mask instead of storing it, and a resumed run
// draws exactly what an uninterrupted one would. Hash: the SplitMix64 finaliser
// (Steele et al., "Fast splittable pseudorandom number generators", 2014).
#ifndef MINGPT_DROPOUT_RNG_H
#define MINGPT_DROPOUT_RNG_H

#include <stdint.h>

#include "kernels/dropout_key.h"

#ifndef MINGPT_HD
#define MINGPT_HD static inline
#endif

MINGPT_HD uint64_t rng_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// Key layout. Every random stream of a run is dropout_key(seed, stream) with
//   stream = domain << 56 | index        (index < 2^56)
// and disjoint domains, so no two uses can ever draw the same numbers:
//   RNG_DOMAIN_INIT     index = parameter tensor k (model/gpt.c, gpt_init_weights)
//   RNG_DOMAIN_DROPOUT  index = step * GPT_DROPOUT_SITES + site (model/gpt.c, site_key)
// New uses take a new domain number.
enum { RNG_DOMAIN_INIT = 1, RNG_DOMAIN_DROPOUT = 2 };

MINGPT_HD uint64_t rng_stream(uint64_t domain, uint64_t index) {
    return domain << 56 | (index & 0x00ffffffffffffffULL);
}

// Key of one stream (see the layout above).
MINGPT_HD uint64_t dropout_key(uint64_t seed, uint64_t stream) {
    return rng_mix64(seed ^ rng_mix64(stream + 0x9e3779b97f4a7c15ULL));
}

// Global index of element e of local row j, for rows of row_len elements.
MINGPT_HD uint64_t dropout_global_index(DropoutKey k, int64_t j, int64_t row_len, int64_t e) {
    return (uint64_t)((k.row0 + j * k.row_stride) * row_len + e);
}

// Threshold of the 24-bit uniform below which an element is dropped: p * 2^24.
MINGPT_HD uint32_t dropout_threshold(float p) { return (uint32_t)((double)p * 16777216.0); }

// 1 when element idx is kept (probability 1 - p), 0 when dropped.
MINGPT_HD int dropout_keep(uint64_t key, uint64_t idx, uint32_t threshold) {
    return (uint32_t)(rng_mix64(key ^ (idx * 0x9e3779b97f4a7c15ULL)) >> 40) >= threshold;
}

#endif
