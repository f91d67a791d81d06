// kernels/backend.c — backend selection by device name (kernels/backend.h): the CPU backend, or
// the CUDA one, loaded with dlopen only when it is asked for, so that commands that never train
// (--cfg job, --help, sample) do not pay for loading cuBLAS. Its messages name the device and
// the problem, never the setting the name came from: the caller adds that.
#include "kernels/backend.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/lib_path.h"

#ifndef MINGPT_CUDA_LIB
#define MINGPT_CUDA_LIB NULL   // this build has no such library (the makefile passes its path)
#endif

static const LibSpec CUDA_LIB = {"MINGPT_CUDA_LIB", MINGPT_CUDA_LIB, RTLD_NOW | RTLD_LOCAL, "CUDA backend",
                                "this mingpt was built without the CUDA backend (build with nvcc on PATH and CUDA=1)",
                                "this mingpt was built without it: build with nvcc on PATH and CUDA=1"};

typedef Backend *(*CudaCreateFn)(ComputeDtype, int, char *, size_t);

// The CUDA backend's shared library, opened: the one the environment variable MINGPT_CUDA_LIB
// names (a path, absolute in practice; tests point it at the emulated build,
// build/emu/libmingpt_cuda.so), else the build's MINGPT_CUDA_LIB next to the executable (or in
// an installed mingpt's lib directory, config/lib_path.h). The path tried goes into path; NULL
// with the reason in why when there is none.
static void *open_cuda_library(char *path, size_t pathlen, char *why, size_t whylen) {
    return lib_open(&CUDA_LIB, path, pathlen, why, whylen);
}

// The CUDA backend's constructor: linked in (the emulated test programs), or loaded from the
// shared library, so that cuBLAS is loaded only when needed. NULL with the reason in why.
static CudaCreateFn find_cuda_backend(char *why, size_t whylen) {
    if (backend_cuda_create) return backend_cuda_create;
    char path[4600];
    void *lib = open_cuda_library(path, sizeof path, why, whylen);
    CudaCreateFn fn = lib ? (CudaCreateFn)dlsym(lib, "backend_cuda_create") : NULL;
    if (lib && !fn) snprintf(why, whylen, "%.600s has no backend_cuda_create", path);
    return fn;
}

void backend_cuda_describe_build(char *buf, size_t len) {
    lib_describe(&CUDA_LIB, "CUDA", "backend_cuda_version", buf, len);
}

BackendError backend_select(const char *device, int local_rank, ComputeDtype matmul_dtype, Backend **out,
                            char *err, size_t errlen) {
    *out = NULL;
    const bool want_cuda = strcmp(device, "cuda") == 0, maybe_cuda = strcmp(device, "auto") == 0;
    // the CUDA backend's switches (kernels/backend.h), checked where it may be chosen
    static const struct { const char *name, *a, *b; } ENV[] = {
        { "MINGPT_CUDA_ATTENTION", "fused", "cublas" },
        { "MINGPT_CUDA_EPILOGUES", "cublaslt", "off" },
    };
    for (size_t i = 0; (want_cuda || maybe_cuda) && i < sizeof ENV / sizeof ENV[0]; i++) {
        const char *v = getenv(ENV[i].name);
        if (v && *v && strcmp(v, ENV[i].a) && strcmp(v, ENV[i].b)) {
            snprintf(err, errlen, "%s must be %s or %s (got '%.200s')", ENV[i].name, ENV[i].a, ENV[i].b, v);
            return BACKEND_BAD_ENV;
        }
    }
    if (want_cuda || maybe_cuda) {
        char why[1024] = "";
        CudaCreateFn create = find_cuda_backend(why, sizeof why);
        Backend *be = create ? create(matmul_dtype, local_rank, why, sizeof why) : NULL;
        if (be) { *out = be; return BACKEND_OK; }
        if (want_cuda) {
            snprintf(err, errlen, "%s", why);
            return BACKEND_NO_CUDA;
        }
    } else if (strcmp(device, "cpu") != 0) {
        snprintf(err, errlen, "must be auto, cpu or cuda (got '%s')", device);
        return BACKEND_BAD_DEVICE;
    }
    *out = backend_cpu_create(matmul_dtype);
    if (*out) return BACKEND_OK;
    snprintf(err, errlen, "out of memory");
    return BACKEND_NO_MEMORY;
}
