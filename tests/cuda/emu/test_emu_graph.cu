// tests/cuda/emu/test_emu_graph.cu — stream capture and CUDA graphs in the emulator (CUDA code,
// but it reads the emulator's counters, emu_counters.h): a captured sequence (kernels, cudaMemsetAsync,
// cudaMemcpyAsync device-to-device, a cuBLAS GEMM) runs nothing while captured, and a replay
// gives bitwise the results of the same calls made directly; replayed twice it reads the inputs
// as they are at each launch; the calls CUDA refuses inside a capture (cudaStreamSynchronize,
// synchronous cudaMemcpy, cudaMalloc) fail with CUDA's error and invalidate the capture, so
// cudaStreamEndCapture returns cudaErrorStreamCaptureInvalidated and no graph; a Relaxed capture
// allows cudaMalloc; capture on the legacy stream is refused.
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <stdio.h>
#include <string.h>
#include "kernels/cuda/emu/launch.cuh"
#include "kernels/cuda/emu/emu_counters.h"

// y = a * x + y, then x = x * x (the next kernel reads both)
__global__ void axpy_kernel(float* y, float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { y[i] = a * x[i] + y[i]; x[i] = x[i] * x[i]; }
}
__global__ void add_kernel(float* z, const float* y, const float* w, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) z[i] = y[i] + w[i];
}

static int fails = 0;
#define EXPECT(cond, ...) do { bool ok_ = (cond); fails += !ok_; printf("%-4s ", ok_ ? "ok" : "FAIL"); printf(__VA_ARGS__); printf("\n"); } while (0)

enum { N = 96, M = 8 };   // vectors of N; the GEMM multiplies (M x M) matrices

// the sequence under test, enqueued on s: 2 kernels, a memset, a device-to-device copy, a GEMM
static void sequence(cudaStream_t s, cublasHandle_t h, float* x, float* y, float* z, float* w, float* c) {
    LAUNCH(axpy_kernel, (N + 31) / 32, 32, 0, s)(y, x, 0.5f, N);
    cudaMemsetAsync(w, 0, 16 * sizeof(float), s);
    cudaMemcpyAsync(w + 16, y, (N - 16) * sizeof(float), cudaMemcpyDeviceToDevice, s);
    LAUNCH(add_kernel, (N + 31) / 32, 32, 0, s)(z, y, w, N);
    const float one = 1.0f, zero = 0.0f;
    cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, M, M, M, &one, z, M, y, M, &zero, c, M);
}

struct Bufs { float *x, *y, *z, *w, *c; };
static Bufs alloc_bufs() {
    Bufs b;
    cudaMalloc(&b.x, N * 4); cudaMalloc(&b.y, N * 4); cudaMalloc(&b.z, N * 4); cudaMalloc(&b.w, N * 4); cudaMalloc(&b.c, M * M * 4);
    return b;
}
static void fill(const Bufs& b, float seed, cudaStream_t s) {
    float hx[N], hy[N];
    for (int i = 0; i < N; i++) { hx[i] = seed + 0.01f * i; hy[i] = seed * 0.5f - 0.02f * i; }
    cudaMemcpyAsync(b.x, hx, sizeof hx, cudaMemcpyHostToDevice, s);
    cudaMemcpyAsync(b.y, hy, sizeof hy, cudaMemcpyHostToDevice, s);
    cudaMemsetAsync(b.w, 0x7f, N * 4, s);   // overwritten by the sequence
    cudaStreamSynchronize(s);
}
// every output of the sequence, to the host
static void results(const Bufs& b, cudaStream_t s, float* out) {
    cudaMemcpyAsync(out, b.x, N * 4, cudaMemcpyDeviceToHost, s);
    cudaMemcpyAsync(out + N, b.y, N * 4, cudaMemcpyDeviceToHost, s);
    cudaMemcpyAsync(out + 2 * N, b.z, N * 4, cudaMemcpyDeviceToHost, s);
    cudaMemcpyAsync(out + 3 * N, b.w, N * 4, cudaMemcpyDeviceToHost, s);
    cudaMemcpyAsync(out + 4 * N, b.c, M * M * 4, cudaMemcpyDeviceToHost, s);
    cudaStreamSynchronize(s);
}
#define NOUT (4 * N + M * M)

// capture the sequence on s; the graph instantiated (nullptr when capture failed)
static cudaGraphExec_t capture(cudaStream_t s, cublasHandle_t h, const Bufs& b) {
    cudaGraph_t g = nullptr;
    cudaGraphExec_t ge = nullptr;
    if (cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) != cudaSuccess) return nullptr;
    sequence(s, h, b.x, b.y, b.z, b.w, b.c);
    if (cudaStreamEndCapture(s, &g) != cudaSuccess || !g) return nullptr;
    if (cudaGraphInstantiate(&ge, g, 0) != cudaSuccess) ge = nullptr;
    cudaGraphDestroy(g);
    return ge;
}

