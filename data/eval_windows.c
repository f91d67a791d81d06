// data/eval_windows.c — see eval_windows.h.
#include "data/eval_windows.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_long(const void *a, const void *b) {
    const long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

int evalwindows_make(EvalWindows *w, const DataSplit *split, bool contiguous, int T, int stride, char *err,
                     size_t errlen) {
    memset(w, 0, sizeof *w);
    if (stride < 1 || stride > T) {
        snprintf(err, errlen, "evaluation stride %d must be in [1, block_size %d]", stride, T);
        return 1;
    }
    const long n_test = split->n_test, k = stride;
    const long n_strided = (n_test + k - 1) / k;   // windows 0, k, 2k, ... < n_test
    w->start = malloc(sizeof(long) * (size_t)(n_strided + 1));
    long *sorted = k > 1 && !contiguous ? malloc(sizeof(long) * (size_t)n_test) : NULL;
    if (!w->start || (k > 1 && !contiguous && !sorted)) {
        free(sorted);
        evalwindows_free(w);
        snprintf(err, errlen, "out of memory for %ld evaluation windows", n_strided + 1);
        return 1;
    }
    const long *pos = split->test;
    if (sorted) {   // random split: position order
        memcpy(sorted, split->test, sizeof(long) * (size_t)n_test);
        qsort(sorted, (size_t)n_test, sizeof(long), cmp_long);
        pos = sorted;
    }
    for (long i = 0; i < n_strided; i++) w->start[i] = pos[i * k];
    w->n = n_strided;
    const long last = (n_strided - 1) * k;
    if (contiguous && last != n_test - 1) {
        // window n_test-1 predicts positions n_test .. n_test-1+T (relative to test[0]); the
        // strided windows reach last+T, so its first last+T-(n_test-1) targets are predicted
        w->start[w->n++] = pos[n_test - 1];
        w->tail_ignore = (int)(last + T - (n_test - 1));
    }
    free(sorted);
    return 0;
}

void evalwindows_get(const EvalWindows *w, const CharDataset *ds, long i, int32_t *x, int32_t *y) {
    chardataset_window(ds, w->start[i], x, y);
    if (w->tail_ignore > 0 && i == w->n - 1)
        for (int t = 0; t < w->tail_ignore; t++) y[t] = -1;
}

void evalwindows_free(EvalWindows *w) {
    free(w->start);
    memset(w, 0, sizeof *w);
}
