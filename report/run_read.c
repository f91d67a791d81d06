// report/run_read.c — see run_read.h.
#include "report/run_read.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
    return e == ENOENT ? RUN_READ_ABSENT : 1;
}

// ========================================================================== metrics.jsonl

static double num_or_nan(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static int push(MetricPoint **a, size_t *n, MetricPoint p) {
    if ((*n & (*n + 1)) == 0) {   // grow at 0, 1, 3, 7, ... entries: capacity 2^k
        MetricPoint *b = realloc(*a, (2 * *n + 1) * sizeof **a);
        if (!b) return 1;
        *a = b;
    }
    (*a)[(*n)++] = p;
    return 0;
}

// One line: 0 taken or ignored, -1 skipped (why in `why`), 1 out of memory.
static int parse_line(const char *line, size_t len, RunMetrics *m, char *why, size_t whylen) {
    json_error_t je;
    json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
    if (!o) { snprintf(why, whylen, "%s", je.text); return -1; }
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
                         .time_s = num_or_nan(o, "time_s"), .tokens_per_s = num_or_nan(o, "tokens_per_s")};
        if (loss) {
            p.loss = json_number_value(loss);
            rc = push(&m->train, &m->n_train, p);
        }
        if (!rc && test) {
            p.loss = json_number_value(test);
            rc = push(&m->test, &m->n_test, p);
        }
    }
    json_decref(o);
    return rc;
}

int run_metrics_parse(const char *text, size_t len, const char *name, RunMetrics *m, FILE *warn, char *err, size_t errlen) {
    *m = (RunMetrics){0};
    size_t line_no = 0;
    for (size_t at = 0; at < len;) {
        const char *nl = memchr(text + at, '\n', len - at);
        const size_t end = nl ? (size_t)(nl - text) : len;
        line_no++;
        size_t k = at;
        while (k < end && (text[k] == ' ' || text[k] == '\t' || text[k] == '\r')) k++;
        if (k < end) {   // blank lines are nothing
            char why[256];
            const int rc = parse_line(text + at, end - at, m, why, sizeof why);
            if (rc > 0) {
                run_metrics_free(m);
                snprintf(err, errlen, "%s: out of memory", name);
                return 1;
            }
            if (rc < 0) {
                m->n_skipped++;
                if (warn) fprintf(warn, "mingpt: warning: %s:%zu: skipped a line that does not parse (%s)\n", name,
                                  line_no, why);
            }
        }
        at = end + 1;
    }
    return 0;
}

int run_metrics_load(const char *dir, RunMetrics *m, FILE *warn, char *err, size_t errlen) {
    *m = (RunMetrics){0};
    char path[4200];
    unsigned char *buf;
    size_t len;
    int rc = read_in_dir(dir, "metrics.jsonl", RUN_READ_MAX_METRICS, path, sizeof path, &buf, &len, err, errlen);
    if (rc) return rc;
    rc = run_metrics_parse((const char *)buf, len, path, m, warn, err, errlen);
    free(buf);
    return rc;
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

static bool is_run(const char *dir) { return has_file(dir, "summary.json") || has_file(dir, "metrics.jsonl"); }

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

// The job directories of sweep directory `sweep`, appended to *dirs in job order.
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
        if (is_run(sub)) rc = add_dir(dirs, n, sub);
    }
    closedir(d);
    if (rc) { snprintf(err, errlen, "out of memory"); return 1; }
    if (*n == first) {
        snprintf(err, errlen, "sweep directory '%s' has no job directory (none holds summary.json or metrics.jsonl)",
                 sweep);
        return 2;
    }
    qsort(*dirs + first, (size_t)(*n - first), sizeof **dirs, job_order);
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
        int rc = 0;
        if (stat(d, &st) != 0 || !S_ISDIR(st.st_mode)) {
            snprintf(err, errlen, "'%s' is not a directory", args[i]);
            rc = 2;
        } else if (has_file(d, "multirun.yaml")) {
            rc = add_jobs(d, dirs, n_dirs, err, errlen);
        } else if (is_run(d)) {
            if (add_dir(dirs, n_dirs, d)) { snprintf(err, errlen, "out of memory"); rc = 1; }
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

// ========================================================================== labels

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
