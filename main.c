// main.c — the mingpt command line.
//
//   mingpt [--config-name NAME] [--config-path DIR] [--cfg job] [section.key=value ...]
//   mingpt sample --snapshot PATH [--prompt TEXT] [--max_new_tokens N] [--temperature F] [--top_k K] [--seed S]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "trainer/sample.h"
#include "trainer/trainer.h"

static void usage(FILE *f) {
    fprintf(f,
        "usage: mingpt [--config-name NAME] [--config-path DIR] [--cfg job] [section.key=value ...]\n"
        "       mingpt sample --snapshot PATH [--prompt TEXT] [--max_new_tokens N] [--temperature F]\n"
        "                     [--top_k K] [--seed S]\n"
        "\n"
        "Trains a character-level GPT as configured by DIR/NAME.yaml (default ./gpt2_train_cfg.yaml),\n"
        "resuming from trainer_config.snapshot_path when it exists. Overrides such as\n"
        "trainer_config.max_epochs=5 change one key. --cfg job prints the configuration and exits.\n"
        "Exit codes: 0 ok, 1 runtime error, 2 usage or configuration error, 75 interrupted (snapshot saved).\n");
}

// Takes the value of flag argv[*i] given as "--flag VALUE" or "--flag=VALUE".
static const char *flag_value(int argc, char **argv, int *i, const char *flag) {
    size_t n = strlen(flag);
    if (argv[*i][n] == '=') return argv[*i] + n + 1;
    if (*i + 1 >= argc) return NULL;
    return argv[++*i];
}

static int is_flag(const char *arg, const char *flag) {
    size_t n = strlen(flag);
    return strncmp(arg, flag, n) == 0 && (arg[n] == 0 || arg[n] == '=');
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "sample") == 0) {
        SampleOptions o;
        int rc = sample_parse_args(argc - 1, argv + 1, &o);
        return rc ? rc : sample_run(&o, stdout);
    }

    const char *config_dir = ".", *config_name = "gpt2_train_cfg", *cfg_what = NULL;
    char **overrides = malloc(sizeof(char *) * (argc + 1));
    int n_overrides = 0, rc = -1;
    for (int i = 1; i < argc && rc < 0; i++) {
        const char *a = argv[i];
        const char **target = NULL, *flag = NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) { usage(stdout); rc = EXIT_OK; break; }
        if (is_flag(a, "--config-name")) { target = &config_name; flag = "--config-name"; }
        else if (is_flag(a, "-cn")) { target = &config_name; flag = "-cn"; }
        else if (is_flag(a, "--config-path")) { target = &config_dir; flag = "--config-path"; }
        else if (is_flag(a, "-cp")) { target = &config_dir; flag = "-cp"; }
        else if (is_flag(a, "--cfg")) { target = &cfg_what; flag = "--cfg"; }
        else if (is_flag(a, "-c")) { target = &cfg_what; flag = "-c"; }
        if (target) {
            const char *v = flag_value(argc, argv, &i, flag);
            if (!v) { fprintf(stderr, "mingpt: error: %s needs a value\n", a); usage(stderr); rc = EXIT_USAGE; }
            else if (target == &cfg_what && strcmp(v, "job") != 0) {
                fprintf(stderr, "mingpt: error: --cfg supports 'job' (got '%s')\n", v);
                rc = EXIT_USAGE;
            } else *target = v;
        } else if (a[0] == '-' && a[1] != 0 && strchr(a, '=') == NULL) {
            fprintf(stderr, "mingpt: error: unrecognized argument '%s'\n", a);
            usage(stderr);
            rc = EXIT_USAGE;
        } else {
            overrides[n_overrides++] = argv[i];
        }
    }
    if (rc >= 0) { free(overrides); return rc; }

    Config cfg;
    char err[4096];
    if (config_load(&cfg, config_dir, config_name, n_overrides, overrides, err, sizeof err)) {
        fprintf(stderr, "mingpt: error: %s\n", err);
        free(overrides);
        return EXIT_USAGE;
    }
    free(overrides);
    if (cfg_what) {
        char *yaml = config_to_yaml(&cfg);
        fputs(yaml, stdout);
        free(yaml);
        return EXIT_OK;
    }
    return trainer_run(&cfg, NULL);
}
