// trainer/resume_check.c — see resume_check.h.
#include "trainer/resume_check.h"

#include <stdio.h>
#include <string.h>

#include "process/log.h"

// Keys whose change breaks exact resume (besides the seed and the global batch).
static const char *const EXACT_KEYS[] = {
    "data_config.block_size", "data_config.split", "data_config.train_split", "data_config.truncate",
    "gpt_config.n_layer", "gpt_config.n_head", "gpt_config.n_embd",
};
// Checked as a whole elsewhere in this file: the seed (STAT) and the global batch.
static const char *const OWN_CHECK[] = { "trainer_config.seed", "trainer_config.batch_size",
                                         "trainer_config.grad_accum_steps" };

static int listed(const char *key, const char *const *keys, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(keys[i], key) == 0) return 1;
    return 0;
}

// Appends a formatted piece to buf (of len bytes), cut at its end.
static void append(char *buf, size_t len, const char *fmt, const char *a, const char *b, const char *c) {
    const size_t o = strlen(buf);
    if (o + 1 < len) snprintf(buf + o, len - o, fmt, a, b, c);
}

int resume_check_config(const Config *cfg, int world_size, const Snapshot *snap, const char *path) {
    char errors[4096] = "", notes[4096] = "", a[256], b[256], err[2048];
    const TrainerConfig *tc = &cfg->trainer;
    if (snap->seed != tc->seed) {
        snprintf(a, sizeof a, "%llu", (unsigned long long)snap->seed);
        snprintf(b, sizeof b, "%llu", (unsigned long long)tc->seed);
        append(errors, sizeof errors, "  %s: %s in the snapshot, %s now\n", "trainer_config.seed", a, b);
    }
    Config old;
    if (config_load_text(&old, snap->config_yaml, strlen(snap->config_yaml), "the snapshot's config", 0, NULL, err,
                         sizeof err)) {
        log_info("note: the config stored in snapshot '%s' cannot be read (%s); only its seed and model shape "
                 "were compared with this run's\n", path, err);
    } else {
        const long snap_world = snap->world_size > 0 ? snap->world_size : 1;
        const long was = (long)old.trainer.batch_size * old.trainer.grad_accum_steps * snap_world;
        const long now = (long)tc->batch_size * tc->grad_accum_steps * world_size;
        if (was != now) {
            snprintf(a, sizeof a, "%ld (batch_size %d x grad_accum_steps %d x world_size %ld)", was,
                     old.trainer.batch_size, old.trainer.grad_accum_steps, snap_world);
            snprintf(b, sizeof b, "%ld (batch_size %d x grad_accum_steps %d x world_size %d)", now, tc->batch_size,
                     tc->grad_accum_steps, world_size);
            append(errors, sizeof errors, "  %s: %s sequences in the snapshot, %s now\n", "the global batch", a, b);
        } else if (old.trainer.batch_size != tc->batch_size || old.trainer.grad_accum_steps != tc->grad_accum_steps) {
            snprintf(a, sizeof a, "%d x %d", old.trainer.batch_size, old.trainer.grad_accum_steps);
            snprintf(b, sizeof b, "%d x %d (the same global batch)", tc->batch_size, tc->grad_accum_steps);
            append(notes, sizeof notes, "%strainer_config.batch_size x grad_accum_steps %s -> %s",
                   notes[0] ? ", " : "", a, b);
        }
        size_t n;
        const ConfigField *schema = config_schema(&n);
        for (size_t i = 0; i < n; i++) {
            const ConfigField *f = &schema[i];
            char key[160];
            snprintf(key, sizeof key, "%s.%s", f->section, f->key);
            if (listed(key, OWN_CHECK, sizeof OWN_CHECK / sizeof OWN_CHECK[0])) continue;
            config_field_repr(&old, f, a, sizeof a);
            config_field_repr(cfg, f, b, sizeof b);
            if (strcmp(a, b) == 0) continue;
            if (listed(key, EXACT_KEYS, sizeof EXACT_KEYS / sizeof EXACT_KEYS[0]))
                append(errors, sizeof errors, "  %s: %s in the snapshot, %s now\n", key, a, b);
            else
                append(notes, sizeof notes, notes[0] ? ", %s %s -> %s" : "%s %s -> %s", key, a, b);
        }
    }
    if (errors[0]) {
        log_error("mingpt: error: snapshot '%s' was trained with other settings; resuming with these would not "
                  "continue its run exactly:\n%sset them back, or start a new run (delete the snapshot, or set "
                  "trainer_config.snapshot_path or hydra.run.dir elsewhere)\n", path, errors);
        return 2;
    }
    if (notes[0]) log_info("note: resuming with settings changed since the snapshot: %s\n", notes);
    return 0;
}

