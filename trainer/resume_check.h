// trainer/resume_check.h — what a resumed run may change: the config the snapshot was trained
// with (its CONF record) against this run's.
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

#include "config/config.h"
#include "checkpoint/snapshot.h"

// Compares cfg (this run, world_size ranks) with snap's stored config and seed; `path` names the
// snapshot in messages. Logs one error listing every key that breaks exact resume (with the
// snapshot's and this run's values) and returns 2 (EXIT_USAGE); else logs the changed keys that
// are allowed, if any, as a note and returns 0. A stored config that cannot be read (a mingpt
// with other keys wrote it) is said in a note; the seed is then still compared.
int resume_check_config(const Config *cfg, int world_size, const Snapshot *snap, const char *path);

#endif
