// app/plot.c — see plot.h.
#include "app/plot.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/atomic_file.h"
#include "report/loss_plot.h"
#include "report/plot.h"
#include "report/run_read.h"
#include "trainer/trainer.h"

enum { PLOT_OUT, PLOT_X, PLOT_LOG, PLOT_SIZE, PLOT_N_FLAGS };

static const SubFlag PLOT_FLAGS[PLOT_N_FLAGS] = {
    [PLOT_OUT] = {.name = "--out", .type = SUB_STRING, .metavar = "F", .usage_value = "F.svg|F.png", .def = "plot.svg",
                  .help = "the file to write, SVG or PNG by its extension (default plot.svg)"},
    // the choices in LossX's order (report/loss_plot.h)
    [PLOT_X] = {.name = "--x", .type = SUB_CHOICE, .metavar = "X", .def = "iter", .choices = "iter|tokens|time",
                .help = "the x axis: iter (default), tokens (training tokens) or time (training seconds)"},
    [PLOT_LOG] = {.name = "--log", .type = SUB_SWITCH, .help = "the loss on a log scale"},
    [PLOT_SIZE] = {.name = "--size", .type = SUB_STRING, .metavar = "WxH", .def = "1200x800",
                   .help = "the figure's width and height without the legend (default 1200x800; PNG pixels)"},
};

// --size's value into *w, *h. Returns 0, or 2 after the message.
static int parse_size(const char *text, int *w, int *h) {
    char *end;
    errno = 0;
    const long a = strtol(text, &end, 10);
    const bool x = *end == 'x' || *end == 'X';
    const long b = x && end[1] >= '0' && end[1] <= '9' ? strtol(end + 1, &end, 10) : -1;
    if (text[0] < '0' || text[0] > '9' || !x || b < 0 || *end || errno) {
        char shown[256];
        text_printable(text, shown, sizeof shown);
        fprintf(stderr, "mingpt plot: error: --size '%s': expected WIDTHxHEIGHT in pixels, e.g. 1200x800\n", shown);
        return EXIT_USAGE;
    }
    if (a < PLOT_MIN_W || b < PLOT_MIN_H || a > PLOT_MAX_SIDE || b > PLOT_MAX_SIDE) {
        fprintf(stderr, "mingpt plot: error: --size '%s': the width must be from %d to %d and the height from %d to %d "
                "(cairo draws at most %d pixels a side)\n", text, PLOT_MIN_W, PLOT_MAX_SIDE, PLOT_MIN_H, PLOT_MAX_SIDE,
                PLOT_MAX_SIDE);
        return EXIT_USAGE;
    }
    *w = (int)a;
    *h = (int)b;
    return 0;
}

// An error message, its run-file bytes (paths, a JSON error's quote) escaped for the terminal.
static void say_error(const char *err) {
    static char shown[6 * 8192];
    text_printable(err, shown, sizeof shown);
    fprintf(stderr, "mingpt plot: error: %s\n", shown);
}

static const SubPositional PLOT_DIRS = {
    .metavar = "DIR",
    .help = "a run directory (with metrics.jsonl) or a sweep directory (with multirun.yaml: its jobs)"};

// The runs the arguments name, their metrics and labels (their overrides). A directory named on
// the command line must have metrics.jsonl; a sweep's job without one (failed before training) is
// skipped with a warning. Returns 0 or the exit code (after the message; out of memory: 1).
static int load_runs(const SubArgs *a, char ***dirs, int *n, RunMetrics **m, char (**labels)[LOSS_LABEL_MAX]) {
    char err[8192];
    *dirs = NULL;
    *n = 0;
    *m = NULL;
    *labels = NULL;
    for (int i = 0; i < a->n_positional; i++) {
        char **found;
        int n_found;
        int rc = run_dirs_expand(&a->positional[i], 1, &found, &n_found, err, sizeof err);
        if (rc) {
            say_error(err);
            return rc == 1 ? EXIT_RUNTIME : EXIT_USAGE;
        }
        const bool sweep = n_found > 1 || n_found == 0 || strncmp(found[0], a->positional[i], strlen(found[0])) != 0;
        RunMetrics *m2 = realloc(*m, (size_t)(*n + n_found + 1) * sizeof **m);
        if (m2) *m = m2;
        char(*l2)[LOSS_LABEL_MAX] = m2 ? realloc(*labels, (size_t)(*n + n_found + 1) * sizeof **labels) : NULL;
        if (l2) *labels = l2;
        char **d2 = l2 ? realloc(*dirs, (size_t)(*n + n_found + 1) * sizeof **dirs) : NULL;
        if (d2) *dirs = d2;
        if (!d2) {
            say_error("out of memory");
            run_dirs_free(found, n_found);
            return EXIT_RUNTIME;
        }
        for (int j = 0; j < n_found; j++) {
            rc = run_metrics_load(found[j], &(*m)[*n], stderr, err, sizeof err);
            if (rc == RUN_READ_ABSENT && sweep) {
                char shown[4096 * 6];
                text_printable(found[j], shown, sizeof shown);
                fprintf(stderr, "mingpt plot: warning: %s has no metrics.jsonl (the job did not train): left out\n",
                        shown);
                free(found[j]);
                continue;
            }
            if (rc == RUN_READ_ABSENT) snprintf(err, sizeof err, "'%s' has no metrics.jsonl", found[j]);
            if (rc) {
                say_error(err);
                for (int k = j; k < n_found; k++) free(found[k]);
                free(found);
                return rc == RUN_READ_NO_MEMORY ? EXIT_RUNTIME : EXIT_USAGE;
            }
            loss_label_overrides(found[j], (*labels)[*n], LOSS_LABEL_MAX);
            (*dirs)[(*n)++] = found[j];
        }
        free(found);
    }
    return 0;
}

