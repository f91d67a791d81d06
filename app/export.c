// app/export.c — see export.h.
#include "app/export.h"

#include <stdio.h>

#include "checkpoint/atomic_file.h"
#include "checkpoint/snapshot.h"
#include "checkpoint/state_dict.h"

// ========================================================================== the command line

enum { EXPORT_SNAPSHOT, EXPORT_OUT, EXPORT_DTYPE, EXPORT_N_FLAGS };

static const SubFlag EXPORT_FLAGS[EXPORT_N_FLAGS] = {
    [EXPORT_SNAPSHOT] = {.name = "--snapshot", .type = SUB_STRING, .metavar = "SNAPSHOT", .required = true,
                         .help = "the snapshot to export"},
    [EXPORT_OUT] = {.name = "--out", .type = SUB_STRING, .metavar = "MODEL.safetensors", .required = true,
                    .help = "the safetensors file to write"},
    [EXPORT_DTYPE] = {.name = "--dtype", .type = SUB_CHOICE, .metavar = "DTYPE", .def = "float32",
                      .choices = "float32|bfloat16|float16", .help = "the tensors' type (default float32)"},
};
// the safetensors type of each --dtype choice, in their order
static const StDtype EXPORT_DTYPES[] = {ST_F32, ST_BF16, ST_F16};

static int export_command(const SubArgs *a, FILE *out) {
    const char *snap_path = a->values[EXPORT_SNAPSHOT].text, *path = a->values[EXPORT_OUT].text;
    const char *dtype = a->values[EXPORT_DTYPE].text;
    Snapshot s;
    char err[2048];
    if (output_is_input(path, "--out", snap_path, "--snapshot", err, sizeof err)) {   // before anything is written
        fprintf(stderr, "mingpt: error: %s\n", err);
        return 1;
    }
    if (snapshot_load(snap_path, &s, err, sizeof err)) {
        fprintf(stderr, "mingpt: error: %s\n", err);
        return 1;
    }
    if (s.note[0]) fprintf(stderr, "mingpt: note: %s\n", s.note);
    if (s.shape.block_size > STATE_DICT_MASK_MAX_BLOCK)
        fprintf(stderr, "mingpt: note: block_size %d > %d: the attn.bias mask buffers (block_size^2 each) are left out; "
                "load with load_state_dict(..., strict=False)\n", s.shape.block_size, STATE_DICT_MASK_MAX_BLOCK);
    if (same_file(path, "/dev/stdout")) out = stderr;   // `--out /dev/stdout`: the model alone on stdout
    int rc = state_dict_export(&s, path, EXPORT_DTYPES[a->values[EXPORT_DTYPE].i], err, sizeof err);
    if (rc) fprintf(stderr, "mingpt: error: %s\n", err);
    else fprintf(out, "Exported %s (iteration %ld, %zu parameters, %s) to %s\n", snap_path, s.iter_num, s.num_params,
                 dtype, path);
    snapshot_free(&s);
    return rc ? 1 : 0;
}

// Its values are checked after the required flags (late_values): `--dtype x` alone says that
// --snapshot and --out are required.
const Subcommand EXPORT_COMMAND = {
    .name = "export", .description = "write a snapshot's model as minGPT's state_dict in safetensors",
    .flags = EXPORT_FLAGS, .n_flags = EXPORT_N_FLAGS, .dialect = SUB_TERSE, .eq_form = true, .late_values = true,
    .usage_after = SUB_USAGE_UNKNOWN | SUB_USAGE_NO_VALUE | SUB_USAGE_MISSING, .run = export_command,
};
