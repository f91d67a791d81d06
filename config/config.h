// config/config.h — the typed training configuration and how it is made.
//
// A run's configuration comes from a YAML file (default gpt2_train_cfg.yaml) in the
// sections of the PyTorch minGPT-DDP tutorial, merged over the schema defaults below,
// then command-line overrides `section.key=value` applied left to right, then bound
// into the typed structs here with validation. Every error names the file, key or
// override and, for YAML errors, the line.
#ifndef MINGPT_CONFIG_H
#define MINGPT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CFG_STR_MAX 1024

// Bounds config_bind puts on values that are valid alone but would overflow or exhaust
// memory later (the model's own limits are checked by gpt_config_check, model/gpt_config.h):
#define CONFIG_MAX_GRAD_ACCUM (1 << 20)      // trainer_config.grad_accum_steps
#define CONFIG_MAX_KEEP_LAST  1000000        // trainer_config.keep_last

typedef struct {
    char path[CFG_STR_MAX];   // corpus file (UTF-8; a .gz path is read through zlib)
    int block_size;           // T: context length (default 128)
    double train_split;       // fraction of the data that trains (default 0.9)
    double truncate;          // fraction of characters kept (default 1.0)
    char split[16];           // "contiguous" (default) | "random"
    int eval_stride;          // evaluation windows every eval_stride test windows, in [0, block_size];
                              // 0 (default) = block_size: each test target predicted once (trainer/evaluate.h)
} DataConfig;

typedef struct {
    int n_layer;              // default 8
    int n_head;               // default 8
    int n_embd;               // default 512; must be divisible by n_head
    double embd_pdrop;        // dropout after wte+wpe (default 0.1)
    double resid_pdrop;       // dropout on each residual branch (default 0.1)
    double attn_pdrop;        // dropout on attention probabilities (default 0.1)
} GPTConfig;

typedef struct {
    int max_epochs;           // default 10
    int batch_size;           // B, per rank (default 216)
    int data_loader_workers;  // accepted for tutorial compatibility; batches are built in-process
    double grad_norm_clip;    // global-norm clip; <= 0 disables (default 1.0)
    char snapshot_path[CFG_STR_MAX]; // default "snapshot.bin"; resumed from when it exists
    int save_every;           // snapshot every N epochs, and always after the last (default 3)
    bool use_amp;             // mixed precision in amp_dtype: tensor cores on CUDA; on the CPU bf16 GEMMs
                              // (AMX / AVX512-BF16; fp32 with a note without them), fp16 emulated
    char device[16];          // "auto" | "cpu" | "cuda" (default auto)
    // With use_amp, torch.autocast's per-device default: "auto" (default: float16 on CUDA, bfloat16
    // on a CPU with AVX512-BF16 or AMX, else float32 with a note) | "bfloat16" | "float16" (dynamic
    // loss scaling; on the CPU emulated). trainer/amp.h resolves it.
    char amp_dtype[16];
    // torch.set_float32_matmul_precision's names: "highest" (default: fp32 matmuls in true fp32)
    // | "high" (TF32 tensor cores for fp32 matmuls on the CUDA backend; the CPU has none and
    // ignores it with a note). Matmuls in amp_dtype are not affected.
    char matmul_precision[16];
    uint64_t seed;            // init, dropout and the random split (default 1337)
    long max_iters;           // cap on total iterations from the start of training; 0 = none
    int log_every;            // log every N iterations (default 100)
    int eval_iters;           // test batches per evaluation; 0 = the whole test split (default 0)
    long eval_every;          // also evaluate every N iterations; 0 = only at epoch ends (default 0)
    long save_every_iters;    // also snapshot every N iterations; 0 = off (default 0)
    int keep_last;            // snapshots kept; > 1 also keeps <stem>.iter<N>.bin copies (default 1; checkpoint/retention.h)
    bool save_best;           // also keep <stem>.best.bin, the lowest test loss so far (default false)
    char init_from[CFG_STR_MAX]; // a new run's weights: a .safetensors file or a snapshot; "" = random init (default)
    int grad_accum_steps;     // micro-steps per optimizer step, communication on the last (default 1)
    // Sharded data parallelism (DeepSpeed's and llm.c's ZeRO numbering): 0 = every rank holds the
    // whole AdamW state (default); 1 = each rank holds AdamW m and v of its shard of the flat
    // parameter buffer only (gradients reduce-scattered, parameters all-gathered; trainer/zero.h);
    // 2 = as 1 (the gradient buffer is not yet sharded). 1 and 2 on one rank behave as 0.
    int zero_stage;
    double bucket_cap_mb;     // gradient all-reduce bucket cap in MiB (default 25, as DDP)
    double collective_timeout_s; // abort the job when a collective takes longer (default 300; 0 = never)
    // llm.c's outlier detector: skip the optimizer update (parameters and AdamW moments
    // untouched, the iteration still counted and logged) when the gradient norm's z-score
    // against the norms of the last 128 iterations exceeds this; 0 = off (default). The
    // norm is taken after the all-reduce, so every rank decides alike (trainer/train_step.h).
    double skip_spike_zscore;
    // Activation recomputation: keep each block's input only and recompute the block's forward
    // in the backward pass (model/gpt.h, GPT.checkpointing); the same gradients, bit for bit.
    bool activation_checkpointing;
    bool plot_log_scale;      // <run dir>/loss.svg with a log10 loss axis (default false)
    // The hardware's peak in TFLOP/s for the MFU column of metrics.jsonl and the progress line
    // (trainer/metrics.h); NaN (YAML null, the default): unknown, MFU is null. Must be > 0.
    double peak_tflops;
} TrainerConfig;

