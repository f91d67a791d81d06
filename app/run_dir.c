// app/run_dir.c — run directories, .hydra files, summary.json.
#include "app/run_dir.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "checkpoint/atomic_file.h"

int run_dir_join(const char *dir, const char *rel, char *out, size_t outlen) {
    char buf[4096];
    int w = rel[0] == '/' ? snprintf(buf, sizeof buf, "%s", rel) : snprintf(buf, sizeof buf, "%s/%s", dir, rel);
    if (w < 0 || (size_t)w >= sizeof buf) return -1;
    // Drop "." segments and repeated or trailing slashes: /a/./b/ -> /a/b
    size_t o = 0;
    for (const char *p = buf; *p;) {
        size_t len = strcspn(p, "/");
        bool skip = len == 0 || (len == 1 && p[0] == '.');
        if (!skip) {
            if (o + len + 2 > outlen) return -1;
            out[o++] = '/';
            memcpy(out + o, p, len);
            o += len;
        }
        p += len;
        if (*p == '/') p++;
    }
    if (o == 0) {
        if (outlen < 2) return -1;
        out[o++] = '/';
    }
    out[o] = 0;
    if (buf[0] != '/') memmove(out, out + 1, o);  // rel and dir both relative: stay relative
    return 0;
}

// out = a/b; false when it does not fit.
static bool path2(char *out, size_t len, const char *a, const char *b) {
    int w = snprintf(out, len, "%s/%s", a, b);
    return w >= 0 && (size_t)w < len;
}

// mkdir -p for the parents of path (not path itself).
static int make_parents(const char *path, char *err, size_t errlen) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0777) != 0 && errno != EEXIST) {
            snprintf(err, errlen, "cannot create directory '%s': %s", tmp, strerror(errno));
            return -1;
        }
        *p = '/';
    }
    return 0;
}

int run_dir_create(const char *dir, bool unique, char *out, size_t outlen, bool *created, char *err, size_t errlen) {
    if (created) *created = false;
    if (make_parents(dir, err, errlen)) return -1;
    for (int k = 0; k < 10000; k++) {
        int w = k ? snprintf(out, outlen, "%s_%d", dir, k) : snprintf(out, outlen, "%s", dir);
        if (w < 0 || (size_t)w >= outlen) {
            snprintf(err, errlen, "output directory name '%s' is too long", dir);
            return -1;
        }
        if (mkdir(out, 0777) == 0) {
            if (created) *created = true;
            return 0;
        }
        struct stat st;
        if (errno != EEXIST || stat(out, &st) != 0 || !S_ISDIR(st.st_mode)) {
            snprintf(err, errlen, "cannot create directory '%s': %s", out, errno == EEXIST ? "not a directory" : strerror(errno));
            return -1;
        }
        if (!unique) return 0;  // Hydra reuses an existing directory
    }
    snprintf(err, errlen, "cannot create a new directory next to '%s': too many runs", dir);
    return -1;
}

