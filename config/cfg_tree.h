// config/cfg_tree.h — a generic, ordered configuration tree (the OmegaConf-like layer).
//
// Nodes are null/bool/int/float/string scalars, lists and maps (keys kept in insertion
// order). Every node remembers where its value came from: a file position (1-based line
// and column) or the command-line override that set it, so that any later stage (schema
// binding, interpolation, --cfg printing) can point the user at the right place.
//
// A tree's YAML form (reading and writing) is in config/cfg_yaml.h, the numbers of its text in
// config/cfg_number.h, the strings it is built from in config/strbuf.h; this header brings them.
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

#include "config/cfg_number.h"
#include "config/cfg_yaml.h"
#include "config/strbuf.h"

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

// Replaces the location *dst with a copy of *src.
void cfg_loc_copy(CfgLoc *dst, const CfgLoc *src);

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

// The child of n named by the len bytes at seg: a map key, or a list index (decimal digits, at
// most 18), or NULL.
CfgNode *cfg_child(const CfgNode *n, const char *seg, size_t len);

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

// Writes Python's str() of the node into buf (None, True, 0.001, abc, [1, 'a'], {'k': 1}).
void cfg_repr(const CfgNode *n, char *buf, size_t len);

// The same, whole, as a malloc'd string; *len (may be NULL) gets its length.
char *cfg_repr_alloc(const CfgNode *n, size_t *len);

// Number of nodes in the tree below and including n (0 for NULL).
size_t cfg_count(const CfgNode *n);

#endif
