// config/hydra.c — Hydra's command line: flags, search path, the hydra node, sweeps, printing.
#include "config/hydra.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/cfg_interp.h"
#include "config/cfg_override.h"
#include "config/config.h"

// ========================================================================== flags (argparse)

enum { O_HELP, O_HYDRA_HELP, O_VERSION, O_CFG, O_RESOLVE, O_PACKAGE, O_RUN, O_MULTIRUN, O_SC, O_CP, O_CN, O_CD, O_INFO };

typedef struct {
    const char *lng, *shrt;  // option strings, in Hydra's order (argparse names it "--cfg/-c")
    bool takes_value;
    bool optional;           // argparse nargs='?': the value may be left out (--info)
} Opt;

static const Opt OPTS[] = {
    [O_HELP] = {"--help", "-h", false, false},          [O_HYDRA_HELP] = {"--hydra-help", NULL, false, false},
    [O_VERSION] = {"--version", NULL, false, false},    [O_CFG] = {"--cfg", "-c", true, false},
    [O_RESOLVE] = {"--resolve", NULL, false, false},    [O_PACKAGE] = {"--package", "-p", true, false},
    [O_RUN] = {"--run", "-r", false, false},            [O_MULTIRUN] = {"--multirun", "-m", false, false},
    [O_SC] = {"--shell-completion", "-sc", false, false}, [O_CP] = {"--config-path", "-cp", true, false},
    [O_CN] = {"--config-name", "-cn", true, false},     [O_CD] = {"--config-dir", "-cd", true, false},
    [O_INFO] = {"--info", "-i", true, true},
};

// --info's choices (Hydra 1.3's argparse), and the value it takes without one.
static const char *const INFO_CHOICES[] = {"all", "config", "defaults", "defaults-tree", "plugins", "searchpath"};
#define N_OPTS (int)(sizeof OPTS / sizeof OPTS[0])

size_t hydra_flags(const char **names, size_t max) {
    size_t n = 0;
    for (int i = 0; i < N_OPTS; i++) {
        if (n < max) names[n++] = OPTS[i].lng;
        if (OPTS[i].shrt && n < max) names[n++] = OPTS[i].shrt;
    }
    return n;
}

void hydra_usage(FILE *f) {
    fputs("usage: mingpt [--help] [--hydra-help] [--version]\n"
          "              [--cfg {job,hydra,all}] [--resolve]\n"
          "              [--package PACKAGE] [--run] [--multirun]\n"
          "              [--shell-completion] [--config-path CONFIG_PATH]\n"
          "              [--config-name CONFIG_NAME]\n"
          "              [--config-dir CONFIG_DIR]\n"
          "              [--info [{all,config,defaults,defaults-tree,plugins,searchpath}]]\n"
          "              [overrides ...]\n"
          "       mingpt sample --snapshot PATH [--prompt TEXT] [--max_new_tokens N]\n"
          "                     [--temperature F] [--top_k K] [--seed S]\n",
          f);
}

// argparse's "argument --cfg/-c" naming.
static void opt_name(int id, char *buf, size_t len) {
    if (OPTS[id].shrt) snprintf(buf, len, "%s/%s", OPTS[id].lng, OPTS[id].shrt);
    else snprintf(buf, len, "%s", OPTS[id].lng);
}

static int usage_error(FILE *err_out, const char *fmt, const char *a, const char *b) {
    hydra_usage(err_out);
    fputs("mingpt: error: ", err_out);
    fprintf(err_out, fmt, a, b);
    fputc('\n', err_out);
    return 2;
}

// Which option `name` is: exact long or short name, else a unique prefix of a long one.
// Returns the id, -1 when unknown, -2 after an "ambiguous option" error.
static int find_opt(const char *name, FILE *err_out) {
    for (int i = 0; i < N_OPTS; i++)
        if (!strcmp(name, OPTS[i].lng) || (OPTS[i].shrt && !strcmp(name, OPTS[i].shrt))) return i;
    if (strncmp(name, "--", 2) != 0) return -1;
    int found = -1, count = 0;
    char list[512] = "";
    for (int i = 0; i < N_OPTS; i++)
        if (!strncmp(OPTS[i].lng, name, strlen(name))) {
            found = i;
            size_t o = strlen(list);
            snprintf(list + o, sizeof list - o, "%s%s", count++ ? ", " : "", OPTS[i].lng);
        }
    if (count > 1) {
        usage_error(err_out, "ambiguous option: %s could match %s", name, list);
        return -2;
    }
    return found;
}

