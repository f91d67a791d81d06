// report/loss_plot.c — see loss_plot.h.
#include "report/loss_plot.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/log.h"
#include "trainer/trainer.h"

enum { LABEL_MAX = 1024 };

static const char *const X_NAMES[] = {"iter", "tokens", "time"};
static const char *const X_LABELS[] = {"iteration", "training tokens", "training time (s)"};

static double x_of(const MetricPoint *p, LossX x) {
    return x == LOSS_X_ITER ? (double)p->iter : x == LOSS_X_TOKENS ? p->tokens : p->time_s;
}

// One curve's coordinates (malloc'd into *xs, *ys); returns the number of points with a finite x.
static size_t coords(const MetricPoint *p, size_t n, LossX x, double **xs, double **ys) {
    *xs = malloc((n ? n : 1) * sizeof **xs);
    *ys = malloc((n ? n : 1) * sizeof **ys);
    if (!*xs || !*ys) abort();
    size_t finite = 0;
    for (size_t i = 0; i < n; i++) {
        (*xs)[i] = x_of(&p[i], x);
        (*ys)[i] = p[i].loss;
        finite += isfinite((*xs)[i]) && isfinite((*ys)[i]);
    }
    return finite;
}

int plot_runs(const RunCurves *runs, size_t n, LossX x, bool log_y, const char *title, const char *path, char *err,
              size_t errlen) {
    PlotSeries *series = calloc(2 * n + 1, sizeof *series);
    const char **legend = calloc(n + 1, sizeof *legend);
    char (*labels)[2][LABEL_MAX] = calloc(n + 1, sizeof *labels);
    if (!series || !legend || !labels) abort();
    size_t k = 0, points = 0;
    for (size_t r = 0; r < n; r++) {
        legend[r] = runs[r].label;
        snprintf(labels[r][0], LABEL_MAX, "%.1000s (train)", runs[r].label);
        snprintf(labels[r][1], LABEL_MAX, "%.1000s (test)", runs[r].label);
        for (int test = 0; test < 2; test++) {
            const MetricPoint *p = test ? runs[r].m->test : runs[r].m->train;
            const size_t np = test ? runs[r].m->n_test : runs[r].m->n_train;
            if (!np) continue;
            double *xs, *ys;
            points += coords(p, np, x, &xs, &ys);
            series[k++] = (PlotSeries){.label = labels[r][test], .x = xs, .y = ys, .n = np, .color = (int)r,
                                       .dash = test ? PLOT_DASHED : PLOT_SOLID};
        }
    }
    int rc;
    if (!points) {
        snprintf(err, errlen, "%s: nothing to plot: no metrics line has a loss and \"%s\"", path,
                 x == LOSS_X_ITER ? "iter" : x == LOSS_X_TOKENS ? "tokens" : "time_s");
        rc = 1;
    } else {
        char ylabel[64];
        snprintf(ylabel, sizeof ylabel, "loss%s", log_y ? " (log scale)" : "");
        PlotSpec spec = {.title = title, .x_label = X_LABELS[x], .y_label = ylabel, .log_y = log_y, .series = series,
                         .n_series = k, .legend = legend, .n_legend = n};
        rc = plot_write(&spec, path, err, errlen);
    }
    for (size_t i = 0; i < k; i++) {
        free((void *)series[i].x);
        free((void *)series[i].y);
    }
    free(series);
    free(legend);
    free(labels);
    return rc;
}

// A run's overrides as one line of UTF-8 ("" when it has none or no overrides.yaml).
static void run_overrides(const char *dir, char *out, size_t len) {
    char ov[LABEL_MAX], err[512];
    if (overrides_load(dir, ov, sizeof ov, err, sizeof err) != 0) ov[0] = 0;
    text_utf8(ov, out, len);
}

// A label that is still empty: the run directory's name.
static void label_or_dir(char *label, const char *dir) {
    if (label[0]) return;
    const char *slash = strrchr(dir, '/');
    text_utf8(slash && slash[1] ? slash + 1 : dir, label, LABEL_MAX);
}

