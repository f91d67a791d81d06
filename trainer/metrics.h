// trainer/metrics.h — <run dir>/metrics.jsonl: the run's numbers over time, one JSON object per
// line (jansson), written by rank 0 and flushed line by line, for scripts and `mingpt plot`.
//
//   a training line per logged iteration (the log's `epoch .. | iter ..` lines, the same numbers):
//     {"iter": 100, "epoch": 1, "loss": 2.3125, "lr": 0.0005, "grad_norm": 0.93, "loss_scale": 1.0,
//      "tokens_per_s": 37000.5, "ms_per_iter": 21.3, "mfu": null, "tokens": 3276800, "time_s": 12.5}
//   an evaluation line:
//     {"iter": 500, "epoch": 1, "test_loss": 1.95, "tokens": 16384000, "time_s": 60.1}
//
// iter: optimizer steps after that step; epoch: 1-based; tokens: training tokens of all ranks
// since iteration 0; time_s: wall seconds since the run first started (both continue across
// resumes); mfu: a fraction of trainer_config.peak_tflops x world_size, null without a peak; a
// number that is not finite is written as null. A resumed run first drops the lines past its
// snapshot's iteration (and a torn last line left by a killed writer), rewriting the file whole
// (temporary file + rename), then appends: iterations never repeat.
//
// A write that fails (disk full, a file size limit) is said once on stderr and the run goes on
// without the file, as with the log file (process/log.h).
#ifndef MINGPT_METRICS_H
#define MINGPT_METRICS_H

#include <stdbool.h>
#include <stdio.h>

#include "dist/comm.h"

typedef struct {
    FILE *f;                 // NULL: not writing (another rank, no run directory, or a failed write)
    char path[4200];
} Metrics;

// One logged training iteration.
typedef struct {
    long iter, epoch;
    double loss, lr, grad_norm, loss_scale;
    double tokens_per_s;     // since the previous training line, all ranks
    double ms_per_iter;      // since the previous training line
    double mfu;              // NaN: unknown (null)
    double tokens;           // since iteration 0, all ranks
    double time_s;           // since the run's first start
} MetricsTrain;

// What a training line's rates are measured over: the iterations since the previous line (or
// since the epoch began), and the constants that turn them into MFU.
typedef struct {
    bool show_comm;          // data-parallel: the log line shows the all-reduce times
    double flops_per_token;  // training FLOPs per token (model/gpt_cost.h)
    double peak_flops;       // FLOP/s of all ranks together (NaN: unknown, mfu null)
    double t0;               // monotonic seconds when the window began
    long iters;              // iterations in it
    double tokens;           // their training tokens, all ranks
    CommStats comm;          // their gradient all-reduces (show_comm)
} MetricsWindow;

// Empties the window: it begins at monotonic time now (the constants stay).
void metrics_window_start(MetricsWindow *w, double now);

// Opens <dir>/metrics.jsonl. keep_iter is the iteration the run starts from (0 for a new run,
// the snapshot's when resuming): lines with a larger iter, and lines that do not parse, are
// dropped from an existing file first, each kind said in its own log line (lines past the
// snapshot's iteration, lines that are not metrics lines, a torn last line). *time_before gets the largest time_s of the lines kept
// (0 when none), the time the run had trained before this process. dir NULL: a closed Metrics
// (nothing is written). Returns 0, or -1 with a message naming the file in err (the Metrics is
// then closed and the run may go on without it).
int metrics_open(Metrics *m, const char *dir, long keep_iter, double *time_before, char *err, size_t errlen);

// Appends one training line / one evaluation line (no-op when closed).
void metrics_train(Metrics *m, const MetricsTrain *r);
void metrics_eval(Metrics *m, long iter, long epoch, double test_loss, double tokens, double time_s);

// A logged training iteration r->iter of total_iters: its log line, then its metrics.jsonl line
// (metrics_train) with the same numbers:
//   epoch 1 | iter 100/2000 | loss 2.3125 | lr 5.00e-04 | norm 0.930 | 21.3 ms/iter | 37001 tok/s
// followed, when w->show_comm, by " | all-reduce 1.2 ms/iter, 0.3 ms exposed". r's tokens_per_s,
// ms_per_iter and mfu are set here from the window w (w->iters >= 1), which ends at monotonic time
// now and then starts afresh there.
void metrics_log_train(Metrics *m, MetricsWindow *w, MetricsTrain *r, long total_iters, double now);

void metrics_close(Metrics *m);

#endif