// Stores option id (with its value v, for the options that take one) in a.
static int set_option(HydraArgs *a, int id, const char *v, FILE *err_out) {
    switch (id) {
    case O_HELP: a->help = true; return 0;
    case O_HYDRA_HELP: a->hydra_help = true; return 0;
    case O_RESOLVE: a->resolve = true; return 0;
    case O_RUN: a->run = true; return 0;
    case O_MULTIRUN: a->multirun = true; return 0;
    case O_SC: a->shell_completion = true; return 0;
    case O_PACKAGE: a->package = v; return 0;
    case O_CP: a->config_path = v; return 0;
    case O_CN: a->config_name = v; return 0;
    case O_CD: a->config_dirs[a->n_config_dirs++] = v; return 0;
    case O_INFO: break;
    case O_CFG: break;
    }
    char name[64], msg[600];
    opt_name(id, name, sizeof name);
    if (id == O_INFO) {
        if (!v) v = INFO_CHOICES[0];
        for (size_t k = 0; k < sizeof INFO_CHOICES / sizeof *INFO_CHOICES; k++)
            if (!strcmp(v, INFO_CHOICES[k])) {
                a->info = INFO_CHOICES[k];
                return 0;
            }
        snprintf(msg, sizeof msg, "argument %s: invalid choice: '%s' (choose from 'all', 'config', 'defaults', "
                 "'defaults-tree', 'plugins', 'searchpath')", name, v);
        return usage_error(err_out, "%s%s", msg, "");
    }
    static const char *const what[] = {[HYDRA_CFG_JOB] = "job", [HYDRA_CFG_HYDRA] = "hydra", [HYDRA_CFG_ALL] = "all"};
    for (int k = HYDRA_CFG_JOB; k <= HYDRA_CFG_ALL; k++)
        if (!strcmp(v, what[k])) {
            a->cfg = (HydraCfgWhat)k;
            return 0;
        }
    snprintf(msg, sizeof msg, "argument %s: invalid choice: '%s' (choose from 'job', 'hydra', 'all')", name, v);
    return usage_error(err_out, "%s%s", msg, "");
}

int hydra_parse_args(int argc, char **argv, HydraArgs *a, FILE *out, FILE *err_out) {
    memset(a, 0, sizeof *a);
    a->overrides = calloc((size_t)argc + 1, sizeof *a->overrides);
    a->config_dirs = calloc((size_t)argc + 1, sizeof *a->config_dirs);
    char **unknown = calloc((size_t)argc + 1, sizeof *unknown);
    if (!a->overrides || !a->config_dirs || !unknown) abort();
    int n_unknown = 0, rc = 0;
    for (int i = 1; i < argc && !rc; i++) {
        const char *arg = argv[i];
        if (arg[0] != '-' || !arg[1]) {
            a->overrides[a->n_overrides++] = argv[i];
            continue;
        }
        char name[256];
        const char *eq = strchr(arg, '=');
        snprintf(name, sizeof name, "%.*s", (int)(eq ? eq - arg : (long)strlen(arg)), arg);
        int id = find_opt(name, err_out);
        if (id == -2) { rc = 2; break; }
        if (id < 0) { unknown[n_unknown++] = argv[i]; continue; }
        char oname[64];
        opt_name(id, oname, sizeof oname);
        if (id == O_VERSION) {  // argparse's version action: print and stop
            fprintf(out, "Hydra %s (mingpt)\n", HYDRA_VERSION);
            a->version = true;
            break;
        }
        if (!OPTS[id].takes_value) {
            if (eq) rc = usage_error(err_out, "argument %s: ignored explicit argument '%s'", oname, eq + 1);
            else set_option(a, id, NULL, err_out);
            continue;
        }
        const char *v = eq ? eq + 1 : NULL;
        if (!v && i + 1 < argc && (argv[i + 1][0] != '-' || !argv[i + 1][1])) v = argv[++i];
        if (!v && !OPTS[id].optional) rc = usage_error(err_out, "argument %s: expected one argument%s", oname, "");
        else rc = set_option(a, id, v, err_out);
    }
    if (!rc && !a->version && n_unknown) {
        char list[2048] = "";
        for (int k = 0; k < n_unknown; k++) {
            size_t o = strlen(list);
            snprintf(list + o, sizeof list - o, "%s%s", k ? " " : "", unknown[k]);
        }
        rc = usage_error(err_out, "unrecognized arguments: %s%s", list, "");
    }
    free(unknown);
    return rc;
}

