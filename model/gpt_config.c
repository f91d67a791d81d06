// model/gpt_config.c — see gpt_config.h.
#include "model/gpt_config.h"

#include <limits.h>

#include "model/gpt.h"

int gpt_config_check(const Config *cfg, const CfgNode *t, char *err, size_t errlen) {
    const GPTConfig *g = &cfg->gpt;
    const TrainerConfig *tr = &cfg->trainer;
    if (config_max_int(t, "data_config", "block_size", cfg->data.block_size, GPT_MAX_BLOCK, "GPT_MAX_BLOCK", err,
                       errlen) ||
        config_max_int(t, "gpt_config", "n_layer", g->n_layer, GPT_MAX_LAYER, "GPT_MAX_LAYER", err, errlen) ||
        config_max_int(t, "gpt_config", "n_head", g->n_head, GPT_MAX_EMBD, "GPT_MAX_EMBD", err, errlen) ||
        config_max_int(t, "gpt_config", "n_embd", g->n_embd, GPT_MAX_EMBD, "GPT_MAX_EMBD", err, errlen))
        return -1;
    if (g->n_embd % g->n_head != 0)   // at n_embd, or at n_head when only n_head was set by the user
        return config_invalid(t, "gpt_config", config_key_given(t, "gpt_config", "n_embd") ? "n_embd" : "n_head", err,
                              errlen, "gpt_config.n_embd (%d) must be divisible by gpt_config.n_head (%d)", g->n_embd,
                              g->n_head);
    // Sizes valid one by one whose products the model or the trainer could not hold; the key
    // named is the one that makes the product big. Products in double: no overflow.
    const GPTShape shape = { .vocab_size = 0, .block_size = cfg->data.block_size, .n_layer = g->n_layer,
                             .n_head = g->n_head, .n_embd = g->n_embd };
    const double params = (double)gpt_num_params(&shape);
    if (params > (double)GPT_MAX_PARAMS)
        return config_invalid(t, "gpt_config", g->n_layer > 1 ? "n_layer" : "n_embd", err, errlen,
                              "gpt_config: n_layer %d and n_embd %d make at least %.3g parameters, more than mingpt's "
                              "limit of %.3g (GPT_MAX_PARAMS)", g->n_layer, g->n_embd, params, (double)GPT_MAX_PARAMS);
    const double L = g->n_layer, C = g->n_embd, NH = g->n_head, T = cfg->data.block_size, B = tr->batch_size;
    // The kernels index one micro-batch's B*T rows with an int.
    if (B * T > INT_MAX)
        return config_invalid(t, "trainer_config", "batch_size", err, errlen,
                              "trainer_config.batch_size x data_config.block_size is %d x %d = %.0f tokens per "
                              "micro-batch, more than the limit of %d", tr->batch_size, cfg->data.block_size, B * T,
                              INT_MAX);
    // One iteration's rows (batch_size x grad_accum_steps) are counted with an int too.
    if (B * tr->grad_accum_steps > INT_MAX)
        return config_invalid(t, "trainer_config", "grad_accum_steps", err, errlen,
                              "trainer_config.batch_size x grad_accum_steps is %d x %d = %.0f sequences per iteration, "
                              "more than the limit of %d", tr->batch_size, tr->grad_accum_steps,
                              B * tr->grad_accum_steps, INT_MAX);
    // model/gpt.c's activation layout: per layer at least 12 B*T*C floats and the attention
    // matrix B*NH*T*T, then 18 B*T*C and the attention gradient once.
    const double acts = L * (12 * B * T * C + B * NH * T * T) + B * NH * T * T + 18 * B * T * C;
    if (acts > (double)GPT_MAX_ACT_FLOATS)
        return config_invalid(t, "trainer_config", "batch_size", err, errlen,
                              "the activations of one micro-batch (trainer_config.batch_size %d x data_config.block_size "
                              "%d with gpt_config n_layer %d, n_head %d, n_embd %d) need at least %.0f GiB, more than "
                              "mingpt's limit of %.0f GiB", tr->batch_size, cfg->data.block_size, g->n_layer,
                              g->n_head, g->n_embd, acts * 4 / 1073741824.0, (double)GPT_MAX_ACT_FLOATS * 4 / 1073741824.0);
    return 0;
}
