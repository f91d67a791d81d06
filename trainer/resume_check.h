// trainer/resume_check.h — what a resumed run may change: the snapshot's model, vocabulary and
// place in its epoch against this run's, and the config it was trained with (its CONF record)
// against this run's.
//
// A change that would not continue the run that wrote the snapshot exactly is an error: the data
// and its split (data_config.block_size, split, train_split, truncate), the model shape
// (gpt_config.n_layer, n_head, n_embd), the seed (of the split, the batch order and dropout) and
// the global batch (batch_size x grad_accum_steps x world_size: batch_size itself may change with
// the number of ranks). Every other key may change and is listed in a note: max_iters,
// max_epochs, the learning rate and its schedule, evaluation and snapshot settings, dropout,
// device, precision, paths.
#ifndef MINGPT_RESUME_CHECK_H
#define MINGPT_RESUME_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "checkpoint/snapshot.h"
#include "model/gpt.h"

// Checks that snap holds this run's model: the shape (n_layer, n_head, n_embd, block_size,
// vocabulary size), the parameter count num_params and the vocabulary itself (itos, shape's
// vocab_size code points). Logs the first mismatch, naming `path` and the key, and returns 2
// (EXIT_USAGE); else 0.
int resume_check_model(const Snapshot *snap, const GPTShape *shape, size_t num_params, const uint32_t *itos,
                       const char *path);

// The snapshot's place in its epoch against this data (the loader cannot know the split): at most
// the n_train training windows, plus the padding of the ranks that wrote it (fewer than its world
// size); a file from before data parallelism counts iterations of batch_size rows. Sets *samples
// to the samples of the epoch's global order consumed and returns 0 (with a note when the
// snapshot's world size differs from this run's world_size); else logs why and returns 2
// (EXIT_USAGE: it does not fit this data) or 1 (EXIT_RUNTIME: negative counts, a damaged file).
int resume_check_point(const Snapshot *snap, long n_train, int batch_size, int world_size, const char *path,
                       long *samples);

// Compares cfg (this run, world_size ranks) with snap's stored config and seed; `path` names the
// snapshot in messages. Logs one error listing every key that breaks exact resume (with the
// snapshot's and this run's values) and returns 2 (EXIT_USAGE); else logs the changed keys that
// are allowed, if any, as a note and returns 0. A stored config that cannot be read (a mingpt
// with other keys wrote it) is said in a note; the seed is then still compared.
int resume_check_config(const Config *cfg, int world_size, const Snapshot *snap, const char *path);

#endif
