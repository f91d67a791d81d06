// config/cfg_yaml.h — a config tree's YAML form: reading (libyaml's event parser) and writing
// (libyaml's emitter), with the scalar typing of OmegaConf's loader.
//
// Plain scalars are typed by YAML 1.1's implicit rules (PyYAML's SafeLoader) plus OmegaConf's
// float pattern that accepts `1e-3` (the numbers: config/cfg_number.h); timestamps stay strings;
// quoted scalars are always strings. Errors name the origin (file), line and column.
#ifndef MINGPT_CFG_YAML_H
#define MINGPT_CFG_YAML_H

#include <stddef.h>

typedef struct CfgNode CfgNode;

// Types the text of a plain (unquoted) YAML scalar: sets n->type and the value; n->s is
// left alone. YAML 1.1 + OmegaConf rules: `~`/null/empty -> null; yes/no/on/off/true/false
// (three spellings each) -> bool; 0b.., 0.. (octal), 0x.., decimal, 1_000 and 1:30
// (sexagesimal) -> int; 1.5, 1., .5, 1e-3, 1.0e+3, .inf, .nan -> float; else string.
// An int that does not fit in 64 bits stays a string.
void cfg_resolve_plain(CfgNode *n, const char *text);

// Renders the tree as block-style YAML (2-space indent, insertion order, strings quoted
// when they would otherwise be read back as another type). Returns a malloc'd string, or
// NULL when libyaml refuses the data (e.g. a string that is not valid UTF-8).
char *cfg_to_yaml(const CfgNode *root);

// Parses the YAML file at path into a tree whose locations name `path`. An empty file
// gives a CFG_NULL root. On error returns NULL with a message in err: an unreadable file
// ("cannot open config file '<path>': <strerror>"), a syntax error
// ("<path>:<line>:<col>: YAML syntax error: ..."), a duplicate key, more than one
// document, an unknown alias or an unsupported tag, and the budgets: a file larger than
// CFG_MAX_FILE_BYTES ("config file '<path>' is larger than 4 MiB, the limit"), nesting deeper
// than CFG_MAX_DEPTH, a scalar or key longer than CFG_MAX_SCALAR_BYTES, more than
// CFG_MAX_NODES nodes once aliases are expanded, aliases that expand to more than
// CFG_MAX_ALIAS_NODES nodes in all (a "billion laughs" alias bomb).
CfgNode *cfg_parse_file(const char *path, char *err, size_t errlen);

// Same for YAML text in memory (NUL-terminated); `origin` names it in locations and messages.
CfgNode *cfg_parse_string(const char *text, const char *origin, char *err, size_t errlen);

// Same for the first len bytes at text (no NUL needed; a NUL byte inside is a YAML error).
CfgNode *cfg_parse_bytes(const char *text, size_t len, const char *origin, char *err, size_t errlen);

#endif
