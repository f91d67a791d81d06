// process/log.h — mingpt's log lines: to the console and to the run directory's log file.
//
// Every line goes to stdout (log_info) or stderr (log_error) exactly as given, and, while a
// job's log file is open (log_open), also to that file with Hydra's job-log prefix
//   [2026-11-22 01:42:20,647][mingpt][INFO] - <message>
// so that <run dir>/mingpt.log holds everything the run reported. Not thread-safe: log from
// the main thread.
//
// Each line reaches the file whole or not at all. When a write fails (disk full, a file size
// limit, an I/O error), the partial line is cut off, the file is closed and one message on
// stderr names it and the error ("cannot write the log file '...': ..."); the run goes on,
// logging to the console only (a full disk is then reported again by the snapshot save).
#ifndef MINGPT_LOG_H
#define MINGPT_LOG_H

#include <stddef.h>

// printf to stdout (+ the log file at level INFO).
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// printf to stderr (+ the log file at level ERROR).
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// Hydra's own logger: "[2026-11-22 01:42:08,866][HYDRA] <message>\n" to stdout (and the log
// file when one is open), e.g. the "Launching 4 jobs locally" line of a sweep.
void log_hydra(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// Starts copying log lines to `path` (created or appended to, as Hydra does when a run
// directory is reused). Returns 0, or -1 with the reason in err. Closes any previous file.
// A later write error closes the file (see above).
int log_open(const char *path, char *err, size_t errlen);

// Stops copying to the file (no-op when none is open).
void log_close(void);
// Data-parallel jobs: on ranks other than 0, log_info and log_hydra print nothing (rank 0
// reports for the job) and log_error lines are prefixed "[rank r] ". Only rank 0 opens a log file.
void log_set_rank(int rank);

// A live status line under the console lines (trainer/progress.h): every console line is
// preceded by clear(ctx) and followed by redraw(ctx). NULL functions: none (the default).
void log_set_status_line(void (*clear)(void *ctx), void (*redraw)(void *ctx), void *ctx);

// Standard output, checked as coreutils' close_stdout does. A write to stdout that fails (a full
// disk, /dev/full, an I/O error) loses that output but not the work: a run goes on and saves its
// snapshot. stdio forgets the reason once its buffer is dropped, so every flush of stdout goes
// through log_flush_stdout, which keeps the errno of the first failure (log_stdout_failed keeps
// one found by other means, e.g. ferror after an fwrite). log_close_stdout, main's last call,
// flushes and closes stdout; after any failed write it says "mingpt: error writing standard
// output: <reason>" on stderr (without the reason when none was kept) and returns 1 in place of
// rc 0 (a non-zero rc is kept). A reader
// that went away (EPIPE, when SIGPIPE is ignored; else the signal ends the process quietly) is no
// error: `mingpt sample ... | head` ends with rc.
void log_flush_stdout(void);
void log_stdout_failed(int err);
int log_close_stdout(int rc);

#endif
