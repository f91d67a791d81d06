// main.c — the mingpt command line.
//
//   mingpt [--cfg job|hydra|all [--resolve] [-p PKG]] [--help] [-cn NAME] [-cp DIR] [-cd DIR]
//          [-m] [key=value | +key=value | ++key=value | ~key ...]
//   mingpt sample --snapshot PATH [--prompt TEXT] [--max_new_tokens N] [--temperature F] [--top_k K] [--seed S]
//                 [--device cpu|cuda|auto]
//   mingpt info SNAPSHOT [--json]
//   mingpt export --snapshot PATH --out MODEL.safetensors [--dtype float32|bfloat16|float16]
//   mingpt plot DIR... [--out F.svg|F.png] [--x iter|tokens|time] [--log]
//   mingpt runs DIR... [--json|--csv]
//
// Hydra 1.3 semantics (config/hydra.h): a run composes its config, validates it, creates its
// output directory (hydra.run.dir) with .hydra/, mingpt.log and summary.json, then trains; -m
// expands sweeps into jobs that run one after another in hydra.sweep.dir/<num>.
#include <signal.h>
#include <stddef.h>

#include "app/hydra_app.h"
#include "app/subcommand.h"
#include "process/log.h"
#include "process/signal_thread.h"

// The command (a subcommand or training); its exit code.
static int run(int argc, char **argv) {
    // A file size limit (ulimit -f) then fails the write with EFBIG, reported like a full
    // disk, instead of killing the process in the middle of a save.
    signal(SIGXFSZ, SIG_IGN);
    // Before any other thread exists: SIGINT, SIGTERM and SIGUSR1 are received by a thread of
    // their own, never by one inside a GEMM kernel (process/signal_thread.h).
    signal_thread_start();
    // a subcommand of app/subcommand.h's list, else the training command
    const Subcommand *sub = argc > 1 ? subcommand_find(argv[1]) : NULL;
    if (sub) return subcommand_main(sub, argc - 1, argv + 1, stdout);
    // a misspelt subcommand ("samples") is named as such, not read as an override without '='
    const int rc = subcommand_check_unknown(argc, argv, stderr);
    if (rc) return rc;
    return hydra_app_main(argc, argv);
}

// Then stdout is flushed and closed: a failed write to it (a full disk) makes a command that
// succeeded exit 1 with "mingpt: error writing standard output: <reason>" (process/log.h).
int main(int argc, char **argv) { return log_close_stdout(run(argc, argv)); }
