// tests/test_config.c — configuration: YAML typing, schema defaults, Hydra overrides,
// error messages, validation and the to_yaml/from_yaml_string round trip.
#include "tests/test_util.h"

#include <float.h>
#include <limits.h>
#include <unistd.h>

#include "config/cfg_override.h"
#include "config/cfg_tree.h"
#include "config/config.h"
#include "model/gpt_config.h"

#define ERRLEN 4096

// ------------------------------------------------------------------------- fixtures

// Each test gets a fresh directory (*state, test_tmpdir) removed afterwards.
static int tmp_setup(void **state) {
    char *dir = malloc(64);
    if (!dir) return -1;
    if (test_tmpdir(dir, 64, "test_config") != 0) {
        free(dir);
        return -1;
    }
    *state = dir;
    return 0;
}

static int tmp_teardown(void **state) {
    char *dir = *state;
    test_rmtree(dir);
    free(dir);
    return 0;
}

// Writes dir/name.yaml with text; the path goes into path (may be NULL).
static void write_yaml(const char *dir, const char *name, const char *text, char *path, size_t len) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s.yaml", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    if (path) snprintf(path, len, "%s", p);
}

// What the command line does with a composed tree (consumed; NULL: composing failed, the
// message is in err): resolve, config_bind, then the model's checks (gpt_config_check).
static int bind_checked(Config *cfg, CfgNode *tree, char *err) {
    if (!tree) return -1;
    CfgNode *resolved = config_resolve(tree, err, ERRLEN);
    cfg_free(tree);
    if (!resolved) return -1;
    int rc = config_bind(cfg, resolved, err, ERRLEN);
    if (!rc) rc = gpt_config_check(cfg, resolved, err, ERRLEN);
    cfg_free(resolved);
    return rc;
}

// Writes dir/cfg.yaml and loads it with the overrides as the command line does (bind_checked).
// Returns 0 or non-zero with the message in err.
static int load_text(const char *dir, const char *text, int n, const char *const *ovs, Config *cfg, char *err) {
    write_yaml(dir, "cfg", text, NULL, 0);
    err[0] = 0;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/cfg.yaml", dir);
    return bind_checked(cfg, config_compose(path, n, (char *const *)ovs, err, ERRLEN), err);
}

// Loads text that must be valid.
static void load_ok(const char *dir, const char *text, int n, const char *const *ovs, Config *cfg) {
    char err[ERRLEN];
    int rc = load_text(dir, text, n, ovs, cfg, err);
    if (rc) fail_msg("config_load failed: %s", err);
}

// Loads text that must fail; returns the message in err.
static void load_fails(const char *dir, const char *text, int n, const char *const *ovs, char *err) {
    Config cfg;
    int rc = load_text(dir, text, n, ovs, &cfg, err);
    if (!rc) fail_msg("config_load unexpectedly succeeded");
    assert_true(err[0] != 0);
}

static void assert_contains(const char *hay, const char *needle) {
    if (!strstr(hay, needle)) fail_msg("expected to find\n  %s\nin\n  %s", needle, hay);
}

// Directory holding the shipped YAML files (tests run from the repo root or tests/).
static const char *repo_dir(void) { return access("gpt2_train_cfg.yaml", R_OK) == 0 ? "." : ".."; }

// Field-by-field equality; doubles compared bit for bit.
static void assert_config_equal(const Config *a, const Config *b) {
    size_t n;
    const ConfigField *s = config_schema(&n);
    for (size_t i = 0; i < n; i++) {
        const char *pa = (const char *)a + s[i].offset, *pb = (const char *)b + s[i].offset;
        bool same = s[i].type == CONFIG_STR ? strcmp(pa, pb) == 0 : memcmp(pa, pb, s[i].size) == 0;
        if (!same) fail_msg("field %s.%s differs", s[i].section, s[i].key);
    }
}

static const char *const NO_OV[] = {NULL};

// ------------------------------------------------------------------------- shipped files

static void test_gpt2_train_cfg(void **state) {
    (void)state;
    Config c;
    char err[ERRLEN] = "";
    int rc = config_load(&c, repo_dir(), "gpt2_train_cfg", 0, NULL, err, sizeof err);
    if (rc) fail_msg("%s", err);
    assert_string_equal(c.data.path, "data/input.txt");
    assert_int_equal(c.data.block_size, 128);
    assert_true(c.data.train_split == 0.9);
    assert_true(c.data.truncate == 0.05);
    assert_string_equal(c.data.split, "contiguous");
    assert_int_equal(c.gpt.n_layer, 8);
    assert_int_equal(c.gpt.n_head, 8);
    assert_int_equal(c.gpt.n_embd, 512);
    assert_true(c.gpt.embd_pdrop == 0.1 && c.gpt.resid_pdrop == 0.1 && c.gpt.attn_pdrop == 0.1);
    assert_int_equal(c.trainer.max_epochs, 10);
    assert_int_equal(c.trainer.batch_size, 216);
    assert_int_equal(c.trainer.data_loader_workers, 4);
    assert_true(c.trainer.grad_norm_clip == 1.0);
    assert_string_equal(c.trainer.snapshot_path, "gpt_snapshot.bin");
    assert_int_equal(c.trainer.save_every, 3);
    assert_true(c.trainer.use_amp);
    assert_string_equal(c.trainer.device, "auto");
    assert_string_equal(c.trainer.amp_dtype, "auto");
    assert_true(c.trainer.seed == 1337);
    assert_int_equal(c.trainer.max_iters, 0);
    assert_int_equal(c.trainer.log_every, 100);
    assert_int_equal(c.trainer.eval_iters, 0);
    assert_int_equal(c.trainer.eval_every, 0);
    assert_int_equal(c.trainer.save_every_iters, 0);
    assert_true(c.optim.weight_decay == 0.1);
    assert_true(c.optim.learning_rate == 0.0003);
    assert_true(c.optim.betas[0] == 0.9 && c.optim.betas[1] == 0.95);
    assert_true(c.optim.eps == 1e-8);
    assert_int_equal(c.optim.warmup_iters, 0);
    assert_int_equal(c.optim.lr_decay_iters, 0);
    assert_true(c.optim.min_lr == 0.0);
    const char *src = c.source + strlen(c.source) - strlen("gpt2_train_cfg.yaml");
    assert_string_equal(src, "gpt2_train_cfg.yaml");

    // The hydra section is kept in the composed tree.
    char path[CFG_STR_MAX];
    assert_int_equal(config_path(path, sizeof path, repo_dir(), "gpt2_train_cfg"), 0);
    CfgNode *tree = config_compose(path, 0, NULL, err, sizeof err);
    assert_non_null(tree);
    const CfgNode *dir = cfg_select(tree, "hydra.run.dir");
    assert_non_null(dir);
    assert_string_equal(dir->s, "runs/${hydra:job.config_name}");   // one directory per config
    cfg_free(tree);
}

static void test_char_cpu(void **state) {
    (void)state;
    Config c;
    char err[ERRLEN] = "";
    if (config_load(&c, repo_dir(), "char_cpu.yaml", 0, NULL, err, sizeof err)) fail_msg("%s", err);
    assert_string_equal(c.data.path, "data/input.txt");
    assert_int_equal(c.data.block_size, 64);
    assert_true(c.data.train_split == 0.9 && c.data.truncate == 1.0);
    assert_string_equal(c.data.split, "contiguous");
    assert_int_equal(c.gpt.n_layer, 4);
    assert_int_equal(c.gpt.n_head, 4);
    assert_int_equal(c.gpt.n_embd, 128);
    assert_true(c.gpt.embd_pdrop == 0.0 && c.gpt.resid_pdrop == 0.0 && c.gpt.attn_pdrop == 0.0);
    assert_int_equal(c.trainer.max_epochs, 1);
    assert_int_equal(c.trainer.batch_size, 12);
    assert_true(c.trainer.grad_norm_clip == 1.0);
    assert_string_equal(c.trainer.snapshot_path, "char_cpu_snapshot.bin");
    assert_int_equal(c.trainer.save_every, 1);
    assert_false(c.trainer.use_amp);
    assert_string_equal(c.trainer.device, "cpu");
    assert_true(c.trainer.seed == 1337);
    assert_int_equal(c.trainer.max_iters, 2000);
    assert_int_equal(c.trainer.log_every, 100);
    assert_int_equal(c.trainer.eval_iters, 100);
    assert_int_equal(c.trainer.eval_every, 500);
    assert_int_equal(c.trainer.save_every_iters, 500);
    assert_true(c.optim.weight_decay == 0.1);
    assert_true(c.optim.learning_rate == 1e-3);
    assert_true(c.optim.betas[0] == 0.9 && c.optim.betas[1] == 0.99);
    assert_true(c.optim.eps == 1e-8);
    assert_int_equal(c.optim.warmup_iters, 100);
    assert_int_equal(c.optim.lr_decay_iters, 2000);
    assert_true(c.optim.min_lr == 1e-4);
}

