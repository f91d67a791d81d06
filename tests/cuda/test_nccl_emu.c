// tests/cuda/test_nccl_emu.c — the "nccl" gradient communicator (kernels/cuda/comm_nccl.cu) on
// the emulated CUDA backend, with 2 or 3 MPI ranks (processes: mpirun) whose emulated NCCL
// all-reduces over MPI (kernels/cuda/emu/nccl_emu.h). Run by tests/cuda/test_nccl_emu.sh:
//
//   mpirun -np N test_nccl_emu            the checks below; exit 0 when all pass on every rank
//   mpirun -np N test_nccl_emu --skip R   the watchdog: rank R skips a gradient all-reduce
//                                         (and then sleeps); with timeout_s = 3 the others
//                                         must abort the job, naming rank and bucket
//   ... --skip R --kind rs|ag|ags         the same for a ZeRO reduce-scatter (uneven counts:
//                                         the group of ncclReduce) or parameter all-gather
//                                         (blocking, or started: allgather_start)
//
// The host communicator comes from comm_mpi_open (MINGPT_MPI_LIB names build/libmingpt_mpi.so)
// and the backend from backend_select("cuda") (MINGPT_CUDA_LIB names the emulated
// build/emu/libmingpt_cuda.so), as ./mingpt gets them.
//
// Checks (a failed one prints "[rank r] FAIL ..." and aborts the whole job with code 1):
//   * the communicator: name "nccl", rank, size and local rank of the host communicator;
//   * 3 steps of 6 buckets of 1 .. 65539 floats, started back to back from the end of one
//     buffer towards its start (as the backward pass finishes them), each bucket produced by a
//     kernel on the compute stream just before its start, a matmul between buckets; after
//     allreduce_wait a kernel reads the reduced buffer: every element equals, exactly, the sum
//     over ranks computed on the host (the values are multiples of 1/4 below 2^10: fp32 sums
//     of up to 3 of them are exact, in any order); the values differ per rank and step;
//   * CommStats: n_buckets 6, n_started_early 4 (backward_done after the 4th), bytes, and
//     finite t_busy, t_exposed >= 0;
//   * allreduce_host (sum, max, min) and bcast_host (from the last rank) through the nccl comm;
//   * an all-reduce of host memory is refused with an error naming the rank and ncclAllReduce,
//     and the communicator keeps working afterwards;
//   * ZeRO's reduce-scatter (2 steps of 3 buckets started back to back: uneven counts with
//     zeros, equal counts, one rank with a single float): on rank r its part of each bucket holds
//     exactly the sum over ranks, and the rest of the bucket still holds r's own values (NCCL's
//     reduce / reduce-scatter: no all-reduce, which would have summed every part); CommStats
//     counts 3 buckets of their bytes;
//   * ZeRO's all-gather (uneven shards with an empty one, and equal adjacent shards): every
//     rank ends with every owner's values bit for bit (-0.0 included, which the all-reduce it
//     replaces turned into +0.0), written by a kernel just before the call (the gather waits for
//     the compute stream); the floats around the shards are untouched; not counted as a bucket;
//   * ZeRO's all-gather started per bucket (allgather_start) and waited for by the compute stream
//     (allgather_wait): a kernel after the wait sees the gathered values, an all-reduce started
//     behind the gathers is exact; n_gathers, t_gather, t_gather_exposed (test_allgather_started);
//   * allreduce_wait_some(left): a kernel after it reads the oldest buckets' reduced parts;
//   * a reduce-scatter of host memory is refused with an error naming the rank and ncclReduce.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dist/comm.h"
#include "kernels/backend.h"

static Comm *g_host;
static int g_checks;

#define CHECK(cond, ...) do { \
    g_checks++; \
    if (!(cond)) { \
        char m_[768]; \
        int k_ = snprintf(m_, sizeof m_, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
        snprintf(m_ + k_, sizeof m_ - (size_t)k_, __VA_ARGS__); \
        g_host->abort(g_host, 1, m_); \
    } \
} while (0)

// Rank r's value of element i at step s: a multiple of 1/4 in [-256, 256), different per rank.
static float value(int r, int s, size_t i) {
    const unsigned h = (unsigned)(i * 2654435761u) ^ (unsigned)(r * 40503 + s * 977);
    return (float)((int)(h % 2048u) - 1024) * 0.25f;
}

