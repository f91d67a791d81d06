// trainer/adamw.h — AdamW with minGPT's parameter groups, global-norm clipping, LR schedule.
#ifndef MINGPT_ADAMW_H
#define MINGPT_ADAMW_H

#include <stddef.h>
#include "config/config.h"
#include "kernels/backend.h"
#include "model/gpt.h"

typedef struct {
    Backend *be;     // where the moments live and the update runs
    float *m;        // (n) first moment (torch exp_avg), backend memory
    float *v;        // (n) second moment (torch exp_avg_sq), backend memory
    long step;       // optimizer steps taken (torch state['step'])
    size_t n;
    AdamWSegment *segs;   // host scratch of adamw_step_range (Backend.adamw_update_segments)
    int segs_cap;
    // The optimizer tail on the device (adamw_tail_enqueue): its arguments and result, one
    // allocation of backend memory (NULL until first used), and the host's copy of the result.
    void *tail_dev;
    int tail_ns;                  // segments of the prepared tail (in segs)
    OptimizerTailResult tail_res;
} AdamW;

// Allocates zeroed moments for n parameters on be. Non-zero on out of memory.
int adamw_init(AdamW *opt, Backend *be, size_t n);
void adamw_free(AdamW *opt);

// One torch.optim.AdamW step (decoupled decay, torch's formulation):
//   p *= 1 - lr*wd           (only tensors with ParamTensor.decay: minGPT's Linear weights)
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
// params and grads are the flat backend buffers described by tensors[0..n_tensors).
void adamw_step(AdamW *opt, float *params, const float *grads, const ParamTensor *tensors,
                int n_tensors, float lr, float beta1, float beta2, float eps, float weight_decay);

// adamw_step over the part [lo, hi) of the flat buffer only (ZeRO: this rank's shard,
// dist/shard.h): params is the whole flat buffer; grads, opt->m and opt->v hold that part only
// (element i of the flat buffer at index i - lo). Each tensor's elements inside [lo, hi) get its
// decay rule. adamw_step is adamw_step_range over [0, opt->n). Where the backend has
// adamw_update_segments, the whole range is one call of it (on CUDA one kernel launch), else one
// adamw_update per tensor; the results are the same bits. The gradients are read as
// grads * grad_scale (the unscale and clip coefficient: loss_scaler_unscale_clip_coef; 1: as
// they are), bitwise scaling them first; grads is not written.
void adamw_step_range(AdamW *opt, float *params, const float *grads, const ParamTensor *tensors, int n_tensors,
                      size_t lo, size_t hi, float lr, float beta1, float beta2, float eps, float weight_decay,
                      float grad_scale);

// The optimizer tail of a step on the device, for a trainer in one process on a backend with
// Backend.optimizer_tail (NULL otherwise: 0 returned, nothing done). adamw_tail_prepare (before the
// step's ops): the scalars adamw_step_range would compute for the next step (opt->step + 1; the
// same expressions, so the same bits) and loss_scale / max_norm, uploaded (upload_async) into
// opt->tail_dev, and the segments of [0, opt->n) as adamw_step_range builds them; non-zero when
// it can serve (backend op present, memory). adamw_tail_enqueue (among the step's ops, inside a
// graph capture or not): Backend.optimizer_tail over every parameter, the per-token losses
// (n_losses, their targets) deciding with ssq whether the update runs; then adamw_tail_fetch
// (after the step's ops: download_async of the result, delivered by the caller's
// Backend.download_wait) and adamw_tail_commit (after that wait): opt->step advances when the
// update ran. Bitwise adamw_step_range with loss_scaler_unscale_clip_coef's factor.
int adamw_tail_prepare(AdamW *opt, const ParamTensor *tensors, int n_tensors, float lr, float beta1, float beta2,
                       float weight_decay, double loss_scale, double max_norm);
void adamw_tail_enqueue(AdamW *opt, float *params, const float *grads, float beta1, float beta2, float eps,
                        const float *losses, const int32_t *targets, size_t n_losses);
void adamw_tail_fetch(AdamW *opt);
// (after Backend.download_wait) the result; opt->step + 1 when it applied.
const OptimizerTailResult *adamw_tail_commit(AdamW *opt);

// ||g||_2 over the flat backend buffer, accumulated in double in a fixed order, so the
// result does not depend on the thread or block count.
double grad_global_norm(Backend *be, const float *grads, size_t n);

// torch.nn.utils.clip_grad_norm_: when norm > max_norm, scales grads by
// max_norm / (norm + 1e-6). max_norm <= 0 disables. Returns the scale applied (1 if none).
float grad_clip(Backend *be, float *grads, size_t n, double norm, double max_norm);

// Learning rate at iteration `it` (0-based), nanoGPT's schedule: linear warm-up
// lr*(it+1)/(warmup+1) for it < warmup_iters; then, when lr_decay_iters > 0, cosine decay
// to min_lr at lr_decay_iters and min_lr after; with lr_decay_iters == 0 the rate stays lr.
double lr_at(const OptimizerConfig *o, long it);

#endif
