// app/run_dir.h — a run's output directory (Hydra's hydra.run.dir / sweep job dir):
// creating it, the .hydra/ files that record how the run was configured, and summary.json.
#ifndef MINGPT_RUN_DIR_H
#define MINGPT_RUN_DIR_H

#include <stdbool.h>
#include <stddef.h>

#include "config/cfg_tree.h"
#include "report/run_read.h"   // RUN_SUMMARY_RUNNING
#include "trainer/trainer.h"

// rel made absolute against dir ("." segments dropped; an absolute rel is kept), into out.
// Returns 0, or -1 when it does not fit.
int run_dir_join(const char *dir, const char *rel, char *out, size_t outlen);

// Creates directory `dir` (absolute) and its parents; an existing one is reused. With
// `unique`, an existing dir is not reused: dir_1, dir_2, ... are tried instead (each created
// atomically, so two runs started in the same second never share one). The directory used
// goes into out. Returns 0, or -1 with the reason in err.
int run_dir_create(const char *dir, bool unique, char *out, size_t outlen, char *err, size_t errlen);

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