int report_loss_svg(const char *run_dir, bool log_y, char *err, size_t errlen) {
    RunMetrics m;
    int rc = run_metrics_load(run_dir, &m, NULL, err, errlen);
    if (rc == RUN_READ_ABSENT) return LOSS_SVG_NO_DATA;
    if (rc) return 1;
    char label[LABEL_MAX], title[LABEL_MAX + 16], path[4200];
    run_overrides(run_dir, label, sizeof label);
    label_or_dir(label, run_dir);
    snprintf(title, sizeof title, "loss: %s", label);
    RunCurves run = {.label = label, .m = &m};
    if (snprintf(path, sizeof path, "%s/loss.svg", run_dir) >= (int)sizeof path) {
        snprintf(err, errlen, "path too long: %s/loss.svg", run_dir);
        rc = 1;
    } else {
        rc = m.n_train + m.n_test ? plot_runs(&run, 1, LOSS_X_ITER, log_y, title, path, err, errlen) : LOSS_SVG_NO_DATA;
    }
    run_metrics_free(&m);
    return rc;
}

void report_loss_svg_hook(void *warned, const char *run_dir, const Config *cfg) {
    char err[4400];
    bool *said = warned;
    const int rc = report_loss_svg(run_dir, cfg->trainer.plot_log_scale, err, sizeof err);
    if (rc == 0 || rc == LOSS_SVG_NO_DATA || (rc == PLOT_NO_LIBRARY && *said)) return;
    log_error("mingpt: warning: loss.svg is not drawn: %s; training goes on\n", err);
    *said |= rc == PLOT_NO_LIBRARY;
}

// ========================================================================== mingpt plot

static void plot_usage(FILE *f) {
    fprintf(f, "usage: mingpt plot DIR... [--out F.svg|F.png] [--x iter|tokens|time] [--log]\n"
               "  DIR       a run directory (with metrics.jsonl) or a sweep directory (with multirun.yaml: its jobs)\n"
               "  --out F   the file to write, SVG or PNG by its extension (default plot.svg)\n"
               "  --x X     the x axis: iter (default), tokens (training tokens) or time (training seconds)\n"
               "  --log     the loss on a log scale\n");
}

typedef struct {
    char **dirs;      // positional arguments
    int n_dirs;
    const char *out;
    LossX x;
    bool log_y;
} PlotArgs;

// Parses argv (after "plot"). Returns 0, -1 for --help (printed), or 2 after a usage message.
static int parse_plot_args(int argc, char **argv, PlotArgs *a, FILE *out) {
    *a = (PlotArgs){.out = "plot.svg", .x = LOSS_X_ITER};
    a->dirs = calloc((size_t)argc + 1, sizeof *a->dirs);
    if (!a->dirs) abort();
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const bool takes = !strcmp(arg, "--out") || !strcmp(arg, "--x");
        if (takes && i + 1 >= argc) {
            fprintf(stderr, "mingpt plot: error: %s needs a value\n", arg);
            return 2;
        }
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            plot_usage(out);
            return -1;
        } else if (!strcmp(arg, "--log")) {
            a->log_y = true;
        } else if (!strcmp(arg, "--out")) {
            a->out = argv[++i];
        } else if (!strcmp(arg, "--x")) {
            const char *v = argv[++i];
            int k = 0;
            while (k < 3 && strcmp(v, X_NAMES[k])) k++;
            if (k == 3) {
                fprintf(stderr, "mingpt plot: error: --x '%s': expected iter, tokens or time\n", v);
                return 2;
            }
            a->x = (LossX)k;
        } else if (arg[0] == '-' && arg[1]) {
            fprintf(stderr, "mingpt plot: error: unknown option '%s'\n", arg);
            plot_usage(stderr);
            return 2;
        } else {
            a->dirs[a->n_dirs++] = argv[i];
        }
    }
    if (!a->n_dirs) {
        plot_usage(stderr);
        return 2;
    }
    if (plot_format_of(a->out) < 0) {
        fprintf(stderr, "mingpt plot: error: --out '%s': the file name must end in .svg or .png\n", a->out);
        return 2;
    }
    return 0;
}