int main() {
    cudaStream_t s;
    cudaStreamCreate(&s);
    cublasHandle_t h;
    cublasCreate(&h);
    cublasSetStream(h, s);
    Bufs d = alloc_bufs(), g = alloc_bufs();
    static float want[NOUT], got[NOUT], before[NOUT];

    // direct launches: the reference, twice (the second run sees the first one's x*x)
    fill(d, 1.0f, s);
    sequence(s, h, d.x, d.y, d.z, d.w, d.c);

    // capture: nothing runs, nothing is counted until a launch
    fill(g, 1.0f, s);
    results(g, s, before);
    const long k0 = emu_launch_count(nullptr), m0 = emu_memset_count();
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    cudaStreamIsCapturing(s, &st);
    EXPECT(st == cudaStreamCaptureStatusActive, "cudaStreamIsCapturing during capture: Active (%d)", (int)st);
    sequence(s, h, g.x, g.y, g.z, g.w, g.c);
    cudaGraph_t graph = nullptr;
    cudaError_t e = cudaStreamEndCapture(s, &graph);
    EXPECT(e == cudaSuccess && graph, "cudaStreamEndCapture: %s", cudaGetErrorName(e));
    cudaStreamIsCapturing(s, &st);
    EXPECT(st == cudaStreamCaptureStatusNone, "cudaStreamIsCapturing after capture: None (%d)", (int)st);
    results(g, s, got);
    EXPECT(!memcmp(got, before, sizeof got), "captured work did not run");
    EXPECT(emu_launch_count(nullptr) == k0 && emu_memset_count() == m0, "captured launches and memsets are not counted yet");
    cudaGraphExec_t ge = nullptr;
    e = cudaGraphInstantiate(&ge, graph, 0);
    EXPECT(e == cudaSuccess && ge, "cudaGraphInstantiate(exec, graph, 0): %s", cudaGetErrorName(e));
    cudaGraphDestroy(graph);   // the executable graph keeps its own copy

    // replay once: bitwise the direct results; the launches and the memset now count
    cudaGraphLaunch(ge, s);
    cudaStreamSynchronize(s);
    results(d, s, want);
    results(g, s, got);
    EXPECT(!memcmp(got, want, sizeof got), "replay == direct launches (bitwise, %d floats)", NOUT);
    EXPECT(emu_launch_count(nullptr) == k0 + 2 && emu_memset_count() == m0 + 1,
           "a replay counts its 2 launches and 1 memset (%ld, %ld)", emu_launch_count(nullptr) - k0, emu_memset_count() - m0);

    // replay twice more with new inputs: each launch reads the buffers as they are then
    fill(d, -2.5f, s); fill(g, -2.5f, s);
    sequence(s, h, d.x, d.y, d.z, d.w, d.c);
    sequence(s, h, d.x, d.y, d.z, d.w, d.c);
    cudaGraphLaunch(ge, s);
    cudaGraphLaunch(ge, s);
    results(d, s, want);
    results(g, s, got);
    EXPECT(!memcmp(got, want, sizeof got), "two replays on new inputs == two direct runs (bitwise)");
    cudaGraphExecDestroy(ge);

    // illegal calls inside a capture: CUDA's error, the capture invalidated, no graph
    struct { const char* what; cudaError_t want; } cases[] = {
        {"cudaStreamSynchronize", cudaErrorStreamCaptureUnsupported},
        {"cudaMemcpy (device to host)", cudaErrorStreamCaptureImplicit},
        {"cudaMalloc", cudaErrorStreamCaptureUnsupported},
    };
    for (int k = 0; k < 3; k++) {
        cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
        LAUNCH(axpy_kernel, (N + 31) / 32, 32, 0, s)(g.y, g.x, 0.5f, N);
        float host[4];
        void* p = nullptr;
        e = k == 0 ? cudaStreamSynchronize(s) : k == 1 ? cudaMemcpy(host, g.y, sizeof host, cudaMemcpyDeviceToHost) : cudaMalloc(&p, 64);
        cudaStreamIsCapturing(s, &st);
        const cudaError_t later = cudaMemsetAsync(g.w, 0, 64, s);
        graph = (cudaGraph_t)1;
        const cudaError_t end = cudaStreamEndCapture(s, &graph);
        EXPECT(e == cases[k].want && st == cudaStreamCaptureStatusInvalidated && later == cudaErrorStreamCaptureInvalidated &&
               end == cudaErrorStreamCaptureInvalidated && graph == nullptr,
               "%s inside a capture: %s, capture invalidated, later work refused (%s), cudaStreamEndCapture: %s",
               cases[k].what, cudaGetErrorName(e), cudaGetErrorName(later), cudaGetErrorName(end));
        (void)cudaGetLastError();
    }
    // the stream works again after an invalidated capture
    fill(d, 3.0f, s); fill(g, 3.0f, s);
    sequence(s, h, d.x, d.y, d.z, d.w, d.c);
    ge = capture(s, h, g);
    EXPECT(ge != nullptr, "capture after an invalidated one succeeds");
    if (ge) { cudaGraphLaunch(ge, s); cudaGraphExecDestroy(ge); }
    results(d, s, want);
    results(g, s, got);
    EXPECT(!memcmp(got, want, sizeof got), "and replays bitwise as direct launches");

    // Relaxed mode allows cudaMalloc; the legacy stream cannot capture
    cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
    void* p = nullptr;
    e = cudaMalloc(&p, 64);
    graph = nullptr;
    const cudaError_t end = cudaStreamEndCapture(s, &graph);
    EXPECT(e == cudaSuccess && p && end == cudaSuccess && graph, "cudaMalloc inside a Relaxed capture: %s", cudaGetErrorName(e));
    if (graph) cudaGraphDestroy(graph);
    cudaFree(p);
    e = cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal);
    EXPECT(e != cudaSuccess, "capture on the legacy default stream refused: %s", cudaGetErrorName(e));
    (void)cudaGetLastError();

    for (const Bufs* b : { &d, &g }) { cudaFree(b->x); cudaFree(b->y); cudaFree(b->z); cudaFree(b->w); cudaFree(b->c); }
    cublasDestroy(h);
    cudaStreamDestroy(s);
    printf("%s: %d failure(s)\n", fails ? "FAILED" : "PASSED", fails);
    return fails != 0;
}
