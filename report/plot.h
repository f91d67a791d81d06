// report/plot.h — drawing line charts (loss curves) to SVG or PNG files.
//
// The drawing is in build/libmingpt_plot.so (report/plot_cairo.c, cairo), which the binary loads
// with dlopen only when a command draws (`mingpt plot`, a run's loss.svg): `--cfg job`, `info`,
// `sample` never load cairo. This header is the interface between the two: PlotSpec is plain
// data, and the library's one entry point, plot_render, receives it with a write callback, so
// that the file itself is written here (checkpoint/atomic_file.h: whole or not at all).
#ifndef MINGPT_PLOT_H
#define MINGPT_PLOT_H

#include <stdbool.h>
#include <stddef.h>

enum { PLOT_SVG = 0, PLOT_PNG = 1 };
enum { PLOT_SOLID = 0, PLOT_DASHED = 1 };   // a series' line: training loss solid, test loss dashed

// One line of the chart: n points (x[i], y[i]), drawn in palette colour `color` (0, 1, ...;
// wraps after 10). Points with a non-finite coordinate or one beyond +-1e300, or y <= 0 on a
// log axis, are left out.
typedef struct {
    const char *label;   // legend text, UTF-8
    const double *x, *y;
    size_t n;
    int color;
    int dash;            // PLOT_SOLID or PLOT_DASHED (dashed lines also mark their points)
} PlotSeries;

// The figure's size when PlotSpec gives none (PNG pixels, SVG points), and the largest side
// cairo draws (a larger one fails with "invalid value (typically too big) for the size of the input").
// A PNG is drawn in memory (4 bytes a pixel): at most PLOT_MAX_PIXELS pixels.
enum { PLOT_DEFAULT_W = 1200, PLOT_DEFAULT_H = 800, PLOT_MIN_W = 320, PLOT_MIN_H = 240, PLOT_MAX_SIDE = 32767,
       PLOT_MAX_PIXELS = 1 << 27 };

typedef struct {
    const char *title, *x_label, *y_label;   // UTF-8
    bool log_y;                              // y on a log10 axis: ticks at the densest of 1..9, 1-2-5 or
                                             // decades per decade whose labels do not overlap
    bool x_integer;                          // x takes integer values (iterations): integer ticks only
    int width, height;                       // the figure without its legend (0: PLOT_DEFAULT_W/H); the
                                             // legend goes below, in as many columns as fit the width,
                                             // and the figure grows to hold it, up to PLOT_MAX_SIDE
    const PlotSeries *series;
    size_t n_series;
    const char **legend;                     // legend rows, each drawn in the colour of the same index
    size_t n_legend;                         // (one row per run; a style key is added when both dashes occur)
} PlotSpec;

// Receives the file's bytes in order; returns 0, or non-zero to stop the drawing (a failed write).
typedef int (*PlotWriteFn)(void *closure, const unsigned char *data, size_t len);

// The library's entry point (symbol "plot_render"): draws spec as `format` and passes the bytes
// to write. An SVG also carries the title in <title>, one line per series label in <desc>, and
// the tick labels in <metadata id="ticks"> (a line "x: a|b|..." and a line "y: ...") (cairo draws
// text as glyph outlines, which no reader can search). Returns 0, or 1 with the reason in err (no
// drawable point, a size outside PLOT_MIN_W/H..PLOT_MAX_SIDE, a legend that does not fit within
// PLOT_MAX_SIDE, a PNG over PLOT_MAX_PIXELS, a cairo error, a failed write).
typedef int (*PlotRenderFn)(const PlotSpec *spec, int format, PlotWriteFn write, void *closure, char *err,
                            size_t errlen);
int plot_render(const PlotSpec *spec, int format, PlotWriteFn write, void *closure, char *err, size_t errlen);

// Result of plot_write when build/libmingpt_plot.so cannot be loaded.
#define PLOT_NO_LIBRARY 2

// Draws spec into path, as SVG or PNG by its extension (.svg, .png; anything else is an error),
// through a temporary file and a rename (checkpoint/atomic_file.h), loading the plot library on
// first use ($MINGPT_PLOT_LIB, else the build's path next to the executable). Returns 0; 1 with
// the reason naming the file in err; or PLOT_NO_LIBRARY (err says where it looked and why).
int plot_write(const PlotSpec *spec, const char *path, char *err, size_t errlen);

// The plot format a file name asks for (PLOT_SVG, PLOT_PNG), or -1 for another extension.
int plot_format_of(const char *path);

#endif
