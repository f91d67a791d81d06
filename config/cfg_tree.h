// config/cfg_tree.h — a generic, ordered configuration tree (the OmegaConf-like layer).
//
// Nodes are null/bool/int/float/string scalars, lists and maps (keys kept in insertion
// order). Every node remembers where its value came from: a file position (1-based line
// and column) or the command-line override that set it, so that any later stage (schema
// binding, interpolation, --cfg printing) can point the user at the right place.
//
// YAML is read with libyaml and typed like OmegaConf's loader: YAML 1.1 implicit typing
// of plain scalars (PyYAML SafeLoader rules) plus OmegaConf's extra float pattern that
// accepts `1e-3`; timestamps stay strings; quoted scalars are always strings.
//
// Allocation failure aborts (there is nothing sensible to recover); every other error is
// reported through an (err, errlen) buffer and a NULL / non-zero return.
//
// Budgets: a config is text people edit, and text that may be crafted. What one file or one
// override can make us allocate is bounded by the limits below (fixed: a real config is a few
// KiB, some hundred nodes, nested a few levels); each is an error naming the file and the limit.
#ifndef MINGPT_CFG_TREE_H
#define MINGPT_CFG_TREE_H

#include <stdbool.h>
#include <stddef.h>

#define CFG_MAX_FILE_BYTES (4u << 20)     // a config file or text: 4 MiB
#define CFG_MAX_SCALAR_BYTES (256u << 10) // one YAML scalar or key, one override, one resolved string
#define CFG_MAX_DEPTH 64                  // maps and lists nested in a file, parts of an override key
#define CFG_MAX_NODES (1u << 17)          // nodes of one YAML document, every alias counted at each use
#define CFG_MAX_ALIAS_NODES (1u << 14)    // of which copies made by aliases (a "billion laughs" bomb)

typedef enum { CFG_NULL, CFG_BOOL, CFG_INT, CFG_FLOAT, CFG_STRING, CFG_LIST, CFG_MAP } CfgType;

// Where a value (or a map key) came from. All strings are owned by the node.
typedef struct CfgLoc {
    char *file;      // source file or origin name; NULL when the value was made in code
    int line, col;   // 1-based position in `file`; 0 when unknown
    char *override;  // the command-line override (as typed) that set the value, else NULL
} CfgLoc;

typedef struct CfgNode CfgNode;
struct CfgNode {
    CfgType type;
    bool b;           // CFG_BOOL
    long long i;      // CFG_INT
    double f;         // CFG_FLOAT
    char *s;          // CFG_STRING: the value; other scalars: their source text (NULL if made in code)
    bool quoted;      // scalar was not plain in its source (quoted, block or !!str): never retyped
    char quote;       // override values: the quote character (' or ") a quoted string was written with, else 0
    CfgNode **kids;   // CFG_LIST items / CFG_MAP values, in order
    size_t n, cap;
    char *key;        // this node's key in its parent map (NULL for list items and the root)
    CfgLoc loc;       // where the value was written
    CfgLoc key_loc;   // where the key was written (map entries only)
    bool merged;      // entry came from a YAML merge key (`<<`); explicit keys may replace it
    struct CfgIndex *index; // private to cfg_tree.c: key hash of a large map (kept by the functions
                            // below; change a map's entries only through them)
};

// ---- small helpers shared by the config/ sources ---------------------------------------

// strdup that aborts on allocation failure; NULL in gives NULL out.
char *cfg_strdup(const char *s);

// snprintf into err (when err != NULL and errlen > 0). Returns -1 so callers can
// `return cfg_errf(...)`.
int cfg_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

// Levenshtein distance between a and b (for "did you mean" suggestions).
size_t cfg_edit_distance(const char *a, const char *b);

// ---- construction and destruction ------------------------------------------------------

// New node of the given type with no value and no location (scalars: false / 0 / NULL).
CfgNode *cfg_new(CfgType type);
CfgNode *cfg_new_null(void);
CfgNode *cfg_new_bool(bool b);
CfgNode *cfg_new_int(long long i);
CfgNode *cfg_new_float(double f);
CfgNode *cfg_new_str(const char *s);           // copies s
CfgNode *cfg_new_str_n(const char *s, size_t n); // copies the first n bytes of s
CfgNode *cfg_new_list(void);
CfgNode *cfg_new_map(void);

