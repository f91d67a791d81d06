// trainer/adamw.c — AdamW, gradient norm and clipping, learning-rate schedule. The
// element-wise work runs on the backend; this file owns the per-step scalars.
#include "trainer/adamw.h"

#include <math.h>
#include <stdlib.h>

int adamw_init(AdamW *opt, Backend *be, size_t n) {
    opt->be = be;
    opt->m = be->alloc(be, n * sizeof(float));
    opt->v = be->alloc(be, n * sizeof(float));
    opt->step = 0;
    opt->n = n;
    opt->segs = NULL;
    opt->segs_cap = 0;
    opt->tail_dev = NULL;
    opt->tail_ns = 0;
    if (!opt->m || !opt->v) { adamw_free(opt); return 1; }
    return 0;
}

void adamw_free(AdamW *opt) {
    if (opt->be) {
        opt->be->free(opt->be, opt->m);
        opt->be->free(opt->be, opt->v);
        if (opt->tail_dev) opt->be->free(opt->be, opt->tail_dev);
    }
    opt->m = opt->v = NULL;
    opt->tail_dev = NULL;
    free(opt->segs);
    opt->segs = NULL;
    opt->segs_cap = 0;
}

void adamw_step(AdamW *opt, float *params, const float *grads, const ParamTensor *tensors,
                int n_tensors, float lr, float beta1, float beta2, float eps, float weight_decay) {
    adamw_step_range(opt, params, grads, tensors, n_tensors, 0, opt->n, lr, beta1, beta2, eps, weight_decay, 1.0f);
}

// The per-step scalars of step number t.
static void step_scalars(long t, float lr, float beta1, float beta2, float weight_decay, float *decay_factor,
                         float *step_size, float *bc2_sqrt) {
    const float bc1 = 1.0f - powf(beta1, (float)t);
    *bc2_sqrt = sqrtf(1.0f - powf(beta2, (float)t));
    *step_size = lr / bc1;
    *decay_factor = 1.0f - lr * weight_decay;
}

// opt->segs = the segments of [lo, hi) (offsets from lo, each tensor's decay rule); their count,
// or -1 when out of host memory.
static int build_segments(AdamW *opt, const ParamTensor *tensors, int n_tensors, size_t lo, size_t hi) {
    if (opt->segs_cap < n_tensors) {
        AdamWSegment *s = realloc(opt->segs, (size_t)n_tensors * sizeof *s);
        if (!s) return -1;
        opt->segs = s;
        opt->segs_cap = n_tensors;
    }
    int ns = 0;
    for (int k = 0; k < n_tensors; k++) {
        const ParamTensor *t = &tensors[k];
        const size_t a = t->offset > lo ? t->offset : lo;
        const size_t b = t->offset + t->numel < hi ? t->offset + t->numel : hi;
        if (a >= b) continue;
        opt->segs[ns++] = (AdamWSegment){ .offset = a - lo, .n = b - a, .decays = t->decay ? 1 : 0 };
    }
    return ns;
}

void adamw_step_range(AdamW *opt, float *params, const float *grads, const ParamTensor *tensors, int n_tensors,
                      size_t lo, size_t hi, float lr, float beta1, float beta2, float eps, float weight_decay,
                      float grad_scale) {
    Backend *be = opt->be;
    opt->step++;
    float decay_factor, step_size, bc2_sqrt;
    step_scalars(opt->step, lr, beta1, beta2, weight_decay, &decay_factor, &step_size, &bc2_sqrt);
    if (be->adamw_update_segments && n_tensors > 0) {
        // params + lo: the four buffers then share each segment's offset (element i at i - lo)
        const int ns = build_segments(opt, tensors, n_tensors, lo, hi);
        if (ns >= 0) {   // (else, out of host memory: the loop below)
            if (ns > 0)
                be->adamw_update_segments(be, params + lo, grads, opt->m, opt->v, opt->segs, ns, beta1, beta2, eps,
                                          decay_factor, step_size, bc2_sqrt, grad_scale);
            return;
        }
    }
    for (int k = 0; k < n_tensors; k++) {
        const ParamTensor *t = &tensors[k];
        const size_t a = t->offset > lo ? t->offset : lo, b = t->offset + t->numel < hi ? t->offset + t->numel : hi;
        if (a >= b) continue;
        const float decay = t->decay ? decay_factor : 1.0f;
        be->adamw_update(be, params + a, grads + (a - lo), opt->m + (a - lo), opt->v + (a - lo), b - a, beta1,
                         beta2, eps, decay, step_size, bc2_sqrt, grad_scale);
    }
}