#define NB 6
static const size_t SIZES[NB] = { 1, 3, 1000, 4097, 65539, 17 };

static void test_buckets(Backend *be, Comm *g) {
    const int W = g->world_size, r = g->rank;
    size_t total = 0, off[NB];
    for (int k = 0; k < NB; k++) { off[k] = total; total += SIZES[k]; }
    float *grad = be->alloc(be, total * sizeof(float));
    // compute between the buckets: a matmul on buffers of their own
    const int MN = 16, MC = 32, MO = 24;
    float *mx = be->alloc(be, (size_t)MN * MC * 4), *mw = be->alloc(be, (size_t)MO * MC * 4);
    float *mo = be->alloc(be, (size_t)MN * MO * 4);
    float *h = malloc(total * sizeof(float)), *got = malloc(total * sizeof(float));
    CHECK(grad && mx && mw && mo && h && got, "out of memory");
    for (int s = 0; s < 3; s++) {
        comm_stats_reset(g);
        for (size_t i = 0; i < total; i++) h[i] = value(r, s, i) * 0.5f;
        be->upload(be, grad, h, total * sizeof(float));
        // the backward pass finishes the buffer from its end: bucket NB-1 first
        int started = 0;
        for (int k = NB - 1; k >= 0; k--) {
            be->scale(be, grad + off[k], SIZES[k], 2.0f);   // the kernel that "produces" bucket k
            be->matmul_forward(be, mo, mx, mw, NULL, MN, MC, MO);
            if (started == 4) g->backward_done(g);
            CHECK(g->allreduce_start(g, grad + off[k], SIZES[k]) == 0, "step %d bucket %d: %s", s, k, g->err);
            started++;
        }
        CHECK(g->allreduce_wait(g) == 0, "step %d: %s", s, g->err);
        be->scale(be, grad, total, 4.0f);   // a kernel after the fence reads the reduced values
        be->download(be, got, grad, total * sizeof(float));
        size_t bad = 0, first = 0;
        float first_want = 0.0f;
        for (size_t i = 0; i < total; i++) {
            float want = 0.0f;
            for (int q = 0; q < W; q++) want += value(q, s, i);
            want *= 4.0f;
            if (memcmp(&got[i], &want, sizeof want) != 0 && bad++ == 0) { first = i; first_want = want; }
        }
        CHECK(bad == 0, "step %d: %zu of %zu reduced elements wrong, first %zu: got %.9g want %.9g", s, bad, total, first,
              got[first], first_want);
        CHECK(g->stats.n_buckets == NB, "step %d: n_buckets %d", s, g->stats.n_buckets);
        CHECK(g->stats.n_started_early == 4, "step %d: n_started_early %d", s, g->stats.n_started_early);
        CHECK(g->stats.bytes == (double)total * sizeof(float), "step %d: bytes %.0f", s, g->stats.bytes);
        CHECK(isfinite(g->stats.t_busy) && g->stats.t_busy >= 0 && isfinite(g->stats.t_exposed) && g->stats.t_exposed >= 0,
              "step %d: t_busy %g t_exposed %g", s, g->stats.t_busy, g->stats.t_exposed);
    }
    be->free(be, grad); be->free(be, mx); be->free(be, mw); be->free(be, mo);
    free(h); free(got);
}

