// tests/cuda/emu/emu_bugs.cu — intentionally broken CUDA code: each case must be diagnosed by
// the emulator (see run_emu_bugs.sh).
// The file is valid CUDA: nvcc compiles it; on a GPU most of these hang, corrupt data or fault.
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mma.h>
#include "kernels/cuda/emu/launch.cuh"

__global__ void divergent_sync(float* x) {
    if (threadIdx.x < 16) { x[threadIdx.x] = 1; __syncthreads(); }   // only half the block reaches it
    else { x[threadIdx.x] = 2; __syncthreads(); }                    // ... and the other half a different one
}
__global__ void sync_in_branch(float* x) {
    if (threadIdx.x < 16) __syncthreads();                            // the other threads never arrive
    x[threadIdx.x] = 1;
}
__global__ void exit_before_sync(float* x, int n) {
    int i = threadIdx.x;
    if (i >= n) return;                                               // early exit, then a block barrier
    x[i] = 1; __syncthreads(); x[i] += x[(i + 1) % n];
}
__global__ void shfl_after_exit(float* x, int n) {
    int i = threadIdx.x;
    if (i >= n) return;                                               // lanes n..31 gone
    float v = x[i];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    x[i] = v;
}
__global__ void shfl_partial_warp(float* x) {                        // launched with 48 threads
    float v = __shfl_down_sync(0xffffffffu, x[threadIdx.x], 1);
    x[threadIdx.x] = v;
}
__global__ void mismatched_collectives(float* x) {
    float v = x[threadIdx.x];
    if (threadIdx.x & 1) v = __shfl_xor_sync(0xffffffffu, v, 1);
    else v = __shfl_down_sync(0xffffffffu, v, 1);
    x[threadIdx.x] = v;
}
// block sum with a missing barrier between the last write and the read of shared[0]
__global__ void racy_sum(float* out, const float* in, int n) {
    __shared__ float s[256];
    float v = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) v += in[i];
    s[threadIdx.x] = v;
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
        // BUG: missing __syncthreads() here
    }
    if (threadIdx.x == 0) out[0] = s[0];
}
__global__ void read_uninit_smem(float* out) {
    DYNAMIC_SHARED(float, buf);
    out[threadIdx.x] = buf[threadIdx.x];                              // never written
}
__global__ void write_oob(float* x, int n) { x[threadIdx.x + n] = 1; } // n = allocation size
__global__ void big_smem(float* out) { DYNAMIC_SHARED(float, buf); buf[threadIdx.x] = 1; __syncthreads(); out[threadIdx.x] = buf[0]; }

// nvcuda::wmma calls are warp-collective: half the warp loads from another call site
__global__ void wmma_divergent(float* x) {
    nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> f;
    if (threadIdx.x < 16) nvcuda::wmma::load_matrix_sync(f, x, 16, nvcuda::wmma::mem_row_major);
    else nvcuda::wmma::load_matrix_sync(f, x, 16, nvcuda::wmma::mem_col_major);
    nvcuda::wmma::store_matrix_sync(x, f, 16, nvcuda::wmma::mem_row_major);
}
// ... and take one pointer: each lane passes its own row
__global__ void wmma_nonuniform(float* x) {
    nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> f;
    nvcuda::wmma::load_matrix_sync(f, x + (threadIdx.x & 1) * 8, 16, nvcuda::wmma::mem_row_major);
    nvcuda::wmma::store_matrix_sync(x, f, 16, nvcuda::wmma::mem_row_major);
}

