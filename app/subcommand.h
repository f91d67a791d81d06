// app/subcommand.h — mingpt's subcommands (`mingpt sample|info|export|plot|runs ...`): one table
// of them, through which main.c dispatches and shell completion lists them, and one parser that
// reads a subcommand's arguments against its table and writes its usage text and error messages
// from it, and its shell completion candidates.
//
// A subcommand is a Subcommand: its name, a one-line description, its flags (name, type, value
// name, default, help text), its positional arguments, a few rules of its command-line dialect,
// and a run function that gets the parsed arguments. Adding one: its table and run function in
// app/<name>.c, and its entry in SUBCOMMAND_LIST (app/subcommand.c).
//
// What the parser accepts, in argument order:
//   -h, --help          the usage on `out`; nothing else is parsed after it
//   --flag              a switch (SUB_SWITCH)
//   --flag VALUE        a flag that takes a value; VALUE is the next argument, whatever it is
//   --flag=VALUE        the same, where the table's eq_form allows it; then any "--word" is read
//                       as an option with a value: "--word" last on the line "needs a value",
//                       "--word=V" / "--word V" for a word that is no flag an unknown option
//   anything else       a positional argument (at most positional->max of them; in the
//                       SUB_TERSE dialect none may start with '-', in SUB_ERROR "-" alone may)
// A flag given twice keeps its last value. The parser stops at the first error: one message on
// stderr ("mingpt NAME: ..." in the SUB_TERSE dialect, "mingpt NAME: error: ..." in SUB_ERROR),
// then the usage where the table's usage_after says so. After the arguments it checks, in this
// order: flags of one exclusive group given together, required flags, a missing positional
// argument, and (late_values) the values themselves.
#ifndef MINGPT_SUBCOMMAND_H
#define MINGPT_SUBCOMMAND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "config/completion.h"

typedef enum {
    SUB_STRING,   // any text (also "")
    SUB_INT,      // a decimal integer (strtol: leading blanks and a sign allowed) in [min, max]
    SUB_NUMBER,   // a finite number (strtod) greater than `above`
    SUB_SWITCH,   // no value: given or not
    SUB_CHOICE,   // one of `choices` ("a|b|c"), exactly
} SubType;

typedef struct {
    const char *name;          // "--top_k"
    SubType type;
    const char *metavar;       // the value's name in the usage ("K"); NULL for a switch
    const char *def;           // the default, as text read like an argument; NULL: none (text NULL, 0, false)
    const char *help;          // what it does, one line (printed where the table's help_lines says so)
    const char *choices;       // SUB_CHOICE: the values, "a|b|c"
    long min, max;             // SUB_INT: the allowed range (LONG_MIN / LONG_MAX: unbounded)
    double above;              // SUB_NUMBER: values must be greater (-HUGE_VAL: any finite number)
    const char *usage_value;   // the value in the usage's first line when it is neither choices nor
                               // metavar ("F.svg|F.png"); NULL: choices for a choice, else metavar
    bool required;
    int group;                 // flags of one non-zero group exclude each other ([--json|--csv])
} SubFlag;

typedef struct {
    const char *metavar;   // "SNAPSHOT", "DIR"
    const char *help;      // one line
    int max;               // at most this many; 0: any number (shown as "DIR..."). At least one is required
    const char *missing;   // the message when none is given; NULL: the usage alone
} SubPositional;

// How a subcommand's messages read (both exist, and each subcommand keeps its own).
typedef enum {
    SUB_TERSE,   // "mingpt sample: --top_k must be an integer in [0, 9], got 'x'"; "unexpected argument '-x'"
    SUB_ERROR,   // "mingpt plot: error: --x 'y': expected iter, tokens or time"; "unknown option '-x'"
} SubDialect;

// The errors after which the usage is printed (SubCommand.usage_after, bits).
enum {
    SUB_USAGE_UNKNOWN = 1,       // an unknown option or an unexpected argument
    SUB_USAGE_NO_VALUE = 2,      // a flag last on the line without its value
    SUB_USAGE_BAD_VALUE = 4,     // a value of the wrong type or outside its range or choices
    SUB_USAGE_MISSING = 8,       // a required flag or positional argument missing
    SUB_USAGE_EXCLUSIVE = 16,    // two flags of one group
    SUB_USAGE_NO_POSITIONAL = 32 // with the others: only while no positional argument came before the error
};

