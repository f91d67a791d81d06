// tests/test_hydra.c — the Hydra layer below the command line: interpolation, sweeps and
// their rendering, OmegaConf's YAML quoting, override_dirname, argparse emulation, run
// directories, summary.json and the log file. The command line itself is covered by
// tests/test_hydra_*.sh.
#include "tests/test_util.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/cfg_interp.h"
#include "config/cfg_override.h"
#include "config/cfg_tree.h"
#include "config/hydra.h"
#include "process/log.h"
#include "app/run_dir.h"

#define ERRLEN 4096

static CfgNode *yaml(const char *text) {
    char err[ERRLEN];
    CfgNode *n = cfg_parse_string(text, "t.yaml", err, sizeof err);
    if (!n) fail_msg("%s", err);
    return n;
}

// Resolves path in the tree given as YAML; returns Python's str() of the value.
static void resolved_str(const char *text, const char *path, char *out, size_t len) {
    CfgNode *t = yaml(text);
    char err[ERRLEN];
    CfgNode *v = cfg_resolve(t, path, true, err, sizeof err);
    if (!v) fail_msg("%s: %s", path, err);
    cfg_repr(v, out, len);
    cfg_free(v);
    cfg_free(t);
}

// The error resolving path must be exactly want.
static void resolve_error(const char *text, const char *path, bool throw_missing, const char *want) {
    CfgNode *t = yaml(text);
    char err[ERRLEN] = "";
    CfgNode *v = cfg_resolve(t, path, throw_missing, err, sizeof err);
    if (v) fail_msg("%s resolved, expected: %s", path, want);
    assert_string_equal(err, want);
    cfg_free(t);
}

// ------------------------------------------------------------------------- interpolation

static void test_interpolation_values(void **state) {
    (void)state;
    const char *cfg =
        "model: {n_layer: 12, d: 0.1}\n"
        "name: run_${model.n_layer}L\n"
        "whole: ${model.n_layer}\n"
        "node: ${model}\n"
        "lst: [a, b, c]\n"
        "first: ${lst.0}\n"
        "second: ${lst[1]}\n"
        "sel: 2\n"
        "nested: ${lst[${sel}]}\n"
        "rel:\n  a: 5\n  b: ${.a}\n  c:\n    d: ${..a}\n"
        "esc: \\${model.n_layer} is ${model.n_layer}\n"
        "mix: '${model.d}/${flag}/${none}'\n"
        "flag: true\n"
        "none: null\n"
        "chain: ${whole}\n";
    char s[512];
    resolved_str(cfg, "name", s, sizeof s);
    assert_string_equal(s, "run_12L");
    CfgNode *t = yaml(cfg);
    char err[ERRLEN];
    CfgNode *v = cfg_resolve(t, "whole", true, err, sizeof err);
    assert_int_equal(v->type, CFG_INT);  // a whole-value interpolation keeps the type
    assert_int_equal(v->i, 12);
    cfg_free(v);
    v = cfg_resolve(t, "node", true, err, sizeof err);
    assert_int_equal(v->type, CFG_MAP);
    assert_int_equal(cfg_map_get(v, "n_layer")->i, 12);
    cfg_free(v);
    cfg_free(t);
    resolved_str(cfg, "first", s, sizeof s);
    assert_string_equal(s, "a");
    resolved_str(cfg, "second", s, sizeof s);
    assert_string_equal(s, "b");
    resolved_str(cfg, "nested", s, sizeof s);
    assert_string_equal(s, "c");
    resolved_str(cfg, "rel", s, sizeof s);
    assert_string_equal(s, "{'a': 5, 'b': 5, 'c': {'d': 5}}");
    resolved_str(cfg, "esc", s, sizeof s);
    assert_string_equal(s, "${model.n_layer} is 12");
    resolved_str(cfg, "mix", s, sizeof s);
    assert_string_equal(s, "0.1/True/None");
    resolved_str(cfg, "chain", s, sizeof s);
    assert_string_equal(s, "12");
}

static void test_resolvers(void **state) {
    (void)state;
    char s[512];
    setenv("MINGPT_TEST_VAR", "/d", 1);
    unsetenv("MINGPT_NOPE_VAR");
    resolved_str("a: ${oc.env:MINGPT_TEST_VAR}\n", "a", s, sizeof s);
    assert_string_equal(s, "/d");
    resolved_str("a: ${oc.env:MINGPT_NOPE_VAR,data}\n", "a", s, sizeof s);
    assert_string_equal(s, "data");
    CfgNode *t = yaml("a: ${oc.env:MINGPT_NOPE_VAR,12}\nb: ${oc.env:MINGPT_NOPE_VAR,null}\nc: ${oc.env:MINGPT_NOPE_VAR,'x,y'}\n");
    char err[ERRLEN];
    CfgNode *v = cfg_resolve(t, "a", true, err, sizeof err);
    assert_int_equal(v->type, CFG_STRING);  // the default is str()-converted
    assert_string_equal(v->s, "12");
    cfg_free(v);
    v = cfg_resolve(t, "b", true, err, sizeof err);
    assert_int_equal(v->type, CFG_NULL);
    cfg_free(v);
    v = cfg_resolve(t, "c", true, err, sizeof err);
    assert_string_equal(v->s, "x,y");
    cfg_free(v);
    cfg_free(t);

    // ${now:}: one timestamp for the process.
    time_t now = cfg_now();
    char want[64];
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(want, sizeof want, "%Y-%m-%d_%H-%M-%S", &tm);
    resolved_str("d: ${now:%Y-%m-%d}_${now:%H-%M-%S}\n", "d", s, sizeof s);
    assert_string_equal(s, want);
    sleep(1);
    resolved_str("d: ${now:%Y-%m-%d}_${now:%H-%M-%S}\n", "d", s, sizeof s);
    assert_string_equal(s, want);
    assert_true(cfg_now() == now);

    // ${hydra:...} reads the tree's hydra node; null when absent.
    resolved_str("hydra: {job: {name: gpt}}\nx: ${hydra:job.name}.log\n", "x", s, sizeof s);
    assert_string_equal(s, "gpt.log");
    resolved_str("hydra: {runtime: {output_dir: null}}\nx: ${hydra:runtime.output_dir}/s.bin\n", "x", s, sizeof s);
    assert_string_equal(s, "None/s.bin");
}

