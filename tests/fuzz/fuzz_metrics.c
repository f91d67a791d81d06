// tests/fuzz/fuzz_metrics.c — libFuzzer target for metrics.jsonl's reader (run_metrics_parse,
// report/run_read.h), which `mingpt plot`, `mingpt runs` and a run's loss.svg share.
//
// Input: the file's bytes. Checked: the parse succeeds (only out of memory may fail), every
// point taken has iter >= 0, and no more points are taken or lines skipped than the input has
// lines (a line gives at most one training and one test point). A violated invariant aborts,
// which the fuzzer reports as a crash.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/run_read.h"

#define CHECK(cond) do { \
    if (!(cond)) { fprintf(stderr, "fuzz_metrics: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); abort(); } \
} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    RunMetrics m;
    char err[256];
    CHECK(run_metrics_parse((const char *)data, size, "fuzz", &m, NULL, err, sizeof err) == 0);
    size_t lines = size > 0;
    for (size_t i = 0; i < size; i++) lines += data[i] == '\n' && i + 1 < size;
    CHECK(m.n_train <= lines && m.n_test <= lines && m.n_skipped <= lines);
    for (size_t i = 0; i < m.n_train; i++) CHECK(m.train[i].iter >= 0);
    for (size_t i = 0; i < m.n_test; i++) CHECK(m.test[i].iter >= 0);
    run_metrics_free(&m);
    return 0;
}
