// checkpoint/snapshot.h — training snapshots: everything needed to resume exactly.
//
// File format (little-endian; every byte in docs/snapshot_format.md): the 8-byte magic
// "MINGPTSN", the format version as u16 major + u16 minor, then records
// [u32 tag][u64 byte length][payload], then a u32 CRC32 (zlib) of every byte before it.
// Records: CONF (the bound config as YAML text), VOCB (V u32 code points), SHAP (model shape),
// STAT (counters), SCAL (loss scale), DIST (world size and samples of the current epoch
// consumed), WRTR (the mingpt that wrote it), EVAL (last and best test loss), TENS (the tensor
// layout: names, shapes, offsets), PREC (the precision trained in), PARM / ADAM / ADAV (fp32
// parameters and AdamW moments).
// Written through checkpoint/atomic_file.h, so a crash never leaves a torn snapshot.
//
// Versions: this mingpt writes 1.2 and reads 1.0 (files of mingpt before WRTR/EVAL/TENS), 1.1
// (before PREC) and 1.2. A newer minor version (1.3, ...) only adds records: the ones this reader
// does not know are skipped and said in Snapshot.note. A newer major version is refused, naming
// both.
#ifndef MINGPT_SNAPSHOT_H
#define MINGPT_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>
#include "model/gpt.h"
#include "checkpoint/atomic_file.h"

#define SNAP_FORMAT_MAJOR 1
#define SNAP_FORMAT_MINOR 2

// The AdamW moments handed to the writer one piece at a time, for a caller that does not hold
// them whole (ZeRO: rank 0 receives one shard at a time). read fills buf with the n floats
// [first, first + n) of moment `which` (0: m, 1: v); it is called for which 0 then 1, each in
// ascending pieces of `piece` floats (the last may be shorter), whether or not the file takes
// the writes (so that a caller receiving from other processes never leaves them waiting: a
// writer that stops early says so through SnapMoments.calls). Non-zero: the write fails.
typedef struct SnapMoments {
    int (*read)(struct SnapMoments *sm, int which, size_t first, size_t n, float *buf);
    void *ctx;
    size_t piece;             // floats per call (> 0)
    float *buf;               // (piece) the buffer the writer passes to read
    int failed;               // set by read on failure
} SnapMoments;

typedef struct {
    char *config_yaml;        // NUL-terminated YAML of the run's config
    uint32_t *vocab;          // (vocab_size) code points, ascending
    int vocab_size;
    GPTShape shape;
    size_t num_params;
    float *params;            // (num_params)
    float *adam_m, *adam_v;   // (num_params) each
    SnapMoments *moments;     // writing only, when adam_m and adam_v are NULL: the moments in pieces
    long adam_step;           // AdamW steps taken
    long epochs_run;          // completed epochs
    long iter_in_epoch;       // batches done in epoch epochs_run+1 (0 at an epoch boundary)
    long iter_num;            // total iterations (optimizer steps) since the start of training
    uint64_t seed;            // trainer seed: dropout masks are a function of (seed, iter_num)
    float loss_scale;         // fp16 dynamic loss scale (trainer/loss_scaler.h; 1 when disabled: fp32, bf16)
    long scaler_good_steps;   // finite steps since the last scale change
    // Data parallelism (record DIST; absent in files from before it: world_size 0, and the
    // trainer then takes samples_in_epoch = iter_in_epoch * batch_size).
    int world_size;           // ranks of the run that wrote it
    long samples_in_epoch;    // samples of epoch epochs_run+1's global order consumed: a prefix,
                              // whatever the world size (resume continues from it on any W)
    // Format 1.1 records (1.0 files: writer "", losses NaN, best_iter -1).
    char writer[64];          // WRTR: the program that wrote it, e.g. "mingpt 0.11.0" (written: MINGPT_VERSION)
    double last_test_loss;    // EVAL: the last evaluation's mean test loss (NaN: none yet)
    double best_test_loss;    // EVAL: the lowest test loss so far (NaN: none yet)
    long best_iter;           // EVAL: the iteration of best_test_loss (-1: none)
    // Format 1.2 (older files: ""). PREC: the matmul precision the run trained in, amp_dtype
    // resolved for its backend (trainer/amp.h): "float32", "bfloat16" or "float16". Written when set.
    char precision[16];
    // Set by snapshot_parse, not written:
    unsigned format_major, format_minor;
    size_t file_bytes;        // size of the file
    uint32_t crc;             // its CRC32 (checked)
    char note[256];           // records of a newer minor format that were skipped, else ""
} Snapshot;

