// app/subcommand.c — see subcommand.h.
#include "app/subcommand.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "app/export.h"
#include "app/info.h"
#include "app/plot.h"
#include "app/runs.h"
#include "app/sample.h"
#include "config/suggest.h"
#include "trainer/trainer.h"

// THE list of subcommands: main.c dispatches through it, shell completion lists it in this order.
static const Subcommand *const SUBCOMMAND_LIST[] = {&SAMPLE_COMMAND, &INFO_COMMAND, &EXPORT_COMMAND, &PLOT_COMMAND,
                                                    &RUNS_COMMAND};
enum { N_SUBCOMMANDS = sizeof SUBCOMMAND_LIST / sizeof *SUBCOMMAND_LIST };

const Subcommand *subcommand_find(const char *name) {
    for (size_t i = 0; i < N_SUBCOMMANDS; i++)
        if (!strcmp(SUBCOMMAND_LIST[i]->name, name)) return SUBCOMMAND_LIST[i];
    return NULL;
}

const Subcommand *subcommand_at(size_t i) { return i < N_SUBCOMMANDS ? SUBCOMMAND_LIST[i] : NULL; }

const char *subcommand_suggest(const char *word) {
    if (subcommand_find(word)) return NULL;
    Suggest s;
    suggest_init(&s, word, false);
    for (size_t i = 0; i < N_SUBCOMMANDS; i++) suggest_offer(&s, &SUBCOMMAND_LIST[i]->name, 1, SUBCOMMAND_LIST[i]->name);
    return s.pick[0] ? subcommand_find(s.pick)->name : NULL;   // the closest only, not suggest's same-name fallback
}

int subcommand_check_unknown(int argc, char **argv, FILE *err) {
    if (argc < 2) return 0;
    const char *w = argv[1];
    if (!w[0] || strchr(w, '=') || strchr("-+~", w[0])) return 0;
    const char *pick = subcommand_suggest(w);
    if (!pick) return 0;
    fprintf(err, "mingpt: error: unknown command '%s' (did you mean '%s'?)\n", w, pick);
    return EXIT_USAGE;
}

// CompletionSubcommand.complete: ctx is the Subcommand.
static void complete_subcommand(const void *ctx, const char *prev, const char *word, FILE *out) {
    subcommand_complete(ctx, prev, word, out);
}

size_t subcommand_completions(CompletionSubcommand *subs, size_t max) {
    for (size_t i = 0; i < N_SUBCOMMANDS && i < max; i++)
        subs[i] = (CompletionSubcommand){.name = SUBCOMMAND_LIST[i]->name, .complete = complete_subcommand,
                                         .ctx = SUBCOMMAND_LIST[i]};
    return N_SUBCOMMANDS;
}

// ========================================================================== usage

// The value shown after a flag in the usage's first line ("" for a switch).
static const char *usage_value(const SubFlag *f) {
    if (f->type == SUB_SWITCH) return "";
    if (f->usage_value) return f->usage_value;
    return f->type == SUB_CHOICE ? f->choices : f->metavar;
}

// A flag's label in the help lines: its name and its value's name.
static void help_label(const SubFlag *f, char *buf, size_t len) {
    snprintf(buf, len, "%s%s%s", f->name, f->type == SUB_SWITCH ? "" : " ", f->type == SUB_SWITCH ? "" : f->metavar);
}

