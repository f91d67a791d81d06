// trainer/snapshot.h — training snapshots: everything needed to resume exactly.
//
// File format (little-endian): the 8-byte magic "MINGPTSN", u32 format version, then
// records [u32 tag][u64 byte length][payload], then a u32 CRC32 (zlib) of every byte
// before it. Records: CONF (the bound config as YAML text), VOCB (V u32 code points),
// SHAP (model shape), STAT (counters), SCAL (loss scale), DIST (world size and samples of
// the current epoch consumed), PARM / ADAM / ADAV (fp32 parameters and AdamW
// moments in the model's flat layout). Written to a temp file in the same directory,
// fsync'ed, then renamed over the target, so a crash never leaves a torn snapshot.
#ifndef MINGPT_SNAPSHOT_H
#define MINGPT_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>
#include "model/gpt.h"

typedef struct {
    char *config_yaml;        // NUL-terminated YAML of the run's config
    uint32_t *vocab;          // (vocab_size) code points, ascending
    int vocab_size;
    GPTShape shape;
    size_t num_params;
    float *params;            // (num_params)
    float *adam_m, *adam_v;   // (num_params) each
    long adam_step;           // AdamW steps taken
    long epochs_run;          // completed epochs
    long iter_in_epoch;       // batches done in epoch epochs_run+1 (0 at an epoch boundary)
    long iter_num;            // total iterations (optimizer steps) since the start of training
    uint64_t seed;            // trainer seed: dropout masks are a function of (seed, iter_num)
    float loss_scale;         // dynamic loss scale (mixed precision; 1 on the CPU backend)
    long scaler_good_steps;   // finite steps since the last scale change
    // Data parallelism (record DIST; absent in files from before it: world_size 0, and the
    // trainer then takes samples_in_epoch = iter_in_epoch * batch_size).
    int world_size;           // ranks of the run that wrote it
    long samples_in_epoch;    // samples of epoch epochs_run+1's global order consumed: a prefix,
                              // whatever the world size (resume continues from it on any W)
} Snapshot;

// Writes s atomically to path (temp file `<path>.tmp.<pid>`, fsync, rename, fsync of the
// directory). Temp files of earlier writers that no longer run are removed first. Non-zero
// with a message naming path on any I/O error; the previous file at path is then left
// untouched and the temp file removed.
int snapshot_save(const char *path, const Snapshot *s, char *err, size_t errlen);

// Budgets of what a file can make the reader do (the tensors are bounded by the shape's
// limits in model/gpt.h: GPT_MAX_PARAMS).
#define SNAP_MAX_RECORDS      64
#define SNAP_MAX_CONFIG_BYTES (16 << 20)
#define SNAP_MAX_WORLD        (1 << 20)

// The one validated loader that resume and `sample` share. Parses the snapshot bytes
// buf[0..len) into *s (allocating its arrays; free with snapshot_free); `name` (the path)
// is used in messages. Before anything is sized or copied from the file it checks: magic,
// format version (a newer one is named as such), CRC32 (skipped only in fuzzing builds,
// FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION), every record header and length inside the file,
// at most SNAP_MAX_RECORDS records, each known record at most once, CONF/VOCB/SHAP/STAT/PARM
// present, SHAP sizes within gpt_shape_check's limits, VOCB of vocab_size ascending Unicode
// scalar values, STAT counters >= 0 and num_params equal to the shape's count, SCAL in
// (0, LOSS_SCALER_MAX], DIST world_size in [1, SNAP_MAX_WORLD], PARM/ADAM/ADAV of exactly
// num_params finite floats (ADAV >= 0), ADAM and ADAV together. Returns non-zero with one
// message naming the file and the first problem; *s is then zeroed. Unknown record tags
// are skipped.
int snapshot_parse(const unsigned char *buf, size_t len, const char *name, Snapshot *s, char *err, size_t errlen);

// Reads the regular file at path and parses it with snapshot_parse. Non-zero with a
// message naming path when it is missing, not a regular file (a FIFO, a device, a
// directory), unreadable, or refused by snapshot_parse.
int snapshot_load(const char *path, Snapshot *s, char *err, size_t errlen);

void snapshot_free(Snapshot *s);

#endif