int run_dir_write_file(const char *path, const char *text, char *err, size_t errlen) {
    atomic_remove_stale(path);   // left by a writer killed between its write and its rename
    char tmp[4200];
    int w = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (w < 0 || (size_t)w >= sizeof tmp) {
        snprintf(err, errlen, "path too long: %s", path);
        return -1;
    }
    FILE *f = fopen(tmp, "w");
    if (!f) {
        snprintf(err, errlen, "cannot write '%s': %s", tmp, strerror(errno));
        return -1;
    }
    bool ok = fputs(text, f) >= 0;
    ok &= fclose(f) == 0;
    if (!ok || rename(tmp, path) != 0) {
        snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

// Writes node as YAML to dir/name.
static int write_yaml(const char *dir, const char *name, const CfgNode *node, char *err, size_t errlen) {
    char path[4200];
    if (!path2(path, sizeof path, dir, name)) {
        snprintf(err, errlen, "path too long: %s", dir);
        return -1;
    }
    char *yaml = cfg_to_yaml(node);
    if (!yaml) {
        snprintf(err, errlen, "cannot write '%s': the config is not valid UTF-8", path);
        return -1;
    }
    int rc = run_dir_write_file(path, yaml, err, errlen);
    free(yaml);
    return rc;
}

int run_dir_write_hydra(const char *dir, const char *subdir, const CfgNode *tree, char *const *task, int n_task,
                        char *err, size_t errlen) {
    char want[4200], hdir[4200];
    if (run_dir_join(dir, subdir, want, sizeof want) || run_dir_create(want, false, hdir, sizeof hdir, NULL, err, errlen))
        return -1;
    CfgNode *job = cfg_copy(tree), *hydra = cfg_new_map(), *ov = cfg_new_list();
    const CfgNode *h = cfg_map_get(tree, "hydra");
    cfg_map_del(job, "hydra");
    if (h) cfg_map_put(hydra, "hydra", cfg_copy(h));
    for (int i = 0; i < n_task; i++) cfg_list_push(ov, cfg_new_str(task[i]));
    int rc = write_yaml(hdir, "config.yaml", job, err, errlen) || write_yaml(hdir, "hydra.yaml", hydra, err, errlen) ||
             write_yaml(hdir, "overrides.yaml", ov, err, errlen) ? -1 : 0;
    cfg_free(job);
    cfg_free(hydra);
    cfg_free(ov);
    return rc;
}

int run_dir_write_plan(const char *sweep_dir, const RunDirPlannedJob *jobs, size_t n, char *err, size_t errlen) {
    CfgNode *list = cfg_new_list();
    for (size_t i = 0; i < n; i++) {
        CfgNode *job = cfg_new_map(), *ov = cfg_new_list();
        cfg_map_put(job, "num", cfg_new_int(jobs[i].num));
        cfg_map_put(job, "subdir", cfg_new_str(jobs[i].subdir));
        for (int k = 0; k < jobs[i].n_task; k++) cfg_list_push(ov, cfg_new_str(jobs[i].task[k]));
        cfg_map_put(job, "overrides", ov);
        cfg_list_push(list, job);
    }
    char want[4200], dir[4200];
    const int rc = run_dir_join(sweep_dir, SWEEP_PLAN_DIR, want, sizeof want) ||
                   run_dir_create(want, false, dir, sizeof dir, NULL, err, errlen) ||
                   write_yaml(sweep_dir, SWEEP_PLAN_FILE, list, err, errlen) ? -1 : 0;
    cfg_free(list);
    return rc;
}

// A JSON number, or null when not finite (JSON has no NaN or infinity).
static json_t *json_number_or_null(double x) { return isfinite(x) ? json_real(x) : json_null(); }

// A JSON string of s (null for NULL); bytes that are not UTF-8 (a path may hold any) become '?'.
static json_t *json_text(const char *s) {
    if (!s) return json_null();
    json_t *j = json_string(s);
    if (j) return j;
    char *copy = strdup(s);
    if (!copy) return NULL;
    for (unsigned char *p = (unsigned char *)copy; *p; p++)
        if (*p >= 0x80) *p = '?';
    j = json_string(copy);
    free(copy);
    return j;
}

int run_dir_write_summary(const char *dir, const RunSummary *s, char *err, size_t errlen) {
    const TrainResult *r = s->result;
    json_t *o = json_object();
    if (o) {
        json_object_set_new(o, "exit_status", s->exit_status == RUN_SUMMARY_RUNNING ? json_null()
                                                                                   : json_integer(s->exit_status));
        json_object_set_new(o, "final_train_loss", json_number_or_null(r ? r->final_train_loss : NAN));
        json_object_set_new(o, "test_loss", json_number_or_null(r ? r->test_loss : NAN));
        json_object_set_new(o, "iters", json_integer(r ? r->iters : 0));
        json_object_set_new(o, "iters_this_run", json_integer(r ? r->iters_this_run : 0));
        json_object_set_new(o, "tokens_per_s", json_number_or_null(r ? r->tokens_per_s : NAN));
        json_object_set_new(o, "wall_s", json_number_or_null(r ? r->wall_s : NAN));
        json_object_set_new(o, "snapshot_path", json_text(s->snapshot_path));
        json_object_set_new(o, "output_dir", json_text(s->output_dir));
        json_object_set_new(o, "cwd", json_text(s->cwd));
    }
    char *body = o && json_object_size(o) == 10 ? json_dumps(o, JSON_INDENT(2)) : NULL;
    json_decref(o);
    char *text = body ? malloc(strlen(body) + 2) : NULL;
    if (!text) {
        free(body);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    sprintf(text, "%s\n", body);
    free(body);
    char path[4200];
    int rc = -1;
    if (!path2(path, sizeof path, dir, "summary.json")) snprintf(err, errlen, "path too long: %s", dir);
    else rc = run_dir_write_file(path, text, err, errlen);
    free(text);
    return rc;
}

// ========================================================================== the lock

// "PID HOST" of the lock file's holder into who ("another process" when unreadable).
static void lock_holder(int fd, char *who, size_t len) {
    char buf[512];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    long pid = 0;
    char host[256] = "";
    if (n > 0) {
        buf[n] = 0;
        if (sscanf(buf, "%ld %255s", &pid, host) == 2 && pid > 0) {
            snprintf(who, len, "process %ld on %s", pid, host);
            return;
        }
    }
    snprintf(who, len, "another process (its lock file holds no process id yet)");
}

int run_dir_lock(const char *lock_path, const char *what, bool *created, char *err, size_t errlen) {
    if (created) *created = false;
    for (int attempt = 0; attempt < 100; attempt++) {
        bool made = false;
        int fd = open(lock_path, O_RDWR | O_CLOEXEC);
        if (fd < 0 && errno == EACCES) fd = open(lock_path, O_RDONLY | O_CLOEXEC);  // flock needs no write access
        if (fd < 0 && errno == ENOENT) {
            fd = open(lock_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
            made = fd >= 0;
            if (fd < 0 && errno == EEXIST) continue;   // another run made it first: open that one
        }
        if (fd < 0) {
            int e = errno;
            snprintf(err, errlen, "cannot create the lock file '%s': %s", lock_path, strerror(e));
            errno = e;
            return -2;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            char who[400];
            lock_holder(fd, who, sizeof who);
            snprintf(err, errlen, "%s is in use by %s (lock file '%s')", what, who, lock_path);
            close(fd);
            return -1;
        }
        // The file locked must still be the one at lock_path (a failed run removes its new
        // directory's lock file): otherwise try again with the file there now.
        struct stat a, b;
        if (fstat(fd, &a) != 0 || stat(lock_path, &b) != 0 || a.st_ino != b.st_ino || a.st_dev != b.st_dev) {
            close(fd);
            continue;
        }
        char host[256] = "?", text[400];
        if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "?");
        host[sizeof host - 1] = 0;
        int w = snprintf(text, sizeof text, "%ld %s\n", (long)getpid(), host);
        if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)w, 0) != w) {
            // the lock holds; only the message of a second run loses the process id
        }
        if (created) *created = made;
        return fd;
    }
    snprintf(err, errlen, "cannot take the lock file '%s': it keeps being replaced", lock_path);
    return -2;
}