// ---- the optimizer tail on the device: OptimizerTailArgs then OptimizerTailResult in tail_dev
static OptimizerTailArgs *tail_args_dev(AdamW *opt) { return (OptimizerTailArgs *)opt->tail_dev; }
static OptimizerTailResult *tail_res_dev(AdamW *opt) {
    return (OptimizerTailResult *)((char *)opt->tail_dev + sizeof(OptimizerTailArgs));
}

int adamw_tail_prepare(AdamW *opt, const ParamTensor *tensors, int n_tensors, float lr, float beta1, float beta2,
                       float weight_decay, double loss_scale, double max_norm) {
    Backend *be = opt->be;
    if (!be->optimizer_tail || !be->upload_async || !be->download_async || n_tensors < 1) return 0;
    if (!opt->tail_dev) {
        opt->tail_dev = be->alloc(be, sizeof(OptimizerTailArgs) + sizeof(OptimizerTailResult));
        if (!opt->tail_dev) return 0;
    }
    const int ns = build_segments(opt, tensors, n_tensors, 0, opt->n);
    if (ns < 0) return 0;
    opt->tail_ns = ns;
    OptimizerTailArgs a = { .loss_scale = loss_scale, .max_norm = max_norm };
    step_scalars(opt->step + 1, lr, beta1, beta2, weight_decay, &a.decay_factor, &a.step_size, &a.bc2_sqrt);
    be->upload_async(be, tail_args_dev(opt), &a, sizeof a);
    return 1;
}

void adamw_tail_enqueue(AdamW *opt, float *params, const float *grads, float beta1, float beta2, float eps,
                        const float *losses, const int32_t *targets, size_t n_losses) {
    Backend *be = opt->be;
    be->optimizer_tail(be, params, grads, opt->m, opt->v, opt->n, opt->segs, opt->tail_ns, beta1, beta2, eps, losses,
                       targets, n_losses, tail_args_dev(opt), tail_res_dev(opt));
}

void adamw_tail_fetch(AdamW *opt) {
    opt->be->download_async(opt->be, &opt->tail_res, tail_res_dev(opt), sizeof opt->tail_res);
}

const OptimizerTailResult *adamw_tail_commit(AdamW *opt) {
    if (opt->tail_res.applied) opt->step++;
    return &opt->tail_res;
}

double grad_global_norm(Backend *be, const float *grads, size_t n) {
    return sqrt(be->sum_squares(be, grads, n));
}

float grad_clip(Backend *be, float *grads, size_t n, double norm, double max_norm) {
    if (max_norm <= 0.0) return 1.0f;
    const double coef = max_norm / (norm + 1e-6);
    if (coef >= 1.0) return 1.0f;
    be->scale(be, grads, n, (float)coef);
    return (float)coef;
}

double lr_at(const OptimizerConfig *o, long it) {
    // in double: warmup_iters may be LONG_MAX (+1 would overflow a long)
    if (it < o->warmup_iters) return o->learning_rate * ((double)it + 1.0) / ((double)o->warmup_iters + 1.0);
    if (o->lr_decay_iters <= 0) return o->learning_rate;
    if (it > o->lr_decay_iters) return o->min_lr;
    double span = (double)(o->lr_decay_iters - o->warmup_iters);
    double r = span > 0 ? (double)(it - o->warmup_iters) / span : 1.0;
    return o->min_lr + 0.5 * (1.0 + cos(M_PI * r)) * (o->learning_rate - o->min_lr);
}
