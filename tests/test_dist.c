// tests/test_dist.c — data-parallel building blocks that run in one process: bucket layout and
// start order (trainer/buckets.h), the single-process communicator and launcher detection
// (dist/comm.h), resuming an epoch on another world size (data/sampler.h), and the disjoint
// random-stream domains (kernels/dropout_rng.h). The multi-process tests are tests/ddp/.
#include "tests/test_util.h"

#include <stdlib.h>
#include <string.h>

#include "data/sampler.h"
#include "dist/comm.h"
#include "kernels/dropout_rng.h"
#include "model/gpt.h"
#include "trainer/buckets.h"

static const GPTShape SHAPE = { 65, 32, 4, 4, 64, 0, 0, 0 };

static ParamTensor *table(int *n) {
    *n = gpt_param_table(&SHAPE, NULL);
    ParamTensor *t = calloc((size_t)*n, sizeof *t);
    gpt_param_table(&SHAPE, t);
    return t;
}

// Buckets tile the buffer from its end, hold whole tensors, close at their caps.
static void test_bucket_layout(void **state) {
    int nt;
    ParamTensor *t = table(&nt);
    const size_t total = t[nt - 1].offset + t[nt - 1].numel;
    const size_t caps[][2] = { { 1, 1 }, { 20000, 60000 }, { (size_t)1 << 40, (size_t)1 << 40 } };
    for (size_t c = 0; c < 3; c++) {
        Buckets bk;
        assert_int_equal(buckets_plan(&bk, t, nt, caps[c][0], caps[c][1], NULL, NULL), 0);
        size_t end = total;
        for (int i = 0; i < bk.n; i++) {
            assert_int_equal(bk.b[i].first + bk.b[i].n, end);   // contiguous, from the end down
            end = bk.b[i].first;
            int starts = 0;                                      // a tensor boundary
            for (int k = 0; k < nt; k++) starts += t[k].offset == bk.b[i].first;
            assert_int_equal(starts, 1);
            // closed at its cap: without its first tensor it would be under the cap
            size_t first_numel = 0;
            for (int k = 0; k < nt; k++) if (t[k].offset == bk.b[i].first) first_numel = t[k].numel;
            const size_t cap = i == 0 ? caps[c][0] : caps[c][1];
            if (i < bk.n - 1) assert_true(bk.b[i].n * 4 >= cap && (bk.b[i].n - first_numel) * 4 < cap);
        }
        assert_int_equal(end, 0);
        if (c == 0) assert_int_equal(bk.n, nt);    // tiny cap: one bucket per tensor
        if (c == 2) assert_int_equal(bk.n, 1);     // huge cap: one bucket
        buckets_free(&bk);
    }
    free(t);
}

// A recording communicator: the buckets must be started in order, each once, as soon as
// the backward pass reports them final.
typedef struct { size_t first[256]; int n; int backward_done; } Rec;
static int rec_start(Comm *c, float *buf, size_t n) {
    Rec *r = c->ctx;
    r->first[r->n++] = (size_t)(buf - (float *)NULL);
    c->stats.n_started_early += !r->backward_done;
    return 0;
}
static void rec_done(Comm *c) { ((Rec *)c->ctx)->backward_done = 1; }

static void test_bucket_start_order(void **state) {
    int nt;
    ParamTensor *t = table(&nt);
    Rec rec = {0};
    Comm c = { .ctx = &rec, .allreduce_start = rec_start, .backward_done = rec_done };
    Buckets bk;
    assert_int_equal(buckets_plan(&bk, t, nt, 4 * 1000, 4 * 30000, &c, NULL), 0);
    assert_true(bk.n > 3);
    buckets_reset(&bk);
    // the backward's reports (gpt_grads_ready_points): ln_f + lm_head, each block's ops from the
    // last, then everything; each starts the buckets then final, in order
    const int np = gpt_grads_ready_points(&SHAPE, NULL);
    size_t pts[64];
    assert_true(np <= 64);
    assert_int_equal(gpt_grads_ready_points(&SHAPE, pts), np);
    assert_true(pts[0] == t[nt - 3].offset && pts[np - 1] == 0);
    for (int i = 0; i < np - 1; i++) {
        buckets_on_grads_ready(&bk, pts[i]);
        for (int b = 0; b < bk.n; b++)   // started exactly the buckets inside [pts[i], end)
            assert_int_equal(b < rec.n, bk.b[b].first >= pts[i]);
        if (i == 0) assert_true(rec.n >= 1);
    }
    const int before_end = rec.n;
    buckets_on_grads_ready(&bk, 0);
    assert_int_equal(rec.n, bk.n);
    assert_int_equal(c.stats.n_started_early, before_end);
    assert_true(before_end > 1 && before_end < bk.n);   // wte/wpe start only at the end
    for (int i = 0; i < bk.n; i++) assert_int_equal(rec.first[i], bk.b[i].first);
    assert_int_equal(buckets_start_rest(&bk), 0);       // nothing left: no bucket twice
    assert_int_equal(rec.n, bk.n);
    buckets_free(&bk);
    free(t);
}

