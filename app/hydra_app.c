// app/hydra_app.c — the training command in Hydra 1.3's shape (config/hydra.h): parse the
// flags, compose the config, validate it, create and lock the run's output directory
// (hydra.run.dir; one run per directory), move an earlier run's results aside on a fresh start,
// write .hydra/, mingpt.log and summary.json, then train (a failure before training takes back
// what it wrote); -m expands sweeps into jobs that run one after another in
// hydra.sweep.dir/<num>. --cfg/--help/--info/-sc print and exit.
#include "app/hydra_app.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/cfg_interp.h"
#include "config/cfg_override.h"
#include "config/completion.h"
#include "config/config.h"
#include "config/hydra.h"
#include "dist/comm.h"
#include "kernels/backend.h"
#include "model/gpt_config.h"
#include "report/loss_plot.h"
#include "process/log.h"
#include "app/run_dir.h"
#include "app/subcommand.h"
#include "trainer/trainer.h"
#include "app/version.h"

#define ERRLEN 8192

// What every job of this invocation shares.
typedef struct {
    const HydraArgs *args;
    char config_file[PATH_MAX];  // the primary config
    char cwd[PATH_MAX];          // launch directory: relative paths resolve against it
    CfgNode *hydra_defaults;     // Hydra's defaults for the `hydra` node
    Comm *comm;                  // this process's rank (one process: the single communicator)
} App;

// One job: its composed config and the overrides that made it.
typedef struct {
    CfgNode *tree;
    char *const *task;   // task overrides (written to overrides.yaml)
    int n_task;
    char *const *hydra;  // hydra.* overrides
    int n_hydra;
    long num;            // hydra.job.num in a sweep, -1 for a single run
    bool multirun;
} Job;

// ========================================================================== composing

// `hydra/job_logging=disabled` is a config-group override in Hydra; mingpt keeps the choice in
// hydra.job_logging (and hydra.hydra_logging).
static char *rewrite_group_override(const char *text) {
    const char *k = text + strspn(text, "+~");
    if (strncmp(k, "hydra/", 6) != 0) return cfg_strdup(text);
    char *out = cfg_strdup(text);
    out[(k - text) + 5] = '.';
    return out;
}

// The composed config for these overrides, or NULL after reporting the error.
static CfgNode *compose(const App *app, char *const *ov, int n) {
    char **rewritten = calloc((size_t)n + 1, sizeof *rewritten);
    if (!rewritten) abort();
    for (int i = 0; i < n; i++) rewritten[i] = rewrite_group_override(ov[i]);
    char err[ERRLEN];
    bool from_override;
    CfgNode *tree = config_compose_hydra(app->config_file, app->hydra_defaults, n, rewritten, &from_override, err,
                                         sizeof err);
    hydra_strings_free(rewritten, n);
    if (!tree) {
        if (from_override) hydra_report(stderr, err);  // Hydra's own texts
        else fprintf(stderr, "mingpt: error: %s\n", err);
    }
    return tree;
}

// Splits overrides into task and hydra ones (arrays of pointers into ov).
static void split_overrides(char *const *ov, int n, char **task, int *n_task, char **hydra, int *n_hydra) {
    *n_task = *n_hydra = 0;
    for (int i = 0; i < n; i++) {
        if (hydra_is_hydra_override(ov[i])) hydra[(*n_hydra)++] = ov[i];
        else task[(*n_task)++] = ov[i];
    }
}

// "Error executing job with overrides: [...]" + msg, as Hydra reports a failing job.
static void report_job_error(const Job *job, const char *msg) {
    char list[4096], text[ERRLEN + 4200];
    hydra_list_repr(job->task, job->n_task, list, sizeof list);
    snprintf(text, sizeof text, "Error executing job with overrides: %s\n%s", list, msg);
    hydra_report(stderr, text);
}

// ========================================================================== a job's directory

// Data-parallel jobs: rank 0 alone creates a directory (and writes what goes in it); every rank
// gets rank 0's result and the directory's name, so the job has one run directory.
static int share_from_rank0(const App *app, int rc, char *dir, size_t len) {
    Comm *c = app->comm;
    if (c->world_size == 1) return rc;
    double v = rc;
    if (c->bcast_host(c, &v, sizeof v, 0) || c->bcast_host(c, dir, len, 0)) c->abort(c, EXIT_RUNTIME, c->err);
    return (int)v;
}

// The output directory the job's config names (absolute), and whether it must be new.
static int output_dir_of(const App *app, const Job *job, const char *sweep_dir, char *out, size_t len, bool *unique) {
    char err[ERRLEN];
    bool failed;
    char *rel = hydra_get_string(job->tree, job->multirun ? "hydra.sweep.subdir" : "hydra.run.dir", &failed, err,
                                 sizeof err);
    if (failed || !rel) {
        hydra_report(stderr, failed ? err : "hydra.run.dir is null: no output directory");
        return -1;
    }
    const CfgNode *raw = cfg_select(job->tree, "hydra.run.dir");
    // Only timestamped directories get a fresh suffix; a named one is reused (Hydra's behaviour).
    *unique = !job->multirun && raw && raw->type == CFG_STRING && strstr(raw->s, "${now:");
    int rc = run_dir_join(job->multirun ? sweep_dir : app->cwd, rel, out, len);
    if (rc) fprintf(stderr, "mingpt: error: output directory '%s' is too long\n", rel);
    free(rel);
    return rc;
}

