// trainer/version.c — see version.h.
#include "trainer/version.h"

#include "dist/comm.h"
#include "kernels/backend.h"

#ifndef MINGPT_GIT_COMMIT
#define MINGPT_GIT_COMMIT "unknown"
#endif

const char *version_commit(void) { return MINGPT_GIT_COMMIT; }

void version_print(FILE *out) {
    char buf[4096];
    fprintf(out, "%s (commit %s)\n", MINGPT_VERSION, version_commit());
    backend_cpu_describe(buf, sizeof buf);
    fputs(buf, out);
    backend_cuda_describe_build(buf, sizeof buf);
    fputs(buf, out);
    comm_mpi_describe_build(buf, sizeof buf);
    fputs(buf, out);
}
