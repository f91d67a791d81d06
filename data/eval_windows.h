// data/eval_windows.h — which test windows an evaluation predicts (data_config.eval_stride).
//
// Window p predicts the characters p+1 .. p+T from contexts of 0 .. T-1 characters. With the
// contiguous split the test windows start at consecutive positions (DataSplit.test[i] =
// test[0] + i); stride k in [1, T] keeps the windows i = 0, k, 2k, ... and, when the last of
// them is not the last test window, adds that last window (aligned to the end of the split)
// with its first targets set to -1 (ignore_index): those the strided windows already predict.
// Every test target is then predicted at least once; with k = T exactly once, the windows
// tiling the split (1/T of the cost of k = 1, every overlapping window, each target T times).
// Both estimate the same expected loss, the mean next-character loss with the context length
// uniform over 0 .. T-1.
// With the random split the test windows are a random subset of positions, which no stride
// can tile: stride k keeps every k-th of them in position order (an unbiased 1/k subsample),
// no tail window; k = 1 keeps all of them in the split's order.
#ifndef MINGPT_EVAL_WINDOWS_H
#define MINGPT_EVAL_WINDOWS_H

#include <stdbool.h>
#include <stdint.h>

#include "data/char_dataset.h"

typedef struct {
    long *start;      // (n) dataset positions of the windows, as for chardataset_window
    long n;
    int tail_ignore;  // > 0: window n-1 is the tail window and its first tail_ignore targets are -1
} EvalWindows;

// The evaluation windows of split's test side for block_size T and stride in [1, T]
// (contiguous: DataSplit from datasplit_make's "contiguous" mode). Returns 0, or non-zero
// with a message in err (a stride outside [1, T], out of memory).
int evalwindows_make(EvalWindows *w, const DataSplit *split, bool contiguous, int T, int stride, char *err,
                     size_t errlen);

// x, y (T,) = window i of w (chardataset_window), with the tail window's ignored targets -1.
void evalwindows_get(const EvalWindows *w, const CharDataset *ds, long i, int32_t *x, int32_t *y);

void evalwindows_free(EvalWindows *w);

#endif
