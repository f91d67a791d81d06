// app/info.h — `mingpt info SNAPSHOT [--json]`: what a snapshot holds, read through the
// one validated loader (snapshot_parse), never modifying the file.
//
// Text (default) or one JSON object (--json, written with jansson) with: the file's path, size
// and CRC32 (checked: a file that loads has a matching CRC), the format version, the mingpt that
// wrote it, the model shape and parameter count, epochs, iterations, samples of the current
// epoch consumed, AdamW steps and whether its moments are there, the seed, the loss scaler
// (scale, good steps), the world size, the last and best test loss, the vocabulary (printable:
// control characters escaped) and the config the run was trained with.
#ifndef MINGPT_INFO_H
#define MINGPT_INFO_H

#include "app/subcommand.h"

// `mingpt info SNAPSHOT [--json]`: its table (app/subcommand.h). Its run function writes to out and
// returns the exit code: 0; 1 for a missing or damaged file (one message on stderr naming it and
// what is wrong).
extern const Subcommand INFO_COMMAND;

#endif
