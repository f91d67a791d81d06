// kernels/cpu/dropout.c — inverted dropout with a counter-based mask (kernels/dropout_rng.h).
#include <stdint.h>

#include "kernels/cpu/ops.h"
#include "kernels/dropout_rng.h"

// out (N,) = inp * keep(idx) / (1 - p). out may alias inp, so no restrict.
void dropout_forward(float *out, const float *inp, long N, float p, uint64_t key) {
    if (p <= 0.0f) {
        // Identity; skip the copy when operating in place.
        if (out != inp) {
            #pragma omp parallel for schedule(static)
            for (long i = 0; i < N; i++) out[i] = inp[i];
        }
        return;
    }
    const uint32_t thr = dropout_threshold(p);
    const float scale = 1.0f / (1.0f - p);  // never used when p = 1 (every element dropped)
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < N; i++)
        out[i] = dropout_keep(key, (uint64_t)i, thr) ? inp[i] * scale : 0.0f;
}

// dinp (N,) += dout * keep(idx) / (1 - p); the mask is recomputed from (key, idx).
void dropout_backward(float *dinp, const float *dout, long N, float p, uint64_t key) {
    if (p <= 0.0f) {
        #pragma omp parallel for schedule(static)
        for (long i = 0; i < N; i++) dinp[i] += dout[i];
        return;
    }
    const uint32_t thr = dropout_threshold(p);
    const float scale = 1.0f / (1.0f - p);
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < N; i++)
        if (dropout_keep(key, (uint64_t)i, thr)) dinp[i] += dout[i] * scale;
}
