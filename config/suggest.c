// config/suggest.c — "did you mean": Levenshtein distance over the parts of dotted keys.
#include "config/suggest.h"

#include <stdio.h>
#include <string.h>

#include "config/cfg_tree.h"

// Levenshtein distance between the first SUGGEST_PART - 1 bytes of a and of b.
static size_t distance(const char *a, const char *b) {
    size_t la = strnlen(a, SUGGEST_PART - 1), lb = strnlen(b, SUGGEST_PART - 1), row[SUGGEST_PART];
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

void suggest_init(Suggest *s, const char *want, bool split) {
    memset(s, 0, sizeof *s);
    s->best = (size_t)-1;
    if (!split) {
        snprintf(s->want[0], SUGGEST_PART, "%s", want);
        s->n_want = 1;
        return;
    }
    for (const char *p = want; *p && s->n_want < SUGGEST_MAX_PARTS; s->n_want++) {
        size_t l = strcspn(p, ".");
        snprintf(s->want[s->n_want], SUGGEST_PART, "%.*s", (int)l, p);
        p += l + (p[l] == '.');
    }
}

void suggest_offer(Suggest *s, const char *const *parts, int n, const char *path) {
    if (n != s->n_want) return;
    size_t d = 0, longest = 0;
    for (int i = 0; i < n; i++) {
        size_t e = distance(s->want[i], parts[i]);
        d += e;
        if (e && strlen(s->want[i]) > longest) longest = strlen(s->want[i]);
    }
    if (d && d < s->best && (d <= 2 || d * 3 <= longest)) {
        s->best = d;
        snprintf(s->pick, sizeof s->pick, "%s", path);
    }
}

void suggest_offer_name(Suggest *s, const char *name, const char *path) {
    if (!s->same_name[0] && s->n_want && strcmp(name, s->want[s->n_want - 1]) == 0)
        snprintf(s->same_name, sizeof s->same_name, "%s", path);
}

static void walk(Suggest *s, const CfgNode *n, const char **parts, int depth, const char *prefix) {
    for (size_t i = 0; n->type == CFG_MAP && i < n->n && depth < SUGGEST_MAX_PARTS; i++) {
        char path[512];
        int w = snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", n->kids[i]->key);
        if (w < 0 || (size_t)w >= sizeof path) continue;  // absurdly deep: not a suggestion
        parts[depth] = n->kids[i]->key;
        suggest_offer(s, parts, depth + 1, path);
        suggest_offer_name(s, n->kids[i]->key, path);
        walk(s, n->kids[i], parts, depth + 1, path);
    }
}

void suggest_tree(Suggest *s, const CfgNode *tree) {
    const char *parts[SUGGEST_MAX_PARTS];
    if (s->n_want) walk(s, tree, parts, 0, "");
}

const char *suggest_result(const Suggest *s) {
    return s->pick[0] ? s->pick : s->same_name[0] ? s->same_name : NULL;
}
