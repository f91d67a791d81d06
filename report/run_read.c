// report/run_read.c — see run_read.h.
#include "report/run_read.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "config/cfg_tree.h"
#include "config/cfg_yaml.h"
#include "checkpoint/file_read.h"

// ========================================================================== files

// <dir>/<name> read whole (capped). Returns 0, RUN_READ_ABSENT or 1 (err).
static int read_in_dir(const char *dir, const char *name, size_t cap, char *path, size_t pathlen, unsigned char **buf,
                       size_t *len, char *err, size_t errlen) {
    int w = snprintf(path, pathlen, "%s/%s", dir, name);
    if (w < 0 || (size_t)w >= pathlen) {
        snprintf(err, errlen, "path too long: %s/%s", dir, name);
        return 1;
    }
    int e;
    if (file_read_capped(path, name, cap, buf, len, &e, err, errlen) == 0) return 0;
    return e == ENOENT ? RUN_READ_ABSENT : strstr(err, "': out of memory reading ") ? RUN_READ_NO_MEMORY : 1;
}

// ========================================================================== metrics.jsonl

static double num_or_nan(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

// One series (training or test lines) while it is read, decimated in bounded memory: the lines
// go into buckets of `width` consecutive lines, each keeping the point of lowest and the point of
// highest loss (in line order; a flat bucket keeps its first and last). When
// RUN_READ_MAX_BUCKETS buckets are full, neighbours merge pairwise and the width doubles, so a
// series never holds more than 2 * RUN_READ_MAX_BUCKETS points plus its first and last line,
// whatever the file's length; up to 2 * RUN_READ_MAX_BUCKETS lines every point is kept.
typedef struct {
    MetricPoint p[2];
    int n;
} Bucket;

typedef struct {
    Bucket *b;            // the full buckets, in line order
    size_t n, cap;
    size_t width;         // lines a bucket holds
    Bucket open;          // the bucket being filled and its lines so far
    size_t open_lines;
    MetricPoint first, last;
    size_t lines;
} Series;

// Adds p (the latest point) to k, which keeps the lowest and highest loss of its points.
static void bucket_add(Bucket *k, MetricPoint p) {
    if (k->n < 2) {
        k->p[k->n++] = p;
        return;
    }
    const MetricPoint c[3] = {k->p[0], k->p[1], p};
    int lo = 0, hi = 0;
    for (int i = 1; i < 3; i++) {
        if (c[i].loss < c[lo].loss) lo = i;
        if (c[i].loss > c[hi].loss) hi = i;
    }
    if (lo == hi) { lo = 0; hi = 2; }   // all equal: the span
    k->p[0] = c[lo < hi ? lo : hi];
    k->p[1] = c[lo < hi ? hi : lo];
}

static int series_push(Series *s, MetricPoint p) {
    if (!s->width) s->width = 1;
    if (!s->lines++) s->first = p;
    s->last = p;
    bucket_add(&s->open, p);
    if (++s->open_lines < s->width) return 0;
    if (s->n == RUN_READ_MAX_BUCKETS) {   // full: merge neighbours, the open bucket now half full
        for (size_t i = 0; i < s->n / 2; i++) {
            Bucket m = s->b[2 * i];
            for (int j = 0; j < s->b[2 * i + 1].n; j++) bucket_add(&m, s->b[2 * i + 1].p[j]);
            s->b[i] = m;
        }
        s->n /= 2;
        s->width *= 2;
        return 0;
    }
    if (s->n == s->cap) {
        const size_t cap = s->cap ? 2 * s->cap : 16;
        Bucket *b = realloc(s->b, cap * sizeof *b);
        if (!b) return 1;
        s->b = b;
        s->cap = cap;
    }
    s->b[s->n++] = s->open;
    s->open = (Bucket){0};
    s->open_lines = 0;
    return 0;
}

// The series' points (first line, the buckets' points, last line) into a malloc'd array; frees
// the buckets. Returns 0 or 1 (out of memory).
static int series_finish(Series *s, MetricPoint **out, size_t *n) {
    *out = NULL;
    *n = 0;
    if (s->lines) {
        MetricPoint *a = malloc((2 * s->n + 4) * sizeof *a);
        if (!a) { free(s->b); return 1; }
        size_t k = 0;
        for (size_t i = 0; i <= s->n; i++) {
            const Bucket *b = i < s->n ? &s->b[i] : &s->open;
            for (int j = 0; j < b->n; j++) {
                if (k == 0 && b->p[j].line != s->first.line) a[k++] = s->first;
                a[k++] = b->p[j];
            }
        }
        if (k == 0 || a[k - 1].line != s->last.line) a[k++] = s->last;
        *out = a;
        *n = k;
    }
    free(s->b);
    *s = (Series){0};
    return 0;
}

typedef struct {
    const char *name;   // for messages
    FILE *warn;
    Series train, test;
    size_t line_no, skipped, train_lines, test_lines;
} Parser;

// One line: 0 taken or ignored, -1 skipped (why in `why`), 1 out of memory.
static int parse_line(const char *line, size_t len, Parser *ps, char *why, size_t whylen) {
    json_error_t je;
    json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
    if (!o) {
        if (json_error_code(&je) == json_error_out_of_memory) return 1;
        snprintf(why, whylen, "%s", je.text);
        return -1;
    }
    int rc = 0;
    const json_t *iter = json_object_get(o, "iter");
    const json_t *loss = json_object_get(o, "loss"), *test = json_object_get(o, "test_loss");
    if (!json_is_object(o)) {
        snprintf(why, whylen, "not a JSON object");
        rc = -1;
    } else if (!loss && !test) {
        rc = 0;   // a kind of line this reader does not know
    } else if (!json_is_integer(iter) || json_integer_value(iter) < 0) {
        snprintf(why, whylen, "no \"iter\" (a non-negative integer)");
        rc = -1;
    } else if ((loss && !json_is_number(loss)) || (test && !json_is_number(test))) {
        snprintf(why, whylen, "\"%s\" is not a number", loss && !json_is_number(loss) ? "loss" : "test_loss");
        rc = -1;
    } else {
        MetricPoint p = {.iter = (long)json_integer_value(iter), .tokens = num_or_nan(o, "tokens"),
                         .time_s = num_or_nan(o, "time_s"), .tokens_per_s = num_or_nan(o, "tokens_per_s"),
                         .line = ps->line_no};
        if (loss) {
            p.loss = json_number_value(loss);
            rc = series_push(&ps->train, p);
            ps->train_lines++;
        }
        if (!rc && test) {
            p.loss = json_number_value(test);
            rc = series_push(&ps->test, p);
            ps->test_lines++;
        }
    }
    json_decref(o);
    return rc;
}

// The next line (len bytes, without its '\n'; too_long: longer than RUN_READ_MAX_LINE, not
// given whole). Returns 0, or 1 out of memory (err set).
static int take_line(Parser *ps, const char *text, size_t len, bool too_long, char *err, size_t errlen) {
    ps->line_no++;
    size_t k = 0;
    while (k < len && (text[k] == ' ' || text[k] == '\t' || text[k] == '\r')) k++;
    if (k == len && !too_long) return 0;   // blank lines are nothing
    char why[256];
    const int rc = too_long ? -1 : parse_line(text, len, ps, why, sizeof why);
    if (too_long) snprintf(why, sizeof why, "longer than %d bytes", RUN_READ_MAX_LINE);
    if (rc > 0) {
        snprintf(err, errlen, "%s: out of memory", ps->name);
        return 1;
    }
    if (rc < 0) {
        ps->skipped++;
        if (ps->warn) {   // the file's bytes (a JSON error quotes them) shown, never obeyed, by a terminal
            char name[4200], shown[1024];
            text_printable(ps->name, name, sizeof name);
            text_printable(why, shown, sizeof shown);
            fprintf(ps->warn, "mingpt: warning: %s:%zu: skipped a line that does not parse (%s)\n", name, ps->line_no,
                    shown);
        }
    }
    return 0;
}

// The parser's series into m; frees everything on failure. Returns 0 or RUN_READ_NO_MEMORY.
static int parser_finish(Parser *ps, int rc, RunMetrics *m, char *err, size_t errlen) {
    *m = (RunMetrics){.n_skipped = ps->skipped, .n_train_lines = ps->train_lines, .n_test_lines = ps->test_lines};
    const bool oom = series_finish(&ps->train, &m->train, &m->n_train) | series_finish(&ps->test, &m->test, &m->n_test);
    if (oom && !rc) {
        snprintf(err, errlen, "%s: out of memory", ps->name);
        rc = RUN_READ_NO_MEMORY;
    }
    if (rc) run_metrics_free(m);
    return rc;
}

int run_metrics_parse(const char *text, size_t len, const char *name, RunMetrics *m, FILE *warn, char *err, size_t errlen) {
    Parser ps = {.name = name, .warn = warn};
    int rc = 0;
    for (size_t at = 0; at < len && !rc;) {
        const char *nl = memchr(text + at, '\n', len - at);
        const size_t end = nl ? (size_t)(nl - text) : len;
        if (take_line(&ps, text + at, end - at, false, err, errlen)) rc = RUN_READ_NO_MEMORY;
        at = end + 1;
    }
    return parser_finish(&ps, rc, m, err, errlen);
}

int run_metrics_load(const char *dir, RunMetrics *m, FILE *warn, char *err, size_t errlen) {
    *m = (RunMetrics){0};
    char path[4200];
    int w = snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    if (w < 0 || (size_t)w >= sizeof path) {
        snprintf(err, errlen, "path too long: %s/metrics.jsonl", dir);
        return 1;
    }
    // Never blocks: a FIFO is refused by its type before anything is read.
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        const int e = errno;
        snprintf(err, errlen, "cannot open metrics.jsonl '%s': %s", path, strerror(e));
        return e == ENOENT ? RUN_READ_ABSENT : 1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "metrics.jsonl '%s' is not a regular file", path);
        close(fd);
        return 1;
    }
    // Line by line through a fixed buffer: the memory does not grow with the file.
    enum { CHUNK = 1 << 16 };
    char *chunk = malloc(CHUNK), *line = malloc(RUN_READ_MAX_LINE);
    Parser ps = {.name = path, .warn = warn};
    int rc = 0;
    if (!chunk || !line) {
        snprintf(err, errlen, "%s: out of memory", path);
        rc = RUN_READ_NO_MEMORY;
    }
    size_t len = 0;
    bool too_long = false, pending = false;
    while (!rc) {
        const ssize_t k = read(fd, chunk, CHUNK);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            snprintf(err, errlen, "cannot read metrics.jsonl '%s': %s", path, strerror(errno));
            rc = 1;
            break;
        }
        if (k == 0) break;
        for (size_t at = 0; at < (size_t)k && !rc;) {
            const char *nl = memchr(chunk + at, '\n', (size_t)k - at);
            const size_t end = nl ? (size_t)(nl - chunk) : (size_t)k, seg = end - at;
            if (too_long || len + seg > RUN_READ_MAX_LINE) too_long = true;
            else memcpy(line + len, chunk + at, seg), len += seg;
            pending = true;
            if (nl) {
                if (take_line(&ps, line, len, too_long, err, errlen)) rc = RUN_READ_NO_MEMORY;
                len = 0;
                too_long = pending = false;
            }
            at = end + 1;
        }
    }
    if (!rc && pending && take_line(&ps, line, len, too_long, err, errlen)) rc = RUN_READ_NO_MEMORY;   // no final '\n'
    close(fd);
    free(chunk);
    free(line);
    return parser_finish(&ps, rc, m, err, errlen);
}