// Refuses --out when it is one of the files the plot reads: a run's metrics.jsonl, summary.json or
// .hydra/overrides.yaml, or a sweep's multirun.yaml. Returns 0 or 1 (after the message).
static int check_out(const SubArgs *a, const char *path, char *const *dirs, int n) {
    static const char *const RUN_FILES[] = {"metrics.jsonl", "summary.json", ".hydra/overrides.yaml"};
    char input[8192], err[16600];
    for (int i = 0; i < n + a->n_positional; i++) {
        const bool run = i < n;
        const char *dir = run ? dirs[i] : a->positional[i - n];
        for (size_t k = 0; k < (run ? sizeof RUN_FILES / sizeof *RUN_FILES : 1); k++) {
            snprintf(input, sizeof input, "%s/%s", dir, run ? RUN_FILES[k] : "multirun.yaml");
            if (output_is_input(path, "--out", input, "the input", err, sizeof err)) {
                fprintf(stderr, "mingpt plot: error: %s\n", err);
                return EXIT_RUNTIME;
            }
        }
    }
    return 0;
}

static int plot_command(const SubArgs *a, FILE *out) {
    const char *path = a->values[PLOT_OUT].text;
    if (plot_format_of(path) < 0) {
        fprintf(stderr, "mingpt plot: error: --out '%s': the file name must end in .svg or .png\n", path);
        return EXIT_USAGE;
    }
    int width, height;
    if (parse_size(a->values[PLOT_SIZE].text, &width, &height)) return EXIT_USAGE;
    char **dirs = NULL;
    int n = 0;
    RunMetrics *m = NULL;
    char(*labels)[LOSS_LABEL_MAX] = NULL;
    int rc = load_runs(a, &dirs, &n, &m, &labels);
    if (!rc) rc = check_out(a, path, dirs, n);
    if (!rc && n == 0) {
        fprintf(stderr, "mingpt plot: error: no run to plot (no job has metrics.jsonl)\n");
        rc = 2;
    }
    if (!rc) {
        RunCurves *runs = calloc((size_t)n, sizeof *runs);
        char **texts = calloc((size_t)n, sizeof *texts), common[LOSS_LABEL_MAX];
        if (!runs || !texts) {
            free(runs);
            free(texts);
            say_error("out of memory");
            rc = EXIT_RUNTIME;
            goto out;
        }
        for (int i = 0; i < n; i++) texts[i] = labels[i];
        overrides_drop_common(texts, n, common, sizeof common);   // a legend of what differs
        free(texts);
        for (int i = 0; i < n; i++) {
            loss_label_or_dir(labels[i], LOSS_LABEL_MAX, dirs[i]);
            for (int j = 0; j < i; j++)   // two runs with one label (a shell loop's hydra.run.dir): name the dirs
                if (!strcmp(labels[i], labels[j])) {
                    char d[LOSS_LABEL_MAX];
                    text_utf8(dirs[i], d, sizeof d);
                    snprintf(labels[i] + strlen(labels[i]), LOSS_LABEL_MAX - strlen(labels[i]), " [%s]", d);
                    break;
                }
            runs[i] = (RunCurves){.label = labels[i], .m = &m[i]};
        }
        if (same_file(path, "/dev/stdout")) out = stderr;   // `--out /dev/stdout`: the image alone on stdout
        char err[8192], title[64];
        snprintf(title, sizeof title, "loss of %d run%s", n, n == 1 ? "" : "s");
        rc = plot_runs(runs, (size_t)n, (LossX)a->values[PLOT_X].i, a->values[PLOT_LOG].i, width, height, title, path,
                       err, sizeof err);
        if (rc) say_error(err);
        else fprintf(out, "%s: %d run%s\n", path, n, n == 1 ? "" : "s");
        rc = rc ? EXIT_RUNTIME : EXIT_OK;
        free(runs);
    }
out:
    for (int i = 0; i < n; i++) run_metrics_free(&m[i]);
    run_dirs_free(dirs, n);
    free(m);
    free(labels);
    return rc;
}

const Subcommand PLOT_COMMAND = {
    .name = "plot", .description = "the loss curves of runs and sweeps in one SVG or PNG",
    .flags = PLOT_FLAGS, .n_flags = PLOT_N_FLAGS, .positional = &PLOT_DIRS, .dialect = SUB_ERROR,
    .usage_after = SUB_USAGE_UNKNOWN | SUB_USAGE_MISSING, .help_lines = true, .run = plot_command,
};
