// config/cfg_number.h — numbers in config text: the three grammars that read them, side by side,
// and the formatter that writes them.
//
// mingpt copies three readers, each with its own idea of a number, so the same text can be a
// number in one place and a string in another, on purpose:
//   YAML 1.1 (cfg_yaml_int, cfg_yaml_float): a plain scalar in a config file, typed as OmegaConf's
//     loader types it (PyYAML's resolver plus OmegaConf's float pattern for 1e-3): 0b1010, 017
//     (octal), 0x1F, 1_000, 190:20:30 (base 60), 1e-3, .5, .inf, .nan; `inf` and `nan` are strings.
//   Hydra's override grammar (cfg_hydra_int, cfg_hydra_float): a value on the command line, read
//     as OverrideLexer's INT and FLOAT tokens: 10, -2, 1_000, 1e-3, .5, inf and nan in any case;
//     010, 0x1F and 1:30 are strings. (Unlike Hydra's lexer, a float may have leading zeros,
//     01.5 and 1e05, and no '_' in its exponent: 1e1_0 is a string.)
//   Python's int() and float() (cfg_py_int, cfg_py_float): a string given to a typed key, which
//     OmegaConf's IntegerNode and FloatNode convert with them (`seed: '010'` is 10); whitespace
//     around the number, '_' only between digits, inf, infinity and nan in any case. The YAML
//     writer also quotes the strings float() accepts, as OmegaConf's dumper does.
// Each grammar is a POSIX regular expression in cfg_number.c, copied from its source where it has
// one (PyYAML's and OmegaConf's resolver patterns), and checked with regexec.
#ifndef MINGPT_CFG_NUMBER_H
#define MINGPT_CFG_NUMBER_H

#include <stdbool.h>
#include <stddef.h>

// What a conversion made of a value (CONV_NULL: the value was null, for the typed keys).
typedef enum { CONV_OK, CONV_BAD, CONV_NULL, CONV_RANGE } CfgConv;

// YAML 1.1 int: true when text is one; then *big says that it does not fit in 64 bits (and
// *out is not set), else *out is its value.
bool cfg_yaml_int(const char *text, long long *out, bool *big);

// YAML 1.1 float (OmegaConf's pattern): true with the value in *out.
bool cfg_yaml_float(const char *text, double *out);

// PyYAML's implicit timestamp (2023-09-16, or a date and a time): such a string is quoted when
// written, so that it reads back as a string.
bool cfg_yaml_timestamp(const char *text);

// Hydra INT token ([+-]? 0 | [1-9] with '_' between digits): as cfg_yaml_int.
bool cfg_hydra_int(const char *text, long long *out, bool *big);

// Hydra FLOAT token (1.5, 1., .5, 1e-3, inf, nan, signed): true with the value in *out.
bool cfg_hydra_float(const char *text, double *out);

// Python int(text): CONV_OK with its magnitude in *uout and its sign in *neg (each may be NULL),
// and in *out when it fits a long long; CONV_RANGE when it does not fit in 64 bits (or in *out,
// when given); CONV_BAD when int() refuses it.
CfgConv cfg_py_int(const char *text, long long *out, unsigned long long *uout, bool *neg);

// Python float(text): CONV_OK with the value in *out; CONV_RANGE for a float of more than 127
// characters (no config value needs one); CONV_BAD when float() refuses it.
CfgConv cfg_py_float(const char *text, double *out);

// Formats x like Python's repr(float) (shortest round-trip digits: 0.0003, 1e-08, 1.0,
// inf, nan); with yaml_style like PyYAML's dump (1.0e-08, .inf, -.inf, .nan), which every
// YAML 1.1 loader reads back as the same float. Returns the length snprintf would return.
int cfg_format_float(double x, char *buf, size_t n, bool yaml_style);

#endif