int main(int argc, char** argv) {
    const char* c = argc > 1 ? argv[1] : "";
    float* d; cudaMalloc(&d, 64 * sizeof(float)); cudaMemset(d, 0, 64 * sizeof(float));
    float h[64] = {0};
    if (!strcmp(c, "divergent_sync")) LAUNCH(divergent_sync, 1, 32)(d);
    else if (!strcmp(c, "sync_in_branch")) LAUNCH(sync_in_branch, 1, 32)(d);
    else if (!strcmp(c, "exit_before_sync")) LAUNCH(exit_before_sync, 1, 64)(d, 40);
    else if (!strcmp(c, "shfl_after_exit")) LAUNCH(shfl_after_exit, 1, 32)(d, 20);
    else if (!strcmp(c, "shfl_partial_warp")) LAUNCH(shfl_partial_warp, 1, 48)(d);
    else if (!strcmp(c, "mismatched_collectives")) LAUNCH(mismatched_collectives, 1, 32)(d);
    else if (!strcmp(c, "wmma_divergent")) { float* m; cudaMalloc(&m, 256 * sizeof(float)); LAUNCH(wmma_divergent, 1, 32)(m); }
    else if (!strcmp(c, "wmma_nonuniform")) { float* m; cudaMalloc(&m, 512 * sizeof(float)); LAUNCH(wmma_nonuniform, 1, 32)(m); }
    else if (!strcmp(c, "racy_sum")) {
        float* in; cudaMalloc(&in, 256 * sizeof(float));
        float hin[256]; for (int i = 0; i < 256; i++) hin[i] = 1.0f;
        cudaMemcpy(in, hin, sizeof hin, cudaMemcpyHostToDevice);
        LAUNCH(racy_sum, 1, 256)(d, in, 256);
        cudaMemcpy(h, d, 4, cudaMemcpyDeviceToHost);
        printf("racy_sum: got %g, expected 256 -> %s\n", h[0], h[0] == 256.f ? "race not visible" : "RACE DETECTED (wrong result)");
        return h[0] == 256.f;
    } else if (!strcmp(c, "uninit_smem")) {
        LAUNCH(read_uninit_smem, 1, 32, 32 * sizeof(float))(d);
        cudaMemcpy(h, d, 32 * 4, cudaMemcpyDeviceToHost);
        printf("uninit_smem: out[0] = %g (%s)\n", h[0], isnan(h[0]) ? "poisoned: uninitialised shared memory read" : "?");
        return !isnan(h[0]);
    } else if (!strcmp(c, "host_ptr")) { LAUNCH(divergent_sync, 1, 32)(h); }
    else if (!strcmp(c, "oob_write")) {
        float* e; cudaMalloc(&e, 32 * sizeof(float));
        LAUNCH(write_oob, 1, 32)(e, 32);
        cudaDeviceSynchronize();
        printf("oob_write: not detected (build with -fsanitize=address)\n");
        return 1;
    } else if (!strcmp(c, "bad_launch")) {
        LAUNCH(divergent_sync, 1, 2048)(d);
        cudaError_t e = cudaGetLastError();
        printf("bad_launch: cudaGetLastError() = %s\n", cudaGetErrorName(e));
        return e != cudaErrorInvalidConfiguration;
    } else if (!strcmp(c, "big_smem")) {
        LAUNCH(big_smem, 1, 32, 64 * 1024)(d);
        cudaError_t e1 = cudaGetLastError();
        cudaFuncSetAttribute(big_smem, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024);
        LAUNCH(big_smem, 1, 32, 64 * 1024)(d);
        cudaError_t e2 = cudaGetLastError();
        printf("big_smem: without attribute -> %s, with attribute -> %s\n", cudaGetErrorName(e1), cudaGetErrorName(e2));
        return !(e1 != cudaSuccess && e2 == cudaSuccess);
    } else if (!strcmp(c, "memcpy_oob")) {
        cudaError_t e = cudaMemcpy(h, d, 65 * sizeof(float), cudaMemcpyDeviceToHost);
        printf("memcpy_oob: %s\n", cudaGetErrorName(e));
        return e == cudaSuccess;
    } else if (!strcmp(c, "memcpy_kind")) {
        cudaError_t e = cudaMemcpy(d, h, 64 * sizeof(float), cudaMemcpyDeviceToHost);   // dst is the device buffer
        printf("memcpy_kind: %s\n", cudaGetErrorName(e));
        return e == cudaSuccess;
    } else if (!strcmp(c, "missing_stream_sync")) {
        float* pinned; cudaMallocHost(&pinned, 64 * sizeof(float));
        pinned[0] = -1.f;
        cudaStream_t st; cudaStreamCreate(&st);
        LAUNCH(exit_before_sync, 1, 32, 0, st)(d, 32);                   // d[i] = 2
        cudaMemcpyAsync(pinned, d, 64 * sizeof(float), cudaMemcpyDeviceToHost, st);
        float v = pinned[0];                                             // BUG: no cudaStreamSynchronize(st)
        cudaStreamSynchronize(st);
        printf("missing_stream_sync: host read %g before sync, %g after -> %s\n", v, pinned[0], v == pinned[0] ? "not visible" : "STALE READ DETECTED");
        return v == pinned[0];
    } else { fprintf(stderr, "unknown case\n"); return 2; }
    cudaError_t e = cudaDeviceSynchronize();
    printf("%s: completed, %s\n", c, cudaGetErrorName(e));
    return 0;
}
