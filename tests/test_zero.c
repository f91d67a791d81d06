// tests/test_zero.c — sharded data parallelism (ZeRO, trainer_config.zero_stage) without MPI:
// the shard arithmetic of dist/shard.h (sizes not divisible by the rank count, more ranks than
// some tensors have elements, 64-byte aligned shard starts, ranges tiling exactly), AdamW over
// one shard at a time equal bit for bit to AdamW over the whole buffer with the padding of the
// shard-length moments never touched, the loss scaler's unscale/clip fed the sum of squares of
// the shards giving the norm and the gradients of the whole-buffer call, and the snapshot
// writer taking the AdamW moments piece by piece, and stage 2's ring of bucket gradients.
// tests/test_zero.sh runs the real thing under mpirun.
#include "tests/test_util.h"

#include <unistd.h>

#include "checkpoint/snapshot.h"
#include "dist/comm.h"
#include "dist/shard.h"
#include "trainer/adamw.h"
#include "trainer/buckets.h"
#include "trainer/loss_scaler.h"

static Backend *cpu(void) {
    static Backend *be;
    if (!be) be = backend_cpu_create(DTYPE_FP32);
    return be;
}

static void test_shard_plan_sizes(void **state) {
    ShardPlan p = shard_plan(100, 3);   // ceil(100/3) = 34 -> 48 (a multiple of 16 floats)
    assert_int_equal(p.shard, 48);
    assert_int_equal(shard_lo(&p, 0), 0);
    assert_int_equal(shard_hi(&p, 0), 48);
    assert_int_equal(shard_lo(&p, 1), 48);
    assert_int_equal(shard_count(&p, 1), 48);
    assert_int_equal(shard_lo(&p, 2), 96);
    assert_int_equal(shard_count(&p, 2), 4);   // the last shard is mostly padding
    // more ranks than elements: the first shard holds all, the others nothing
    p = shard_plan(10, 4);
    assert_int_equal(p.shard, 16);
    assert_int_equal(shard_count(&p, 0), 10);
    for (int q = 1; q < 4; q++) {
        assert_int_equal(shard_count(&p, q), 0);
        assert_int_equal(shard_lo(&p, q), 10);
    }
    p = shard_plan(0, 2);
    assert_int_equal(p.shard, 0);
    assert_int_equal(shard_count(&p, 1), 0);
    p = shard_plan(64, 1);
    assert_int_equal(p.shard, 64);
    assert_int_equal(shard_count(&p, 0), 64);
}

// For many sizes and rank counts: equal, 16-float multiple shards covering the buffer with less
// than one shard + 16 floats of padding; every range splits into per-shard counts that tile it.
static void test_shard_plan_properties(void **state) {
    static const size_t totals[] = {1, 15, 16, 17, 100, 1000, 4099, 109568, 10800001};
    for (size_t ti = 0; ti < sizeof totals / sizeof totals[0]; ti++)
        for (int W = 1; W <= 9; W++) {
            const size_t total = totals[ti];
            const ShardPlan p = shard_plan(total, W);
            assert_int_equal(p.shard % SHARD_ALIGN_FLOATS, 0);
            assert_true(p.shard * (size_t)W >= total);
            assert_true(p.shard * (size_t)W < total + (size_t)W * SHARD_ALIGN_FLOATS + p.shard);
            size_t sum = 0;
            for (int q = 0; q < W; q++) {
                assert_int_equal(shard_lo(&p, q), sum);   // contiguous, in rank order
                assert_true(shard_count(&p, q) <= p.shard);
                // a shard with elements starts on a 64-byte boundary (of a 64-byte aligned buffer)
                if (shard_count(&p, q)) assert_int_equal(shard_lo(&p, q) * sizeof(float) % 64, 0);
                sum += shard_count(&p, q);
            }
            assert_int_equal(sum, total);
            // ranges: a few buckets, including ones inside one shard and ones spanning several
            const size_t cuts[][2] = {{0, total}, {0, 1}, {total - 1, 1}, {total / 3, total / 2}, {total / 7, 1 + total / 5}};
            size_t counts[9];
            for (int c = 0; c < 5; c++) {
                const size_t first = cuts[c][0], n = cuts[c][1];
                if (first + n > total) continue;
                size_t s = 0;
                for (int me = 0; me < W; me++) {
                    size_t off = 12345;
                    shard_split_range(&p, first, n, counts, me, &off);
                    if (counts[me]) {
                        // my part starts at first or at my shard's start, inside my shard
                        const size_t start = shard_lo(&p, me) + off;
                        assert_true(start >= first && start >= shard_lo(&p, me));
                        assert_true(start + counts[me] <= shard_hi(&p, me));
                        assert_true(start + counts[me] <= first + n);
                        assert_int_equal(start, first > shard_lo(&p, me) ? first : shard_lo(&p, me));
                    } else {
                        assert_int_equal(off, 0);
                    }
                }
                for (int q = 0; q < W; q++) s += counts[q];
                assert_int_equal(s, n);
            }
        }
}