// The tutorial's original flow-style file (path swapped for the local copy) loads.
static void test_tutorial_flow_style(void **state) {
    const char *yaml =
        "data_config:    {path: data/input.txt,\n"
        "                 block_size: 128, train_split: 0.9, truncate: 0.05}\n"
        "gpt_config:     {n_layer: 8, n_head: 8, n_embd: 512}\n"
        "trainer_config: {max_epochs: 10, batch_size: 216, data_loader_workers: 4, grad_norm_clip: 1.0,\n"
        "                 snapshot_path: gpt_snapshot.pt, save_every: 3, use_amp: True}\n"
        "optimizer_config: {weight_decay: 0.1, learning_rate: 0.0003}\n"
        "hydra: {run: {dir: ./}}      # Hydra writes its .hydra/ folder and main.log into the CWD\n";
    Config c;
    load_ok(*state, yaml, 0, NO_OV, &c);
    assert_true(c.data.truncate == 0.05);
    assert_int_equal(c.trainer.batch_size, 216);
    assert_string_equal(c.trainer.snapshot_path, "gpt_snapshot.pt");
    assert_true(c.trainer.use_amp);
    assert_true(c.optim.learning_rate == 0.0003);
    assert_true(c.optim.betas[1] == 0.95);  // default
}

// ------------------------------------------------------------------------- defaults

static void test_defaults_fill_absent_keys(void **state) {
    Config d, c;
    config_defaults(&d);
    assert_string_equal(d.data.path, "data/input.txt");
    assert_int_equal(d.data.block_size, 128);
    assert_true(d.data.train_split == 0.9 && d.data.truncate == 1.0);
    assert_string_equal(d.data.split, "contiguous");
    assert_int_equal(d.data.eval_stride, 0);
    assert_false(d.trainer.activation_checkpointing);
    assert_false(d.trainer.plot_log_scale);
    assert_int_equal(d.gpt.n_layer, 8);
    assert_int_equal(d.gpt.n_embd, 512);
    assert_true(d.gpt.attn_pdrop == 0.1);
    assert_int_equal(d.trainer.batch_size, 216);
    assert_string_equal(d.trainer.snapshot_path, "snapshot.bin");
    assert_string_equal(d.trainer.device, "auto");
    assert_false(d.trainer.use_amp);
    assert_true(d.trainer.seed == 1337);
    assert_int_equal(d.trainer.log_every, 100);
    assert_true(d.optim.learning_rate == 3e-4 && d.optim.eps == 1e-8);
    assert_true(d.optim.betas[0] == 0.9 && d.optim.betas[1] == 0.95);

    // An empty file is all defaults.
    load_ok(*state, "# nothing here\n", 0, NO_OV, &c);
    assert_config_equal(&c, &d);

    // Only some keys: the rest are defaults; an empty section is allowed.
    load_ok(*state, "gpt_config:\n  n_layer: 2\n  n_head: 2\n  n_embd: 64\ndata_config:\n", 0, NO_OV, &c);
    assert_int_equal(c.gpt.n_layer, 2);
    assert_int_equal(c.gpt.n_embd, 64);
    c.gpt = d.gpt;
    assert_config_equal(&c, &d);
}

// ------------------------------------------------------------------------- overrides

static void test_overrides_of_each_type(void **state) {
    Config c;
    const char *yaml = "trainer_config:\n  batch_size: 8\n  use_amp: true\noptimizer_config:\n  learning_rate: 0.01\n";
    const char *ov[] = {
        "trainer_config.batch_size=32",          // int
        "optimizer_config.learning_rate=1e-3",   // float in exponent form
        "trainer_config.use_amp=FALSE",          // bool, any case
        "data_config.path=/tmp/my corpus.txt",   // unquoted string with a space
        "trainer_config.snapshot_path='a,b.bin'",// quoted string with a comma
        "optimizer_config.betas=[0.8,0.9]",      // list
        "trainer_config.seed=3",                 // not in the file, but in the schema
        "optimizer_config.weight_decay=0",       // int into a float field
        "trainer_config.device=cpu",
        "data_config.split=random",
        "trainer_config.max_iters=1_000",
        "hydra.run.dir=outputs/x",               // hydra section: not bound, accepted
    };
    load_ok(*state, yaml, (int)(sizeof ov / sizeof *ov), ov, &c);
    assert_int_equal(c.trainer.batch_size, 32);
    assert_true(c.optim.learning_rate == 0.001);
    assert_false(c.trainer.use_amp);
    assert_string_equal(c.data.path, "/tmp/my corpus.txt");
    assert_string_equal(c.trainer.snapshot_path, "a,b.bin");
    assert_true(c.optim.betas[0] == 0.8 && c.optim.betas[1] == 0.9);
    assert_true(c.trainer.seed == 3);
    assert_true(c.optim.weight_decay == 0.0);
    assert_string_equal(c.trainer.device, "cpu");
    assert_string_equal(c.data.split, "random");
    assert_int_equal(c.trainer.max_iters, 1000);

    // trainer_config.amp_dtype: each of its values (auto is the schema default, the shipped file's too)
    const char *const amp[] = { "auto", "bfloat16", "float16" };
    for (int i = 0; i < 3; i++) {
        char o[64];
        snprintf(o, sizeof o, "trainer_config.amp_dtype=%s", amp[i]);
        const char *one[] = { o };
        load_ok(*state, yaml, 1, one, &c);
        assert_string_equal(c.trainer.amp_dtype, amp[i]);
    }
    load_ok(*state, yaml, 0, NULL, &c);
    assert_string_equal(c.trainer.amp_dtype, "auto");

    // Left to right: the last one wins; list items by index; dicts merge into sections.
    const char *ov2[] = {"trainer_config.seed=1", "trainer_config.seed=2", "optimizer_config.betas.1=0.999",
                         "gpt_config={n_layer: 2, n_head: 2}", "trainer_config.seed=010"};
    load_ok(*state, yaml, 5, ov2, &c);
    assert_true(c.trainer.seed == 10);  // '010' is a string for Hydra; the int field reads 10
    assert_true(c.optim.betas[0] == 0.9 && c.optim.betas[1] == 0.999);
    assert_int_equal(c.gpt.n_layer, 2);
    assert_int_equal(c.gpt.n_head, 2);
    assert_int_equal(c.gpt.n_embd, 512);  // kept by the merge

    // Float fields take ints and numeric strings (quoted in YAML too).
    load_ok(*state, "optimizer_config:\n  learning_rate: '3e-4'\n  eps: 1e-6\n  min_lr: 0\n", 0, NO_OV, &c);
    assert_true(c.optim.learning_rate == 3e-4 && c.optim.eps == 1e-6 && c.optim.min_lr == 0.0);
}

static void test_unknown_override_key(void **state) {
    char err[ERRLEN];
    const char *ov[] = {"trainer_config.lrr=0.1"};
    load_fails(*state, "", 1, ov, err);
    assert_string_equal(err,
                        "Could not override 'trainer_config.lrr'.\n"
                        "To append to your config use +trainer_config.lrr=0.1\n"
                        "Key 'lrr' is not in struct\n"
                        "    full_key: trainer_config.lrr\n"
                        "    object_type=dict");
    const char *ov2[] = {"trainerr_config.seed=1"};
    load_fails(*state, "", 1, ov2, err);
    assert_string_equal(err,
                        "Could not override 'trainerr_config.seed'.\n"
                        "To append to your config use +trainerr_config.seed=1\n"
                        "Key 'trainerr_config' is not in struct\n"
                        "    full_key: trainerr_config\n"
                        "    object_type=dict\n"
                        "Did you mean 'trainer_config.seed'?");
    const char *ov3[] = {"gpt_config={n_layer:2,new:1}"};
    load_fails(*state, "", 1, ov3, err);
    assert_string_equal(err,
                        "Could not override 'gpt_config'.\n"
                        "To append to your config use +gpt_config={n_layer:2,new:1}\n"
                        "Key 'new' is not in struct\n"
                        "    full_key: gpt_config.new\n"
                        "    object_type=dict");
    // hydra.* keys the file lacks: struct mode does not apply below hydra.
    Config c;
    const char *ov4[] = {"hydra.job.name=gpt"};
    load_ok(*state, "", 1, ov4, &c);
}

