// report/plot_cairo.c — the drawing of report/plot.h with cairo, built alone into
// build/libmingpt_plot.so (mk/plot.mk) so that only the commands that draw load cairo.
//
// Layout (points; SVG user units, PNG pixels): a title, the plot area with its frame, ticks
// and grid, the axis labels, and below them the legend, one entry per run in its colour, in as
// many columns as the width holds, plus a style key (solid: train, dashed: test). Linear ticks
// are "nice" numbers (1, 2, 5 x 10^k; integers only on an integer axis); a log axis has its
// ticks at the densest of 1..9, 1-2-5 or 1 per decade (or every k-th decade) whose labels do
// not overlap; where that gives fewer than four ticks (a narrow range) nice linear numbers,
// placed logarithmically, are used instead if they give more without overlapping.
#include "report/plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cairo.h>
#include <cairo-svg.h>

enum { ROW_H = 18, MARGIN_L = 78, MARGIN_R = 24, MARGIN_T = 40, BELOW_PLOT = 50, MAX_TICKS = 64, LABEL_GAP = 16,
       MIN_COLUMN = 180, TICK_TEXT = 2048 };

// matplotlib's tab10: distinguishable, and readable for the common colour-vision deficiencies
static const double PALETTE[10][3] = {
    {0.122, 0.467, 0.706}, {1.000, 0.498, 0.055}, {0.173, 0.627, 0.173}, {0.839, 0.153, 0.157},
    {0.580, 0.404, 0.741}, {0.549, 0.337, 0.294}, {0.890, 0.467, 0.761}, {0.498, 0.498, 0.498},
    {0.737, 0.741, 0.133}, {0.090, 0.745, 0.812}};

typedef struct { double lo, hi; bool log; } Axis;   // data range (log: of log10 values)

// ========================================================================== ranges and ticks

// A drawable point: finite, within +-1e300 (so that ranges and their padding stay finite), y > 0
// on a log axis.
static bool usable(const PlotSpec *s, double x, double y) {
    return fabs(x) <= 1e300 && fabs(y) <= 1e300 && (!s->log_y || y > 0);
}

// The data's x and y ranges; false when no point is drawable.
static bool data_range(const PlotSpec *s, Axis *ax, Axis *ay) {
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (size_t i = 0; i < s->n_series; i++)
        for (size_t j = 0; j < s->series[i].n; j++) {
            const double x = s->series[i].x[j], y = s->series[i].y[j];
            if (!usable(s, x, y)) continue;
            x0 = fmin(x0, x); x1 = fmax(x1, x);
            y0 = fmin(y0, y); y1 = fmax(y1, y);
        }
    if (!(x0 <= x1)) return false;
    if (x1 == x0) { x0 -= 0.5; x1 += 0.5; }
    const double xpad = 0.02 * (x1 - x0);   // the end points' markers inside the frame
    *ax = (Axis){x0 - xpad, x1 + xpad, false};
    if (s->log_y) {
        y0 = log10(y0); y1 = log10(y1);
        if (y1 - y0 < 1e-3) { y0 -= 0.05; y1 += 0.05; }
        const double pad = 0.04 * (y1 - y0);
        *ay = (Axis){y0 - pad, y1 + pad, true};
    } else {
        if (y1 - y0 < 1e-9 * fmax(1.0, fabs(y0))) { y0 -= 0.5; y1 += 0.5; }
        const double pad = 0.05 * (y1 - y0);
        *ay = (Axis){y0 - pad, y1 + pad, false};
    }
    return true;
}

