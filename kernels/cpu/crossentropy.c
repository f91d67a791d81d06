// kernels/cpu/crossentropy.c — softmax + cross-entropy with ignore_index = -1, and the fused
// training variant that writes the loss and its gradient in one pass.
#pragma GCC optimize("fp-contract=fast")
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/simd.h"

// Elements summed in fp32 lanes before the partial sum moves to the double total.
#define CE_FLUSH 1024

// e (V,) = exp(l - max l) (e may alias l); returns sum(e) (fp32 lanes flushed to double
// every CE_FLUSH elements: no drift for large V) and the max in *maxv.
static double softmax_terms(float *e, const float *l, int V, float *maxv) {
    VF vm = vset1(-INFINITY);
    int v = 0;
    for (; v + VL <= V; v += VL) vm = vmax(vm, vload(l + v));
    float m = vhmax(vm);
    for (; v < V; v++) m = l[v] > m ? l[v] : m;
    const VF vmx = vset1(m);
    double sum = 0.0;
    for (int v0 = 0; v0 < V; v0 += CE_FLUSH) {
        const int v1 = v0 + CE_FLUSH < V ? v0 + CE_FLUSH : V;
        VF acc = vset1(0.0f);
        for (v = v0; v + VL <= v1; v += VL) {
            const VF x = vexp(vload(l + v) - vmx);
            vstore(e + v, x);
            acc += x;
        }
        float s = vsum(acc);
        for (; v < v1; v++) {
            const float x = expf_fast(l[v] - m);
            e[v] = x;
            s += x;
        }
        sum += s;
    }
    *maxv = m;
    return sum;
}

// x (V,) *= s.
static void scale_row(float *x, int V, float s) {
    const VF vs = vset1(s);
    int v = 0;
    for (; v + VL <= V; v += VL) vstore(x + v, vload(x + v) * vs);
    for (; v < V; v++) x[v] *= s;
}

static long count_valid(const int32_t *targets, int N) {
    // Integer count: exact, so a serial pass keeps it trivially deterministic.
    long valid = 0;
    for (int n = 0; n < N; n++) valid += targets[n] != -1;
    return valid;
}

// probs (N,V) = softmax(logits (N,V)); losses (N,) = -log probs[n, targets[n]] or 0 where
// targets[n] == -1. Returns the number of rows with target != -1.
long crossentropy_forward(float *losses, float *probs, const float *logits,
                          const int32_t *targets, int N, int V) {
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *l = logits + (size_t)n * V;
        float *p = probs + (size_t)n * V;
        float maxv;
        const double sum = softmax_terms(p, l, V, &maxv);
        scale_row(p, V, (float)(1.0 / sum));
        const int32_t tgt = targets[n];
        // -log p = log(sum) - (logit - max): exact even when p underflows to 0.
        losses[n] = tgt == -1 ? 0.0f : (float)(log(sum) - (double)(l[tgt] - maxv));
    }
    return count_valid(targets, N);
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
        const float pt = tgt == -1 ? 0.0f : p[tgt];   // read before d (may alias p) is written
        const float s = tgt == -1 ? 0.0f : dloss;
        const VF vs = vset1(s);
        int v = 0;
        for (; v + VL <= V; v += VL) vstore(d + v, vload(p + v) * vs);
        for (; v < V; v++) d[v] = p[v] * s;
        if (tgt != -1) d[tgt] = dloss * (pt - 1.0f);
    }
}

// losses as crossentropy_forward; dlogits (N,V) = dloss * (softmax(logits) - onehot(targets)),
// 0 in rows whose target is -1 — one pass per row, the probabilities never stored.
long crossentropy_forward_backward(float *losses, float *dlogits, const float *logits,
                                   const int32_t *targets, int N, int V, float dloss) {
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *l = logits + (size_t)n * V;
        float *d = dlogits + (size_t)n * V;
        const int32_t tgt = targets[n];
        const float lt = tgt == -1 ? 0.0f : l[tgt];   // read before d (may alias l) is written
        float maxv;
        const double sum = softmax_terms(d, l, V, &maxv);
        if (tgt == -1) {
            losses[n] = 0.0f;
            scale_row(d, V, 0.0f);
            continue;
        }
        losses[n] = (float)(log(sum) - (double)(lt - maxv));
        // d = (e * inv) * dloss: the probabilities rounded exactly as crossentropy_forward
        // stores them, then crossentropy_softmax_backward's product.
        const float inv = (float)(1.0 / sum);
        const float pt = d[tgt] * inv;
        const VF vinv = vset1(inv), vdl = vset1(dloss);
        int v = 0;
        for (; v + VL <= V; v += VL) vstore(d + v, (vload(d + v) * vinv) * vdl);
        for (; v < V; v++) d[v] = (d[v] * inv) * dloss;
        d[tgt] = dloss * (pt - 1.0f);
    }
    return count_valid(targets, N);
}
