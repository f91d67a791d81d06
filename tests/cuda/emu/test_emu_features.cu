// tests/cuda/emu/test_emu_features.cu — semantics of the emulated CUDA dialect (valid CUDA:
// also compiled by nvcc): templates, dynamic shared memory, 2-D blocks, warp collectives
// with widths, atomics, __constant__ memory, by-value parameters.
#include <cuda_runtime.h>
#include <stdio.h>
#include <math.h>
#include <sys/mman.h>
#include <unistd.h>
#include "kernels/cuda/emu/launch.cuh"
#include "kernels/cuda/emu/emu_counters.h"

__constant__ float c_scale[4];
__device__ int d_counter;

template <typename T, int N>
__global__ void tmpl_kernel(T* out) { out[threadIdx.x] = (T)(N * threadIdx.x); }

__global__ void dyn_macro(float* out) {              // DYNAMIC_SHARED alternative to extern __shared__
    DYNAMIC_SHARED(float, buf);
    buf[threadIdx.x] = threadIdx.x * c_scale[1];
    __syncthreads();
    out[threadIdx.x] = buf[blockDim.x - 1 - threadIdx.x];
}
__global__ void block2d(int* out) {                   // 2-D block, linear thread id, warps over x first
    int tid = threadIdx.y * blockDim.x + threadIdx.x;
    unsigned b = __ballot_sync(0xffffffffu, threadIdx.y == 1);
    int cnt = __syncthreads_count(threadIdx.x == 0);
    if (tid < 64) out[tid] = (tid % 32 == 0) ? (int)b : cnt;
}
__global__ void shuffles(int* out) {
    int l = threadIdx.x;
    out[l]       = __shfl_up_sync(0xffffffffu, l, 3, 8);      // within groups of 8
    out[32 + l]  = __shfl_down_sync(0xffffffffu, l, 2, 16);
    out[64 + l]  = __shfl_sync(0xffffffffu, l, 5, 8);
    out[96 + l]  = __shfl_xor_sync(0xffffffffu, l, 20, 32);
    out[128 + l] = __reduce_add_sync(0xffffffffu, (unsigned)l);
}
__global__ void atomics(float* sum, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { atomicAdd(sum, 1.0f); atomicAdd(&d_counter, 1); }
}
__global__ void param_copy(int* out, int n) {         // each thread owns a copy of its parameters
    while (n > (int)threadIdx.x) n--;
    out[threadIdx.x] = n;
}

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
// An addressed local array: ASan gives the frame redzones on the fiber's stack.
__global__ void addressed_locals(int* out) {
    volatile int buf[64];
    for (int i = 0; i < 64; i++) buf[i] = i * (int)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = buf[threadIdx.x & 63];
}
#endif

static int fails = 0;
#define EXPECT(cond, ...) do { bool ok_ = (cond); fails += !ok_; printf("%-4s ", ok_ ? "ok" : "FAIL"); printf(__VA_ARGS__); printf("\n"); } while (0)