int resume_check_model(const Snapshot *snap, const GPTShape *shape, size_t num_params, const uint32_t *itos,
                       const char *path) {
    struct { const char *key; long cfg, snap; } dims[] = {
        {"gpt_config.n_layer", shape->n_layer, snap->shape.n_layer},
        {"gpt_config.n_head", shape->n_head, snap->shape.n_head},
        {"gpt_config.n_embd", shape->n_embd, snap->shape.n_embd},
        {"data_config.block_size", shape->block_size, snap->shape.block_size},
        {"vocabulary size", shape->vocab_size, snap->shape.vocab_size},
    };
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i].cfg != dims[i].snap) {
            log_error("mingpt: error: snapshot '%s' does not match the config: %s is %ld here but %ld "
                      "in the snapshot (delete the snapshot or set trainer_config.snapshot_path to start a new run)\n",
                      path, dims[i].key, dims[i].cfg, dims[i].snap);
            return 2;
        }
    if (memcmp(snap->vocab, itos, (size_t)shape->vocab_size * 4) != 0) {
        log_error("mingpt: error: snapshot '%s' does not match the data: the vocabulary differs "
                  "(data_config.path or data_config.truncate changed?)\n", path);
        return 2;
    }
    if (snap->num_params != num_params) {
        log_error("mingpt: error: snapshot '%s' holds %zu parameters but the model has %zu\n", path, snap->num_params,
                  num_params);
        return 2;
    }
    return 0;
}

int resume_check_point(const Snapshot *snap, long n_train, int batch_size, int world_size, const char *path,
                       long *samples) {
    const long n = n_train;
    if (snap->world_size > 0) {
        *samples = snap->samples_in_epoch;
        if (*samples < 0 || *samples > n + snap->world_size - 1) {
            log_error("mingpt: error: snapshot '%s' does not match the data: it resumes its epoch after %ld samples, "
                      "but the training split has %ld windows (data_config changed, or the snapshot is damaged)\n",
                      path, *samples, n);
            return 2;
        }
    } else {
        // Files from before data parallelism: one process, no accumulation, the same batch size.
        const long max_iter = (n + batch_size - 1) / batch_size;
        if (snap->iter_in_epoch < 0 || snap->iter_in_epoch > max_iter) {
            log_error("mingpt: error: snapshot '%s' does not match the data: it resumes its epoch at iteration %ld, "
                      "but an epoch of the training split has %ld iterations of %d (data_config changed, or the "
                      "snapshot is damaged)\n", path, snap->iter_in_epoch, max_iter, batch_size);
            return 2;
        }
        *samples = snap->iter_in_epoch * batch_size;
    }
    if (snap->epochs_run < 0 || snap->iter_num < 0) {
        log_error("mingpt: error: snapshot '%s' is damaged: %ld epochs and %ld iterations run\n", path,
                  snap->epochs_run, snap->iter_num);
        return 1;
    }
    if (snap->world_size > 0 && snap->world_size != world_size)
        log_info("note: the snapshot was written by %d rank%s, this run has %d: the epoch continues from "
                 "sample %ld of its order\n", snap->world_size, snap->world_size == 1 ? "" : "s", world_size, *samples);
    return 0;
}
