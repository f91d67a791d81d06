// config/hydra.h — Hydra 1.3's command line on top of the config tree: flags, the config
// search path, the `hydra:` node, sweeps, --cfg / --help printing and error reporting.
//
// Everything here only reads and builds configs; creating directories and running jobs is
// app/hydra_app.c's and app/run_dir.h's business. Texts follow ../shared/reference/hydra_semantics.md;
// where Hydra exits with 1 for a configuration error, mingpt exits with 2 (see README).
#ifndef MINGPT_HYDRA_H
#define MINGPT_HYDRA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "config/cfg_tree.h"
#include "config/search_path.h"

#define HYDRA_VERSION "1.3.2"           // the Hydra whose behaviour mingpt copies
#define HYDRA_DEFAULT_CONFIG "gpt2_train_cfg"
#define HYDRA_JOB_NAME "mingpt"         // hydra.job.name: the log is <name>.log

typedef enum { HYDRA_CFG_NONE, HYDRA_CFG_JOB, HYDRA_CFG_HYDRA, HYDRA_CFG_ALL } HydraCfgWhat;

// The parsed command line (pointers into argv).
typedef struct {
    bool help, hydra_help, version, resolve, run, multirun, shell_completion;
    HydraCfgWhat cfg;             // --cfg/-c
    const char *info;             // --info/-i [all|config|defaults|defaults-tree|plugins|searchpath]
                                  // ("all" when given without a value), or NULL
    const char *package;          // --package/-p, or NULL
    const char *config_path;      // --config-path/-cp, or NULL (the search path of config/search_path.h)
    const char *config_name;      // --config-name/-cn, or NULL (HYDRA_DEFAULT_CONFIG)
    const char **config_dirs;     // --config-dir/-cd, in order (may repeat)
    int n_config_dirs;
    char **overrides;             // positional arguments, in order
    int n_overrides;
} HydraArgs;

// Parses argv[1..] like Hydra's argparse parser (long options may be abbreviated). Returns 0,
// or EXIT 2 after writing argparse's usage and "mingpt: error: ..." to `err_out`. --version
// prints its line to `out` and sets a->version (argparse stops there).
int hydra_parse_args(int argc, char **argv, HydraArgs *a, FILE *out, FILE *err_out);
void hydra_args_free(HydraArgs *a);

// Every flag's option strings (long, then short when it has one), in Hydra's order, into names
// (at most max); returns the count. For shell completion.
size_t hydra_flags(const char **names, size_t max);

// argparse's usage text for mingpt (and the `sample` subcommand).
void hydra_usage(FILE *f);

// Writes a Hydra error the way Hydra 1.3 does: msg, a newline, then
// "\nSet the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.\n"
// (only msg when HYDRA_FULL_ERROR=1 is set).
void hydra_report(FILE *f, const char *msg);

// ---- config search path -------------------------------------------------------------------

// The config search path of these arguments (config/search_path.h). Free with search_path_free.
void hydra_search_path(const HydraArgs *a, SearchPath *sp);

// The primary config file: <name>.yaml in the first directory of the search path that has it
// (relative when the directory was given relative, e.g. -cp conf). Returns 0 with the file in
// path, or -1 with Hydra's message (Cannot find primary config ... with every place looked in,
// Primary config directory not found ..., Additional config directory ... not found).
int hydra_find_config(const HydraArgs *a, char *path, size_t len, char *err, size_t errlen);

// ---- the hydra node -----------------------------------------------------------------------

// What Hydra knows about the job before its config is composed.
typedef struct {
    const char *config_name;   // hydra.job.config_name
    const char *config_dir;    // absolute directory of the primary config (runtime.config_sources
                               // when search_path is NULL)
    const SearchPath *search_path;  // runtime.config_sources: every place of the search path
    const char *cwd;           // launch directory (hydra.runtime.cwd)
} HydraStatic;

// Hydra's defaults for the `hydra` node (run/sweep dirs, job, runtime, help, ...), for
// config_compose_hydra. Free with cfg_free.
CfgNode *hydra_defaults_node(const HydraStatic *st);

