// config/completion.h — Hydra's shell completion for mingpt (`--shell-completion`/`-sc`, Hydra 1.3:
// hydra/_internal/hydra.py shell_completion, hydra/plugins/completion_plugin.py).
//
//   eval "$(mingpt -sc install=bash)"     defines the bash completion for mingpt (and ./mingpt);
//                                         `make install` ships the same script
//   mingpt -sc uninstall=bash             prints the command that removes it
//   mingpt -sc query="<words>"            one candidate per line for the last of <words> (the
//                                         command line after `mingpt`, up to the cursor; a
//                                         trailing space starts a new word); query=bash reads
//                                         the line from COMP_LINE / COMP_POINT as Hydra's does
//
// What a query completes: the subcommands (those passed in: app/subcommand.h's list) as the first
// word, and on a subcommand's line what the subcommand offers (its flags, the values of a choice);
// flags (a word starting with '-'); the values of --cfg, --info and --package (config keys) and
// config names for --config-name; config keys as Hydra does, from the config composed with the
// line's -cp/-cn/-cd and overrides (hydra.* included): `trainer_config.` lists the section's keys
// (`trainer_config.batch_size=`; maps end in '.'), a partial key its matches, `key=` the current
// value and, for enumerated keys, every allowed value (schema choices such as
// trainer_config.device, booleans true/false, hydra.mode, hydra.job_logging). Nothing is printed
// where bash's own file name completion fits (paths, a subcommand's paths), and a line whose
// config cannot be composed completes from the config without its overrides, or only flags.
#ifndef MINGPT_COMPLETION_H
#define MINGPT_COMPLETION_H

#include <stdio.h>

#include <stddef.h>

#include "config/hydra.h"

// A subcommand, as completion sees it. The subcommands are app/'s (app/subcommand.h), a floor
// above config/: app/ fills these and passes them in.
typedef struct {
    const char *name;   // the line's first word: "sample"
    // Writes the candidates for word, the word being typed on a line of this subcommand, one per
    // line to out; prev is the word before it (the subcommand's name for its first argument).
    // Writes none where bash's file names fit. NULL: no candidates at all.
    void (*complete)(const void *ctx, const char *prev, const char *word, FILE *out);
    const void *ctx;    // complete's first argument
} CompletionSubcommand;

// -sc with a->overrides holding exactly one of install=bash, uninstall=bash, query=...: prints
// to out and returns 0; otherwise Hydra's message on err and EXIT 2. subs[0..n_subs) are the
// subcommands.
int completion_main(const HydraArgs *a, const CompletionSubcommand *subs, size_t n_subs, FILE *out, FILE *err);

// The candidates for line (see above), one per line, to out; subs[0..n_subs) are the subcommands.
void completion_query(const char *line, const CompletionSubcommand *subs, size_t n_subs, FILE *out);

#endif
