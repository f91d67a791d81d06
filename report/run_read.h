// report/run_read.h — reading back what a run directory holds (app/run_dir.h writes it):
// metrics.jsonl, summary.json and .hydra/overrides.yaml, for `mingpt plot`, `mingpt runs` and a
// run's loss.svg. Every file goes through checkpoint/file_read.h with a size cap and is parsed by a
// library (jansson, libyaml through config/cfg_yaml.h); nothing in a file is trusted.
#ifndef MINGPT_RUN_READ_H
#define MINGPT_RUN_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

// Size caps: metrics.jsonl (about 250 bytes a logged iteration), summary.json, overrides.yaml.
#define RUN_READ_MAX_METRICS (512u << 20)
#define RUN_READ_MAX_SMALL (1u << 20)

// Returned by the loaders when the file does not exist (not an error for a run still starting).
#define RUN_READ_ABSENT 2

// One line of metrics.jsonl (docs/runs.md, "metrics.jsonl"): NaN where the line has no such number.
typedef struct {
    long iter;       // optimizer steps after this line's step
    double loss;     // "loss" (training lines) or "test_loss" (evaluation lines)
    double tokens;   // training tokens over all ranks since iteration 0
    double time_s;   // training wall seconds since the run's first start
    double tokens_per_s;
} MetricPoint;

typedef struct {
    MetricPoint *train;   // lines with "loss", in file order
    size_t n_train;
    MetricPoint *test;    // lines with "test_loss"
    size_t n_test;
    size_t n_skipped;     // lines that did not parse (each warned about)
} RunMetrics;

// Parses metrics.jsonl text (len bytes; `name` for messages). A line that is not a JSON object
// with an integer "iter" >= 0 and a number "loss" or "test_loss" is skipped with one warning
// on `warn` (may be NULL) naming the file and line, e.g. a torn last line of a killed run; a
// line with neither key (a later kind of line) is ignored silently; unknown keys are ignored.
// Returns 0, or 1 (out of memory, message in err).
int run_metrics_parse(const char *text, size_t len, const char *name, RunMetrics *m, FILE *warn, char *err, size_t errlen);

// <dir>/metrics.jsonl into m. Returns 0, RUN_READ_ABSENT (no such file), or 1 with the reason
// in err (not a regular file, larger than RUN_READ_MAX_METRICS, unreadable).
int run_metrics_load(const char *dir, RunMetrics *m, FILE *warn, char *err, size_t errlen);
void run_metrics_free(RunMetrics *m);

// exit_status of the summary a job writes first, before it trains (app/run_dir.h): "exit_status": null.
#define RUN_SUMMARY_RUNNING (-1)

// summary.json's numbers; NaN (or exit_status RUN_SUMMARY_RUNNING, -1) for null or absent.
typedef struct {
    int exit_status;
    double final_train_loss, test_loss, tokens_per_s, wall_s;
    long iters;   // -1 when absent
} SummaryInfo;

// <dir>/summary.json into s. Returns 0, RUN_READ_ABSENT, or 1 with the reason in err (not
// JSON, not an object, a field of the wrong type, too large).
int summary_load(const char *dir, SummaryInfo *s, char *err, size_t errlen);

// The task overrides of <dir>/.hydra/overrides.yaml (a YAML list of strings) joined by " "
// into out ("" for an empty list). Returns 0, RUN_READ_ABSENT, or 1 with the reason in err.
int overrides_load(const char *dir, char *out, size_t outlen, char *err, size_t errlen);

// The run directories named by args: a directory with summary.json or metrics.jsonl is a run;
// one with multirun.yaml is a sweep and stands for its job directories (its sub-directories
// holding summary.json or metrics.jsonl, numeric names in number order, then the rest by name).
// *dirs (malloc'd strings in a malloc'd array, free with run_dirs_free) gets them in order.
// Returns 0, or 2 (a usage error: the argument that is neither, or a sweep without a job) with
// err set; 1 on out of memory.
int run_dirs_expand(char *const *args, int n, char ***dirs, int *n_dirs, char *err, size_t errlen);
void run_dirs_free(char **dirs, int n);

// Drops from each of the n texts (space-separated overrides) the words that all of them have,
// so that labels show what differs between runs; those words go into common (joined by " ";
// cut at common_len). With fewer than 2 texts nothing changes.
void overrides_drop_common(char **texts, int n, char *common, size_t common_len);

// Copies s into out (len bytes) with every byte that is not part of valid UTF-8 replaced by '?'
// (a directory name may hold any bytes; cairo and JSON take UTF-8 only).
void text_utf8(const char *s, char *out, size_t len);

#endif
