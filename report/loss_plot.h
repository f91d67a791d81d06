// report/loss_plot.h — loss curves of runs: a run's own loss.svg (written by the trainer) and
// those `mingpt plot` draws (app/plot.h), both read from the runs' metrics.jsonl
// (report/run_read.h) and drawn by the plot library (report/plot.h).
#ifndef MINGPT_LOSS_PLOT_H
#define MINGPT_LOSS_PLOT_H

#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"
#include "report/plot.h"
#include "report/run_read.h"

// The x axis: metrics.jsonl's "iter", "tokens" or "time_s".
typedef enum { LOSS_X_ITER = 0, LOSS_X_TOKENS = 1, LOSS_X_TIME = 2 } LossX;

// The size of a run's label, with its terminating 0 (longer ones are cut).
enum { LOSS_LABEL_MAX = 1024 };

// One run's curves and its legend label.
typedef struct {
    const char *label;
    const RunMetrics *m;
} RunCurves;

// Draws each run's training loss (solid) and test loss (dashed, marked points), one colour a
// run, against x, into path (.svg or .png; plot_write), width x height (0: PLOT_DEFAULT_W/H)
// without the legend. Returns plot_write's result (0; 1 with err, also out of memory; PLOT_NO_LIBRARY).
int plot_runs(const RunCurves *runs, size_t n, LossX x, bool log_y, int width, int height, const char *title,
              const char *path, char *err, size_t errlen);

// Returned by report_loss_svg when the run has no metrics.jsonl yet (nothing drawn, not an error).
#define LOSS_SVG_NO_DATA 3

// Rewrites <run_dir>/loss.svg (through a temporary file and a rename) from
// <run_dir>/metrics.jsonl: the run's train and test loss against iterations, titled with its
// overrides; log_y: a log10 loss axis. The trainer calls it on rank 0 after each evaluation and
// at the end; a failure is the caller's warning, never a reason to stop. Returns 0,
// LOSS_SVG_NO_DATA, PLOT_NO_LIBRARY, or 1 with the reason in err.
int report_loss_svg(const char *run_dir, bool log_y, char *err, size_t errlen);

// The trainer's hook after each evaluation and at the end (TrainerHook.after_eval,
// trainer/trainer.h; app/hydra_app.c passes it): report_loss_svg(run_dir, cfg->trainer.plot_log_scale);
// a failure is a warning on stderr, a missing plot library said only once while *warned (a bool,
// false at the start of a run) is false. Nothing drawn yet (LOSS_SVG_NO_DATA) is silent.
void report_loss_svg_hook(void *warned, const char *run_dir, const Config *cfg);

// A run's label from its directory: its overrides (.hydra/overrides.yaml) as one line of UTF-8
// into out (len bytes, LOSS_LABEL_MAX is enough), numbers normalised (overrides_normalize_numbers:
// lr=1e-3 and lr=0.001 read alike); "" when it has none or no overrides.yaml.
void loss_label_overrides(const char *dir, char *out, size_t len);

// A label (len bytes) that is still "" becomes the run directory's name (its last component; bytes
// that are not UTF-8 as '?'); one that is not stays as it is.
void loss_label_or_dir(char *label, size_t len, const char *dir);

#endif