static void test_host_collectives(Comm *g) {
    const int W = g->world_size, r = g->rank;
    const CommOp ops[3] = { COMM_SUM, COMM_MAX, COMM_MIN };
    for (int o = 0; o < 3; o++) {
        double x[3] = { r + 1.0, -0.5 * (r + 1), r == 0 ? 7.0 : 1.0 }, want[3];
        for (int j = 0; j < 3; j++) {
            double acc = 0;
            for (int q = 0; q < W; q++) {
                const double v = j == 0 ? q + 1.0 : j == 1 ? -0.5 * (q + 1) : q == 0 ? 7.0 : 1.0;
                acc = q == 0 ? v : o == 0 ? acc + v : o == 1 ? fmax(acc, v) : fmin(acc, v);
            }
            want[j] = acc;
        }
        CHECK(g->allreduce_host(g, x, 3, ops[o]) == 0, "allreduce_host op %d: %s", o, g->err);
        CHECK(x[0] == want[0] && x[1] == want[1] && x[2] == want[2], "allreduce_host op %d: got %g %g %g want %g %g %g",
              o, x[0], x[1], x[2], want[0], want[1], want[2]);
    }
    unsigned char buf[37];
    for (int i = 0; i < 37; i++) buf[i] = (unsigned char)(r == W - 1 ? 3 * i + 1 : 0xee);
    CHECK(g->bcast_host(g, buf, sizeof buf, W - 1) == 0, "bcast_host: %s", g->err);
    for (int i = 0; i < 37; i++) CHECK(buf[i] == (unsigned char)(3 * i + 1), "bcast_host byte %d = %d", i, buf[i]);
}

static void test_error_message(Backend *be, Comm *g) {
    // host memory is no device buffer: every rank is refused before any communication
    float host_buf[10] = { 0 };
    CHECK(g->allreduce_start(g, host_buf, 10) != 0, "an all-reduce of host memory was accepted");
    char want_rank[32];
    snprintf(want_rank, sizeof want_rank, "rank %d", g->rank);
    CHECK(strstr(g->err, want_rank) && strstr(g->err, "ncclAllReduce"), "error message names no rank/collective: %s", g->err);
    // and the communicator still works
    float *d = be->alloc(be, 5 * sizeof(float));
    float one[5] = { 1, 1, 1, 1, 1 }, got[5];
    be->upload(be, d, one, sizeof one);
    comm_stats_reset(g);
    CHECK(g->allreduce_start(g, d, 5) == 0 && g->allreduce_wait(g) == 0, "after a refused all-reduce: %s", g->err);
    be->download(be, got, d, sizeof got);
    for (int i = 0; i < 5; i++) CHECK(got[i] == (float)g->world_size, "after a refused all-reduce: %g", got[i]);
    CHECK(g->stats.n_buckets == 1, "the refused all-reduce was counted");
    be->free(be, d);
}

// The sum over ranks of value(q, s, i), exact (see above).
static float value_sum(int W, int s, size_t i) {
    float want = 0.0f;
    for (int q = 0; q < W; q++) want += value(q, s, i);
    return want;
}

static void test_reduce_scatter(Backend *be, Comm *g) {
    const int W = g->world_size, r = g->rank;
    enum { NRS = 3 };
    size_t counts[NRS][8], first[NRS], n[NRS], total = 0;
    for (int q = 0; q < W; q++) {
        counts[0][q] = q % 2 == 0 ? 3 + 5 * (size_t)q : 0;   // uneven, some ranks get nothing
        counts[1][q] = 4097;                                  // equal: ncclReduceScatter
        counts[2][q] = q == W - 1 ? 1 : 1000 + (size_t)q;
    }
    for (int b = 0; b < NRS; b++) {
        n[b] = 0;
        for (int q = 0; q < W; q++) n[b] += counts[b][q];
        first[b] = total;
        total += n[b];
    }
    float *buf = be->alloc(be, total * sizeof(float));
    float *h = malloc(total * sizeof(float)), *got = malloc(total * sizeof(float));
    CHECK(buf && h && got, "out of memory");
    for (int s = 0; s < 2; s++) {
        comm_stats_reset(g);
        for (size_t i = 0; i < total; i++) h[i] = value(r, s, i) * 0.5f;
        be->upload(be, buf, h, total * sizeof(float));
        for (int b = NRS - 1; b >= 0; b--) {
            be->scale(be, buf + first[b], n[b], 2.0f);   // the kernel that "produces" the bucket
            CHECK(g->reduce_scatter_start(g, buf + first[b], counts[b]) == 0, "step %d bucket %d: %s", s, b, g->err);
        }
        CHECK(g->allreduce_wait(g) == 0, "step %d: %s", s, g->err);
        be->download(be, got, buf, total * sizeof(float));
        for (int b = 0; b < NRS; b++) {
            size_t lo = first[b];
            for (int q = 0; q < r; q++) lo += counts[b][q];
            const size_t hi = lo + counts[b][r];
            size_t bad = 0, at = 0;
            for (size_t i = first[b]; i < first[b] + n[b]; i++) {
                const float want = i >= lo && i < hi ? value_sum(W, s, i) : value(r, s, i);
                if (memcmp(&got[i], &want, sizeof want) != 0 && bad++ == 0) at = i;
            }
            CHECK(bad == 0, "step %d bucket %d (this rank's part [%zu, %zu)): %zu of %zu floats wrong, first at %zu: got %.9g, "
                  "sum %.9g, own %.9g", s, b, lo, hi, bad, n[b], at, got[at], value_sum(W, s, at), value(r, s, at));
        }
        CHECK(g->stats.n_buckets == NRS, "step %d: n_buckets %d", s, g->stats.n_buckets);
        CHECK(g->stats.bytes == (double)total * sizeof(float), "step %d: bytes %.0f", s, g->stats.bytes);
    }
    be->free(be, buf);
    free(h); free(got);
}

