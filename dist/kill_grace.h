// dist/kill_grace.h — whether a stop (Ctrl-C, SIGTERM to mpirun) has time to save.
//
// When mpirun (Open MPI 4.1's ORTE) ends a job it sends SIGTERM to every rank and SIGKILL
// odls_base_sigkill_timeout seconds later (1 by default). A rank that gets SIGTERM finishes its
// iteration, then rank 0 saves a snapshot: when that takes longer than the grace, the job dies
// without saving and loses the iterations since the last snapshot. The trainer estimates one
// iteration plus one save after its first iterations and rank 0 warns once when it does not fit.
#ifndef MINGPT_KILL_GRACE_H
#define MINGPT_KILL_GRACE_H

#include <stdbool.h>
#include <stddef.h>

// Assumed write speed of a snapshot before one has been timed (bytes per second).
#define KILL_GRACE_WRITE_BPS 100e6

// mpirun's grace as this process sees it: OMPI_MCA_odls_base_sigkill_timeout from the
// environment (`mpirun --mca odls_base_sigkill_timeout N` passes it to the ranks), 1 (Open MPI
// 4.1's default) when unset. -1 when the process was not started by mpirun (no
// OMPI_MCA_orte_hnp_uri: a plain process, or srun, whose grace is Slurm's KillWait) or the
// value is not a number.
double kill_grace_mpirun(void);

// When iter_s + save_s > grace_s: a one-line warning (no newline) that names the grace, the
// estimate (save_measured: save_s was timed; else estimated from snapshot_bytes at
// KILL_GRACE_WRITE_BPS), what Ctrl-C would lose (save_every_iters, 0: saves at epoch ends
// only) and the value to run mpirun with, into buf; returns true. False (buf untouched) when
// it fits.
bool kill_grace_warning(double grace_s, double iter_s, double save_s, bool save_measured, double snapshot_bytes,
                        long save_every_iters, char *buf, size_t len);

#endif
