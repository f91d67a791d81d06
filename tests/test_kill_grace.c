// tests/test_kill_grace.c — mpirun's SIGTERM-to-SIGKILL grace (dist/kill_grace.h): read from
// the environment mpirun gives the ranks, and the warning when one iteration plus a save does
// not fit in it. (The warning of a real mpirun job is tests/ddp/test_ddp_faults.sh's.)
#include "tests/test_util.h"

#include <stdlib.h>

#include "dist/kill_grace.h"

static void test_grace_from_env(void **state) {
    unsetenv("OMPI_MCA_orte_hnp_uri");
    setenv("OMPI_MCA_odls_base_sigkill_timeout", "30", 1);
    assert_true(kill_grace_mpirun() == -1);   // not started by mpirun: no grace to check
    setenv("OMPI_MCA_orte_hnp_uri", "1.0;tcp://127.0.0.1:1", 1);
    assert_true(kill_grace_mpirun() == 30);
    unsetenv("OMPI_MCA_odls_base_sigkill_timeout");
    assert_true(kill_grace_mpirun() == 1);    // Open MPI 4.1's default
    setenv("OMPI_MCA_odls_base_sigkill_timeout", "x", 1);
    assert_true(kill_grace_mpirun() == -1);
    unsetenv("OMPI_MCA_odls_base_sigkill_timeout");
    unsetenv("OMPI_MCA_orte_hnp_uri");
}

static void test_warning(void **state) {
    char b[1024] = "untouched";
    // 0.5 s + 0.3 s fits in 1 s; no grace known: nothing
    assert_false(kill_grace_warning(1, 0.5, 0.3, true, 1e6, 0, b, sizeof b));
    assert_false(kill_grace_warning(-1, 50, 50, true, 1e6, 0, b, sizeof b));
    assert_string_equal(b, "untouched");
    // 2 s + 1.5 s against 1 s: names the grace, the estimate, the loss and the fix (2 x 3.5 + 1)
    assert_true(kill_grace_warning(1, 2, 1.5, true, 1e6, 50, b, sizeof b));
    assert_non_null(strstr(b, "mpirun kills the ranks 1 s after SIGTERM (odls_base_sigkill_timeout)"));
    assert_non_null(strstr(b, "~3.5 s here (iteration 2 s, save 1.5 s)"));
    assert_non_null(strstr(b, "up to save_every_iters = 50 iterations"));
    assert_non_null(strstr(b, "--mca odls_base_sigkill_timeout 8"));
    // a save not timed yet: estimated from the snapshot's size
    assert_true(kill_grace_warning(1, 0.9, 0.2, false, 20e6, 0, b, sizeof b));
    assert_non_null(strstr(b, "save of 20 MB ~0.2 s"));
    assert_non_null(strstr(b, "save_every_iters = 0"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grace_from_env),
        cmocka_unit_test(test_warning),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
