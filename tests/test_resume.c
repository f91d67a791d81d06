// tests/test_resume.c — training resumes exactly: 2 epochs straight equal 1 epoch +
// restart + 1 epoch, and a restart in the middle of an epoch, with dropout on and a
// fixed seed. Parameters, AdamW moments, counters and the fp16 loss scaler's state are compared
// bitwise, also with the loss scale changing on both sides of the split (CPU and emulated CUDA
// backends). A snapshot whose place in the epoch does not fit the data is refused; skipped
// outlier steps leave no AdamW step behind. trainer_config.init_from starts exactly where
// resuming the same weights with fresh AdamW starts; resume refuses a config that would not
// continue the run exactly.
#include "tests/test_util.h"

#include <unistd.h>
#include <zlib.h>

#include "config/config.h"
#include "checkpoint/snapshot.h"
#include "checkpoint/state_dict.h"
#include "trainer/trainer.h"

static char dir[256], corpus[300];

// A deterministic corpus of pseudo-words (about 3,000 characters).
static int setup(void **state) {
    if (test_tmpdir(dir, sizeof dir, "resume") != 0) return -1;
    snprintf(corpus, sizeof corpus, "%s/corpus.txt", dir);
    FILE *f = fopen(corpus, "w");
    TestRng r = test_rng(3);
    const char *syll[] = {"to", "be", "or", "not", "that", "is", "the", "ques", "tion", "whe", "ther", "tis"};
    for (int i = 0; i < 700; i++) {
        fputs(syll[test_next(&r) % 12], f);
        fputc(test_next(&r) % 5 == 0 ? '\n' : ' ', f);
    }
    fclose(f);
    return 0;
}

static int teardown(void **state) {
    return test_rmtree(dir);
}

// Trains with the small config plus the NULL-terminated `extra` overrides (at most 8); snapshot
// at dir/name; growth_interval > 0 is the fp16 loss scaler's (TrainerHook), 0 its default.
// Returns trainer_run's exit code.
static int train_rc_hook(const char *name, const char *const *extra, long growth_interval) {
    char path[400], snap[400], err[4096];
    snprintf(path, sizeof path, "data_config.path=%s", corpus);
    snprintf(snap, sizeof snap, "trainer_config.snapshot_path=%s/%s", dir, name);
    char *ov[23] = {
        path, snap, "data_config.truncate=1.0", "data_config.block_size=16", "data_config.split=random", "gpt_config.n_layer=2",
        "gpt_config.n_head=2", "gpt_config.n_embd=16", "trainer_config.batch_size=32",
        "trainer_config.save_every=1", "trainer_config.eval_iters=2", "trainer_config.log_every=1000",
        "trainer_config.seed=4242", "trainer_config.use_amp=false", "optimizer_config.learning_rate=3e-3",
    };
    int n = 15;
    for (int i = 0; extra[i]; i++) {
        if (n == 23) fail_msg("more than 8 extra overrides");
        ov[n++] = (char *)extra[i];
    }
    Config cfg;
    if (config_load(&cfg, ".", "gpt2_train_cfg", n, ov, err, sizeof err)) fail_msg("config: %s", err);
    assert_true(cfg.gpt.attn_pdrop > 0 && cfg.gpt.resid_pdrop > 0);   // dropout is on
    TrainResult res;
    Comm *comm = comm_single_create();
    assert_non_null(comm);
    const TrainerHook hook = { .loss_scaler_growth_interval = growth_interval };
    const int rc = trainer_run_in(&cfg, comm, NULL, &hook, &res);
    comm->destroy(comm);
    return rc;
}

static int train_rc_list(const char *name, const char *const *extra) { return train_rc_hook(name, extra, 0); }

static int train_rc(const char *name, const char *extra1, const char *extra2) {
    const char *extra[] = { extra1, extra1 ? extra2 : NULL, NULL };
    return train_rc_list(name, extra);
}

static void train(const char *name, const char *extra1, const char *extra2) {
    assert_int_equal(train_rc(name, extra1, extra2), 0);
}

