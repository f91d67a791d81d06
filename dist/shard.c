// dist/shard.c — see shard.h.
#include "dist/shard.h"

ShardPlan shard_plan(size_t total, int world) {
    if (world < 1) world = 1;
    size_t s = (total + (size_t)world - 1) / (size_t)world;
    s = (s + SHARD_ALIGN_FLOATS - 1) / SHARD_ALIGN_FLOATS * SHARD_ALIGN_FLOATS;
    return (ShardPlan){ .total = total, .shard = s, .world = world };
}

static size_t clamp_total(const ShardPlan *p, size_t x) { return x < p->total ? x : p->total; }

size_t shard_lo(const ShardPlan *p, int q) { return clamp_total(p, (size_t)q * p->shard); }
size_t shard_hi(const ShardPlan *p, int q) { return clamp_total(p, ((size_t)q + 1) * p->shard); }
size_t shard_count(const ShardPlan *p, int q) { return shard_hi(p, q) - shard_lo(p, q); }

void shard_split_range(const ShardPlan *p, size_t first, size_t n, size_t *counts, int me, size_t *me_off) {
    const size_t end = first + n;
    if (me_off) *me_off = 0;
    for (int q = 0; q < p->world; q++) {
        const size_t lo = shard_lo(p, q) > first ? shard_lo(p, q) : first;
        const size_t hi = shard_hi(p, q) < end ? shard_hi(p, q) : end;
        counts[q] = hi > lo ? hi - lo : 0;
        if (q == me && counts[q] > 0 && me_off) *me_off = lo - shard_lo(p, q);
    }
}
