// config/suggest.h — "did you mean": the known key closest to a mistyped one, for every message
// that names an unknown key (a config file's keys in config.c, an override's in cfg_override.c).
//
// Keys are compared part by part (the dotted parts of a key). A candidate with as many parts as
// the wanted key is close when the Levenshtein distances of its parts, summed, are at most 2 or at
// most a third of the longest part that differs (n_layr -> n_layer, but not seed -> split); the
// closest wins, the first of equals. Failing that, the first candidate whose last part is the
// wanted key's last part: the key written in the wrong section (trainer_config.learning_rate ->
// optimizer_config.learning_rate).
#ifndef MINGPT_SUGGEST_H
#define MINGPT_SUGGEST_H

#include <stdbool.h>
#include <stddef.h>

#define SUGGEST_MAX_PARTS 8  // parts of a key compared (a deeper key is not suggested)
#define SUGGEST_PART 128     // bytes of a part compared, with its NUL (a longer part is cut)

typedef struct CfgNode CfgNode;

typedef struct {
    char want[SUGGEST_MAX_PARTS][SUGGEST_PART];  // the mistyped key, in parts
    int n_want;
    size_t best;                                 // distance of pick
    char pick[512], same_name[512];              // "" until found
} Suggest;

// Starts a search for `want`: split at its dots, or (split false) one part, dots and all.
void suggest_init(Suggest *s, const char *want, bool split);

// Offers candidate `path`, made of parts[0..n): compared when n is the wanted key's part count.
void suggest_offer(Suggest *s, const char *const *parts, int n, const char *path);

// Offers `path` for the fallback: taken when `name` is the wanted key's last part.
void suggest_offer_name(Suggest *s, const char *name, const char *path);

// Offers every key below the map `tree` both ways, as its dotted path (depth first, up to
// SUGGEST_MAX_PARTS levels, paths up to 511 bytes).
void suggest_tree(Suggest *s, const CfgNode *tree);

// The suggestion: the closest candidate, else the fallback, else NULL.
const char *suggest_result(const Suggest *s);

#endif
