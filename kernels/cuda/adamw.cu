// kernels/cuda/adamw.cu — one torch.optim.AdamW element update on fp32 master weights
// (the host computes decay_factor, step_size and bc2_sqrt; see kernels/backend.h). The
// expression order is the CPU backend's, and each product and sum is rounded on its own
// (__fmul_rn/__fadd_rn are never contracted into FMAs; sqrtf and / are IEEE without
// --use_fast_math), so both backends give the same bits: on an H100 nvcc's contraction of
// p * decay - step put p hundreds of ulp from the CPU's where the two terms cancel.
// adamw_kernel updates one tensor; adamw_segments_kernel all the tensors of an optimizer step in
// one launch (Backend.adamw_update_segments), each element with the same expression. The
// optimizer tail (Backend.optimizer_tail) runs the same kernel with its scalars read from device
// memory, after ssq_final_tail_kernel (global_norm.cu) has taken the clip / skip decision there.
#include <string.h>

#include "kernels/cuda/cuda_ops.cuh"

// Element i of the four buffers (the one expression both kernels run).
static __device__ __forceinline__ void adamw_element(float *__restrict__ p, const float *__restrict__ g,
                                                     float *__restrict__ m, float *__restrict__ v, size_t i,
                                                     float beta1, float beta2, float eps, float decay_factor,
                                                     float step_size, float bc2_sqrt, float grad_scale) {
    const float gi = __fmul_rn(g[i], grad_scale);
    const float mi = __fadd_rn(__fmul_rn(beta1, m[i]), __fmul_rn(1.0f - beta1, gi));
    const float vi = __fadd_rn(__fmul_rn(beta2, v[i]), __fmul_rn(__fmul_rn(1.0f - beta2, gi), gi));
    m[i] = mi;
    v[i] = vi;
    const float denom = __fadd_rn(sqrtf(vi) / bc2_sqrt, eps);
    p[i] = __fadd_rn(__fmul_rn(p[i], decay_factor), -(__fmul_rn(step_size, mi) / denom));
}

__global__ void adamw_kernel(float *__restrict__ p, const float *__restrict__ g, float *__restrict__ m,
                             float *__restrict__ v, size_t n, float beta1, float beta2, float eps,
                             float decay_factor, float step_size, float bc2_sqrt, float grad_scale) {
    GRID_STRIDE(i, n) adamw_element(p, g, m, v, i, beta1, beta2, eps, decay_factor, step_size, bc2_sqrt, grad_scale);
}

void cuda_adamw_update(CudaCtx *c, float *p, const float *g, float *m, float *v, size_t n,
                       float beta1, float beta2, float eps, float decay_factor, float step_size,
                       float bc2_sqrt, float grad_scale) {
    if (!n) return;
    LAUNCH(adamw_kernel, grid_for(c, n), BLOCK, 0, c->stream)(p, g, m, v, n, beta1, beta2, eps,
                                                              decay_factor, step_size, bc2_sqrt, grad_scale);
    LAUNCH_CHECK();
}

// ---------------------------------------------------------------- all segments in one launch
// The device table: the non-empty segments in order, each with `start`, the index of its first
// element in their concatenation (0, n0, n0 + n1, ...). Element j of the concatenation belongs to
// the last segment whose start <= j and is index offset + (j - start) of the buffers.
struct AdamWSegDev {
    size_t start;
    size_t offset;
    size_t decays;
};

// ta, tr non-null (the optimizer tail): nothing when tr->applied is 0, else ta's decay_factor,
// step_size and bc2_sqrt and tr's grad_scale instead of the arguments.
__global__ void adamw_segments_kernel(float *__restrict__ p, const float *__restrict__ g, float *__restrict__ m,
                                      float *__restrict__ v, const AdamWSegDev *__restrict__ segs, int n_segs,
                                      size_t total, float beta1, float beta2, float eps, float decay_factor,
                                      float step_size, float bc2_sqrt, float grad_scale,
                                      const OptimizerTailArgs *__restrict__ ta,
                                      const OptimizerTailResult *__restrict__ tr) {
    if (ta) {
        if (!tr->applied) return;
        decay_factor = ta->decay_factor;
        step_size = ta->step_size;
        bc2_sqrt = ta->bc2_sqrt;
        grad_scale = tr->grad_scale;
    }
    int s = 0;   // j only grows in the loop: the search starts at the previous element's segment
    GRID_STRIDE(j, total) {
        int hi = n_segs - 1;
        while (s < hi) {   // the last segment with start <= j (segs[s].start <= j holds)
            const int mid = (s + hi + 1) >> 1;
            if (segs[mid].start <= j) s = mid; else hi = mid - 1;
        }
        const size_t i = segs[s].offset + (j - segs[s].start);
        adamw_element(p, g, m, v, i, beta1, beta2, eps, segs[s].decays ? decay_factor : 1.0f, step_size,
                      bc2_sqrt, grad_scale);
    }
}

