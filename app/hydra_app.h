// app/hydra_app.h — the training command: `mingpt [Hydra flags] [overrides]`.
#ifndef MINGPT_HYDRA_APP_H
#define MINGPT_HYDRA_APP_H

// Runs `mingpt` with argv as given (argv[0] the program): Hydra's flags (--cfg, --help,
// --info, -sc, -cn/-cp/-cd, -m, --version) and overrides; composes the config, creates the run
// directory (or one per sweep job) and trains, under mpirun/srun on every rank. Returns the
// process exit code (trainer/trainer.h: EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, EXIT_INTERRUPTED,
// EXIT_ABORTED); argv may be rearranged by MPI_Init.
int hydra_app_main(int argc, char **argv);

#endif