// The value of one flag after parsing.
typedef struct {
    const char *text;   // the argument (points into argv) or the default; NULL when neither
    long i;             // SUB_INT: the number; SUB_CHOICE: the index in choices; SUB_SWITCH: 1 when given
    double d;           // SUB_NUMBER: the number
    bool given;         // on the command line
} SubValue;

// A subcommand's arguments, parsed.
typedef struct {
    SubValue *values;     // one per flag, in the table's order
    char **positional;    // the positional arguments, in order (pointing into argv)
    int n_positional;
} SubArgs;

typedef struct Subcommand Subcommand;
struct Subcommand {
    const char *name;            // the first word: "sample"
    const char *description;     // one line: what it does
    const SubFlag *flags;
    int n_flags;
    const SubPositional *positional;   // NULL: it takes none
    SubDialect dialect;
    bool eq_form;                // --flag=VALUE accepted (and every "--word" read as flag + value)
    bool late_values;            // values are checked after the required flags, not as they come
    unsigned usage_after;        // SUB_USAGE_* bits
    bool help_lines;             // the usage has a line per positional and flag after the first
    // Runs the subcommand with its parsed arguments, writing its output to out. Returns the exit
    // code (trainer/trainer.h: EXIT_OK, EXIT_RUNTIME, EXIT_USAGE).
    int (*run)(const SubArgs *a, FILE *out);
};

// The subcommand named name, or NULL.
const Subcommand *subcommand_find(const char *name);

// The i-th subcommand of the list (0-based, the order shell completion lists them in), or NULL
// past the last.
const Subcommand *subcommand_at(size_t i);

// The subcommand whose name is closest to word (config/suggest.h's measure: a few letters
// apart), for "did you mean" when word is no subcommand; NULL when none is close or word is one.
const char *subcommand_suggest(const char *word);

// When argv[1] is neither a subcommand, a flag nor an override (it holds no '=' and starts with
// none of '-', '+', '~') but is close to a subcommand's name: says
// "mingpt: error: unknown command 'WORD' (did you mean 'NAME'?)" on err and returns 2
// (EXIT_USAGE). Otherwise returns 0 and says nothing (the training command reads argv).
int subcommand_check_unknown(int argc, char **argv, FILE *err);

// `mingpt NAME ...`: parses argv (argv[0] is the subcommand's name) against c and runs it on out.
// Returns the exit code: 0 after --help (usage on out), 2 (EXIT_USAGE) after a usage error
// (messages on stderr), else c->run's.
int subcommand_main(const Subcommand *c, int argc, char **argv, FILE *out);

// Reads argv (argv[0] is the subcommand's name, skipped) against c's table into *a (free it with
// subcommand_args_free, whatever the result). Returns 0; SUBCOMMAND_HELP after writing the usage
// to out (-h, --help); or 2 (EXIT_USAGE) after the message (and the usage, as c->usage_after
// says) on err.
int subcommand_parse(const Subcommand *c, int argc, char **argv, SubArgs *a, FILE *out, FILE *err);
#define SUBCOMMAND_HELP (-1)

// Frees what subcommand_parse allocated in a (not the texts, which point into argv or the table).
void subcommand_args_free(SubArgs *a);

// Writes c's usage to f: "usage: mingpt NAME" then its positional arguments and flags (required
// ones bare, optional ones in brackets, a group's flags in one bracket joined by '|'); with
// help_lines, one line per positional and flag with its help text, the texts in one column.
void subcommand_usage(const Subcommand *c, FILE *f);

// The completion candidates, one per line to out, for word, the word being typed after prev (the
// word before it; c->name for the first argument) on a line of c: after a flag that takes a
// value, a choice's values starting with word (nothing for other values: bash completes file
// names); a word starting with '-': c's flags starting with it, in the table's order, and where
// eq_form allows it, "--flag=" followed by a choice's values; else (a positional argument) nothing.
void subcommand_complete(const Subcommand *c, const char *prev, const char *word, FILE *out);

// The subcommands as shell completion takes them (config/completion.h: each name, and
// subcommand_complete for the candidates on its line), in the list's order, into subs (at most
// max; subs may be NULL when max is 0). Returns how many there are.
size_t subcommand_completions(CompletionSubcommand *subs, size_t max);

#endif
