// kernels/cuda/classifier.cu — softmax + cross-entropy (ignore_index -1) and dlogits.
//
// One warp per row of V logits: max, sum of exp(l - max), then probabilities; the loss is
// log(sum) - (l[target] - max), exact even where the probability underflows. A target
// outside [-1, V) yields a NaN loss (the trainer stops on a non-finite loss) instead of an
// out-of-bounds read. The fused variant (the Backend's crossentropy_forward_backward) writes
// dlogits in the same pass instead of the probabilities, into its own buffer or in place over
// the logits: one pass over (N,V) instead of three, and no probs buffer.
#include "kernels/cuda/cuda_ops.cuh"

// out: the probabilities, or (FUSED) dlogits; out may alias logits.
template <bool FUSED>
__global__ void crossentropy_kernel(float *__restrict__ losses, float *out, const float *logits,
                                    const int32_t *__restrict__ targets, int N, int V, float dloss) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= N) return;  // warp-uniform
    const float *l = logits + (size_t)row * V;
    float maxv = -INFINITY;
    for (int v = lane; v < V; v += 32) maxv = fmaxf(maxv, l[v]);
    maxv = warp_max(maxv);
    float sum = 0.0f;
    for (int v = lane; v < V; v += 32) sum += expf(l[v] - maxv);
    sum = warp_sum(sum);
    const float inv = 1.0f / sum;
    const int32_t tgt = targets[row];
    const bool valid = tgt >= 0 && tgt < V;
    // every lane reads l[tgt] before any lane may overwrite it (out aliasing logits)
    const float lt = valid ? l[tgt] : 0.0f;
    __syncwarp();
    if (lane == 0) losses[row] = tgt == -1 ? 0.0f : valid ? logf(sum) - (lt - maxv) : NAN;
    float *o = out + (size_t)row * V;
    for (int v = lane; v < V; v += 32) {
        const float p = expf(l[v] - maxv) * inv;
        o[v] = !FUSED ? p : tgt == -1 ? 0.0f : dloss * (p - (v == tgt ? 1.0f : 0.0f));
    }
}

// dlogits = dloss * (probs - onehot(target)), 0 on ignored rows; dlogits may alias probs.
__global__ void crossentropy_backward_kernel(float *dlogits, const float *probs,
                                             const int32_t *__restrict__ targets, int V, size_t total,
                                             float dloss) {
    GRID_STRIDE(i, total) {
        const int32_t tgt = targets[i / V];
        const int v = (int)(i % V);
        dlogits[i] = tgt == -1 ? 0.0f : dloss * (probs[i] - (v == tgt ? 1.0f : 0.0f));
    }
}

void cuda_crossentropy_forward(CudaCtx *c, float *losses, float *probs, const float *logits,
                               const int32_t *targets, int N, int V) {
    if (N <= 0) return;
    LAUNCH((crossentropy_kernel<false>), ceil_div(N, ROWS_PER_BLOCK), 32 * ROWS_PER_BLOCK, 0, c->stream)(
        losses, probs, logits, targets, N, V, 0.0f);
    LAUNCH_CHECK();
}

void cuda_crossentropy_softmax_backward(CudaCtx *c, float *dlogits, const float *probs,
                                        const int32_t *targets, int N, int V, float dloss) {
    const size_t total = (size_t)N * V;
    if (!total) return;
    LAUNCH(crossentropy_backward_kernel, grid_for(c, total), BLOCK, 0, c->stream)(dlogits, probs, targets, V, total, dloss);
    LAUNCH_CHECK();
}

void cuda_crossentropy_forward_backward(CudaCtx *c, float *losses, float *dlogits, const float *logits,
                                        const int32_t *targets, int N, int V, float dloss) {
    if (N <= 0) return;
    LAUNCH((crossentropy_kernel<true>), ceil_div(N, ROWS_PER_BLOCK), 32 * ROWS_PER_BLOCK, 0, c->stream)(
        losses, dlogits, logits, targets, N, V, dloss);
    LAUNCH_CHECK();
}
