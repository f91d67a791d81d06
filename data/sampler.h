// data/sampler.h — PyTorch-exact random permutations and DistributedSampler.
//
// torch.randperm(n, generator=g) on the CPU, for n < 2^32/20 (reference: PyTorch's
// aten randperm_cpu): r = [0..n-1]; for i in 0..n-2: z = mt19937() % (n-i); swap r[i], r[i+z].
// The generator is the standard MT19937 seeded by init_genrand with the low 32 bits
// of the seed. DistributedSampler (torch/utils/data/distributed.py) shuffles with
// seed + epoch, pads to a multiple of world_size by wrapping around the permutation,
// and gives rank r the indices r, r+W, r+2W, ...
#ifndef MINGPT_SAMPLER_H
#define MINGPT_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

typedef struct { uint32_t mt[624]; int mti; } MT19937;

void mt19937_seed(MT19937 *g, uint32_t seed);
uint32_t mt19937_next(MT19937 *g);

// out (n,) = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).
// n must be < 2^32/20 (214,748,364); larger n returns -1 (not needed for char corpora).
int torch_randperm(long n, uint64_t seed, long *out);

typedef struct {
    long n;              // dataset length N
    int world_size;      // W (num_replicas)
    int rank;            // r
    bool shuffle;        // default true
    bool drop_last;      // default false
    uint64_t seed;       // default 0
    long epoch;          // set by dsampler_set_epoch
    long num_samples;    // per rank: ceil(N/W), or ceil((N-W)/W) when drop_last and N%W != 0
    long total_size;     // num_samples * W
} DistributedSampler;

void dsampler_init(DistributedSampler *s, long n, int world_size, int rank, bool shuffle,
                   uint64_t seed, bool drop_last);
void dsampler_set_epoch(DistributedSampler *s, long epoch);
// out (num_samples,) = this rank's indices for the current epoch, in order.
// scratch must hold max(n, total_size) longs. Returns num_samples, or -1 when shuffling and n is
// beyond torch_randperm's range (its -1).
long dsampler_indices(const DistributedSampler *s, long *out, long *scratch);

// The rest of the current epoch from global position `start` (samples already consumed by a
// run with any world size): P[start..n) of the epoch's permutation P, padded as torch pads
// (wrapping from P's start) to a multiple of world_size (or cut to one, with drop_last), and
// interleaved: out[j] = rest[rank + j * world_size]. start = 0 gives dsampler_indices exactly,
// and with the same world size the result is always the tail of dsampler_indices' list, so
// resuming with another number of ranks continues the same permutation from the same sample.
// scratch must hold max(n, total_size) longs; out room for num_samples. Returns the count
// (0 when start >= n), or -1 as dsampler_indices.
long dsampler_indices_from(const DistributedSampler *s, long start, long *out, long *scratch);

#endif
