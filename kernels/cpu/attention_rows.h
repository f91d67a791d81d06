// kernels/cpu/attention_rows.h — the row operations of causal attention shared by the fp32
// kernels (attention.c) and the bf16 GEMM path (attention_bf16.c).
#ifndef MINGPT_CPU_ATTENTION_ROWS_H
#define MINGPT_CPU_ATTENTION_ROWS_H

#include <math.h>
#include <stdint.h>

#include "kernels/cpu/simd.h"
#include "kernels/dropout_rng.h"

// m[j] = dropout multiplier of element idx0 + j: 0 or keep_scale.
static inline void drop_row(float *m, int n, uint64_t key, uint64_t idx0, uint32_t thr, float keep_scale) {
    for (int j = 0; j < n; j++) m[j] = dropout_keep(key, idx0 + (uint64_t)j, thr) ? keep_scale : 0.0f;
}

// row[0..n) = softmax(row[0..n)) (max-subtracted), row[n..T) = 0.
static inline void softmax_row(float *row, int n, int T) {
    int j = 0;
    VF vm = vset1(-INFINITY);
    for (; j + VL <= n; j += VL) vm = vmax(vm, vload(row + j));
    float maxv = vhmax(vm);
    for (; j < n; j++) maxv = row[j] > maxv ? row[j] : maxv;
    VF vs = vset1(0.0f);
    const VF vmx = vset1(maxv);
    for (j = 0; j + VL <= n; j += VL) {
        const VF e = vexp(vload(row + j) - vmx);
        vstore(row + j, e);
        vs += e;
    }
    float sum = vsum(vs);
    for (; j < n; j++) {
        const float e = expf_fast(row[j] - maxv);
        row[j] = e;
        sum += e;
    }
    const float inv = 1.0f / sum;
    const VF vinv = vset1(inv);
    for (j = 0; j + VL <= n; j += VL) vstore(row + j, vload(row + j) * vinv);
    for (; j < n; j++) row[j] *= inv;
    for (j = n; j < T; j++) row[j] = 0.0f;
}

#endif