void run_metrics_free(RunMetrics *m) {
    free(m->train);
    free(m->test);
    *m = (RunMetrics){0};
}

// ========================================================================== summary.json

// A number or null field into *x (NaN for null or absent); false for another type.
static bool number_field(const json_t *o, const char *key, double *x) {
    const json_t *v = json_object_get(o, key);
    *x = json_is_number(v) ? json_number_value(v) : NAN;
    return !v || json_is_null(v) || json_is_number(v);
}

int summary_load(const char *dir, SummaryInfo *s, char *err, size_t errlen) {
    *s = (SummaryInfo){.exit_status = RUN_SUMMARY_RUNNING, .final_train_loss = NAN, .test_loss = NAN,
                       .tokens_per_s = NAN, .wall_s = NAN, .iters = -1};
    char path[4200];
    unsigned char *buf;
    size_t len;
    int rc = read_in_dir(dir, "summary.json", RUN_READ_MAX_SMALL, path, sizeof path, &buf, &len, err, errlen);
    if (rc) return rc;
    json_error_t je;
    json_t *o = json_loadb((const char *)buf, len, JSON_REJECT_DUPLICATES, &je);
    free(buf);
    if (!o && json_error_code(&je) == json_error_out_of_memory) {
        snprintf(err, errlen, "%s: out of memory", path);
        return RUN_READ_NO_MEMORY;
    }
    if (!o) return file_malformed(err, errlen, "summary", path, "line %d: %s", je.line, je.text);
    const json_t *status = json_object_get(o, "exit_status"), *iters = json_object_get(o, "iters");
    const char *bad = NULL;
    if (!json_is_object(o)) bad = "not a JSON object";
    else if (!(json_is_null(status) || (json_is_integer(status) && json_integer_value(status) >= 0 &&
                                        json_integer_value(status) <= 255)))
        bad = "\"exit_status\" is not null or an exit status (0 to 255)";
    else if (iters && !json_is_null(iters) && !(json_is_integer(iters) && json_integer_value(iters) >= 0))
        bad = "\"iters\" is not a non-negative integer";
    else if (!number_field(o, "final_train_loss", &s->final_train_loss) || !number_field(o, "test_loss", &s->test_loss) ||
             !number_field(o, "tokens_per_s", &s->tokens_per_s) || !number_field(o, "wall_s", &s->wall_s))
        bad = "a loss, tokens_per_s or wall_s is not a number or null";
    if (!bad) {
        if (json_is_integer(status)) s->exit_status = (int)json_integer_value(status);
        if (json_is_integer(iters)) s->iters = (long)json_integer_value(iters);
    }
    json_decref(o);
    return bad ? file_malformed(err, errlen, "summary", path, "%s", bad) : 0;
}

