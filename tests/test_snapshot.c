// tests/test_snapshot.c — snapshot round trip, corruption detection, atomic replace.
#include "tests/test_util.h"

#include <sys/stat.h>

#include "trainer/snapshot.h"

static char dir[256];

static int setup(void **state) {
    snprintf(dir, sizeof dir, "/tmp/mingpt_snap_XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd);
}

static Snapshot sample_snapshot(float *params, float *m, float *v, uint32_t *vocab, size_t n) {
    for (size_t i = 0; i < n; i++) { params[i] = 0.5f * i; m[i] = -1.0f * i; v[i] = 0.25f * i; }
    for (int i = 0; i < 5; i++) vocab[i] = (uint32_t)"\n abc"[i];
    Snapshot s = {
        .config_yaml = "gpt_config:\n  n_layer: 1\n", .vocab = vocab, .vocab_size = 5,
        .shape = { 5, 8, 1, 2, 4, 0, 0, 0 }, .num_params = n, .params = params, .adam_m = m,
        .adam_v = v, .adam_step = 17, .epochs_run = 2, .iter_in_epoch = 3, .iter_num = 19,
        .seed = 0xfeedfacecafebeefULL, .loss_scale = 1.0f, .scaler_good_steps = 0,
        .world_size = 3, .samples_in_epoch = 1234,
    };
    return s;
}

static void test_round_trip(void **state) {
    enum { N = 1000 };
    float p[N], m[N], v[N];
    uint32_t vocab[5];
    Snapshot s = sample_snapshot(p, m, v, vocab, N), t;
    char path[300], err[512];
    snprintf(path, sizeof path, "%s/a.bin", dir);
    assert_int_equal(snapshot_save(path, &s, err, sizeof err), 0);
    assert_int_equal(snapshot_load(path, &t, err, sizeof err), 0);
    assert_string_equal(t.config_yaml, s.config_yaml);
    assert_int_equal(t.vocab_size, 5);
    assert_memory_equal(t.vocab, vocab, sizeof vocab);
    assert_memory_equal(&t.shape, &s.shape, sizeof s.shape);
    assert_int_equal(t.num_params, N);
    assert_memory_equal(t.params, p, sizeof p);
    assert_memory_equal(t.adam_m, m, sizeof m);
    assert_memory_equal(t.adam_v, v, sizeof v);
    assert_int_equal(t.adam_step, 17);
    assert_int_equal(t.epochs_run, 2);
    assert_int_equal(t.iter_in_epoch, 3);
    assert_int_equal(t.iter_num, 19);
    assert_true(t.seed == s.seed);
    assert_int_equal(t.world_size, 3);
    assert_int_equal(t.samples_in_epoch, 1234);
    snapshot_free(&t);
    // No temp files left behind.
    char cmd[400];
    snprintf(cmd, sizeof cmd, "test $(ls %s | wc -l) -eq 1", dir);
    assert_int_equal(system(cmd), 0);
}

// Every single flipped byte and every truncation is reported, never loaded.
static void test_corruption_detected(void **state) {
    enum { N = 64 };
    float p[N], m[N], v[N];
    uint32_t vocab[5];
    Snapshot s = sample_snapshot(p, m, v, vocab, N), t;
    char path[300], err[512];
    snprintf(path, sizeof path, "%s/c.bin", dir);
    assert_int_equal(snapshot_save(path, &s, err, sizeof err), 0);
    FILE *f = fopen(path, "rb");
    unsigned char buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    for (size_t i = 0; i < n; i += 7) {
        buf[i] ^= 0x10;
        f = fopen(path, "wb"); fwrite(buf, 1, n, f); fclose(f);
        if (snapshot_load(path, &t, err, sizeof err) == 0) fail_msg("flipped byte %zu was not detected", i);
        assert_non_null(strstr(err, path));
        buf[i] ^= 0x10;
    }
    for (size_t cut = 0; cut < n; cut += 13) {
        f = fopen(path, "wb"); fwrite(buf, 1, cut, f); fclose(f);
        if (snapshot_load(path, &t, err, sizeof err) == 0) fail_msg("truncation at %zu was not detected", cut);
    }
    snprintf(path, sizeof path, "%s/missing.bin", dir);
    assert_int_not_equal(snapshot_load(path, &t, err, sizeof err), 0);
    assert_non_null(strstr(err, "No such file"));
}

// A save that cannot complete leaves the previous snapshot intact.
static void test_failed_save_keeps_old_file(void **state) {
    enum { N = 16 };
    float p[N], m[N], v[N];
    uint32_t vocab[5];
    Snapshot s = sample_snapshot(p, m, v, vocab, N), t;
    char path[300], err[512];
    snprintf(path, sizeof path, "%s/keep.bin", dir);
    assert_int_equal(snapshot_save(path, &s, err, sizeof err), 0);
    // Replacing the target with a directory makes the rename fail after the temp file
    // was fully written: the temp file must be removed and an error returned.
    char sub[320];
    snprintf(sub, sizeof sub, "%s/asdir.bin", dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    char inner[340];
    snprintf(inner, sizeof inner, "%s/x", sub);
    FILE *f = fopen(inner, "w"); fclose(f);   // non-empty directory: rename cannot replace it
    assert_int_not_equal(snapshot_save(sub, &s, err, sizeof err), 0);
    assert_non_null(strstr(err, "asdir.bin"));
    char cmd[400];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls %s | grep tmp)\"", dir);
    assert_int_equal(system(cmd), 0);
    // And the earlier good snapshot still loads.
    assert_int_equal(snapshot_load(path, &t, err, sizeof err), 0);
    snapshot_free(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_corruption_detected),
        cmocka_unit_test(test_failed_save_keeps_old_file),
    };
    return cmocka_run_group_tests_name("snapshot", tests, setup, teardown);
}
