// config/cfg_interp.h — OmegaConf-style interpolation over a config tree.
//
// A string value containing `${` is an interpolation, resolved when it is read:
//   ${a.b} ${a.0} ${a[0]}    absolute key (map keys, list indices)
//   ${.x} ${..x}             relative: a sibling, the parent's sibling, ...
//   ${a.${b}} ${p[${sel}]}   nested
//   run_${a.b}L              string interpolation (any surrounding text makes a string)
//   \${x}                    escaped: the literal text ${x}
//   ${oc.env:VAR} ${oc.env:VAR,default}   environment variable (default str()-converted; null stays null)
//   ${now:%Y-%m-%d}          strftime of the process's timestamp (one per process, see cfg_now)
//   ${hydra:job.name}        the value of hydra.job.name in the same tree (Hydra's resolver)
// A whole-value interpolation keeps the target's type (${gpt_config.n_layer} is an int, ${gpt_config}
// a map). The string `???` is a mandatory value that is missing.
//
// Errors carry OmegaConf's texts, followed by the key being read:
//   Interpolation key 'a.x' not found\n    full_key: k\n    object_type=dict
// (also: Recursive interpolation detected; Interpolation to parent node detected;
// MissingMandatoryValue while resolving interpolation: Missing mandatory value: tag;
// KeyError raised while resolving interpolation: "Environment variable 'V' not found";
// Unsupported interpolation type foo; Missing mandatory value: tag).
//
// Budgets (a crafted value must neither overflow the stack nor run for minutes), each an error
// with the same trailer naming the key:
//   Interpolation nested too deeply: more than 32 levels of ${...} in one value, the limit
//   Interpolation chain too deep: more than 64 interpolations, each reading the next, the limit (the chain starts at <key>)
//     (a chain that is not a cycle; a cycle of any length is "Recursive interpolation detected")
//   Interpolation result too long: more than 262144 bytes, the limit for a config value
//   Interpolation too costly: resolving <key> takes more than 1048576 steps, the limit (...)
//     (values that paste another value twice per level grow as 2^levels)
//   Interpolation too costly: resolving <path> takes more than 16777216 steps in all, the limit
//     (many interpolations, each within the limit, in one cfg_resolve)
#ifndef MINGPT_CFG_INTERP_H
#define MINGPT_CFG_INTERP_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "config/cfg_tree.h"

#define CFG_INTERP_MAX_NEST 32          // ${ nested inside one value: ${a.${b.${c}}}
#define CFG_INTERP_MAX_CHAIN 64         // interpolations being resolved at once (a -> b -> c ...)
#define CFG_INTERP_MAX_WORK (1u << 20)  // steps (nodes copied, keys looked up, bytes pasted) of one interpolation
#define CFG_INTERP_MAX_TOTAL_WORK (1u << 24)  // steps of one cfg_resolve call

// n is the missing-value marker `???`.
bool cfg_is_missing(const CfgNode *n);

// n is a string that contains an interpolation (`${`).
bool cfg_is_interpolation(const CfgNode *n);

// The node at `path` of root, with every interpolation below it resolved, as a new tree (free
// with cfg_free). A `???` met directly or through an interpolation is an error when
// throw_on_missing, else it stays `???` (what `--cfg job --resolve` prints). An empty path is
// the whole tree. Returns NULL with the message in err (also when path does not exist).
CfgNode *cfg_resolve(const CfgNode *root, const char *path, bool throw_on_missing, char *err, size_t errlen);

// The timestamp `${now:...}` formats: the first call fixes it for the rest of the process, so
// that every job of a sweep and every directory name agree (Hydra caches it the same way).
time_t cfg_now(void);
// Fixes the timestamp (data-parallel jobs: every rank takes rank 0's, so `${now:}` names one
// run directory for the whole job).
void cfg_set_now(time_t t);

#endif
