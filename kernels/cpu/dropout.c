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
    // One row per task: the inner loop is the hash of consecutive indices, which the compiler
    // vectorises (64-bit multiplies: AVX-512DQ), instead of a division per element.
    #pragma omp parallel for schedule(static)
    for (long j = 0; j < rows; j++) {
        const uint64_t base = dropout_global_index(dk, j, row_len, 0);
        const float *x = inp + j * row_len;
        float *y = out + j * row_len;
        for (long e = 0; e < row_len; e++) y[e] = dropout_keep(dk.key, base + (uint64_t)e, thr) ? x[e] * scale : 0.0f;
    }
}

// dinp (N,) = dout * keep(idx) / (1 - p), overwritten; the mask is recomputed from (key, idx).
void dropout_backward(float *dinp, const float *dout, long N, long row_len, float p, DropoutKey dk) {
    if (p <= 0.0f) {
        #pragma omp parallel for schedule(static)
        for (long i = 0; i < N; i++) dinp[i] = dout[i];
        return;
    }
    const uint32_t thr = dropout_threshold(p);
    const float scale = 1.0f / (1.0f - p);
    const long rows = N / row_len;
    #pragma omp parallel for schedule(static)
    for (long j = 0; j < rows; j++) {
        const uint64_t base = dropout_global_index(dk, j, row_len, 0);
        const float *g = dout + j * row_len;
        float *d = dinp + j * row_len;
        for (long e = 0; e < row_len; e++) d[e] = dropout_keep(dk.key, base + (uint64_t)e, thr) ? g[e] * scale : 0.0f;
    }
}