void hydra_args_free(HydraArgs *a) {
    free(a->overrides);
    free(a->config_dirs);
    memset(a, 0, sizeof *a);
}

void hydra_report(FILE *f, const char *msg) {
    // With HYDRA_FULL_ERROR=1 Hydra shows the whole traceback instead of the hint; mingpt has
    // no more to show than the message.
    const char *full = getenv("HYDRA_FULL_ERROR");
    if (full && !strcmp(full, "1")) fprintf(f, "%s\n", msg);
    else fprintf(f, "%s\n\nSet the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.\n", msg);
}

// ========================================================================== search path

static bool is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

void hydra_search_path(const HydraArgs *a, SearchPath *sp) {
    search_path_build(sp, a->config_path, a->config_dirs, a->n_config_dirs);
}

int hydra_find_config(const HydraArgs *a, char *path, size_t len, char *err, size_t errlen) {
    const char *name = a->config_name ? a->config_name : HYDRA_DEFAULT_CONFIG;
    char abs_dir[PATH_MAX];
    if (a->config_path && !is_dir(a->config_path)) {
        search_path_absolute(a->config_path, abs_dir, sizeof abs_dir);
        return cfg_errf(err, errlen,
                        "Primary config directory not found.\nCheck that the config directory '%s' exists and readable",
                        abs_dir);
    }
    for (int i = 0; i < a->n_config_dirs; i++) {
        search_path_absolute(a->config_dirs[i], abs_dir, sizeof abs_dir);
        if (!is_dir(a->config_dirs[i]))
            return cfg_errf(err, errlen, "Additional config directory '%s' not found", abs_dir);
    }
    SearchPath sp;
    hydra_search_path(a, &sp);
    for (int i = 0; i < sp.n; i++)  // the first place that has it, in search path order
        if (sp.dirs[i].lookup && !config_path(path, len, sp.dirs[i].lookup, name) && is_file(path)) {
            search_path_free(&sp);
            return 0;
        }
    // Not found anywhere: Hydra's message with every place looked in.
    char lines[8192];
    search_path_lines(&sp, lines, sizeof lines);
    search_path_free(&sp);
    size_t n = strlen(lines);
    if (n && lines[n - 1] == '\n') lines[n - 1] = 0;
    return cfg_errf(err, errlen,
                    "Cannot find primary config '%s'. Check that it's in your config search path.\n\n"
                    "Config search path:\n%s",
                    name, lines);
}

// ========================================================================== the hydra node

// Hydra 1.3's defaults for the hydra node (the parts mingpt uses or shows).
static const char HYDRA_DEFAULTS_YAML[] =
    "run:\n"
    "  dir: outputs/${now:%Y-%m-%d}/${now:%H-%M-%S}\n"
    "sweep:\n"
    "  dir: multirun/${now:%Y-%m-%d}/${now:%H-%M-%S}\n"
    "  subdir: ${hydra.job.num}\n"
    "sweeper:\n"
    "  params: null\n"
    "help:\n"
    "  app_name: ${hydra.job.name}\n"
    "  header: \"${hydra.help.app_name} is powered by Hydra.\\n\"\n"
    "  footer: \"Powered by Hydra (https://hydra.cc)\\nUse --hydra-help to view Hydra specific help\\n\"\n"
    "  template: \"${hydra.help.header}\\n== Subcommands ==\\nmingpt COMMAND --help for a command's usage\\n\\n"
    "$APP_SUBCOMMANDS\\n\\n== Configuration groups ==\\nCompose your configuration from those groups"
    " (group=option)\\n\\n$APP_CONFIG_GROUPS\\n\\n== Config ==\\nOverride anything in the config (foo.bar=value)\\n\\n"
    "$CONFIG\\n\\n${hydra.help.footer}\\n\"\n"
    "hydra_help:\n"
    "  template: \"Hydra (${hydra.runtime.version})\\nSee https://hydra.cc for more info.\\n\\n== Flags ==\\n"
    "$FLAGS_HELP\\n\\n== Configuration groups ==\\nCompose your configuration from those groups (For example, append"
    " hydra/job_logging=disabled to command line)\\n\\n$HYDRA_CONFIG_GROUPS\\n\\nUse '--cfg hydra' to Show the Hydra"
    " config.\\n\"\n"
    "  hydra_help: ???\n"
    "hydra_logging: default\n"
    "job_logging: default\n"
    "output_subdir: .hydra\n"
    "overrides:\n"
    "  hydra: []\n"
    "  task: []\n"
    "job:\n"
    "  name: " HYDRA_JOB_NAME "\n"
    "  chdir: null\n"
    "  override_dirname: ''\n"
    "  id: ???\n"
    "  num: ???\n"
    "  config_name: ''\n"
    "  env_set: {}\n"
    "  env_copy: []\n"
    "  config:\n"
    "    override_dirname:\n"
    "      kv_sep: '='\n"
    "      item_sep: ','\n"
    "      exclude_keys: []\n"
    "runtime:\n"
    "  version: " HYDRA_VERSION "\n"
    "  version_base: '1.3'\n"
    "  cwd: ''\n"
    "  config_sources: []\n"
    "  output_dir: ???\n"
    "  choices:\n"
    "    hydra/job_logging: default\n"
    "    hydra/hydra_logging: default\n"
    "verbose: false\n"
    "mode: RUN\n";

