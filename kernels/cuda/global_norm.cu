// kernels/cuda/global_norm.cu — sum of squares of a flat fp32 buffer in double, for the
// global gradient norm. Deterministic without atomics: a fixed grid of SSQ_BLOCKS blocks
// of SSQ_THREADS threads, each thread a fixed strided subset, tree reductions in shared
// memory, then one block sums the partials in a fixed tree. The result depends only on n.
#include "kernels/cuda/cuda_ops.cuh"

#define SSQ_BLOCKS 256
#define SSQ_THREADS 256

static __device__ __forceinline__ double block_sum_d(double v, double *s) {
    s[threadIdx.x] = v;
    __syncthreads();
    for (int st = SSQ_THREADS / 2; st > 0; st >>= 1) {
        if ((int)threadIdx.x < st) s[threadIdx.x] += s[threadIdx.x + st];
        __syncthreads();
    }
    return s[0];
}

__global__ void __launch_bounds__(SSQ_THREADS) ssq_partial_kernel(double *__restrict__ part,
                                                                  const float *__restrict__ x, size_t n) {
    __shared__ double s[SSQ_THREADS];
    double acc = 0.0;
    for (size_t i = (size_t)blockIdx.x * SSQ_THREADS + threadIdx.x; i < n; i += (size_t)SSQ_BLOCKS * SSQ_THREADS) {
        const double xi = x[i];
        acc += xi * xi;
    }
    const double t = block_sum_d(acc, s);
    if (threadIdx.x == 0) part[blockIdx.x] = t;
}

__global__ void __launch_bounds__(SSQ_THREADS) ssq_final_kernel(double *__restrict__ out,
                                                                const double *__restrict__ part) {
    __shared__ double s[SSQ_THREADS];
    double acc = 0.0;
    for (int i = threadIdx.x; i < SSQ_BLOCKS; i += SSQ_THREADS) acc += part[i];
    const double t = block_sum_d(acc, s);
    if (threadIdx.x == 0) out[0] = t;
}

// The optimizer tail's decision (Backend.optimizer_tail), in the block that finishes the sum: the
// sum as ssq_final_kernel, any nonfinite loss of a valid target, then (thread 0) the decision and
// the factor of loss_scaler_unscale_clip_coef (trainer/loss_scaler.c) with the same double
// arithmetic (IEEE sqrt and division: the host's bits).
__global__ void __launch_bounds__(SSQ_THREADS) ssq_final_tail_kernel(const double *__restrict__ part,
                                                                     const float *__restrict__ losses,
                                                                     const int32_t *__restrict__ targets, size_t n,
                                                                     const OptimizerTailArgs *__restrict__ a,
                                                                     OptimizerTailResult *__restrict__ r) {
    __shared__ double s[SSQ_THREADS];
    double acc = 0.0;
    for (int i = threadIdx.x; i < SSQ_BLOCKS; i += SSQ_THREADS) acc += part[i];
    const double ssq = block_sum_d(acc, s);
    __syncthreads();   // (s is reused below)
    double bad = 0.0;
    for (size_t i = threadIdx.x; i < n; i += SSQ_THREADS)
        if (targets[i] != -1 && !isfinite(losses[i])) bad = 1.0;
    const double any_bad = block_sum_d(bad, s);
    if (threadIdx.x != 0) return;
    const double S = a->loss_scale;
    const int finite = isfinite(ssq) && any_bad == 0.0;
    float grad_scale = 1.0f;
    if (finite) {
        const double norm = sqrt(ssq) / S;
        double coef = 1.0;
        if (a->max_norm > 0.0) {
            const double cf = a->max_norm / (norm + 1e-6);
            if (cf < 1.0) coef = cf;
        }
        if (coef != 1.0 || S != 1.0) grad_scale = (float)(coef / S);
    }
    r->ssq = ssq;
    r->grad_scale = grad_scale;
    r->nonfinite_loss = any_bad != 0.0;
    r->applied = finite;
}

void cuda_sum_squares_tail(CudaCtx *c, const float *x, size_t n, const float *losses, const int32_t *targets,
                           size_t n_losses, const OptimizerTailArgs *args, OptimizerTailResult *res) {
    double *part = (double *)cuda_scratch(c, SCR_RED, (SSQ_BLOCKS + 1) * sizeof(double));
    LAUNCH(ssq_partial_kernel, SSQ_BLOCKS, SSQ_THREADS, 0, c->stream)(part, x, n);
    LAUNCH_CHECK();
    LAUNCH(ssq_final_tail_kernel, 1, SSQ_THREADS, 0, c->stream)(part, losses, targets, n_losses, args, res);
    LAUNCH_CHECK();
}

double cuda_sum_squares(CudaCtx *c, const float *x, size_t n) {
    if (!n) return 0.0;
    double *part = (double *)cuda_scratch(c, SCR_RED, (SSQ_BLOCKS + 1) * sizeof(double));
    LAUNCH(ssq_partial_kernel, SSQ_BLOCKS, SSQ_THREADS, 0, c->stream)(part, x, n);
    LAUNCH_CHECK();
    LAUNCH(ssq_final_kernel, 1, SSQ_THREADS, 0, c->stream)(part + SSQ_BLOCKS, part);
    LAUNCH_CHECK();
    double r = 0.0;
    CUDA_CHECK(cudaMemcpyAsync(&r, part + SSQ_BLOCKS, sizeof r, cudaMemcpyDeviceToHost, c->stream));
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
    return r;
}
