// app/runs.c — see runs.h.
#include "app/runs.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "report/run_read.h"
#include "app/run_dir.h"
#include "trainer/trainer.h"

enum { TEXT_MAX = 2048, NUM_MAX = 48, SHOWN_MAX = 6 * TEXT_MAX };

// s for the terminal: control characters escaped (report/run_read.h, text_printable), into a
// buffer of SHOWN_MAX bytes.
static const char *shown(const char *s, char *buf) {
    text_printable(s, buf, SHOWN_MAX);
    return buf;
}

typedef struct {
    char dir[TEXT_MAX];         // UTF-8 (other bytes as '?')
    char overrides[TEXT_MAX];   // joined by " "
    char status[32];
    int exit_status;            // RUN_SUMMARY_RUNNING (-1) for null or no summary
    bool has_summary;
    bool not_run;               // a job of a sweep's plan that never started
    long iters;                 // -1: unknown
    double train_loss, test_loss, tokens_per_s, wall_s;   // NaN: unknown
    int order;                  // position in the arguments (a stable sort)
} RunRow;

// Numbers the summary lacks (a run in progress or killed) from the last lines of metrics.jsonl.
static void fill_from_metrics(RunRow *r, const RunMetrics *m) {
    const MetricPoint *tr = m->n_train ? &m->train[m->n_train - 1] : NULL;
    const MetricPoint *te = m->n_test ? &m->test[m->n_test - 1] : NULL;
    long last = tr ? tr->iter : -1;
    if (te && te->iter > last) last = te->iter;
    if (r->iters < 0) r->iters = last;
    if (isnan(r->train_loss) && tr) r->train_loss = tr->loss;
    if (isnan(r->test_loss) && te) r->test_loss = te->loss;
    if (isnan(r->tokens_per_s) && tr) r->tokens_per_s = tr->tokens_per_s;
    if (isnan(r->wall_s)) r->wall_s = fmax(tr ? tr->time_s : NAN, te ? te->time_s : NAN);
}

// A loader's failure as an exit code: out of memory is a runtime failure, a bad file a usage error.
static int load_failure(int rc) { return rc == RUN_READ_NO_MEMORY ? EXIT_RUNTIME : EXIT_USAGE; }

// One run's row. Returns 0, or the exit code with the reason in err (a malformed file: 2; out
// of memory: 1).
static int load_row(const char *dir, RunRow *r, char *err, size_t errlen) {
    SummaryInfo s;
    char ov[TEXT_MAX];
    int rc = summary_load(dir, &s, err, errlen);
    if (rc != 0 && rc != RUN_READ_ABSENT) return load_failure(rc);
    r->has_summary = rc == 0;
    r->exit_status = s.exit_status;
    r->iters = s.iters;
    r->train_loss = s.final_train_loss;
    r->test_loss = s.test_loss;
    r->tokens_per_s = s.tokens_per_s;
    r->wall_s = s.wall_s;
    if (!r->has_summary) snprintf(r->status, sizeof r->status, "unknown");
    else if (s.exit_status == RUN_SUMMARY_RUNNING) snprintf(r->status, sizeof r->status, "running");
    else if (s.exit_status == EXIT_OK) snprintf(r->status, sizeof r->status, "ok");
    else if (s.exit_status == EXIT_INTERRUPTED) snprintf(r->status, sizeof r->status, "interrupted");
    else snprintf(r->status, sizeof r->status, "failed (%d)", s.exit_status);
    // A failed job's summary says iters 0 when it never trained; metrics say more when it did.
    if (r->iters == 0 && s.exit_status != EXIT_OK) r->iters = -1;
    RunMetrics m;
    rc = run_metrics_load(dir, &m, stderr, err, errlen);
    if (rc != 0 && rc != RUN_READ_ABSENT) return load_failure(rc);
    if (rc == 0) {
        fill_from_metrics(r, &m);
        run_metrics_free(&m);
    }
    rc = overrides_load(dir, ov, sizeof ov, err, errlen);
    if (rc != 0 && rc != RUN_READ_ABSENT) return load_failure(rc);
    text_utf8(rc == 0 ? ov : "", r->overrides, sizeof r->overrides);
    text_utf8(dir, r->dir, sizeof r->dir);
    return 0;
}