// AdamW on each shard (moments of shard length, the padding filled with a sentinel) equals AdamW
// on the whole buffer, bit for bit, for tensors cut anywhere by the shards; the padding of the
// moments is never written and the parameters outside a shard are not touched by its step.
static void test_adamw_sharded_equals_whole(void **state) {
    enum { N = 203 };
    ParamTensor t[4];
    memset(t, 0, sizeof t);
    const size_t offs[5] = {0, 37, 40, 150, N};   // a decayed weight, a tiny bias, two more
    for (int k = 0; k < 4; k++) {
        snprintf(t[k].name, sizeof t[k].name, "t%d", k);
        t[k].offset = offs[k];
        t[k].numel = offs[k + 1] - offs[k];
        t[k].decay = k % 2 == 0;
    }
    for (int W = 1; W <= 20; W += (W < 4 ? 1 : 7)) {
        float p_whole[N], p_shard[N], g[N];
        TestRng r = test_rng(7);
        test_fill(&r, p_whole, N, -1, 1);
        memcpy(p_shard, p_whole, sizeof p_whole);
        const ShardPlan sp = shard_plan(N, W);
        AdamW whole, *opt = calloc((size_t)W, sizeof *opt);
        assert_int_equal(adamw_init(&whole, cpu(), N), 0);
        const float sentinel = -7.25f;
        for (int q = 0; q < W; q++) {
            assert_int_equal(adamw_init(&opt[q], cpu(), sp.shard ? sp.shard : 1), 0);
            for (size_t i = shard_count(&sp, q); i < sp.shard; i++) opt[q].m[i] = opt[q].v[i] = sentinel;
        }
        for (int step = 0; step < 4; step++) {
            test_fill(&r, g, N, -1, 1);
            adamw_step(&whole, p_whole, g, t, 4, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f);
            for (int q = 0; q < W; q++) {
                float before[N];
                memcpy(before, p_shard, sizeof before);
                // the rank's reduced gradients: its shard only, shard-local indices
                adamw_step_range(&opt[q], p_shard, g + shard_lo(&sp, q), t, 4, shard_lo(&sp, q), shard_hi(&sp, q),
                                 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f);
                for (size_t i = 0; i < N; i++)
                    if (i < shard_lo(&sp, q) || i >= shard_hi(&sp, q))
                        assert_memory_equal(&before[i], &p_shard[i], sizeof(float));
            }
        }
        assert_memory_equal(p_whole, p_shard, sizeof p_whole);
        for (int q = 0; q < W; q++) {
            const size_t lo = shard_lo(&sp, q), n = shard_count(&sp, q);
            assert_memory_equal(opt[q].m, whole.m + lo, n * sizeof(float));
            assert_memory_equal(opt[q].v, whole.v + lo, n * sizeof(float));
            for (size_t i = n; i < sp.shard; i++) {
                assert_true(opt[q].m[i] == sentinel);
                assert_true(opt[q].v[i] == sentinel);
            }
            adamw_free(&opt[q]);
        }
        adamw_free(&whole);
        free(opt);
    }
}