int main() {
    int* di; float* df; float* din;
    cudaMalloc(&di, 256 * sizeof(int)); cudaMalloc(&df, 1024 * sizeof(float)); cudaMalloc(&din, 1024 * sizeof(float));
    int hi[256]; float hf[1024];

    LAUNCH((tmpl_kernel<float, 3>), 1, 32)(df);
    cudaMemcpy(hf, df, 32 * 4, cudaMemcpyDeviceToHost);
    EXPECT(hf[31] == 93.f, "template kernel via LAUNCH((k<float,3>), ...): out[31] = %g", hf[31]);

    float sc[4] = {1, 2, 3, 4};
    cudaMemcpyToSymbol(c_scale, sc, sizeof sc);
    LAUNCH(dyn_macro, 1, 64, 64 * sizeof(float))(df);
    cudaMemcpy(hf, df, 64 * 4, cudaMemcpyDeviceToHost);
    EXPECT(hf[0] == 126.f && hf[63] == 0.f, "__constant__ + cudaMemcpyToSymbol + DYNAMIC_SHARED: out[0] = %g", hf[0]);

    LAUNCH(block2d, 1, dim3(16, 4))(di);
    cudaMemcpy(hi, di, 64 * 4, cudaMemcpyDeviceToHost);
    EXPECT((unsigned)hi[0] == 0xffff0000u && hi[1] == 4 && (unsigned)hi[32] == 0u,
           "2-D block (16x4): ballot warp0 = 0x%08x, __syncthreads_count = %d", (unsigned)hi[0], hi[1]);

    LAUNCH(shuffles, 1, 32)(di);
    cudaMemcpy(hi, di, 160 * 4, cudaMemcpyDeviceToHost);
    bool ok = true;
    for (int l = 0; l < 32; l++) {
        ok &= hi[l] == ((l % 8) < 3 ? l : l - 3);
        ok &= hi[32 + l] == ((l % 16) + 2 < 16 ? l + 2 : l);
        ok &= hi[64 + l] == (l & ~7) + 5;
        ok &= hi[96 + l] == (((l ^ 20) <= ((l & 0) | 31)) ? (l ^ 20) : l);
        ok &= hi[128 + l] == 496;
    }
    EXPECT(ok, "__shfl_up/down/idx/xor_sync with width, __reduce_add_sync");

    int zero = 0; cudaMemcpyToSymbol(d_counter, &zero, sizeof zero);
    cudaMemset(df, 0, 4);
    LAUNCH(atomics, 100, 128)(df, 12345);
    float s = 0; int cnt = 0; cudaMemcpy(&s, df, 4, cudaMemcpyDeviceToHost); cudaMemcpyFromSymbol(&cnt, d_counter, sizeof cnt);
    EXPECT(s == 12345.f && cnt == 12345, "atomicAdd float/int from 100 blocks: %g / %d", s, cnt);

    LAUNCH(param_copy, 1, 32)(di, 20);
    cudaMemcpy(hi, di, 32 * 4, cudaMemcpyDeviceToHost);
    EXPECT(hi[5] == 5 && hi[25] == 20, "by-value kernel parameters are per thread: %d %d", hi[5], hi[25]);

    {   // host waits, counted as a GPU makes the host wait (emu_host_wait_count)
        cudaStream_t st; cudaStreamCreate(&st);
        cudaEvent_t e1, e2; cudaEventCreate(&e1); cudaEventCreate(&e2);
        const long w0 = emu_host_wait_count();
        LAUNCH(param_copy, 1, 32, 0, st)(di, 20);
        cudaEventRecord(e1, st);
        cudaStreamSynchronize(st);                       // waits for the kernel: 1
        const long w1 = emu_host_wait_count();
        cudaStreamSynchronize(st);                       // nothing new: 0
        cudaEventSynchronize(e1);                        // recorded before the last wait: 0
        const long w2 = emu_host_wait_count();
        LAUNCH(param_copy, 1, 32, 0, st)(di, 20);
        cudaEventRecord(e2, st);
        cudaEventSynchronize(e2);                        // the kernel before it: 1
        const long w3 = emu_host_wait_count();
        cudaMemcpy(hi, di, 4, cudaMemcpyDeviceToHost);   // a synchronous copy: 1
        const long w4 = emu_host_wait_count();
        EXPECT(w1 - w0 == 1 && w2 == w1 && w3 - w2 == 1 && w4 - w3 == 1,
               "host waits: stream sync after work %ld, again and on an older event %ld, on a newer event %ld, "
               "cudaMemcpy %ld (expected 1 0 1 1)", w1 - w0, w2 - w1, w3 - w2, w4 - w3);
        cudaEventDestroy(e1); cudaEventDestroy(e2); cudaStreamDestroy(st);
    }

#if defined(__SANITIZE_ADDRESS__)
    // The fiber stacks are unmapped when a wider block needs more of them: ASan's shadow of the
    // old range must be clean then (frames of exited fibers stay poisoned, and whatever is mapped
    // there next, e.g. an MPI shared-memory segment, would read as a stack redzone).
    {
        LAUNCH(addressed_locals, 1, 128)(di);   // the 128 stacks of the atomics launch, reused
        cudaDeviceSynchronize();
        emu::Runner& R = emu::runner();
        char* old = R.stacks; size_t bytes = R.nstack * R.stride;
        bool poisoned_before = old && __asan_region_is_poisoned(old, bytes) != nullptr;
        // one page mapped on each side of the old stacks (where free), so the wider mapping
        // cannot reuse their addresses and the old range's shadow can be read alone
        const size_t page = (size_t)sysconf(_SC_PAGESIZE);
        void* fence_lo = mmap(old - page, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        void* fence_hi = mmap(old + bytes, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        LAUNCH(addressed_locals, 1, 256)(di);   // 256 threads: the stacks are mapped again
        cudaDeviceSynchronize();
        const bool moved = R.stacks + R.nstack * R.stride <= old || R.stacks >= old + bytes;
        void* left = old && moved ? __asan_region_is_poisoned(old, bytes) : nullptr;
        EXPECT(poisoned_before && moved && !left,
               "ASan: fiber stacks unmapped with clean shadow (poisoned while live: %d, mapped elsewhere: %d, "
               "poisoned after: %p)", (int)poisoned_before, (int)moved, left);
        if (fence_lo != MAP_FAILED) munmap(fence_lo, page);
        if (fence_hi != MAP_FAILED) munmap(fence_hi, page);
    }
#endif

    cudaFree(di); cudaFree(df); cudaFree(din);
    printf(fails ? "SOME TESTS FAILED\n" : "ALL PASSED\n");
    return fails != 0;
}
