// app/runs.c — see runs.h.
#include "app/runs.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "report/run_read.h"
#include "app/run_dir.h"
#include "trainer/trainer.h"

enum { TEXT_MAX = 2048 };

typedef struct {
    char dir[TEXT_MAX];         // UTF-8 (other bytes as '?')
    char overrides[TEXT_MAX];   // joined by " "
    char status[32];
    int exit_status;            // RUN_SUMMARY_RUNNING (-1) for null or no summary
    bool has_summary;
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

// One run's row. Returns 0, or 2 with the reason in err (a malformed file).
static int load_row(const char *dir, RunRow *r, char *err, size_t errlen) {
    SummaryInfo s;
    char ov[TEXT_MAX];
    int rc = summary_load(dir, &s, err, errlen);
    if (rc == 1) return 2;
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
    if (rc == 1) return 2;
    if (rc == 0) {
        fill_from_metrics(r, &m);
        run_metrics_free(&m);
    }
    rc = overrides_load(dir, ov, sizeof ov, err, errlen);
    if (rc == 1) return 2;
    text_utf8(rc == 0 ? ov : "", r->overrides, sizeof r->overrides);
    text_utf8(dir, r->dir, sizeof r->dir);
    return 0;
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
static void row_numbers(const RunRow *r, bool exact, char f[5][32]) {
    const char *missing = exact ? "" : "-";
    if (r->iters >= 0) snprintf(f[0], 32, "%ld", r->iters);
    else snprintf(f[0], 32, "%s", missing);
    // a diverged run's loss can be huge: fixed point up to 1e5, then 4 significant digits
    num_text(f[1], 32, r->train_loss, exact ? "%.17g" : fabs(r->train_loss) < 1e5 ? "%.4f" : "%.4g", missing);
    num_text(f[2], 32, r->test_loss, exact ? "%.17g" : fabs(r->test_loss) < 1e5 ? "%.4f" : "%.4g", missing);
    num_text(f[3], 32, r->tokens_per_s, exact ? "%.17g" : "%.0f", missing);
    num_text(f[4], 32, r->wall_s, exact ? "%.17g" : "%.1f", missing);
}

static void print_csv(FILE *out, const RunRow *rows, int n) {
    fputs("position,status,exit_status,iters,final_train_loss,test_loss,tokens_per_s,wall_s,dir,overrides\r\n", out);
    for (int i = 0; i < n; i++) {
        char f[5][32];
        row_numbers(&rows[i], true, f);
        fprintf(out, "%d,", i + 1);   // position: 1 = the lowest test loss
        csv_text(out, rows[i].status);
        if (rows[i].has_summary && rows[i].exit_status >= 0) fprintf(out, ",%d", rows[i].exit_status);
        else fputc(',', out);
        for (int k = 0; k < 5; k++) fprintf(out, ",%s", f[k]);
        fputc(',', out);
        csv_text(out, rows[i].dir);
        fputc(',', out);
        csv_text(out, rows[i].overrides);
        fputs("\r\n", out);
    }
}

// The table shows the overrides that differ between the runs; those they share come first.
static void print_table(FILE *out, RunRow *rows, int n) {
    char **texts = calloc((size_t)n + 1, sizeof *texts), common[TEXT_MAX];
    if (!texts) abort();
    for (int i = 0; i < n; i++) texts[i] = rows[i].overrides;
    overrides_drop_common(texts, n, common, sizeof common);
    free(texts);
    if (common[0]) fprintf(out, "overrides of every run: %s\n", common);
    static const char *const head[] = {"#", "status", "iters", "train loss", "test loss", "tok/s", "wall s", "dir"};
    int w[8];
    for (int k = 0; k < 8; k++) w[k] = (int)strlen(head[k]);
    char (*f)[5][32] = calloc((size_t)n + 1, sizeof *f);
    if (!f) abort();
    for (int i = 0; i < n; i++) {
        row_numbers(&rows[i], false, f[i]);
        char rank[16];
        int l = snprintf(rank, sizeof rank, "%d", i + 1);
        if (l > w[0]) w[0] = l;
        if ((int)strlen(rows[i].status) > w[1]) w[1] = (int)strlen(rows[i].status);
        for (int k = 0; k < 5; k++)
            if ((int)strlen(f[i][k]) > w[2 + k]) w[2 + k] = (int)strlen(f[i][k]);
        if ((int)strlen(rows[i].dir) > w[7]) w[7] = (int)strlen(rows[i].dir);
    }
    fprintf(out, "%*s  %-*s  %*s  %*s  %*s  %*s  %*s  %-*s  overrides\n", w[0], head[0], w[1], head[1], w[2], head[2],
            w[3], head[3], w[4], head[4], w[5], head[5], w[6], head[6], w[7], head[7]);
    for (int i = 0; i < n; i++)
        fprintf(out, "%*d  %-*s  %*s  %*s  %*s  %*s  %*s  %-*s  %s\n", w[0], i + 1, w[1], rows[i].status, w[2], f[i][0],
                w[3], f[i][1], w[4], f[i][2], w[5], f[i][3], w[6], f[i][4], w[7], rows[i].dir,
                rows[i].overrides[0] ? rows[i].overrides : "(none)");
    free(f);
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

static int runs_command(const SubArgs *a, FILE *out) {
    const bool json = a->values[RUNS_JSON].i, csv = a->values[RUNS_CSV].i;
    char **dirs, err[8192];
    int n;
    int rc = run_dirs_expand(a->positional, a->n_positional, &dirs, &n, err, sizeof err);
    if (rc) {
        fprintf(stderr, "mingpt runs: error: %s\n", err);
        return rc == 1 ? EXIT_RUNTIME : EXIT_USAGE;
    }
    RunRow *rows = calloc((size_t)n + 1, sizeof *rows);
    if (!rows) abort();
    for (int i = 0; i < n && !rc; i++) {
        rows[i].order = i;
        if (load_row(dirs[i], &rows[i], err, sizeof err)) {
            fprintf(stderr, "mingpt runs: error: %s\n", err);
            rc = EXIT_USAGE;
        }
    }
    run_dirs_free(dirs, n);
    if (!rc) {
        qsort(rows, (size_t)n, sizeof *rows, by_test_loss);
        if (json) rc = print_json(out, rows, n);
        else if (csv) print_csv(out, rows, n);
        else print_table(out, rows, n);
        // a failed write to stdout is said by main's last check (trainer/log.h), with its reason
        if (rc && !ferror(out)) fprintf(stderr, "mingpt runs: error: out of memory\n");
        rc = rc && !ferror(out) ? EXIT_RUNTIME : EXIT_OK;
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