static void test_allgather(Backend *be, Comm *g) {
    const int W = g->world_size, r = g->rank;
    const size_t PAD = 7;   // floats before and after the shards, never touched
    for (int layout = 0; layout < 2; layout++) {
        size_t counts[8], displs[8], n = 0;
        for (int q = 0; q < W; q++) {
            counts[q] = layout == 0 ? (q == 1 ? 0 : 16 * (size_t)(q + 1) + (q == W - 1 ? 5 : 0)) : 48;
            displs[q] = PAD + n;
            n += counts[q];
        }
        const size_t total = n + 2 * PAD;
        float *buf = be->alloc(be, total * sizeof(float));
        float *h = malloc(total * sizeof(float)), *got = malloc(total * sizeof(float));
        CHECK(buf && h && got, "out of memory");
        // own shard: value / 2 (a kernel doubles it), with a -0.0 in it; the rest: this rank's junk
        for (size_t i = 0; i < total; i++) h[i] = 1000.0f + 10 * r + (float)i;
        for (size_t i = displs[r]; i < displs[r] + counts[r]; i++) h[i] = i == displs[r] ? -0.0f : value(r, 5, i) * 0.5f;
        be->upload(be, buf, h, total * sizeof(float));
        comm_stats_reset(g);
        if (counts[r]) be->scale(be, buf + displs[r], counts[r], 2.0f);
        CHECK(g->allgather(g, buf, counts, displs) == 0, "layout %d: %s", layout, g->err);
        be->download(be, got, buf, total * sizeof(float));
        size_t bad = 0, at = 0;
        float want_at = 0;
        for (size_t i = 0; i < total; i++) {
            float want = 1000.0f + 10 * r + (float)i;   // outside the shards
            for (int q = 0; q < W; q++)
                if (i >= displs[q] && i < displs[q] + counts[q]) want = i == displs[q] ? -0.0f : value(q, 5, i);
            if (memcmp(&got[i], &want, sizeof want) != 0 && bad++ == 0) { at = i; want_at = want; }
        }
        CHECK(bad == 0, "all-gather layout %d: %zu of %zu floats wrong, first at %zu: got %.9g (sign %d) want %.9g", layout,
              bad, total, at, got[at], signbit(got[at]) != 0, want_at);
        CHECK(g->stats.n_buckets == 0 && g->stats.bytes == 0, "all-gather counted as a bucket: %d, %.0f bytes",
              g->stats.n_buckets, g->stats.bytes);
        CHECK(isfinite(g->stats.t_gather) && g->stats.t_gather >= 0, "t_gather %g", g->stats.t_gather);
        be->free(be, buf);
        free(h); free(got);
    }
}

