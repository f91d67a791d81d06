// app/plot.h — `mingpt plot DIR... [--out F.svg|F.png] [--x iter|tokens|time] [--log]`: the loss
// curves of runs and sweeps overlaid in one SVG or PNG (report/loss_plot.h draws them).
#ifndef MINGPT_APP_PLOT_H
#define MINGPT_APP_PLOT_H

#include "app/subcommand.h"

// Its table (app/subcommand.h). Its run function returns the exit code: 0 (one line on out naming
// the file and the number of runs); 2 for a usage error (an --out that is neither .svg nor .png,
// a directory that is no run or has no metrics.jsonl); 1 for a runtime error (an unwritable
// --out, no plotting library).
extern const Subcommand PLOT_COMMAND;

#endif
