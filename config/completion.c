// config/completion.c — see completion.h.
#include "config/completion.h"

#include <dirent.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"

#define COUNT(a) (sizeof(a) / sizeof *(a))

// Enumerated values of keys outside the schema (Hydra's own settings).
static const struct { const char *key, *values; } HYDRA_CHOICES[] = {
    {"hydra.mode", "RUN|MULTIRUN"},
    {"hydra.job.chdir", "true|false|null"},
    {"hydra.job_logging", "default|disabled"},
    {"hydra.hydra_logging", "default|disabled"},
    {"hydra.verbose", "true|false"},
};

// The bash side: asks mingpt for the candidates of the line up to the cursor. Readline replaces
// only the part of the word after its last COMP_WORDBREAKS character (by default '=' and ':' are
// among them), while Hydra's candidates hold the whole word, so each candidate loses the word's
// text up to and including that character (git's completion does the same for ':'). COMP_WORDS
// is not used for this: bash splits it at those characters too, so its last word is "=" right
// after "key=", where readline's is empty. One candidate gets a space unless it ends a key
// ("=") or a section (".").
static const char BASH_SCRIPT[] =
    "# mingpt bash completion (Hydra's --shell-completion): eval \"$(mingpt -sc install=bash)\"\n"
    "_mingpt_completion()\n"
    "{\n"
    "    local exe=${COMP_WORDS[0]}\n"
    "    exe=${exe/#\\~/$HOME}\n"
    "    command -v \"$exe\" >/dev/null 2>&1 || return 0\n"
    "    local line=${COMP_LINE:0:COMP_POINT}\n"
    "    line=${line#*[[:space:]]}\n"
    "    [ \"$line\" = \"${COMP_LINE:0:COMP_POINT}\" ] && return 0\n"
    "    local word=${line##*[[:space:]]} prefix= c i cands\n"
    "    for ((i = ${#word} - 1; i >= 0; i--)); do\n"
    "        if [[ ${COMP_WORDBREAKS-} == *\"${word:i:1}\"* ]]; then prefix=${word:0:i+1}; break; fi\n"
    "    done\n"
    "    mapfile -t cands < <(\"$exe\" --shell-completion \"query=$line\" 2>/dev/null)\n"
    "    COMPREPLY=()\n"
    "    for c in \"${cands[@]}\"; do [[ $c == \"$prefix\"* ]] && COMPREPLY+=(\"${c#\"$prefix\"}\"); done\n"
    "    if [ ${#COMPREPLY[@]} -eq 1 ] && [[ $prefix${COMPREPLY[0]} != *[=.] ]]; then COMPREPLY[0]+=' '; fi\n"
    "}\n"
    "complete -o nospace -o default -F _mingpt_completion mingpt ./mingpt\n";

int completion_main(const HydraArgs *a, const CompletionSubcommand *subs, size_t n_subs, FILE *out, FILE *err) {
    const char *cmd = NULL, *arg = NULL;
    int found = 0;
    for (int i = 0; i < a->n_overrides; i++) {
        static const char *const SUB[] = {"install=", "uninstall=", "query="};
        for (size_t k = 0; k < COUNT(SUB); k++)
            if (!strncmp(a->overrides[i], SUB[k], strlen(SUB[k]))) {
                cmd = SUB[k];
                arg = a->overrides[i] + strlen(SUB[k]);
                found++;
            }
    }
    if (found != 1) {
        fprintf(err, "Expecting one subcommand from ['install', 'uninstall', 'query'] to be set\n");
        return 2;
    }
    if (!strcmp(cmd, "query=")) {
        char line[8192];
        if (!strcmp(arg, "bash")) {  // Hydra's own protocol: the line is in the environment
            const char *cl = getenv("COMP_LINE"), *cp = getenv("COMP_POINT");
            size_t n = cl ? strlen(cl) : 0, point = cp ? strtoul(cp, NULL, 10) : n;
            snprintf(line, sizeof line, "%.*s", (int)(point < n ? point : n), cl ? cl : "");
            const char *rest = line + strcspn(line, " \t");  // without the program's name
            memmove(line, *rest ? rest + 1 : rest, strlen(*rest ? rest + 1 : rest) + 1);
        } else {
            snprintf(line, sizeof line, "%s", arg);
        }
        completion_query(line, subs, n_subs, out);
        return 0;
    }
    if (strcmp(arg, "bash") != 0) {
        fprintf(err, "No completion plugin for '%s' found, available : \n\tbash\n", arg);
        return 2;
    }
    fputs(!strcmp(cmd, "install=") ? BASH_SCRIPT : "complete -r mingpt ./mingpt\n", out);
    return 0;
}