void subcommand_usage(const Subcommand *c, FILE *f) {
    fprintf(f, "usage: mingpt %s", c->name);
    if (c->positional) fprintf(f, " %s%s", c->positional->metavar, c->positional->max == 1 ? "" : "...");
    for (int k = 0; k < c->n_flags; k++) {
        const SubFlag *fl = &c->flags[k];
        const char *v = usage_value(fl);
        if (fl->group) {   // the group's consecutive flags in one bracket
            if (k > 0 && c->flags[k - 1].group == fl->group) continue;
            fputs(" [", f);
            for (int j = k; j < c->n_flags && c->flags[j].group == fl->group; j++) {
                const char *vj = usage_value(&c->flags[j]);
                fprintf(f, "%s%s%s%s", j > k ? "|" : "", c->flags[j].name, *vj ? " " : "", vj);
            }
            fputc(']', f);
        } else {
            fprintf(f, fl->required ? " %s%s%s" : " [%s%s%s]", fl->name, *v ? " " : "", v);
        }
    }
    fputc('\n', f);
    if (!c->help_lines) return;
    // the help texts in one column: two spaces past the longest label, at an even column
    char label[256];
    size_t w = c->positional ? strlen(c->positional->metavar) : 0;
    for (int k = 0; k < c->n_flags; k++) {
        help_label(&c->flags[k], label, sizeof label);
        if (strlen(label) > w) w = strlen(label);
    }
    w = (w + 3) & ~(size_t)1;
    if (c->positional) fprintf(f, "  %-*s%s\n", (int)w, c->positional->metavar, c->positional->help);
    for (int k = 0; k < c->n_flags; k++) {
        help_label(&c->flags[k], label, sizeof label);
        fprintf(f, "  %-*s%s\n", (int)w, label, c->flags[k].help);
    }
}

// ========================================================================== parsing and completion