static void test_single_comm_and_launcher(void **state) {
    Comm *c = comm_single_create();
    assert_non_null(c);
    assert_int_equal(c->world_size, 1);
    double v[2] = { 3.5, -1 };
    assert_int_equal(c->allreduce_host(c, v, 2, COMM_SUM), 0);
    assert_true(v[0] == 3.5 && v[1] == -1);
    c->destroy(c);
    char err[512];
    unsetenv("OMPI_COMM_WORLD_SIZE"); unsetenv("PMIX_RANK"); unsetenv("PMI_RANK");
    unsetenv("SLURM_NTASKS"); unsetenv("SLURM_PROCID"); unsetenv("SLURM_STEP_NUM_TASKS");
    assert_int_equal(comm_launched(err, sizeof err), 0);
    setenv("SLURM_NTASKS", "4", 1); setenv("SLURM_PROCID", "0", 1);
    assert_int_equal(comm_launched(err, sizeof err), 0);    // an sbatch script's own shell: one process
    setenv("SLURM_STEP_NUM_TASKS", "4", 1); setenv("SLURM_PROCID", "2", 1);
    assert_int_equal(comm_launched(err, sizeof err), -1);   // srun without --mpi=pmix
    assert_non_null(strstr(err, "--mpi=pmix"));
    setenv("PMIX_RANK", "2", 1);
    assert_int_equal(comm_launched(err, sizeof err), 1);
    unsetenv("SLURM_NTASKS"); unsetenv("SLURM_PROCID"); unsetenv("SLURM_STEP_NUM_TASKS"); unsetenv("PMIX_RANK");
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    assert_int_equal(comm_launched(err, sizeof err), 1);
    unsetenv("OMPI_COMM_WORLD_SIZE");
}

// An epoch consumed S samples with W ranks, then resumes with W' ranks: the union of the new
// ranks' lists is the rest of the permutation (padded as torch pads), and with W' = W it is
// exactly the tail of each rank's dsampler_indices list.
static void test_sampler_resume(void **state) {
    const long n = 103;
    long *perm = malloc(sizeof(long) * (n + 1)), *out = malloc(sizeof(long) * 200), *scratch = malloc(sizeof(long) * 400);
    long *full = malloc(sizeof(long) * 200);
    torch_randperm(n, 5 + 2, perm);
    const long starts[] = { 0, 24, 60, 102, 103 };
    for (int w2 = 1; w2 <= 4; w2++)
        for (size_t si = 0; si < 5; si++) {
            const long S = starts[si];
            int *seen = calloc((size_t)n, sizeof(int));
            long total = 0;
            for (int r = 0; r < w2; r++) {
                DistributedSampler s;
                dsampler_init(&s, n, w2, r, true, 5, false);
                dsampler_set_epoch(&s, 2);
                const long k = dsampler_indices_from(&s, S, out, scratch);
                for (long j = 0; j < k; j++) seen[out[j]]++;
                total += k;
                if (S % w2 == 0 && S < n) {   // the same world size: the tail of the full list
                    const long kf = dsampler_indices(&s, full, scratch);
                    assert_int_equal(k, kf - S / w2);
                    assert_memory_equal(out, full + S / w2, sizeof(long) * (size_t)k);
                }
                if (S == 0) assert_int_equal(k, s.num_samples);
            }
            const long rest = S < n ? n - S : 0;
            assert_int_equal(total, rest == 0 ? 0 : (rest + w2 - 1) / w2 * w2);
            for (long p = 0; p < n; p++) {   // position p of the permutation
                const long want = (p >= S) + (p < total - rest);   // padding: P from its start
                if (seen[perm[p]] != want) fail_msg("W'=%d S=%ld: window %ld (position %ld) seen %d times, want %ld",
                                                    w2, S, perm[p], p, seen[perm[p]], want);
            }
            free(seen);
        }
    free(perm); free(out); free(scratch); free(full);
}

// Init and dropout streams are in different domains (the top byte), so they never collide:
// without the domain byte, init stream 0x1000000 + k would be dropout stream step*1024 + site
// at step 16384. Their keys differ too.
static void test_rng_domains(void **state) {
    for (uint64_t k = 0; k < 64; k++) {
        const uint64_t init = rng_stream(RNG_DOMAIN_INIT, k);
        const uint64_t drop = rng_stream(RNG_DOMAIN_DROPOUT, 16384 * GPT_DROPOUT_SITES + k);
        assert_true(init != drop);
        assert_true(dropout_key(1337, init) != dropout_key(1337, drop));
        assert_true(init >> 56 == RNG_DOMAIN_INIT && drop >> 56 == RNG_DOMAIN_DROPOUT);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bucket_layout),
        cmocka_unit_test(test_bucket_start_order),
        cmocka_unit_test(test_single_comm_and_launcher),
        cmocka_unit_test(test_sampler_resume),
        cmocka_unit_test(test_rng_domains),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
