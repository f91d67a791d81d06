// trainer/metrics.c — metrics.jsonl (see metrics.h).
#include "trainer/metrics.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint/atomic_file.h"
#include "checkpoint/file_read.h"
#include "process/log.h"

// Enough digits to give a loss back as the log's %.4f and a time to the microsecond.
#define METRICS_JSON_FLAGS (JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10))

static json_t *num(double x) { return isfinite(x) ? json_real(x) : json_null(); }

// Rewrites the file with only the lines of iterations <= keep_iter that parse. Returns 0 or -1 (err).
static int truncate_past(const char *path, long keep_iter, double *time_before, char *err, size_t errlen) {
    unsigned char *buf;
    size_t len;
    if (access(path, F_OK) != 0) return 0;   // a new file
    if (file_read_regular(path, "metrics file", &buf, &len, err, errlen)) return -1;
    AtomicFile a;
    if (atomic_open(&a, path, NULL, err, errlen)) { free(buf); return -1; }
    long past = 0, unreadable = 0;
    bool torn = false;
    for (size_t at = 0; at < len;) {
        const unsigned char *nl = memchr(buf + at, '\n', len - at);
        const size_t n = nl ? (size_t)(nl - (buf + at)) : len - at;
        json_error_t je;
        json_t *o = json_loadb((const char *)buf + at, n, 0, &je);
        const json_t *it = json_object_get(o, "iter"), *ts = json_object_get(o, "time_s");
        if (nl && json_is_integer(it) && json_integer_value(it) <= keep_iter) {
            atomic_write(&a, buf + at, n + 1);
            if (json_is_number(ts) && json_number_value(ts) > *time_before) *time_before = json_number_value(ts);
        } else if (n > 0) {   // why it goes: cut off without its newline, not a metrics line, or too late
            if (!nl) torn = true;
            else if (!json_is_integer(it)) unreadable++;
            else past++;
        }
        json_decref(o);
        at += n + 1;
    }
    free(buf);
    if (past && keep_iter > 0)
        log_info("metrics.jsonl: dropped %ld line%s logged after the snapshot's iteration %ld (they belong to "
                 "iterations the resume repeats)\n", past, past == 1 ? "" : "s", keep_iter);
    else if (past)
        log_info("metrics.jsonl: dropped %ld line%s of an earlier run (this run starts at iteration 0 and logs its "
                 "own)\n", past, past == 1 ? "" : "s");
    if (unreadable)
        log_info("metrics.jsonl: dropped %ld line%s that %s not metrics lines (no JSON object with an \"iter\")\n",
                 unreadable, unreadable == 1 ? "" : "s", unreadable == 1 ? "is" : "are");
    if (torn) log_info("metrics.jsonl: dropped its last line, cut off without its newline (a writer killed mid-line)\n");
    return atomic_commit(&a, err, errlen) ? -1 : 0;
}

int metrics_open(Metrics *m, const char *dir, long keep_iter, double *time_before, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    *time_before = 0;
    if (!dir) return 0;
    if ((size_t)snprintf(m->path, sizeof m->path, "%s/metrics.jsonl", dir) >= sizeof m->path) {
        snprintf(err, errlen, "the run directory '%s' is too long for metrics.jsonl", dir);
        return -1;
    }
    if (truncate_past(m->path, keep_iter, time_before, err, errlen)) return -1;
    m->f = fopen(m->path, "a");
    if (!m->f) {
        snprintf(err, errlen, "cannot open '%s': %s", m->path, strerror(errno));
        return -1;
    }
    return 0;
}

// One line, flushed; a failed write closes the file and says so once.
static void put_line(Metrics *m, json_t *o) {
    char *s = o ? json_dumps(o, METRICS_JSON_FLAGS) : NULL;
    json_decref(o);
    if (!m->f) { free(s); return; }
    errno = 0;
    const int bad = !s || fprintf(m->f, "%s\n", s) < 0 || fflush(m->f) != 0;
    free(s);
    if (bad) {
        log_error("mingpt: error: cannot write '%s': %s; the run goes on without it\n", m->path,
                  errno ? strerror(errno) : "out of memory");
        fclose(m->f);
        m->f = NULL;
    }
}

void metrics_train(Metrics *m, const MetricsTrain *r) {
    if (!m->f) return;
    json_t *o = json_object();
    json_object_set_new(o, "iter", json_integer(r->iter));
    json_object_set_new(o, "epoch", json_integer(r->epoch));
    json_object_set_new(o, "loss", num(r->loss));
    json_object_set_new(o, "lr", num(r->lr));
    json_object_set_new(o, "grad_norm", num(r->grad_norm));
    json_object_set_new(o, "loss_scale", num(r->loss_scale));
    json_object_set_new(o, "tokens_per_s", num(r->tokens_per_s));
    json_object_set_new(o, "ms_per_iter", num(r->ms_per_iter));
    json_object_set_new(o, "mfu", num(r->mfu));
    json_object_set_new(o, "tokens", json_integer((json_int_t)r->tokens));
    json_object_set_new(o, "time_s", num(r->time_s));
    put_line(m, o);
}

void metrics_window_start(MetricsWindow *w, double now) {
    w->t0 = now;
    w->iters = 0;
    w->tokens = 0;
    w->comm = (CommStats){0};
}

void metrics_log_train(Metrics *m, MetricsWindow *w, MetricsTrain *r, long total_iters, double now) {
    const double dt = now - w->t0;
    char comm[160] = "";
    if (w->show_comm)   // reducing, and waited for after the backward
        snprintf(comm, sizeof comm, " | all-reduce %.1f ms/iter, %.1f ms exposed", 1e3 * w->comm.t_busy / w->iters,
                 1e3 * w->comm.t_exposed / w->iters);
    r->tokens_per_s = w->tokens / dt;
    r->ms_per_iter = 1e3 * dt / w->iters;
    r->mfu = w->flops_per_token * r->tokens_per_s / w->peak_flops;
    log_info("epoch %ld | iter %ld/%ld | loss %.4f | lr %.2e | norm %.3f | %.1f ms/iter | %.0f tok/s%s\n", r->epoch,
             r->iter, total_iters, r->loss, r->lr, r->grad_norm, r->ms_per_iter, r->tokens_per_s, comm);
    log_flush_stdout();
    metrics_train(m, r);
    metrics_window_start(w, now);
}

void metrics_eval(Metrics *m, long iter, long epoch, double test_loss, double tokens, double time_s) {
    if (!m->f) return;
    json_t *o = json_object();
    json_object_set_new(o, "iter", json_integer(iter));
    json_object_set_new(o, "epoch", json_integer(epoch));
    json_object_set_new(o, "test_loss", num(test_loss));
    json_object_set_new(o, "tokens", json_integer((json_int_t)tokens));
    json_object_set_new(o, "time_s", num(time_s));
    put_line(m, o);
}

void metrics_close(Metrics *m) {
    if (m->f) fclose(m->f);
    m->f = NULL;
}