// The sharded gradient pipeline: each shard unscaled and clipped with the sum of the shards'
// sums of squares gives the norm of the whole-buffer call and gradients within one rounding of
// its (the sums of squares are added in another order), with clipping active; a non-finite
// gradient in one shard makes every shard's call skip (fp16 overflow under ZeRO).
static void test_unscale_clip_by_shards(void **state) {
    enum { N = 1000 };
    const int W = 3;
    float g[N], whole[N];
    TestRng r = test_rng(9);
    test_fill(&r, g, N, -1, 1);
    memcpy(whole, g, sizeof g);
    LossScaler a, b[3];
    loss_scaler_init(&a, 1);
    double norm_whole, norm_q;
    assert_int_equal(loss_scaler_unscale_clip(&a, cpu(), whole, N, 1e-3, &norm_whole), 1);
    const ShardPlan sp = shard_plan(N, W);
    double ssq = 0;
    for (int q = 0; q < W; q++) ssq += cpu()->sum_squares(cpu(), g + shard_lo(&sp, q), shard_count(&sp, q));
    for (int q = 0; q < W; q++) {
        loss_scaler_init(&b[q], 1);
        assert_int_equal(loss_scaler_unscale_clip_ssq(&b[q], cpu(), g + shard_lo(&sp, q), shard_count(&sp, q), ssq,
                                                      1e-3, &norm_q), 1);
        assert_true(fabs(norm_q - norm_whole) <= 1e-12 * norm_whole);
        assert_true(b[q].scale == a.scale && b[q].good_steps == a.good_steps);
    }
    for (int i = 0; i < N; i++) assert_true(fabsf(g[i] - whole[i]) <= 1e-6f * fabsf(whole[i]) + 1e-30f);
    // overflow in one shard: the all-reduced sum of squares is inf, every shard skips and halves S
    g[N - 1] = INFINITY;
    ssq = 0;
    for (int q = 0; q < W; q++) ssq += cpu()->sum_squares(cpu(), g + shard_lo(&sp, q), shard_count(&sp, q));
    for (int q = 0; q < W; q++) {
        const float s0 = b[q].scale;
        float before[N];
        memcpy(before, g, sizeof g);
        assert_int_equal(loss_scaler_unscale_clip_ssq(&b[q], cpu(), g + shard_lo(&sp, q), shard_count(&sp, q), ssq,
                                                      1.0, &norm_q), 0);
        assert_true(b[q].scale == s0 / 2);
        assert_memory_equal(before, g, sizeof g);   // nothing scaled
    }
}

// SnapMoments: the writer takes the moments in pieces (ZeRO's shard by shard at rank 0) and the
// file holds the same ADAM/ADAV as one written from whole buffers; a piece that cannot be
// collected fails the write, leaves no file, and every piece is still asked for (a rank
// waiting to send its shard is never left waiting).
typedef struct { const float *m, *v; int calls, fail_at; } Feed;
static int feed_read(SnapMoments *sm, int which, size_t first, size_t n, float *buf) {
    Feed *f = sm->ctx;
    f->calls++;
    if (f->calls == f->fail_at) return 1;
    memcpy(buf, (which ? f->v : f->m) + first, n * sizeof(float));
    return 0;
}

static void test_snapshot_moments_in_pieces(void **state) {
    const GPTShape shape = { .vocab_size = 5, .block_size = 4, .n_layer = 1, .n_head = 1, .n_embd = 4 };
    const size_t P = (size_t)gpt_num_params(&shape);
    float *p = malloc(P * 4), *m = malloc(P * 4), *v = malloc(P * 4);
    TestRng r = test_rng(3);
    test_fill(&r, p, (long)P, -1, 1);
    test_fill(&r, m, (long)P, -1, 1);
    test_fill(&r, v, (long)P, 0, 1);
    uint32_t vocab[5] = {'a', 'b', 'c', 'd', 'e'};
    char dir[] = "/tmp/test_zero_XXXXXX", whole[64], pieces[64], err[1024];
    assert_non_null(mkdtemp(dir));
    snprintf(whole, sizeof whole, "%s/whole.bin", dir);
    snprintf(pieces, sizeof pieces, "%s/pieces.bin", dir);
    Snapshot s = { .config_yaml = "x: 1\n", .vocab = vocab, .vocab_size = 5, .shape = shape, .num_params = P,
                   .params = p, .adam_m = m, .adam_v = v, .adam_step = 3, .loss_scale = 1, .world_size = 3 };
    assert_int_equal(snapshot_save(whole, &s, err, sizeof err), 0);
    const ShardPlan sp = shard_plan(P, 3);
    Feed f = { m, v, 0, 0 };
    SnapMoments sm = { .read = feed_read, .ctx = &f, .piece = sp.shard, .buf = malloc(sp.shard * 4) };
    s.adam_m = s.adam_v = NULL;
    s.moments = &sm;
    assert_int_equal(snapshot_save(pieces, &s, err, sizeof err), 0);
    assert_int_equal(f.calls, 2 * 3);
    Snapshot a, b;
    assert_int_equal(snapshot_load(whole, &a, err, sizeof err), 0);
    assert_int_equal(snapshot_load(pieces, &b, err, sizeof err), 0);
    assert_non_null(b.adam_m);
    assert_memory_equal(a.adam_m, b.adam_m, P * 4);
    assert_memory_equal(a.adam_v, b.adam_v, P * 4);
    assert_memory_equal(a.params, b.params, P * 4);
    snapshot_free(&a);
    snapshot_free(&b);
    // a piece that fails: no file, a message, and every piece still asked for
    char failed[64];
    snprintf(failed, sizeof failed, "%s/failed.bin", dir);
    f = (Feed){ m, v, 0, 2 };
    sm.failed = 0;
    assert_int_not_equal(snapshot_save(failed, &s, err, sizeof err), 0);
    assert_non_null(strstr(err, "the AdamW moments could not be collected"));
    assert_int_equal(f.calls, 2 * 3);
    assert_int_not_equal(access(failed, F_OK), 0);
    unlink(whole);
    unlink(pieces);
    rmdir(dir);
    free(sm.buf); free(p); free(m); free(v);
}

