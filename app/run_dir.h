// app/run_dir.h — a run's output directory (Hydra's hydra.run.dir / sweep job dir):
// creating it, the .hydra/ files that record how the run was configured, and summary.json.
#ifndef MINGPT_RUN_DIR_H
#define MINGPT_RUN_DIR_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "config/cfg_tree.h"
#include "report/run_read.h"   // RUN_SUMMARY_RUNNING
#include "trainer/trainer.h"

// rel made absolute against dir ("." segments dropped; an absolute rel is kept), into out.
// Returns 0, or -1 when it does not fit.
int run_dir_join(const char *dir, const char *rel, char *out, size_t outlen);

// Creates directory `dir` (absolute) and its parents; an existing one is reused. With
// `unique`, an existing dir is not reused: dir_1, dir_2, ... are tried instead (each created
// atomically, so two runs started in the same second never share one). The directory used
// goes into out; *created (may be NULL) says whether this call made it. Returns 0, or -1 with
// the reason in err.
int run_dir_create(const char *dir, bool unique, char *out, size_t outlen, bool *created, char *err, size_t errlen);

// The lock file of a run directory: one run per directory at a time.
#define RUN_DIR_LOCK_FILE ".mingpt.lock"

// Takes an exclusive flock(2) on lock_path (created when missing), without waiting, and writes
// "PID HOST" into it. The lock lives as long as the process (or run_dir_unlock): a killed run
// leaves no stale lock. Returns the descriptor (>= 0); -1 with the reason in err when another
// process holds it (err: "... is in use by process PID on HOST", what names the directory or
// file, e.g. "run directory '/x'"); -2 with the reason in err when the file cannot be opened
// (errno kept). *created (may be NULL) says whether this call created the file.
int run_dir_lock(const char *lock_path, const char *what, bool *created, char *err, size_t errlen);

// Releases a lock of run_dir_lock (fd < 0: nothing).
void run_dir_unlock(int fd);

// What a run changed in a directory before training, so that a run that fails before its
// first iteration can put the directory back as it found it.
typedef struct RunDirUndoStep RunDirUndoStep;
typedef struct {
    RunDirUndoStep *steps;
    size_t n, cap;
} RunDirUndo;

// Records path before it is replaced whole (its text, or that it did not exist).
void run_dir_undo_file(RunDirUndo *u, const char *path);
// Records path before it is appended to (its size, or that it did not exist).
void run_dir_undo_append(RunDirUndo *u, const char *path);
// Records a directory this run made (removed on undo when empty).
void run_dir_undo_mkdir(RunDirUndo *u, const char *path);
// Records a rename from -> to this run made (renamed back on undo).
void run_dir_undo_rename(RunDirUndo *u, const char *from, const char *to);
// Undoes the recorded steps, the last first (best effort: a step that fails is skipped).
void run_dir_undo_apply(RunDirUndo *u);
// Forgets the steps (no change on disk).
void run_dir_undo_free(RunDirUndo *u);

// An earlier run's results in dir, which a fresh start (no snapshot to resume) does not
// append to: metrics.jsonl, summary.json, loss.svg and loss.png are renamed to
// NAME.prev-YYYYmmdd-HHMMSS (local time `now`; NAME.prev-YYYYmmdd-HHMMSS-N, the first N
// free for all of them, when taken), each rename recorded in u (may be NULL). `moved` gets one
// line for the user naming the files and their new suffix ("" when none were there). Returns
// 0, or -1 with the reason in err (the renames done so far stay recorded in u).
int run_dir_rotate(const char *dir, time_t now, RunDirUndo *u, char *moved, size_t movedlen, char *err, size_t errlen);

// Writes text to path through a temporary file and a rename (removing the temporary files of
// earlier writers that no longer run). Returns 0 or -1 (err).
int run_dir_write_file(const char *path, const char *text, char *err, size_t errlen);

// Hydra's record of a job in <dir>/<subdir>/: config.yaml (the task config: tree without its
// `hydra` node, interpolations not resolved), hydra.yaml (`hydra:` and that node) and
// overrides.yaml (the task overrides, a YAML list). Returns 0 or -1 (err).
int run_dir_write_hydra(const char *dir, const char *subdir, const CfgNode *tree, char *const *task, int n_task,
                        char *err, size_t errlen);

// One job of a sweep's plan: its hydra.job.num, its directory relative to the sweep's
// (hydra.sweep.subdir, resolved) and its task overrides.
typedef struct {
    long num;
    const char *subdir;
    char *const *task;
    int n_task;
} RunDirPlannedJob;

// Writes <sweep_dir>/SWEEP_PLAN_FILE (report/run_read.h): every job of the sweep, in launch
// order, as a YAML list of maps num, subdir, overrides. A sweep writes it before its first job
// starts, so that `mingpt runs` lists the jobs that never ran (a sweep stopped by Ctrl-C).
// Returns 0 or -1 (err).
int run_dir_write_plan(const char *sweep_dir, const RunDirPlannedJob *jobs, size_t n, char *err, size_t errlen);

// What a run leaves for scripts in <dir>/summary.json. A job writes it twice: when its
// directory is made (exit_status null: running, or killed) and when it ends, each time
// replacing the file whole (temporary file + rename), so that an earlier run's summary is
// never read as this run's.
typedef struct {
    int exit_status;            // the process exit status of the run (0, 1, 2 or 75), or RUN_SUMMARY_RUNNING
    const TrainResult *result;  // NULL when training never started
    const char *snapshot_path;  // absolute snapshot file (may not exist when the run failed early)
    const char *output_dir;     // the run directory itself
    const char *cwd;            // the working directory the job ran in (output_dir with hydra.job.chdir)
} RunSummary;

// Writes <dir>/summary.json: exit_status, final_train_loss, test_loss, iters, iters_this_run,
// tokens_per_s, wall_s (numbers; null when unknown), snapshot_path, output_dir, cwd. Returns
// 0, or -1 with the reason in err (no file, no temporary file left).
int run_dir_write_summary(const char *dir, const RunSummary *s, char *err, size_t errlen);

#endif