// A planned job of a sweep that never started: its directory and overrides from the plan.
static void not_run_row(const SweepJob *job, RunRow *r) {
    *r = (RunRow){.exit_status = RUN_SUMMARY_RUNNING, .not_run = true, .iters = -1, .train_loss = NAN,
                  .test_loss = NAN, .tokens_per_s = NAN, .wall_s = NAN, .order = r->order};
    snprintf(r->status, sizeof r->status, "not run");
    text_utf8(job->overrides, r->overrides, sizeof r->overrides);
    text_utf8(job->dir, r->dir, sizeof r->dir);
}

// By test loss, unknown last; argument order among equals.
static int by_test_loss(const void *a, const void *b) {
    const RunRow *x = a, *y = b;
    const bool nx = isnan(x->test_loss), ny = isnan(y->test_loss);
    if (nx != ny) return nx ? 1 : -1;
    if (!nx && x->test_loss != y->test_loss) return x->test_loss < y->test_loss ? -1 : 1;
    return (x->order > y->order) - (x->order < y->order);
}

// ========================================================================== output

static json_t *num_or_null(double x) { return isfinite(x) ? json_real(x) : json_null(); }

static int print_json(FILE *out, const RunRow *rows, int n) {
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++) {
        const RunRow *r = &rows[i];
        json_t *o = json_object();
        if (!o) { json_decref(a); return 1; }
        json_object_set_new(o, "dir", json_string(r->dir));
        json_object_set_new(o, "status", json_string(r->status));
        json_object_set_new(o, "exit_status", r->has_summary && r->exit_status >= 0 ? json_integer(r->exit_status)
                                                                                      : json_null());
        json_object_set_new(o, "overrides", json_string(r->overrides));
        json_object_set_new(o, "iters", r->iters >= 0 ? json_integer(r->iters) : json_null());
        json_object_set_new(o, "final_train_loss", num_or_null(r->train_loss));
        json_object_set_new(o, "test_loss", num_or_null(r->test_loss));
        json_object_set_new(o, "tokens_per_s", num_or_null(r->tokens_per_s));
        json_object_set_new(o, "wall_s", num_or_null(r->wall_s));
        json_array_append_new(a, o);
    }
    int rc = !a || json_dumpf(a, out, JSON_INDENT(2)) != 0 || fputc('\n', out) == EOF;
    json_decref(a);
    return rc;
}

// A CSV field per RFC 4180: quoted, inner quotes doubled.
static void csv_text(FILE *out, const char *s) {
    fputc('"', out);
    for (const char *p = s; *p; p++) {
        if (*p == '"') fputc('"', out);
        fputc(*p, out);
    }
    fputc('"', out);
}

// A number as text with fmt ("" / "-" when unknown).
static void num_text(char *buf, size_t len, double x, const char *fmt, const char *missing) {
    if (isfinite(x)) snprintf(buf, len, fmt, x);
    else snprintf(buf, len, "%s", missing);
}

// The row's numbers as text: for the table (rounded; "-" when unknown) or, exact, for CSV
// (%.17g reads back as the same double; "" when unknown).
static void row_numbers(const RunRow *r, bool exact, char f[5][NUM_MAX]) {
    const char *missing = exact ? "" : "-";
    if (r->iters >= 0) snprintf(f[0], NUM_MAX, "%ld", r->iters);
    else snprintf(f[0], NUM_MAX, "%s", missing);
    // a diverged run's numbers can be huge (1e308): fixed point while short, then 4 significant digits
    num_text(f[1], NUM_MAX, r->train_loss, exact ? "%.17g" : fabs(r->train_loss) < 1e5 ? "%.4f" : "%.4g", missing);
    num_text(f[2], NUM_MAX, r->test_loss, exact ? "%.17g" : fabs(r->test_loss) < 1e5 ? "%.4f" : "%.4g", missing);
    num_text(f[3], NUM_MAX, r->tokens_per_s, exact ? "%.17g" : fabs(r->tokens_per_s) < 1e12 ? "%.0f" : "%.4g", missing);
    num_text(f[4], NUM_MAX, r->wall_s, exact ? "%.17g" : fabs(r->wall_s) < 1e12 ? "%.1f" : "%.4g", missing);
}

