// kernels/cpu/encoder.c — token + position embedding (forward and backward).
#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/ops.h"

// Channels per task in the backward scatters: one cache line pair, so threads own disjoint
// column blocks and never write the same element (no atomics, deterministic order).
#define ENC_CH_BLOCK 32

// out (B,T,C) = wte (V,C)[inp (B,T)] + wpe (T_max,C)[t].
void encoder_forward(float *out, const int32_t *inp, const float *wte, const float *wpe,
                     int B, int T, int C) {
    if ((long)B * T == 1) {   // a token of inference: no thread team
        for (int c = 0; c < C; c++) out[c] = wte[(size_t)inp[0] * C + c] + wpe[c];
        return;
    }
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            float *o = out + ((size_t)b * T + t) * C;
            const float *we = wte + (size_t)inp[(size_t)b * T + t] * C;
            const float *pe = wpe + (size_t)t * C;
            for (int c = 0; c < C; c++) o[c] = we[c] + pe[c];
        }
    }
}

// dwte (V,C) += scatter of dout (B,T,C) by token inp (B,T); dwpe (T_max,C) += sum_b dout[b,t].
void encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *inp,
                      int B, int T, int C) {
    // dwpe: each t is owned by one thread and sums b in order.
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++) {
        float *dp = dwpe + (size_t)t * C;
        for (int b = 0; b < B; b++) {
            const float *d = dout + ((size_t)b * T + t) * C;
            for (int c = 0; c < C; c++) dp[c] += d[c];
        }
    }
    // dwte: tokens repeat, so rows would race; partition by channel block instead and walk
    // every (b,t) in order inside each block. Order per element is fixed -> deterministic
    // for any thread count.
    const int nblk = (C + ENC_CH_BLOCK - 1) / ENC_CH_BLOCK;
    const long N = (long)B * T;
    #pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
        const int c0 = blk * ENC_CH_BLOCK;
        const int c1 = c0 + ENC_CH_BLOCK < C ? c0 + ENC_CH_BLOCK : C;
        for (long n = 0; n < N; n++) {
            float *dw = dwte + (size_t)inp[n] * C;
            const float *d = dout + (size_t)n * C;
            for (int c = c0; c < c1; c++) dw[c] += d[c];
        }
    }
}