// Sets the runtime values of the job's hydra node (output_dir may be NULL).
static void set_runtime(Job *job, const char *output_dir) {
    HydraRuntime rt = {.multirun = job->multirun, .job_num = job->num, .output_dir = output_dir, .task = job->task,
                       .n_task = job->n_task, .hydra = job->hydra, .n_hydra = job->n_hydra};
    hydra_set_runtime(job->tree, &rt);
}

// Resolves and binds the job's config; reports and returns 2 on error.
static int bind_job(const Job *job, Config *cfg) {
    char err[ERRLEN];
    CfgNode *resolved = config_resolve(job->tree, err, sizeof err);
    if (!resolved) {
        report_job_error(job, err);  // OmegaConf's interpolation / missing-value texts
        return EXIT_USAGE;
    }
    int rc = config_bind(cfg, resolved, err, sizeof err);
    if (!rc) rc = gpt_config_check(cfg, resolved, err, sizeof err);
    cfg_free(resolved);
    if (rc) {
        fprintf(stderr, "mingpt: error: %s\n", err);
        return EXIT_USAGE;
    }
    return 0;
}

// hydra.job.chdir as a bool (null: false); -1 after reporting a bad value.
static int job_chdir(const Job *job) {
    char err[ERRLEN];
    CfgNode *v = cfg_resolve(job->tree, "hydra.job.chdir", true, err, sizeof err);
    if (!v) return 0;  // deleted: the default
    int rc = v->type == CFG_BOOL ? v->b : v->type == CFG_NULL ? 0 : -1;
    cfg_free(v);
    if (rc < 0) fprintf(stderr, "mingpt: error: hydra.job.chdir must be true, false or null\n");
    return rc;
}

// What a job holds in its directory while it runs (rank 0): the locks, and what it changed
// there before training, undone when it fails before its first iteration.
typedef struct {
    int lock_fd, snap_lock_fd;
    char lock_path[PATH_MAX + 32], snap_lock_path[PATH_MAX + 32];
    bool created;                 // this run made the directory
    RunDirUndo undo;
    char moved[PATH_MAX + 256];   // the rotation's line for the user ("" when nothing moved)
} JobDir;

// Creates (or reuses) the job's directory and locks it. Returns 0 or EXIT_RUNTIME after
// reporting; on failure nothing this run made is left.
static int open_job_dir(const char *planned, bool unique, char *dir, size_t len, JobDir *jd) {
    char err[ERRLEN], what[PATH_MAX + 32];
    if (run_dir_create(planned, unique, dir, len, &jd->created, err, sizeof err)) {
        fprintf(stderr, "mingpt: error: %s\n", err);
        return EXIT_RUNTIME;
    }
    snprintf(jd->lock_path, sizeof jd->lock_path, "%s/%s", dir, RUN_DIR_LOCK_FILE);
    snprintf(what, sizeof what, "run directory '%s'", dir);
    jd->lock_fd = run_dir_lock(jd->lock_path, what, NULL, err, sizeof err);
    if (jd->lock_fd >= 0) return 0;
    if (jd->lock_fd == -2) fprintf(stderr, "mingpt: error: cannot write in output directory '%s': %s\n", dir, err);
    else fprintf(stderr, "mingpt: error: %s\n", err);
    if (jd->created) rmdir(dir);
    return EXIT_RUNTIME;
}

// Releases the job's locks (their files go: a lock is the flock, not the file).
static void close_job_dir(JobDir *jd) {
    if (jd->snap_lock_fd >= 0) unlink(jd->snap_lock_path);
    run_dir_unlock(jd->snap_lock_fd);
    if (jd->lock_fd >= 0) unlink(jd->lock_path);
    run_dir_unlock(jd->lock_fd);
    jd->lock_fd = jd->snap_lock_fd = -1;
    run_dir_undo_free(&jd->undo);
}

// A snapshot outside the run directory: its directory is locked too (its .mingpt.lock), so
// that two runs never write one snapshot, whatever their run directories. Where no lock file
// can be made there (a missing or read-only directory, a snapshot path that is a directory),
// the trainer's own checks report the snapshot path. Returns 0 or EXIT_RUNTIME after reporting.
static int lock_snapshot(const char *dir, const char *snapshot, JobDir *jd) {
    char sdir[PATH_MAX], err[ERRLEN], what[PATH_MAX + 64];
    struct stat st;
    snprintf(sdir, sizeof sdir, "%s", snapshot);
    char *slash = strrchr(sdir, '/');
    if (!slash || (stat(snapshot, &st) == 0 && S_ISDIR(st.st_mode))) return 0;
    if (slash == sdir) slash[1] = 0;
    else *slash = 0;
    size_t n = strlen(dir);
    if (!strncmp(sdir, dir, n) && (!sdir[n] || sdir[n] == '/')) return 0;   // in the run directory (locked)
    snprintf(jd->snap_lock_path, sizeof jd->snap_lock_path, "%s/%s", slash == sdir && !sdir[1] ? "" : sdir,
             RUN_DIR_LOCK_FILE);
    snprintf(what, sizeof what, "snapshot directory '%s' (of trainer_config.snapshot_path)", sdir);
    int fd = run_dir_lock(jd->snap_lock_path, what, NULL, err, sizeof err);
    if (fd >= 0) jd->snap_lock_fd = fd;
    if (fd != -1) return 0;
    fprintf(stderr, "mingpt: error: %s\n", err);
    return EXIT_RUNTIME;
}

