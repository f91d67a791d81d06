// report/plot.c — see plot.h: loading build/libmingpt_plot.so and writing its output atomically.
#include "report/plot.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "config/lib_path.h"
#include "checkpoint/atomic_file.h"

#ifndef MINGPT_PLOT_LIB
#define MINGPT_PLOT_LIB NULL   // this build has no such library (the makefile passes its path)
#endif

int plot_format_of(const char *path) {
    const char *dot = strrchr(path, '.');
    if (dot && strchr(dot, '/') == NULL) {
        if (!strcasecmp(dot, ".svg")) return PLOT_SVG;
        if (!strcasecmp(dot, ".png")) return PLOT_PNG;
    }
    return -1;
}

// plot_render from the plot library ($MINGPT_PLOT_LIB, else the build's MINGPT_PLOT_LIB next to
// the executable); NULL with the reason in err. dlopen keeps one copy however often it is called.
static PlotRenderFn load_plot_library(char *err, size_t errlen) {
    const LibSpec spec = {"MINGPT_PLOT_LIB", MINGPT_PLOT_LIB, RTLD_NOW | RTLD_LOCAL, "plotting library",
                          "this mingpt was built without plotting (install libcairo2-dev and rebuild)",
                          "install libcairo2-dev and rebuild, or set MINGPT_PLOT_LIB"};
    char path[4600];
    void *lib = lib_open(&spec, path, sizeof path, err, errlen);
    if (!lib) return NULL;
    PlotRenderFn fn = (PlotRenderFn)dlsym(lib, "plot_render");
    if (!fn) snprintf(err, errlen, "%.600s has no plot_render", path);
    return fn;
}

static int to_atomic(void *closure, const unsigned char *data, size_t len) {
    AtomicFile *a = closure;
    atomic_write(a, data, len);
    return a->failed != 0;
}

int plot_write(const PlotSpec *spec, const char *path, char *err, size_t errlen) {
    const int format = plot_format_of(path);
    if (format < 0) {
        snprintf(err, errlen, "'%s': a plot is written as .svg or .png", path);
        return 1;
    }
    PlotRenderFn render = load_plot_library(err, errlen);
    if (!render) return PLOT_NO_LIBRARY;
    // A drawing that fails (no drawable point, a cairo error) cancels the write: nothing replaces path.
    volatile sig_atomic_t abandon = 0;
    AtomicFile a;
    if (atomic_open(&a, path, &abandon, err, errlen)) return 1;
    char why[1024] = "";
    if (render(spec, format, to_atomic, &a, why, sizeof why) && !a.failed) {
        abandon = 1;
        snprintf(err, errlen, "%s: %s", path, why);
    }
    const int rc = atomic_commit(&a, err, errlen);   // a failed write names the file and the reason
    return rc ? 1 : 0;
}