static bool same_segments(const AdamWSegment *a, const AdamWSegment *b, int n) {
    for (int k = 0; k < n; k++)   // field by field: the structs' padding is not compared
        if (a[k].offset != b[k].offset || a[k].n != b[k].n || (a[k].decays != 0) != (b[k].decays != 0)) return false;
    return true;
}

// The device table for segs (uploaded when it differs from the last call's): the count of non-empty
// segments, and their total length in *total_out.
static int segment_table(CudaCtx *c, const AdamWSegment *segs, int n_segs, size_t *total_out) {
    int ns = 0;
    size_t total = 0;
    for (int k = 0; k < n_segs; k++)
        if (segs[k].n) { ns++; total += segs[k].n; }
    *total_out = total;
    if (!total) return ns;
    if (c->adamw_nsegs != n_segs || !same_segments(c->adamw_segs, segs, n_segs)) {
        // a new table (the first step of a run): upload it, then keep it while segs stay the same
        if (c->capturing)
            cuda_fatal("adamw_update_segments", "the segment table changed inside a graph capture", __FILE__, __LINE__);
        c->adamw_nsegs = 0;
        AdamWSegment *copy = (AdamWSegment *)realloc(c->adamw_segs, (size_t)n_segs * sizeof *copy);
        AdamWSegDev *tab = (AdamWSegDev *)malloc((size_t)ns * sizeof *tab);
        if (!copy || !tab) {
            free(tab);
            cuda_fatal("adamw_update_segments", "out of host memory", __FILE__, __LINE__);
        }
        c->adamw_segs = copy;
        memcpy(copy, segs, (size_t)n_segs * sizeof *copy);
        size_t start = 0;
        int d = 0;
        for (int k = 0; k < n_segs; k++) {
            if (!segs[k].n) continue;
            tab[d++] = AdamWSegDev{start, segs[k].offset, (size_t)(segs[k].decays != 0)};
            start += segs[k].n;
        }
        void *dev = cuda_scratch(c, SCR_ADAMW, (size_t)ns * sizeof *tab);
        CUDA_CHECK(cudaMemcpyAsync(dev, tab, (size_t)ns * sizeof *tab, cudaMemcpyHostToDevice, c->stream));
        CUDA_CHECK(cudaStreamSynchronize(c->stream));   // tab is freed next
        free(tab);
        c->adamw_nsegs = n_segs;
    }
    return ns;
}

void cuda_adamw_update_segments(CudaCtx *c, float *p, const float *g, float *m, float *v,
                                const AdamWSegment *segs, int n_segs, float beta1, float beta2, float eps,
                                float decay_factor, float step_size, float bc2_sqrt, float grad_scale) {
    size_t total = 0;
    const int ns = segment_table(c, segs, n_segs, &total);
    if (!total) return;
    LAUNCH(adamw_segments_kernel, grid_for(c, total), BLOCK, 0, c->stream)(
        p, g, m, v, (const AdamWSegDev *)c->scratch[SCR_ADAMW], ns, total, beta1, beta2, eps, decay_factor,
        step_size, bc2_sqrt, grad_scale, nullptr, nullptr);
    LAUNCH_CHECK();
}

// ---------------------------------------------------------------- the optimizer tail
void cuda_optimizer_tail(CudaCtx *c, float *p, const float *g, float *m, float *v, size_t n,
                         const AdamWSegment *segs, int n_segs, float beta1, float beta2, float eps,
                         const float *losses, const int32_t *targets, size_t n_losses,
                         const OptimizerTailArgs *args, OptimizerTailResult *res) {
    size_t total = 0;
    const int ns = segment_table(c, segs, n_segs, &total);
    cuda_sum_squares_tail(c, g, n, losses, targets, n_losses, args, res);   // the decision too
    if (!total) return;
    LAUNCH(adamw_segments_kernel, grid_for(c, total), BLOCK, 0, c->stream)(
        p, g, m, v, (const AdamWSegDev *)c->scratch[SCR_ADAMW], ns, total, beta1, beta2, eps, 1.0f, 0.0f, 1.0f,
        1.0f, args, res);
    LAUNCH_CHECK();
}