typedef struct {
    double weight_decay;      // default 0.1 (Linear weights only)
    double learning_rate;     // peak learning rate (default 3e-4)
    double betas[2];          // default [0.9, 0.95]
    double eps;               // default 1e-8
    long warmup_iters;        // linear warm-up iterations (default 0)
    long lr_decay_iters;      // cosine decay to min_lr over this many iterations; 0 = constant lr
    double min_lr;            // floor of the cosine decay (default 0)
} OptimizerConfig;

typedef struct {
    DataConfig data;
    GPTConfig gpt;
    TrainerConfig trainer;
    OptimizerConfig optim;
    char source[CFG_STR_MAX]; // the YAML file the config came from (for messages)
} Config;

// Loads `<config_dir>/<config_name>.yaml` (config_name may carry the .yaml suffix),
// merges it over the schema defaults, applies `overrides` ("a.b=v") left to right and
// binds the result into *cfg. Relative paths in the file stay relative to the CWD.
// On error: writes a one- or multi-line message naming the file/key/override into
// err (errlen bytes) and returns non-zero; *cfg is then unspecified.
int config_load(Config *cfg, const char *config_dir, const char *config_name,
                int n_overrides, char *const *overrides, char *err, size_t errlen);

// Renders the bound configuration as YAML (the same sections and keys as the file).
// Returns a malloc'd NUL-terminated string the caller frees.
char *config_to_yaml(const Config *cfg);

// Parses YAML text (as produced by config_to_yaml, e.g. from a snapshot) into *cfg,
// with the same validation as config_load. `origin` names the text in errors.
int config_from_yaml_string(Config *cfg, const char *yaml, const char *origin,
                            char *err, size_t errlen);

// ---- Lower-level API: the schema and the untyped tree -----------------------------------
// For --help/--cfg style printing and the Hydra front end. The tree type and its functions
// are in config/cfg_tree.h, override parsing in config/cfg_override.h.

typedef struct CfgNode CfgNode;

typedef enum {
    CONFIG_INT,        // int
    CONFIG_LONG,       // long
    CONFIG_U64,        // uint64_t
    CONFIG_FLOAT,      // double
    CONFIG_BOOL,       // bool
    CONFIG_STR,        // char[size]
    CONFIG_FLOAT_PAIR, // double[2], written as a YAML list of two numbers
} ConfigFieldType;

typedef struct {
    const char *section;   // "trainer_config"
    const char *key;       // "batch_size"
    ConfigFieldType type;
    size_t offset, size;   // where the field lives in Config and its size in bytes
    long long def_int;     // default of CONFIG_INT/LONG/U64, and of CONFIG_BOOL (0/1)
    double def_float[2];   // default of CONFIG_FLOAT ([0]) and CONFIG_FLOAT_PAIR
    const char *def_str;   // default of CONFIG_STR
    const char *choices;   // allowed values "a|b|c" of an enumerated string or CONFIG_INT, else NULL
    bool optional;         // CONFIG_FLOAT only: null is allowed and stored as NaN (OmegaConf's Optional[float])
} ConfigField;