// Writes .hydra/ (unless hydra.output_subdir is null) and opens <job.name>.log (unless
// hydra.job_logging is disabled), recording in undo what they replace.
static int record_job(const Job *job, const char *dir, RunDirUndo *undo) {
    char err[ERRLEN], path[PATH_MAX + 64];
    bool failed;
    char *subdir = hydra_get_string(job->tree, "hydra.output_subdir", &failed, err, sizeof err);
    if (!failed && subdir) {
        char hdir[PATH_MAX];
        struct stat st;
        if (!run_dir_join(dir, subdir, hdir, sizeof hdir)) {
            if (stat(hdir, &st) != 0) run_dir_undo_mkdir(undo, hdir);
            static const char *const files[] = { "config.yaml", "hydra.yaml", "overrides.yaml" };
            for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
                snprintf(path, sizeof path, "%s/%s", hdir, files[i]);
                run_dir_undo_file(undo, path);
            }
        }
        if (run_dir_write_hydra(dir, subdir, job->tree, job->task, job->n_task, err, sizeof err)) failed = true;
    }
    free(subdir);
    char *logging = failed ? NULL : hydra_get_string(job->tree, "hydra.job_logging", &failed, err, sizeof err);
    char *name = failed ? NULL : hydra_get_string(job->tree, "hydra.job.name", &failed, err, sizeof err);
    if (!failed && !(logging && !strcmp(logging, "disabled"))) {
        snprintf(path, sizeof path, "%s/%s.log", dir, name ? name : HYDRA_JOB_NAME);
        run_dir_undo_append(undo, path);
        failed = log_open(path, err, sizeof err) != 0;
    }
    free(logging);
    free(name);
    if (failed) fprintf(stderr, "mingpt: error: %s\n", err);
    return failed ? -1 : 0;
}

// Relative paths: the data and init_from's weights are read from the launch directory (also
// after a chdir); the snapshot, an output of the run, lives in the run directory, which is the
// launch directory itself for hydra.run.dir=./ (then the path is left as written). *snapshot
// gets it absolute.
static void place_paths(Config *cfg, const App *app, const char *dir, bool chdir_job, char *snapshot, size_t len) {
    char tmp[PATH_MAX];
    char *inputs[] = { cfg->data.path, cfg->trainer.init_from };
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++)
        if (chdir_job && inputs[i][0] && inputs[i][0] != '/' && !run_dir_join(app->cwd, inputs[i], tmp, sizeof tmp) &&
            strlen(tmp) < CFG_STR_MAX)
            snprintf(inputs[i], CFG_STR_MAX, "%s", tmp);
    if ((chdir_job || strcmp(dir, app->cwd) != 0) && !run_dir_join(dir, cfg->trainer.snapshot_path, tmp, sizeof tmp) &&
        strlen(tmp) < sizeof cfg->trainer.snapshot_path)
        snprintf(cfg->trainer.snapshot_path, sizeof cfg->trainer.snapshot_path, "%s", tmp);
    if (run_dir_join(app->cwd, cfg->trainer.snapshot_path, snapshot, len)) snprintf(snapshot, len, "%s", cfg->trainer.snapshot_path);
}

// Rank 0 writes <dir>/summary.json (s->exit_status RUN_SUMMARY_RUNNING at the start of a job);
// a failure to write it turns a success into EXIT_RUNTIME.
static int write_summary(const App *app, const char *dir, const RunSummary *s) {
    char err[ERRLEN];
    if (app->comm->rank != 0 || !run_dir_write_summary(dir, s, err, sizeof err)) return s->exit_status;
    if (s->exit_status == RUN_SUMMARY_RUNNING) log_error("mingpt: error: cannot write in output directory '%s': %s\n", dir, err);
    else log_error("mingpt: error: %s\n", err);
    return s->exit_status == EXIT_OK || s->exit_status == RUN_SUMMARY_RUNNING ? EXIT_RUNTIME : s->exit_status;
}

// Comm.on_abort while a job trains: the job is taken down (a collective timeout, a killed rank,
// an error on some rank), and rank 0 writes summary.json with the exit code before it goes.
typedef struct { const App *app; RunSummary s; } AbortSummary;
static void summary_on_abort(void *ctx, int code) {
    AbortSummary *a = ctx;
    char err[ERRLEN];
    a->s.exit_status = code;
    if (a->app->comm->rank == 0) run_dir_write_summary(a->s.output_dir, &a->s, err, sizeof err);
}

