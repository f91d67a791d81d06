// app/version.c — see version.h.
#include "app/version.h"

#include "checkpoint/version.h"
#include "dist/comm.h"
#include "kernels/backend.h"
#include "kernels/cpu/gemm.h"

void version_print(FILE *out) {
    char buf[4096];
    fprintf(out, "%s (commit %s)\n", MINGPT_VERSION, version_commit());
    backend_cpu_describe(buf, sizeof buf);
    fputs(buf, out);
    backend_cuda_describe_build(buf, sizeof buf);
    fputs(buf, out);
    comm_mpi_describe_build(buf, sizeof buf);
    fputs(buf, out);
    fprintf(out, "MKL: %s\n", cpu_gemm_mkl_status());   // the optional GEMM libraries: where, or why not
    fprintf(out, "oneDNN 3: %s\n", cpu_gemm_dnnl3_status());
}
