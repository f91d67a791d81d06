// tests/test_resume.c — training resumes exactly: 2 epochs straight equal 1 epoch +
// restart + 1 epoch, and a restart in the middle of an epoch, with dropout on and a
// fixed seed. Parameters, AdamW moments and counters are compared bitwise.
#include "tests/test_util.h"

#include <unistd.h>

#include "config/config.h"
#include "trainer/snapshot.h"
#include "trainer/trainer.h"

static char dir[256], corpus[300];

// A deterministic corpus of pseudo-words (about 3,000 characters).
static int setup(void **state) {
    snprintf(dir, sizeof dir, "/tmp/mingpt_resume_XXXXXX");
    if (!mkdtemp(dir)) return -1;
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
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd);
}

// Trains with the small config plus `extra` overrides; snapshot at dir/name.
static void train(const char *name, const char *extra1, const char *extra2) {
    char path[400], snap[400], err[4096];
    snprintf(path, sizeof path, "data_config.path=%s", corpus);
    snprintf(snap, sizeof snap, "trainer_config.snapshot_path=%s/%s", dir, name);
    char *ov[] = {
        path, snap, "data_config.truncate=1.0", "data_config.block_size=16", "data_config.split=random", "gpt_config.n_layer=2",
        "gpt_config.n_head=2", "gpt_config.n_embd=16", "trainer_config.batch_size=32",
        "trainer_config.save_every=1", "trainer_config.eval_iters=2", "trainer_config.log_every=1000",
        "trainer_config.seed=4242", "trainer_config.use_amp=false", "optimizer_config.learning_rate=3e-3",
        (char *)extra1, (char *)extra2,
    };
    int n = 15 + (extra1 != NULL) + (extra2 != NULL);
    Config cfg;
    if (config_load(&cfg, ".", "gpt2_train_cfg", n, ov, err, sizeof err)) fail_msg("config: %s", err);
    assert_true(cfg.gpt.attn_pdrop > 0 && cfg.gpt.resid_pdrop > 0);   // dropout is on
    TrainResult res;
    Comm *comm = comm_single_create();
    assert_non_null(comm);
    assert_int_equal(trainer_run(&cfg, comm, &res), 0);
    comm->destroy(comm);
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
    assert_memory_equal(a.params, b.params, a.num_params * 4);
    assert_memory_equal(a.adam_m, b.adam_m, a.num_params * 4);
    assert_memory_equal(a.adam_v, b.adam_v, a.num_params * 4);
    snapshot_free(&a);
    snapshot_free(&b);
}

static void test_resume_at_epoch_boundary(void **state) {
    train("straight.bin", "trainer_config.max_epochs=2", NULL);
    train("split.bin", "trainer_config.max_epochs=1", NULL);
    Snapshot mid = load("split.bin");
    assert_int_equal(mid.epochs_run, 1);
    assert_int_equal(mid.iter_in_epoch, 0);
    snapshot_free(&mid);
    train("split.bin", "trainer_config.max_epochs=2", NULL);
    assert_same_state("straight.bin", "split.bin");
}

static void test_resume_mid_epoch(void **state) {
    train("mid.bin", "trainer_config.max_epochs=2", "trainer_config.max_iters=50");
    Snapshot mid = load("mid.bin");
    assert_int_equal(mid.iter_num, 50);
    assert_int_equal(mid.epochs_run, 0);
    assert_int_equal(mid.iter_in_epoch, 50);
    snapshot_free(&mid);
    train("mid.bin", "trainer_config.max_epochs=2", NULL);
    assert_same_state("straight.bin", "mid.bin");
}

// Mixed precision (fp16 matmul inputs, dynamic loss scaler): the scaler state travels in
// the snapshot, so a resumed run is still bitwise the uninterrupted one.
static void test_resume_fp16(void **state) {
    train("amp_straight.bin", "trainer_config.max_epochs=2", "trainer_config.use_amp=true");
    train("amp_split.bin", "trainer_config.max_epochs=1", "trainer_config.use_amp=true");
    Snapshot mid = load("amp_split.bin");
    assert_true(mid.loss_scale > 1.0f);   // the scaler was on and saved
    snapshot_free(&mid);
    train("amp_split.bin", "trainer_config.max_epochs=2", "trainer_config.use_amp=true");
    assert_same_state("amp_straight.bin", "amp_split.bin");
    // and fp16 is not fp32: the rounding changed the result
    Snapshot a = load("amp_straight.bin"), b = load("straight.bin");
    assert_memory_not_equal(a.params, b.params, a.num_params * 4);
    snapshot_free(&a);
    snapshot_free(&b);
}

// A different seed gives a different run: the comparison above is not vacuous.
static void test_seed_matters(void **state) {
    train("other.bin", "trainer_config.max_epochs=1", "trainer_config.seed=7");
    Snapshot a = load("other.bin"), b = load("split.bin");
    assert_memory_not_equal(a.params, b.params, a.num_params * 4);
    snapshot_free(&a);
    snapshot_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_at_epoch_boundary),
        cmocka_unit_test(test_resume_mid_epoch),
        cmocka_unit_test(test_seed_matters),
        cmocka_unit_test(test_resume_fp16),
    };
    return cmocka_run_group_tests_name("resume", tests, setup, teardown);
}