// Rank 0, the directory locked: the snapshot's own lock; a fresh start (no snapshot to resume)
// moves an earlier run's results aside; then summary.json saying "running" (replacing an
// earlier run's at once, so that a job killed from here on never leaves an old result behind),
// .hydra/ and the log. Everything it changes is recorded in jd->undo. Returns 0 or an exit code.
static int prepare_job_dir(const App *app, const Job *job, const char *dir, const char *snapshot, JobDir *jd) {
    char err[ERRLEN], path[PATH_MAX + 32];
    int rc = lock_snapshot(dir, snapshot, jd);
    if (!rc && access(snapshot, F_OK) != 0 &&
        run_dir_rotate(dir, time(NULL), &jd->undo, jd->moved, sizeof jd->moved, err, sizeof err)) {
        fprintf(stderr, "mingpt: error: %s\n", err);
        rc = EXIT_RUNTIME;
    }
    if (rc) return rc;
    snprintf(path, sizeof path, "%s/summary.json", dir);
    run_dir_undo_file(&jd->undo, path);
    RunSummary running = {.exit_status = RUN_SUMMARY_RUNNING, .output_dir = dir, .cwd = app->cwd};
    if (write_summary(app, dir, &running) != RUN_SUMMARY_RUNNING) return EXIT_RUNTIME;
    if (record_job(job, dir, &jd->undo)) return EXIT_RUNTIME;
    if (jd->moved[0]) log_info("note: %s\n", jd->moved);
    return 0;
}

// Trains in dir (chdir'ed there when hydra.job.chdir) and writes summary.json; *started says
// whether training began.
static int train_in(const App *app, Config *cfg, const char *dir, bool chdir_job, const char *snapshot, bool *started) {
    if (chdir_job && chdir(dir) != 0) {
        log_error("mingpt: error: cannot enter the output directory '%s'\n", dir);
        RunSummary s = {.exit_status = EXIT_RUNTIME, .snapshot_path = snapshot, .output_dir = dir, .cwd = app->cwd};
        return write_summary(app, dir, &s);
    }
    TrainResult res = {.final_train_loss = NAN, .test_loss = NAN, .tokens_per_s = NAN, .wall_s = NAN};
    bool plot_warned = false;   // a missing plot library is said once a run
    const TrainerHook hook = {.after_eval = report_loss_svg_hook, .ctx = &plot_warned, .started = started};
    AbortSummary aborted = {app, {.snapshot_path = snapshot, .output_dir = dir, .cwd = chdir_job ? dir : app->cwd}};
    app->comm->on_abort = summary_on_abort;
    app->comm->on_abort_ctx = &aborted;
    int rc = trainer_run_in(cfg, app->comm, dir, &hook, &res);
    app->comm->on_abort = NULL;
    char job_cwd[PATH_MAX];
    if (!getcwd(job_cwd, sizeof job_cwd)) snprintf(job_cwd, sizeof job_cwd, "%s", chdir_job ? dir : app->cwd);
    if (chdir_job && chdir(app->cwd) != 0) log_error("mingpt: error: cannot return to '%s'\n", app->cwd);
    RunSummary s = {.exit_status = rc, .result = &res, .snapshot_path = snapshot, .output_dir = dir, .cwd = job_cwd};
    return write_summary(app, dir, &s);
}

// Runs a composed, validated job: output directory and its lock, .hydra/, log, training,
// summary.json. A job that fails before training takes back what it wrote: a directory it
// made goes, one that was there is left as it was.
static int run_job(const App *app, Job *job, const char *sweep_dir) {
    char planned[PATH_MAX], dir[PATH_MAX], snapshot[PATH_MAX] = "";
    bool unique;
    set_runtime(job, NULL);
    if (output_dir_of(app, job, sweep_dir, planned, sizeof planned, &unique)) return EXIT_USAGE;
    JobDir jd = {.lock_fd = -1, .snap_lock_fd = -1};
    int rc = 0;
    memset(dir, 0, sizeof dir);
    if (app->comm->rank == 0) rc = open_job_dir(planned, unique, dir, sizeof dir, &jd);
    if ((rc = share_from_rank0(app, rc, dir, sizeof dir))) return rc;   // every rank fails with rank 0
    set_runtime(job, dir);
    Config cfg;
    rc = bind_job(job, &cfg);  // again: ${hydra:runtime.output_dir} now names the real directory
    int chdir_job = rc ? 0 : job_chdir(job);
    if (!rc && chdir_job < 0) rc = EXIT_USAGE;
    if (!rc) place_paths(&cfg, app, dir, chdir_job == 1, snapshot, sizeof snapshot);
    if (!rc && app->comm->rank == 0) rc = prepare_job_dir(app, job, dir, snapshot, &jd);
    rc = share_from_rank0(app, rc, dir, sizeof dir);
    bool started = false;
    if (!rc) rc = train_in(app, &cfg, dir, chdir_job == 1, snapshot, &started);
    log_close();
    if (rc && !started && app->comm->rank == 0) {   // failed before training: as it was
        run_dir_undo_apply(&jd.undo);
        if (jd.created) {   // the lock file goes first (the lock itself stays held until close_job_dir)
            unlink(jd.lock_path);
            rmdir(dir);
        }
    }
    close_job_dir(&jd);
    return rc;
}

