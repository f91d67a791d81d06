// trainer/version.h — the version of mingpt, recorded in every snapshot it writes (record WRTR)
// and in exported models' metadata. Raised with each release of the snapshot or command set.
// And what `mingpt --version` prints (trainer/version.c).
#ifndef MINGPT_VERSION_H
#define MINGPT_VERSION_H

#include <stdio.h>

#define MINGPT_VERSION "mingpt 0.11.0"

// The git commit this mingpt was built from: `git describe --always --dirty` when it was built
// (the Makefile passes it to trainer/version.c only, so a new commit recompiles one file), or
// "unknown" when built outside git.
const char *version_commit(void);

// `mingpt --version` after Hydra's line ("Hydra 1.3.2 (mingpt)", config/hydra.c): mingpt's
// version and commit, then the backends built: the CPU with its GEMM libraries and OpenMP threads
// (backend_cpu_describe), CUDA with the toolkit, cuBLAS and NCCL versions its library was compiled
// with, MPI with the Open MPI version (each "not built" or "library not found: PATH" when so).
// Loads those libraries (dlopen) but starts neither a GPU nor MPI.
void version_print(FILE *out);

#endif
