// app/export.h — `mingpt export --snapshot SNAPSHOT --out MODEL.safetensors [--dtype
// float32|bfloat16|float16]`: a snapshot's model as minGPT's state_dict in a safetensors file
// (checkpoint/state_dict.h: the names, layouts and metadata), loadable by PyTorch's
// load_state_dict as it is.
#ifndef MINGPT_EXPORT_H
#define MINGPT_EXPORT_H

#include "app/subcommand.h"

// Its table (app/subcommand.h; --snapshot and --out required, also as --key=value). Its run
// function loads the snapshot through snapshot_load, says its note and whether the causal masks
// are left out (block_size > STATE_DICT_MASK_MAX_BLOCK) on stderr, writes the file and one line
// on out, and returns the exit code: 0, 1 (a damaged snapshot, a failed write).
extern const Subcommand EXPORT_COMMAND;

#endif
