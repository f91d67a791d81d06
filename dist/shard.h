// dist/shard.h — how sharded data parallelism (ZeRO stages 1 and 2) cuts the flat parameter
// buffer of `total` floats over `world` ranks.
//
// Every shard has the same length `shard` floats: ceil(total / world) rounded up to a multiple
// of SHARD_ALIGN_FLOATS (16 floats, 64 bytes), so that shard q starts at q * shard, on a 64-byte
// boundary of a 64-byte aligned buffer. The shards together span world * shard >= total floats;
// what lies past `total` is padding: no buffer holds it except each rank's own shard-length
// arrays (AdamW m and v), where it stays zero and is never handed to AdamW, the norm or a
// collective. Rank q's real part is [lo(q), hi(q)) with
// hi(q) - lo(q) = shard_count(q) <= shard (0 for ranks wholly in the padding: a tensor count
// smaller than the world).
#ifndef MINGPT_SHARD_H
#define MINGPT_SHARD_H

#include <stddef.h>

#define SHARD_ALIGN_FLOATS 16

typedef struct {
    size_t total;   // floats in the flat buffer
    size_t shard;   // floats per shard, padding included (a multiple of SHARD_ALIGN_FLOATS)
    int world;      // shards (ranks)
} ShardPlan;

// The plan for total floats over world >= 1 ranks. A total of 0 gives shard 0.
ShardPlan shard_plan(size_t total, int world);

// First float of shard q: min(q * shard, total).
size_t shard_lo(const ShardPlan *p, int q);
// One past its last real float: min((q + 1) * shard, total).
size_t shard_hi(const ShardPlan *p, int q);
// Its real floats: shard_hi - shard_lo.
size_t shard_count(const ShardPlan *p, int q);

// The part of the range [first, first + n) of the flat buffer that each shard holds:
// counts[q] floats for every q in [0, world) (in rank order they tile the range exactly).
// When me is in [0, world), *me_off (if not NULL) gets the offset inside shard me where its
// part starts (0 when counts[me] is 0).
void shard_split_range(const ShardPlan *p, size_t first, size_t n, size_t *counts, int me, size_t *me_off);

#endif