// Sets tree[path] = v (v owned), creating maps on the way.
static void put_path(CfgNode *tree, const char *path, CfgNode *v) {
    CfgNode *node = tree;
    const char *p = path;
    for (;;) {
        size_t len = strcspn(p, ".");
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)len, p);
        if (!p[len]) {
            cfg_map_put(node, key, v);
            return;
        }
        CfgNode *next = cfg_map_get(node, key);
        if (!next || next->type != CFG_MAP) {
            cfg_map_put(node, key, cfg_new_map());
            next = cfg_map_get(node, key);
        }
        node = next;
        p += len + 1;
    }
}

CfgNode *hydra_defaults_node(const HydraStatic *st) {
    char err[512];
    CfgNode *h = cfg_parse_string(HYDRA_DEFAULTS_YAML, "<hydra defaults>", err, sizeof err);
    if (!h) abort();  // the text above is fixed: a failure is a bug
    put_path(h, "job.config_name", cfg_new_str(st->config_name ? st->config_name : ""));
    put_path(h, "runtime.cwd", cfg_new_str(st->cwd ? st->cwd : ""));
    // Hydra's ConfigSourceInfo list: path without its scheme, schema, provider.
    CfgNode *list = cfg_new_list();
    const SearchDir main_only = {.provider = "main", .schema = "file", .path = (char *)(st->config_dir ? st->config_dir : "")};
    const int n = st->search_path ? st->search_path->n : 1;
    for (int i = 0; i < n; i++) {
        const SearchDir *d = st->search_path ? &st->search_path->dirs[i] : &main_only;
        CfgNode *src = cfg_new_map();
        cfg_map_put(src, "path", cfg_new_str(d->path));
        cfg_map_put(src, "schema", cfg_new_str(d->schema));
        cfg_map_put(src, "provider", cfg_new_str(d->provider));
        cfg_list_push(list, src);
    }
    put_path(h, "runtime.config_sources", list);
    return h;
}

static CfgNode *string_list(char *const *s, int n) {
    CfgNode *l = cfg_new_list();
    for (int i = 0; i < n; i++) cfg_list_push(l, cfg_new_str(s[i]));
    return l;
}

void hydra_set_runtime(CfgNode *tree, const HydraRuntime *rt) {
    CfgNode *h = cfg_map_get(tree, "hydra");
    if (!h || h->type != CFG_MAP) {
        cfg_map_put(tree, "hydra", cfg_new_map());
        h = cfg_map_get(tree, "hydra");
    }
    put_path(h, "mode", cfg_new_str(rt->multirun ? "MULTIRUN" : "RUN"));
    if (rt->job_num >= 0) {
        put_path(h, "job.num", cfg_new_int(rt->job_num));
        put_path(h, "job.id", cfg_new_int(rt->job_num));
    }
    put_path(h, "runtime.output_dir", rt->output_dir ? cfg_new_str(rt->output_dir) : cfg_new_null());
    put_path(h, "overrides.task", string_list(rt->task, rt->n_task));
    put_path(h, "overrides.hydra", string_list(rt->hydra, rt->n_hydra));
    char *dirname = hydra_override_dirname(tree, rt->task, rt->n_task);
    put_path(h, "job.override_dirname", cfg_new_str(dirname));
    free(dirname);
    // runtime.choices mirrors the logging switches (hydra/job_logging=disabled).
    const char *groups[] = {"job_logging", "hydra_logging"};
    for (int i = 0; i < 2; i++) {
        const CfgNode *v = cfg_map_get(h, groups[i]);
        char key[64];
        snprintf(key, sizeof key, "hydra/%s", groups[i]);
        CfgNode *choices = cfg_select(h, "runtime.choices");
        if (choices && choices->type == CFG_MAP && v && v->type == CFG_STRING) cfg_map_put(choices, key, cfg_new_str(v->s));
    }
}