// ========================================================================== overrides.yaml

int overrides_load(const char *dir, char *out, size_t outlen, char *err, size_t errlen) {
    out[0] = 0;
    char path[4200];
    unsigned char *buf;
    size_t len;
    int rc = read_in_dir(dir, ".hydra/overrides.yaml", RUN_READ_MAX_SMALL, path, sizeof path, &buf, &len, err, errlen);
    if (rc) return rc;
    CfgNode *root = cfg_parse_bytes((const char *)buf, len, path, err, errlen);
    free(buf);
    if (!root) return 1;
    if (root->type != CFG_LIST && root->type != CFG_NULL) rc = file_malformed(err, errlen, "overrides", path, "not a YAML list");
    size_t o = 0;
    for (size_t i = 0; !rc && root->type == CFG_LIST && i < root->n; i++) {
        const CfgNode *k = root->kids[i];
        // overrides.yaml holds strings; a plain scalar that typed as a number keeps its source text
        if (k->type == CFG_LIST || k->type == CFG_MAP || !k->s) {
            rc = file_malformed(err, errlen, "overrides", path, "item %zu is not a string", i + 1);
            break;
        }
        int w = snprintf(out + o, outlen - o, "%s%s", o ? " " : "", k->s);
        if (w < 0 || (size_t)w >= outlen - o) break;   // a label that long is cut
        o += (size_t)w;
    }
    cfg_free(root);
    return rc;
}

