// kernels/cpu/crossentropy.c — softmax + cross-entropy with ignore_index = -1.
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/ops.h"

// probs (N,V) = softmax(logits (N,V)); losses (N,) = -log probs[n, targets[n]] or 0 where
// targets[n] == -1. Returns the number of rows with target != -1.
long crossentropy_forward(float *losses, float *probs, const float *logits,
                          const int32_t *targets, int N, int V) {
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *l = logits + (size_t)n * V;
        float *p = probs + (size_t)n * V;
        float maxv = -INFINITY;
        for (int v = 0; v < V; v++) maxv = l[v] > maxv ? l[v] : maxv;
        double sum = 0.0;  // double: V terms in [0,1], avoids drift for large V
        for (int v = 0; v < V; v++) {
            const float e = expf(l[v] - maxv);
            p[v] = e;
            sum += e;
        }
        const float inv = (float)(1.0 / sum);
        for (int v = 0; v < V; v++) p[v] *= inv;
        const int32_t tgt = targets[n];
        // -log p = log(sum) - (logit - max): exact even when p underflows to 0.
        losses[n] = tgt == -1 ? 0.0f : (float)(log(sum) - (double)(l[tgt] - maxv));
    }
    // Integer count: exact, so a serial pass keeps it trivially deterministic.
    long valid = 0;
    for (int n = 0; n < N; n++) valid += targets[n] != -1;
    return valid;
}

// dlogits (N,V) = dloss * (probs - onehot(targets)); rows with target -1 get 0.
// Overwrites dlogits, which may alias probs (each element is read before it is written).
void crossentropy_softmax_backward(float *dlogits, const float *probs, const int32_t *targets,
                                   int N, int V, float dloss) {
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *p = probs + (size_t)n * V;
        float *d = dlogits + (size_t)n * V;
        const int32_t tgt = targets[n];
        if (tgt == -1) {
            for (int v = 0; v < V; v++) d[v] = 0.0f;
            continue;
        }
        for (int v = 0; v < V; v++) d[v] = dloss * (p[v] - (v == tgt ? 1.0f : 0.0f));
    }
}