bool hydra_is_hydra_override(const char *text) {
    const char *k = text + strspn(text, "+~");
    return (strncmp(k, "hydra", 5) == 0 && (k[5] == 0 || k[5] == '.' || k[5] == '/' || k[5] == '='));
}

// The key of an override text, without its +/++/~ prefix and value.
static void override_key(const char *text, char *buf, size_t len) {
    const char *k = text + strspn(text, "+~");
    snprintf(buf, len, "%.*s", (int)strcspn(k, "="), k);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// Node at path as a string ("" when absent or not a string).
static const char *str_at(const CfgNode *tree, const char *path, const char *dflt) {
    const CfgNode *n = cfg_select(tree, path);
    return n && n->type == CFG_STRING ? n->s : dflt;
}

char *hydra_override_dirname(const CfgNode *tree, char *const *task, int n_task) {
    const char *kv = str_at(tree, "hydra.job.config.override_dirname.kv_sep", "=");
    const char *item = str_at(tree, "hydra.job.config.override_dirname.item_sep", ",");
    const CfgNode *exclude = cfg_select(tree, "hydra.job.config.override_dirname.exclude_keys");
    char **lines = calloc((size_t)n_task + 1, sizeof *lines);
    if (!lines) abort();
    int n = 0;
    for (int i = 0; i < n_task; i++) {
        char key[512];
        override_key(task[i], key, sizeof key);
        bool skip = false;
        for (size_t j = 0; exclude && exclude->type == CFG_LIST && j < exclude->n; j++)
            skip |= exclude->kids[j]->type == CFG_STRING && !strcmp(exclude->kids[j]->s, key);
        if (!skip) lines[n++] = task[i];
    }
    qsort(lines, (size_t)n, sizeof *lines, cmp_str);
    // Joined with item_sep, then every '=' replaced by kv_sep (Hydra's re.sub). Both separators
    // come from the config and can be long: the text is cut at CFG_MAX_SCALAR_BYTES (a directory
    // name that long fails anyway) rather than sized as the product of two long strings.
    StrBuf out = {0};
    const size_t cap = CFG_MAX_SCALAR_BYTES;
    for (int i = 0; i < n && out.n < cap; i++) {
        if (i) sb_add(&out, item, strlen(item) < cap - out.n ? strlen(item) : cap - out.n);
        for (const char *c = lines[i]; *c && out.n < cap; c++) {
            size_t k = *c == '=' ? strlen(kv) : 1;
            sb_add(&out, *c == '=' ? kv : c, k < cap - out.n ? k : cap - out.n);
        }
    }
    free(lines);
    return sb_take(&out);
}

char *hydra_get_string(const CfgNode *tree, const char *path, bool *failed, char *err, size_t errlen) {
    *failed = false;
    CfgNode *v = cfg_resolve(tree, path, true, err, errlen);
    if (!v) {
        *failed = true;
        return NULL;
    }
    char *s = NULL;
    if (v->type == CFG_STRING) {
        s = cfg_strdup(v->s);
    } else if (v->type == CFG_MAP || v->type == CFG_LIST) {
        *failed = true;
        cfg_errf(err, errlen, "%s must be a string, got a %s", path, cfg_type_name(v->type));
    } else if (v->type != CFG_NULL) {
        char buf[256];
        cfg_repr(v, buf, sizeof buf);
        s = cfg_strdup(buf);
    }
    cfg_free(v);
    return s;
}

// ========================================================================== sweeps

typedef struct {
    char *key;      // key with its +/++/~ prefix: a repeated key replaces the earlier one
    char **values;  // "key=value" per job value
    int n;
} Axis;

static void axis_free(Axis *a) {
    free(a->key);
    hydra_strings_free(a->values, a->n);
}

// The axis an override spans: one value, or the rendered values of its sweep.
static int make_axis(const char *text, Axis *ax, char *err, size_t errlen) {
    CfgOverride ov;
    if (cfg_override_parse_ex(text, true, &ov, err, errlen)) return -1;
    const char *prefix = ov.kind == CFG_OV_FORCE_ADD ? "++" : ov.kind == CFG_OV_ADD ? "+" : ov.kind == CFG_OV_DELETE ? "~" : "";
    ax->key = cfg_printf("%s%s", prefix, ov.key);
    ax->n = ov.n_sweep ? (int)ov.n_sweep : 1;
    ax->values = cfg_realloc(NULL, (size_t)ax->n * sizeof *ax->values);
    if (!ov.n_sweep) ax->values[0] = cfg_strdup(text);
    for (int i = 0; i < (int)ov.n_sweep; i++) {
        char *v = cfg_override_render(ov.sweep[i]);
        ax->values[i] = cfg_printf("%s=%s", ax->key, v);
        free(v);
    }
    cfg_override_free(&ov);
    return 0;
}

#define MAX_JOBS 100000
#define MAX_JOBS_BYTES (64u << 20)  // the job list's text: 100k jobs x a 128 KiB override is 12 GB

int hydra_sweep_jobs(char *const *args, int n, HydraJob **jobs, size_t *n_jobs, char *err, size_t errlen) {
    *jobs = NULL;
    *n_jobs = 0;
    Axis *axes = calloc((size_t)n + 1, sizeof *axes);
    if (!axes) abort();
    int n_axes = 0, rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        Axis ax;
        if (make_axis(args[i], &ax, err, errlen)) { rc = -1; break; }
        int k = 0;
        while (k < n_axes && strcmp(axes[k].key, ax.key) != 0) k++;
        if (k < n_axes) axis_free(&axes[k]);  // later value, earlier position
        else n_axes++;
        axes[k] = ax;
    }
    size_t total = 1;
    for (int k = 0; k < n_axes && !rc; k++) {
        total *= (size_t)axes[k].n;
        if (total > MAX_JOBS) rc = cfg_errf(err, errlen, "The sweep has more than %d jobs", MAX_JOBS);
    }
    // Every job holds one value of each axis: an axis's values appear total / n times each.
    double bytes = 0;
    for (int k = 0; k < n_axes && !rc; k++) {
        double axis = 0;
        for (int v = 0; v < axes[k].n; v++) axis += (double)strlen(axes[k].values[v]) + 1;
        bytes += axis * (double)(total / (size_t)axes[k].n);
    }
    if (!rc && bytes > MAX_JOBS_BYTES)
        rc = cfg_errf(err, errlen, "The sweep's %zu jobs would hold %.0f MiB of overrides, more than %u MiB, the limit",
                      total, bytes / (1 << 20), MAX_JOBS_BYTES >> 20);
    if (!rc) {
        *jobs = calloc(total, sizeof **jobs);
        if (!*jobs) abort();
        *n_jobs = total;
        for (size_t j = 0; j < total; j++) {
            HydraJob *job = &(*jobs)[j];
            job->ov = calloc((size_t)n_axes + 1, sizeof *job->ov);
            if (!job->ov) abort();
            job->n = n_axes;
            size_t rest = j;  // mixed-radix digits, the last axis fastest
            for (int k = n_axes - 1; k >= 0; k--) {
                job->ov[k] = cfg_strdup(axes[k].values[rest % (size_t)axes[k].n]);
                rest /= (size_t)axes[k].n;
            }
        }
    }
    for (int k = 0; k < n_axes; k++) axis_free(&axes[k]);
    free(axes);
    return rc;
}

