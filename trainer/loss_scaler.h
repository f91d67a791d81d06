// trainer/loss_scaler.h — dynamic loss scaling for fp16 mixed precision, and the gradient
// pipeline that follows every backward pass: overflow check, unscale, global norm, clip.
//
// The rules are torch.cuda.amp.GradScaler's: the loss (in practice dloss, the gradient that
// starts the backward pass) is multiplied by the scale S, initially 2^16; a step whose
// gradients hold an inf or NaN is skipped and S is halved; after growth_interval (2000)
// consecutive clean steps S is doubled. Gradients are unscaled BEFORE the norm is taken and
// clipped (the PyTorch minGPT-DDP tutorial clips the scaled gradients, so its clip threshold
// silently moves with S): clipping compares the norm of the true gradients to max_norm.
//
// Backend-agnostic (kernels/backend.h ops only). Disabled (fp32, bf16), S is 1 and no step
// is skipped, and loss_scaler_unscale_clip does exactly grad_global_norm + grad_clip.
//
// Trainer use, per iteration:
//     loss = gpt_forward(...);
//     gpt_zero_grad(m);
//     gpt_backward(m) with dloss multiplied by loss_scaler_scale(&ls);
//     double norm;
//     int r = loss_scaler_unscale_clip(&ls, be, m->grads_memory, m->num_params,
//                                      grad_norm_clip, &norm);
//     if (r > 0) adamw_step(...);            // applied: gradients unscaled and clipped
//     else if (r == 0) log "overflow: step skipped, loss scale now S";   // no optimizer step
//     else error "gradients non-finite for LOSS_SCALER_MAX_SKIPS steps in a row";
// and save ls.scale / ls.good_steps in the snapshot (loss_scale, scaler_good_steps),
// restoring them with loss_scaler_restore.
#ifndef MINGPT_LOSS_SCALER_H
#define MINGPT_LOSS_SCALER_H

#include <stddef.h>

#include "checkpoint/snapshot.h"
#include "kernels/backend.h"

#define LOSS_SCALER_INIT 65536.0f      // 2^16, torch's default init_scale
#define LOSS_SCALER_GROWTH_INTERVAL 2000
#define LOSS_SCALER_MAX SNAP_MAX_LOSS_SCALE   // 2^24: growth stops here (fp16 gradients overflow long before)
#define LOSS_SCALER_MAX_SKIPS 64       // consecutive overflows before giving up (S / 2^64)

typedef struct {
    int enabled;            // 1 for fp16 matmuls; 0: scale 1, nothing ever skipped
    float scale;            // S: multiplies dloss
    long good_steps;        // consecutive finite steps since S last changed (torch: growth tracker)
    long growth_interval;   // clean steps before S doubles (2000)
    long skipped;           // steps skipped so far (statistics)
    long consecutive_skips; // overflows in a row
} LossScaler;

void loss_scaler_init(LossScaler *ls, int enabled);
// Restores the state saved in a snapshot (scale <= 0 leaves the initial state).
void loss_scaler_restore(LossScaler *ls, float scale, long good_steps);
// The factor dloss is multiplied by: S when enabled, else 1.
float loss_scaler_scale(const LossScaler *ls);

// The scaler's bookkeeping for one step given whether its gradients were all finite:
// returns 1 when the step is to be applied, 0 when it is to be skipped.
int loss_scaler_update(LossScaler *ls, int finite);

// After a backward pass on gradients of (loss * S), n floats of backend memory:
//   ssq = sum of squares of the scaled gradients (one pass; it is inf/NaN exactly when a
//         gradient is: squares of finite floats cannot overflow a double);
//   not finite -> S halves, nothing else changes, returns 0 (skip the optimizer step);
//   finite     -> *norm = sqrt(ssq) / S, the norm of the unscaled gradients; the clip
//                 coefficient c = max_norm / (norm + 1e-6) when that is < 1 (max_norm > 0),
//                 else 1; gradients *= c / S in one pass (S is a power of two, so this is
//                 exactly unscaling first); returns 1.
// Returns -1 (and skips) after LOSS_SCALER_MAX_SKIPS consecutive overflows: the gradients
// are not finite at any scale, the run has diverged.
int loss_scaler_unscale_clip(LossScaler *ls, Backend *be, float *grads, size_t n,
                             double max_norm, double *norm);

// loss_scaler_unscale_clip with the sum of squares given: ssq is that of the gradients of the
// whole model, grads[0..n) the part this caller unscales and clips (ZeRO: the rank's shard of the
// reduced gradients, ssq the all-reduce of every shard's sum of squares). Every rank that passes
// the same ssq takes the same decision.
int loss_scaler_unscale_clip_ssq(LossScaler *ls, Backend *be, float *grads, size_t n, double ssq,
                                 double max_norm, double *norm);

// The same decision without touching the gradients: *grad_scale = (float)(c / S), the factor
// loss_scaler_unscale_clip_ssq would multiply them by (1 where it would not), for the optimizer
// to apply as it reads them (Backend.adamw_update's grad_scale: one pass over the gradients
// fewer, the same bits). Returns what loss_scaler_unscale_clip_ssq returns.
int loss_scaler_unscale_clip_coef(LossScaler *ls, double ssq, double max_norm, double *norm, float *grad_scale);

#endif