void run_dir_unlock(int fd) {
    if (fd >= 0) close(fd);   // closing the last descriptor releases the flock
}

// ========================================================================== undo

enum { UNDO_FILE, UNDO_APPEND, UNDO_MKDIR, UNDO_RENAME };

struct RunDirUndoStep {
    int kind;
    char *path, *to;     // to: UNDO_RENAME's new name
    bool existed;        // UNDO_FILE / UNDO_APPEND: path was there
    char *text;          // UNDO_FILE: its bytes
    size_t len;          // UNDO_FILE: their count; UNDO_APPEND: the size
};

static RunDirUndoStep *undo_push(RunDirUndo *u, int kind, const char *path) {
    if (u->n == u->cap) {
        u->cap = u->cap ? 2 * u->cap : 8;
        u->steps = realloc(u->steps, u->cap * sizeof *u->steps);
        if (!u->steps) abort();
    }
    RunDirUndoStep *s = &u->steps[u->n++];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->path = strdup(path);
    if (!s->path) abort();
    return s;
}

void run_dir_undo_file(RunDirUndo *u, const char *path) {
    RunDirUndoStep *s = undo_push(u, UNDO_FILE, path);
    FILE *f = fopen(path, "rb");
    if (!f) return;
    s->existed = true;
    size_t cap = 4096;
    s->text = malloc(cap);
    for (size_t n; s->text && (n = fread(s->text + s->len, 1, cap - s->len, f)) > 0;) {
        s->len += n;
        if (s->len == cap) s->text = realloc(s->text, cap *= 2);
    }
    if (!s->text) abort();
    fclose(f);
}