void hydra_jobs_free(HydraJob *jobs, size_t n) {
    for (size_t i = 0; i < n; i++) hydra_strings_free(jobs[i].ov, jobs[i].n);
    free(jobs);
}

char **hydra_sweeper_params(const CfgNode *tree, int *n) {
    const CfgNode *p = cfg_select(tree, "hydra.sweeper.params");
    *n = 0;
    if (!p || p->type != CFG_MAP) return NULL;
    char **out = calloc(p->n + 1, sizeof *out);
    if (!out) abort();
    for (size_t i = 0; i < p->n; i++) {
        char *v = cfg_repr_alloc(p->kids[i], NULL);  // whole: a long sweep must not be cut
        out[(*n)++] = cfg_printf("%s=%s", p->kids[i]->key, v);
        free(v);
    }
    return out;
}

void hydra_strings_free(char **s, int n) {
    for (int i = 0; s && i < n; i++) free(s[i]);
    free(s);
}

void hydra_list_repr(char *const *s, int n, char *buf, size_t len) {
    CfgNode *l = string_list(s, n);
    cfg_repr(l, buf, len);
    cfg_free(l);
}

// ========================================================================== printing

// Does `package` lie in the part of the config that `what` shows?
static bool package_visible(HydraCfgWhat what, const char *package) {
    bool hydra = strncmp(package, "hydra", 5) == 0 && (package[5] == 0 || package[5] == '.');
    return what == HYDRA_CFG_ALL || (what == HYDRA_CFG_HYDRA) == hydra;
}