// One message on err: "mingpt NAME: " (SUB_ERROR: "mingpt NAME: error: ") and the text.
static void say(const Subcommand *c, FILE *err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(const Subcommand *c, FILE *err, const char *fmt, ...) {
    va_list ap;
    fprintf(err, "mingpt %s: %s", c->name, c->dialect == SUB_ERROR ? "error: " : "");
    va_start(ap, fmt);
    vfprintf(err, fmt, ap);
    va_end(ap);
    fputc('\n', err);
}

// After an error of kind (a SUB_USAGE_* bit): the usage where c->usage_after asks for it.
static int fail(const Subcommand *c, const SubArgs *a, FILE *err, unsigned kind) {
    const unsigned u = c->usage_after;
    if ((u & kind) && (!(u & SUB_USAGE_NO_POSITIONAL) || a->n_positional == 0)) subcommand_usage(c, err);
    return EXIT_USAGE;
}

// The flag of c named by the first len bytes of name, or NULL.
static const SubFlag *find_flag(const Subcommand *c, const char *name, size_t len) {
    for (int k = 0; k < c->n_flags; k++)
        if (strlen(c->flags[k].name) == len && !strncmp(c->flags[k].name, name, len)) return &c->flags[k];
    return NULL;
}

// The index of text in choices ("a|b|c"), or -1.
static long choice_index(const char *choices, const char *text) {
    long k = 0;
    for (const char *p = choices; *p; k++) {
        const size_t n = strcspn(p, "|");
        if (strlen(text) == n && !strncmp(p, text, n)) return k;
        p += n + (p[n] == '|');
    }
    return -1;
}

// Reads text as f's value into v (text, i, d). Returns 0, or 1 when it is no value of f.
static int read_value(const SubFlag *f, const char *text, SubValue *v) {
    char *end;
    v->text = text;
    switch (f->type) {
    case SUB_INT: {
        errno = 0;
        const long x = strtol(text, &end, 10);
        if (errno || end == text || *end || x < f->min || x > f->max) return 1;
        v->i = x;
        return 0;
    }
    case SUB_NUMBER: {
        const double x = strtod(text, &end);
        if (end == text || *end || !(x > f->above) || !isfinite(x)) return 1;
        v->d = x;
        return 0;
    }
    case SUB_CHOICE:
        v->i = choice_index(f->choices, text);
        return v->i < 0;
    case SUB_SWITCH:
        v->i = 1;
        return 0;
    case SUB_STRING:
        return 0;
    }
    return 1;
}

// What f's values are, for messages: "an integer in [0, 9]", "a number > 0", "a, b or c".
static void describe(const SubFlag *f, char *buf, size_t len) {
    if (f->type == SUB_INT) {
        if (f->min == LONG_MIN && f->max == LONG_MAX) snprintf(buf, len, "an integer");
        else if (f->max == LONG_MAX) snprintf(buf, len, "an integer >= %ld", f->min);
        else if (f->min == LONG_MIN) snprintf(buf, len, "an integer <= %ld", f->max);
        else snprintf(buf, len, "an integer in [%ld, %ld]", f->min, f->max);
    } else if (f->type == SUB_NUMBER) {
        if (f->above == -HUGE_VAL) snprintf(buf, len, "a number");
        else snprintf(buf, len, "a number > %g", f->above);
    } else if (f->type == SUB_CHOICE) {
        size_t at = 0;
        buf[0] = 0;
        for (const char *p = f->choices; *p && at < len;) {
            const size_t n = strcspn(p, "|");
            const char *sep = p == f->choices ? "" : p[n] ? ", " : " or ";
            at += (size_t)snprintf(buf + at, len - at, "%s%.*s", sep, (int)n, p);
            p += n + (p[n] == '|');
        }
    } else {
        snprintf(buf, len, "text");
    }
}

// The message for text, which is no value of f.
static void say_bad_value(const Subcommand *c, const SubFlag *f, const char *text, FILE *err) {
    char what[512];
    describe(f, what, sizeof what);
    if (c->dialect == SUB_ERROR) say(c, err, "%s '%s': expected %s", f->name, text, what);
    else say(c, err, "%s must be %s, got '%s'", f->name, what, text);
}

void subcommand_args_free(SubArgs *a) {
    free(a->values);
    free(a->positional);
    *a = (SubArgs){0};
}

// The checks after the last argument (see subcommand.h). Returns 0 or EXIT_USAGE.
static int check_complete(const Subcommand *c, SubArgs *a, FILE *err) {
    for (int k = 0; k < c->n_flags; k++)
        for (int j = k + 1; c->flags[k].group && a->values[k].given && j < c->n_flags; j++)
            if (c->flags[j].group == c->flags[k].group && a->values[j].given) {
                say(c, err, "%s and %s exclude each other", c->flags[k].name, c->flags[j].name);
                return fail(c, a, err, SUB_USAGE_EXCLUSIVE);
            }
    int n_required = 0, last = -1;
    bool missing = false;
    for (int k = 0; k < c->n_flags; k++)
        if (c->flags[k].required) {
            n_required++;
            last = k;
            missing |= !a->values[k].given;
        }
    if (missing && n_required == 1) {
        say(c, err, "%s %s is required", c->flags[last].name, c->flags[last].metavar);
    } else if (missing) {   // "--a, --b and --c are required"
        fprintf(err, "mingpt %s: %s", c->name, c->dialect == SUB_ERROR ? "error: " : "");
        for (int k = 0, seen = 0; k < c->n_flags; k++)
            if (c->flags[k].required)
                fprintf(err, "%s%s", seen++ == 0 ? "" : k == last ? " and " : ", ", c->flags[k].name);
        fputs(" are required\n", err);
    }
    if (missing) return fail(c, a, err, SUB_USAGE_MISSING);
    if (c->positional && a->n_positional == 0) {
        if (c->positional->missing) say(c, err, "%s", c->positional->missing);
        return fail(c, a, err, SUB_USAGE_MISSING);
    }
    for (int k = 0; c->late_values && k < c->n_flags; k++)
        if (a->values[k].given && read_value(&c->flags[k], a->values[k].text, &a->values[k])) {
            say_bad_value(c, &c->flags[k], a->values[k].text, err);
            return fail(c, a, err, SUB_USAGE_BAD_VALUE);
        }
    return 0;
}

int subcommand_parse(const Subcommand *c, int argc, char **argv, SubArgs *a, FILE *out, FILE *err) {
    a->values = calloc((size_t)c->n_flags + 1, sizeof *a->values);
    a->positional = calloc((size_t)argc + 1, sizeof *a->positional);
    a->n_positional = 0;
    if (!a->values || !a->positional) {
        fprintf(err, "mingpt %s: error: out of memory\n", c->name);
        return EXIT_RUNTIME;
    }
    for (int k = 0; k < c->n_flags; k++)
        if (c->flags[k].def && read_value(&c->flags[k], c->flags[k].def, &a->values[k])) {
            fprintf(err, "mingpt %s: the default of %s is no value of it\n", c->name, c->flags[k].name);
            abort();   // a table's mistake
        }
    for (int i = 1; i < argc; i++) {
        const char *w = argv[i], *val;
        if (!strcmp(w, "-h") || !strcmp(w, "--help")) {
            subcommand_usage(c, out);
            return SUBCOMMAND_HELP;
        }
        const SubFlag *f = find_flag(c, w, strlen(w));
        if (f && f->type == SUB_SWITCH) {
            read_value(f, w, &a->values[f - c->flags]);
            a->values[f - c->flags].given = true;
            continue;
        }
        if (f) {   // --flag VALUE
            if (i + 1 >= argc) {
                say(c, err, "%s needs a value", w);
                return fail(c, a, err, SUB_USAGE_NO_VALUE);
            }
            val = argv[++i];
        } else if (c->eq_form && !strncmp(w, "--", 2)) {   // --flag=VALUE, or an unknown --word with its value
            const char *eq = strchr(w, '=');
            const size_t klen = eq ? (size_t)(eq - w) : strlen(w);
            if (eq) {
                val = eq + 1;
            } else if (i + 1 < argc) {
                val = argv[++i];
            } else {
                say(c, err, "%s needs a value", w);
                return fail(c, a, err, SUB_USAGE_NO_VALUE);
            }
            f = find_flag(c, w, klen);
            if (!f) {
                say(c, err, "unknown option '%.*s'", (int)klen, w);
                return fail(c, a, err, SUB_USAGE_UNKNOWN);
            }
            if (f->type == SUB_SWITCH) {
                say(c, err, "%s takes no value", f->name);
                return fail(c, a, err, SUB_USAGE_UNKNOWN);
            }
        } else if (w[0] == '-' && (c->dialect == SUB_TERSE || w[1])) {
            say(c, err, c->dialect == SUB_TERSE ? "unexpected argument '%s'" : "unknown option '%s'", w);
            return fail(c, a, err, SUB_USAGE_UNKNOWN);
        } else {   // a positional argument
            if (!c->positional || (c->positional->max && a->n_positional >= c->positional->max)) {
                say(c, err, "unexpected argument '%s'", w);
                return fail(c, a, err, SUB_USAGE_UNKNOWN);
            }
            a->positional[a->n_positional++] = argv[i];
            continue;
        }
        SubValue *v = &a->values[f - c->flags];
        v->given = true;
        v->text = val;
        if (!c->late_values && read_value(f, val, v)) {
            say_bad_value(c, f, val, err);
            return fail(c, a, err, SUB_USAGE_BAD_VALUE);
        }
    }
    return check_complete(c, a, err);
}

int subcommand_main(const Subcommand *c, int argc, char **argv, FILE *out) {
    SubArgs a;
    int rc = subcommand_parse(c, argc, argv, &a, out, stderr);
    if (rc == SUBCOMMAND_HELP) rc = EXIT_OK;
    else if (rc == 0) rc = c->run(&a, out);
    subcommand_args_free(&a);
    return rc;
}

// Each of choices ("a|b|c") that starts with word after prefix, as prefix + choice.
static void complete_choices(const char *choices, const char *prefix, const char *word, FILE *out) {
    for (const char *p = choices; *p;) {
        const size_t n = strcspn(p, "|");
        char cand[512];
        snprintf(cand, sizeof cand, "%s%.*s", prefix, (int)n, p);
        if (!strncmp(cand, word, strlen(word))) fprintf(out, "%s\n", cand);
        p += n + (p[n] == '|');
    }
}

void subcommand_complete(const Subcommand *c, const char *prev, const char *word, FILE *out) {
    const SubFlag *f = prev ? find_flag(c, prev, strlen(prev)) : NULL;
    if (f && f->type != SUB_SWITCH) {   // the value of the flag before: a choice's values, else bash's
        if (f->type == SUB_CHOICE) complete_choices(f->choices, "", word, out);
        return;
    }
    if (word[0] != '-') return;   // a positional argument: bash's file names
    const char *eq = c->eq_form ? strchr(word, '=') : NULL;
    if (eq) {   // --flag=VALUE
        f = find_flag(c, word, (size_t)(eq - word));
        if (f && f->type == SUB_CHOICE) {
            char prefix[128];
            snprintf(prefix, sizeof prefix, "%s=", f->name);
            complete_choices(f->choices, prefix, word, out);
        }
        return;
    }
    for (int k = 0; k < c->n_flags; k++)
        if (!strncmp(c->flags[k].name, word, strlen(word))) fprintf(out, "%s\n", c->flags[k].name);
}
