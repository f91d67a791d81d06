// config/cfg_override.h — Hydra command-line overrides: parsing and applying to a tree.
//
// Grammar (Hydra 1.3 basic override syntax, without config groups; sweeps with _ex):
//   key=value   change an existing key (the tree is in struct mode)
//   +key=value  add a key that does not exist yet (or whose value is null)
//   ++key=value add or change
//   ~key[=value] delete (only when the current value equals value, if given)
//   key=        set to the empty string
// key is ID(.ID|.INDEX)* with ID = [A-Za-z_$][A-Za-z0-9_$-]*; INDEX a list index.
// Values: int (10, -2, 1_000; not 010), float (3.14, 1., .5, 1e-3, inf, nan), bool
// (true/false, any case), null (any case), quoted strings ('a b', "x,y"), lists [1,a],
// dicts {k: v}; anything else is a string (surrounding whitespace trimmed, `\,` etc.
// unescaped, `${...}` kept verbatim). Error messages copy Hydra's texts.
// Limits: an override of at most CFG_MAX_SCALAR_BYTES, a key of at most CFG_MAX_DEPTH parts, a
// value nested at most CFG_MAX_DEPTH levels ("Error parsing override '...'\n<which limit>").
#ifndef MINGPT_CFG_OVERRIDE_H
#define MINGPT_CFG_OVERRIDE_H

#include "config/cfg_tree.h"

typedef enum { CFG_OV_CHANGE, CFG_OV_ADD, CFG_OV_FORCE_ADD, CFG_OV_DELETE } CfgOverrideKind;

typedef struct {
    CfgOverrideKind kind;
    char *key;       // dotted key without the +/++/~ prefix, e.g. "trainer_config.seed"
    CfgNode *value;  // parsed value, nodes marked with this override; NULL for `~key` without `=`
    char *text;      // the override exactly as given
    CfgNode **sweep; // multirun only: the values of a sweep (a,b,c / choice(..) / range(..)), in
    size_t n_sweep;  //   order; value is then NULL. n_sweep == 0 for a plain override.
} CfgOverride;

// Parses one override. On success fills *ov (free with cfg_override_free) and returns 0.
// On a syntax error returns -1 with Hydra's message in err, e.g.
//   Error parsing override 'a.b'\nmissing EQUAL at '<EOF>'\nSee https://hydra.cc/...
// Sweeps (`a=1,2`, `a=range(1,3)`) are rejected with Hydra's no-multirun messages.
int cfg_override_parse(const char *text, CfgOverride *ov, char *err, size_t errlen);

// Same, for a multirun: a sweep value (`a,b`, `choice(a,b)`, `range(start,stop[,step])` with
// Python semantics and exact decimal steps for floats) fills ov->sweep instead of ov->value.
// `interval(..)` gives "BasicSweeper does not support sweep type : INTERVAL_SWEEP".
int cfg_override_parse_ex(const char *text, bool multirun, CfgOverride *ov, char *err, size_t errlen);

// A value written back as override text, like Hydra's Override._get_value_element_as_str:
// 1e-3 -> 0.001, true -> True, null, [1,a], {k:v}, quoted strings keep their quotes, special
// characters of unquoted strings escaped. Returns a malloc'd string.
char *cfg_override_render(const CfgNode *v);

// Types one unquoted token as Hydra does (int, float, bool, null, else string); a new node.
CfgNode *cfg_override_type_token(const char *text);

// Frees the strings and value inside ov (not ov itself).
void cfg_override_free(CfgOverride *ov);

// Applies ov to root (a map) the way Hydra/OmegaConf.update(merge=True) does: dict values
// merge into existing dicts, everything else replaces. Struct mode: a plain `key=v` (and
// new keys inside a merged dict) must already exist, except below the top-level keys named
// in open_keys (NULL-terminated list, may be NULL), which accept new keys like a plain
// dict. Returns 0, or -1 with Hydra's message in err:
//   Could not override 'a.b'.\nTo append to your config use +a.b=v\nKey 'b' is not in struct\n
//       full_key: a.b\n    object_type=dict
//   Could not append to config. An item is already at 'a.b'.\n...
//   Could not delete from config. 'a.b' does not exist.
//   Error merging override a.5=9\nlist index out of range\n    full_key: a[5]\n    object_type=list
// and mingpt's own: an override whose key parts and value levels together nest the config
// deeper than CFG_MAX_DEPTH levels (what a config file may hold: the composed config is printed
// as YAML and read back) is refused, "Error merging override ...\nthe config would be nested N
// levels deep (...), deeper than 64 levels, the limit for a config".
int cfg_override_apply(CfgNode *root, const CfgOverride *ov, const char *const *open_keys, char *err,
                       size_t errlen);

// OmegaConf's full_key for a dotted path: list indices in brackets ("a.lst.1" -> "a.lst[1]")
// where root says the parent is a list. Writes into buf.
void cfg_full_key(const CfgNode *root, const char *path, char *buf, size_t len);

#endif