static void print_csv(FILE *out, const RunRow *rows, int n) {
    static char buf[SHOWN_MAX];
    fputs("position,status,exit_status,iters,final_train_loss,test_loss,tokens_per_s,wall_s,dir,overrides\r\n", out);
    for (int i = 0; i < n; i++) {
        char f[5][NUM_MAX];
        row_numbers(&rows[i], true, f);
        fprintf(out, "%d,", i + 1);   // position: 1 = the lowest test loss
        csv_text(out, rows[i].status);
        if (rows[i].has_summary && rows[i].exit_status >= 0) fprintf(out, ",%d", rows[i].exit_status);
        else fputc(',', out);
        for (int k = 0; k < 5; k++) fprintf(out, ",%s", f[k]);
        fputc(',', out);
        csv_text(out, shown(rows[i].dir, buf));
        fputc(',', out);
        csv_text(out, shown(rows[i].overrides, buf));
        fputs("\r\n", out);
    }
}

// The table shows the overrides that differ between the runs; those they share come first.
// Returns 0, or 1 out of memory.
static int print_table(FILE *out, RunRow *rows, int n) {
    static char buf[SHOWN_MAX], dir_buf[SHOWN_MAX];
    char **texts = calloc((size_t)n + 1, sizeof *texts), common[TEXT_MAX];
    if (!texts) return 1;
    for (int i = 0; i < n; i++) texts[i] = rows[i].overrides;
    overrides_drop_common(texts, n, common, sizeof common);
    free(texts);
    if (common[0]) fprintf(out, "overrides of every run: %s\n", shown(common, buf));
    static const char *const head[] = {"#", "status", "iters", "train loss", "test loss", "tok/s", "wall s", "dir"};
    int w[8];
    for (int k = 0; k < 8; k++) w[k] = (int)strlen(head[k]);
    char (*f)[5][NUM_MAX] = calloc((size_t)n + 1, sizeof *f);
    if (!f) return 1;
    for (int i = 0; i < n; i++) {
        row_numbers(&rows[i], false, f[i]);
        char rank[16];
        int l = snprintf(rank, sizeof rank, "%d", i + 1);
        if (l > w[0]) w[0] = l;
        if ((int)strlen(rows[i].status) > w[1]) w[1] = (int)strlen(rows[i].status);
        for (int k = 0; k < 5; k++)
            if ((int)strlen(f[i][k]) > w[2 + k]) w[2 + k] = (int)strlen(f[i][k]);
        if ((int)strlen(shown(rows[i].dir, buf)) > w[7]) w[7] = (int)strlen(buf);
    }
    fprintf(out, "%*s  %-*s  %*s  %*s  %*s  %*s  %*s  %-*s  overrides\n", w[0], head[0], w[1], head[1], w[2], head[2],
            w[3], head[3], w[4], head[4], w[5], head[5], w[6], head[6], w[7], head[7]);
    for (int i = 0; i < n; i++)
        fprintf(out, "%*d  %-*s  %*s  %*s  %*s  %*s  %*s  %-*s  %s\n", w[0], i + 1, w[1], rows[i].status, w[2], f[i][0],
                w[3], f[i][1], w[4], f[i][2], w[5], f[i][3], w[6], f[i][4], w[7], shown(rows[i].dir, dir_buf),
                rows[i].overrides[0] ? shown(rows[i].overrides, buf) : "(none)");
    free(f);
    return 0;
}

// ========================================================================== the command line

enum { RUNS_JSON, RUNS_CSV, RUNS_N_FLAGS };

static const SubFlag RUNS_FLAGS[RUNS_N_FLAGS] = {
    [RUNS_JSON] = {.name = "--json", .type = SUB_SWITCH, .group = 1, .help = "a JSON array, one object per run"},
    [RUNS_CSV] = {.name = "--csv", .type = SUB_SWITCH, .group = 1, .help = "CSV (RFC 4180) with a header row"},
};

static const SubPositional RUNS_DIRS = {
    .metavar = "DIR",
    .help = "a run directory (with summary.json or metrics.jsonl) or a sweep directory (with multirun.yaml: its jobs)"};

