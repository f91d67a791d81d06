// app/info.c — see info.h.
#include "app/info.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "config/config.h"
#include "data/char_dataset.h"
#include "checkpoint/snapshot.h"

// Character i of the vocabulary as UTF-8 (into c, returns its length).
static int vocab_char(const CharDataset *ds, int i, char c[8]) { return chardataset_decode_one(ds, i, c); }

// The vocabulary as one printable, quoted string: control characters escaped.
static void print_vocab(FILE *out, const CharDataset *ds) {
    fputc('"', out);
    for (int i = 0; i < ds->vocab_size; i++) {
        const uint32_t cp = ds->itos[i];
        char c[8];
        if (cp == '\n') fputs("\\n", out);
        else if (cp == '\t') fputs("\\t", out);
        else if (cp == '\r') fputs("\\r", out);
        else if (cp == '"' || cp == '\\') fprintf(out, "\\%c", (char)cp);
        else if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) fprintf(out, "\\u%04x", cp);
        else fwrite(c, 1, (size_t)vocab_char(ds, i, c), out);
    }
    fputc('"', out);
}

static json_t *json_loss(double x) { return isnan(x) ? json_null() : json_real(x); }
// A JSON string, or null for text that is not UTF-8 (a path may hold any bytes).
static json_t *text_or_null(const char *s) {
    json_t *j = json_string(s);
    return j ? j : json_null();
}

// The ZeRO stage of the run that wrote s: trainer_config.zero_stage of its stored config (0 in
// files from before the key); -1 when the config cannot be read. The moments are stored whole
// whatever the stage, so any stage on any world size resumes from the file.
static int zero_stage_of(const Snapshot *s) {
    Config c;
    char err[1024];
    if (!s->config_yaml ||
        config_load_text(&c, s->config_yaml, strlen(s->config_yaml), "the snapshot's config", 0, NULL, err, sizeof err))
        return -1;
    return c.trainer.zero_stage;
}

static int print_json(FILE *out, const char *path, const Snapshot *s, const CharDataset *ds) {
    json_t *o = json_object(), *model = json_object(), *vocab = json_array();
    char crc[16], version[16];
    snprintf(crc, sizeof crc, "0x%08x", s->crc);
    snprintf(version, sizeof version, "%u.%u", s->format_major, s->format_minor);
    for (int i = 0; vocab && i < ds->vocab_size; i++) {
        char c[8];
        json_array_append_new(vocab, json_stringn(c, (size_t)vocab_char(ds, i, c)));
    }
    if (!o || !model || !vocab) { json_decref(o); json_decref(model); json_decref(vocab); return 1; }
    json_object_set_new(model, "vocab_size", json_integer(s->shape.vocab_size));
    json_object_set_new(model, "block_size", json_integer(s->shape.block_size));
    json_object_set_new(model, "n_layer", json_integer(s->shape.n_layer));
    json_object_set_new(model, "n_head", json_integer(s->shape.n_head));
    json_object_set_new(model, "n_embd", json_integer(s->shape.n_embd));
    json_object_set_new(model, "num_params", json_integer((json_int_t)s->num_params));
    json_object_set_new(o, "path", text_or_null(path));
    json_object_set_new(o, "file_bytes", json_integer((json_int_t)s->file_bytes));
    json_object_set_new(o, "crc32", json_string(crc));
    json_object_set_new(o, "crc_ok", json_true());
    json_object_set_new(o, "format_version", json_string(version));
    json_object_set_new(o, "writer", s->writer[0] ? json_string(s->writer) : json_null());
    json_object_set_new(o, "model", model);
    json_object_set_new(o, "epochs_run", json_integer(s->epochs_run));
    json_object_set_new(o, "iter_num", json_integer(s->iter_num));
    json_object_set_new(o, "iter_in_epoch", json_integer(s->iter_in_epoch));
    json_object_set_new(o, "samples_in_epoch", s->world_size ? json_integer(s->samples_in_epoch) : json_null());
    json_object_set_new(o, "adam_step", json_integer(s->adam_step));
    json_object_set_new(o, "has_adam_state", json_boolean(s->adam_m != NULL));
    // JSON integers are int64 here: a seed beyond it is written as a decimal string
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)s->seed);
    json_object_set_new(o, "seed", s->seed <= INT64_MAX ? json_integer((json_int_t)s->seed) : json_string(seed));
    json_object_set_new(o, "precision", s->precision[0] ? json_string(s->precision) : json_null());
    json_object_set_new(o, "loss_scale", json_real(s->loss_scale));
    json_object_set_new(o, "scaler_good_steps", json_integer(s->scaler_good_steps));
    json_object_set_new(o, "world_size", s->world_size ? json_integer(s->world_size) : json_null());
    const int zero = zero_stage_of(s);
    json_object_set_new(o, "zero_stage", zero >= 0 ? json_integer(zero) : json_null());
    json_object_set_new(o, "last_test_loss", json_loss(s->last_test_loss));
    json_object_set_new(o, "best_test_loss", json_loss(s->best_test_loss));
    json_object_set_new(o, "best_iter", s->best_iter >= 0 ? json_integer(s->best_iter) : json_null());
    json_object_set_new(o, "vocab", vocab);
    json_object_set_new(o, "config", text_or_null(s->config_yaml));
    json_object_set_new(o, "note", s->note[0] ? json_string(s->note) : json_null());
    const int rc = json_dumpf(o, out, JSON_INDENT(2));
    fputc('\n', out);
    json_decref(o);
    return rc ? 1 : 0;
}