// ========================================================================== candidates

static void emit_if(FILE *out, const char *word, const char *cand) {
    if (!strncmp(cand, word, strlen(word))) fprintf(out, "%s\n", cand);
}

// Each value of "a|b|c" as prefix + value.
static void emit_choices(FILE *out, const char *word, const char *prefix, const char *choices) {
    for (const char *c = choices; *c;) {
        size_t n = strcspn(c, "|");
        char cand[2400];
        snprintf(cand, sizeof cand, "%.1200s%.*s", prefix, (int)(n < 1024 ? n : 1024), c);
        emit_if(out, word, cand);
        c += n + (c[n] == '|');
    }
}

// The allowed values of a key ("a|b"), or NULL: schema choices, booleans, Hydra's switches.
static const char *enumerated(const char *key, char *buf, size_t len) {
    size_t n;
    const ConfigField *f = config_schema(&n);
    for (size_t i = 0; i < n; i++) {
        snprintf(buf, len, "%s.%s", f[i].section, f[i].key);
        if (strcmp(buf, key) != 0) continue;
        if (f[i].type == CONFIG_BOOL) return "true|false";
        return f[i].choices;
    }
    for (size_t i = 0; i < COUNT(HYDRA_CHOICES); i++)
        if (!strcmp(HYDRA_CHOICES[i].key, key)) return HYDRA_CHOICES[i].values;
    return NULL;
}

// Hydra's _get_matches: the keys of map `node` (path `base`, "" for the root) starting with
// `partial`, written "<base.>key." for a map and "<base.>key=" otherwise. with_eq false: bare
// keys (--package).
static void emit_keys(FILE *out, const CfgNode *node, const char *base, const char *partial, const char *op,
                      bool with_eq) {
    for (size_t i = 0; node && node->type == CFG_MAP && i < node->n; i++) {
        const CfgNode *k = node->kids[i];
        if (strncmp(k->key, partial, strlen(partial)) != 0) continue;
        bool map = k->type == CFG_MAP && k->n;
        fprintf(out, "%s%s%s%s%s\n", op, base, *base ? "." : "", k->key, map ? "." : with_eq ? "=" : "");
    }
}

// Config keys and values for word (an override being typed) from the composed tree.
static void complete_override(FILE *out, const CfgNode *tree, const char *word, bool with_eq) {
    size_t opn = with_eq ? strspn(word, "+~") : 0;
    char op[4];
    snprintf(op, sizeof op, "%.*s", (int)(opn < 3 ? opn : 2), word);
    const char *key = word + opn;
    const char *eq = with_eq ? strchr(key, '=') : NULL;
    if (eq) {  // key=value: the enumerated values, else the current one
        char path[1024], buf[1024], prefix[1100];
        snprintf(path, sizeof path, "%.*s", (int)(eq - key), key);
        snprintf(prefix, sizeof prefix, "%s%s=", op, path);
        const char *choices = enumerated(path, buf, sizeof buf);
        const CfgNode *v = cfg_select(tree, path);
        if (choices) emit_choices(out, word, prefix, choices);
        else if (v && v->type != CFG_MAP && v->type != CFG_LIST && v->type != CFG_NULL) {
            char val[1024], cand[2200];
            cfg_repr(v, val, sizeof val);
            if (v->type == CFG_BOOL) snprintf(val, sizeof val, "%s", v->b ? "true" : "false");
            snprintf(cand, sizeof cand, "%s%s", prefix, val);
            emit_if(out, word, cand);
        }
        return;
    }
    const char *dot = strrchr(key, '.');
    char base[1024];
    snprintf(base, sizeof base, "%.*s", dot ? (int)(dot - key) : 0, key);
    emit_keys(out, dot ? cfg_select(tree, base) : tree, base, dot ? dot + 1 : key, op, with_eq);
}

// The *.yaml names in the search path's directories (for --config-name).
static void complete_config_names(FILE *out, const HydraArgs *a, const char *word) {
    SearchPath sp;
    hydra_search_path(a, &sp);
    for (int i = 0; i < sp.n; i++) {
        DIR *d = sp.dirs[i].lookup ? opendir(sp.dirs[i].lookup) : NULL;
        for (struct dirent *e; d && (e = readdir(d));) {
            size_t n = strlen(e->d_name);
            if (n <= 5 || strcmp(e->d_name + n - 5, ".yaml") != 0 || e->d_name[0] == '.') continue;
            char name[300];
            snprintf(name, sizeof name, "%.*s", (int)(n - 5), e->d_name);
            emit_if(out, word, name);
        }
        if (d) closedir(d);
    }
    search_path_free(&sp);
}