static Snapshot load(const char *name) {
    char path[400], err[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    Snapshot s;
    if (snapshot_load(path, &s, err, sizeof err)) fail_msg("%s", err);
    return s;
}

static void assert_same_state(const char *a_name, const char *b_name) {
    Snapshot a = load(a_name), b = load(b_name);
    assert_int_equal(a.num_params, b.num_params);
    assert_int_equal(a.iter_num, b.iter_num);
    assert_int_equal(a.epochs_run, b.epochs_run);
    assert_int_equal(a.adam_step, b.adam_step);
    assert_memory_equal(&a.loss_scale, &b.loss_scale, sizeof a.loss_scale);
    assert_int_equal(a.scaler_good_steps, b.scaler_good_steps);
    assert_memory_equal(a.params, b.params, a.num_params * 4);
    assert_memory_equal(a.adam_m, b.adam_m, a.num_params * 4);
    assert_memory_equal(a.adam_v, b.adam_v, a.num_params * 4);
    snapshot_free(&a);
    snapshot_free(&b);
}

// The reference every resume is compared with: the run named `name` trained straight with the
// given overrides, trained by the first test that needs it (each test runs alone too).
static const char *reference(const char *name, const char *extra1, const char *extra2) {
    char path[400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (access(path, F_OK) != 0) train(name, extra1, extra2);
    return name;
}
static const char *straight(void) { return reference("straight.bin", "trainer_config.max_epochs=2", NULL); }

static void test_resume_at_epoch_boundary(void **state) {
    const char *ref = straight();
    train("split.bin", "trainer_config.max_epochs=1", NULL);
    Snapshot mid = load("split.bin");
    assert_int_equal(mid.epochs_run, 1);
    assert_int_equal(mid.iter_in_epoch, 0);
    snapshot_free(&mid);
    train("split.bin", "trainer_config.max_epochs=2", NULL);
    assert_same_state(ref, "split.bin");
}

static void test_resume_mid_epoch(void **state) {
    const char *ref = straight();
    train("mid.bin", "trainer_config.max_epochs=2", "trainer_config.max_iters=50");
    Snapshot mid = load("mid.bin");
    assert_int_equal(mid.iter_num, 50);
    assert_int_equal(mid.epochs_run, 0);
    assert_int_equal(mid.iter_in_epoch, 50);
    snapshot_free(&mid);
    train("mid.bin", "trainer_config.max_epochs=2", NULL);
    assert_same_state(ref, "mid.bin");
}

// Mixed precision (fp16 matmul inputs, dynamic loss scaler): the scaler state travels in
// the snapshot, so a resumed run is still bitwise the uninterrupted one.
static void test_resume_fp16(void **state) {
    // float16 named: amp_dtype's default (auto) is bfloat16 on a CPU with bf16 instructions
    const char *two[] = { "trainer_config.max_epochs=2", "trainer_config.use_amp=true", "trainer_config.amp_dtype=float16", NULL };
    const char *one[] = { "trainer_config.max_epochs=1", "trainer_config.use_amp=true", "trainer_config.amp_dtype=float16", NULL };
    assert_int_equal(train_rc_list("amp_straight.bin", two), 0);
    assert_int_equal(train_rc_list("amp_split.bin", one), 0);
    Snapshot mid = load("amp_split.bin");
    assert_true(mid.loss_scale > 1.0f);   // the scaler was on and saved
    assert_string_equal(mid.precision, "float16");
    snapshot_free(&mid);
    assert_int_equal(train_rc_list("amp_split.bin", two), 0);
    assert_same_state("amp_straight.bin", "amp_split.bin");
    // and fp16 is not fp32: the rounding changed the result
    Snapshot a = load("amp_straight.bin"), b = load(straight());
    assert_memory_not_equal(a.params, b.params, a.num_params * 4);
    snapshot_free(&a);
    snapshot_free(&b);
}

// fp16 with the loss scale changing on both sides of the split. The scaler's growth interval is
// 2 here (TrainerHook.loss_scaler_growth_interval; 2000 by default, never reached in a test), so
// from 2^16 the scale doubles every 2 clean steps until the fp16 gradients overflow, which skips
// the step and halves it; from then on growths and skipped steps alternate (here overflows at
// iterations 9, 12, 19 and 20, on both backends). The split at 10 leaves a scale and a clean-step
// count the resumed run must continue from: 20 iterations straight equal 10 + resume to 20,
// bitwise: parameters, AdamW state and scaler state. Without the scaler's state from the
// snapshot, the resumed run would start again at 2^16 and skip none of the straight run's steps.
static void resume_fp16_scale_changes(const char *device) {
    enum { GROWTH = 2, SPLIT = 10, END = 20 };
    char dev[64], straight_name[64], split_name[64], to_split[64], to_end[64];
    snprintf(dev, sizeof dev, "trainer_config.device=%s", device);
    snprintf(straight_name, sizeof straight_name, "scale_straight_%s.bin", device);
    snprintf(split_name, sizeof split_name, "scale_split_%s.bin", device);
    snprintf(to_split, sizeof to_split, "trainer_config.max_iters=%d", SPLIT);
    snprintf(to_end, sizeof to_end, "trainer_config.max_iters=%d", END);
    const char *first[] = { "trainer_config.use_amp=true", "trainer_config.amp_dtype=float16", "trainer_config.batch_size=8",
                            dev, to_split, NULL };
    const char *all[] = { "trainer_config.use_amp=true", "trainer_config.amp_dtype=float16", "trainer_config.batch_size=8",
                          dev, to_end, NULL };
    assert_int_equal(train_rc_hook(straight_name, all, GROWTH), 0);
    assert_int_equal(train_rc_hook(split_name, first, GROWTH), 0);
    Snapshot mid = load(split_name);
    assert_int_equal(mid.iter_num, SPLIT);
    // The straight run's scale changed on both sides of the split (its first SPLIT iterations are
    // the split run's): each skipped step (an iteration without an AdamW step) halved it and
    // each growth doubled it, so growths = log2(scale ratio) + skips.
    Snapshot end = load(straight_name);
    assert_int_equal(end.iter_num, END);
    const long skips1 = mid.iter_num - mid.adam_step, skips2 = (end.iter_num - end.adam_step) - skips1;
    const long grow1 = lround(log2(mid.loss_scale / 65536.0)) + skips1,
               grow2 = lround(log2(end.loss_scale / mid.loss_scale)) + skips2;
    if (!(skips1 >= 1 && grow1 >= 1 && skips2 >= 1 && grow2 >= 1))
        fail_msg("%s: before the split %ld skipped steps and %ld growths (scale %g, %ld clean steps), after it %ld and %ld "
                 "(scale %g): want both on both sides", device, skips1, grow1, (double)mid.loss_scale, mid.scaler_good_steps,
                 skips2, grow2, (double)end.loss_scale);
    snapshot_free(&mid);
    snapshot_free(&end);
    assert_int_equal(train_rc_hook(split_name, all, GROWTH), 0);
    assert_same_state(straight_name, split_name);
}

static void test_resume_fp16_scale_changes_cpu(void **state) { resume_fp16_scale_changes("cpu"); }

// The same on the CUDA backend, emulated on the CPU: $B/emu/libmingpt_cuda.so (mk/cuda.mk builds
// it where nvcc is on PATH), which backend_select loads from MINGPT_CUDA_LIB.
static void test_resume_fp16_scale_changes_emulated_cuda(void **state) {
    const char *b = getenv("B");   // the build directory (make exports it: build/san under SAN=1)
    char rel[400], lib[4096];
    snprintf(rel, sizeof rel, "%s/emu/libmingpt_cuda.so", b && b[0] ? b : "build");
    if (!realpath(rel, lib)) {
        printf("no emulated CUDA backend at %s (built where nvcc is on PATH)\n", rel);
        skip();
    }
    const char *old = getenv("MINGPT_CUDA_LIB");
    char *saved = old ? strdup(old) : NULL;
    setenv("MINGPT_CUDA_LIB", lib, 1);
    resume_fp16_scale_changes("cuda");
    if (saved) setenv("MINGPT_CUDA_LIB", saved, 1);
    else unsetenv("MINGPT_CUDA_LIB");
    free(saved);
}

// The seed decides the run: the same iterations (one epoch) with another seed give other
// parameters, and the same seed gives bitwise the same ones, so the comparisons above are not
// vacuous.
static void test_seed_matters(void **state) {
    const char *ref = reference("epoch1.bin", "trainer_config.max_epochs=1", NULL);   // seed 4242
    train("seed7_a.bin", "trainer_config.max_epochs=1", "trainer_config.seed=7");
    train("seed7_b.bin", "trainer_config.max_epochs=1", "trainer_config.seed=7");
    Snapshot a = load("seed7_a.bin"), b = load("seed7_b.bin"), c = load(ref);
    assert_int_equal(a.iter_num, c.iter_num);
    assert_int_equal(a.epochs_run, 1);
    assert_memory_not_equal(a.params, c.params, a.num_params * 4);
    snapshot_free(&c);
    snapshot_free(&b);
    snapshot_free(&a);
    assert_same_state("seed7_a.bin", "seed7_b.bin");
}

static void save(const char *name, const Snapshot *s) {
    char path[400], err[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (snapshot_save(path, s, err, sizeof err)) fail_msg("%s", err);
}

// Rewrites dir/name without its record `tag` and with the CRC recomputed: a file from before
// that record existed (snapshot_save always writes DIST).
static void drop_record(const char *name, const char *tag) {
    char path[400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char *buf = malloc(1 << 20), *out = malloc(1 << 20);
    size_t n = fread(buf, 1, 1 << 20, f), o = 12, dropped = 0;
    fclose(f);
    assert_true(n > 16 && n < (1 << 20));
    memcpy(out, buf, 12);   // magic, version
    for (size_t p = 12; p + 12 <= n - 4;) {
        uint64_t len;
        memcpy(&len, buf + p + 4, 8);
        assert_true(len <= n - 4 - p - 12);
        if (memcmp(buf + p, tag, 4) != 0) { memcpy(out + o, buf + p, 12 + len); o += 12 + len; }
        else dropped++;
        p += 12 + len;
    }
    assert_int_equal(dropped, 1);
    const uint32_t crc = (uint32_t)crc32(0L, out, (uInt)o);
    memcpy(out + o, &crc, 4);
    f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(out, 1, o + 4, f), o + 4);
    fclose(f);
    free(buf);
    free(out);
}

// The snapshot's place in the epoch is checked against this data before it is used: past
// the training windows (plus the writer's padding) it is refused (exit 2) instead of ending
// the epoch early without a word; a file without DIST with a huge iter_in_epoch (whose
// product with batch_size would overflow) too; in range, both resume.
static void test_resume_point_checked(void **state) {
    train("pt.bin", "trainer_config.max_epochs=1", "trainer_config.max_iters=3");
    Snapshot s = load("pt.bin");
    assert_int_equal(s.world_size, 1);
    assert_int_equal(s.samples_in_epoch, 3 * 32);
    const long ok_samples = s.samples_in_epoch;
    s.samples_in_epoch = 1L << 40;
    save("pt_far.bin", &s);
    assert_int_equal(train_rc("pt_far.bin", "trainer_config.max_epochs=1", NULL), EXIT_USAGE);
    s.samples_in_epoch = 5000;   // the split has fewer windows than the 3,000-character corpus
    save("pt_far.bin", &s);
    assert_int_equal(train_rc("pt_far.bin", "trainer_config.max_epochs=1", NULL), EXIT_USAGE);
    s.samples_in_epoch = ok_samples;
    s.iter_in_epoch = 1L << 62;
    save("pt_legacy.bin", &s);
    drop_record("pt_legacy.bin", "DIST");
    Snapshot l = load("pt_legacy.bin");
    assert_int_equal(l.world_size, 0);
    snapshot_free(&l);
    assert_int_equal(train_rc("pt_legacy.bin", "trainer_config.max_epochs=1", "trainer_config.max_iters=4"),
                     EXIT_USAGE);
    s.iter_in_epoch = 3;   // in range: resumes at 3 x batch_size samples, as the DIST file does
    save("pt_legacy.bin", &s);
    drop_record("pt_legacy.bin", "DIST");
    train("pt_legacy.bin", "trainer_config.max_epochs=1", "trainer_config.max_iters=4");
    train("pt.bin", "trainer_config.max_epochs=1", "trainer_config.max_iters=4");
    assert_same_state("pt.bin", "pt_legacy.bin");
    snapshot_free(&s);
}

// trainer_config.skip_spike_zscore tiny: once the 128-norm window is full, about every other
// step is an outlier and skipped; the iterations are still counted, AdamW's steps are not.
static void test_skip_spike(void **state) {
    train("spike.bin", "trainer_config.max_epochs=3", "trainer_config.skip_spike_zscore=1e-9");
    Snapshot s = load("spike.bin");
    if (!(s.iter_num > 160 && s.adam_step >= 128 && s.adam_step < s.iter_num - 10))
        fail_msg("%ld iterations, %ld AdamW steps", s.iter_num, s.adam_step);
    snapshot_free(&s);
    train("nospike.bin", "trainer_config.max_epochs=3", NULL);
    s = load("nospike.bin");
    assert_int_equal(s.adam_step, s.iter_num);
    snapshot_free(&s);
}

// init_from: a new run from exported weights is the run that resumes a snapshot holding those
// weights with no AdamW moments and no progress (bitwise, 3 iterations); and not a run from a
// random init (the comparison is not vacuous).
static void test_init_from(void **state) {
    train("base.bin", "trainer_config.max_epochs=1", "trainer_config.max_iters=5");
    Snapshot b = load("base.bin");
    char weights[400], init[450], err[1024];
    snprintf(weights, sizeof weights, "%s/base.safetensors", dir);
    if (state_dict_export(&b, weights, ST_F32, err, sizeof err)) fail_msg("%s", err);
    snprintf(init, sizeof init, "trainer_config.init_from=%s", weights);
    train("from_weights.bin", init, "trainer_config.max_iters=3");
    Snapshot fresh = b;
    fresh.adam_m = fresh.adam_v = NULL;
    fresh.adam_step = fresh.epochs_run = fresh.iter_in_epoch = fresh.iter_num = fresh.samples_in_epoch = 0;
    save("weights_only.bin", &fresh);
    train("weights_only.bin", "trainer_config.max_iters=3", NULL);
    assert_same_state("from_weights.bin", "weights_only.bin");
    train("scratch.bin", "trainer_config.max_iters=3", NULL);
    Snapshot a = load("from_weights.bin"), c = load("scratch.bin");
    assert_memory_not_equal(a.params, c.params, a.num_params * 4);
    snapshot_free(&a);
    snapshot_free(&c);
    // a mingpt snapshot works as init_from too: the same weights, the same run
    snprintf(init, sizeof init, "trainer_config.init_from=%s/base.bin", dir);
    train("from_snapshot.bin", init, "trainer_config.max_iters=3");
    assert_same_state("from_weights.bin", "from_snapshot.bin");
    snapshot_free(&b);
}

// Resume compares the snapshot's config with this run's: what breaks exact resume is refused
// (exit 2, nothing trained), what may change is accepted; batch_size may change with
// grad_accum_steps (or the world size) when the global batch stays.
static void test_resume_config_checked(void **state) {
    train("cfg.bin", "trainer_config.max_epochs=1", "trainer_config.max_iters=3");
    const char *breaking[][2] = {
        { "trainer_config.seed=7", NULL }, { "data_config.truncate=0.9", NULL }, { "data_config.train_split=0.8", NULL },
        { "data_config.split=contiguous", NULL }, { "trainer_config.batch_size=16", NULL },
        { "trainer_config.grad_accum_steps=2", NULL },
    };
    for (size_t i = 0; i < sizeof breaking / sizeof breaking[0]; i++) {
        const char *extra[] = { "trainer_config.max_iters=4", breaking[i][0], NULL };
        if (train_rc_list("cfg.bin", extra) != EXIT_USAGE) fail_msg("resumed with %s", breaking[i][0]);
    }
    Snapshot s = load("cfg.bin");
    assert_int_equal(s.iter_num, 3);   // nothing trained
    snapshot_free(&s);
    const char *allowed[] = { "trainer_config.max_iters=4", "optimizer_config.learning_rate=1e-3",
                              "trainer_config.eval_iters=3", "gpt_config.resid_pdrop=0.2", NULL };
    assert_int_equal(train_rc_list("cfg.bin", allowed), 0);
    const char *same_global[] = { "trainer_config.max_iters=5", "optimizer_config.learning_rate=1e-3",
                                  "trainer_config.batch_size=16", "trainer_config.grad_accum_steps=2", NULL };
    assert_int_equal(train_rc_list("cfg.bin", same_global), 0);
    s = load("cfg.bin");
    assert_int_equal(s.iter_num, 5);
    snapshot_free(&s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_at_epoch_boundary),
        cmocka_unit_test(test_resume_mid_epoch),
        cmocka_unit_test(test_seed_matters),
        cmocka_unit_test(test_resume_fp16),
        cmocka_unit_test(test_resume_fp16_scale_changes_cpu),
        cmocka_unit_test(test_resume_fp16_scale_changes_emulated_cuda),
        cmocka_unit_test(test_resume_point_checked),
        cmocka_unit_test(test_skip_spike),
        cmocka_unit_test(test_init_from),
        cmocka_unit_test(test_resume_config_checked),
    };
    return cmocka_run_group_tests_name("resume", tests, setup, teardown);
}