// Appends a row to *rows (*n of them, room for *cap). Returns the new row, or NULL out of memory.
static RunRow *new_row(RunRow **rows, int *n, int *cap) {
    if (*n == *cap) {
        const int c = *cap ? 2 * *cap : 16;
        RunRow *b = realloc(*rows, (size_t)c * sizeof *b);
        if (!b) return NULL;
        *rows = b;
        *cap = c;
    }
    RunRow *r = &(*rows)[*n];
    *r = (RunRow){.order = *n};
    (*n)++;
    return r;
}

// The rows of one argument: its runs, and for a sweep with a plan the planned jobs that never
// started ("not run"). Returns 0 or the exit code after the message.
static int add_rows(char *arg, RunRow **rows, int *n, int *cap) {
    static char err[8192], buf[SHOWN_MAX];
    char **dirs;
    int n_dirs;
    int rc = run_dirs_expand(&arg, 1, &dirs, &n_dirs, err, sizeof err);
    if (rc) {
        fprintf(stderr, "mingpt runs: error: %s\n", shown(err, buf));
        return rc == 1 ? EXIT_RUNTIME : EXIT_USAGE;
    }
    for (int i = 0; i < n_dirs && !rc; i++) {
        RunRow *r = new_row(rows, n, cap);
        if (!r) {
            snprintf(err, sizeof err, "out of memory");
            rc = EXIT_RUNTIME;
        } else {
            rc = load_row(dirs[i], r, err, sizeof err);
        }
    }
    SweepJob *plan = NULL;
    size_t n_plan = 0;
    char path[4200];
    struct stat st;
    const int w = snprintf(path, sizeof path, "%s/multirun.yaml", arg);
    const bool sweep = w > 0 && (size_t)w < sizeof path && stat(path, &st) == 0 && S_ISREG(st.st_mode);
    int prc = rc || !sweep ? RUN_READ_ABSENT : sweep_plan_load(arg, &plan, &n_plan, err, sizeof err);
    if (prc != 0 && prc != RUN_READ_ABSENT) rc = load_failure(prc);
    for (size_t j = 0; !rc && j < n_plan; j++) {
        bool listed = false;
        for (int i = 0; i < n_dirs && !listed; i++) listed = !strcmp(dirs[i], plan[j].dir);
        if (listed) continue;
        RunRow *r = new_row(rows, n, cap);
        if (!r) {
            snprintf(err, sizeof err, "out of memory");
            rc = EXIT_RUNTIME;
        } else if (run_dir_is_run(plan[j].dir)) {   // a job elsewhere than directly in the sweep directory
            rc = load_row(plan[j].dir, r, err, sizeof err);
        } else {
            not_run_row(&plan[j], r);
        }
    }
    sweep_plan_free(plan, n_plan);
    run_dirs_free(dirs, n_dirs);
    if (rc) fprintf(stderr, "mingpt runs: error: %s\n", shown(err, buf));
    return rc;
}

static int runs_command(const SubArgs *a, FILE *out) {
    const bool json = a->values[RUNS_JSON].i, csv = a->values[RUNS_CSV].i;
    RunRow *rows = NULL;
    int n = 0, cap = 0, rc = 0;
    for (int i = 0; i < a->n_positional && !rc; i++) rc = add_rows(a->positional[i], &rows, &n, &cap);
    if (!rc) {
        qsort(rows, (size_t)n, sizeof *rows, by_test_loss);
        bool oom = false;
        if (json) rc = print_json(out, rows, n);
        else if (csv) print_csv(out, rows, n);
        else oom = print_table(out, rows, n) != 0;
        if (rc && !ferror(out)) oom = true;   // print_json fails on a write error or out of memory
        if (oom) fprintf(stderr, "mingpt runs: error: out of memory\n");
        // a failed write to stdout is said by main's last check (process/log.h), with its reason
        rc = oom ? EXIT_RUNTIME : EXIT_OK;
    }
    free(rows);
    return rc;
}

const Subcommand RUNS_COMMAND = {
    .name = "runs", .description = "the runs of a sweep side by side, best test loss first",
    .flags = RUNS_FLAGS, .n_flags = RUNS_N_FLAGS, .positional = &RUNS_DIRS, .dialect = SUB_ERROR,
    .usage_after = SUB_USAGE_UNKNOWN | SUB_USAGE_EXCLUSIVE | SUB_USAGE_MISSING | SUB_USAGE_NO_POSITIONAL,
    .help_lines = true, .run = runs_command,
};