// Frees n and everything below it. NULL is allowed.
void cfg_free(CfgNode *n);

// Deep copy (values, keys, locations).
CfgNode *cfg_copy(const CfgNode *n);

// Sets n's value location (not its children's). file may be NULL.
void cfg_set_loc(CfgNode *n, const char *file, int line, int col);

// Marks n and everything below it as set by the override `text` (clears file positions).
void cfg_set_override(CfgNode *n, const char *text);

// ---- maps and lists ---------------------------------------------------------------------

// Index of `key` in map m, or -1 (also when m is NULL or not a map).
long cfg_map_find(const CfgNode *m, const char *key);

// Value of `key` in map m, or NULL.
CfgNode *cfg_map_get(const CfgNode *m, const char *key);

// Sets m[key] = v, taking ownership of v. An existing entry is freed and replaced in place
// (its position and, when v has none, its key location are kept); otherwise v is appended.
void cfg_map_put(CfgNode *m, const char *key, CfgNode *v);

// Removes m[key]; returns false when it was absent.
bool cfg_map_del(CfgNode *m, const char *key);

// Appends v (ownership taken) to list l.
void cfg_list_push(CfgNode *l, CfgNode *v);

// Removes and frees item i of list l (i < l->n).
void cfg_list_del(CfgNode *l, size_t i);

// The node at a dotted path ("a.b.0.c": map keys, or decimal indices into lists), or NULL.
// An empty path is the root itself.
CfgNode *cfg_select(const CfgNode *root, const char *path);

// Recursively merges map src into map dst (OmegaConf.merge for untyped configs): maps
// merge key by key, anything else (including lists) replaces. src is not modified.
void cfg_merge(CfgNode *dst, const CfgNode *src);

// Structural equality with Python semantics for numbers (1 == 1.0); map order ignored.
bool cfg_equal(const CfgNode *a, const CfgNode *b);

// ---- rendering --------------------------------------------------------------------------

// Python's type name for a node type: NoneType bool int float str list dict.
const char *cfg_type_name(CfgType t);

// Formats x like Python's repr(float) (shortest round-trip digits: 0.0003, 1e-08, 1.0,
// inf, nan); with yaml_style like PyYAML's dump (1.0e-08, .inf, -.inf, .nan), which every
// YAML 1.1 loader reads back as the same float. Returns the length snprintf would return.
int cfg_format_float(double x, char *buf, size_t n, bool yaml_style);

// Writes Python's str() of the node into buf (None, True, 0.001, abc, [1, 'a'], {'k': 1}).
void cfg_repr(const CfgNode *n, char *buf, size_t len);

// The same, whole, as a malloc'd string; *len (may be NULL) gets its length.
char *cfg_repr_alloc(const CfgNode *n, size_t *len);

// Number of nodes in the tree below and including n (0 for NULL).
size_t cfg_count(const CfgNode *n);

// Renders the tree as block-style YAML (2-space indent, insertion order, strings quoted
// when they would otherwise be read back as another type). Returns a malloc'd string, or
// NULL when libyaml refuses the data (e.g. a string that is not valid UTF-8).
char *cfg_to_yaml(const CfgNode *root);

// ---- YAML input -------------------------------------------------------------------------

// Types the text of a plain (unquoted) YAML scalar: sets n->type and the value; n->s is
// left alone. YAML 1.1 + OmegaConf rules: `~`/null/empty -> null; yes/no/on/off/true/false
// (three spellings each) -> bool; 0b.., 0.. (octal), 0x.., decimal, 1_000 and 1:30
// (sexagesimal) -> int; 1.5, 1., .5, 1e-3, 1.0e+3, .inf, .nan -> float; else string.
// An int that does not fit in 64 bits stays a string.
void cfg_resolve_plain(CfgNode *n, const char *text);

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