// The schema: every field of Config, section by section, in file order; *n gets the count.
const ConfigField *config_schema(size_t *n);

// Writes the schema defaults into *cfg (source = "").
void config_defaults(Config *cfg);

// Field f of cfg as Python would print it in a message: 0.0003, 'contiguous', [0.9, 0.95], True.
void config_field_repr(const Config *cfg, const ConfigField *f, char *buf, size_t len);

// The file config_load reads: `<config_dir>/<config_name>`, plus ".yaml" unless the name
// already ends in .yaml; just the name when config_dir is NULL, "" or "." or the name is
// absolute. Returns 0, or non-zero when the result does not fit in outlen.
int config_path(char *out, size_t outlen, const char *config_dir, const char *config_name);

// A new tree holding the schema defaults (the four sections). Free with cfg_free.
CfgNode *config_defaults_tree(void);

// Composes the untyped tree that config_load binds: the schema defaults, the YAML file at
// `path` merged over them (unknown keys rejected with file:line:col and a suggestion; a
// `hydra:` section is kept as is), then the overrides left to right with Hydra semantics
// (struct mode, except below `hydra`), type-checked after each step. Returns the tree
// (free with cfg_free), or NULL with the message in err.
CfgNode *config_compose(const char *path, int n_overrides, char *const *overrides, char *err,
                        size_t errlen);

// config_compose for the Hydra front end: `hydra_defaults` (a map; NULL for none) becomes the
// `hydra` node, under the file's own `hydra:` section, and is in struct mode like every other
// key. Values of schema keys take their declared types as they are set (`seed=010` is 10).
// *from_override (may be NULL) says whether an error came from an override (parse, apply or
// type: Hydra's texts) rather than from the file.
CfgNode *config_compose_hydra(const char *path, const CfgNode *hydra_defaults, int n_overrides,
                              char *const *overrides, bool *from_override, char *err, size_t errlen);

// config_compose_hydra for config text in memory: len bytes at text (no NUL needed), `origin`
// naming it in locations and messages ("<config>" when NULL). Reads no file.
CfgNode *config_compose_text(const char *text, size_t len, const char *origin, const CfgNode *hydra_defaults,
                             int n_overrides, char *const *overrides, bool *from_override, char *err,
                             size_t errlen);

// config_load for config text in memory: compose (without a `hydra` node) and bind into *cfg
// (cfg->source = origin). Returns 0, or non-zero with the message in err.
int config_load_text(Config *cfg, const char *text, size_t len, const char *origin, int n_overrides,
                     char *const *overrides, char *err, size_t errlen);

// The four sections of a composed tree with their interpolations resolved (against the whole
// tree, so ${hydra:...} reads its `hydra` node) into a new tree; a `???` there is an error.
// Returns NULL with OmegaConf's message (config/cfg_interp.h) in err.
CfgNode *config_resolve(const CfgNode *tree, char *err, size_t errlen);

// Binds and validates a composed tree into *cfg; cfg->source is not touched. Interpolations
// are resolved first (config_resolve). Absent keys take their defaults; `hydra` and other
// top-level keys outside the four sections are ignored. Validation covers each value's type and
// range; the model's limits and the sizes the values make together are gpt_config_check's
// (model/gpt_config.h), which the command line calls right after. Returns 0, or non-zero with a
// message naming the key and where its value came from (file:line:col, or the override) in err.
int config_bind(Config *cfg, const CfgNode *tree, char *err, size_t errlen);

// For checks of a bound config made outside config/ (gpt_config_check): the message fmt about
// key section.key, prefixed with where the key's value came from in tree (file:line:col, or the
// override) as config_bind's own messages are, into err. Returns -1.
int config_invalid(const CfgNode *tree, const char *section, const char *key, char *err, size_t errlen,
                   const char *fmt, ...) __attribute__((format(printf, 6, 7)));

// config_invalid's "section.key must be <= max (why), got v" when v > max (returns -1); else 0.
int config_max_int(const CfgNode *tree, const char *section, const char *key, long long v, long long max,
                   const char *why, char *err, size_t errlen);

// True when tree's section.key was set by a file or an override (not a default).
bool config_key_given(const CfgNode *tree, const char *section, const char *key);

#endif