// The runs the arguments name, their metrics and labels. A directory named on the command line
// must have metrics.jsonl; a sweep's job without one (failed before training) is skipped with a
// warning. Returns 0 or the exit code (after the message).
static int load_runs(const PlotArgs *a, char ***dirs, int *n, RunMetrics **m, char (**labels)[LABEL_MAX]) {
    char err[8192];
    *dirs = NULL;
    *n = 0;
    *m = NULL;
    *labels = NULL;
    for (int i = 0; i < a->n_dirs; i++) {
        char **found;
        int n_found;
        int rc = run_dirs_expand(&a->dirs[i], 1, &found, &n_found, err, sizeof err);
        if (rc) {
            fprintf(stderr, "mingpt plot: error: %s\n", err);
            return rc;
        }
        const bool sweep = n_found > 1 || strncmp(found[0], a->dirs[i], strlen(found[0])) != 0;
        *m = realloc(*m, (size_t)(*n + n_found) * sizeof **m);
        *labels = realloc(*labels, (size_t)(*n + n_found) * sizeof **labels);
        *dirs = realloc(*dirs, (size_t)(*n + n_found) * sizeof **dirs);
        if (!*m || !*labels || !*dirs) abort();
        for (int j = 0; j < n_found; j++) {
            rc = run_metrics_load(found[j], &(*m)[*n], stderr, err, sizeof err);
            if (rc == RUN_READ_ABSENT && sweep) {
                fprintf(stderr, "mingpt plot: warning: %s has no metrics.jsonl (the job did not train): left out\n",
                        found[j]);
                free(found[j]);
                continue;
            }
            if (rc == RUN_READ_ABSENT) snprintf(err, sizeof err, "'%s' has no metrics.jsonl", found[j]);
            if (rc) {
                fprintf(stderr, "mingpt plot: error: %s\n", err);
                for (int k = j; k < n_found; k++) free(found[k]);
                free(found);
                return 2;
            }
            run_overrides(found[j], (*labels)[*n], LABEL_MAX);
            (*dirs)[(*n)++] = found[j];
        }
        free(found);
    }
    return 0;
}

int plot_main(int argc, char **argv, FILE *out) {
    PlotArgs a;
    int rc = parse_plot_args(argc, argv, &a, out);
    char **dirs = NULL;
    int n = 0;
    RunMetrics *m = NULL;
    char(*labels)[LABEL_MAX] = NULL;
    if (!rc) rc = load_runs(&a, &dirs, &n, &m, &labels);
    if (!rc && n == 0) {
        fprintf(stderr, "mingpt plot: error: no run to plot (no job has metrics.jsonl)\n");
        rc = 2;
    }
    if (!rc) {
        RunCurves *runs = calloc((size_t)n, sizeof *runs);
        char **texts = calloc((size_t)n, sizeof *texts), common[LABEL_MAX];
        if (!runs || !texts) abort();
        for (int i = 0; i < n; i++) texts[i] = labels[i];
        overrides_drop_common(texts, n, common, sizeof common);   // a legend of what differs
        free(texts);
        for (int i = 0; i < n; i++) {
            label_or_dir(labels[i], dirs[i]);
            for (int j = 0; j < i; j++)   // two runs with one label (a shell loop's hydra.run.dir): name the dirs
                if (!strcmp(labels[i], labels[j])) {
                    char d[LABEL_MAX];
                    text_utf8(dirs[i], d, sizeof d);
                    snprintf(labels[i] + strlen(labels[i]), LABEL_MAX - strlen(labels[i]), " [%s]", d);
                    break;
                }
            runs[i] = (RunCurves){.label = labels[i], .m = &m[i]};
        }
        char err[8192], title[64];
        snprintf(title, sizeof title, "loss of %d run%s", n, n == 1 ? "" : "s");
        rc = plot_runs(runs, (size_t)n, a.x, a.log_y, title, a.out, err, sizeof err);
        if (rc) fprintf(stderr, "mingpt plot: error: %s\n", err);
        else fprintf(out, "%s: %d run%s\n", a.out, n, n == 1 ? "" : "s");
        rc = rc ? EXIT_RUNTIME : EXIT_OK;
        free(runs);
    }
    for (int i = 0; i < n; i++) run_metrics_free(&m[i]);
    run_dirs_free(dirs, n);
    free(m);
    free(labels);
    free(a.dirs);
    return rc < 0 ? EXIT_OK : rc;
}