// Stage 2's ring on one process (the single communicator: each reduce-scatter is the identity):
// a model built without a gradient buffer, its buckets' gradients placed in a ring of several
// sizes (the smallest that works, a little more, the whole gradient) and added into the shard,
// gets the gradients of the same model with its flat buffer, bit for bit for one micro-step and
// within rounding for two; a ring below the smallest is refused, naming the smallest. Bucket
// plans: buckets_plan's (an op's weight and bias may fall in two buckets) and
// buckets_stage2_plan's, cut at the backward's hook points, whose smallest ring is exactly the
// largest bucket; and the ring that leaves room to overlap (buckets_stage2_min_ring overlap 1).
static void stage2_backward(GPT *m, Buckets *bk, const int32_t *x, const int32_t *y, int first, uint64_t step) {
    if (bk) buckets_micro_begin(bk, first);
    GPTStepArgs args = GPT_STEP_ARGS_DEFAULT;
    gpt_forward(m, x, y, 4, 8, true, 5, step, &args);
    gpt_backward(m, bk ? buckets_on_grads_ready : NULL, bk);
    if (bk) assert_int_equal(buckets_micro_end(bk), 0);
}

// Comm.allreduce_wait_some on the single communicator (nothing is ever in flight): records the
// fewest buckets a wait left in flight (0: it waited for the bucket the backward had just finished).
static int g_waits;
static size_t g_min_left;
static int rec_wait_some(Comm *c, size_t left) {
    g_waits++;
    if (left < g_min_left) g_min_left = left;
    return 0;
}

