// report/loss_plot.c — see loss_plot.h.
#include "report/loss_plot.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "process/log.h"

static const char *const X_LABELS[] = {"iteration", "training tokens", "training time (s)"};

static double x_of(const MetricPoint *p, LossX x) {
    return x == LOSS_X_ITER ? (double)p->iter : x == LOSS_X_TOKENS ? p->tokens : p->time_s;
}

// One curve's coordinates (malloc'd into *xs, *ys); returns the number of points with a finite
// x, or SIZE_MAX out of memory.
static size_t coords(const MetricPoint *p, size_t n, LossX x, double **xs, double **ys) {
    *xs = malloc((n ? n : 1) * sizeof **xs);
    *ys = malloc((n ? n : 1) * sizeof **ys);
    if (!*xs || !*ys) {
        free(*xs);
        free(*ys);
        return SIZE_MAX;
    }
    size_t finite = 0;
    for (size_t i = 0; i < n; i++) {
        (*xs)[i] = x_of(&p[i], x);
        (*ys)[i] = p[i].loss;
        finite += isfinite((*xs)[i]) && isfinite((*ys)[i]);
    }
    return finite;
}

int plot_runs(const RunCurves *runs, size_t n, LossX x, bool log_y, int width, int height, const char *title,
              const char *path, char *err, size_t errlen) {
    PlotSeries *series = calloc(2 * n + 1, sizeof *series);
    const char **legend = calloc(n + 1, sizeof *legend);
    char (*labels)[2][LOSS_LABEL_MAX] = calloc(n + 1, sizeof *labels);
    size_t k = 0, points = 0;
    bool oom = !series || !legend || !labels;
    for (size_t r = 0; r < n && !oom; r++) {
        legend[r] = runs[r].label;
        snprintf(labels[r][0], LOSS_LABEL_MAX, "%.1000s (train)", runs[r].label);
        snprintf(labels[r][1], LOSS_LABEL_MAX, "%.1000s (test)", runs[r].label);
        for (int test = 0; test < 2; test++) {
            const MetricPoint *p = test ? runs[r].m->test : runs[r].m->train;
            const size_t np = test ? runs[r].m->n_test : runs[r].m->n_train;
            if (!np) continue;
            double *xs, *ys;
            const size_t finite = coords(p, np, x, &xs, &ys);
            if (finite == SIZE_MAX) {
                oom = true;
                break;
            }
            points += finite;
            series[k++] = (PlotSeries){.label = labels[r][test], .x = xs, .y = ys, .n = np, .color = (int)r,
                                       .dash = test ? PLOT_DASHED : PLOT_SOLID};
        }
    }
    int rc;
    if (oom) {
        snprintf(err, errlen, "%s: out of memory", path);
        rc = 1;
    } else if (!points) {
        snprintf(err, errlen, "%s: nothing to plot: no metrics line has a loss and \"%s\"", path,
                 x == LOSS_X_ITER ? "iter" : x == LOSS_X_TOKENS ? "tokens" : "time_s");
        rc = 1;
    } else {
        char ylabel[64];
        snprintf(ylabel, sizeof ylabel, "loss%s", log_y ? " (log scale)" : "");
        PlotSpec spec = {.title = title, .x_label = X_LABELS[x], .y_label = ylabel, .log_y = log_y,
                         .x_integer = x == LOSS_X_ITER, .width = width, .height = height, .series = series,
                         .n_series = k, .legend = legend, .n_legend = n};
        rc = plot_write(&spec, path, err, errlen);
    }
    for (size_t i = 0; series && i < k; i++) {
        free((void *)series[i].x);
        free((void *)series[i].y);
    }
    free(series);
    free(legend);
    free(labels);
    return rc;
}

void loss_label_overrides(const char *dir, char *out, size_t len) {
    char ov[LOSS_LABEL_MAX], err[512];
    if (overrides_load(dir, ov, sizeof ov, err, sizeof err) != 0) ov[0] = 0;
    overrides_normalize_numbers(ov, sizeof ov);
    text_utf8(ov, out, len);
}

void loss_label_or_dir(char *label, size_t len, const char *dir) {
    if (label[0]) return;
    const char *slash = strrchr(dir, '/');
    text_utf8(slash && slash[1] ? slash + 1 : dir, label, len);
}

int report_loss_svg(const char *run_dir, bool log_y, char *err, size_t errlen) {
    RunMetrics m;
    int rc = run_metrics_load(run_dir, &m, NULL, err, errlen);
    if (rc == RUN_READ_ABSENT) return LOSS_SVG_NO_DATA;
    if (rc) return 1;
    char label[LOSS_LABEL_MAX], title[LOSS_LABEL_MAX + 16], path[4200];
    loss_label_overrides(run_dir, label, sizeof label);
    loss_label_or_dir(label, sizeof label, run_dir);
    snprintf(title, sizeof title, "loss: %s", label);
    RunCurves run = {.label = label, .m = &m};
    if (snprintf(path, sizeof path, "%s/loss.svg", run_dir) >= (int)sizeof path) {
        snprintf(err, errlen, "path too long: %s/loss.svg", run_dir);
        rc = 1;
    } else {
        rc = m.n_train + m.n_test ? plot_runs(&run, 1, LOSS_X_ITER, log_y, 0, 0, title, path, err, errlen) : LOSS_SVG_NO_DATA;
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
