// app/sample.h — text generation from a snapshot (`mingpt sample`).
#ifndef MINGPT_SAMPLE_H
#define MINGPT_SAMPLE_H

#include <stdint.h>
#include <stdio.h>

#include "app/subcommand.h"

typedef struct {
    const char *snapshot;   // path of the snapshot to load (required)
    const char *prompt;     // UTF-8 text to continue (default "\n")
    long max_new_tokens;    // characters to generate (default 500)
    double temperature;     // > 0; logits are divided by it (default 1.0)
    int top_k;              // keep the k most likely characters; 0 = all (default 0)
    uint64_t seed;          // sampling RNG seed (default 1337)
    const char *device;     // the backend: "cpu" (default), "cuda" or "auto", as trainer_config.device
} SampleOptions;

// `mingpt sample --snapshot PATH [--prompt TEXT] [--max_new_tokens N] [--temperature F] [--top_k K]
// [--seed S] [--device cpu|cuda|auto]` (also as --key=value): its table (app/subcommand.h); it
// runs sample_run.
extern const Subcommand SAMPLE_COMMAND;

// Loads the snapshot, checks the prompt against its vocabulary, and writes the prompt
// followed by max_new_tokens sampled characters to out. The context is cropped to the
// last block_size characters, as minGPT's generate() does. The model runs on --device's backend
// in fp32. Returns an exit code (0 ok, 1 bad snapshot, I/O or out of memory, 2 prompt outside the
// vocabulary / bad option / --device cuda without a usable GPU).
int sample_run(const SampleOptions *o, FILE *out);

#endif
