// tests/cuda/cuda_probe.c — links the real (nvcc-built) CUDA backend like ./mingpt does and
// asks backend_create for it. Prints the backend's name, or the error and exits 3. Used by
// test_cuda_negative.sh: on a machine without an NVIDIA driver the error must name it.
#include <stdio.h>

#include "kernels/backend.h"

int main(int argc, char **argv) {
    char err[1024] = "";
    if (!backend_cuda_create) { fprintf(stderr, "cuda_probe: built without the CUDA backend\n"); return 2; }
    Backend *be = backend_create(argc > 1 ? argv[1] : "cuda", 0, DTYPE_FP32, err, sizeof err);
    if (!be) { fprintf(stderr, "cuda_probe: %s\n", err); return 3; }
    printf("cuda_probe: backend %s\n", be->name);
    be->destroy(be);
    return 0;
}
