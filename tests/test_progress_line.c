// tests/test_progress_line.c — the status line's text (trainer/progress.h): the ETA from the
// iterations left and the time per iteration, the next evaluation or snapshot only when it is
// more than 30 s away and then the nearer of the two, durations for people. (Drawing it on a
// terminal, and never off one, is tests/test_progress.sh's.)
#include "tests/test_util.h"

#include "trainer/progress.h"

static void test_durations(void **state) {
    char b[32];
    format_duration(0, b, sizeof b);       assert_string_equal(b, "0:00");
    format_duration(59.6, b, sizeof b);    assert_string_equal(b, "1:00");
    format_duration(3599, b, sizeof b);    assert_string_equal(b, "59:59");
    format_duration(3600 * 27 + 61, b, sizeof b); assert_string_equal(b, "27:01:01");
    format_duration(-1, b, sizeof b);      assert_string_equal(b, "?");
    format_duration(NAN, b, sizeof b);     assert_string_equal(b, "?");
}

static void test_line(void **state) {
    char b[512];
    StatusInfo in = { .epoch = 2, .iter = 100, .total_iters = 1100, .loss = 1.23456, .tokens_per_s = 38400.4,
                      .elapsed_s = 75, .s_per_iter = 0.02, .next_eval = 500, .next_save = 1000 };
    // 1000 iterations left at 20 ms: 0:20; the evaluation 400 iterations (8 s) away is near: not shown
    status_format(&in, b, sizeof b);
    assert_string_equal(b, "epoch 2 | iter 100/1100 | loss 1.2346 | 38400 tok/s | elapsed 1:15 | ETA 0:20");
    // 0.1 s per iteration: the evaluation is 40 s away, the snapshot 90 s: the nearer is named
    in.s_per_iter = 0.1;
    status_format(&in, b, sizeof b);
    assert_string_equal(b, "epoch 2 | iter 100/1100 | loss 1.2346 | 38400 tok/s | elapsed 1:15 | ETA 1:40 | eval in 0:40");
    in.next_eval = 1050;   // now the snapshot comes first
    status_format(&in, b, sizeof b);
    assert_non_null(strstr(b, "| ETA 1:40 | snapshot in 1:30"));
    in.next_eval = in.next_save = -1;   // neither
    status_format(&in, b, sizeof b);
    assert_null(strstr(b, " in "));
    in.s_per_iter = 0;   // not measured yet
    in.next_eval = 1000;
    status_format(&in, b, sizeof b);
    assert_string_equal(b, "epoch 2 | iter 100/1100 | loss 1.2346 | 38400 tok/s | elapsed 1:15 | ETA ?");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