// ========================================================================== directories

static bool has_file(const char *dir, const char *name) {
    char path[4200];
    struct stat st;
    int w = snprintf(path, sizeof path, "%s/%s", dir, name);
    return w > 0 && (size_t)w < sizeof path && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

bool run_dir_is_run(const char *dir) { return has_file(dir, "summary.json") || has_file(dir, "metrics.jsonl"); }

// What <dir>/<name> is when it is there but not a regular file ("a FIFO", "a directory", "a
// symbolic link loop", ...); NULL when it is a regular file or absent. Never opens it.
static const char *odd_file(const char *dir, const char *name) {
    char path[4200];
    struct stat st;
    int w = snprintf(path, sizeof path, "%s/%s", dir, name);
    if (w < 0 || (size_t)w >= sizeof path) return NULL;
    if (stat(path, &st) != 0) {
        if (errno == ELOOP) return "a symbolic link loop";
        if (errno == ENOENT && lstat(path, &st) == 0) return "a dangling symbolic link";
        return errno == ENOENT ? NULL : "unreadable";
    }
    return S_ISREG(st.st_mode) ? NULL : S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO"
         : S_ISSOCK(st.st_mode) ? "a socket" : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : "not a file";
}

// Job directories: numeric names first, in number order, then the rest by name.
static int job_order(const void *a, const void *b) {
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    const char *bx = strrchr(x, '/') + 1, *by = strrchr(y, '/') + 1;
    const bool nx = bx[strspn(bx, "0123456789")] == 0 && *bx, ny = by[strspn(by, "0123456789")] == 0 && *by;
    if (nx != ny) return nx ? -1 : 1;
    if (nx && strlen(bx) != strlen(by)) return strlen(bx) < strlen(by) ? -1 : 1;
    return strcmp(bx, by);
}

static int add_dir(char ***dirs, int *n, const char *d) {
    char **b = realloc(*dirs, (size_t)(*n + 1) * sizeof *b);
    if (!b) return 1;
    *dirs = b;
    if (!(b[*n] = strdup(d))) return 1;
    (*n)++;
    return 0;
}

// The job directories of sweep directory `sweep`, appended to *dirs in job order. A sweep whose
// plan (SWEEP_PLAN_FILE) is there may have none yet (stopped before its first job).
static int add_jobs(const char *sweep, char ***dirs, int *n, char *err, size_t errlen) {
    DIR *d = opendir(sweep);
    if (!d) {
        snprintf(err, errlen, "cannot read sweep directory '%s': %s", sweep, strerror(errno));
        return 2;
    }
    const int first = *n;
    int rc = 0;
    for (struct dirent *e; !rc && (e = readdir(d));) {
        char sub[4200];
        int w = snprintf(sub, sizeof sub, "%s/%s", sweep, e->d_name);
        if (e->d_name[0] == '.' || w < 0 || (size_t)w >= sizeof sub) continue;
        if (run_dir_is_run(sub)) rc = add_dir(dirs, n, sub);
    }
    closedir(d);
    if (rc) { snprintf(err, errlen, "out of memory"); return 1; }
    if (*n == first && !has_file(sweep, SWEEP_PLAN_FILE)) {
        snprintf(err, errlen, "sweep directory '%s' has no job directory (none holds summary.json or metrics.jsonl)",
                 sweep);
        return 2;
    }
    if (*n > first) qsort(*dirs + first, (size_t)(*n - first), sizeof **dirs, job_order);   // *dirs may be NULL
    return 0;
}

int run_dirs_expand(char *const *args, int n, char ***dirs, int *n_dirs, char *err, size_t errlen) {
    *dirs = NULL;
    *n_dirs = 0;
    for (int i = 0; i < n; i++) {
        char d[4096];
        snprintf(d, sizeof d, "%s", args[i]);
        for (size_t l = strlen(d); l > 1 && d[l - 1] == '/'; l--) d[l - 1] = 0;   // "sw/" names sw
        struct stat st;
        const char *odd;
        int rc = 0;
        if (stat(d, &st) != 0 || !S_ISDIR(st.st_mode)) {
            snprintf(err, errlen, "'%s' is not a directory", args[i]);
            rc = 2;
        } else if (has_file(d, "multirun.yaml")) {
            rc = add_jobs(d, dirs, n_dirs, err, errlen);
        } else if (run_dir_is_run(d)) {
            if (add_dir(dirs, n_dirs, d)) { snprintf(err, errlen, "out of memory"); rc = 1; }
        } else if ((odd = odd_file(d, "metrics.jsonl")) || (odd = odd_file(d, "summary.json"))) {
            snprintf(err, errlen, "'%s/%s' is %s, not a file", d, odd_file(d, "metrics.jsonl") ? "metrics.jsonl"
                     : "summary.json", odd);
            rc = 2;
        } else {
            snprintf(err, errlen, "'%s' is not a run directory (no summary.json or metrics.jsonl) nor a sweep "
                     "directory (no multirun.yaml)", args[i]);
            rc = 2;
        }
        if (rc) {
            run_dirs_free(*dirs, *n_dirs);
            *dirs = NULL;
            *n_dirs = 0;
            return rc;
        }
    }
    return 0;
}

// ========================================================================== a sweep's plan

int sweep_plan_load(const char *sweep, SweepJob **jobs, size_t *n, char *err, size_t errlen) {
    *jobs = NULL;
    *n = 0;
    char path[4200];
    unsigned char *buf;
    size_t len;
    int rc = read_in_dir(sweep, SWEEP_PLAN_FILE, RUN_READ_MAX_PLAN, path, sizeof path, &buf, &len, err, errlen);
    if (rc) return rc;
    CfgNode *root = cfg_parse_bytes((const char *)buf, len, path, err, errlen);
    free(buf);
    if (!root) return 1;
    if (root->type != CFG_LIST) rc = file_malformed(err, errlen, "sweep plan", path, "not a YAML list");
    SweepJob *a = rc ? NULL : calloc(root->n + 1, sizeof *a);
    if (!rc && !a) {
        snprintf(err, errlen, "%s: out of memory", path);
        rc = RUN_READ_NO_MEMORY;
    }
    for (size_t i = 0; !rc && i < root->n; i++) {
        const CfgNode *job = root->kids[i];
        const CfgNode *sub = job->type == CFG_MAP ? cfg_map_get(job, "subdir") : NULL;
        const CfgNode *ov = job->type == CFG_MAP ? cfg_map_get(job, "overrides") : NULL;
        if (!sub || sub->type == CFG_LIST || sub->type == CFG_MAP || !sub->s || !ov || ov->type != CFG_LIST) {
            rc = file_malformed(err, errlen, "sweep plan", path, "job %zu has no \"subdir\" (a string) and "
                                "\"overrides\" (a list)", i + 1);
            break;
        }
        size_t total = 1;
        for (size_t k = 0; k < ov->n; k++) total += ov->kids[k]->s ? strlen(ov->kids[k]->s) + 1 : 0;
        a[i].overrides = malloc(total);
        char dir[4200];
        size_t base = strlen(sweep);
        while (base > 1 && sweep[base - 1] == '/') base--;   // "sw/" names sw, as in run_dirs_expand
        const int w = sub->s[0] == '/' ? snprintf(dir, sizeof dir, "%s", sub->s)
                                        : snprintf(dir, sizeof dir, "%.*s/%s", (int)base, sweep, sub->s);
        a[i].dir = w > 0 && (size_t)w < sizeof dir ? strdup(dir) : NULL;
        if (!a[i].overrides || !a[i].dir) {
            snprintf(err, errlen, "%s: out of memory or a path too long", path);
            rc = a[i].dir ? RUN_READ_NO_MEMORY : 1;
            *n = i + 1;
            break;
        }
        size_t o = 0;
        a[i].overrides[0] = 0;
        for (size_t k = 0; k < ov->n; k++) {
            const CfgNode *t = ov->kids[k];
            if (t->type == CFG_LIST || t->type == CFG_MAP || !t->s) continue;
            o += (size_t)sprintf(a[i].overrides + o, "%s%s", o ? " " : "", t->s);
        }
        *n = i + 1;
    }
    cfg_free(root);
    if (rc) {
        sweep_plan_free(a, *n);
        *jobs = NULL;
        *n = 0;
        return rc;
    }
    *jobs = a;
    return 0;
}

void sweep_plan_free(SweepJob *jobs, size_t n) {
    for (size_t i = 0; jobs && i < n; i++) {
        free(jobs[i].dir);
        free(jobs[i].overrides);
    }
    free(jobs);
}

void run_dirs_free(char **dirs, int n) {
    for (int i = 0; i < n; i++) free(dirs[i]);
    free(dirs);
}

// ========================================================================== text

// Length of the valid UTF-8 sequence at p (RFC 3629: no overlongs, surrogates or > U+10FFFF), 0 if none.
static size_t utf8_len(const unsigned char *p) {
    if (p[0] < 0x80) return 1;
    size_t n = p[0] >= 0xc2 && p[0] <= 0xdf ? 2 : p[0] >= 0xe0 && p[0] <= 0xef ? 3 : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    if (n == 3 && ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0))) return 0;
    if (n == 4 && ((p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90))) return 0;
    return n;
}

