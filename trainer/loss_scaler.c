// trainer/loss_scaler.c — dynamic loss scaling (see loss_scaler.h).
#include "trainer/loss_scaler.h"

#include <math.h>

void loss_scaler_init(LossScaler *ls, int enabled) {
    ls->enabled = enabled;
    ls->scale = enabled ? LOSS_SCALER_INIT : 1.0f;
    ls->good_steps = 0;
    ls->growth_interval = LOSS_SCALER_GROWTH_INTERVAL;
    ls->skipped = 0;
    ls->consecutive_skips = 0;
}

void loss_scaler_restore(LossScaler *ls, float scale, long good_steps) {
    if (!ls->enabled || !(scale > 0.0f) || !isfinite(scale)) return;
    ls->scale = scale;
    ls->good_steps = good_steps > 0 ? good_steps : 0;
}

float loss_scaler_scale(const LossScaler *ls) { return ls->enabled ? ls->scale : 1.0f; }

int loss_scaler_update(LossScaler *ls, int finite) {
    if (!ls->enabled) return 1;
    if (!finite) {
        ls->scale *= 0.5f;
        ls->good_steps = 0;
        ls->skipped++;
        ls->consecutive_skips++;
        return 0;
    }
    ls->consecutive_skips = 0;
    if (++ls->good_steps >= ls->growth_interval) {
        if (ls->scale < LOSS_SCALER_MAX) ls->scale *= 2.0f;
        ls->good_steps = 0;
    }
    return 1;
}

int loss_scaler_unscale_clip(LossScaler *ls, Backend *be, float *grads, size_t n,
                             double max_norm, double *norm) {
    return loss_scaler_unscale_clip_ssq(ls, be, grads, n, be->sum_squares(be, grads, n), max_norm, norm);
}

int loss_scaler_unscale_clip_ssq(LossScaler *ls, Backend *be, float *grads, size_t n, double ssq,
                                 double max_norm, double *norm) {
    float s = 1.0f;
    const int r = loss_scaler_unscale_clip_coef(ls, ssq, max_norm, norm, &s);
    if (r == 1 && s != 1.0f) be->scale(be, grads, n, s);
    return r;
}

int loss_scaler_unscale_clip_coef(LossScaler *ls, double ssq, double max_norm, double *norm, float *grad_scale) {
    *grad_scale = 1.0f;
    const double S = loss_scaler_scale(ls);
    const int finite = isfinite(ssq);
    *norm = finite ? sqrt(ssq) / S : NAN;
    if (ls->enabled) {
        // decide before the scale changes: the gradients were computed with S
        if (!loss_scaler_update(ls, finite))
            return ls->consecutive_skips >= LOSS_SCALER_MAX_SKIPS ? -1 : 0;
    }
    double coef = 1.0;
    if (max_norm > 0.0) {
        const double c = max_norm / (*norm + 1e-6);
        if (c < 1.0) coef = c;
    }
    if (coef != 1.0 || S != 1.0) *grad_scale = (float)(coef / S);
    return 1;
}