// ZeRO's all-gather started per bucket (allgather_start, the host not blocking) and waited for
// by the compute stream (allgather_wait): 2 steps of NG buckets of uneven shards, each owner's
// shard written by a kernel just before the starts (the gathers follow the compute stream);
// after allgather_wait(k) a kernel triples bucket k-1 (it must see the gathered values); then,
// as the next backward, an all-reduce of another buffer is started behind the gathers (one comm
// stream) and allreduce_wait'ed: every gathered float is exactly 3 x the owner's value, the
// all-reduce exactly the sum. CommStats: n_gathers counts the starts, t_gather and
// t_gather_exposed finite, >= 0, no bucket counted for a gather; allgather_wait beyond the
// number started is an error naming it.
#define NG 3
static void test_allgather_started(Backend *be, Comm *g) {
    const int W = g->world_size, r = g->rank;
    const size_t n = 29;   // per bucket: shards of about n / W, the last rank's the rest
    size_t counts[8], displs[8];
    for (int q = 0, off = 0; q < W; q++) {
        counts[q] = q == W - 1 ? n - (size_t)off : n / (size_t)W;
        displs[q] = (size_t)off;
        off += (int)counts[q];
    }
    float *buf = be->alloc(be, NG * n * sizeof(float)), *ar = be->alloc(be, 1000 * sizeof(float));
    float *h = malloc(NG * n * sizeof(float)), *got = malloc(NG * n * sizeof(float));
    float *ha = malloc(1000 * sizeof(float));
    CHECK(buf && ar && h && got && ha, "out of memory");
    long started = 0;   // (the blocking all-gathers before are not counted)
    for (int step = 0; step < 2; step++) {
        comm_stats_reset(g);
        for (size_t i = 0; i < NG * n; i++) h[i] = 5000.0f + 100 * r + (float)i;   // junk outside r's shards
        for (int b = 0; b < NG; b++)
            for (size_t i = displs[r]; i < displs[r] + counts[r]; i++) h[b * n + i] = value(r, 10 + step, b * n + i) * 0.5f;
        be->upload(be, buf, h, NG * n * sizeof(float));
        for (int b = 0; b < NG; b++) be->scale(be, buf + b * n + displs[r], counts[r], 2.0f);
        long no[NG];
        for (int b = NG - 1; b >= 0; b--) {   // the trainer's order: from the end of the buffer
            CHECK(g->allgather_start(g, buf + b * n, counts, displs) == 0, "step %d bucket %d: %s", step, b, g->err);
            no[b] = ++started;
        }
        // the next forward: bucket 0 first (started last), each waited for, then read by a kernel
        for (int b = 0; b < NG; b++) {
            CHECK(g->allgather_wait(g, no[b]) == 0, "allgather_wait(%ld): %s", no[b], g->err);
            be->scale(be, buf + b * n, n, 3.0f);
        }
        CHECK(g->allgather_wait(g, started) == 0, "allgather_wait(%ld) again: %s", started, g->err);
        // the next backward's collective, behind the gathers on the comm stream
        for (int i = 0; i < 1000; i++) ha[i] = value(r, 20 + step, (size_t)i);
        be->upload(be, ar, ha, 1000 * sizeof(float));
        CHECK(g->allreduce_start(g, ar, 1000) == 0, "%s", g->err);
        g->backward_done(g);
        CHECK(g->allreduce_wait(g) == 0, "%s", g->err);
        be->download(be, got, buf, NG * n * sizeof(float));
        size_t bad = 0, at = 0;
        for (int b = 0; b < NG; b++)
            for (int q = 0; q < W; q++)
                for (size_t i = displs[q]; i < displs[q] + counts[q]; i++) {
                    const float want = 3.0f * value(q, 10 + step, b * n + i);
                    if (memcmp(&got[b * n + i], &want, sizeof want) != 0 && bad++ == 0) at = b * n + i;
                }
        CHECK(bad == 0, "step %d: %zu of %zu gathered floats wrong (a kernel after allgather_wait did not see the "
              "gathered values), first at %zu: %.9g", step, bad, NG * n, at, got[at]);
        be->download(be, ha, ar, 1000 * sizeof(float));
        for (int i = 0; i < 1000; i++) {
            float want = 0;
            for (int q = 0; q < W; q++) want += value(q, 20 + step, (size_t)i);
            if (ha[i] != want && bad++ == 0) at = (size_t)i;
        }
        CHECK(bad == 0, "step %d: the all-reduce behind the gathers: %zu floats wrong, first at %zu", step, bad, at);
        CHECK(g->stats.n_gathers == NG && g->stats.n_buckets == 1, "n_gathers %d (want %d), n_buckets %d (want 1)",
              g->stats.n_gathers, NG, g->stats.n_buckets);
        CHECK(isfinite(g->stats.t_gather) && g->stats.t_gather >= 0 && isfinite(g->stats.t_gather_exposed) &&
              g->stats.t_gather_exposed >= 0, "t_gather %g, t_gather_exposed %g", g->stats.t_gather,
              g->stats.t_gather_exposed);
    }
    CHECK(g->allgather_wait(g, started + 1) != 0 && strstr(g->err, "all-gather"),
          "allgather_wait beyond the gathers started was accepted (%s)", g->err);
    be->free(be, buf);
    be->free(be, ar);
    free(h); free(got); free(ha);
}

