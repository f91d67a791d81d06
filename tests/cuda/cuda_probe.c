// tests/cuda/cuda_probe.c — links the real (nvcc-built) CUDA backend like ./mingpt does and
// asks backend_select for it. Prints the backend's name, or "device=<name>: <why>" and exits 3. Used by
// test_cuda_negative.sh: on a machine without an NVIDIA driver the error must name it.
#include <stdio.h>

#include "kernels/backend.h"

int main(int argc, char **argv) {
    char err[1024] = "";
    if (!backend_cuda_create) { fprintf(stderr, "cuda_probe: built without the CUDA backend\n"); return 2; }
    const char *device = argc > 1 ? argv[1] : "cuda";
    Backend *be;
    if (backend_select(device, 0, DTYPE_FP32, &be, err, sizeof err)) {
        fprintf(stderr, "cuda_probe: device=%s: %s\n", device, err);
        return 3;
    }
    printf("cuda_probe: backend %s\n", be->name);
    be->destroy(be);
    return 0;
}
