// app/runs.h — `mingpt runs DIR... [--json|--csv]`: the runs of a sweep (or of a shell loop's
// run directories) side by side, best test loss first.
#ifndef MINGPT_RUNS_H
#define MINGPT_RUNS_H

#include "app/subcommand.h"

// `mingpt runs`: its table (app/subcommand.h). One row per run: its status (ok, running:
// exit_status null, which is also a run killed before it ended; interrupted: 75; failed (N): any
// other non-zero exit), its overrides, iterations, final train and test loss, tokens/s, wall
// seconds, and its directory; from summary.json, and from the last lines of metrics.jsonl where
// the summary has no number (a run still in progress or killed). Rows are sorted by test loss,
// runs without one last, in argument order among equals. Output: an aligned table; --json a JSON
// array of objects (jansson); --csv RFC 4180 (a header row, every text field quoted, CRLF line
// ends). The run function returns 0, 2 for a usage error (a directory that is no run nor sweep, a
// malformed summary.json or overrides.yaml; a bad flag is the parser's), 1 when the output cannot
// be written.
extern const Subcommand RUNS_COMMAND;

#endif