void text_utf8(const char *s, char *out, size_t len) {
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && o + 1 < len;) {
        size_t k = utf8_len(p);
        if (k == 0 || o + k >= len) {
            if (k) break;   // a whole character that does not fit
            out[o++] = '?';
            p++;
            continue;
        }
        memcpy(out + o, p, k);
        o += k;
        p += k;
    }
    if (len) out[o] = 0;
}

void text_printable(const char *s, char *out, size_t len) {
    size_t o = 0;
    if (!len) return;
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        const size_t k = utf8_len(p), adv = k ? k : 1;
        char esc[16];
        const char *text = esc;
        size_t n;
        if (k == 0) snprintf(esc, sizeof esc, "?");                                    // not UTF-8
        else if (k == 1 && (*p < 0x20 || *p == 0x7f)) snprintf(esc, sizeof esc, "\\%03o", *p);   // C0, DEL: \033
        else if (k == 2 && p[0] == 0xc2 && p[1] < 0xa0) snprintf(esc, sizeof esc, "\\u%04x", p[1]);   // C1
        else text = (const char *)p;
        n = text == esc ? strlen(esc) : k;
        if (o + n >= len) break;
        memcpy(out + o, text, n);
        o += n;
        p += adv;
    }
    out[o] = 0;
}

// ========================================================================== labels

