// kernels/backend_profile.h — a per-op profile of a host-memory Backend (kernels/backend.h): the
// wall time of every op the model and the trainer call through the Backend's table, for the
// benchmark's `bench_train train --profile 1` (bench/bench_train.c; docs/performance.md has how
// to read its table).
//
// backend_profile_install replaces each op pointer of the backend with a shim that reads the
// monotonic clock, calls the original op with the same arguments and adds the elapsed time to
// the op's row: results are those of the unprofiled backend, bit for bit. Nothing costs anything
// unless it is installed; ./mingpt never installs it. The CPU backend's ops are synchronous, so a
// row is the op's real time. Device backends (host_memory 0) are refused: their ops return when
// queued, and the shim would time launches.
//
// Matmuls are split by their role in the GPT block, read from the shape (C in, OC out) and the
// bias: no bias is lm_head; OC = 3C c_attn; OC = C attn_proj; OC = 4C c_fc; C = 4 OC mlp_proj;
// anything else "other". The attention products (QK^T and att·V) run inside attention_forward /
// attention_backward and are timed with them. Each row also carries the time its op spent in the
// library GEMMs (kernels/cpu/gemm.h: cpu_gemm_totals), the rest being its own work.
//
// One profile per process (the shims find the originals in static state); not thread-safe: the
// ops must be called from one thread at a time (the trainer's way; OpenMP inside an op is fine).
// An op called by another op through the table is counted in the caller's row only.
#ifndef MINGPT_BACKEND_PROFILE_H
#define MINGPT_BACKEND_PROFILE_H

#include <stddef.h>
#include <stdio.h>

#include "kernels/backend.h"

// One row of the profile: an op (for matmuls, an op and a role) and what it cost since the last
// reset.
typedef struct {
    const char *op;         // "matmul_forward[c_attn]", "layernorm_backward", ...
    const char *category;   // the op's class, shared with bench/torch_profile.py's table:
                            // "matmul.fwd.c_attn", "attention.bwd", "optimizer", ...
    long calls;
    double seconds;         // wall time inside the op
    double gemm_seconds;    // of which inside the library GEMMs (cpu_gemm_totals)
} ProfileRow;

// Wraps every op of be (a host-memory backend) in a timing shim and starts counting from zero.
// Optional ops that are NULL stay NULL. Returns 0, or non-zero with the reason in err: be is not
// host memory, or a profile is already installed (on this or another backend).
int backend_profile_install(Backend *be, char *err, size_t errlen);
// Puts the original ops back into the backend backend_profile_install wrapped (no-op when none).
void backend_profile_uninstall(void);
// Zeroes every row (e.g. after the warm-up iterations).
void backend_profile_reset(void);
// Copies the rows with at least one call since the last reset into out (at most max), in a fixed
// order (the forward ops, the backward ops, the optimizer's, memory); returns how many.
int backend_profile_rows(ProfileRow *out, int max);
// The profile as a table on f, one line per row, each starting with "PROF ": op, category, calls
// per step, ms per step, share of the step, GEMM ms per step; then the step's time not spent in
// any op ("(rest)": the host's own work between ops) and the whole step ("(step)"). steps: how
// many steps the rows cover; step_seconds: their total wall time.
void backend_profile_print(FILE *f, int steps, double step_seconds);

#endif
