// trainer/adamw.c — AdamW, gradient norm and clipping, learning-rate schedule.
#include "trainer/adamw.h"

#include <math.h>
#include <stdlib.h>

int adamw_init(AdamW *opt, size_t n) {
    opt->m = calloc(n, sizeof(float));
    opt->v = calloc(n, sizeof(float));
    opt->step = 0;
    opt->n = n;
    if (!opt->m || !opt->v) { adamw_free(opt); return 1; }
    return 0;
}

void adamw_free(AdamW *opt) {
    free(opt->m);
    free(opt->v);
    opt->m = opt->v = NULL;
}

void adamw_step(AdamW *opt, float *params, const float *grads, const ParamTensor *tensors,
                int n_tensors, float lr, float beta1, float beta2, float eps, float weight_decay) {
    opt->step++;
    const float bc1 = 1.0f - powf(beta1, (float)opt->step);
    const float bc2_sqrt = sqrtf(1.0f - powf(beta2, (float)opt->step));
    const float step_size = lr / bc1;
    for (int k = 0; k < n_tensors; k++) {
        const ParamTensor *t = &tensors[k];
        const float decay = t->decay ? 1.0f - lr * weight_decay : 1.0f;
        float *p = params + t->offset, *m = opt->m + t->offset, *v = opt->v + t->offset;
        const float *g = grads + t->offset;
        #pragma omp parallel for schedule(static) if (t->numel > 16384)
        for (size_t i = 0; i < t->numel; i++) {
            float gi = g[i];
            m[i] = beta1 * m[i] + (1.0f - beta1) * gi;
            v[i] = beta2 * v[i] + (1.0f - beta2) * gi * gi;
            float denom = sqrtf(v[i]) / bc2_sqrt + eps;
            p[i] = p[i] * decay - step_size * m[i] / denom;
        }
    }
}

#define NORM_CHUNKS 64

double grad_global_norm(const float *grads, size_t n) {
    double partial[NORM_CHUNKS];
    const size_t chunk = (n + NORM_CHUNKS - 1) / NORM_CHUNKS;
    #pragma omp parallel for schedule(static)
    for (int c = 0; c < NORM_CHUNKS; c++) {
        size_t lo = (size_t)c * chunk, hi = lo + chunk < n ? lo + chunk : n;
        double s = 0.0;
        for (size_t i = lo; i < hi; i++) s += (double)grads[i] * grads[i];
        partial[c] = s;
    }
    double total = 0.0;
    for (int c = 0; c < NORM_CHUNKS; c++) total += partial[c];
    return sqrt(total);
}

float grad_clip(float *grads, size_t n, double norm, double max_norm) {
    if (max_norm <= 0.0) return 1.0f;
    const double coef = max_norm / (norm + 1e-6);
    if (coef >= 1.0) return 1.0f;
    const float s = (float)coef;
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) grads[i] *= s;
    return s;
}

double lr_at(const OptimizerConfig *o, long it) {
    if (it < o->warmup_iters) return o->learning_rate * (double)(it + 1) / (double)(o->warmup_iters + 1);
    if (o->lr_decay_iters <= 0) return o->learning_rate;
    if (it > o->lr_decay_iters) return o->min_lr;
    double span = (double)(o->lr_decay_iters - o->warmup_iters);
    double r = span > 0 ? (double)(it - o->warmup_iters) / span : 1.0;
    return o->min_lr + 0.5 * (1.0 + cos(M_PI * r)) * (o->learning_rate - o->min_lr);
}
