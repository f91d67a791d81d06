// trainer/log.c — console + log-file lines (see log.h).
#include "trainer/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

// The open job log: process-wide, because the trainer's log calls carry no context.
static FILE *g_log_file;
// This process's rank in a data-parallel job (log_set_rank); 0 in one process.
static int g_rank;

void log_set_rank(int rank) { g_rank = rank; }

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

// Writes "[time]<tag> <message>" to f, ending the line if the message does not.
static void write_prefixed(FILE *f, const char *tag, const char *fmt, va_list ap) {
    char when[48], msg[8192];
    asctime_now(when, sizeof when);
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    fprintf(f, "[%s]%s%s%s", when, tag, msg, n && msg[n - 1] == '\n' ? "" : "\n");
    fflush(f);
}

static void to_file(const char *level, const char *fmt, va_list ap) {
    if (!g_log_file) return;
    char tag[64];
    snprintf(tag, sizeof tag, "[mingpt][%s] - ", level);
    write_prefixed(g_log_file, tag, fmt, ap);
}

void log_info(const char *fmt, ...) {
    if (g_rank != 0) return;   // rank 0 speaks for the job
    va_list ap, aq;
    va_start(ap, fmt);
    va_copy(aq, ap);
    vfprintf(stdout, fmt, ap);
    to_file("INFO", fmt, aq);
    va_end(aq);
    va_end(ap);
}

void log_error(const char *fmt, ...) {
    va_list ap, aq;
    va_start(ap, fmt);
    va_copy(aq, ap);
    fflush(stdout);  // keep the order of stdout and stderr lines on a shared terminal
    // One write per line: other ranks' output shares the terminal (mpirun merges it).
    char line[8192];
    int k = g_rank != 0 ? snprintf(line, sizeof line, "[rank %d] ", g_rank) : 0;
    vsnprintf(line + k, sizeof line - (size_t)k, fmt, ap);
    fputs(line, stderr);
    fflush(stderr);
    to_file("ERROR", fmt, aq);
    va_end(aq);
    va_end(ap);
}

void log_hydra(const char *fmt, ...) {
    if (g_rank != 0) return;
    va_list ap, aq;
    va_start(ap, fmt);
    va_copy(aq, ap);
    write_prefixed(stdout, "[HYDRA] ", fmt, ap);
    if (g_log_file) write_prefixed(g_log_file, "[HYDRA] ", fmt, aq);
    va_end(aq);
    va_end(ap);
}

int log_open(const char *path, char *err, size_t errlen) {
    log_close();
    g_log_file = fopen(path, "a");
    if (!g_log_file) {
        snprintf(err, errlen, "cannot open log file '%s': %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

void log_close(void) {
    if (g_log_file) fclose(g_log_file);
    g_log_file = NULL;
}
