// model/gpt_cost.c — FLOPs and memory of a model before it is built (see gpt_cost.h).
#include "model/gpt_cost.h"

double gpt_flops_per_token(const GPTShape *s, int T) {
    const double L = s->n_layer, C = s->n_embd, V = s->vocab_size;
    const double n_linear = L * 12.0 * C * C + V * C;
    return 6.0 * n_linear + 12.0 * L * C * T;
}

int gpt_memory_estimate(const GPTShape *s, int B, int T, const Backend *be, ComputeDtype dtype,
                        const GPTBuildOptions *opt, GPTMemory *out, char *err, size_t errlen) {
    *out = (GPTMemory){0};
    size_t n;
    if (gpt_check_build(s, B, T, &n, err, errlen)) return 1;
    out->num_params = n;
    out->params = 4 * n;
    out->grads = 4 * n;
    out->adamw = 8 * n;
    out->acts = 4 * gpt_count_acts(s, B, T, be, opt);
    out->weight_cast = dtype != DTYPE_FP32 && be->cast_weights ? 2 * n : 0;
    out->total = out->params + out->grads + out->adamw + out->acts + out->weight_cast;
    return 0;
}