// Checks a job before anything is created: its output directory can be named and its config
// resolves, binds and validates. Returns 0 or the exit code (after reporting).
static int check_job(const App *app, Job *job, const char *sweep_dir) {
    char planned[PATH_MAX];
    bool unique;
    set_runtime(job, NULL);
    if (output_dir_of(app, job, sweep_dir, planned, sizeof planned, &unique)) return EXIT_USAGE;
    set_runtime(job, planned);
    Config cfg;
    int rc = bind_job(job, &cfg);
    if (!rc && job_chdir(job) < 0) rc = EXIT_USAGE;
    return rc;
}

// ========================================================================== run and multirun

// The overrides that are not sweeps (pointers into ov); the count goes into *n_out.
static char **plain_overrides(char *const *ov, int n, int *n_out) {
    char **plain = calloc((size_t)n + 1, sizeof *plain);
    if (!plain) abort();
    *n_out = 0;
    for (int i = 0; i < n; i++) {
        CfgOverride o;
        char err[256];
        char *text = rewrite_group_override(ov[i]);
        if (cfg_override_parse_ex(text, true, &o, err, sizeof err) == 0) {  // else: reported later
            if (!o.n_sweep) plain[(*n_out)++] = ov[i];
            cfg_override_free(&o);
        }
        free(text);
    }
    return plain;
}

// One run: compose, check, then run in hydra.run.dir.
static int run_single(const App *app, char *const *ov, int n) {
    char **task = calloc((size_t)n + 1, sizeof *task), **hydra = calloc((size_t)n + 1, sizeof *hydra);
    if (!task || !hydra) abort();
    Job job = {.num = -1};
    split_overrides(ov, n, task, &job.n_task, hydra, &job.n_hydra);
    job.task = task;
    job.hydra = hydra;
    job.tree = compose(app, ov, n);
    int rc = !job.tree ? EXIT_USAGE : check_job(app, &job, NULL);
    if (!rc) rc = run_job(app, &job, NULL);
    cfg_free(job.tree);
    free(task);
    free(hydra);
    return rc;
}

// The task overrides of job as one line ("a=1 b=2"), for the "#i : ..." log line.
static void join_overrides(const HydraJob *job, char *buf, size_t len) {
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < job->n && o < len; i++) o += (size_t)snprintf(buf + o, len - o, "%s%s", i ? " " : "", job->ov[i]);
}

// The jobs of a sweep, composed and checked (nothing created yet). Returns 0 or an exit code.
static int plan_sweep(const App *app, HydraJob *jobs, size_t n_jobs, char **hydra, int n_hydra, Job *out,
                      const char *sweep_dir) {
    for (size_t i = 0; i < n_jobs; i++) {
        char **all = calloc((size_t)(jobs[i].n + n_hydra) + 1, sizeof *all);
        if (!all) abort();
        memcpy(all, jobs[i].ov, sizeof *all * (size_t)jobs[i].n);
        memcpy(all + jobs[i].n, hydra, sizeof *all * (size_t)n_hydra);
        out[i] = (Job){.tree = compose(app, all, jobs[i].n + n_hydra), .task = jobs[i].ov, .n_task = jobs[i].n,
                       .hydra = hydra, .n_hydra = n_hydra, .num = (long)i, .multirun = true};
        free(all);
        if (!out[i].tree) return EXIT_USAGE;
        int rc = check_job(app, &out[i], sweep_dir);
        if (rc) return rc;
    }
    return 0;
}

// The sweep directory hydra.sweep.dir names (absolute), and whether it must be new.
static int sweep_dir_of(const App *app, Job *sweep, char *out, size_t len, bool *unique) {
    char err[ERRLEN];
    bool failed;
    set_runtime(sweep, NULL);
    char *rel = hydra_get_string(sweep->tree, "hydra.sweep.dir", &failed, err, sizeof err);
    int rc = failed || !rel ? -1 : run_dir_join(app->cwd, rel, out, len);
    if (failed || !rel) hydra_report(stderr, failed ? err : "hydra.sweep.dir is null: no sweep directory");
    else if (rc) fprintf(stderr, "mingpt: error: sweep directory '%s' is too long\n", rel);
    const CfgNode *raw = cfg_select(sweep->tree, "hydra.sweep.dir");
    *unique = raw && raw->type == CFG_STRING && strstr(raw->s, "${now:");
    free(rel);
    return rc ? EXIT_USAGE : 0;
}