// The config of the line's flags and overrides (those that compose; else none of them), with
// Hydra's `hydra` node; NULL when there is no config.
static CfgNode *compose_for(const HydraArgs *a) {
    char file[PATH_MAX], err[4096], cwd[PATH_MAX], dir[PATH_MAX];
    if (hydra_find_config(a, file, sizeof file, err, sizeof err) || !getcwd(cwd, sizeof cwd)) return NULL;
    snprintf(dir, sizeof dir, "%s", file);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    SearchPath sp;
    hydra_search_path(a, &sp);
    HydraStatic st = {.config_name = a->config_name ? a->config_name : HYDRA_DEFAULT_CONFIG,
                      .config_dir = slash ? dir : cwd, .cwd = cwd, .search_path = &sp};
    CfgNode *h = hydra_defaults_node(&st);
    search_path_free(&sp);
    CfgNode *tree = config_compose_hydra(file, h, a->n_overrides, a->overrides, NULL, err, sizeof err);
    if (!tree) tree = config_compose_hydra(file, h, 0, NULL, NULL, err, sizeof err);
    cfg_free(h);
    return tree;
}

static bool one_of(const char *s, const char *list) {  // list: "a|b|c"
    for (const char *c = list; *c;) {
        size_t n = strcspn(c, "|");
        if (strlen(s) == n && !strncmp(s, c, n)) return true;
        c += n + (c[n] == '|');
    }
    return false;
}

// The value completions of a flag that takes one; false when prev is no such flag.
static bool complete_flag_value(FILE *out, const char *prev, const HydraArgs *a, const char *word) {
    if (one_of(prev, "--cfg|-c")) emit_choices(out, word, "", "job|hydra|all");
    else if (one_of(prev, "--info|-i")) emit_choices(out, word, "", "all|config|defaults|defaults-tree|plugins|searchpath");
    else if (one_of(prev, "--config-name|-cn")) complete_config_names(out, a, word);
    else if (one_of(prev, "--package|-p")) {
        CfgNode *tree = compose_for(a);
        if (tree) complete_override(out, tree, word, false);
        cfg_free(tree);
    } else if (!one_of(prev, "--config-path|-cp|--config-dir|-cd")) {
        return false;
    }
    return true;  // (a directory: nothing, bash completes file names)
}

void completion_query(const char *line, const CompletionSubcommand *subs, size_t n_subs, FILE *out) {
    // The words: split at blanks; a trailing blank (or nothing) starts a new, empty word.
    size_t len = strlen(line);
    char *copy = cfg_strdup(line);
    char **argv = calloc(len / 2 + 3, sizeof *argv);
    if (!argv) abort();
    int argc = 0;
    argv[argc++] = "mingpt";
    for (char *save = NULL, *w = strtok_r(copy, " \t\n", &save); w; w = strtok_r(NULL, " \t\n", &save)) argv[argc++] = w;
    const bool new_word = len == 0 || strchr(" \t\n", line[len - 1]);
    const char *word = new_word ? "" : argv[--argc];
    const char *prev = argc > 1 ? argv[argc - 1] : NULL;
    argv[argc] = NULL;
    if (argc > 1 && argv[1][0] != '-' && !strchr(argv[1], '=')) {
        for (size_t i = 0; i < n_subs; i++)   // a subcommand's own arguments: its candidates
            if (!strcmp(argv[1], subs[i].name)) {
                if (subs[i].complete) subs[i].complete(subs[i].ctx, prev, word, out);
                goto done;
            }
    }
    HydraArgs a;
    memset(&a, 0, sizeof a);
    // (a flag whose value is being typed is left out: it would be an incomplete line; a line
    // argparse refuses completes as if it had no flags)
    const int n_parse = prev && prev[0] == '-' ? argc - 1 : argc;
    FILE *null = fopen("/dev/null", "w");
    if (null && hydra_parse_args(n_parse, argv, &a, null, null) != 0) {
        hydra_args_free(&a);
        memset(&a, 0, sizeof a);
    }
    if (null) fclose(null);
    if (prev && prev[0] == '-' && complete_flag_value(out, prev, &a, word)) goto free_args;
    if (word[0] == '-') {
        const char *flags[64];
        const size_t n_flags = hydra_flags(flags, 64);
        for (size_t i = 0; i < n_flags; i++) emit_if(out, word, flags[i]);
        goto free_args;
    }
    if (argc == 1)
        for (size_t i = 0; i < n_subs; i++) emit_if(out, word, subs[i].name);
    CfgNode *tree = compose_for(&a);
    if (tree) complete_override(out, tree, word, true);
    cfg_free(tree);
free_args:
    hydra_args_free(&a);
done:
    free(argv);
    free(copy);
}