static void test_stage2_ring(void **state) {
    const GPTShape s = { .vocab_size = 8, .block_size = 8, .n_layer = 3, .n_head = 2, .n_embd = 8,
                         .embd_pdrop = 0.1f, .resid_pdrop = 0.1f, .attn_pdrop = 0.1f };
    char err[512];
    int32_t x[2][32], y[2][32];
    for (int i = 0; i < 32; i++) { x[0][i] = i % 8; y[0][i] = (i * 3 + 1) % 8; x[1][i] = (i * 5) % 8; y[1][i] = i % 7; }
    GPT a, b;
    const GPTBuildOptions nog = { .no_grad_buffer = true };
    assert_int_equal(gpt_build_with(&a, &s, 4, 8, cpu(), NULL, err, sizeof err), 0);
    assert_int_equal(gpt_build_with(&b, &s, 4, 8, cpu(), &nog, err, sizeof err), 0);
    assert_null(b.grads_memory);
    assert_int_equal(gpt_init_weights(&a, 7), 0);
    assert_int_equal(gpt_init_weights(&b, 7), 0);
    const size_t P = a.num_params;
    Comm *comm = comm_single_create();
    comm->allreduce_wait_some = rec_wait_some;
    const ShardPlan sp = shard_plan(P, 1);
    float *acc = malloc(P * sizeof(float));
    const size_t caps[][2] = {{64, 256}, {1024, 2048}, {1 << 20, 1 << 20}};   // bytes: first bucket, others
    const int npts = gpt_grads_ready_points(&b.shape, NULL);
    size_t *pts = malloc(sizeof(size_t) * (size_t)npts);
    assert_int_equal(gpt_grads_ready_points(&b.shape, pts), npts);
    for (int c = 0; c < 3; c++)
    for (int plan = 0; plan < 3; plan++) {   // buckets_plan; buckets_stage2_plan, smallest ring; overlap
#define PLAN(bk) (plan ? buckets_stage2_plan(bk, b.tensors, b.n_tensors, &b.shape, caps[c][0], caps[c][1], comm) \
                       : buckets_plan(bk, b.tensors, b.n_tensors, caps[c][0], caps[c][1], comm, NULL))
        Buckets probe;
        assert_int_equal(PLAN(&probe), 0);
        const size_t min = buckets_stage2_min_ring(&probe, &b.shape, plan == 2);
        const size_t largest = buckets_largest(&probe);
        assert_true(min >= largest && min <= P);
        if (plan) {   // every bucket starts at a hook point: the smallest ring is the largest bucket
            for (int k = 0; k < probe.n; k++) {
                int at_point = 0;
                for (int i = 0; i < npts; i++) at_point |= pts[i] == probe.b[k].first;
                if (!at_point) fail_msg("caps %d: bucket %d starts at %zu, not at a hook point", c, k, probe.b[k].first);
            }
            if (plan == 1) assert_int_equal(min, largest);
            // overlap: room for any two consecutive buckets (where that is less than everything)
            size_t pair = 0;
            for (int k = 1; k < probe.n; k++)
                if (probe.b[k - 1].n + probe.b[k].n > pair) pair = probe.b[k - 1].n + probe.b[k].n;
            if (plan == 2) assert_true(min >= (pair < P ? pair : P));
        }
        if (c == 0 && plan == 0) assert_true(min > largest);   // these caps split ops: more than one bucket
        buckets_free(&probe);
        const size_t rings[] = {min, min + 17, P};
        for (int r = 0; r < 3; r++) {
            Buckets bk;
            assert_int_equal(PLAN(&bk), 0);
            assert_int_equal(buckets_shard(&bk, &sp), 0);
            if (r == 0 && min > largest && plan != 2) {   // one float short of the smallest: refused
                assert_int_not_equal(buckets_stage2(&bk, &b, acc, min - 1, err, sizeof err), 0);
                assert_non_null(strstr(err, "smaller than the"));
                buckets_free(&bk);
                assert_int_equal(PLAN(&bk), 0);
                assert_int_equal(buckets_shard(&bk, &sp), 0);
            }
#undef PLAN
            assert_int_equal(buckets_stage2(&bk, &b, acc, rings[r], err, sizeof err), 0);
            // one micro-step: bitwise
            gpt_zero_grad(&a);
            stage2_backward(&a, NULL, x[0], y[0], 1, 3);
            g_waits = 0;
            g_min_left = SIZE_MAX;
            stage2_backward(&b, &bk, x[0], y[0], 1, 3);
            assert_memory_equal(acc, a.grads_memory, P * sizeof(float));
            // the smallest ring waits for the bucket just finished; the overlapping one only for older
            // ones (nothing left in flight: the wait was for the bucket just finished)
            if (r == 0 && plan == 1 && min < P) assert_true(g_waits > 0 && g_min_left == 0);
            if (r == 0 && plan == 2 && ((min < P && g_waits == 0) || (g_waits && g_min_left < 1)))
                fail_msg("caps %d, the overlapping ring (%zu of %zu, %d buckets): %d waits, fewest left in flight %zu", c,
                         rings[r], P, bk.n, g_waits, g_min_left);
            // two micro-steps: the second is added to the first
            stage2_backward(&a, NULL, x[1], y[1], 0, 4);
            stage2_backward(&b, &bk, x[0], y[0], 1, 3);
            stage2_backward(&b, &bk, x[1], y[1], 0, 4);
            // (summed in another order: micro-step 2's contributions before they meet micro-step 1's)
            float big = 0;
            for (size_t i = 0; i < P; i++) big = fmaxf(big, fabsf(a.grads_memory[i]));
            for (size_t i = 0; i < P; i++)
                if (fabsf(acc[i] - a.grads_memory[i]) > 1e-6f * big)
                    fail_msg("caps %d ring %zu: gradient %zu: %.9g vs %.9g", c, rings[r], i, acc[i], a.grads_memory[i]);
            buckets_free(&bk);
        }
    }
    free(pts);
    free(acc);
    comm->destroy(comm);
    gpt_free(&a);
    gpt_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shard_plan_sizes),
        cmocka_unit_test(test_shard_plan_properties),
        cmocka_unit_test(test_adamw_sharded_equals_whole),
        cmocka_unit_test(test_unscale_clip_by_shards),
        cmocka_unit_test(test_snapshot_moments_in_pieces),
        cmocka_unit_test(test_stage2_ring),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
