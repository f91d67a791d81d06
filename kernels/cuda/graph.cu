// kernels/cuda/graph.cu — Backend.graph_run / graph_free (kernels/backend.h): a sequence of the
// backend's ops captured once with stream capture (cudaStreamBeginCapture on c->stream, global
// mode) and replayed with one cudaGraphLaunch, so the host issues one call instead of hundreds
// of launches. A graph bakes in every pointer and scalar argument its ops had when captured,
// including the scratch buffers (cuda_scratch), the weight-cast copy and the TF32 setting: it is
// replayed only while those are unchanged, else captured again. No host synchronisation may
// happen inside the captured sequence (CUDA refuses it, and so does the emulator): a
// CUDA_CHECK then reports the refused call and exits, a bug of the caller.
#include "kernels/cuda/cuda_ops.cuh"

thread_local bool cuda_graph_capturing = false;

struct CudaGraph {
    int runs;                 // calls so far: the first runs the ops directly (scratch grows)
    cudaGraphExec_t exec;     // nullptr until captured
    uint64_t scratch_gen;     // CudaCtx.scratch_gen at capture
    bool tf32;
    const float *cast_params; // CudaCtx.wcast.params and .lp at capture (nullptr: no cast copy)
    const void *cast_lp;
};

// The graph still describes what fn would enqueue now: same scratch buffers, same matmul
// precision, and the weight-cast copy it read (if any) still valid at the same address.
static bool graph_current(const CudaCtx *c, const CudaGraph *g) {
    if (g->scratch_gen != c->scratch_gen || g->tf32 != c->tf32) return false;
    return !g->cast_params || (c->wcast.params == g->cast_params && c->wcast.lp == g->cast_lp);
}

int cuda_graph_run(CudaCtx *c, void **slot, void (*fn)(void *ctx), void *ctx) {
    CudaGraph *g = (CudaGraph *)*slot;
    if (!g) {
        g = (CudaGraph *)calloc(1, sizeof *g);
        if (!g) cuda_fatal("graph_run", "out of host memory", __FILE__, __LINE__);
        *slot = g;
    }
    if (g->runs++ == 0) {   // first call: directly, so that every scratch buffer reaches its size
        fn(ctx);
        return 1;
    }
    if (g->exec && graph_current(c, g)) {
        CUDA_CHECK(cudaGraphLaunch(g->exec, c->stream));
        return 0;
    }
    if (g->exec) { CUDA_CHECK(cudaGraphExecDestroy(g->exec)); g->exec = nullptr; }
    const uint64_t gen = c->scratch_gen;
    c->capturing = cuda_graph_capturing = true;
    CUDA_CHECK(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeGlobal));
    fn(ctx);
    cudaGraph_t graph = nullptr;
    CUDA_CHECK(cudaStreamEndCapture(c->stream, &graph));
    c->capturing = cuda_graph_capturing = false;
    if (c->scratch_gen != gen) cuda_fatal("graph_run", "a scratch buffer grew during the capture", __FILE__, __LINE__);
    CUDA_CHECK(cudaGraphInstantiate(&g->exec, graph, 0));
    CUDA_CHECK(cudaGraphDestroy(graph));
    g->scratch_gen = gen;
    g->tf32 = c->tf32;
    g->cast_params = c->wcast.params;
    g->cast_lp = c->wcast.lp;
    CUDA_CHECK(cudaGraphLaunch(g->exec, c->stream));
    return 1;
}

void cuda_graph_free(CudaCtx *, void *graph) {
    CudaGraph *g = (CudaGraph *)graph;
    if (!g) return;
    if (g->exec) cudaGraphExecDestroy(g->exec);
    free(g);
}