// A 1, 2 or 5 x 10^k step giving about `want` intervals over [lo, hi].
static double nice_step(double lo, double hi, int want) {
    const double raw = (hi - lo) / want, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

// Nice linear ticks over [lo, hi] (data units), integers only when `integer`; positive only
// when `positive`. Returns their count.
static int linear_ticks(double lo, double hi, int want, bool integer, bool positive, double *t) {
    double step = nice_step(lo, hi, want < 2 ? 2 : want);
    if (integer && step < 1) step = 1;
    int n = 0;
    for (double v = ceil(lo / step) * step; v <= hi * (1 + 1e-12) + 1e-300 && n < MAX_TICKS; v += step)
        if (!positive || v > 0) t[n++] = fabs(v) < step * 1e-9 ? 0 : v;
    return n;
}

// Log ticks: per decade the mantissas m[0..nm) times 10^e for every k-th e, within [lo, hi]
// (log10 units). Returns their count.
static int log_ticks_of(const Axis *a, const double *m, int nm, int k, double *t) {
    int n = 0;
    for (double e = floor(a->lo); e <= ceil(a->hi) && n < MAX_TICKS; e++) {
        if (fmod(fabs(e), k) != 0) continue;
        for (int i = 0; i < nm && n < MAX_TICKS; i++) {
            const double lv = log10(m[i]) + e;
            if (lv >= a->lo && lv <= a->hi) t[n++] = m[i] * pow(10, e);
        }
    }
    return n;
}

// Tick values (data units, not log) within the axis drawn `length` long; returns their count.
static int ticks(const Axis *a, double length, bool integer, double *t) {
    if (!a->log) return linear_ticks(a->lo, a->hi, (int)(length / 100), integer, false, t);
    static const double ALL[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, ONE_TWO_FIVE[3] = {1, 2, 5}, ONE[1] = {1};
    const double per_decade = length / (a->hi - a->lo);   // points a decade
    int n;
    if (per_decade * log10(9.0 / 8) >= LABEL_GAP) n = log_ticks_of(a, ALL, 9, 1, t);
    else if (per_decade * log10(2.0) >= LABEL_GAP) n = log_ticks_of(a, ONE_TWO_FIVE, 3, 1, t);
    else n = log_ticks_of(a, ONE, 1, (int)fmax(1, ceil(LABEL_GAP / per_decade)), t);
    if (n >= 4) return n;
    // a narrow range (within a decade or two): nice linear numbers, placed logarithmically, where
    // they label more and stay LABEL_GAP apart (1.5, 2, 2.5, ... rather than 2, 3, 4 alone)
    double lin[MAX_TICKS];
    const int m = linear_ticks(pow(10, a->lo), pow(10, a->hi), 5, false, true, lin);
    bool apart = m >= 2;
    for (int i = 1; i < m && apart; i++) apart = per_decade * log10(lin[i] / lin[i - 1]) >= LABEL_GAP;
    if (m > n && (apart || n < 2)) {
        memcpy(t, lin, (size_t)m * sizeof *t);
        n = m;
    }
    return n;
}

// A tick label: integers as integers, large values with k/M/G, others with few digits.
static void tick_label(double v, char *buf, size_t len) {
    const double a = fabs(v);
    if (a >= 1e9) snprintf(buf, len, "%gG", v / 1e9);
    else if (a >= 1e6) snprintf(buf, len, "%gM", v / 1e6);
    else if (a >= 1e4) snprintf(buf, len, "%gk", v / 1e3);
    else snprintf(buf, len, "%.4g", v);
}

// ========================================================================== drawing

typedef struct {
    cairo_t *cr;
    double x0, y0, w, h;   // the plot area
    double width;          // the figure's
    Axis ax, ay;
    char tick_text[2][TICK_TEXT];   // the x and y tick labels, "a|b|c", for the SVG's metadata
} Frame;

static void note_tick(char *list, const char *label) {
    const size_t n = strlen(list);
    snprintf(list + n, TICK_TEXT - n, "%s%s", n ? "|" : "", label);
}

static double px(const Frame *f, double x) { return f->x0 + (x - f->ax.lo) / (f->ax.hi - f->ax.lo) * f->w; }
static double py(const Frame *f, double y) {
    const double v = f->ay.log ? log10(y) : y;
    return f->y0 + f->h - (v - f->ay.lo) / (f->ay.hi - f->ay.lo) * f->h;
}

static void set_colour(cairo_t *cr, int i) {
    const double *c = PALETTE[((i % 10) + 10) % 10];
    cairo_set_source_rgb(cr, c[0], c[1], c[2]);
}

// Text at (x, y) aligned by (ax, ay) in [0, 1] of its extents (0.5, 0.5: centred).
static void text_at(cairo_t *cr, const char *s, double x, double y, double ax, double ay) {
    cairo_text_extents_t e;
    cairo_text_extents(cr, s, &e);
    cairo_move_to(cr, x - e.x_bearing - ax * e.width, y - e.y_bearing - ay * e.height);
    cairo_show_text(cr, s);
}

// Sets the font size to `size`, or smaller (down to 7) when s would be wider than max_w.
static void fit_font(cairo_t *cr, const char *s, double size, double max_w) {
    cairo_text_extents_t e;
    cairo_set_font_size(cr, size);
    cairo_text_extents(cr, s, &e);
    if (e.x_advance > max_w) cairo_set_font_size(cr, fmax(7, size * max_w / e.x_advance));
}

static void draw_axes(Frame *f, const PlotSpec *s) {
    cairo_t *cr = f->cr;
    double t[MAX_TICKS];
    char label[64];
    cairo_set_font_size(cr, 11);
    cairo_set_line_width(cr, 1);
    const int nx = ticks(&f->ax, f->w, s->x_integer, t);
    for (int i = 0; i < nx; i++) {   // x: grid line, tick, label
        const double x = px(f, t[i]);
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
        cairo_move_to(cr, x, f->y0); cairo_line_to(cr, x, f->y0 + f->h); cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        cairo_move_to(cr, x, f->y0 + f->h); cairo_line_to(cr, x, f->y0 + f->h + 5); cairo_stroke(cr);
        tick_label(t[i], label, sizeof label);
        note_tick(f->tick_text[0], label);
        text_at(cr, label, x, f->y0 + f->h + 8, 0.5, 0);
    }
    const int ny = ticks(&f->ay, f->h, false, t);
    for (int i = 0; i < ny; i++) {
        const double y = py(f, t[i]);
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
        cairo_move_to(cr, f->x0, y); cairo_line_to(cr, f->x0 + f->w, y); cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        cairo_move_to(cr, f->x0 - 5, y); cairo_line_to(cr, f->x0, y); cairo_stroke(cr);
        tick_label(t[i], label, sizeof label);
        note_tick(f->tick_text[1], label);
        text_at(cr, label, f->x0 - 8, y, 1, 0.5);
    }
    cairo_rectangle(cr, f->x0, f->y0, f->w, f->h);
    cairo_stroke(cr);
    cairo_set_font_size(cr, 13);
    text_at(cr, s->x_label ? s->x_label : "", f->x0 + f->w / 2, f->y0 + f->h + 28, 0.5, 0);
    cairo_save(cr);   // the y label reads bottom to top
    cairo_translate(cr, 18, f->y0 + f->h / 2);
    cairo_rotate(cr, -M_PI / 2);
    text_at(cr, s->y_label ? s->y_label : "", 0, 0, 0.5, 0.5);
    cairo_restore(cr);
    fit_font(cr, s->title ? s->title : "", 15, f->width - 20);
    text_at(cr, s->title ? s->title : "", f->width / 2.0, 12, 0.5, 0);
}

static void draw_series(const Frame *f, const PlotSpec *s, const PlotSeries *ser) {
    cairo_t *cr = f->cr;
    const double dash[] = {6, 4};
    cairo_save(cr);
    cairo_rectangle(cr, f->x0, f->y0, f->w, f->h);
    cairo_clip(cr);
    set_colour(cr, ser->color);
    cairo_set_line_width(cr, 1.6);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    cairo_set_dash(cr, dash, ser->dash == PLOT_DASHED ? 2 : 0, 0);
    size_t drawn = 0;
    for (size_t j = 0; j < ser->n; j++) {
        if (!usable(s, ser->x[j], ser->y[j])) continue;
        if (drawn++) cairo_line_to(cr, px(f, ser->x[j]), py(f, ser->y[j]));
        else cairo_move_to(cr, px(f, ser->x[j]), py(f, ser->y[j]));
    }
    cairo_stroke(cr);
    if (ser->dash == PLOT_DASHED || drawn == 1) {   // test points (few) and lone points: markers
        cairo_set_dash(cr, NULL, 0, 0);
        for (size_t j = 0; j < ser->n; j++) {
            if (!usable(s, ser->x[j], ser->y[j])) continue;
            cairo_new_sub_path(cr);
            cairo_arc(cr, px(f, ser->x[j]), py(f, ser->y[j]), 2.8, 0, 2 * M_PI);
        }
        cairo_fill(cr);
    }
    cairo_restore(cr);
}

// Both line styles occur (then the legend starts with a style key).
static bool both_styles(const PlotSpec *s) {
    bool solid = false, dashed = false;
    for (size_t i = 0; i < s->n_series; i++) {
        solid |= s->series[i].dash == PLOT_SOLID;
        dashed |= s->series[i].dash == PLOT_DASHED;
    }
    return solid && dashed;
}

// The legend's columns: their count and width, and the rows they take.
typedef struct {
    size_t columns, rows;
    double column_w;
} LegendLayout;

// The legend laid out in columns as wide as its longest entry (at least MIN_COLUMN, at most the
// width available), as many as fit across `avail`.
static LegendLayout legend_layout(cairo_t *cr, const PlotSpec *s, double avail, double narrowest) {
    double longest = 0;
    cairo_set_font_size(cr, 12);
    for (size_t i = 0; i < s->n_legend; i++) {
        cairo_text_extents_t e;
        cairo_text_extents(cr, s->legend[i] ? s->legend[i] : "", &e);
        longest = fmax(longest, e.x_advance);
    }
    LegendLayout l;
    l.column_w = fmin(avail, fmax(narrowest, longest + 34 + 16));
    l.columns = (size_t)fmax(1, floor(avail / l.column_w));
    l.rows = (s->n_legend + l.columns - 1) / l.columns + both_styles(s);
    return l;
}

// The legend under the plot: the style key (when both line styles occur), then the entries,
// column after column.
static void draw_legend(const Frame *f, const PlotSpec *s, const LegendLayout *l, double y) {
    cairo_t *cr = f->cr;
    const double dash[] = {6, 4};
    cairo_set_font_size(cr, 12);
    cairo_set_line_width(cr, 1.6);
    if (both_styles(s)) {
        cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
        for (int k = 0; k < 2; k++) {
            const double x = f->x0 + k * 130;
            cairo_set_dash(cr, dash, k ? 2 : 0, 0);
            cairo_move_to(cr, x, y + ROW_H / 2); cairo_line_to(cr, x + 28, y + ROW_H / 2); cairo_stroke(cr);
            text_at(cr, k ? "test loss" : "train loss", x + 34, y + ROW_H / 2, 0, 0.5);
        }
        y += ROW_H;
    }
    cairo_set_dash(cr, NULL, 0, 0);
    const size_t per_column = (s->n_legend + l->columns - 1) / l->columns;
    for (size_t i = 0; i < s->n_legend; i++) {
        const double x = f->x0 + (double)(i / per_column) * l->column_w, ry = y + (double)(i % per_column) * ROW_H;
        set_colour(cr, (int)i);
        cairo_rectangle(cr, x, ry + 4, 28, ROW_H - 8);
        cairo_fill(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        fit_font(cr, s->legend[i] ? s->legend[i] : "", 12, l->column_w - 34 - 8);
        text_at(cr, s->legend[i] ? s->legend[i] : "", x + 34, ry + ROW_H / 2, 0, 0.5);
    }
}

// ========================================================================== output

// Bytes from cairo, kept whole so that an SVG can have its <title> and <desc> added.
typedef struct {
    unsigned char *p;
    size_t n, cap;
    bool oom;
} Buf;

static cairo_status_t buf_write(void *closure, const unsigned char *data, unsigned int len) {
    Buf *b = closure;
    if (b->n + len > b->cap) {
        size_t cap = (b->cap ? 2 * b->cap : 65536) + len;
        unsigned char *q = realloc(b->p, cap);
        if (!q) { b->oom = true; return CAIRO_STATUS_WRITE_ERROR; }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, data, len);
    b->n += len;
    return CAIRO_STATUS_SUCCESS;
}

// s with XML's special characters escaped, written through write; control characters, which
// XML 1.0 does not allow (an overrides.yaml may hold an escape sequence), as '?'.
static int write_escaped(PlotWriteFn write, void *closure, const char *s) {
    for (const char *p = s ? s : ""; *p; p++) {
        const char *e = *p == '&' ? "&amp;" : *p == '<' ? "&lt;" : *p == '>' ? "&gt;"
                      : (unsigned char)*p < 0x20 || *p == 0x7f ? "?" : NULL;
        int rc = e ? write(closure, (const unsigned char *)e, strlen(e)) : write(closure, (const unsigned char *)p, 1);
        if (rc) return rc;
    }
    return 0;
}

// The SVG with <title> and <desc> (one series label a line) right after the root element's tag.
static int write_svg(const Buf *b, const PlotSpec *s, const Frame *f, PlotWriteFn write, void *closure, char *err,
                     size_t errlen) {
    const unsigned char *root = b->n > 4 ? memmem(b->p, b->n, "<svg", 4) : NULL;
    const unsigned char *gt = root ? memchr(root, '>', b->n - (size_t)(root - b->p)) : NULL;
    if (!gt) { snprintf(err, errlen, "cairo wrote no <svg> element"); return 1; }
    const size_t head = (size_t)(gt - b->p) + 1;
    int rc = write(closure, b->p, head) || write(closure, (const unsigned char *)"\n<title>", 8) ||
             write_escaped(write, closure, s->title) || write(closure, (const unsigned char *)"</title>\n<desc>", 15);
    for (size_t i = 0; !rc && i < s->n_series; i++)
        rc = write_escaped(write, closure, s->series[i].label) || write(closure, (const unsigned char *)"\n", 1);
    static const char meta[] = "</desc>\n<metadata id=\"ticks\">x: ";
    rc = rc || write(closure, (const unsigned char *)meta, sizeof meta - 1) ||
         write_escaped(write, closure, f->tick_text[0]) || write(closure, (const unsigned char *)"\ny: ", 4) ||
         write_escaped(write, closure, f->tick_text[1]) || write(closure, (const unsigned char *)"</metadata>", 11);
    rc = rc || write(closure, b->p + head, b->n - head);
    if (rc) snprintf(err, errlen, "cannot write the plot");
    return rc ? 1 : 0;
}

int plot_render(const PlotSpec *s, int format, PlotWriteFn write, void *closure, char *err, size_t errlen) {
    Axis ax, ay;
    if (!data_range(s, &ax, &ay)) {
        snprintf(err, errlen, "nothing to plot: no point with finite coordinates%s", s->log_y ? " and a positive loss" : "");
        return 1;
    }
    const int width = s->width ? s->width : PLOT_DEFAULT_W, height = s->height ? s->height : PLOT_DEFAULT_H;
    if (width < PLOT_MIN_W || height < PLOT_MIN_H || width > PLOT_MAX_SIDE || height > PLOT_MAX_SIDE) {
        snprintf(err, errlen, "a figure of %dx%d: the size must be from %dx%d to %dx%d (cairo's limit)", width, height,
                 PLOT_MIN_W, PLOT_MIN_H, PLOT_MAX_SIDE, PLOT_MAX_SIDE);
        return 1;
    }
    // The legend's size, measured with cairo's fonts before the surface is made.
    cairo_surface_t *probe = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 1, 1);
    cairo_t *pcr = cairo_create(probe);
    cairo_select_font_face(pcr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    const double avail = width - MARGIN_L - MARGIN_R;
    LegendLayout legend = legend_layout(pcr, s, avail, MIN_COLUMN);
    const double plot_h = height - MARGIN_T - BELOW_PLOT;
    double total = height + ROW_H * (double)legend.rows + 12;
    if (total > PLOT_MAX_SIDE) {   // narrower columns before giving up
        legend = legend_layout(pcr, s, avail, 0);
        if (legend.column_w > MIN_COLUMN) legend.column_w = MIN_COLUMN;
        legend.columns = (size_t)fmax(1, floor(avail / legend.column_w));
        legend.rows = (s->n_legend + legend.columns - 1) / legend.columns + both_styles(s);
        total = height + ROW_H * (double)legend.rows + 12;
    }
    cairo_destroy(pcr);
    cairo_surface_destroy(probe);
    if (total > PLOT_MAX_SIDE) {
        snprintf(err, errlen, "the legend of %zu runs takes %zu rows of %zu columns: the figure would be %.0f high, "
                 "more than cairo's limit of %d; plot fewer runs or make the figure wider (--size)", s->n_legend,
                 legend.rows, legend.columns, total, PLOT_MAX_SIDE);
        return 1;
    }
    if (format == PLOT_PNG && (double)width * total > PLOT_MAX_PIXELS) {
        snprintf(err, errlen, "a PNG of %dx%.0f is more than the limit of %d pixels (%d MiB in memory); write an .svg "
                 "or choose a smaller --size", width, total, PLOT_MAX_PIXELS, PLOT_MAX_PIXELS / (1 << 18));
        return 1;
    }
    Buf b = {0};
    cairo_surface_t *surf = format == PLOT_SVG ? cairo_svg_surface_create_for_stream(buf_write, &b, width, total)
                                               : cairo_image_surface_create(CAIRO_FORMAT_ARGB32, width, (int)total);
    cairo_t *cr = cairo_create(surf);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    static Frame f;   // large (the tick texts); one drawing at a time
    f = (Frame){cr, MARGIN_L, MARGIN_T, avail, plot_h, width, ax, ay, {"", ""}};
    draw_axes(&f, s);
    for (size_t i = 0; i < s->n_series; i++) draw_series(&f, s, &s->series[i]);
    draw_legend(&f, s, &legend, MARGIN_T + plot_h + BELOW_PLOT - 4);
    cairo_status_t st = cairo_status(cr);
    cairo_destroy(cr);
    if (st == CAIRO_STATUS_SUCCESS && format == PLOT_PNG) st = cairo_surface_write_to_png_stream(surf, buf_write, &b);
    cairo_surface_finish(surf);
    if (st == CAIRO_STATUS_SUCCESS) st = cairo_surface_status(surf);
    cairo_surface_destroy(surf);
    int rc = 1;
    if (b.oom || st == CAIRO_STATUS_NO_MEMORY) snprintf(err, errlen, "out of memory drawing the plot");
    else if (st != CAIRO_STATUS_SUCCESS) snprintf(err, errlen, "cairo: %s", cairo_status_to_string(st));
    else if (format == PLOT_SVG) rc = write_svg(&b, s, &f, write, closure, err, errlen);
    else if (write(closure, b.p, b.n)) snprintf(err, errlen, "cannot write the plot");
    else rc = 0;
    free(b.p);
    return rc;
}