// Copy of tree[key] (resolved against the whole tree when asked), or NULL with err.
static CfgNode *value_at(const CfgNode *tree, const char *key, bool resolve, char *err, size_t errlen) {
    if (resolve) return cfg_resolve(tree, key, false, err, errlen);
    CfgNode *n = cfg_select(tree, key);
    if (!n) cfg_errf(err, errlen, "Key '%s' not found", key);
    return cfg_copy(n);
}

// The map --cfg prints: job keys, the hydra node (without help templates), or both.
static CfgNode *cfg_view(const CfgNode *tree, HydraCfgWhat what, bool resolve, char *err, size_t errlen) {
    CfgNode *view = cfg_new_map();
    for (int pass = 0; pass < 2; pass++) {  // `hydra:` first, as Hydra prints --cfg all
        for (size_t i = 0; tree->type == CFG_MAP && i < tree->n; i++) {
            const char *key = tree->kids[i]->key;
            bool is_hydra = !strcmp(key, "hydra");
            if (is_hydra != (pass == 0)) continue;
            if ((is_hydra && what == HYDRA_CFG_JOB) || (!is_hydra && what == HYDRA_CFG_HYDRA)) continue;
            CfgNode *v = value_at(tree, key, resolve, err, errlen);
            if (!v) { cfg_free(view); return NULL; }
            if (is_hydra && what == HYDRA_CFG_HYDRA) {
                cfg_map_del(v, "help");
                cfg_map_del(v, "hydra_help");
            }
            cfg_map_put(view, key, v);
        }
    }
    return view;
}

static int print_yaml(FILE *out, const CfgNode *n, char *err, size_t errlen) {
    char *yaml = cfg_to_yaml(n);
    if (!yaml) return cfg_errf(err, errlen, "the config cannot be written as YAML (invalid UTF-8?)");
    fputs(yaml, out);
    free(yaml);
    return 0;
}

int hydra_print_cfg(FILE *out, const CfgNode *tree, HydraCfgWhat what, const char *package, bool resolve,
                    char *err, size_t errlen) {
    if (package && !strcmp(package, "_global_")) package = NULL;
    if (!package) {
        CfgNode *view = cfg_view(tree, what, resolve, err, errlen);
        if (!view) return -1;
        int rc = print_yaml(out, view, err, errlen);
        cfg_free(view);
        return rc;
    }
    if (!package_visible(what, package) || !cfg_select(tree, package))
        return cfg_errf(err, errlen, "package '%s' not found in config", package);
    CfgNode *v = value_at(tree, package, resolve, err, errlen);
    if (!v) return -1;
    int rc = 0;
    if (v->type == CFG_MAP || v->type == CFG_LIST) {
        if (what == HYDRA_CFG_HYDRA && !strcmp(package, "hydra")) {
            cfg_map_del(v, "help");
            cfg_map_del(v, "hydra_help");
        }
        fprintf(out, "# @package %s\n", package);
        rc = print_yaml(out, v, err, errlen);
    } else {
        // A leaf: OmegaConf.select resolves it; printed as Python's str().
        CfgNode *r = cfg_resolve(tree, package, false, err, errlen);
        if (!r) { cfg_free(v); return -1; }
        char *text = cfg_repr_alloc(r, NULL);
        fprintf(out, "%s\n", text);
        free(text);
        cfg_free(r);
    }
    cfg_free(v);
    return rc;
}

// Help texts longer than this come from a crafted template ($CONFIG thousands of times).
#define MAX_HELP_BYTES (16u << 20)

// Fills Python string.Template placeholders ($NAME) of tmpl from names/values. Returns -1 (with
// the message in err) when the text would pass MAX_HELP_BYTES.
static int fill_template(FILE *out, const char *tmpl, const char *const *names, const char *const *values, int n,
                         char *err, size_t errlen) {
    size_t written = 0;
    for (const char *p = tmpl; *p; p++) {
        if (written > MAX_HELP_BYTES)
            return cfg_errf(err, errlen, "the help text is longer than %u MiB, the limit (check the help template)",
                            MAX_HELP_BYTES >> 20);
        written++;
        if (p[0] == '$' && p[1] == '$') { fputc('$', out); p++; continue; }
        int hit = -1;
        for (int i = 0; p[0] == '$' && i < n && hit < 0; i++) {
            size_t len = strlen(names[i]);
            char after = p[1 + len];
            bool ident = (after >= 'A' && after <= 'Z') || (after >= 'a' && after <= 'z') ||
                         (after >= '0' && after <= '9') || after == '_';
            if (!strncmp(p + 1, names[i], len) && !ident) hit = i;
        }
        if (hit < 0) { fputc(*p, out); continue; }
        fputs(values[hit], out);
        written += strlen(values[hit]);
        p += strlen(names[hit]);
    }
    return 0;
}