// ZeRO stage 2's ring: allreduce_wait_some(left) orders the compute stream after the oldest
// buckets: 4 reduce-scatters of 64 floats (equal counts) started back to back; after
// allreduce_wait_some(1) a kernel doubles this rank's part of bucket 0, 1 and 2 (the ring's
// harvest), after allreduce_wait_some(0) of bucket 3; each part is exactly 2 x the sum.
static void test_wait_some(Backend *be, Comm *g) {
    const int W = g->world_size, r = g->rank;
    const size_t per = 16, n = per * (size_t)W;
    size_t counts[8];
    for (int q = 0; q < W; q++) counts[q] = per;
    float *buf = be->alloc(be, 4 * n * sizeof(float)), *h = malloc(4 * n * sizeof(float));
    CHECK(buf && h, "out of memory");
    for (size_t i = 0; i < 4 * n; i++) h[i] = value(r, 30, i);
    be->upload(be, buf, h, 4 * n * sizeof(float));
    for (int b = 0; b < 4; b++) CHECK(g->reduce_scatter_start(g, buf + b * n, counts) == 0, "%s", g->err);
    CHECK(g->allreduce_wait_some(g, 1) == 0, "%s", g->err);
    for (int b = 0; b < 3; b++) be->scale(be, buf + b * n + (size_t)r * per, per, 2.0f);
    CHECK(g->allreduce_wait_some(g, 0) == 0, "%s", g->err);
    be->scale(be, buf + 3 * n + (size_t)r * per, per, 2.0f);
    g->backward_done(g);
    CHECK(g->allreduce_wait(g) == 0, "%s", g->err);
    be->download(be, h, buf, 4 * n * sizeof(float));
    for (int b = 0; b < 4; b++)
        for (size_t i = (size_t)r * per; i < (size_t)(r + 1) * per; i++) {
            float want = 0;
            for (int q = 0; q < W; q++) want += value(q, 30, b * n + i);
            want *= 2.0f;
            CHECK(h[b * n + i] == want, "bucket %d float %zu: %.9g, want %.9g", b, i, h[b * n + i], want);
        }
    be->free(be, buf);
    free(h);
}

static void test_reduce_scatter_error(Comm *g) {
    float host_buf[16] = { 0 };
    size_t counts[8];
    for (int q = 0; q < g->world_size; q++) counts[q] = q == 0 ? 3 : 1;   // uneven: the group of ncclReduce
    CHECK(g->reduce_scatter_start(g, host_buf, counts) != 0, "a reduce-scatter of host memory was accepted");
    char want_rank[32];
    snprintf(want_rank, sizeof want_rank, "rank %d", g->rank);
    CHECK(strstr(g->err, want_rank) && strstr(g->err, "ncclReduce") && strstr(g->err, "reduce-scatter"),
          "error message names no rank/collective: %s", g->err);
    CHECK(g->allreduce_wait(g) == 0, "after a refused reduce-scatter: %s", g->err);
}