static void test_override_type_errors(void **state) {
    char err[ERRLEN];
    struct { const char *ov, *want; } cases[] = {
        {"trainer_config.batch_size=abc",
         "Error merging override trainer_config.batch_size=abc\n"
         "Value 'abc' of type 'str' could not be converted to Integer\n"
         "    full_key: trainer_config.batch_size\n"
         "    object_type=dict"},
        {"trainer_config.batch_size=3.5",
         "Error merging override trainer_config.batch_size=3.5\n"
         "Value '3.5' of type 'float' could not be converted to Integer\n"
         "    full_key: trainer_config.batch_size\n"
         "    object_type=dict"},
        {"trainer_config.batch_size=1e3",
         "Error merging override trainer_config.batch_size=1e3\n"
         "Value '1000.0' of type 'float' could not be converted to Integer\n"
         "    full_key: trainer_config.batch_size\n"
         "    object_type=dict"},
        {"trainer_config.batch_size=true",
         "Error merging override trainer_config.batch_size=true\n"
         "Value 'True' of type 'bool' could not be converted to Integer\n"
         "    full_key: trainer_config.batch_size\n"
         "    object_type=dict"},
        {"optimizer_config.learning_rate=abc",
         "Error merging override optimizer_config.learning_rate=abc\n"
         "Value 'abc' of type 'str' could not be converted to Float\n"
         "    full_key: optimizer_config.learning_rate\n"
         "    object_type=dict"},
        {"trainer_config.use_amp=maybe",
         "Error merging override trainer_config.use_amp=maybe\n"
         "Value 'maybe' is not a valid bool (type str)\n"
         "    full_key: trainer_config.use_amp\n"
         "    object_type=dict"},
        {"trainer_config.batch_size=null",
         "Error merging override trainer_config.batch_size=null\n"
         "field 'trainer_config.batch_size' is not Optional\n"
         "    full_key: trainer_config.batch_size\n"
         "    object_type=dict"},
        {"optimizer_config.betas=0.9",
         "Error merging override optimizer_config.betas=0.9\n"
         "Invalid value assigned: float is not a ListConfig, list or tuple.\n"
         "    full_key: optimizer_config.betas\n"
         "    object_type=dict"},
        {"optimizer_config.betas=[0.9,x]",
         "Error merging override optimizer_config.betas=[0.9,x]\n"
         "Value 'x' of type 'str' could not be converted to Float\n"
         "    full_key: optimizer_config.betas[1]\n"
         "    object_type=list"},
        {"optimizer_config.betas.5=0.1",
         "Error merging override optimizer_config.betas.5=0.1\n"
         "list index out of range\n"
         "    full_key: optimizer_config.betas[5]\n"
         "    object_type=list"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *ov[] = {cases[i].ov};
        load_fails(*state, "", 1, ov, err);
        assert_string_equal(err, cases[i].want);
    }
    // Hydra checks each override as it is applied: a bad value fixed later still fails.
    const char *ov[] = {"trainer_config.batch_size=abc", "trainer_config.batch_size=5"};
    load_fails(*state, "", 2, ov, err);
    assert_contains(err, "Error merging override trainer_config.batch_size=abc\n");
}

static void test_override_parse_errors(void **state) {
    char err[ERRLEN];
    const char *ov[] = {"trainer_config.seed"};
    load_fails(*state, "", 1, ov, err);
    assert_string_equal(err,
                        "Error parsing override 'trainer_config.seed'\n"
                        "missing EQUAL at '<EOF>'\n"
                        "See https://hydra.cc/docs/1.2/advanced/override_grammar/basic for details");
    const char *ov2[] = {"optimizer_config.learning_rate=0.1,0.2"};
    load_fails(*state, "", 1, ov2, err);
    assert_string_equal(err,
                        "Ambiguous value for argument 'optimizer_config.learning_rate=0.1,0.2'\n"
                        "1. To use it as a list, use key=[value1,value2]\n"
                        "2. To use it as string, quote the value: key=\\'value1,value2\\'\n"
                        "3. To sweep over it, add --multirun to your command line");
    const char *ov3[] = {"optimizer_config.learning_rate=range(1,3)"};
    load_fails(*state, "", 1, ov3, err);
    assert_string_equal(err, "Sweep parameters 'optimizer_config.learning_rate=range(1,3)' requires --multirun");
    const char *ov4[] = {"data_config.path=a[b"};
    load_fails(*state, "", 1, ov4, err);
    assert_string_equal(err,
                        "mismatched input '[' expecting <EOF>\n"
                        "See https://hydra.cc/docs/1.2/advanced/override_grammar/basic for details");
    // Quoting makes it fine.
    Config c;
    const char *ov5[] = {"data_config.path='a[b'"};
    load_ok(*state, "", 1, ov5, &c);
    assert_string_equal(c.data.path, "a[b");
}

static void test_plus_and_delete(void **state) {
    char err[ERRLEN];
    Config c;
    const char *yaml = "trainer_config:\n  seed: 7\n  batch_size: 4\n";
    // + on an existing key (here from the schema defaults) is refused with Hydra's text.
    const char *a[] = {"+trainer_config.batch_size=3"};
    load_fails(*state, yaml, 1, a, err);
    assert_string_equal(err,
                        "Could not append to config. An item is already at 'trainer_config.batch_size'.\n"
                        "Either remove + prefix: 'trainer_config.batch_size=3'\n"
                        "Or add a second + to add or override 'trainer_config.batch_size': '++trainer_config.batch_size=3'\n");
    const char *a2[] = {"+trainer_config.log_every=5"};  // absent from the file, present in the schema
    load_fails(*state, yaml, 1, a2, err);
    assert_contains(err, "Could not append to config. An item is already at 'trainer_config.log_every'.");

    // ++ adds or overrides.
    const char *b[] = {"++trainer_config.batch_size=3", "++hydra.job.name=x"};
    load_ok(*state, yaml, 2, b, &c);
    assert_int_equal(c.trainer.batch_size, 3);

    // + adds new keys, top-level or inside a section (Hydra's escape hatch): kept, not bound.
    const char *d[] = {"+experiment=baseline", "+tags=[a,b]", "+trainer_config.foo=1", "++gpt_config.bar=x"};
    load_ok(*state, yaml, 4, d, &c);
    assert_int_equal(c.trainer.batch_size, 4);

    // ~ deletes: a schema key falls back to its default.
    const char *f[] = {"~trainer_config.seed"};
    load_ok(*state, yaml, 1, f, &c);
    assert_true(c.trainer.seed == 1337);
    const char *g[] = {"~trainer_config.seed=7", "~gpt_config"};
    load_ok(*state, yaml, 2, g, &c);
    assert_true(c.trainer.seed == 1337);
    assert_int_equal(c.gpt.n_layer, 8);
    const char *h[] = {"~trainer_config.nope"};
    load_fails(*state, yaml, 1, h, err);
    assert_string_equal(err, "Could not delete from config. 'trainer_config.nope' does not exist.");
    const char *i[] = {"~trainer_config.seed=5"};
    load_fails(*state, yaml, 1, i, err);
    assert_string_equal(err, "Could not delete from config. The value of 'trainer_config.seed' is 7 and not 5.");
    const char *j[] = {"~optimizer_config.learning_rate=1"};
    load_fails(*state, yaml, 1, j, err);
    assert_string_equal(err,
                        "Could not delete from config. The value of 'optimizer_config.learning_rate' is 0.0003 and not 1.");
}

// ------------------------------------------------------------------------- file errors

static void test_unknown_key_in_file(void **state) {
    char err[ERRLEN], want[ERRLEN];
    char *dir = *state;
    load_fails(dir, "trainer_config:\n  max_epochs: 3\n  max_epoch: 3\n", 0, NO_OV, err);
    snprintf(want, sizeof want,
             "%s/cfg.yaml:3:3: unknown key 'trainer_config.max_epoch' (did you mean 'trainer_config.max_epochs'?)", dir);
    assert_string_equal(err, want);

    load_fails(dir, "gpt_config: {n_layer: 2}\ntrainer_cfg:\n  seed: 1\n", 0, NO_OV, err);
    snprintf(want, sizeof want, "%s/cfg.yaml:2:1: unknown key 'trainer_cfg' (did you mean 'trainer_config'?)", dir);
    assert_string_equal(err, want);

    // A key from another section is pointed at.
    load_fails(dir, "trainer_config:\n  learning_rate: 0.1\n", 0, NO_OV, err);
    assert_contains(err, "cfg.yaml:2:3: unknown key 'trainer_config.learning_rate' (did you mean 'optimizer_config.learning_rate'?)");

    // Nothing close: no suggestion. Unknown keys below hydra are fine.
    load_fails(dir, "data_config:\n  zzzzzzzz: 1\n", 0, NO_OV, err);
    snprintf(want, sizeof want, "%s/cfg.yaml:2:3: unknown key 'data_config.zzzzzzzz'", dir);
    assert_string_equal(err, want);
    Config c;
    load_ok(dir, "hydra:\n  run: {dir: out}\n  anything: [1, 2]\n", 0, NO_OV, &c);
}

static void test_type_errors_in_file(void **state) {
    char err[ERRLEN], want[ERRLEN];
    char *dir = *state;
    load_fails(dir, "trainer_config:\n  batch_size: abc\n", 0, NO_OV, err);
    snprintf(want, sizeof want, "%s/cfg.yaml:2:15: trainer_config.batch_size: expected an integer, got 'abc'", dir);
    assert_string_equal(err, want);
    load_fails(dir, "data_config:\n  block_size: 12.5\n", 0, NO_OV, err);
    assert_contains(err, "cfg.yaml:2:15: data_config.block_size: expected an integer, got '12.5'");
    load_fails(dir, "optimizer_config:\n  learning_rate: fast\n", 0, NO_OV, err);
    assert_contains(err, "cfg.yaml:2:18: optimizer_config.learning_rate: expected a number, got 'fast'");
    load_fails(dir, "trainer_config:\n  use_amp: maybe\n", 0, NO_OV, err);
    assert_contains(err, "cfg.yaml:2:12: trainer_config.use_amp: expected a boolean (true/false), got 'maybe'");
    load_fails(dir, "data_config:\n  block_size:\n", 0, NO_OV, err);
    assert_contains(err, "data_config.block_size: expected an integer, got null");
    load_fails(dir, "data_config:\n  path: [a, b]\n", 0, NO_OV, err);
    assert_contains(err, "cfg.yaml:2:9: data_config.path: expected a string, got a list");
    load_fails(dir, "optimizer_config:\n  betas: [0.9, 0.95, 0.99]\n", 0, NO_OV, err);
    assert_contains(err, "optimizer_config.betas: expected a list of 2 numbers, got 3 items");
    load_fails(dir, "gpt_config: 5\n", 0, NO_OV, err);
    assert_contains(err, "cfg.yaml:1:13: gpt_config: expected a mapping, got '5'");
    load_fails(dir, "- a\n- b\n", 0, NO_OV, err);
    assert_contains(err, "must be a mapping of sections");
    load_fails(dir, "trainer_config:\n  seed: -1\n", 0, NO_OV, err);
    assert_contains(err, "cfg.yaml:2:9: trainer_config.seed must be a non-negative integer");
}

static void test_validation(void **state) {
    char err[ERRLEN];
    char *dir = *state;
    load_fails(dir, "gpt_config:\n  n_embd: 500\n", 0, NO_OV, err);
    assert_contains(err, "gpt_config.n_embd (500) must be divisible by gpt_config.n_head (8)");
    assert_contains(err, "cfg.yaml:2:11: ");
    const char *ov[] = {"gpt_config.n_head=7"};
    load_fails(dir, "", 1, ov, err);
    assert_string_equal(err, "gpt_config.n_embd (512) must be divisible by gpt_config.n_head (7) (from override 'gpt_config.n_head=7')");

    struct { const char *yaml, *want; } cases[] = {
        {"data_config: {train_split: 1.0}", "data_config.train_split must be in (0.0, 1.0), got 1.0"},
        {"data_config: {truncate: 0}", "data_config.truncate must be in (0.0, 1.0], got 0.0"},
        {"data_config: {block_size: 0}", "data_config.block_size must be >= 1, got 0"},
        {"data_config: {split: shuffled}", "data_config.split must be one of contiguous|random, got 'shuffled'"},
        {"data_config: {eval_stride: -1}", "data_config.eval_stride must be in [0, 128] (0 = data_config.block_size), got -1"},
        {"data_config: {block_size: 16, eval_stride: 17}", "data_config.eval_stride must be in [0, 16]"},
        {"trainer_config: {activation_checkpointing: sometimes}", "trainer_config.activation_checkpointing: expected a boolean (true/false), got 'sometimes'"},
        {"trainer_config: {plot_log_scale: logarithmic}", "trainer_config.plot_log_scale: expected a boolean (true/false), got 'logarithmic'"},
        {"data_config: {path: ''}", "data_config.path must not be empty"},
        {"gpt_config: {attn_pdrop: 1}", "gpt_config.attn_pdrop must be in [0.0, 1.0), got 1.0"},
        {"gpt_config: {n_layer: 0}", "gpt_config.n_layer must be >= 1, got 0"},
        {"trainer_config: {batch_size: -2}", "trainer_config.batch_size must be >= 1, got -2"},
        {"trainer_config: {max_epochs: 0}", "trainer_config.max_epochs must be >= 1, got 0"},
        {"trainer_config: {save_every: 0}", "trainer_config.save_every must be >= 1, got 0"},
        {"trainer_config: {log_every: 0}", "trainer_config.log_every must be >= 1, got 0"},
        {"trainer_config: {eval_every: -1}", "trainer_config.eval_every must be >= 0, got -1"},
        {"trainer_config: {device: gpu}", "trainer_config.device must be one of auto|cpu|cuda, got 'gpu'"},
        {"trainer_config: {amp_dtype: half}", "trainer_config.amp_dtype must be one of auto|bfloat16|float16, got 'half'"},
        {"trainer_config: {amp_dtype: fp32}", "trainer_config.amp_dtype must be one of auto|bfloat16|float16, got 'fp32'"},
        {"trainer_config: {batch_size: 99999999999}", "trainer_config.batch_size: 99999999999 is out of range"},
        {"optimizer_config: {learning_rate: 0}", "optimizer_config.learning_rate must be > 0.0, got 0.0"},
        {"optimizer_config: {learning_rate: .inf}", "optimizer_config.learning_rate must be a finite number, got inf"},
        {"optimizer_config: {betas: [0.9, 1.0]}", "optimizer_config.betas[1] must be in [0.0, 1.0), got 1.0"},
        {"optimizer_config: {eps: 0}", "optimizer_config.eps must be > 0.0, got 0.0"},
        {"optimizer_config: {min_lr: -1e-4}", "optimizer_config.min_lr must be >= 0.0, got -0.0001"},
        {"optimizer_config: {warmup_iters: -5}", "optimizer_config.warmup_iters must be >= 0, got -5"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        load_fails(dir, cases[i].yaml, 0, NO_OV, err);
        assert_contains(err, cases[i].want);
        assert_contains(err, "cfg.yaml:1:");  // points at the value in the file
    }
    // eval_stride's bounds are [0, block_size] inclusive
    Config ok;
    load_ok(dir, "data_config: {block_size: 16, eval_stride: 16}", 0, NO_OV, &ok);
    assert_int_equal(ok.data.eval_stride, 16);
    // From an override: the message names it.
    const char *ov2[] = {"data_config.train_split=0"};
    load_fails(dir, "", 1, ov2, err);
    assert_string_equal(err, "data_config.train_split must be in (0.0, 1.0), got 0.0 (from override 'data_config.train_split=0')");
    // Strings must fit their buffers and be UTF-8 (so that config_to_yaml can write them).
    char big[CFG_STR_MAX + 32];
    snprintf(big, sizeof big, "data_config.path=%0*d", CFG_STR_MAX, 0);
    const char *ov4[] = {big};
    load_fails(dir, "", 1, ov4, err);
    assert_contains(err, "data_config.path is longer than 1023 bytes (from override 'data_config.path=000");
    const char *ov5[] = {"data_config.path='caf\xc3.txt'"};
    load_fails(dir, "", 1, ov5, err);
    assert_contains(err, "data_config.path is not valid UTF-8 (from override");
    const char *ov6[] = {"data_config.path='caf\xc3\xa9.txt'"};
    Config c;
    load_ok(dir, "", 1, ov6, &c);
    assert_string_equal(c.data.path, "caf\xc3\xa9.txt");
    // `key=` is the empty string.
    const char *ov3[] = {"data_config.path="};
    load_fails(dir, "", 1, ov3, err);
    assert_contains(err, "data_config.path must not be empty");
}

// trainer_config.peak_tflops is Optional[float]: null by default (NaN), null or a number > 0 from
// a file or an override, and it survives config_to_yaml -> config_from_yaml_string (a snapshot's
// stored config) both ways; 0, a negative number, a string and inf are refused, naming the key.
static void test_optional_float(void **state) {
    char err[ERRLEN];
    char *dir = *state;
    Config c, back;
    load_ok(dir, "", 0, NO_OV, &c);
    assert_true(isnan(c.trainer.peak_tflops));
    char *yaml = config_to_yaml(&c);
    assert_non_null(strstr(yaml, "peak_tflops: null"));
    assert_int_equal(config_from_yaml_string(&back, yaml, "snapshot", err, sizeof err), 0);
    assert_true(isnan(back.trainer.peak_tflops));
    free(yaml);
    const char *ov[] = {"trainer_config.peak_tflops=989.5"};
    load_ok(dir, "trainer_config: {peak_tflops: null}\n", 1, ov, &c);
    assert_true(c.trainer.peak_tflops == 989.5);
    yaml = config_to_yaml(&c);
    assert_int_equal(config_from_yaml_string(&back, yaml, "snapshot", err, sizeof err), 0);
    assert_true(back.trainer.peak_tflops == 989.5);
    free(yaml);
    const char *ov_null[] = {"trainer_config.peak_tflops=null"};
    load_ok(dir, "trainer_config: {peak_tflops: 2}\n", 1, ov_null, &c);
    assert_true(isnan(c.trainer.peak_tflops));
    struct { const char *yaml, *want; } bad[] = {
        {"trainer_config: {peak_tflops: 0}", "trainer_config.peak_tflops must be > 0.0, got 0.0"},
        {"trainer_config: {peak_tflops: -3}", "trainer_config.peak_tflops must be > 0.0, got -3.0"},
        {"trainer_config: {peak_tflops: .inf}", "trainer_config.peak_tflops must be a finite number"},
        {"trainer_config: {peak_tflops: fast}", "trainer_config.peak_tflops: expected a number"},
        // other floats stay non-optional
        {"trainer_config: {bucket_cap_mb: null}", "trainer_config.bucket_cap_mb: expected a number, got null"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        load_fails(dir, bad[i].yaml, 0, NO_OV, err);
        assert_contains(err, bad[i].want);
    }
}

static void test_duplicate_key(void **state) {
    char err[ERRLEN], want[ERRLEN];
    load_fails(*state, "trainer_config:\n  seed: 1\n  batch_size: 2\n  seed: 3\n", 0, NO_OV, err);
    snprintf(want, sizeof want, "%s/cfg.yaml:4:3: found duplicate key seed (trainer_config.seed was first defined at line 2)",
             (char *)*state);
    assert_string_equal(err, want);
    load_fails(*state, "gpt_config: {n_layer: 1, n_layer: 2}\n", 0, NO_OV, err);
    assert_contains(err, "found duplicate key n_layer (gpt_config.n_layer was first defined at line 1)");
}

static void test_missing_file(void **state) {
    char err[ERRLEN], want[ERRLEN];
    Config c;
    assert_int_not_equal(config_load(&c, *state, "nope", 0, NULL, err, sizeof err), 0);
    snprintf(want, sizeof want, "cannot open config file '%s/nope.yaml': No such file or directory", (char *)*state);
    assert_string_equal(err, want);
}

static void test_yaml_syntax_error(void **state) {
    char err[ERRLEN], want[ERRLEN];
    load_fails(*state, "gpt_config:\n  n_layer: 2\n  n_head: [1, 2\n", 0, NO_OV, err);
    snprintf(want, sizeof want, "%s/cfg.yaml:4:1: YAML syntax error", (char *)*state);
    assert_contains(err, want);
    load_fails(*state, "gpt_config:\n  n_layer: 2\n n_head: 3\n", 0, NO_OV, err);
    assert_contains(err, "cfg.yaml:3:");
    assert_contains(err, "YAML syntax error");
    load_fails(*state, "gpt_config: {}\n---\ngpt_config: {}\n", 0, NO_OV, err);
    assert_contains(err, "cfg.yaml:2:1: expected a single YAML document");
    load_fails(*state, "data_config:\n  path: caf\xff\n", 0, NO_OV, err);
    assert_contains(err, "cfg.yaml:2:12: YAML syntax error: invalid leading UTF-8 octet");
    load_fails(*state, "trainer_config:\n  seed: !!int abc\n", 0, NO_OV, err);
    assert_contains(err, "cfg.yaml:2:9: trainer_config.seed: cannot read 'abc' as !!int");
    load_fails(*state, "trainer_config:\n  seed: !custom 5\n", 0, NO_OV, err);
    assert_contains(err, "cfg.yaml:2:9: trainer_config.seed: unsupported YAML tag '!custom'");
}

// ------------------------------------------------------------------------- round trip

static void roundtrip(const Config *c) {
    char *yaml = config_to_yaml(c);
    assert_non_null(yaml);
    Config back;
    char err[ERRLEN] = "";
    if (config_from_yaml_string(&back, yaml, "snapshot", err, sizeof err)) fail_msg("%s\n--- yaml:\n%s", err, yaml);
    assert_config_equal(&back, c);
    assert_string_equal(back.source, "snapshot");
    free(yaml);
}

static void test_roundtrip(void **state) {
    (void)state;
    Config c;
    config_defaults(&c);
    roundtrip(&c);
    char *yaml = config_to_yaml(&c);
    assert_contains(yaml, "data_config:\n  path: data/input.txt\n  block_size: 128\n");
    assert_contains(yaml, "optimizer_config:\n  weight_decay: 0.1\n  learning_rate: 0.0003\n  betas:\n  - 0.9\n  - 0.95\n  eps: 1.0e-08\n");
    assert_contains(yaml, "  seed: 1337\n");
    assert_contains(yaml, "  use_amp: false\n");
    free(yaml);

    // Awkward values: strings YAML would retype, specials, extremes.
    snprintf(c.data.path, sizeof c.data.path, "yes");
    snprintf(c.trainer.snapshot_path, sizeof c.trainer.snapshot_path, "010");
    c.optim.learning_rate = 0.1 + 0.2;
    c.optim.eps = 5e-324;
    c.optim.weight_decay = 1e300;
    c.optim.min_lr = 1e16;
    c.optim.betas[0] = 0.0;
    c.optim.betas[1] = nextafter(1.0, 0.0);
    c.data.train_split = 1.0 / 3.0;
    c.trainer.grad_norm_clip = -1.0;
    c.trainer.seed = UINT64_MAX;
    c.trainer.use_amp = true;
    c.trainer.max_iters = LONG_MAX;
    c.gpt.n_embd = 6;
    c.gpt.n_head = 3;
    snprintf(c.trainer.device, sizeof c.trainer.device, "cuda");
    snprintf(c.data.split, sizeof c.data.split, "random");
    roundtrip(&c);
    yaml = config_to_yaml(&c);
    assert_contains(yaml, "path: 'yes'\n");
    assert_contains(yaml, "snapshot_path: '010'\n");
    assert_contains(yaml, "learning_rate: 0.30000000000000004\n");
    assert_contains(yaml, "seed: 18446744073709551615\n");
    free(yaml);
    const char *odd[] = {"null", "a: b # c", " lead", "trail ", "données/ü.txt", "1e-3", "~", "- x", "'q'", "\"dq\"",
                         "line\nbreak", "tab\there", "#hash", "[x]", "{y}", "&anchor", "*alias", "!tag", "%pct", "@at",
                         "`bt", "a\\b", "1:30", "0x10", ".inf", "<<", "true"};
    for (size_t i = 0; i < sizeof odd / sizeof *odd; i++) {
        snprintf(c.trainer.snapshot_path, sizeof c.trainer.snapshot_path, "%s", odd[i]);
        roundtrip(&c);
    }

    // Random valid configs round-trip bit for bit.
    TestRng r = test_rng(7);
    for (int it = 0; it < 300; it++) {
        config_defaults(&c);
        union { uint64_t u; double d; } bits;
        c.data.train_split = (double)(test_next(&r) >> 11) / 9007199254740992.0 * 0.999 + 1e-9;
        c.data.truncate = (double)(test_next(&r) >> 11) / 9007199254740992.0 * 0.999 + 0.001;
        do { bits.u = test_next(&r); } while (!isfinite(bits.d));
        c.trainer.grad_norm_clip = bits.d;
        bits.u = test_next(&r) >> 2;  // positive, finite
        c.optim.learning_rate = bits.d > 0 ? bits.d : 1.0;
        c.optim.eps = ldexp(1.0, -(int)(test_next(&r) % 1070));
        c.optim.betas[0] = (double)(test_next(&r) >> 11) / 9007199254740992.0;
        c.optim.betas[1] = test_uniform(&r, 0.0f, 1.0f);
        c.trainer.seed = test_next(&r);
        c.trainer.max_iters = (long)(test_next(&r) >> 1);
        c.gpt.n_head = 1 + (int)(test_next(&r) % 16);
        c.gpt.n_embd = c.gpt.n_head * (1 + (int)(test_next(&r) % 64));
        roundtrip(&c);
    }
}

static void test_from_yaml_string_errors(void **state) {
    (void)state;
    Config c;
    char err[ERRLEN];
    assert_int_not_equal(config_from_yaml_string(&c, "trainer_config:\n  sed: 1\n", "run.bin", err, sizeof err), 0);
    assert_string_equal(err, "run.bin:2:3: unknown key 'trainer_config.sed' (did you mean 'trainer_config.seed'?)");
    static const char *const indivisible = "gpt_config: {n_embd: 10, n_head: 3}\n";
    assert_int_not_equal(bind_checked(&c, config_compose_text(indivisible, strlen(indivisible), "run.bin", NULL, 0,
                                                              NULL, NULL, err, ERRLEN), err), 0);
    assert_contains(err, "run.bin:1:22: gpt_config.n_embd (10) must be divisible by gpt_config.n_head (3)");
    assert_int_not_equal(config_from_yaml_string(&c, "a: [\n", "run.bin", err, sizeof err), 0);
    assert_contains(err, "run.bin:2:1: YAML syntax error");
}

// ------------------------------------------------------------------------- tree level

static CfgNode *parse_value(const char *yaml_value) {
    char text[256], err[ERRLEN];
    snprintf(text, sizeof text, "v: %s\n", yaml_value);
    CfgNode *root = cfg_parse_string(text, "t", err, sizeof err);
    if (!root) fail_msg("%s: %s", yaml_value, err);
    return root;
}

static void test_yaml_scalar_typing(void **state) {
    (void)state;
    struct { const char *text; CfgType type; double num; const char *str; } cases[] = {
        {"1e-3", CFG_FLOAT, 0.001, NULL},     {"3.0e-4", CFG_FLOAT, 3e-4, NULL},   {"0.0003", CFG_FLOAT, 3e-4, NULL},
        {".5", CFG_FLOAT, 0.5, NULL},         {"1.", CFG_FLOAT, 1.0, NULL},        {"-1E5", CFG_FLOAT, -1e5, NULL},
        {"1_000", CFG_INT, 1000, NULL},       {"010", CFG_INT, 8, NULL},           {"0x1F", CFG_INT, 31, NULL},
        {"12:30", CFG_INT, 750, NULL},        {"+5", CFG_INT, 5, NULL},            {"0", CFG_INT, 0, NULL},
        {"0b101", CFG_INT, 5, NULL},          {"-7", CFG_INT, -7, NULL},           {".inf", CFG_FLOAT, INFINITY, NULL},
        {"-.inf", CFG_FLOAT, -INFINITY, NULL},{"yes", CFG_BOOL, 1, NULL},          {"Off", CFG_BOOL, 0, NULL},
        {"True", CFG_BOOL, 1, NULL},          {"FALSE", CFG_BOOL, 0, NULL},        {"~", CFG_NULL, 0, NULL},
        {"", CFG_NULL, 0, NULL},              {"Null", CFG_NULL, 0, NULL},         {"y", CFG_STRING, 0, "y"},
        {"'1e-3'", CFG_STRING, 0, "1e-3"},    {"\"yes\"", CFG_STRING, 0, "yes"},   {"2023-09-16", CFG_STRING, 0, "2023-09-16"},
        {"08", CFG_STRING, 0, "08"},          {"-.5", CFG_STRING, 0, "-.5"},       {"1e3x", CFG_STRING, 0, "1e3x"},
        {"tRue", CFG_STRING, 0, "tRue"},      {"!!str 5", CFG_STRING, 0, "5"},     {"!!float 3", CFG_FLOAT, 3.0, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        CfgNode *root = parse_value(cases[i].text);
        const CfgNode *v = cfg_map_get(root, "v");
        if (v->type != cases[i].type) fail_msg("'%s': type %s", cases[i].text, cfg_type_name(v->type));
        if (v->type == CFG_INT) assert_true((double)v->i == cases[i].num);
        if (v->type == CFG_FLOAT) assert_true(v->f == cases[i].num);
        if (v->type == CFG_BOOL) assert_int_equal(v->b, (int)cases[i].num);
        if (v->type == CFG_STRING) assert_string_equal(v->s, cases[i].str);
        cfg_free(root);
    }
    CfgNode *root = parse_value(".nan");
    assert_true(isnan(cfg_map_get(root, "v")->f));
    cfg_free(root);

    // Positions are 1-based line:column of the value and of the key.
    char err[ERRLEN];
    root = cfg_parse_string("a:\n  b: [1, {c: x}]\n", "f.yaml", err, sizeof err);
    assert_non_null(root);
    const CfgNode *c = cfg_select(root, "a.b.1.c");
    assert_non_null(c);
    assert_string_equal(c->loc.file, "f.yaml");
    assert_int_equal(c->loc.line, 2);
    assert_int_equal(c->loc.col, 14);
    assert_int_equal(c->key_loc.col, 11);
    char fk[64];
    cfg_full_key(root, "a.b.1.c", fk, sizeof fk);
    assert_string_equal(fk, "a.b[1].c");
    cfg_free(root);

    // Anchors, aliases and merge keys.
    root = cfg_parse_string("base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  y: 3\ne: *b\n", "f", err, sizeof err);
    assert_non_null(root);
    assert_int_equal(cfg_select(root, "d.x")->i, 1);
    assert_int_equal(cfg_select(root, "d.y")->i, 3);
    assert_int_equal(cfg_select(root, "e.y")->i, 2);
    cfg_free(root);
    assert_null(cfg_parse_string("a: *nope\n", "f", err, sizeof err));
    assert_contains(err, "f:1:4: found undefined alias '*nope'");
}

static CfgNode *ov_value(const char *text) {
    CfgOverride ov;
    char err[ERRLEN];
    if (cfg_override_parse(text, &ov, err, sizeof err)) fail_msg("%s: %s", text, err);
    CfgNode *v = ov.value;
    ov.value = NULL;
    assert_string_equal(ov.key, "k");
    cfg_override_free(&ov);
    return v;
}

static void test_override_value_typing(void **state) {
    (void)state;
    struct { const char *text; CfgType type; double num; const char *str; } cases[] = {
        {"k=10", CFG_INT, 10, NULL},        {"k=-20", CFG_INT, -20, NULL},     {"k=+5", CFG_INT, 5, NULL},
        {"k=1_000", CFG_INT, 1000, NULL},   {"k=010", CFG_STRING, 0, "010"},   {"k=0x10", CFG_STRING, 0, "0x10"},
        {"k=3.14", CFG_FLOAT, 3.14, NULL},  {"k=1.", CFG_FLOAT, 1.0, NULL},    {"k=.5", CFG_FLOAT, 0.5, NULL},
        {"k=1e-3", CFG_FLOAT, 1e-3, NULL},  {"k=-1E5", CFG_FLOAT, -1e5, NULL}, {"k=inf", CFG_FLOAT, INFINITY, NULL},
        {"k=-INF", CFG_FLOAT, -INFINITY, NULL}, {"k=1e3x", CFG_STRING, 0, "1e3x"}, {"k=TrUe", CFG_BOOL, 1, NULL},
        {"k=False", CFG_BOOL, 0, NULL},     {"k=yes", CFG_STRING, 0, "yes"},   {"k=None", CFG_STRING, 0, "None"},
        {"k=NULL", CFG_NULL, 0, NULL},      {"k='5'", CFG_STRING, 0, "5"},     {"k=\"a,b\"", CFG_STRING, 0, "a,b"},
        {"k=a\\,b", CFG_STRING, 0, "a,b"},  {"k= a b ", CFG_STRING, 0, "a b"}, {"k=", CFG_STRING, 0, ""},
        {"k=${a.b}", CFG_STRING, 0, "${a.b}"}, {"k=/p/x.bin", CFG_STRING, 0, "/p/x.bin"},
        {"k=2023-09-16", CFG_STRING, 0, "2023-09-16"}, {"k=12:30", CFG_STRING, 0, "12:30"},
        {"k='it\\'s'", CFG_STRING, 0, "it's"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        CfgNode *v = ov_value(cases[i].text);
        if (v->type != cases[i].type) fail_msg("'%s': type %s", cases[i].text, cfg_type_name(v->type));
        if (v->type == CFG_INT) assert_true((double)v->i == cases[i].num);
        if (v->type == CFG_FLOAT) assert_true(v->f == cases[i].num);
        if (v->type == CFG_BOOL) assert_int_equal(v->b, (int)cases[i].num);
        if (v->type == CFG_STRING) assert_string_equal(v->s, cases[i].str);
        assert_string_equal(v->loc.override, cases[i].text);
        cfg_free(v);
    }
    CfgNode *v = ov_value("k=nan");
    assert_true(v->type == CFG_FLOAT && isnan(v->f));
    cfg_free(v);
    v = ov_value("k=[1, 2.5, a, [], 'x y']");
    char r[256];
    cfg_repr(v, r, sizeof r);
    assert_string_equal(r, "[1, 2.5, 'a', [], 'x y']");
    cfg_free(v);
    v = ov_value("k={a:1,b:x, c: [true]}");
    cfg_repr(v, r, sizeof r);
    assert_string_equal(r, "{'a': 1, 'b': 'x', 'c': [True]}");
    cfg_free(v);

    CfgOverride ov;
    char err[ERRLEN];
    assert_int_equal(cfg_override_parse("~a.b", &ov, err, sizeof err), 0);
    assert_int_equal(ov.kind, CFG_OV_DELETE);
    assert_null(ov.value);
    cfg_override_free(&ov);
    assert_int_equal(cfg_override_parse("++a.0.b=1", &ov, err, sizeof err), 0);
    assert_int_equal(ov.kind, CFG_OV_FORCE_ADD);
    assert_string_equal(ov.key, "a.0.b");
    cfg_override_free(&ov);
    assert_int_not_equal(cfg_override_parse("a=b~c", &ov, err, sizeof err), 0);
    assert_contains(err, "token recognition error at: '~'");
    assert_int_not_equal(cfg_override_parse("=5", &ov, err, sizeof err), 0);
    assert_contains(err, "Error parsing override '=5'");
}

static void test_float_format(void **state) {
    (void)state;
    struct { double x; const char *py, *yaml; } cases[] = {
        {0.0003, "0.0003", "0.0003"},   {1e-8, "1e-08", "1.0e-08"},       {1.0, "1.0", "1.0"},
        {1e16, "1e+16", "1.0e+16"},     {1e15, "1000000000000000.0", "1000000000000000.0"},
        {1e-4, "0.0001", "0.0001"},     {1e-5, "1e-05", "1.0e-05"},       {0.1 + 0.2, "0.30000000000000004", "0.30000000000000004"},
        {-0.0, "-0.0", "-0.0"},         {1.5e300, "1.5e+300", "1.5e+300"}, {123.456, "123.456", "123.456"},
        {INFINITY, "inf", ".inf"},      {-INFINITY, "-inf", "-.inf"},     {5e-324, "5e-324", "5.0e-324"},
        {1000.0, "1000.0", "1000.0"},   {2.5e-7, "2.5e-07", "2.5e-07"},
    };
    char buf[64];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cfg_format_float(cases[i].x, buf, sizeof buf, false);
        assert_string_equal(buf, cases[i].py);
        cfg_format_float(cases[i].x, buf, sizeof buf, true);
        assert_string_equal(buf, cases[i].yaml);
    }
    cfg_format_float(NAN, buf, sizeof buf, true);
    assert_string_equal(buf, ".nan");
}

// ------------------------------------------------------------------------- budgets
// (the limits of the YAML parser and of overrides on what a crafted config can make mingpt
// allocate or do)

// A growable text for the generated inputs below.
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
static void text_rep(Text *t, const char *s, size_t times) {
    for (size_t i = 0; i < times; i++) text_add(t, "%s", s);
}

// The parse of text must fail with a message containing want.
static void parse_fails(const char *text, const char *want) {
    char err[ERRLEN] = "";
    CfgNode *n = cfg_parse_string(text, "b.yaml", err, sizeof err);
    if (n) fail_msg("parsed, expected: %s", want);
    assert_contains(err, want);
}

// Billion laughs: x0 holds 10 scalars, each next line 10 aliases of the one before. Without a
// budget 10 levels are 10^10 nodes (5 GB at 7 levels); the copies stop at 16384 alias nodes.
static void test_yaml_alias_bomb(void **state) {
    (void)state;
    Text t = {0};
    text_add(&t, "x0: &x0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for (int i = 1; i < 10; i++) {
        text_add(&t, "x%d: &x%d [", i, i);
        for (int j = 0; j < 10; j++) text_add(&t, "%s*x%d", j ? ", " : "", i - 1);
        text_add(&t, "]\n");
    }
    parse_fails(t.p, "b.yaml:5:10: aliases expand to more than 16384 nodes in all (an alias bomb?), the limit for a config");
    // Ordinary use of anchors stays well inside: a base mapping merged into 100 others.
    t.n = 0;
    text_add(&t, "base: &b {a: 1, b: 2, c: [1, 2, 3]}\n");
    for (int i = 0; i < 100; i++) text_add(&t, "m%d: {<<: *b, d: %d}\n", i, i);
    char err[ERRLEN];
    CfgNode *n = cfg_parse_string(t.p, "ok.yaml", err, sizeof err);
    if (!n) fail_msg("%s", err);
    assert_int_equal(cfg_select(n, "m99.c.2")->i, 3);
    cfg_free(n);
    free(t.p);
}

static void test_yaml_size_limits(void **state) {
    Text t = {0};
    // More nodes than CFG_MAX_NODES without any alias.
    text_add(&t, "l: [");
    text_rep(&t, "1,", CFG_MAX_NODES);
    text_add(&t, "1]\n");
    parse_fails(t.p, "b.yaml:1:");
    parse_fails(t.p, "the YAML document expands to more than 131072 nodes");
    // Nesting: flow and block style, 64 levels are fine, deeper is refused.
    t.n = 0;
    text_rep(&t, "[", CFG_MAX_DEPTH - 1);
    text_rep(&t, "]", CFG_MAX_DEPTH - 1);
    char err[ERRLEN];
    CfgNode *n = cfg_parse_string(t.p, "ok.yaml", err, sizeof err);
    if (!n) fail_msg("%s", err);
    cfg_free(n);
    t.n = 0;
    text_rep(&t, "[", 100000);
    text_rep(&t, "]", 100000);
    parse_fails(t.p, "b.yaml:1:65: YAML nested deeper than 64 levels, the limit for a config");
    t.n = 0;
    for (int i = 0; i < 70; i++) text_add(&t, "%*sk:\n", 2 * i, "");
    parse_fails(t.p, "YAML nested deeper than 64 levels");
    // A scalar (or key) longer than CFG_MAX_SCALAR_BYTES.
    t.n = 0;
    text_add(&t, "a:\n  b: ");
    text_rep(&t, "x", CFG_MAX_SCALAR_BYTES + 1);
    text_add(&t, "\n");
    parse_fails(t.p, "b.yaml:2:6: a.b: a scalar of 262145 bytes is longer than 262144 bytes, the limit for a config value");
    t.n = 0;
    text_rep(&t, "k", CFG_MAX_SCALAR_BYTES + 1);
    text_add(&t, ": 1\n");
    parse_fails(t.p, "a scalar of 262145 bytes is longer than 262144 bytes");
    free(t.p);

    // A file over CFG_MAX_FILE_BYTES is refused before it is parsed; a text too.
    char path[512];
    snprintf(path, sizeof path, "%s/big.yaml", (char *)*state);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (size_t i = 0; i <= CFG_MAX_FILE_BYTES / 64; i++) fputs("# a comment line that pads the file to more than four MiB .....\n", f);
    fclose(f);
    Config c;
    assert_int_not_equal(config_load(&c, *state, "big", 0, NULL, err, sizeof err), 0);
    char want[ERRLEN];
    snprintf(want, sizeof want, "config file '%s' is larger than 4 MiB, the limit for a config file", path);
    assert_string_equal(err, want);
    char *huge = calloc(CFG_MAX_FILE_BYTES + 1, 1);
    assert_non_null(huge);
    assert_null(cfg_parse_bytes(huge, CFG_MAX_FILE_BYTES + 1, "mem", err, sizeof err));
    assert_string_equal(err, "mem: the config text is larger than 4 MiB, the limit for a config");
    free(huge);
    // Not a regular file: a directory (a FIFO would block, a device never end).
    assert_null(cfg_parse_file(*state, err, sizeof err));
    assert_contains(err, "it is a directory");
}

// cfg_parse_bytes reads exactly len bytes: the buffer has no NUL (ASan sees any over-read).
static void test_parse_bytes(void **state) {
    (void)state;
    const char text[] = "gpt_config: {n_layer: 3}\n";
    char *buf = malloc(sizeof text - 1);
    assert_non_null(buf);
    memcpy(buf, text, sizeof text - 1);
    char err[ERRLEN];
    CfgNode *n = cfg_parse_bytes(buf, sizeof text - 1, "m", err, sizeof err);
    if (!n) fail_msg("%s", err);
    assert_int_equal(cfg_select(n, "gpt_config.n_layer")->i, 3);
    cfg_free(n);
    assert_null(cfg_parse_bytes("a: 1\0b: 2\n", 10, "nul", err, sizeof err));  // a NUL byte is not YAML
    assert_contains(err, "nul:1:5: YAML syntax error");
    free(buf);
}

// config_load_text: text in memory + overrides -> bound Config, or the message.
static void test_load_text(void **state) {
    (void)state;
    const char *text = "gpt_config:\n  n_layer: 3\ntrainer_config:\n  snapshot_path: run_${gpt_config.n_layer}.bin\n";
    const char *ov[] = {"gpt_config.n_layer=5", "trainer_config.seed=7"};
    Config c;
    char err[ERRLEN];
    if (config_load_text(&c, text, strlen(text), "mem.yaml", 2, (char *const *)ov, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(c.gpt.n_layer, 5);
    assert_string_equal(c.trainer.snapshot_path, "run_5.bin");
    assert_true(c.trainer.seed == 7);
    assert_string_equal(c.source, "mem.yaml");
    assert_int_not_equal(config_load_text(&c, "gpt_config:\n  n_layr: 3\n", 24, "mem.yaml", 0, NULL, err, sizeof err), 0);
    assert_contains(err, "mem.yaml:2:3: unknown key 'gpt_config.n_layr'");
}

// Overrides: the text, the parts of the key and the nesting of the value are bounded.
static void test_override_limits(void **state) {
    (void)state;
    CfgOverride ov;
    char err[ERRLEN];
    Text t = {0};
    text_add(&t, "trainer_config.snapshot_path=");
    text_rep(&t, "x", CFG_MAX_SCALAR_BYTES);
    assert_int_not_equal(cfg_override_parse(t.p, &ov, err, sizeof err), 0);
    assert_contains(err, "Error parsing override 'trainer_config.snapshot_path=xxxx");
    assert_contains(err, "...'\nthe override is 262173 bytes long, more than 262144 bytes, the limit");
    t.n = 0;
    text_add(&t, "++a");
    text_rep(&t, ".a", CFG_MAX_DEPTH);
    text_add(&t, "=1");
    assert_int_not_equal(cfg_override_parse(t.p, &ov, err, sizeof err), 0);
    assert_contains(err, "the key has more than 64 parts, the limit");
    t.n = 0;
    text_add(&t, "+a=");
    text_rep(&t, "[", 100000);
    assert_int_not_equal(cfg_override_parse(t.p, &ov, err, sizeof err), 0);
    assert_contains(err, "...'\nvalue nested deeper than 64 levels, the limit");
    // Applied, an override nests the config at most as deep as a file may (its printed YAML
    // reads back): 63 key parts and a scalar, or 62 and a list, are 64 levels; 64 parts and a
    // scalar, or 63 and a list, are 65.
    struct { int parts; const char *value; int ok; } deep[] = { {63, "1", 1}, {64, "1", 0}, {62, "[1]", 1}, {63, "[1]", 0} };
    for (size_t i = 0; i < sizeof deep / sizeof deep[0]; i++) {
        t.n = 0;
        text_add(&t, "++hydra");
        text_rep(&t, ".a", deep[i].parts - 1);
        text_add(&t, "=");
        text_add(&t, deep[i].value);
        char *ovs[1] = { t.p };
        CfgNode *tree = config_compose_text("{}", 2, "mem.yaml", NULL, 1, ovs, NULL, err, sizeof err);
        if (deep[i].ok) {
            if (!tree) fail_msg("%d parts, value %s: %s", deep[i].parts, deep[i].value, err);
            char *yaml = cfg_to_yaml(tree);
            CfgNode *back = cfg_parse_bytes(yaml, strlen(yaml), "<printed>", err, sizeof err);
            assert_non_null(back);   // the printed config reads back
            cfg_free(back);
            free(yaml);
            cfg_free(tree);
        } else {
            if (tree) fail_msg("%d parts, value %s: composed (%s)", deep[i].parts, deep[i].value, t.p);
            assert_contains(err, "deeper than 64 levels, the limit for a config");
        }
    }
    free(t.p);
}

// Maps with many keys are hashed: lookups, replacement, deletion and copies stay right.
static void test_large_map(void **state) {
    (void)state;
    CfgNode *m = cfg_new_map();
    char k[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(k, sizeof k, "k%d", i);
        cfg_map_put(m, k, cfg_new_int(i));
    }
    cfg_map_put(m, "k17", cfg_new_int(-17));  // replaced in place
    assert_int_equal(m->n, 5000);
    for (int i = 0; i < 5000; i += 7) assert_true(cfg_map_del(m, (snprintf(k, sizeof k, "k%d", i), k)));
    CfgNode *c = cfg_copy(m);
    for (int i = 0; i < 5000; i++) {
        snprintf(k, sizeof k, "k%d", i);
        const CfgNode *a = cfg_map_get(m, k), *b = cfg_map_get(c, k);
        if (i % 7 == 0) {
            assert_null(a);
            assert_null(b);
        } else {
            assert_non_null(a);
            assert_non_null(b);
            assert_int_equal(a->i, i == 17 ? -17 : i);
            assert_int_equal(b->i, a->i);
            assert_string_equal(m->kids[cfg_map_find(m, k)]->key, k);
        }
    }
    assert_null(cfg_map_get(m, "nope"));
    cfg_free(c);
    cfg_free(m);
}

static void test_config_path(void **state) {
    (void)state;
    char p[64];
    assert_int_equal(config_path(p, sizeof p, NULL, "gpt2_train_cfg"), 0);
    assert_string_equal(p, "gpt2_train_cfg.yaml");
    assert_int_equal(config_path(p, sizeof p, ".", "char_cpu.yaml"), 0);
    assert_string_equal(p, "char_cpu.yaml");
    assert_int_equal(config_path(p, sizeof p, "conf", "x"), 0);
    assert_string_equal(p, "conf/x.yaml");
    assert_int_equal(config_path(p, sizeof p, "conf/", "x"), 0);
    assert_string_equal(p, "conf/x.yaml");
    assert_int_equal(config_path(p, sizeof p, "conf", "/abs/x.yaml"), 0);
    assert_string_equal(p, "/abs/x.yaml");
    assert_int_not_equal(config_path(p, 8, "conf", "long_name"), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2_train_cfg),
        cmocka_unit_test(test_char_cpu),
        cmocka_unit_test_setup_teardown(test_tutorial_flow_style, tmp_setup, tmp_teardown),
        cmocka_unit_test_setup_teardown(test_defaults_fill_absent_keys, tmp_setup, tmp_teardown),
        cmocka_unit_test_setup_teardown(test_overrides_of_each_type, tmp_setup, tmp_teardown),
        cmocka_unit_test_setup_teardown(test_unknown_override_key, tmp_setup, tmp_teardown),
        cmocka_unit_test_setup_teardown(test_override_type_errors, tmp_setup, tmp_teardown),
        cmocka_unit_test_setup_teardown(test_override_parse_errors, tmp_setup, tmp_teardown),
        cmocka_unit_test_setup_teardown(test_plus_and_delete, tmp_setup, tmp_teardown),
        cmocka_unit_test_setup_teardown(test_unknown_key_in_file, tmp_setup, tmp_teardown),
        cmocka_unit_test_setup_teardown(test_type_errors_in_file, tmp_setup, tmp_teardown),
        cmocka_unit_test_setup_teardown(test_validation, tmp_setup, tmp_teardown),
        cmocka_unit_test_setup_teardown(test_optional_float, tmp_setup, tmp_teardown),
        cmocka_unit_test_setup_teardown(test_duplicate_key, tmp_setup, tmp_teardown),
        cmocka_unit_test_setup_teardown(test_missing_file, tmp_setup, tmp_teardown),
        cmocka_unit_test_setup_teardown(test_yaml_syntax_error, tmp_setup, tmp_teardown),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_from_yaml_string_errors),
        cmocka_unit_test(test_yaml_scalar_typing),
        cmocka_unit_test(test_override_value_typing),
        cmocka_unit_test(test_float_format),
        cmocka_unit_test(test_config_path),
        cmocka_unit_test(test_yaml_alias_bomb),
        cmocka_unit_test_setup_teardown(test_yaml_size_limits, tmp_setup, tmp_teardown),
        cmocka_unit_test(test_parse_bytes),
        cmocka_unit_test(test_load_text),
        cmocka_unit_test(test_override_limits),
        cmocka_unit_test(test_large_map),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
