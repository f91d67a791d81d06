// trainer/run_dir.c — run directories, .hydra files, summary.json.
#include "trainer/run_dir.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

// A JSON number (shortest round-trip digits), or null when not finite.
static void json_number(FILE *f, const char *key, double x, bool last) {
    char buf[64];
    if (isfinite(x)) cfg_format_float(x, buf, sizeof buf, false);
    else snprintf(buf, sizeof buf, "null");
    fprintf(f, "  \"%s\": %s%s\n", key, buf, last ? "" : ",");
}

static void json_string(FILE *f, const char *key, const char *s, bool last) {
    fprintf(f, "  \"%s\": ", key);
    if (!s) {
        fputs("null", f);
    } else {
        fputc('"', f);
        for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
            if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
            else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
            else fputc(*p, f);
        }
        fputc('"', f);
    }
    fprintf(f, "%s\n", last ? "" : ",");
}

int run_dir_write_summary(const char *dir, const RunSummary *s, char *err, size_t errlen) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    const TrainResult *r = s->result;
    if (s->exit_status == RUN_SUMMARY_RUNNING) fputs("{\n  \"exit_status\": null,\n", f);
    else fprintf(f, "{\n  \"exit_status\": %d,\n", s->exit_status);
    json_number(f, "final_train_loss", r ? r->final_train_loss : NAN, false);
    json_number(f, "test_loss", r ? r->test_loss : NAN, false);
    fprintf(f, "  \"iters\": %ld,\n  \"iters_this_run\": %ld,\n", r ? r->iters : 0L, r ? r->iters_this_run : 0L);
    json_number(f, "tokens_per_s", r ? r->tokens_per_s : NAN, false);
    json_number(f, "wall_s", r ? r->wall_s : NAN, false);
    json_string(f, "snapshot_path", s->snapshot_path, false);
    json_string(f, "output_dir", s->output_dir, false);
    json_string(f, "cwd", s->cwd, true);
    fputs("}\n", f);
    fclose(f);
    char path[4200];
    int rc = -1;
    if (!path2(path, sizeof path, dir, "summary.json")) snprintf(err, errlen, "path too long: %s", dir);
    else rc = run_dir_write_file(path, text, err, errlen);
    free(text);
    return rc;
}