static void test_interpolation_errors(void **state) {
    (void)state;
    resolve_error("k: ${nope.x}\n", "k", true,
                  "Interpolation key 'nope.x' not found\n    full_key: k\n    object_type=dict");
    resolve_error("k1: ${k2}\nk2: ${k1}\n", "k1", true,
                  "Recursive interpolation detected\n    full_key: k2\n    object_type=dict");
    resolve_error("a: x ${a}\n", "a", true, "Recursive interpolation detected\n    full_key: a\n    object_type=dict");
    resolve_error("a:\n  b: ${a}\n", "a.b", true,
                  "Interpolation to parent node detected\n    full_key: a.b\n    object_type=dict");
    resolve_error("tag: ???\n", "tag", true, "Missing mandatory value: tag\n    full_key: tag\n    object_type=dict");
    resolve_error("tag: ???\nx: ${tag}\n", "x", true,
                  "MissingMandatoryValue while resolving interpolation: Missing mandatory value: tag\n"
                  "    full_key: x\n    object_type=dict");
    resolve_error("tag: ???\nx: a_${tag}\n", "x", false,  // pasted into a string: an error even when printing
                  "MissingMandatoryValue while resolving interpolation: Missing mandatory value: tag\n"
                  "    full_key: x\n    object_type=dict");
    unsetenv("MINGPT_NOPE_VAR");
    resolve_error("k: ${oc.env:MINGPT_NOPE_VAR}\n", "k", true,
                  "KeyError raised while resolving interpolation: \"Environment variable 'MINGPT_NOPE_VAR' not found\"\n"
                  "    full_key: k\n    object_type=dict");
    resolve_error("k: ${foo:1}\n", "k", true, "Unsupported interpolation type foo\n    full_key: k\n    object_type=dict");
    resolve_error("l:\n- ${nope}\n", "l", true, "Interpolation key 'nope' not found\n    full_key: l[0]\n    object_type=list");

    // Printing (throw_on_missing false): ??? stays, also through a whole-value interpolation.
    char err[ERRLEN];
    CfgNode *t = yaml("tag: ???\nx: ${tag}\n");
    CfgNode *v = cfg_resolve(t, "", false, err, sizeof err);
    assert_non_null(v);
    assert_string_equal(cfg_map_get(v, "x")->s, "???");
    assert_true(cfg_is_missing(cfg_map_get(v, "tag")));
    cfg_free(v);
    cfg_free(t);
}

// ------------------------------------------------------------------------- budgets
// (the limits on what crafted overrides and interpolations can make the resolver do)