// The shortest %.Ng text of x that reads back as x.
static void shortest_g(double x, char *buf, size_t len) {
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(buf, len, "%.*g", digits, x);
        if (strtod(buf, NULL) == x) return;
    }
}

void overrides_normalize_numbers(char *text, size_t len) {
    char *out = malloc(len);
    if (!out) return;   // left as written
    size_t o = 0;
    bool fits = true;
    for (const char *p = text; *p && fits;) {
        const size_t k = strcspn(p, " ");
        const char *eq = memchr(p, '=', k);
        char word[512], num[64];
        const char *put = p;
        size_t n = k;
        if (eq && eq + 1 < p + k && (size_t)(p + k - eq) < sizeof word) {
            memcpy(word, eq + 1, (size_t)(p + k - eq - 1));
            word[p + k - eq - 1] = 0;
            char *end;
            const double v = strtod(word, &end);
            // a decimal number (no hex, inf or nan), written some other way than its shortest form
            if (*end == 0 && isfinite(v) && !strpbrk(word, "xXnN") && (size_t)(eq - p) + 1 + 32 < sizeof word) {
                shortest_g(v, num, sizeof num);
                n = (size_t)snprintf(word, sizeof word, "%.*s%s", (int)(eq - p + 1), p, num);
                put = word;
            }
        }
        if (o + n + 2 > len) fits = false;
        else {
            if (o) out[o++] = ' ';
            memcpy(out + o, put, n);
            o += n;
        }
        p += k;
        p += *p == ' ';
    }
    if (fits) {
        out[o] = 0;
        memcpy(text, out, o + 1);
    }
    free(out);
}

