// model/gpt_cost.c — FLOPs and memory of a model before it is built, and that memory against what
// can be allocated (see gpt_cost.h).
#include "model/gpt_cost.h"

#include <stdio.h>

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

// /proc/meminfo's MemAvailable in bytes (what can be allocated without swapping), or -1.
static long long host_mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    long long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kib) == 1) break;
    if (f) fclose(f);
    return kib < 0 ? -1 : kib * 1024;
}

static void mib(double bytes, char *buf, size_t len) {
    if (bytes >= 1024.0 * 1048576) snprintf(buf, len, "%.2f GiB", bytes / (1024.0 * 1048576));
    else snprintf(buf, len, "%.1f MiB", bytes / 1048576);
}

void gpt_memory_describe(const GPTMemory *mem, const Backend *be, char *buf, size_t len) {
    char tot[32], p[32], g[32], a[32], act[32], cast[64] = "";
    mib((double)mem->total, tot, sizeof tot);
    mib((double)mem->params, p, sizeof p);
    mib((double)mem->grads, g, sizeof g);
    mib((double)mem->adamw, a, sizeof a);
    mib((double)mem->acts, act, sizeof act);
    if (mem->weight_cast) {
        char c[32];
        mib((double)mem->weight_cast, c, sizeof c);
        snprintf(cast, sizeof cast, ", low-precision weights %s", c);
    }
    snprintf(buf, len, "about %s of %s memory per rank (parameters %s, gradients %s, AdamW moments %s, activations %s%s)",
             tot, be->host_memory ? "host" : be->name, p, g, a, act, cast);
}

int gpt_memory_check(const GPTMemory *mem, Backend *be, char *err, size_t errlen) {
    size_t free_b = 0, total_b = 0;
    const bool device = be->mem_info != NULL;
    const double avail = device ? (be->mem_info(be, &free_b, &total_b) ? -1 : (double)free_b)
                                : be->host_memory ? (double)host_mem_available() : -1;
    if (!(avail >= 0 && (double)mem->total > avail)) return 0;
    char tot[32], av[32];
    mib((double)mem->total, tot, sizeof tot);
    mib(avail, av, sizeof av);
    snprintf(err, errlen, "the run needs about %s of memory (the estimate above), more than the %s available (%s); "
             "nothing was allocated (lower trainer_config.batch_size, data_config.block_size or the model size, or "
             "set trainer_config.activation_checkpointing=true)", tot, av,
             device ? "free on the device: cudaMemGetInfo" : "MemAvailable in /proc/meminfo");
    return 1;
}