// Creates the sweep directory and writes multirun.yaml (the sweep's config, unresolved).
static int open_sweep_dir(const App *app, const CfgNode *base, const char *planned, bool unique, char *dir,
                          size_t len) {
    char err[ERRLEN], path[PATH_MAX + 32];
    memset(dir, 0, len);
    int rc = 0;
    if (app->comm->rank == 0) {
        if (run_dir_create(planned, unique, dir, len, NULL, err, sizeof err)) {
            fprintf(stderr, "mingpt: error: %s\n", err);
            rc = EXIT_RUNTIME;
        } else {
            char *yaml = cfg_to_yaml(base);
            snprintf(path, sizeof path, "%s/multirun.yaml", dir);
            rc = yaml ? run_dir_write_file(path, yaml, err, sizeof err) : -1;
            free(yaml);
            if (rc) fprintf(stderr, "mingpt: error: %s\n", yaml ? err : "cannot write multirun.yaml");
            rc = rc ? EXIT_RUNTIME : 0;
        }
    }
    return share_from_rank0(app, rc, dir, len);
}

// Rank 0 records the sweep's jobs (app/run_dir.h, run_dir_write_plan) before the first starts,
// for `mingpt runs` to list those that never ran; a failure is a warning (the sweep goes on).
static void record_plan(const App *app, Job *jobs, size_t n, const char *sweep_dir) {
    RunDirPlannedJob *plan = calloc(n + 1, sizeof *plan);
    char **subdirs = calloc(n + 1, sizeof *subdirs), err[ERRLEN] = "out of memory";
    bool failed = !plan || !subdirs;
    for (size_t i = 0; !failed && i < n; i++) {   // each job's hydra.sweep.subdir, as run_job resolves it
        set_runtime(&jobs[i], NULL);
        subdirs[i] = hydra_get_string(jobs[i].tree, "hydra.sweep.subdir", &failed, err, sizeof err);
        plan[i] = (RunDirPlannedJob){jobs[i].num, subdirs[i] ? subdirs[i] : "", jobs[i].task, jobs[i].n_task};
    }
    if (app->comm->rank == 0 && (failed || run_dir_write_plan(sweep_dir, plan, n, err, sizeof err)))
        fprintf(stderr, "mingpt: warning: the sweep's list of jobs is not written: %s\n", err);
    for (size_t i = 0; subdirs && i < n; i++) free(subdirs[i]);
    free(subdirs);
    free(plan);
}

// Runs the planned jobs one after another; a failure does not stop the others.
static int launch(const App *app, Job *jobs, HydraJob *hjobs, size_t n, const char *sweep_dir, bool quiet) {
    if (!quiet) log_hydra("Launching %zu jobs locally", n);
    long first_failure = -1;
    int first_rc = 0;
    for (size_t i = 0; i < n; i++) {
        char line[8192];
        join_overrides(&hjobs[i], line, sizeof line);
        if (!quiet) log_hydra("\t#%zu : %s", i, line);
        int rc = run_job(app, &jobs[i], sweep_dir);
        if (rc && first_failure < 0) { first_failure = (long)i; first_rc = rc; }
        if (rc == EXIT_INTERRUPTED || rc == EXIT_ABORTED) return rc;  // Ctrl-C stops the sweep
    }
    if (first_failure < 0) return EXIT_OK;
    char msg[PATH_MAX + 128];
    snprintf(msg, sizeof msg, "job #%ld exited with status %d (its output is in %s/)", first_failure, first_rc,
             sweep_dir);
    report_job_error(&jobs[first_failure], msg);
    return EXIT_RUNTIME;
}

// Checks that no hydra.* override is a sweep.
static int check_hydra_overrides(char *const *hydra, int n) {
    for (int i = 0; i < n; i++) {
        CfgOverride ov;
        char err[ERRLEN];
        char *text = rewrite_group_override(hydra[i]);
        int rc = cfg_override_parse_ex(text, true, &ov, err, sizeof err);
        bool sweep = !rc && ov.n_sweep > 0;
        if (!rc) cfg_override_free(&ov);
        free(text);
        if (rc || sweep) {
            if (sweep) snprintf(err, sizeof err, "Sweeping over Hydra's configuration is not supported : '%s'", hydra[i]);
            hydra_report(stderr, err);
            return EXIT_USAGE;
        }
    }
    return 0;
}

