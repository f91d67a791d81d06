// app/version.h — what `mingpt --version` prints.
#ifndef MINGPT_APP_VERSION_H
#define MINGPT_APP_VERSION_H

#include <stdio.h>

// `mingpt --version` after Hydra's line ("Hydra 1.3.2 (mingpt)", config/hydra.c): mingpt's
// version and commit (checkpoint/version.h), then the backends built: the CPU with its GEMM
// libraries and OpenMP threads (backend_cpu_describe), CUDA with the toolkit, cuBLAS and NCCL
// versions its library was compiled with, MPI with the Open MPI version (each "not built" or
// "library not found: PATH" when so). Loads those libraries (dlopen) but starts neither a GPU
// nor MPI.
void version_print(FILE *out);

#endif
