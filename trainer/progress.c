// trainer/progress.c — the live status line (see progress.h).
#include "trainer/progress.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "config/clock.h"
#include "dist/comm.h"
#include "process/log.h"

#define REDRAW_S 0.25   // at most 4 draws a second
#define FAR_S 30.0      // the next evaluation / snapshot is shown when further away than this

void format_duration(double s, char *buf, unsigned len) {
    if (!(s >= 0) || s > 1e9) { snprintf(buf, len, "?"); return; }
    const long t = lround(s), h = t / 3600, m = t / 60 % 60, sec = t % 60;
    if (h) snprintf(buf, len, "%ld:%02ld:%02ld", h, m, sec);
    else snprintf(buf, len, "%ld:%02ld", m, sec);
}

// Terminal columns (80 when unknown): a longer line would wrap, and "\r" would no longer clear it.
static int columns(void) {
    struct winsize w;
    return ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 0 ? w.ws_col : 80;
}

static void clear_line(void *ctx) {
    StatusLine *s = ctx;
    if (!s->drawn) return;
    fputs("\r\x1b[2K", stdout);
    log_flush_stdout();
    s->drawn = false;
}

static void draw(void *ctx) {
    StatusLine *s = ctx;
    if (!s->text[0]) return;
    const int w = columns() - 1;
    fprintf(stdout, "\r\x1b[2K%s%.*s%s", s->color ? "\x1b[2m" : "", w > 0 ? w : 0, s->text, s->color ? "\x1b[0m" : "");
    log_flush_stdout();
    s->drawn = true;
}

void status_init(StatusLine *s, int rank) {
    memset(s, 0, sizeof *s);
    const char *term = getenv("TERM"), *no_color = getenv("NO_COLOR");
    char err[256];
    s->live = rank == 0 && comm_launched(err, sizeof err) == 0 && isatty(STDOUT_FILENO) &&
              !(term && strcmp(term, "dumb") == 0);
    s->color = s->live && !(no_color && no_color[0]);
    if (s->live) log_set_status_line(clear_line, draw, s);
}

void status_format(const StatusInfo *in, char *buf, unsigned len) {
    char el[32], eta[32], next[64] = "";
    format_duration(in->elapsed_s, el, sizeof el);
    const bool known = in->s_per_iter > 0;
    format_duration(known ? (in->total_iters - in->iter) * in->s_per_iter : -1, eta, sizeof eta);
    // the nearer of the next evaluation and the next snapshot, when it is far
    const bool eval_first = in->next_eval >= 0 && (in->next_save < 0 || in->next_eval <= in->next_save);
    const long at = eval_first ? in->next_eval : in->next_save;
    if (known && at > in->iter && (at - in->iter) * in->s_per_iter > FAR_S) {
        char d[32];
        format_duration((at - in->iter) * in->s_per_iter, d, sizeof d);
        snprintf(next, sizeof next, " | %s in %s", eval_first ? "eval" : "snapshot", d);
    }
    snprintf(buf, len, "epoch %ld | iter %ld/%ld | loss %.4f | %.0f tok/s | elapsed %s | ETA %s%s", in->epoch,
             in->iter, in->total_iters, in->loss, in->tokens_per_s, el, eta, next);
}

void status_update(StatusLine *s, const StatusInfo *in, bool force) {
    if (!s->live) return;
    const double now = now_s();
    if (!force && s->drawn && now - s->last_draw < REDRAW_S) return;
    s->last_draw = now;
    status_format(in, s->text, sizeof s->text);
    draw(s);
}

void progress_note(StatusLine *s, ProgressClock *c, const StatusInfo *info, long iters_per_epoch) {
    const double now = now_s();
    if (c->t_first == 0) {   // the first iteration calibrates GEMMs and warms caches: not timed
        c->t_first = now;
        c->iters_at_first = info->iter;
    }
    const long timed = info->iter - c->iters_at_first, left = info->total_iters - info->iter;
    StatusInfo in = *info;
    in.s_per_iter = timed > 0 ? (now - c->t_first) / timed : 0;
    if (!c->estimated && timed > 0 && (timed >= 10 || now - c->t_first >= 5)) {
        c->estimated = true;
        // To the run's end (max_iters or the last epoch, whichever comes first); the time of an
        // epoch only when the rest of the run is longer than one, where it says something more.
        char ep[96] = "", rest[32];
        if (left > iters_per_epoch && iters_per_epoch > 0) {
            char d[32];
            format_duration(in.s_per_iter * iters_per_epoch, d, sizeof d);
            snprintf(ep, sizeof ep, "; an epoch (%ld iterations) takes %s", iters_per_epoch, d);
        }
        format_duration(in.s_per_iter * left, rest, sizeof rest);
        log_info("Estimated time to the end of the run (%ld iteration%s left, to iteration %ld): %s (%.1f ms/iter, "
                 "evaluations not counted)%s\n", left, left == 1 ? "" : "s", info->total_iters, rest,
                 1e3 * in.s_per_iter, ep);
    }
    status_update(s, &in, false);
}

void status_end(StatusLine *s) {
    if (!s->live) return;
    clear_line(s);
    log_set_status_line(NULL, NULL, NULL);
    s->live = false;
}
