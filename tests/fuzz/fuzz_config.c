// tests/fuzz/fuzz_config.c — libFuzzer target for the config layer: YAML loader, Hydra
// overrides, interpolation, binding, and what `--cfg`, `--help` and training do with them.
//
// Input: a config text, then overrides, separated by NUL bytes:
//   <YAML>\0<override 1>\0<override 2>...
// (a NUL cannot occur in a valid YAML text, so the split costs the fuzzer nothing). The YAML is
// composed over the schema defaults and Hydra's `hydra` node with the overrides, exactly as
// app/hydra_app.c does for a run (config_compose_text in place of the file), then every path that reads
// the composed tree runs: --cfg all with and without --resolve, --help, the run directory's
// strings, the resolve + bind of a job, and the multirun sweep expansion of the overrides.
//
// Properties checked besides "no crash, leak, hang or huge allocation":
//   * a bound config written with config_to_yaml reads back (config_from_yaml_string) to the
//     same YAML: what a snapshot stores can always be resumed;
//   * --cfg output is valid YAML that the loader reads back.
// Everything writes to memory (open_memstream) or to err buffers: the target is silent.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/cfg_interp.h"
#include "config/cfg_tree.h"
#include "config/config.h"
#include "config/hydra.h"
#include "model/gpt_config.h"

#define MAX_OVERRIDES 16

static CfgNode *g_hydra_defaults;  // built once, like app/hydra_app.c's app_init

// Output of a printer, discarded after checking that it is valid YAML (when `yaml`).
static void print_to_memory(const CfgNode *tree, int what, bool resolve, bool yaml) {
    char *buf = NULL, err[2048];
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) abort();
    int rc = what < 0 ? hydra_print_help(f, tree, resolve, NULL, 0, err, sizeof err)
                      : hydra_print_cfg(f, tree, (HydraCfgWhat)what, NULL, resolve, err, sizeof err);
    fclose(f);
    if (rc == 0 && yaml) {
        CfgNode *back = cfg_parse_bytes(buf, len, "<--cfg>", err, sizeof err);
        if (!back) {
            fprintf(stderr, "--cfg printed YAML that does not read back: %s\n---\n%s\n", err, buf);
            abort();
        }
        cfg_free(back);
    }
    free(buf);
}

// What app/hydra_app.c's bind_job does (config_bind, then gpt_config_check), then the snapshot
// round trip of the bound config.
static void bind_and_round_trip(const CfgNode *tree) {
    char err[4096];
    CfgNode *resolved = config_resolve(tree, err, sizeof err);
    if (!resolved) return;
    Config cfg;
    memset(&cfg, 0, sizeof cfg);
    if (config_bind(&cfg, resolved, err, sizeof err) == 0 && gpt_config_check(&cfg, resolved, err, sizeof err) == 0) {
        char *yaml = config_to_yaml(&cfg);
        Config back;
        memset(&back, 0, sizeof back);
        if (!yaml || config_from_yaml_string(&back, yaml, "<snapshot>", err, sizeof err)) {
            fprintf(stderr, "bound config does not read back: %s\n---\n%s\n", err, yaml ? yaml : "(no yaml)");
            abort();
        }
        char *again = config_to_yaml(&back);
        if (!again || strcmp(yaml, again) != 0) {
            fprintf(stderr, "bound config changes on a round trip:\n%s\n---\n%s\n", yaml, again ? again : "(null)");
            abort();
        }
        free(again);
        free(yaml);
    }
    cfg_free(resolved);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > CFG_MAX_FILE_BYTES) return 0;
    if (!g_hydra_defaults) {
        HydraStatic st = {.config_name = "fuzz", .config_dir = "/fuzz", .cwd = "/fuzz"};
        g_hydra_defaults = hydra_defaults_node(&st);
        cfg_set_now(1700000000);  // ${now:} reproducible
    }
    // Split: the YAML up to the first NUL, then NUL-terminated overrides (copied, terminated).
    const char *text = (const char *)data;
    size_t yaml_len = 0;
    while (yaml_len < size && data[yaml_len]) yaml_len++;
    char *rest = malloc(size - yaml_len + 1);
    if (!rest) abort();
    memcpy(rest, data + yaml_len, size - yaml_len);
    rest[size - yaml_len] = 0;
    char *ov[MAX_OVERRIDES + 1];
    int n = 0;
    for (size_t i = 0; yaml_len + i < size && n < MAX_OVERRIDES;) {
        ov[n++] = rest + i + 1;  // past the NUL that ends the previous piece
        i += 1 + strlen(rest + i + 1);
    }

    char err[4096];
    bool from_override;
    CfgNode *tree = config_compose_text(text, yaml_len, "fuzz.yaml", g_hydra_defaults, n, ov, &from_override, err,
                                        sizeof err);
    if (tree) {
        // The runtime part of `hydra`, as app/hydra_app.c sets it (task vs hydra overrides).
        char *task[MAX_OVERRIDES], *hyd[MAX_OVERRIDES];
        int n_task = 0, n_hyd = 0;
        for (int i = 0; i < n; i++) {
            if (hydra_is_hydra_override(ov[i])) hyd[n_hyd++] = ov[i];
            else task[n_task++] = ov[i];
        }
        HydraRuntime rt = {.job_num = -1, .output_dir = NULL, .task = task, .n_task = n_task, .hydra = hyd,
                           .n_hydra = n_hyd};
        hydra_set_runtime(tree, &rt);
        print_to_memory(tree, HYDRA_CFG_ALL, false, true);
        print_to_memory(tree, HYDRA_CFG_JOB, true, true);
        print_to_memory(tree, -1, false, false);  // --help
        static const char *const strings[] = {"hydra.run.dir", "hydra.sweep.dir", "hydra.sweep.subdir",
                                              "hydra.job.name", "hydra.output_subdir", "hydra.job_logging"};
        for (size_t i = 0; i < sizeof strings / sizeof *strings; i++) {
            bool failed;
            free(hydra_get_string(tree, strings[i], &failed, err, sizeof err));
        }
        bind_and_round_trip(tree);
        cfg_free(tree);
    }

    // --multirun: the sweep expansion of the same overrides (jobs capped by hydra.c).
    HydraJob *jobs;
    size_t n_jobs;
    if (hydra_sweep_jobs(ov, n, &jobs, &n_jobs, err, sizeof err) == 0) hydra_jobs_free(jobs, n_jobs);
    free(rest);
    return 0;
}
