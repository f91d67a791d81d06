// kernels/cpu/dropout.c — inverted dropout with a counter-based mask (kernels/dropout_rng.h).
#include <stdint.h>

#include "kernels/cpu/ops.h"
#include "kernels/dropout_rng.h"

// out (N,) = inp * keep(idx) / (1 - p). out may alias inp, so no restrict. Rows are
// walked one at a time so the global index is an add per element, not a division.
void dropout_forward(float *out, const float *inp, long N, long row_len, float p, DropoutKey dk) {
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
    const long rows = N / row_len;
    #pragma omp parallel for collapse(2) schedule(static)
    for (long j = 0; j < rows; j++)
        for (long e = 0; e < row_len; e++) {
            const long i = j * row_len + e;
            out[i] = dropout_keep(dk.key, dropout_global_index(dk, j, row_len, e), thr) ? inp[i] * scale : 0.0f;
        }
}

// dinp (N,) += dout * keep(idx) / (1 - p); the mask is recomputed from (key, idx).
void dropout_backward(float *dinp, const float *dout, long N, long row_len, float p, DropoutKey dk) {
    if (p <= 0.0f) {
        #pragma omp parallel for schedule(static)
        for (long i = 0; i < N; i++) dinp[i] += dout[i];
        return;
    }
    const uint32_t thr = dropout_threshold(p);
    const float scale = 1.0f / (1.0f - p);
    const long rows = N / row_len;
    #pragma omp parallel for collapse(2) schedule(static)
    for (long j = 0; j < rows; j++)
        for (long e = 0; e < row_len; e++) {
            const long i = j * row_len + e;
            if (dropout_keep(dk.key, dropout_global_index(dk, j, row_len, e), thr)) dinp[i] += dout[i] * scale;
        }
}
