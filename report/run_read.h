// report/run_read.h — reading back what a run directory holds (app/run_dir.h writes it):
// metrics.jsonl, summary.json and .hydra/overrides.yaml, for `mingpt plot`, `mingpt runs` and a
// run's loss.svg. Every file goes through checkpoint/file_read.h with a size cap and is parsed by a
// library (jansson, libyaml through config/cfg_yaml.h); nothing in a file is trusted.
#ifndef MINGPT_RUN_READ_H
#define MINGPT_RUN_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

// Size cap of summary.json and overrides.yaml. metrics.jsonl has none: it is read line by line
// and decimated while it is read (RunMetrics), so its size does not matter.
#define RUN_READ_MAX_SMALL (1u << 20)

// The longest metrics.jsonl line read (a longer one is skipped with a warning).
#define RUN_READ_MAX_LINE (1 << 16)

// Buckets a series of metrics.jsonl is decimated into (RunMetrics): at most twice as many points
// (plus the first and the last line) are kept a series; a series up to twice as long is kept whole.
#define RUN_READ_MAX_BUCKETS 2048

// Returned by the loaders when the file does not exist (not an error for a run still starting).
#define RUN_READ_ABSENT 2

// Returned by the loaders when memory runs out (a runtime failure, not a bad file).
#define RUN_READ_NO_MEMORY 4

// One line of metrics.jsonl (docs/runs.md, "metrics.jsonl"): NaN where the line has no such number.
typedef struct {
    long iter;       // optimizer steps after this line's step
    double loss;     // "loss" (training lines) or "test_loss" (evaluation lines)
    double tokens;   // training tokens over all ranks since iteration 0
    double time_s;   // training wall seconds since the run's first start
    double tokens_per_s;
    size_t line;     // its line number in the file (1 = the first)
} MetricPoint;

// A run's curves, decimated while they are read: each series (training lines, evaluation lines)
// keeps its first and last line and, of every bucket of consecutive lines, the points of lowest
// and highest loss, with RUN_READ_MAX_BUCKETS buckets at most (their width doubles as the file
// grows). A series of up to 2 * RUN_READ_MAX_BUCKETS lines is kept whole.
typedef struct {
    MetricPoint *train;   // lines with "loss", in file order (decimated)
    size_t n_train;
    MetricPoint *test;    // lines with "test_loss" (decimated)
    size_t n_test;
    size_t n_skipped;     // lines that did not parse (each warned about)
    size_t n_train_lines, n_test_lines;   // the lines read of each series, before decimation
} RunMetrics;

// Parses metrics.jsonl text (len bytes; `name` for messages). A line that is not a JSON object
// with an integer "iter" >= 0 and a number "loss" or "test_loss" is skipped with one warning
// on `warn` (may be NULL) naming the file and line, e.g. a torn last line of a killed run; a
// line with neither key (a later kind of line) is ignored silently; unknown keys are ignored.
// Returns 0, or RUN_READ_NO_MEMORY (message in err).
int run_metrics_parse(const char *text, size_t len, const char *name, RunMetrics *m, FILE *warn, char *err, size_t errlen);

// <dir>/metrics.jsonl into m, read line by line (a line longer than RUN_READ_MAX_LINE is skipped
// with a warning) in memory that does not grow with the file. A FIFO is never opened for
// reading (it would block). Returns 0, RUN_READ_ABSENT (no such file), RUN_READ_NO_MEMORY, or 1
// with the reason in err (not a regular file, unreadable).
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
// holding summary.json or metrics.jsonl, numeric names in number order, then the rest by name;
// none at all only when it has its plan, SWEEP_PLAN_FILE). A directory that is neither, where
// metrics.jsonl or summary.json is something other than a file (a FIFO, a directory, a symbolic
// link loop), is refused for that ("'d/metrics.jsonl' is a FIFO, not a file"); nothing is opened.
// *dirs (malloc'd strings in a malloc'd array, free with run_dirs_free) gets them in order.
// Returns 0, or 2 (a usage error: the argument that is neither, or a sweep without a job) with
// err set; 1 on out of memory.
int run_dirs_expand(char *const *args, int n, char ***dirs, int *n_dirs, char *err, size_t errlen);
void run_dirs_free(char **dirs, int n);

// Whether dir holds summary.json or metrics.jsonl as regular files (a run, started or done).
bool run_dir_is_run(const char *dir);

// A sweep's plan: <sweep dir>/SWEEP_PLAN_FILE, which `-m` writes before its first job starts
// (app/run_dir.h), a YAML list with one map per job in launch order: num (hydra.job.num), subdir
// (its directory, relative to the sweep's), overrides (its task overrides, a list of strings).
// It is in .hydra/ (hidden, like a job's own record): the sweep directory itself keeps Hydra's
// layout, multirun.yaml and the job directories.
#define SWEEP_PLAN_DIR ".hydra"
#define SWEEP_PLAN_FILE ".hydra/jobs.yaml"
#define RUN_READ_MAX_PLAN (64u << 20)

typedef struct {
    char *dir;         // the job's directory: <sweep>/<subdir>
    char *overrides;   // its task overrides joined by " "
} SweepJob;

// The jobs of <sweep>/SWEEP_PLAN_FILE into *jobs (free with sweep_plan_free). Returns 0,
// RUN_READ_ABSENT (no plan: a sweep of an older mingpt), RUN_READ_NO_MEMORY, or 1 with the
// reason in err (not a list of jobs, too large).
int sweep_plan_load(const char *sweep, SweepJob **jobs, size_t *n, char *err, size_t errlen);
void sweep_plan_free(SweepJob *jobs, size_t n);

// Drops from each of the n texts (space-separated overrides) the words that all of them have,
// so that labels show what differs between runs; those words go into common (joined by " ";
// cut at common_len). With fewer than 2 texts nothing changes.
void overrides_drop_common(char **texts, int n, char *common, size_t common_len);

// Rewrites in place (text has len bytes of room) each key=value word of text (space-separated
// overrides) whose value is a decimal number as its shortest %g form that reads back as the same
// double, so that lr=1e-3, lr=0.001 and lr=1.0e-3 all read lr=0.001 (and 1e9 reads 1e+09). Other
// words stay; text stays whole when the result would not fit or memory runs out.
void overrides_normalize_numbers(char *text, size_t len);

// Copies s into out (len bytes) with every byte that is not part of valid UTF-8 replaced by '?'
// (a directory name may hold any bytes; cairo and JSON take UTF-8 only).
void text_utf8(const char *s, char *out, size_t len);

// Copies s into out (len bytes; cut at a character) for a terminal: like text_utf8, and control
// characters escaped, so that a run file's bytes are shown and never obeyed (ESC as "\033", C1
// controls as "\u0085"). Each byte of s takes at most 6 bytes of out.
void text_printable(const char *s, char *out, size_t len);

#endif