// -m: expands the sweep, checks every job, creates hydra.sweep.dir and runs the jobs in turn.
static int run_sweep(const App *app, char *const *ov, int n) {
    char **task = calloc((size_t)n + 1, sizeof *task), **hydra = calloc((size_t)n + 1, sizeof *hydra);
    if (!task || !hydra) abort();
    int n_task, n_hydra, rc;
    split_overrides(ov, n, task, &n_task, hydra, &n_hydra);
    CfgNode *base = NULL;
    HydraJob *hjobs = NULL;
    Job *jobs = NULL;
    size_t n_jobs = 0;
    char err[ERRLEN], sweep_dir[PATH_MAX], planned_sweep[PATH_MAX];
    rc = check_hydra_overrides(hydra, n_hydra);
    if (!rc) {  // the sweep's own config: every override that is not a sweep (multirun.yaml)
        int n_plain;
        char **plain = plain_overrides(ov, n, &n_plain);
        if (!(base = compose(app, plain, n_plain))) rc = EXIT_USAGE;
        free(plain);
    }
    if (!rc) {  // hydra.sweeper.params from the config come first; the command line wins
        int n_params;
        char **params = hydra_sweeper_params(base, &n_params);
        char **args = calloc((size_t)(n_params + n_task) + 1, sizeof *args);
        if (!args) abort();
        if (n_params) memcpy(args, params, sizeof *args * (size_t)n_params);
        memcpy(args + n_params, task, sizeof *args * (size_t)n_task);
        if (hydra_sweep_jobs(args, n_params + n_task, &hjobs, &n_jobs, err, sizeof err)) {
            hydra_report(stderr, err);
            rc = EXIT_USAGE;
        }
        free(args);
        hydra_strings_free(params, n_params);
    }
    bool unique = false;
    Job sweep = {.tree = base, .task = task, .n_task = n_task, .hydra = hydra, .n_hydra = n_hydra, .num = -1,
                 .multirun = true};
    if (!rc) rc = sweep_dir_of(app, &sweep, planned_sweep, sizeof planned_sweep, &unique);
    if (!rc) {  // every job composed and checked before anything is created
        jobs = calloc(n_jobs + 1, sizeof *jobs);
        if (!jobs) abort();
        rc = plan_sweep(app, hjobs, n_jobs, hydra, n_hydra, jobs, planned_sweep);
    }
    if (!rc) rc = open_sweep_dir(app, base, planned_sweep, unique, sweep_dir, sizeof sweep_dir);
    if (!rc) record_plan(app, jobs, n_jobs, sweep_dir);
    if (!rc) {
        const CfgNode *hl = cfg_select(base, "hydra.hydra_logging");
        bool quiet = hl && hl->type == CFG_STRING && !strcmp(hl->s, "disabled");
        rc = launch(app, jobs, hjobs, n_jobs, sweep_dir, quiet);
    }
    for (size_t i = 0; jobs && i < n_jobs; i++) cfg_free(jobs[i].tree);
    free(jobs);
    hydra_jobs_free(hjobs, n_jobs);
    cfg_free(base);
    free(task);
    free(hydra);
    return rc;
}

// ========================================================================== printing commands

// --cfg / --help / --hydra-help: print and exit.
static int print_command(const App *app) {
    const HydraArgs *a = app->args;
    CfgNode *tree = compose(app, a->overrides, a->n_overrides);
    if (!tree) return EXIT_USAGE;
    char **task = calloc((size_t)a->n_overrides + 1, sizeof *task), **hydra = calloc((size_t)a->n_overrides + 1, sizeof *hydra);
    if (!task || !hydra) abort();
    Job job = {.tree = tree, .num = -1, .task = task, .hydra = hydra};
    split_overrides(a->overrides, a->n_overrides, task, &job.n_task, hydra, &job.n_hydra);
    job.task = task;
    job.hydra = hydra;
    set_runtime(&job, NULL);  // under --cfg, runtime.output_dir is null
    char err[ERRLEN];
    int rc;
    HydraCommand cmds[16];   // the subcommands, for the help texts
    size_t n_cmds = 0;
    for (const Subcommand *c; n_cmds < sizeof cmds / sizeof *cmds && (c = subcommand_at(n_cmds)); n_cmds++)
        cmds[n_cmds] = (HydraCommand){.name = c->name, .description = c->description};
    if (a->help) rc = hydra_print_help(stdout, tree, a->resolve, cmds, n_cmds, err, sizeof err);
    else if (a->hydra_help) rc = hydra_print_hydra_help(stdout, tree, cmds, n_cmds, err, sizeof err);
    else rc = hydra_print_cfg(stdout, tree, a->cfg, a->package, a->resolve, err, sizeof err);
    if (rc) {
        if (strncmp(err, "package '", 9) == 0) fprintf(stderr, "%s\n", err);  // Hydra prints it bare
        else hydra_report(stderr, err);
    }
    cfg_free(tree);
    free(task);
    free(hydra);
    return rc ? EXIT_USAGE : EXIT_OK;
}

// -m, or hydra.mode: MULTIRUN in the config (read with the non-sweep overrides applied).
static bool wants_multirun(const App *app) {
    if (app->args->multirun) return true;
    int n;
    char **plain = plain_overrides(app->args->overrides, app->args->n_overrides, &n);
    char err[ERRLEN];
    CfgNode *tree = config_compose_hydra(app->config_file, app->hydra_defaults, n, plain, NULL, err, sizeof err);
    const CfgNode *mode = tree ? cfg_select(tree, "hydra.mode") : NULL;
    bool multi = mode && mode->type == CFG_STRING && !strcmp(mode->s, "MULTIRUN");
    cfg_free(tree);
    free(plain);
    return multi;
}

// ========================================================================== main

// Flag combinations Hydra refuses (its uncaught ValueErrors: printed bare).
static int check_flags(const HydraArgs *a) {
    int commands = a->run + a->multirun + (a->cfg != HYDRA_CFG_NONE) + (a->info != NULL) + a->shell_completion;
    if (commands > 1) {
        fprintf(stderr, "Only one of --run, --multirun, --cfg, --info and --shell_completion can be specified\n");
        return EXIT_USAGE;
    }
    if (!a->help && a->resolve && a->cfg == HYDRA_CFG_NONE) {
        fprintf(stderr, "The --resolve flag can only be used in conjunction with --cfg or --help\n");
        return EXIT_USAGE;
    }
    return 0;
}