void run_dir_undo_append(RunDirUndo *u, const char *path) {
    RunDirUndoStep *s = undo_push(u, UNDO_APPEND, path);
    struct stat st;
    s->existed = stat(path, &st) == 0;
    s->len = s->existed ? (size_t)st.st_size : 0;
}

void run_dir_undo_mkdir(RunDirUndo *u, const char *path) { undo_push(u, UNDO_MKDIR, path); }

void run_dir_undo_rename(RunDirUndo *u, const char *from, const char *to) {
    RunDirUndoStep *s = undo_push(u, UNDO_RENAME, from);
    s->to = strdup(to);
    if (!s->to) abort();
}

void run_dir_undo_apply(RunDirUndo *u) {
    for (size_t i = u->n; i-- > 0;) {
        RunDirUndoStep *s = &u->steps[i];
        switch (s->kind) {
        case UNDO_FILE:
            if (!s->existed) unlink(s->path);
            else {
                FILE *f = fopen(s->path, "wb");
                if (f) {
                    if (fwrite(s->text, 1, s->len, f) != s->len) { /* best effort */ }
                    fclose(f);
                }
            }
            break;
        case UNDO_APPEND:
            if (!s->existed) unlink(s->path);
            else if (truncate(s->path, (off_t)s->len) != 0) { /* best effort */ }
            break;
        case UNDO_MKDIR: rmdir(s->path); break;
        case UNDO_RENAME:
            if (rename(s->to, s->path) != 0) { /* best effort */ }
            break;
        }
    }
    run_dir_undo_free(u);
}

void run_dir_undo_free(RunDirUndo *u) {
    for (size_t i = 0; i < u->n; i++) {
        free(u->steps[i].path);
        free(u->steps[i].to);
        free(u->steps[i].text);
    }
    free(u->steps);
    memset(u, 0, sizeof *u);
}

// ========================================================================== rotation

// out = a b (concatenated); false when it does not fit.
static bool cat2(char *out, size_t len, const char *a, const char *b) {
    int w = snprintf(out, len, "%s%s", a, b);
    return w >= 0 && (size_t)w < len;
}

int run_dir_rotate(const char *dir, time_t now, RunDirUndo *u, char *moved, size_t movedlen, char *err, size_t errlen) {
    static const char *const names[] = { "metrics.jsonl", "summary.json", "loss.svg", "loss.png" };
    enum { N = sizeof names / sizeof names[0] };
    char from[N][4200], to[4300], stamp[64], suffix[96];
    bool there[N];
    int n_there = 0;
    moved[0] = 0;
    for (int i = 0; i < N; i++) {
        struct stat st;
        if (!path2(from[i], sizeof from[i], dir, names[i])) {
            snprintf(err, errlen, "path too long: %s", dir);
            return -1;
        }
        there[i] = lstat(from[i], &st) == 0;
        n_there += there[i];
    }
    if (!n_there) return 0;
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    for (int k = 0;; k++) {   // the first suffix free for every file
        if (k) snprintf(suffix, sizeof suffix, ".prev-%s-%d", stamp, k);
        else snprintf(suffix, sizeof suffix, ".prev-%s", stamp);
        bool taken = false;
        for (int i = 0; i < N && !taken; i++) {
            struct stat st;
            taken = !cat2(to, sizeof to, from[i], suffix) || lstat(to, &st) == 0;
        }
        if (!taken) break;
        if (k == 10000) {
            snprintf(err, errlen, "cannot move an earlier run's files aside in '%s': too many", dir);
            return -1;
        }
    }
    size_t o = (size_t)snprintf(moved, movedlen, "a new run in '%s': moved the earlier run's", dir);
    for (int i = 0, said = 0; i < N; i++) {
        if (!there[i]) continue;
        if (!cat2(to, sizeof to, from[i], suffix) || rename(from[i], to) != 0) {
            snprintf(err, errlen, "cannot move '%s' aside to '%s': %s", from[i], to, strerror(errno));
            moved[0] = 0;
            return -1;
        }
        if (u) run_dir_undo_rename(u, from[i], to);
        if (o < movedlen) o += (size_t)snprintf(moved + o, movedlen - o, "%s %s", said++ ? "," : "", names[i]);
    }
    if (o < movedlen) snprintf(moved + o, movedlen - o, " to *%s", suffix);
    return 0;
}
