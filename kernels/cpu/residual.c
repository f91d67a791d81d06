// kernels/cpu/residual.c — residual add.
#include "kernels/cpu/ops.h"

// out (N,) = a + b.
void residual_forward(float *out, const float *a, const float *b, long N) {
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < N; i++) out[i] = a[i] + b[i];
}

// da (N,) += dout; db (N,) += dout.
void residual_backward(float *da, float *db, const float *dout, long N) {
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < N; i++) {
        da[i] += dout[i];
        db[i] += dout[i];
    }
}