// --info: of Hydra's pages, mingpt has the config search path (no defaults list, no plugins).
static int print_info(const HydraArgs *a) {
    if (strcmp(a->info, "searchpath") != 0) {
        fprintf(stderr, "mingpt: error: --info %s is not supported (mingpt has no config groups or plugins); "
                "--info searchpath is\n", a->info);
        return EXIT_USAGE;
    }
    SearchPath sp;
    hydra_search_path(a, &sp);
    search_path_print(stdout, &sp);
    search_path_free(&sp);
    return EXIT_OK;
}

// Finds the config and builds Hydra's defaults for the `hydra` node.
static int app_init(App *app, const HydraArgs *a) {
    char err[ERRLEN], dir[PATH_MAX];
    app->args = a;
    if (!getcwd(app->cwd, sizeof app->cwd)) {
        fprintf(stderr, "mingpt: error: cannot read the current directory\n");
        return EXIT_RUNTIME;
    }
    if (hydra_find_config(a, app->config_file, sizeof app->config_file, err, sizeof err)) {
        hydra_report(stderr, err);
        return EXIT_USAGE;
    }
    snprintf(dir, sizeof dir, "%s", app->config_file);
    char *slash = strrchr(dir, '/');
    char abs_dir[PATH_MAX];
    if (slash) *slash = 0;
    if (run_dir_join(app->cwd, slash ? dir : ".", abs_dir, sizeof abs_dir)) snprintf(abs_dir, sizeof abs_dir, "%s", app->cwd);
    const char *name = a->config_name ? a->config_name : HYDRA_DEFAULT_CONFIG;
    char cname[256];
    size_t nl = strlen(name);
    snprintf(cname, sizeof cname, "%.*s", (int)(nl > 5 && !strcmp(name + nl - 5, ".yaml") ? nl - 5 : nl), name);
    SearchPath sp;
    hydra_search_path(a, &sp);
    HydraStatic st = {.config_name = cname, .config_dir = abs_dir, .cwd = app->cwd, .search_path = &sp};
    app->hydra_defaults = hydra_defaults_node(&st);
    search_path_free(&sp);
    (void)cfg_now();  // fix ${now:} at start-up, as Hydra does
    return 0;
}

// The communicator of a training command: MPI when mpirun/srun started this process (the job
// then shares rank 0's ${now:} timestamp), else the single-process one; MPI is never touched
// without a launcher.
static int open_comm(App *app, int *argc, char ***argv) {
    char err[ERRLEN];
    int launched = comm_launched(err, sizeof err);
    if (launched < 0) {
        fprintf(stderr, "mingpt: error: %s\n", err);
        return EXIT_USAGE;
    }
    app->comm = launched ? comm_mpi_open(argc, argv, err, sizeof err) : comm_single_create();
    if (!app->comm) {
        fprintf(stderr, "mingpt: error: %s\n", launched ? err : "out of memory");
        return EXIT_RUNTIME;
    }
    log_set_rank(app->comm->rank);
    double now = (double)cfg_now();
    if (app->comm->bcast_host(app->comm, &now, sizeof now, 0)) app->comm->abort(app->comm, EXIT_RUNTIME, app->comm->err);
    cfg_set_now((time_t)now);
    return 0;
}

int hydra_app_main(int argc, char **argv) {
    HydraArgs a;
    int rc = hydra_parse_args(argc, argv, &a, stdout, stderr);
    if (!rc && a.version) version_print(stdout);  // after Hydra's line: mingpt and its backends
    bool done = rc || a.version;
    if (!done) done = (rc = check_flags(&a)) != 0;
    // --info and -sc need no config: they say where configs are looked for, or find it themselves
    if (!done && a.info) { rc = print_info(&a); done = true; }
    if (!done && a.shell_completion) {
        const size_t n_subs = subcommand_completions(NULL, 0);
        CompletionSubcommand *subs = calloc(n_subs + 1, sizeof *subs);
        if (!subs) abort();
        subcommand_completions(subs, n_subs);
        rc = completion_main(&a, subs, n_subs, stdout, stderr);
        free(subs);
        done = true;
    }
    App app = {0};
    if (!done) done = (rc = app_init(&app, &a)) != 0;
    if (!done) {
        bool printing = a.help || a.hydra_help || a.cfg != HYDRA_CFG_NONE;
        if (printing) rc = print_command(&app);
        else if (!(rc = open_comm(&app, &argc, &argv))) {
            if (wants_multirun(&app)) rc = run_sweep(&app, a.overrides, a.n_overrides);
            else rc = run_single(&app, a.overrides, a.n_overrides);
        }
    }
    if (app.comm) app.comm->destroy(app.comm);
    cfg_free(app.hydra_defaults);
    hydra_args_free(&a);
    return rc;
}