// Whether the space-separated word w (length n) is one of text's words.
static bool has_word(const char *text, const char *w, size_t n) {
    for (const char *p = text; *p;) {
        const size_t k = strcspn(p, " ");
        if (k == n && !memcmp(p, w, n)) return true;
        p += k;
        p += *p == ' ';
    }
    return false;
}

void overrides_drop_common(char **texts, int n, char *common, size_t common_len) {
    if (common_len) common[0] = 0;
    if (n < 2) return;
    char *first = strdup(texts[0]);
    if (!first) return;   // labels stay whole
    size_t c = 0;
    for (const char *p = first; *p;) {   // the words every text has, in the first one's order
        const size_t k = strcspn(p, " ");
        bool everywhere = k > 0;
        for (int i = 1; i < n && everywhere; i++) everywhere = has_word(texts[i], p, k);
        if (everywhere) {
            for (int i = 0; i < n; i++) {   // remove the word (and one space) from each text
                char *t = texts[i];
                for (char *q = t; *q;) {
                    const size_t l = strcspn(q, " ");
                    if (l == k && !memcmp(q, p, k)) {
                        const size_t skip = l + (q[l] == ' ');
                        memmove(q, q + skip, strlen(q + skip) + 1);
                        break;
                    }
                    q += l;
                    q += *q == ' ';
                }
                const size_t len = strlen(t);
                if (len && t[len - 1] == ' ') t[len - 1] = 0;
            }
            int w = snprintf(common + c, common_len - c, "%s%.*s", c ? " " : "", (int)k, p);
            if (w > 0 && (size_t)w < common_len - c) c += (size_t)w;
        }
        p += k;
        p += *p == ' ';
    }
    free(first);
}
