// trainer/progress.h — what a person watching a run sees besides the log lines: the live status
// line on a terminal, and the time estimates.
//
// On a terminal (stdout is a tty and TERM is not "dumb"), rank 0 keeps one status line under the
// log lines, redrawn at most 4 times a second:
//   epoch 1 | iter 1200/2000 | loss 1.9432 | 42,310 tok/s | elapsed 0:00:22 | ETA 0:00:15 | eval in 0:00:41
// (the next evaluation or snapshot is named only when it is more than 30 s away). Every log line
// (process/log.h) first clears it and it is drawn again below the line. Its colour (dim) is left
// out when NO_COLOR is set (no-color.org). When stdout is not a terminal (a log file, a pipe, CI)
// nothing is drawn and no escape code is ever written. Nor under mpirun or srun: Open MPI hands
// its ranks a pseudo-terminal whatever mpirun's own stdout is (a log file, a pipe).
#ifndef MINGPT_PROGRESS_H
#define MINGPT_PROGRESS_H

#include <stdbool.h>

typedef struct {
    bool live;               // drawing the status line
    bool color;              // with ANSI colour (NO_COLOR unset)
    bool drawn;              // the line is on the screen now
    double last_draw;        // monotonic seconds of the last draw
    char text[512];          // the line as last formatted
} StatusLine;

// Where the run stands, for the status line and the estimates.
typedef struct {
    long epoch;              // 1-based
    long iter, total_iters;  // optimizer steps done, and at the end of the run
    double loss;             // the last training loss
    double tokens_per_s;     // recent throughput
    double elapsed_s;        // since this process started training
    double s_per_iter;       // recent seconds per iteration, evaluations included (<= 0: unknown)
    long next_eval, next_save; // the iteration of the next evaluation / snapshot (< 0: none)
} StatusInfo;

// The time estimates: seconds per iteration, timed from the end of this process's first
// iteration (which calibrates GEMMs and warms caches). Zero-initialised: nothing timed yet.
typedef struct {
    double t_first;          // monotonic seconds when the first iteration ended (0: not yet)
    long iters_at_first;     // the iteration count then
    bool estimated;          // the estimate has been logged
} ProgressClock;

// Decides whether to draw (rank 0 of a process no launcher started, stdout a terminal, TERM not
// dumb) and registers the line with the log (log_set_status_line), so that log lines clear and
// redraw it.
void status_init(StatusLine *s, int rank);

// The status line's text for `info` into buf: ETA = (total_iters - iter) x s_per_iter ("?" while
// s_per_iter <= 0); the nearer of next_eval and next_save is added when further than 30 s.
void status_format(const StatusInfo *info, char *buf, unsigned len);

// Formats and draws the line when it is live and the last draw is >= 0.25 s old (force: now).
void status_update(StatusLine *s, const StatusInfo *info, bool force);

// After each iteration (info->iter done, of info->total_iters; every rank calls it, rank 0 draws):
// times it (info->s_per_iter is measured here, the caller's is ignored), logs once, after this
// process's first 10 timed iterations or 5 s, the estimated time to the end of the run
// (info->total_iters; with the time of an epoch of iters_per_epoch iterations only when more than
// one epoch is left), then updates the status line (status_update).
void progress_note(StatusLine *s, ProgressClock *c, const StatusInfo *info, long iters_per_epoch);

// Removes the line from the screen and unregisters it (the run's last lines stay plain).
void status_end(StatusLine *s);

// "1:02:03" / "2:03" / "45 s": a duration for people (seconds, rounded).
void format_duration(double s, char *buf, unsigned len);

#endif