static void print_text(FILE *out, const char *path, const Snapshot *s, const CharDataset *ds) {
    fprintf(out, "snapshot:     %s (%zu bytes, CRC32 0x%08x ok)\n", path, s->file_bytes, s->crc);
    fprintf(out, "format:       %u.%u, written by %s\n", s->format_major, s->format_minor,
            s->writer[0] ? s->writer : "a mingpt from before format 1.1");
    const GPTShape *m = &s->shape;
    fprintf(out, "model:        n_layer %d, n_head %d, n_embd %d, block_size %d, vocab_size %d: %zu parameters\n",
            m->n_layer, m->n_head, m->n_embd, m->block_size, m->vocab_size, s->num_params);
    fprintf(out, "progress:     %ld epoch%s done, iteration %ld", s->epochs_run, s->epochs_run == 1 ? "" : "s", s->iter_num);
    if (s->world_size) fprintf(out, " (%ld samples into epoch %ld)", s->samples_in_epoch, s->epochs_run + 1);
    else fprintf(out, " (%ld iterations into epoch %ld)", s->iter_in_epoch, s->epochs_run + 1);
    fprintf(out, ", %ld AdamW steps%s\n", s->adam_step, s->adam_m ? "" : " (no AdamW moments stored)");
    fprintf(out, "seed:         %llu\n", (unsigned long long)s->seed);
    if (s->precision[0]) fprintf(out, "precision:    %s%s\n", s->precision,
                                 strcmp(s->precision, "float32") ? " matmul inputs, fp32 master weights" : "");
    else fprintf(out, "precision:    not recorded (a file from before format 1.2)\n");
    fprintf(out, "loss scaler:  scale %g, %ld finite steps since it last changed\n", (double)s->loss_scale,
            s->scaler_good_steps);
    if (s->world_size) fprintf(out, "world size:   %d\n", s->world_size);
    else fprintf(out, "world size:   not recorded (a file from before data parallelism: 1)\n");
    const int zero = zero_stage_of(s);
    if (zero >= 0) fprintf(out, "zero stage:   %d%s\n", zero, zero && s->world_size > 1 ? " (AdamW moments gathered from the shards)" : "");
    else fprintf(out, "zero stage:   unknown (the stored config cannot be read)\n");
    if (isnan(s->last_test_loss)) fprintf(out, "test loss:    not recorded\n");
    else fprintf(out, "test loss:    last %.4f, best %.4f at iteration %ld\n", s->last_test_loss, s->best_test_loss,
                 s->best_iter);
    fprintf(out, "vocabulary:   %d characters: ", ds->vocab_size);
    print_vocab(out, ds);
    fprintf(out, "\nconfig:\n");
    for (const char *l = s->config_yaml; *l;) {   // indented by two spaces
        const size_t n = strcspn(l, "\n");
        fprintf(out, "  %.*s\n", (int)n, l);
        l += n + (l[n] == '\n');
    }
    if (s->note[0]) fprintf(out, "note:         %s\n", s->note);
}

// ========================================================================== the command line

enum { INFO_JSON, INFO_N_FLAGS };

static const SubFlag INFO_FLAGS[INFO_N_FLAGS] = {
    [INFO_JSON] = {.name = "--json", .type = SUB_SWITCH, .help = "one JSON object instead of text"},
};

static const SubPositional INFO_SNAPSHOT = {.metavar = "SNAPSHOT", .help = "the snapshot file", .max = 1,
                                            .missing = "a SNAPSHOT path is required"};

static int info_command(const SubArgs *a, FILE *out) {
    const char *path = a->positional[0];
    const bool json = a->values[INFO_JSON].i;
    Snapshot s;
    char err[2048];
    if (snapshot_load(path, &s, err, sizeof err)) {
        fprintf(stderr, "mingpt: error: %s\n", err);
        return 1;
    }
    CharDataset ds = {0};
    int rc = chardataset_from_vocab(&ds, s.vocab, s.vocab_size, s.shape.block_size);
    if (rc) fprintf(stderr, "mingpt: error: out of memory\n");
    else if (!json) print_text(out, path, &s, &ds);
    else if ((rc = print_json(out, path, &s, &ds)) && !ferror(out))   // a write error is said at exit
        fprintf(stderr, "mingpt: error: out of memory\n");
    chardataset_free(&ds);
    snapshot_free(&s);
    return rc ? 1 : 0;
}

const Subcommand INFO_COMMAND = {
    .name = "info", .description = "what a snapshot holds (text or JSON)",
    .flags = INFO_FLAGS, .n_flags = INFO_N_FLAGS, .positional = &INFO_SNAPSHOT, .dialect = SUB_TERSE,
    .usage_after = SUB_USAGE_UNKNOWN | SUB_USAGE_MISSING, .run = info_command,
};
