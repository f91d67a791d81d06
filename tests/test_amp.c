// tests/test_amp.c — trainer_config.use_amp + amp_dtype into a run's precision (trainer/amp.h):
// torch.autocast's per-device default for "auto" (float16 on CUDA; bfloat16 on a CPU with bf16
// instructions, else float32 with a note), explicit values as asked, and the names snapshots
// record. Every case runs whatever this machine's CPU is: "no bf16 instructions" is an argument.
// (The trainer on this CPU, and the note in its log, is tests/test_amp.sh's.)
#include "tests/test_util.h"

#include "trainer/amp.h"

static ComputeDtype resolve(bool use_amp, const char *amp, bool cuda, bool bf16, char *note) {
    strcpy(note, "stale");
    return amp_resolve(use_amp, amp, cuda, bf16, note, 256);
}

static void test_auto_is_the_device_default(void **state) {
    char note[256];
    assert_int_equal(resolve(true, "auto", true, false, note), DTYPE_FP16);    // CUDA: the GradScaler path
    assert_string_equal(note, "");
    assert_int_equal(resolve(true, "auto", true, true, note), DTYPE_FP16);     // the CPU's bf16 does not matter
    assert_int_equal(resolve(true, "auto", false, true, note), DTYPE_BF16);    // a CPU with AVX512-BF16 / AMX
    assert_string_equal(note, "");
    assert_int_equal(resolve(true, "auto", false, false, note), DTYPE_FP32);   // without: fp32, said once
    assert_string_equal(note, "use_amp with amp_dtype=auto: this CPU has no bfloat16 instructions (AVX512-BF16 or "
                              "AMX); training in float32");
}

static void test_explicit_values(void **state) {
    char note[256];
    // float16 is float16 everywhere, the CPU's emulated only when asked for
    assert_int_equal(resolve(true, "float16", true, false, note), DTYPE_FP16);
    assert_int_equal(resolve(true, "float16", false, true, note), DTYPE_FP16);
    assert_int_equal(resolve(true, "float16", false, false, note), DTYPE_FP16);
    assert_string_equal(note, "");
    assert_int_equal(resolve(true, "bfloat16", true, false, note), DTYPE_BF16);
    assert_int_equal(resolve(true, "bfloat16", false, true, note), DTYPE_BF16);
    assert_string_equal(note, "");
    assert_int_equal(resolve(true, "bfloat16", false, false, note), DTYPE_FP32);
    assert_non_null(strstr(note, "use_amp with bfloat16: this CPU has no AVX512-BF16 or AMX"));
    assert_non_null(strstr(note, "training in fp32 instead"));
}

static void test_without_amp_fp32(void **state) {
    char note[256];
    const char *const amp[] = { "auto", "bfloat16", "float16" };
    for (int i = 0; i < 3; i++)
        for (int dev = 0; dev < 4; dev++) {
            assert_int_equal(resolve(false, amp[i], dev & 1, dev & 2, note), DTYPE_FP32);
            assert_string_equal(note, "");
        }
}

static void test_names(void **state) {
    assert_string_equal(amp_dtype_name(DTYPE_FP32), "float32");
    assert_string_equal(amp_dtype_name(DTYPE_BF16), "bfloat16");
    assert_string_equal(amp_dtype_name(DTYPE_FP16), "float16");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auto_is_the_device_default),
        cmocka_unit_test(test_explicit_values),
        cmocka_unit_test(test_without_amp_fp32),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
