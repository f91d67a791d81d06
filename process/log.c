// process/log.c — console + log-file lines (see log.h).
#include "process/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

// The open job log: process-wide, because the trainer's log calls carry no context. A file
// descriptor, not a FILE: each line is one write(), so that a failed write can be undone.
static int g_log_fd = -1;
static char g_log_path[4096];
// This process's rank in a data-parallel job (log_set_rank); 0 in one process.
static int g_rank;

void log_set_rank(int rank) { g_rank = rank; }

// A write to stdout failed, and the errno of the first failure that had one (0: not known).
static int g_stdout_failed, g_stdout_errno;

void log_stdout_failed(int err) {
    g_stdout_failed = 1;
    if (!g_stdout_errno) g_stdout_errno = err;
}

void log_flush_stdout(void) {
    const int saved = errno, had = ferror(stdout);
    errno = 0;
    if (fflush(stdout) != 0 || (ferror(stdout) && !had)) log_stdout_failed(errno);
    errno = saved;   // callers may still report an earlier failure by errno
}

int log_close_stdout(int rc) {
    const int pending = __fpending(stdout) > 0, prev = ferror(stdout);
    errno = 0;
    if (fflush(stdout) != 0 || prev) log_stdout_failed(errno);
    errno = 0;
    // fd 1 closed (`>&-`) with nothing written is no error, as for coreutils
    if (fclose(stdout) != 0 && !(errno == EBADF && !pending && !prev)) log_stdout_failed(errno);
    if (!g_stdout_failed || g_stdout_errno == EPIPE) return rc;
    if (g_stdout_errno) fprintf(stderr, "mingpt: error writing standard output: %s\n", strerror(g_stdout_errno));
    else fprintf(stderr, "mingpt: error writing standard output\n");
    return rc ? rc : 1;
}

// The live status line, when one is drawn (trainer/progress.h).
static struct { void (*clear)(void *), (*redraw)(void *); void *ctx; } g_status;

void log_set_status_line(void (*clear)(void *ctx), void (*redraw)(void *ctx), void *ctx) {
    g_status.clear = clear;
    g_status.redraw = redraw;
    g_status.ctx = ctx;
}
static void status_clear(void) { if (g_status.clear) g_status.clear(g_status.ctx); }
static void status_redraw(void) {
    if (!g_status.redraw) return;
    log_flush_stdout();
    g_status.redraw(g_status.ctx);
}

// "2026-11-22 01:42:20,647": Python logging's asctime.
static void asctime_now(char *buf, size_t len) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    char base[24];
    strftime(base, sizeof base, "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(buf, len, "%s,%03d", base, (int)(tv.tv_usec / 1000) % 1000);
}

// "[time]<tag> <message>" into buf, ending the line if the message does not. Returns its length.
static size_t format_prefixed(char *buf, size_t len, const char *tag, const char *fmt, va_list ap) {
    char when[48], msg[8192];
    asctime_now(when, sizeof when);
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    int w = snprintf(buf, len, "[%s]%s%s%s", when, tag, msg, n && msg[n - 1] == '\n' ? "" : "\n");
    if (w < 0) return 0;
    if ((size_t)w >= len) {   // cut: still one whole line
        w = (int)len - 1;
        buf[w - 1] = '\n';
    }
    return (size_t)w;
}

// A write to the log file failed (disk full, file size limit, I/O error): the partial line is
// cut off again, the file is closed, and stderr says so once. Training goes on: the console
// still gets every line, and losing the copy must not lose the run.
static void log_file_failed(int err, off_t good_size) {
    if (good_size >= 0 && ftruncate(g_log_fd, good_size) != 0) { /* keep what is there */ }
    close(g_log_fd);
    g_log_fd = -1;
    char line[4200];
    snprintf(line, sizeof line, "mingpt: error: cannot write the log file '%s': %s; the run goes on and logs to "
             "the console only\n", g_log_path, strerror(err));
    log_flush_stdout();
    fputs(line, stderr);
    fflush(stderr);
}

// Appends one whole line to the log file, or none of it.
static void file_line(const char *line, size_t n) {
    if (g_log_fd < 0) return;
    const off_t before = lseek(g_log_fd, 0, SEEK_END);
    for (size_t done = 0; done < n;) {
        ssize_t w = write(g_log_fd, line + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            log_file_failed(w < 0 ? errno : ENOSPC, before);
            return;
        }
        done += (size_t)w;
    }
}

static void to_file(const char *level, const char *fmt, va_list ap) {
    if (g_log_fd < 0) return;
    char tag[64], line[8400];
    snprintf(tag, sizeof tag, "[mingpt][%s] - ", level);
    file_line(line, format_prefixed(line, sizeof line, tag, fmt, ap));
}

void log_info(const char *fmt, ...) {
    if (g_rank != 0) return;   // rank 0 speaks for the job
    va_list ap, aq;
    va_start(ap, fmt);
    va_copy(aq, ap);
    status_clear();
    vfprintf(stdout, fmt, ap);
    status_redraw();
    to_file("INFO", fmt, aq);
    va_end(aq);
    va_end(ap);
}

void log_error(const char *fmt, ...) {
    va_list ap, aq;
    va_start(ap, fmt);
    va_copy(aq, ap);
    status_clear();
    log_flush_stdout();  // keep the order of stdout and stderr lines on a shared terminal
    // One write per line: other ranks' output shares the terminal (mpirun merges it).
    char line[8192];
    int k = g_rank != 0 ? snprintf(line, sizeof line, "[rank %d] ", g_rank) : 0;
    vsnprintf(line + k, sizeof line - (size_t)k, fmt, ap);
    fputs(line, stderr);
    fflush(stderr);
    status_redraw();
    to_file("ERROR", fmt, aq);
    va_end(aq);
    va_end(ap);
}

void log_hydra(const char *fmt, ...) {
    if (g_rank != 0) return;
    va_list ap;
    va_start(ap, fmt);
    char line[8400];
    size_t n = format_prefixed(line, sizeof line, "[HYDRA] ", fmt, ap);
    va_end(ap);
    status_clear();
    fputs(line, stdout);
    log_flush_stdout();
    status_redraw();
    file_line(line, n);
}

int log_open(const char *path, char *err, size_t errlen) {
    log_close();
    g_log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    if (g_log_fd < 0) {
        snprintf(err, errlen, "cannot open log file '%s': %s", path, strerror(errno));
        return -1;
    }
    snprintf(g_log_path, sizeof g_log_path, "%s", path);
    return 0;
}

void log_close(void) {
    if (g_log_fd >= 0) close(g_log_fd);
    g_log_fd = -1;
}