// The commands, one line each ("sample : print text sampled from a snapshot"), without a final
// newline: a malloc'd string.
static char *commands_text(const HydraCommand *cmds, size_t n_cmds) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) abort();
    for (size_t i = 0; i < n_cmds; i++) fprintf(f, "%s%s : %s", i ? "\n" : "", cmds[i].name, cmds[i].description);
    if (fclose(f)) abort();
    return text;
}

int hydra_print_help(FILE *out, const CfgNode *tree, bool resolve, const HydraCommand *cmds, size_t n_cmds,
                     char *err, size_t errlen) {
    bool failed;
    char *tmpl = hydra_get_string(tree, "hydra.help.template", &failed, err, errlen);
    if (failed) return -1;
    CfgNode *view = cfg_view(tree, HYDRA_CFG_JOB, resolve, err, errlen);
    char *yaml = view ? cfg_to_yaml(view) : NULL;
    cfg_free(view);
    if (!yaml) {
        free(tmpl);
        return view ? cfg_errf(err, errlen, "the config cannot be written as YAML") : -1;
    }
    char *commands = commands_text(cmds, n_cmds);
    const char *names[] = {"APP_SUBCOMMANDS", "APP_CONFIG_GROUPS", "CONFIG"}, *values[] = {commands, "", yaml};
    int rc = fill_template(out, tmpl ? tmpl : "", names, values, 3, err, errlen);
    if (!rc) fputc('\n', out);  // Python's print()
    free(commands);
    free(yaml);
    free(tmpl);
    return rc;
}

static const char FLAGS_HELP[] =
    "--help,-h : Application's help\n"
    "--hydra-help : Hydra's help\n"
    "--version : Show Hydra's version and exit\n"
    "--cfg,-c : Show config instead of running [job|hydra|all]\n"
    "--resolve : Used in conjunction with --cfg, resolve config interpolations before printing.\n"
    "--package,-p : Config package to show\n"
    "--run,-r : Run a job\n"
    "--multirun,-m : Run multiple jobs with the configured launcher and sweeper\n"
    "--shell-completion,-sc : Install or Uninstall shell completion:\n"
    "    Bash - Install:\n"
    "    eval \"$(./mingpt -sc install=bash)\"\n"
    "    Bash - Uninstall:\n"
    "    eval \"$(./mingpt -sc uninstall=bash)\"\n"
    "--config-path,-cp : Overrides the config_path (default: the current directory).\n"
    "                    The config_path is absolute or relative to the current directory\n"
    "--config-name,-cn : Overrides the config_name (default: " HYDRA_DEFAULT_CONFIG ")\n"
    "--config-dir,-cd : Adds an additional config dir to the config search path\n"
    "--info,-i : Print Hydra information [all|config|defaults|defaults-tree|plugins|searchpath]"
    " (mingpt: searchpath)\n"
    "Overrides : Any key=value arguments to override config values (use dots for.nested=overrides)\n"
    "\n"
    "mingpt COMMAND ... runs a subcommand (mingpt COMMAND --help for its usage):\n";

int hydra_print_hydra_help(FILE *out, const CfgNode *tree, const HydraCommand *cmds, size_t n_cmds, char *err,
                           size_t errlen) {
    bool failed;
    char *tmpl = hydra_get_string(tree, "hydra.hydra_help.template", &failed, err, errlen);
    if (failed) return -1;
    char *commands = commands_text(cmds, n_cmds), *flags = malloc(sizeof FLAGS_HELP + strlen(commands));
    if (!flags) abort();
    snprintf(flags, sizeof FLAGS_HELP + strlen(commands), "%s%s", FLAGS_HELP, commands);
    const char *names[] = {"FLAGS_HELP", "HYDRA_CONFIG_GROUPS"};
    const char *values[] = {flags, "hydra/hydra_logging: default, disabled\nhydra/job_logging: default, disabled"};
    int rc = fill_template(out, tmpl ? tmpl : "", names, values, 2, err, errlen);
    if (!rc) fputc('\n', out);
    free(flags);
    free(commands);
    free(tmpl);
    return rc;
}