// Rank `skip` never starts the all-reduce the others start: their watchdog must take the job
// down within timeout_s (the shell script measures it and checks the message).
// kind: "ar" all-reduce, "rs" reduce-scatter, "ag" all-gather (1000 floats, uneven parts).
static void run_skip(Backend *be, Comm *g, int skip, const char *kind) {
    float *d = be->alloc(be, 1000 * sizeof(float));
    size_t counts[8], displs[8], off = 0;
    CHECK(g->world_size <= 8, "at most 8 ranks");
    for (int q = 0; q < g->world_size; q++) {
        counts[q] = q == g->world_size - 1 ? 1000 - off : 1000 / (size_t)g->world_size + 1;
        displs[q] = off;
        off += counts[q];
    }
    g->timeout_s = 3;
    if (g->rank == skip) {
        fprintf(stderr, "[rank %d] test_nccl_emu: skipping the %s\n", g->rank, kind);
        sleep(100);   // stands for a rank that hangs; MPI_Abort from a peer ends it
        CHECK(0, "rank %d was not taken down", g->rank);
    }
    if (!strcmp(kind, "ags")) {   // started; the compute stream waits, the host at allreduce_wait
        CHECK(g->allgather_start(g, d, counts, displs) == 0, "%s", g->err);
        CHECK(g->allgather_wait(g, 1) == 0, "%s", g->err);
        g->allreduce_wait(g);   // blocks: the peer never joins
        CHECK(0, "allreduce_wait returned although rank %d skipped the started all-gather", skip);
    }
    if (!strcmp(kind, "ag")) {
        g->allgather(g, d, counts, displs);   // blocks: the peer never joins
        CHECK(0, "allgather returned although rank %d skipped it", skip);
    }
    CHECK((!strcmp(kind, "rs") ? g->reduce_scatter_start(g, d, counts) : g->allreduce_start(g, d, 1000)) == 0, "%s", g->err);
    g->backward_done(g);
    g->allreduce_wait(g);   // blocks: the peer never joins
    CHECK(0, "allreduce_wait returned although rank %d skipped the %s", skip, kind);
}

int main(int argc, char **argv) {
    int skip = -1;
    const char *kind = "ar";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--skip") && i + 1 < argc) skip = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--kind") && i + 1 < argc && (!strcmp(argv[i + 1], "ar") || !strcmp(argv[i + 1], "rs") ||
                                                                !strcmp(argv[i + 1], "ag") || !strcmp(argv[i + 1], "ags")))
            kind = argv[++i];
        else { fprintf(stderr, "usage: mpirun -np N %s [--skip RANK [--kind ar|rs|ag|ags]]\n", argv[0]); return 2; }
    }
    char err[1024] = "";
    if (comm_launched(err, sizeof err) != 1) {
        fprintf(stderr, "test_nccl_emu: start it with mpirun (%s)\n", err);
        return 2;
    }
    g_host = comm_mpi_open(&argc, &argv, err, sizeof err);
    if (!g_host) { fprintf(stderr, "test_nccl_emu: comm_mpi_open: %s\n", err); return 1; }
    Comm *host = g_host;
    Backend *be;
    CHECK(backend_select("cuda", host->local_rank, DTYPE_FP32, &be, err, sizeof err) == BACKEND_OK,
          "backend_select(cuda): %s", err);
    CHECK(!strcmp(be->name, "cuda") && be->grad_comm_create, "backend %s has no grad_comm_create", be->name);
    Comm *g = be->grad_comm_create(be, host, err, sizeof err);
    CHECK(g != NULL, "grad_comm_create: %s", err);
    CHECK(!strcmp(g->name, "nccl") && g->rank == host->rank && g->world_size == host->world_size &&
          g->local_rank == host->local_rank && g->local_size == host->local_size,
          "nccl comm %s rank %d/%d local %d/%d vs host rank %d/%d local %d/%d", g->name, g->rank, g->world_size,
          g->local_rank, g->local_size, host->rank, host->world_size, host->local_rank, host->local_size);
    if (skip >= 0) run_skip(be, g, skip, kind);

    g->timeout_s = 60;   // the watchdog polls throughout, and must not fire
    test_buckets(be, g);
    test_host_collectives(g);
    test_error_message(be, g);
    CHECK(g->world_size <= 8, "at most 8 ranks (%d)", g->world_size);
    test_reduce_scatter(be, g);
    test_allgather(be, g);
    CHECK(g->allgather_start && g->allgather_wait && g->allreduce_wait_some, "the nccl comm lacks allgather_start / allgather_wait / allreduce_wait_some");
    test_allgather_started(be, g);
    test_wait_some(be, g);
    test_reduce_scatter_error(g);

    printf("[rank %d] test_nccl_emu: %d ranks, %d checks passed\n", g->rank, g->world_size, g_checks);
    fflush(stdout);
    g->destroy(g);     // before the host communicator (MPI_Finalize)
    be->destroy(be);
    host->destroy(host);
    return 0;
}
