// kernels/cuda/version.cu — the versions the CUDA backend was built against, for `mingpt
// --version`: the CUDA toolkit (CUDART_VERSION), cuBLAS (CUBLAS_VER_*) and NCCL (NCCL_*), all
// compile-time constants of the headers, so that printing them needs no GPU and no driver.
#include <stdio.h>

#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <nccl.h>

// buf (len bytes) = "toolkit 13.0, cuBLAS 13.0.0, NCCL 2.27.7, nvcc build" (the last part says
// how this library was compiled: by nvcc for the GPU, or by the CUDA emulation layer for the CPU).
extern "C" __attribute__((visibility("default"))) void backend_cuda_version(char *buf, size_t len) {
#if defined(__CUDACC__)
    const char *how = "nvcc build for sm_80/sm_90";
#else
    const char *how = "CUDA emulation layer build (runs on the CPU)";
#endif
    snprintf(buf, len, "toolkit %d.%d, cuBLAS %d.%d.%d, NCCL %d.%d.%d, %s", CUDART_VERSION / 1000,
             CUDART_VERSION % 1000 / 10, CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR, CUBLAS_VER_PATCH, NCCL_MAJOR, NCCL_MINOR,
             NCCL_PATCH, how);
}
