// model/gpt_config.h — the model a bound config describes, checked against mingpt's limits
// (GPT_MAX_* in model/gpt.h) and the sizes its values make together, right after the config is
// bound (app/hydra_app.c), so that a run that could only fail minutes later fails at once.
#ifndef MINGPT_GPT_CONFIG_H
#define MINGPT_GPT_CONFIG_H

#include <stddef.h>

#include "config/config.h"

// Activation floats of one micro-batch at most (4 TiB), so that no size computed from them
// overflows a size_t.
#define GPT_MAX_ACT_FLOATS (1ull << 40)

// Checks, in this order: data_config.block_size <= GPT_MAX_BLOCK, gpt_config n_layer <=
// GPT_MAX_LAYER, n_head and n_embd <= GPT_MAX_EMBD, n_embd divisible by n_head (naming n_embd,
// or n_head when only n_head was set), the parameter count without the two vocab_size x n_embd
// tables (gpt_num_params with vocab_size 0: the vocabulary is not known yet) <= GPT_MAX_PARAMS,
// tokens (batch_size x block_size) and rows (batch_size x grad_accum_steps) per micro-batch and
// iteration within an int, the activation floats of one micro-batch (model/gpt.c's layout) <=
// GPT_MAX_ACT_FLOATS. tree is the resolved tree cfg was bound from (for the keys' locations).
// Returns 0, or -1 with config_bind's kind of message (config_invalid) in err.
int gpt_config_check(const Config *cfg, const CfgNode *tree, char *err, size_t errlen);

#endif
