// app/run_dir.c — run directories, .hydra files, summary.json.
#include "app/run_dir.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int run_dir_create(const char *dir, bool unique, char *out, size_t outlen, char *err, size_t errlen) {
    if (make_parents(dir, err, errlen)) return -1;
    for (int k = 0; k < 10000; k++) {
        int w = k ? snprintf(out, outlen, "%s_%d", dir, k) : snprintf(out, outlen, "%s", dir);
        if (w < 0 || (size_t)w >= outlen) {
            snprintf(err, errlen, "output directory name '%s' is too long", dir);
            return -1;
        }
        if (mkdir(out, 0777) == 0) return 0;
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
    if (run_dir_join(dir, subdir, want, sizeof want) || run_dir_create(want, false, hdir, sizeof hdir, err, errlen))
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
                   run_dir_create(want, false, dir, sizeof dir, err, errlen) ||
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