typedef struct { char *p; size_t n, cap; } Text;
static void text_add(Text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void text_add(Text *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (t->n + (size_t)w + 1 > t->cap) {
        t->cap = (t->n + (size_t)w + 1) * 2;
        t->p = realloc(t->p, t->cap);
        assert_non_null(t->p);
    }
    va_start(ap, fmt);
    vsnprintf(t->p + t->n, (size_t)w + 1, fmt, ap);
    va_end(ap);
    t->n += (size_t)w;
}

// The error resolving path in text must start with want_start (the trailer follows).
static void resolve_error_starts(const char *text, const char *path, const char *want_start, const char *want_key) {
    CfgNode *t = yaml(text);
    char err[ERRLEN] = "";
    CfgNode *v = cfg_resolve(t, path, true, err, sizeof err);
    if (v) fail_msg("%s resolved, expected: %s", path, want_start);
    if (strncmp(err, want_start, strlen(want_start)) != 0) fail_msg("got: %s\nwant: %s...", err, want_start);
    char trailer[600];
    snprintf(trailer, sizeof trailer, "\n    full_key: %s", want_key);
    if (!strstr(err, trailer)) fail_msg("no '%s' in: %s", want_key, err);
    cfg_free(t);
}

// ${oc.env:X,${oc.env:X,...a}} nested `depth` deep in the value of k.
static void nested_env(Text *t, int depth) {
    t->n = 0;
    text_add(t, "k: ");
    for (int i = 0; i < depth; i++) text_add(t, "${oc.env:MINGPT_NOPE_VAR,");
    text_add(t, "a");
    for (int i = 0; i < depth; i++) text_add(t, "}");
    text_add(t, "\n");
}

// Nesting inside one value: 9000 levels overflowed the stack; 32 resolve, 33 are refused.
static void test_interpolation_nesting_limit(void **state) {
    (void)state;
    unsetenv("MINGPT_NOPE_VAR");
    Text t = {0};
    char s[64];
    nested_env(&t, CFG_INTERP_MAX_NEST);
    resolved_str(t.p, "k", s, sizeof s);
    assert_string_equal(s, "a");
    const char *want = "Interpolation nested too deeply: more than 32 levels of ${...} in one value, the limit";
    nested_env(&t, CFG_INTERP_MAX_NEST + 1);
    resolve_error_starts(t.p, "k", want, "k");
    nested_env(&t, 9000);
    resolve_error_starts(t.p, "k", want, "k");
    // Nested keys count too: ${a.${b.${c...}}}.
    t.n = 0;
    text_add(&t, "k: ");
    for (int i = 0; i < 100; i++) text_add(&t, "${x.");
    for (int i = 0; i < 100; i++) text_add(&t, "}");
    resolve_error_starts(t.p, "k", want, "k");
    free(t.p);
}

// `n` keys, each an interpolation of the next: k0 -> k1 -> ... -> k<n-1> -> end.
static void chain(Text *t, int n) {
    t->n = 0;
    for (int i = 0; i < n; i++) text_add(t, "k%d: ${k%d}\n", i, i + 1);
    text_add(t, "k%d: end\n", n);
}

// A chain that is not a cycle is "too deep", never "Recursive"; 100k keys fail at once
// (they took > 60 s: a linear key search per step, and every chain walked to depth 64).
static void test_interpolation_chain_limit(void **state) {
    (void)state;
    Text t = {0};
    char s[64];
    chain(&t, CFG_INTERP_MAX_CHAIN);
    resolved_str(t.p, "k0", s, sizeof s);
    assert_string_equal(s, "end");
    const char *want = "Interpolation chain too deep: more than 64 interpolations, each reading the next, the limit "
                       "(the chain starts at k0)";
    chain(&t, CFG_INTERP_MAX_CHAIN + 1);
    resolve_error_starts(t.p, "k0", want, "k63");
    chain(&t, 100000);
    CfgNode *tree = yaml(t.p);
    char err[ERRLEN];
    assert_null(cfg_resolve(tree, "", true, err, sizeof err));  // every key of the map
    assert_true(strncmp(err, want, strlen(want)) == 0);
    CfgNode *v = cfg_resolve(tree, "k99990", true, err, sizeof err);  // a short chain near the end
    if (!v) fail_msg("%s", err);
    assert_string_equal(v->s, "end");
    cfg_free(v);
    cfg_free(tree);
    // A cycle keeps OmegaConf's text, however long.
    resolve_error("k1: ${k2}\nk2: ${k3}\nk3: ${k1}\n", "k1", true,
                  "Recursive interpolation detected\n    full_key: k3\n    object_type=dict");
    free(t.p);
}

// Values that paste another value twice per level: 2^30 pastes took minutes. The work and
// the length of the result are bounded.
static void test_interpolation_cost_limits(void **state) {
    (void)state;
    Text t = {0};
    text_add(&t, "s0: ab\n");
    for (int i = 1; i <= 30; i++) text_add(&t, "s%d: ${s%d}${s%d}\n", i, i - 1, i - 1);
    const char *want = "Interpolation too costly: resolving s30 takes more than 1048576 steps, the limit";
    resolve_error_starts(t.p, "s30", want, "s");  // the trailer names the innermost key (s1, s2 ...)
    char s[64];
    resolved_str(t.p, "s4", s, sizeof s);  // small levels still resolve
    assert_string_equal(s, "abababababababababababababababab");
    // Trees double as well: s1: ['${s0}', '${s0}'] ...
    t.n = 0;
    text_add(&t, "s0: [ab]\n");
    for (int i = 1; i <= 30; i++) text_add(&t, "s%d: ['${s%d}', '${s%d}']\n", i, i - 1, i - 1);
    resolve_error_starts(t.p, "s30", "Interpolation too costly: resolving s30", "s");
    // ... also with a large leaf (each copy 200 kB: 2^20 copies would be 200 GB).
    t.n = 0;
    text_add(&t, "s0: [");
    for (int i = 0; i < 200000; i++) text_add(&t, "x");
    text_add(&t, "]\n");
    for (int i = 1; i <= 30; i++) text_add(&t, "s%d: ['${s%d}', '${s%d}']\n", i, i - 1, i - 1);
    resolve_error_starts(t.p, "s30", "Interpolation too costly: resolving s30", "s");
    // Many interpolations, each cheap enough, are bounded in all: 20000 keys in chains of 49.
    t.n = 0;
    for (int i = 0; i < 20000; i++) {
        if (i % 50) text_add(&t, "k%d: ${k%d}\n", i, i + 1);
        else text_add(&t, "k%d: end\n", i);
    }
    resolve_error_starts(t.p, "", "Interpolation too costly: resolving the config takes more than 16777216 steps in all",
                         "k");
    // A large config without interpolations is not work: 3 MB of plain values resolve.
    t.n = 0;
    for (int k = 0; k < 30; k++) {
        text_add(&t, "v%d: ", k);
        for (int i = 0; i < 100000; i++) text_add(&t, "y");
        text_add(&t, "\n");
    }
    CfgNode *plain = yaml(t.p);
    char perr[ERRLEN];
    CfgNode *all = cfg_resolve(plain, "", true, perr, sizeof perr);
    if (!all) fail_msg("%s", perr);
    assert_int_equal(all->n, 30);
    cfg_free(all);
    cfg_free(plain);
    // A long result: three pastes of a 100 kB value.
    t.n = 0;
    text_add(&t, "big: ");
    for (int i = 0; i < 100000; i++) text_add(&t, "x");
    text_add(&t, "\nk: ${big}${big}${big}\nok: ${big}${big}\n");
    resolve_error_starts(t.p, "k", "Interpolation result too long: more than 262144 bytes, the limit for a config value",
                         "k");
    CfgNode *tree = yaml(t.p);
    char err[ERRLEN];
    CfgNode *v = cfg_resolve(tree, "ok", true, err, sizeof err);  // was cut at 4095 bytes when pasted
    if (!v) fail_msg("%s", err);
    assert_int_equal(strlen(v->s), 200000);
    cfg_free(v);
    cfg_free(tree);
    free(t.p);
}

// --help with a template that repeats $CONFIG, and override_dirname with long separators:
// bounded output instead of gigabytes.
static void test_hydra_output_bounds(void **state) {
    (void)state;
    Text t = {0};
    text_add(&t, "trainer_config: {snapshot_path: ");
    for (int i = 0; i < 1000; i++) text_add(&t, "x");
    text_add(&t, "}\nhydra:\n  help:\n    template: '");
    for (int i = 0; i < 30000; i++) text_add(&t, "$CONFIG");
    text_add(&t, "'\n");
    CfgNode *tree = yaml(t.p);
    FILE *f = fopen("/dev/null", "w");
    assert_non_null(f);
    char err[ERRLEN];
    assert_int_not_equal(hydra_print_help(f, tree, false, NULL, 0, err, sizeof err), 0);
    assert_string_equal(err, "the help text is longer than 16 MiB, the limit (check the help template)");
    fclose(f);
    cfg_free(tree);
    t.n = 0;
    text_add(&t, "hydra: {job: {config: {override_dirname: {kv_sep: ");
    for (int i = 0; i < 200000; i++) text_add(&t, "=");
    text_add(&t, ", item_sep: ',', exclude_keys: []}}}}\n");
    tree = yaml(t.p);
    char *eq = malloc(100001);
    assert_non_null(eq);
    memset(eq, '=', 100000);
    eq[100000] = 0;
    memcpy(eq, "a='", 3);
    eq[99999] = '\'';
    char *const ov[] = {eq};
    char *d = hydra_override_dirname(tree, ov, 1);  // would be 100k x 200k bytes
    assert_int_equal(strlen(d), CFG_MAX_SCALAR_BYTES);
    assert_true(d[0] == 'a' && d[1] == '=');
    free(d);
    free(eq);
    cfg_free(tree);
    free(t.p);
}

// 100k jobs of a sweep, each holding a 100 kB override: 10 GB before; refused by its size.
static void test_sweep_bytes_limit(void **state) {
    (void)state;
    const char *key = "trainer_config.snapshot_path=";
    size_t k = strlen(key);
    char *big = malloc(k + 100001);
    assert_non_null(big);
    memcpy(big, key, k);
    memset(big + k, 'x', 100000);
    big[k + 100000] = 0;
    char *const args[] = {"trainer_config.seed=range(0,100000)", big};
    HydraJob *jobs;
    size_t n_jobs;
    char err[ERRLEN];
    assert_int_not_equal(hydra_sweep_jobs(args, 2, &jobs, &n_jobs, err, sizeof err), 0);
    assert_string_equal(err, "The sweep's 100000 jobs would hold 9542 MiB of overrides, more than 64 MiB, the limit");
    assert_int_equal(hydra_sweep_jobs(args, 1, &jobs, &n_jobs, err, sizeof err), 0);  // the range alone is fine
    assert_int_equal(n_jobs, 100000);
    hydra_jobs_free(jobs, n_jobs);
    free(big);
}

// Long values are printed and swept whole (they were cut at 4095 and 2047 bytes).
static void test_long_values_whole(void **state) {
    (void)state;
    Text t = {0};
    text_add(&t, "hydra:\n  job: {name: ");
    for (int i = 0; i < 6000; i++) text_add(&t, "n");
    text_add(&t, "}\n  sweeper:\n    params:\n      k: ");
    for (int i = 0; i < 3000; i++) text_add(&t, "%sv%d", i ? "," : "", i);
    text_add(&t, "\n");
    CfgNode *tree = yaml(t.p);
    char *buf = NULL, err[ERRLEN];
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(hydra_print_cfg(f, tree, HYDRA_CFG_HYDRA, "hydra.job.name", false, err, sizeof err), 0);
    fclose(f);
    assert_int_equal(len, 6001);
    free(buf);
    int n;
    char **p = hydra_sweeper_params(tree, &n);
    assert_int_equal(n, 1);
    assert_true(strlen(p[0]) > 3000 * 3);
    assert_non_null(strstr(p[0], ",v2999"));
    hydra_strings_free(p, n);
    cfg_free(tree);
    free(t.p);
}

// ------------------------------------------------------------------------- sweeps

// The job lines of a sweep, joined "a b | c d".
static void sweep(const char *const *args, int n, char *out, size_t len) {
    HydraJob *jobs;
    size_t n_jobs;
    char err[ERRLEN];
    if (hydra_sweep_jobs((char *const *)args, n, &jobs, &n_jobs, err, sizeof err)) fail_msg("%s", err);
    size_t o = 0;
    out[0] = 0;
    for (size_t j = 0; j < n_jobs; j++)
        for (int k = 0; k < jobs[j].n; k++)
            o += (size_t)snprintf(out + o, len - o, "%s%s", k ? " " : (j ? " | " : ""), jobs[j].ov[k]);
    hydra_jobs_free(jobs, n_jobs);
}

static void test_sweep_expansion(void **state) {
    (void)state;
    char s[4096];
    const char *m1[] = {"train.lr=1e-3,3e-4", "model.n_layer=range(2,6,2)", "train.batch_size=64"};
    sweep(m1, 3, s, sizeof s);
    assert_string_equal(s, "train.lr=0.001 model.n_layer=2 train.batch_size=64 | "
                           "train.lr=0.001 model.n_layer=4 train.batch_size=64 | "
                           "train.lr=0.0003 model.n_layer=2 train.batch_size=64 | "
                           "train.lr=0.0003 model.n_layer=4 train.batch_size=64");
    const char *m2[] = {"lr=range(0,0.3,0.1)"};
    sweep(m2, 1, s, sizeof s);
    assert_string_equal(s, "lr=0.0 | lr=0.1 | lr=0.2");  // exact decimal steps
    const char *m2b[] = {"lr=range(0,1,0.25)"};
    sweep(m2b, 1, s, sizeof s);
    assert_string_equal(s, "lr=0.0 | lr=0.25 | lr=0.5 | lr=0.75");
    const char *m2c[] = {"x=range(-5,step=-1)", "y=range(3)"};
    sweep(m2c, 1, s, sizeof s);
    assert_string_equal(s, "x=0 | x=-1 | x=-2 | x=-3 | x=-4");
    sweep(m2c + 1, 1, s, sizeof s);
    assert_string_equal(s, "y=0 | y=1 | y=2");
    const char *m2d[] = {"x=range(start=1,stop=2,step=0.5)", "y=range(1e-3,3e-3,1e-3)"};
    sweep(m2d, 1, s, sizeof s);
    assert_string_equal(s, "x=1.0 | x=1.5");
    sweep(m2d + 1, 1, s, sizeof s);
    assert_string_equal(s, "y=0.001 | y=0.002");

    // M3: rendering of bools, quoted strings, lists; choice().
    const char *m3[] = {"train.compile=true,false", "name=\"a,b\",c", "+l=[1,2],[3]", "seed=choice(1,2)"};
    HydraJob *jobs;
    size_t n_jobs;
    char err[ERRLEN];
    assert_int_equal(hydra_sweep_jobs((char *const *)m3, 4, &jobs, &n_jobs, err, sizeof err), 0);
    assert_int_equal(n_jobs, 16);
    char line[512];
    snprintf(line, sizeof line, "%s %s %s %s", jobs[0].ov[0], jobs[0].ov[1], jobs[0].ov[2], jobs[0].ov[3]);
    assert_string_equal(line, "train.compile=True name=\"a,b\" +l=[1,2] seed=1");
    snprintf(line, sizeof line, "%s %s %s %s", jobs[15].ov[0], jobs[15].ov[1], jobs[15].ov[2], jobs[15].ov[3]);
    assert_string_equal(line, "train.compile=False name=c +l=[3] seed=2");
    hydra_jobs_free(jobs, n_jobs);

    // M5: a repeated key keeps its first position and its last value; no sweep = 1 job.
    const char *m5[] = {"seed=1", "lr=0.1", "seed=2,3"};
    sweep(m5, 3, s, sizeof s);
    assert_string_equal(s, "seed=2 lr=0.1 | seed=3 lr=0.1");
    sweep(NULL, 0, s, sizeof s);
    assert_string_equal(s, "");
    const char *m5b[] = {"'a=x y'", "b='q,r'", "c=a\\,b", "d={k:1,j:[x]}", "~e", "f=null"};
    sweep(m5b + 1, 5, s, sizeof s);  // not swept: kept as typed
    assert_string_equal(s, "b='q,r' c=a\\,b d={k:1,j:[x]} ~e f=null");
    const char *m5c[] = {"a='x y',z", "b=a\\,b,[1, 'u v'],{k: null}"};
    sweep(m5c, 2, s, sizeof s);
    assert_string_equal(s, "a='x y' b=a\\,b | a='x y' b=[1,'u v'] | a='x y' b={k:null} | "
                           "a=z b=a\\,b | a=z b=[1,'u v'] | a=z b={k:null}");

    // Errors.
    const char *bad[] = {"x=interval(0,1)", "x=range(0,1,0)", "x=glob(*)", "x=a,"};
    assert_int_not_equal(hydra_sweep_jobs((char *const *)bad, 1, &jobs, &n_jobs, err, sizeof err), 0);
    assert_string_equal(err, "BasicSweeper does not support sweep type : INTERVAL_SWEEP");
    assert_int_not_equal(hydra_sweep_jobs((char *const *)bad + 1, 1, &jobs, &n_jobs, err, sizeof err), 0);
    assert_string_equal(err, "Error parsing override 'x=range(0,1,0)'\nrange() arg 3 must not be zero\n"
                             "See https://hydra.cc/docs/1.2/advanced/override_grammar/basic for details");
    assert_int_not_equal(hydra_sweep_jobs((char *const *)bad + 2, 1, &jobs, &n_jobs, err, sizeof err), 0);
    assert_string_equal(err, "Error parsing override 'x=glob(*)'\nfunction 'glob' is not supported\n"
                             "See https://hydra.cc/docs/1.2/advanced/override_grammar/basic for details");
    assert_int_not_equal(hydra_sweep_jobs((char *const *)bad + 3, 1, &jobs, &n_jobs, err, sizeof err), 0);
}

static void test_override_render(void **state) {
    (void)state;
    struct { const char *in, *out; } cases[] = {
        {"k=1e-3", "0.001"},   {"k=TRUE", "True"},     {"k=null", "null"},    {"k=1_000", "1000"},
        {"k='a b'", "'a b'"},  {"k=\"it's\"", "\"it's\""}, {"k=a\\ b", "a\\ b"}, {"k=12:30", "12\\:30"},
        {"k=[1, a]", "[1,a]"}, {"k={a: 1}", "{a:1}"},  {"k=inf", "inf"},      {"k=1e-8", "1e-08"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        CfgOverride ov;
        char err[ERRLEN];
        if (cfg_override_parse(cases[i].in, &ov, err, sizeof err)) fail_msg("%s: %s", cases[i].in, err);
        char *r = cfg_override_render(ov.value);
        if (strcmp(r, cases[i].out) != 0) fail_msg("%s rendered as %s, want %s", cases[i].in, r, cases[i].out);
        free(r);
        cfg_override_free(&ov);
    }
}

// ------------------------------------------------------------------------- YAML dump quoting

static void test_dump_quoting(void **state) {
    (void)state;
    const char *ov[] = {"+x=", "+y=null", "+q='5'", "+s=010", "+c=yes", "+n=n", "+d=2023-09-16", "+i=inf",  // inf: a float
                        "+t=???", "+v=${seed}_x", "+u=1e-3x", "+e='1e-3'", "+h='0x10'", "+w=hello"};
    CfgNode *root = cfg_new_map();
    for (size_t i = 0; i < sizeof ov / sizeof *ov; i++) {
        CfgOverride o;
        char err[ERRLEN];
        if (cfg_override_parse(ov[i], &o, err, sizeof err) || cfg_override_apply(root, &o, NULL, err, sizeof err))
            fail_msg("%s: %s", ov[i], err);
        cfg_override_free(&o);
    }
    char *y = cfg_to_yaml(root);
    assert_string_equal(y,
                        "x: ''\n"
                        "'y': null\n"
                        "q: '5'\n"
                        "s: '010'\n"
                        "c: 'yes'\n"
                        "'n': 'n'\n"
                        "d: '2023-09-16'\n"
                        "i: .inf\n"
                        "t: ???\n"
                        "v: ${seed}_x\n"
                        "u: 1e-3x\n"
                        "e: '1e-3'\n"
                        "h: '0x10'\n"
                        "w: hello\n");
    free(y);
    cfg_free(root);
}

// ------------------------------------------------------------------------- hydra node helpers

static void test_override_dirname(void **state) {
    (void)state;
    CfgNode *t = yaml("hydra: {job: {config: {override_dirname: {kv_sep: '=', item_sep: ',', exclude_keys: []}}}}\n");
    char *const ov[] = {"train.lr=0.1", "seed=1", "+x=a=b"};
    char *d = hydra_override_dirname(t, ov, 3);
    assert_string_equal(d, "+x=a=b,seed=1,train.lr=0.1");
    free(d);
    cfg_free(t);
    t = yaml("hydra: {job: {config: {override_dirname: {kv_sep: ':', item_sep: '_', exclude_keys: [seed]}}}}\n");
    d = hydra_override_dirname(t, ov, 3);
    assert_string_equal(d, "+x:a:b_train.lr:0.1");  // every '=' becomes kv_sep, as Hydra's re.sub does
    free(d);
    cfg_free(t);
    assert_true(hydra_is_hydra_override("hydra.run.dir=x"));
    assert_true(hydra_is_hydra_override("++hydra.job.name=x"));
    assert_true(hydra_is_hydra_override("hydra/job_logging=disabled"));
    assert_false(hydra_is_hydra_override("hydrant=1"));
    char buf[256];
    hydra_list_repr(ov, 2, buf, sizeof buf);
    assert_string_equal(buf, "['train.lr=0.1', 'seed=1']");
}

// Parses argv (NULL-terminated) with stdout/stderr captured into out/err.
static int parse(const char *const *argv, HydraArgs *a, char *out, char *err) {
    int argc = 0;
    while (argv[argc]) argc++;
    FILE *fo = tmpfile(), *fe = tmpfile();
    int rc = hydra_parse_args(argc, (char **)argv, a, fo, fe);
    rewind(fo);
    rewind(fe);
    size_t no = fread(out, 1, 4095, fo), ne = fread(err, 1, 4095, fe);
    out[no] = err[ne] = 0;
    fclose(fo);
    fclose(fe);
    return rc;
}

static void test_argparse(void **state) {
    (void)state;
    HydraArgs a;
    char out[4096], err[4096];
    const char *ok[] = {"mingpt", "--cfg=job", "-p", "trainer_config", "--res", "-cn", "x", "a=1", "--config-dir", "d1",
                        "-cd=d2", "-m", "b=2", NULL};
    assert_int_equal(parse(ok, &a, out, err), 0);
    assert_int_equal(a.cfg, HYDRA_CFG_JOB);
    assert_string_equal(a.package, "trainer_config");
    assert_true(a.resolve && a.multirun);
    assert_string_equal(a.config_name, "x");
    assert_int_equal(a.n_config_dirs, 2);
    assert_string_equal(a.config_dirs[1], "d2");
    assert_int_equal(a.n_overrides, 2);
    assert_string_equal(a.overrides[1], "b=2");
    hydra_args_free(&a);

    const char *bad[] = {"mingpt", "--cfg", "bogus", NULL};
    assert_int_equal(parse(bad, &a, out, err), 2);
    assert_non_null(strstr(err, "usage: mingpt [--help]"));
    assert_non_null(strstr(err, "\nmingpt: error: argument --cfg/-c: invalid choice: 'bogus' (choose from 'job', 'hydra', 'all')\n"));
    hydra_args_free(&a);
    const char *unk[] = {"mingpt", "--bogus", "x=1", "-q", NULL};
    assert_int_equal(parse(unk, &a, out, err), 2);
    assert_non_null(strstr(err, "mingpt: error: unrecognized arguments: --bogus -q\n"));
    hydra_args_free(&a);
    const char *amb[] = {"mingpt", "--conf", "x", NULL};
    assert_int_equal(parse(amb, &a, out, err), 2);
    assert_non_null(strstr(err, "mingpt: error: ambiguous option: --conf could match --config-path, --config-name, --config-dir\n"));
    hydra_args_free(&a);
    const char *miss[] = {"mingpt", "-cn", NULL};
    assert_int_equal(parse(miss, &a, out, err), 2);
    assert_non_null(strstr(err, "mingpt: error: argument --config-name/-cn: expected one argument\n"));
    hydra_args_free(&a);
    const char *ver[] = {"mingpt", "--version", "--bogus", NULL};
    assert_int_equal(parse(ver, &a, out, err), 0);
    assert_true(a.version);
    assert_string_equal(out, "Hydra " HYDRA_VERSION " (mingpt)\n");
    hydra_args_free(&a);
}

// --info [PAGE] (argparse nargs='?', const 'all') and its choices
static void test_argparse_info(void **state) {
    (void)state;
    HydraArgs a;
    char out[4096], err[4096];
    const char *bare[] = {"mingpt", "--info", NULL};
    assert_int_equal(parse(bare, &a, out, err), 0);
    assert_string_equal(a.info, "all");
    hydra_args_free(&a);
    const char *page[] = {"mingpt", "-i", "searchpath", "x=1", NULL};
    assert_int_equal(parse(page, &a, out, err), 0);
    assert_string_equal(a.info, "searchpath");
    assert_int_equal(a.n_overrides, 1);
    hydra_args_free(&a);
    const char *flag_after[] = {"mingpt", "--info", "-m", NULL};  // a flag is not its value
    assert_int_equal(parse(flag_after, &a, out, err), 0);
    assert_string_equal(a.info, "all");
    assert_true(a.multirun);
    hydra_args_free(&a);
    const char *bad[] = {"mingpt", "--inf=bogus", NULL};  // abbreviated, = form
    assert_int_equal(parse(bad, &a, out, err), 2);
    assert_non_null(strstr(err, "[--info [{all,config,defaults,defaults-tree,plugins,searchpath}]]\n"));
    assert_non_null(strstr(err, "mingpt: error: argument --info/-i: invalid choice: 'bogus' (choose from 'all', 'config', "
                                "'defaults', 'defaults-tree', 'plugins', 'searchpath')\n"));
    hydra_args_free(&a);
}

// The search path (config/search_path.h): --config-path alone; else the current directory, the
// executable's directory (here build/tests), its ../share/mingpt, each --config-dir, once each.
static void test_search_path_order(void **state) {
    (void)state;
    char cwd[PATH_MAX], exe[PATH_MAX], lines[8192], want[4 * PATH_MAX + 512];
    assert_non_null(getcwd(cwd, sizeof cwd));
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    assert_true(k > 0);
    exe[k] = 0;
    *strrchr(exe, '/') = 0;  // build/tests
    SearchPath sp;
    const char *dirs[] = {"extra"};
    search_path_build(&sp, "conf", dirs, 1);
    search_path_lines(&sp, lines, sizeof lines);
    snprintf(want, sizeof want,
             "\tprovider=hydra, path=pkg://hydra.conf\n\tprovider=main, path=file://%s/conf\n"
             "\tprovider=command-line, path=file://%s/extra\n\tprovider=schema, path=structured://\n", cwd, cwd);
    assert_string_equal(lines, want);
    assert_string_equal(sp.dirs[1].lookup, "conf");  // looked up as given (messages name conf/x.yaml)
    search_path_free(&sp);

    search_path_build(&sp, NULL, NULL, 0);
    search_path_lines(&sp, lines, sizeof lines);
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", exe);
    *strrchr(parent, '/') = 0;
    snprintf(want, sizeof want,
             "\tprovider=hydra, path=pkg://hydra.conf\n\tprovider=main, path=file://%s\n"
             "\tprovider=mingpt, path=file://%s\n\tprovider=mingpt, path=file://%s/share/mingpt\n"
             "\tprovider=schema, path=structured://\n", cwd, exe, parent);
    assert_string_equal(lines, want);
    search_path_free(&sp);

    assert_int_equal(chdir(exe), 0);  // from the executable's own directory: listed once
    search_path_build(&sp, NULL, NULL, 0);
    assert_int_equal(sp.n, 4);
    assert_string_equal(sp.dirs[1].path, exe);
    assert_string_equal(sp.dirs[2].provider, "mingpt");
    assert_string_equal(sp.dirs[2].schema, "file");
    search_path_free(&sp);
    assert_int_equal(chdir(cwd), 0);
}

// ------------------------------------------------------------------------- run directories

static void test_run_dir(void **state) {
    (void)state;
    char p[256];
    assert_int_equal(run_dir_join("/a/b", "./", p, sizeof p), 0);
    assert_string_equal(p, "/a/b");
    assert_int_equal(run_dir_join("/a/b", "out/./x/", p, sizeof p), 0);
    assert_string_equal(p, "/a/b/out/x");
    assert_int_equal(run_dir_join("/a/b", "/abs//y", p, sizeof p), 0);
    assert_string_equal(p, "/abs/y");
    assert_int_not_equal(run_dir_join("/a", "bcdefgh", p, 4), 0);

    char base[64], dir[300], got[300], err[ERRLEN];
    assert_int_equal(test_tmpdir(base, sizeof base, "rundir"), 0);
    snprintf(dir, sizeof dir, "%s/x/y/12-00-00", base);
    bool made = false;
    assert_int_equal(run_dir_create(dir, true, got, sizeof got, &made, err, sizeof err), 0);
    assert_string_equal(got, dir);
    assert_true(made);
    assert_int_equal(run_dir_create(dir, true, got, sizeof got, &made, err, sizeof err), 0);  // same second: a suffix
    char want[320];
    snprintf(want, sizeof want, "%s_1", dir);
    assert_string_equal(got, want);
    assert_true(made);
    assert_int_equal(run_dir_create(dir, false, got, sizeof got, &made, err, sizeof err), 0);  // named: reused
    assert_string_equal(got, dir);
    assert_false(made);

    // summary.json
    TrainResult r = {.final_train_loss = 2.5, .test_loss = NAN, .iters = 20, .iters_this_run = 5, .tokens_per_s = 1000.0,
                     .wall_s = 1.25};
    RunSummary s = {.exit_status = 0, .result = &r, .snapshot_path = "/s \"q\".bin", .output_dir = dir, .cwd = "/c"};
    assert_int_equal(run_dir_write_summary(dir, &s, err, sizeof err), 0);
    char path[400], text[2048];
    snprintf(path, sizeof path, "%s/summary.json", dir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    snprintf(want, sizeof want, "  \"output_dir\": \"%s\",\n", dir);
    assert_non_null(strstr(text, "{\n  \"exit_status\": 0,\n  \"final_train_loss\": 2.5,\n  \"test_loss\": null,\n"
                                 "  \"iters\": 20,\n  \"iters_this_run\": 5,\n  \"tokens_per_s\": 1000.0,\n"
                                 "  \"wall_s\": 1.25,\n  \"snapshot_path\": \"/s \\\"q\\\".bin\",\n"));
    assert_non_null(strstr(text, want));
    assert_non_null(strstr(text, "  \"cwd\": \"/c\"\n}\n"));

    // The log file gets every line with Hydra's prefix; the console gets it bare.
    snprintf(path, sizeof path, "%s/mingpt.log", dir);
    assert_int_equal(log_open(path, err, sizeof err), 0);
    log_info("hello %d\n", 42);
    log_error("mingpt: error: %s\n", "bad");
    log_close();
    log_info("not in the file\n");
    f = fopen(path, "r");
    n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    assert_non_null(strstr(text, "][mingpt][INFO] - hello 42\n["));
    assert_non_null(strstr(text, "][mingpt][ERROR] - mingpt: error: bad\n"));
    assert_null(strstr(text, "not in the file"));
    assert_true(text[0] == '[' && text[5] == '-' && text[20] == ',');  // [2026-11-22 01:42:20,647]

    assert_int_equal(test_rmtree(base), 0);
}

// text of path into buf ("" when it cannot be read)
static const char *read_text(const char *path, char *buf, size_t len) {
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, len - 1, f) : 0;
    buf[n] = 0;
    if (f) fclose(f);
    return buf;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

// One run per directory: a second flock on the lock file (another open file description, as
// another process has) is refused, naming the holder; released, it is taken again.
static void test_run_dir_lock(void **state) {
    (void)state;
    char base[64], path[300], err[ERRLEN], want[400], text[256];
    assert_int_equal(test_tmpdir(base, sizeof base, "rundir_lock"), 0);
    snprintf(path, sizeof path, "%s/%s", base, RUN_DIR_LOCK_FILE);
    bool made = false;
    int fd = run_dir_lock(path, "run directory 'x'", &made, err, sizeof err);
    assert_true(fd >= 0);
    assert_true(made);
    snprintf(want, sizeof want, "%ld ", (long)getpid());
    assert_int_equal(strncmp(read_text(path, text, sizeof text), want, strlen(want)), 0);
    assert_int_equal(run_dir_lock(path, "run directory 'x'", NULL, err, sizeof err), -1);
    snprintf(want, sizeof want, "run directory 'x' is in use by process %ld on ", (long)getpid());
    assert_non_null(strstr(err, want));
    run_dir_unlock(fd);
    fd = run_dir_lock(path, "run directory 'x'", &made, err, sizeof err);
    assert_true(fd >= 0);
    assert_false(made);   // the file was there: only the lock is new
    run_dir_unlock(fd);
    snprintf(path, sizeof path, "%s/absent/%s", base, RUN_DIR_LOCK_FILE);
    assert_int_equal(run_dir_lock(path, "x", NULL, err, sizeof err), -2);
    assert_non_null(strstr(err, "cannot create the lock file"));
    assert_int_equal(test_rmtree(base), 0);
}

// A fresh start moves an earlier run's results aside; undo puts back every file, size and name.
static void test_run_dir_rotate_undo(void **state) {
    (void)state;
    char base[64], path[300], p2[320], err[ERRLEN], text[256], moved[600];
    assert_int_equal(test_tmpdir(base, sizeof base, "rundir_undo"), 0);
    assert_int_equal(run_dir_rotate(base, 0, NULL, moved, sizeof moved, err, sizeof err), 0);
    assert_string_equal(moved, "");   // nothing there: nothing moved, nothing said
    snprintf(path, sizeof path, "%s/metrics.jsonl", base);
    write_text(path, "old metrics\n");
    snprintf(path, sizeof path, "%s/loss.svg", base);
    write_text(path, "old svg\n");
    time_t now = 1764144000;   // 2025-11-26 08:00:00 UTC
    struct tm tm;
    char stamp[32];
    localtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    snprintf(p2, sizeof p2, "%s/loss.svg.prev-%s", base, stamp);
    write_text(p2, "taken\n");   // the stamp is taken for one file: all get the counter
    RunDirUndo u = {0};
    assert_int_equal(run_dir_rotate(base, now, &u, moved, sizeof moved, err, sizeof err), 0);
    char want[200];
    snprintf(want, sizeof want, "moved the earlier run's metrics.jsonl, loss.svg to *.prev-%s-1", stamp);
    assert_non_null(strstr(moved, want));
    snprintf(p2, sizeof p2, "%s/metrics.jsonl.prev-%s-1", base, stamp);
    assert_string_equal(read_text(p2, text, sizeof text), "old metrics\n");
    snprintf(p2, sizeof p2, "%s/loss.svg.prev-%s", base, stamp);
    assert_string_equal(read_text(p2, text, sizeof text), "taken\n");
    // what a run writes next: a summary (new), a log (appended), a .hydra directory
    snprintf(path, sizeof path, "%s/summary.json", base);
    run_dir_undo_file(&u, path);
    write_text(path, "{}\n");
    snprintf(path, sizeof path, "%s/mingpt.log", base);
    write_text(path, "earlier\n");
    run_dir_undo_append(&u, path);
    FILE *f = fopen(path, "a");
    fputs("this run\n", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/.hydra", base);
    assert_int_equal(mkdir(path, 0777), 0);
    run_dir_undo_mkdir(&u, path);
    run_dir_undo_apply(&u);
    assert_int_equal(u.n, 0);
    struct stat st;
    assert_int_not_equal(stat(path, &st), 0);   // .hydra removed
    snprintf(path, sizeof path, "%s/summary.json", base);
    assert_int_not_equal(stat(path, &st), 0);   // did not exist: removed
    snprintf(path, sizeof path, "%s/mingpt.log", base);
    assert_string_equal(read_text(path, text, sizeof text), "earlier\n");
    snprintf(path, sizeof path, "%s/metrics.jsonl", base);
    assert_string_equal(read_text(path, text, sizeof text), "old metrics\n");
    snprintf(path, sizeof path, "%s/loss.svg", base);
    assert_string_equal(read_text(path, text, sizeof text), "old svg\n");
    assert_int_equal(test_rmtree(base), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_interpolation_values), cmocka_unit_test(test_resolvers),
        cmocka_unit_test(test_interpolation_errors), cmocka_unit_test(test_sweep_expansion),
        cmocka_unit_test(test_override_render),      cmocka_unit_test(test_dump_quoting),
        cmocka_unit_test(test_override_dirname),     cmocka_unit_test(test_argparse),
        cmocka_unit_test(test_argparse_info),        cmocka_unit_test(test_search_path_order),
        cmocka_unit_test(test_run_dir), cmocka_unit_test(test_run_dir_lock), cmocka_unit_test(test_run_dir_rotate_undo),
        cmocka_unit_test(test_interpolation_nesting_limit), cmocka_unit_test(test_interpolation_chain_limit),
        cmocka_unit_test(test_interpolation_cost_limits),   cmocka_unit_test(test_hydra_output_bounds),
        cmocka_unit_test(test_long_values_whole),           cmocka_unit_test(test_sweep_bytes_limit),
    };
    return cmocka_run_group_tests_name("hydra", tests, NULL, NULL);
}