// The values Hydra fills in once a job's config is composed.
typedef struct {
    bool multirun;             // hydra.mode: MULTIRUN (else RUN)
    long job_num;              // hydra.job.num and .id; < 0 leaves them `???`
    const char *output_dir;    // hydra.runtime.output_dir; NULL sets null (as under --cfg)
    char *const *task;         // hydra.overrides.task (and job.override_dirname)
    int n_task;
    char *const *hydra;        // hydra.overrides.hydra
    int n_hydra;
} HydraRuntime;

// Sets those values in tree's `hydra` node.
void hydra_set_runtime(CfgNode *tree, const HydraRuntime *rt);

// Hydra's override_dirname of `task` with the settings of hydra.job.config.override_dirname
// (kv_sep, item_sep, exclude_keys) in tree: sorted, joined, cut at CFG_MAX_SCALAR_BYTES. Returns a
// malloc'd string.
char *hydra_override_dirname(const CfgNode *tree, char *const *task, int n_task);

// True for an override of Hydra's own settings (hydra.*, hydra/*, with any +/++/~ prefix).
bool hydra_is_hydra_override(const char *text);

// The string value at `path` (e.g. "hydra.run.dir"), resolved; NULL when it is null. On error
// returns NULL with the message in err and *failed set. Returns a malloc'd string.
char *hydra_get_string(const CfgNode *tree, const char *path, bool *failed, char *err, size_t errlen);

// ---- sweeps -------------------------------------------------------------------------------

// One job of a sweep: its task overrides, as Hydra writes them ("key=value").
typedef struct {
    char **ov;
    int n;
} HydraJob;

// Expands overrides with sweeps (a,b / choice() / range()) into jobs like Hydra's
// BasicSweeper: a repeated key keeps its first position and its last value; cartesian
// product in command-line order, the first key varying slowest; swept values re-rendered
// (1e-3 -> 0.001), the others kept as typed. Returns 0, or -1 with the parse error in err, or
// when the sweep has more than 100000 jobs or their overrides would take more than 64 MiB.
int hydra_sweep_jobs(char *const *args, int n, HydraJob **jobs, size_t *n_jobs, char *err, size_t errlen);
void hydra_jobs_free(HydraJob *jobs, size_t n);

// "key=value" for every entry of hydra.sweeper.params (a map, may be absent): sweeps given in
// the config, which the command line's own overrides follow (and so win). *n gets the count.
char **hydra_sweeper_params(const CfgNode *tree, int *n);
void hydra_strings_free(char **s, int n);

// Python's repr of a list of strings: ['a', 'b'].
void hydra_list_repr(char *const *s, int n, char *buf, size_t len);

// ---- printing -----------------------------------------------------------------------------

// --cfg: the composed tree as YAML (job: without `hydra`; hydra: only `hydra`, without its help
// templates; all: `hydra` first). With package, "# @package <p>" then that subtree, or a leaf's
// bare value; "_global_" is the whole config. Returns 0, or -1 with the message in err
// ("package 'x' not found in config", interpolation errors).
int hydra_print_cfg(FILE *out, const CfgNode *tree, HydraCfgWhat what, const char *package, bool resolve,
                    char *err, size_t errlen);

// A subcommand as the help texts list it. The subcommands are app/'s (app/subcommand.h), a floor
// above config/: app/ fills these and passes them in.
typedef struct {
    const char *name;          // "sample"
    const char *description;   // one line: what it does
} HydraCommand;

// --help: hydra.help.template with $APP_SUBCOMMANDS (one line per command, "name : description"),
// $APP_CONFIG_GROUPS and $CONFIG (the job config) filled in. cmds may be NULL when n_cmds is 0.
int hydra_print_help(FILE *out, const CfgNode *tree, bool resolve, const HydraCommand *cmds, size_t n_cmds,
                     char *err, size_t errlen);

// --hydra-help: hydra.hydra_help.template with mingpt's flags, then the commands (as for --help).
int hydra_print_hydra_help(FILE *out, const CfgNode *tree, const HydraCommand *cmds, size_t n_cmds, char *err,
                           size_t errlen);

#endif