// Writes s (format 1.2, WRTR = MINGPT_VERSION, TENS = gpt_param_table of s->shape) atomically
// to path (checkpoint/atomic_file.h: temp file, fsync, rename, fsync of the directory; stale temp
// files of killed writers removed first). Non-zero with a message naming the file on any I/O
// error; the previous file at path is then left untouched and the temp file removed.
int snapshot_save(const char *path, const Snapshot *s, char *err, size_t errlen);

// snapshot_save that stops when *cancel becomes non-zero (a second Ctrl-C while saving): then
// returns ATOMIC_CANCELLED, the temporary file removed and the file at path untouched.
int snapshot_save_cancellable(const char *path, const Snapshot *s, const volatile sig_atomic_t *cancel, char *err,
                              size_t errlen);

// Budgets of what a file can make the reader do (the tensors are bounded by the shape's
// limits in model/gpt.h: GPT_MAX_PARAMS).
#define SNAP_MAX_RECORDS      64
#define SNAP_MAX_CONFIG_BYTES (16 << 20)
// The largest loss scale a snapshot may hold: 2^24, the fp16 loss scaler's ceiling
// (trainer/loss_scaler.h defines LOSS_SCALER_MAX as this).
#define SNAP_MAX_LOSS_SCALE 16777216.0f
#define SNAP_MAX_WORLD        (1 << 20)

// The one validated loader that resume, `sample`, `info`, `export` and init_from share. Parses
// the snapshot bytes buf[0..len) into *s (allocating its arrays; free with snapshot_free);
// `name` (the path) is used in messages. Before anything is sized or copied from the file it
// checks: magic, format version (major 1; a newer major is named as such), CRC32 (skipped only
// in fuzzing builds, FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION), every record header and length
// inside the file, at most SNAP_MAX_RECORDS records, each known record at most once, unknown
// records only in a file of a newer minor version (skipped, said in s->note),
// CONF/VOCB/SHAP/STAT/PARM present, SHAP sizes within gpt_shape_check's limits, VOCB of
// vocab_size ascending Unicode scalar values, STAT counters >= 0 and num_params equal to the
// shape's count, SCAL in (0, SNAP_MAX_LOSS_SCALE], DIST world_size in [1, SNAP_MAX_WORLD], WRTR
// printable ASCII, EVAL losses NaN or finite >= 0, PREC one of the three names, TENS naming exactly the shape's tensors
// (gpt_param_table) with their shapes, inside PARM and not overlapping, PARM/ADAM/ADAV of
// exactly num_params finite floats (ADAV >= 0), ADAM and ADAV together. Tensors are returned
// in this mingpt's layout (gpt_param_table), moved by name when TENS places them elsewhere; a
// file without TENS (1.0) has this layout. Returns non-zero with one message naming the file
// and the first problem; *s is then zeroed.
int snapshot_parse(const unsigned char *buf, size_t len, const char *name, Snapshot *s, char *err, size_t errlen);

// Reads the regular file at path and parses it with snapshot_parse. Non-zero with a
// message naming path when it is missing, not a regular file (a FIFO, a device, a
// directory), unreadable, or refused by snapshot_parse.
int snapshot_load(const char *path, Snapshot *s, char *err, size_t errlen);

void snapshot_free(Snapshot *s);

#endif
