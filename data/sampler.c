// data/sampler.c — PyTorch-exact MT19937, CPU randperm and DistributedSampler.
//
// Matched against torch 1.13 (tests/fixtures/sampler_torch.txt, written by
// tests/gen_sampler_fixture.py):
//   - at::mt19937 (aten/src/ATen/core/MT19937RNGEngine.h): init_genrand with the low
//     32 bits of the 64-bit seed, standard twist and tempering.
//   - CPUGeneratorImpl::random() returns one 32-bit engine output (not random64()).
//   - randperm_cpu (aten/src/ATen/native/TensorFactories.cpp), small-n branch.
//   - DistributedSampler.__iter__ (torch/utils/data/distributed.py).
#include "data/sampler.h"

#include <stddef.h>

enum { MT_N = 624, MT_M = 397 };

void mt19937_seed(MT19937 *g, uint32_t seed) {
    g->mt[0] = seed;
    for (int i = 1; i < MT_N; i++)
        g->mt[i] = 1812433253u * (g->mt[i - 1] ^ (g->mt[i - 1] >> 30)) + (uint32_t)i;
    g->mti = MT_N;  // first next() twists the whole state
}

static void mt19937_twist(MT19937 *g) {
    for (int k = 0; k < MT_N; k++) {
        uint32_t y = (g->mt[k] & 0x80000000u) | (g->mt[(k + 1) % MT_N] & 0x7fffffffu);
        g->mt[k] = g->mt[(k + MT_M) % MT_N] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    g->mti = 0;
}

uint32_t mt19937_next(MT19937 *g) {
    if (g->mti >= MT_N) mt19937_twist(g);
    uint32_t y = g->mt[g->mti++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

// torch takes this branch for n < std::numeric_limits<uint32_t>::max() / 20; larger n
// switches to an inside-out Fisher-Yates on random64(), which we do not reproduce.
#define RANDPERM_SMALL_N_LIMIT (4294967295L / 20)

int torch_randperm(long n, uint64_t seed, long *out) {
    if (n < 0 || n >= RANDPERM_SMALL_N_LIMIT) return -1;
    MT19937 g;
    mt19937_seed(&g, (uint32_t)seed);  // Generator.manual_seed keeps the low 32 bits
    for (long i = 0; i < n; i++) out[i] = i;
    for (long i = 0; i + 1 < n; i++) {
        long z = (long)(mt19937_next(&g) % (uint64_t)(n - i));
        long t = out[i];
        out[i] = out[i + z];
        out[i + z] = t;
    }
    return 0;
}

void dsampler_init(DistributedSampler *s, long n, int world_size, int rank, bool shuffle,
                   uint64_t seed, bool drop_last) {
    s->n = n;
    s->world_size = world_size;
    s->rank = rank;
    s->shuffle = shuffle;
    s->drop_last = drop_last;
    s->seed = seed;
    s->epoch = 0;
    long w = world_size > 0 ? world_size : 1;
    if (drop_last && n % w != 0) {
        // math.ceil((N - W) / W); C division truncates toward zero, which is the ceiling
        // for a negative numerator (N < W gives 0 samples, as in torch).
        long a = n - w;
        s->num_samples = a >= 0 ? (a + w - 1) / w : a / w;
    } else {
        s->num_samples = (n + w - 1) / w;
    }
    s->total_size = s->num_samples * w;
}

void dsampler_set_epoch(DistributedSampler *s, long epoch) { s->epoch = epoch; }

long dsampler_indices(const DistributedSampler *s, long *out, long *scratch) {
    // torch raises ValueError for these; we return -1.
    if (s->world_size < 1 || s->rank < 0 || s->rank >= s->world_size || s->n < 0) return -1;
    long n = s->n, total = s->total_size, w = s->world_size;
    if (s->shuffle) {
        if (torch_randperm(n, s->seed + (uint64_t)s->epoch, scratch) != 0) return -1;
    } else {
        for (long i = 0; i < n; i++) scratch[i] = i;
    }
    // Not drop_last: append indices[:padding], repeated cyclically when padding > N
    // ((indices * ceil(padding / N))[:padding] is element j -> indices[j % N]).
    // drop_last: total_size <= N, so indices[:total_size] needs no work.
    if (!s->drop_last && n > 0)
        for (long k = n; k < total; k++) scratch[k] = scratch[(k - n) % n];
    for (long j = 0; j < s->num_samples; j++) out[j] = scratch[s->rank + j * w];
    return s->num_samples;
}

long dsampler_indices_from(const DistributedSampler *s, long start, long *out, long *scratch) {
    if (s->world_size < 1 || s->rank < 0 || s->rank >= s->world_size || s->n < 0 || start < 0) return -1;
    const long n = s->n, w = s->world_size;
    if (start >= n) return 0;
    if (s->shuffle) {
        if (torch_randperm(n, s->seed + (uint64_t)s->epoch, scratch) != 0) return -1;
    } else {
        for (long i = 0; i < n; i++) scratch[i] = i;
    }
    const long m = n - start;   // samples left in the permutation
    const long count = s->drop_last ? m / w : (m + w - 1) / w;
    for (long j = 0; j < count; j++) {
        const long k = s->rank + j * w;   // position in the rest, padded past m by wrapping
        out[j] = k < m ? scratch[start + k] : scratch[(k - m) % n];
    }
    return count;
}
