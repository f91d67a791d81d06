// tests/test_subcommand.c — the subcommands' shared parser (app/subcommand.h): both flag forms,
// defaults, each type's values and errors in both dialects, unknown flags, missing values,
// positional arguments, required flags, exclusive groups, the usage text and when it follows an
// error, the completion candidates, and the list of subcommands. The tables here are the test's own, so that every rule is
// exercised whatever the real subcommands use; the real ones are checked for their usage naming
// every flag. Expected texts are written out by hand.
#include "tests/test_util.h"

#include <limits.h>
#include <stdbool.h>

#include "app/subcommand.h"

enum { T_NAME, T_COUNT, T_SCALE, T_MODE, T_FAST, T_N };

static const SubFlag T_FLAGS[T_N] = {
    [T_NAME] = {.name = "--name", .type = SUB_STRING, .metavar = "NAME", .required = true, .help = "the name"},
    [T_COUNT] = {.name = "--count", .type = SUB_INT, .metavar = "N", .def = "7", .min = 0, .max = 9,
                 .help = "how many"},
    [T_SCALE] = {.name = "--scale", .type = SUB_NUMBER, .metavar = "F", .def = "1.5", .above = 0, .help = "how big"},
    [T_MODE] = {.name = "--mode", .type = SUB_CHOICE, .metavar = "M", .def = "b", .choices = "a|b|c", .help = "which"},
    [T_FAST] = {.name = "--fast", .type = SUB_SWITCH, .help = "go fast"},
};

static int run_nothing(const SubArgs *a, FILE *out) { return 0; }

// The TERSE dialect with --flag=VALUE, no positional arguments (as `mingpt sample`).
static const Subcommand TERSE = {
    .name = "t", .description = "a test", .flags = T_FLAGS, .n_flags = T_N, .dialect = SUB_TERSE, .eq_form = true,
    .usage_after = SUB_USAGE_UNKNOWN | SUB_USAGE_NO_VALUE | SUB_USAGE_MISSING, .run = run_nothing,
};
static const char TERSE_USAGE[] = "usage: mingpt t --name NAME [--count N] [--scale F] [--mode a|b|c] [--fast]\n";

enum { E_OUT, E_X, E_JSON, E_CSV, E_N };
static const SubFlag E_FLAGS[E_N] = {
    [E_OUT] = {.name = "--out", .type = SUB_STRING, .metavar = "F", .usage_value = "F.a|F.b", .def = "o.a",
               .help = "the file"},
    [E_X] = {.name = "--x", .type = SUB_CHOICE, .metavar = "X", .def = "one", .choices = "one|two", .help = "the axis"},
    [E_JSON] = {.name = "--json", .type = SUB_SWITCH, .group = 1, .help = "JSON"},
    [E_CSV] = {.name = "--csv", .type = SUB_SWITCH, .group = 1, .help = "CSV"},
};
static const SubPositional E_DIRS = {.metavar = "DIR", .help = "a directory"};

// The ERROR dialect, any number of positional arguments, help lines (as `mingpt plot`, `runs`).
static const Subcommand ERRORS = {
    .name = "e", .description = "a test", .flags = E_FLAGS, .n_flags = E_N, .positional = &E_DIRS,
    .dialect = SUB_ERROR, .usage_after = SUB_USAGE_UNKNOWN | SUB_USAGE_EXCLUSIVE | SUB_USAGE_MISSING,
    .help_lines = true, .run = run_nothing,
};
static const char ERRORS_USAGE[] = "usage: mingpt e DIR... [--out F.a|F.b] [--x one|two] [--json|--csv]\n"
                                   "  DIR       a directory\n"
                                   "  --out F   the file\n"
                                   "  --x X     the axis\n"
                                   "  --json    JSON\n"
                                   "  --csv     CSV\n";

static const SubPositional ONE_FILE = {.metavar = "FILE", .help = "a file", .max = 1, .missing = "a FILE is required"};

// One parse of the words (argv[0] is the subcommand's name) with its output and errors.
typedef struct {
    int rc;
    SubArgs a;
    char *out, *err;
    size_t out_len, err_len;
} Parse;

static Parse parse_words(const Subcommand *c, int n, const char **words) {
    Parse p;
    char *argv[32];
    assert_true(n < 31);
    argv[0] = (char *)c->name;
    for (int i = 0; i < n; i++) argv[i + 1] = (char *)words[i];
    argv[n + 1] = NULL;
    FILE *out = open_memstream(&p.out, &p.out_len), *err = open_memstream(&p.err, &p.err_len);
    assert_true(out && err);
    p.rc = subcommand_parse(c, n + 1, argv, &p.a, out, err);
    fclose(out);
    fclose(err);
    return p;
}
#define PARSE(c, ...) parse_words((c), (int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)), \
                                  (const char *[]){__VA_ARGS__})

static void done(Parse *p) {
    subcommand_args_free(&p->a);
    free(p->out);
    free(p->err);
}

// A parse that must fail with exactly the text err_text on err (nothing on out).
static void expect_error(Parse p, const char *err_text) {
    assert_int_equal(p.rc, 2);
    assert_string_equal(p.err, err_text);
    assert_string_equal(p.out, "");
    done(&p);
}

static void test_forms_and_defaults(void **state) {
    (void)state;
    Parse p = PARSE(&TERSE, "--name", "x");
    assert_int_equal(p.rc, 0);
    assert_string_equal(p.err, "");
    const SubValue *v = p.a.values;
    assert_string_equal(v[T_NAME].text, "x");
    assert_true(v[T_NAME].given);
    assert_int_equal(v[T_COUNT].i, 7);   // the defaults, read like arguments
    assert_string_equal(v[T_COUNT].text, "7");
    assert_false(v[T_COUNT].given);
    assert_true(v[T_SCALE].d == 1.5);
    assert_int_equal(v[T_MODE].i, 1);
    assert_string_equal(v[T_MODE].text, "b");
    assert_int_equal(v[T_FAST].i, 0);
    assert_false(v[T_FAST].given);
    assert_int_equal(p.a.n_positional, 0);
    done(&p);

    // --flag VALUE and --flag=VALUE give the same; the last of a repeated flag counts
    p = PARSE(&TERSE, "--name=a=b", "--count", "3", "--scale=0.25", "--mode", "c", "--fast", "--count=9");
    assert_int_equal(p.rc, 0);
    v = p.a.values;
    assert_string_equal(v[T_NAME].text, "a=b");
    assert_int_equal(v[T_COUNT].i, 9);
    assert_true(v[T_COUNT].given);
    assert_true(v[T_SCALE].d == 0.25);
    assert_int_equal(v[T_MODE].i, 2);
    assert_string_equal(v[T_MODE].text, "c");
    assert_int_equal(v[T_FAST].i, 1);
    assert_true(v[T_FAST].given);
    done(&p);

    // a value is the next word whatever it is; --name= is the empty text
    p = PARSE(&TERSE, "--name", "-h", "--mode=a");
    assert_int_equal(p.rc, 0);
    assert_string_equal(p.a.values[T_NAME].text, "-h");
    done(&p);
    p = PARSE(&TERSE, "--name=");
    assert_int_equal(p.rc, 0);
    assert_string_equal(p.a.values[T_NAME].text, "");
    done(&p);

    // without eq_form, --out=F is no flag
    p = PARSE(&ERRORS, "d", "--out", "f.b", "--x", "two", "--csv");
    assert_int_equal(p.rc, 0);
    assert_string_equal(p.a.values[E_OUT].text, "f.b");
    assert_int_equal(p.a.values[E_X].i, 1);
    assert_int_equal(p.a.values[E_CSV].i, 1);
    done(&p);
    char want[512];
    snprintf(want, sizeof want, "mingpt e: error: unknown option '--out=f.b'\n%s", ERRORS_USAGE);
    expect_error(PARSE(&ERRORS, "d", "--out=f.b"), want);
}

static void test_value_errors(void **state) {
    (void)state;
    // TERSE: "NAME must be WHAT, got 'V'", no usage; checked as they come
    expect_error(PARSE(&TERSE, "--name", "x", "--count", "10"),
                 "mingpt t: --count must be an integer in [0, 9], got '10'\n");
    expect_error(PARSE(&TERSE, "--count=-1", "--bogus", "x"),
                 "mingpt t: --count must be an integer in [0, 9], got '-1'\n");
    expect_error(PARSE(&TERSE, "--count", "1.5"), "mingpt t: --count must be an integer in [0, 9], got '1.5'\n");
    expect_error(PARSE(&TERSE, "--count", ""), "mingpt t: --count must be an integer in [0, 9], got ''\n");
    expect_error(PARSE(&TERSE, "--count", "99999999999999999999"),
                 "mingpt t: --count must be an integer in [0, 9], got '99999999999999999999'\n");
    expect_error(PARSE(&TERSE, "--scale", "0"), "mingpt t: --scale must be a number > 0, got '0'\n");
    expect_error(PARSE(&TERSE, "--scale", "inf"), "mingpt t: --scale must be a number > 0, got 'inf'\n");
    expect_error(PARSE(&TERSE, "--scale", "nan"), "mingpt t: --scale must be a number > 0, got 'nan'\n");
    expect_error(PARSE(&TERSE, "--scale", "2x"), "mingpt t: --scale must be a number > 0, got '2x'\n");
    expect_error(PARSE(&TERSE, "--mode", "d"), "mingpt t: --mode must be a, b or c, got 'd'\n");
    expect_error(PARSE(&TERSE, "--mode=A"), "mingpt t: --mode must be a, b or c, got 'A'\n");
    // strtol's and strtod's spellings are taken
    Parse p = PARSE(&TERSE, "--name", "x", "--count", " +8", "--scale", "0x1p-2");
    assert_int_equal(p.rc, 0);
    assert_int_equal(p.a.values[T_COUNT].i, 8);
    assert_true(p.a.values[T_SCALE].d == 0.25);
    done(&p);
    // ERROR: "NAME 'V': expected WHAT"
    expect_error(PARSE(&ERRORS, "d", "--x", "three"), "mingpt e: error: --x 'three': expected one or two\n");
    // late_values: the values after the required flags, in the table's order
    Subcommand late = TERSE;
    late.late_values = true;
    expect_error(PARSE(&late, "--mode", "z", "--count", "10"), "mingpt t: --name NAME is required\n" "usage: mingpt t "
                 "--name NAME [--count N] [--scale F] [--mode a|b|c] [--fast]\n");
    expect_error(PARSE(&late, "--mode", "z", "--count", "10", "--name", "n"),
                 "mingpt t: --count must be an integer in [0, 9], got '10'\n");
}

static void test_unknown_and_missing(void **state) {
    (void)state;
    char want[512];
    // TERSE + eq_form: every --word is an option with a value; the usage follows
    snprintf(want, sizeof want, "mingpt t: unknown option '--bogus'\n%s", TERSE_USAGE);
    expect_error(PARSE(&TERSE, "--bogus", "x"), want);
    expect_error(PARSE(&TERSE, "--bogus=x", "--name", "n"), want);
    snprintf(want, sizeof want, "mingpt t: --bogus needs a value\n%s", TERSE_USAGE);
    expect_error(PARSE(&TERSE, "--bogus"), want);
    snprintf(want, sizeof want, "mingpt t: --count needs a value\n%s", TERSE_USAGE);
    expect_error(PARSE(&TERSE, "--name", "n", "--count"), want);
    snprintf(want, sizeof want, "mingpt t: unexpected argument '-c'\n%s", TERSE_USAGE);
    expect_error(PARSE(&TERSE, "-c"), want);
    snprintf(want, sizeof want, "mingpt t: unexpected argument 'word'\n%s", TERSE_USAGE);
    expect_error(PARSE(&TERSE, "word"), want);
    snprintf(want, sizeof want, "mingpt t: --fast takes no value\n%s", TERSE_USAGE);
    expect_error(PARSE(&TERSE, "--fast=1"), want);
    // an unknown option is named whole, however long
    const char *longname = "--aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                           "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    snprintf(want, sizeof want, "mingpt t: unknown option '%s'\n%s", longname, TERSE_USAGE);
    expect_error(PARSE(&TERSE, longname, "x"), want);
    // a required flag: with its value's name when it is the only one
    snprintf(want, sizeof want, "mingpt t: --name NAME is required\n%s", TERSE_USAGE);
    expect_error(PARSE(&TERSE, "--count", "3"), want);

    // ERROR: "-x" is an unknown option, "-" a positional argument; a missing value has no usage
    snprintf(want, sizeof want, "mingpt e: error: unknown option '-q'\n%s", ERRORS_USAGE);
    expect_error(PARSE(&ERRORS, "d", "-q"), want);
    expect_error(PARSE(&ERRORS, "d", "--x"), "mingpt e: error: --x needs a value\n");
    Parse p = PARSE(&ERRORS, "-", "d2");
    assert_int_equal(p.rc, 0);
    assert_int_equal(p.a.n_positional, 2);
    assert_string_equal(p.a.positional[0], "-");
    assert_string_equal(p.a.positional[1], "d2");
    done(&p);
    // no positional argument: the usage alone (no `missing` message)
    expect_error(PARSE(&ERRORS, "--json"), ERRORS_USAGE);
    // a group's flags exclude each other
    snprintf(want, sizeof want, "mingpt e: error: --json and --csv exclude each other\n%s", ERRORS_USAGE);
    expect_error(PARSE(&ERRORS, "--csv", "d", "--json"), want);
    // SUB_USAGE_NO_POSITIONAL: the usage only while no positional argument came before the error
    Subcommand runs_like = ERRORS;
    runs_like.usage_after |= SUB_USAGE_NO_POSITIONAL;
    snprintf(want, sizeof want, "mingpt e: error: unknown option '--bogus'\n%s", ERRORS_USAGE);
    expect_error(PARSE(&runs_like, "--bogus", "d"), want);
    expect_error(PARSE(&runs_like, "d", "--bogus"), "mingpt e: error: unknown option '--bogus'\n");
    expect_error(PARSE(&runs_like, "d", "--json", "--csv"), "mingpt e: error: --json and --csv exclude each other\n");
}

static void test_positional(void **state) {
    (void)state;
    const SubFlag json = {.name = "--json", .type = SUB_SWITCH, .help = "JSON"};
    const Subcommand info_like = {.name = "i", .description = "a test", .flags = &json, .n_flags = 1,
                                  .positional = &ONE_FILE, .dialect = SUB_TERSE,
                                  .usage_after = SUB_USAGE_UNKNOWN | SUB_USAGE_MISSING, .run = run_nothing};
    const char *usage = "usage: mingpt i FILE [--json]\n";
    char want[512];
    Parse p = PARSE(&info_like, "--json", "f");
    assert_int_equal(p.rc, 0);
    assert_int_equal(p.a.n_positional, 1);
    assert_string_equal(p.a.positional[0], "f");
    assert_int_equal(p.a.values[0].i, 1);
    done(&p);
    snprintf(want, sizeof want, "mingpt i: unexpected argument 'g'\n%s", usage);
    expect_error(PARSE(&info_like, "f", "g"), want);
    snprintf(want, sizeof want, "mingpt i: unexpected argument '-'\n%s", usage);   // TERSE: no '-' positional
    expect_error(PARSE(&info_like, "-"), want);
    snprintf(want, sizeof want, "mingpt i: unexpected argument '--json=1'\n%s", usage);   // no eq_form
    expect_error(PARSE(&info_like, "--json=1", "f"), want);
    snprintf(want, sizeof want, "mingpt i: a FILE is required\n%s", usage);
    expect_error(PARSE(&info_like, "--json"), want);
    // two required flags are named together
    const SubFlag two[] = {{.name = "--in", .type = SUB_STRING, .metavar = "I", .required = true, .help = "in"},
                           {.name = "--out", .type = SUB_STRING, .metavar = "O", .required = true, .help = "out"}};
    const Subcommand export_like = {.name = "x", .description = "a test", .flags = two, .n_flags = 2,
                                    .dialect = SUB_TERSE, .eq_form = true, .usage_after = SUB_USAGE_MISSING,
                                    .run = run_nothing};
    expect_error(PARSE(&export_like, "--out", "o"),
                 "mingpt x: --in and --out are required\nusage: mingpt x --in I --out O\n");
}

static void test_help_and_usage(void **state) {
    (void)state;
    // -h / --help: the usage on out, whatever follows; an error before it wins
    Parse p = PARSE(&TERSE, "--count", "3", "-h", "--bogus");
    assert_int_equal(p.rc, SUBCOMMAND_HELP);
    assert_string_equal(p.out, TERSE_USAGE);
    assert_string_equal(p.err, "");
    done(&p);
    p = PARSE(&ERRORS, "--help");
    assert_int_equal(p.rc, SUBCOMMAND_HELP);
    assert_string_equal(p.out, ERRORS_USAGE);
    done(&p);
    char want[512];
    snprintf(want, sizeof want, "mingpt t: unexpected argument '-x'\n%s", TERSE_USAGE);
    expect_error(PARSE(&TERSE, "-x", "-h"), want);
    snprintf(want, sizeof want, "mingpt t: unknown option '--help'\n%s", TERSE_USAGE);   // --help=1 is no help
    expect_error(PARSE(&TERSE, "--help=1"), want);

    // every subcommand's usage names each of its flags, and the list's entries are complete
    const char *names[] = {"sample", "info", "export", "plot", "runs"};
    size_t n = 0;
    for (const Subcommand *c; (c = subcommand_at(n)); n++) {
        assert_string_equal(c->name, names[n]);
        assert_ptr_equal(subcommand_find(c->name), c);
        assert_true(c->description && c->description[0] && c->run);
        char *text;
        size_t len;
        FILE *f = open_memstream(&text, &len);
        assert_non_null(f);
        subcommand_usage(c, f);
        fclose(f);
        char head[64];
        snprintf(head, sizeof head, "usage: mingpt %s", c->name);
        assert_true(!strncmp(text, head, strlen(head)));
        for (int k = 0; k < c->n_flags; k++) {
            if (!strstr(text, c->flags[k].name))
                fail_msg("%s: the usage lacks %s:\n%s", c->name, c->flags[k].name, text);
            assert_true(c->flags[k].help && c->flags[k].help[0]);
        }
        if (c->positional) assert_non_null(strstr(text, c->positional->metavar));
        free(text);
    }
    assert_int_equal(n, 5);
    assert_null(subcommand_find("train"));
    CompletionSubcommand subs[8];
    assert_int_equal(subcommand_completions(subs, 8), 5);
    for (size_t i = 0; i < 5; i++) assert_string_equal(subs[i].name, names[i]);
}

// subcommand_complete's candidates for word after prev, one per line.
static char *complete(const Subcommand *c, const char *prev, const char *word) {
    char *text;
    size_t len;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    subcommand_complete(c, prev, word, f);
    fclose(f);
    return text;
}

static void expect_candidates(const Subcommand *c, const char *prev, const char *word, const char *want) {
    char *got = complete(c, prev, word);
    assert_string_equal(got, want);
    free(got);
}

static void test_completion(void **state) {
    (void)state;
    // a word starting with '-': the table's flags, in its order
    expect_candidates(&TERSE, "t", "-", "--name\n--count\n--scale\n--mode\n--fast\n");
    expect_candidates(&TERSE, "--fast", "--s", "--scale\n");
    expect_candidates(&TERSE, "t", "--x", "");
    // after a flag that takes a value: a choice's values, nothing for the others (bash's file names)
    expect_candidates(&TERSE, "--mode", "", "a\nb\nc\n");
    expect_candidates(&TERSE, "--mode", "b", "b\n");
    expect_candidates(&TERSE, "--name", "", "");
    expect_candidates(&TERSE, "--name", "-", "");
    // --flag=VALUE where eq_form allows it
    expect_candidates(&TERSE, "t", "--mode=", "--mode=a\n--mode=b\n--mode=c\n");
    expect_candidates(&TERSE, "t", "--count=", "");
    expect_candidates(&ERRORS, "e", "--x=", "");
    // a positional argument: nothing
    expect_candidates(&ERRORS, "e", "", "");
    expect_candidates(&ERRORS, "--json", "d", "");
    expect_candidates(&ERRORS, "--x", "t", "two\n");

    // every subcommand: the candidates for "-" are exactly its flags, and completion gets it
    CompletionSubcommand subs[8];
    const size_t n = subcommand_completions(subs, 8);
    for (size_t i = 0; i < n; i++) {
        const Subcommand *c = subcommand_at(i);
        char want[1024] = "";
        for (int k = 0; k < c->n_flags; k++) snprintf(want + strlen(want), sizeof want - strlen(want), "%s\n",
                                                      c->flags[k].name);
        expect_candidates(c, c->name, "-", want);
        char *text;
        size_t len;
        FILE *f = open_memstream(&text, &len);
        assert_non_null(f);
        assert_non_null(subs[i].complete);
        subs[i].complete(subs[i].ctx, c->name, "-", f);
        fclose(f);
        assert_string_equal(text, want);
        free(text);
    }
}

// A misspelt subcommand: the closest name is suggested; overrides, flags, far words and the
// names themselves are left to the training command.
static void test_unknown_command(void **state) {
    (void)state;
    assert_string_equal(subcommand_suggest("samples"), "sample");
    assert_string_equal(subcommand_suggest("inf"), "info");
    assert_string_equal(subcommand_suggest("exprt"), "export");
    assert_string_equal(subcommand_suggest("run"), "runs");
    assert_null(subcommand_suggest("sample"));
    assert_null(subcommand_suggest("trainer_config"));
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    char *samples[] = {"mingpt", "samples", NULL}, *ov[] = {"mingpt", "sampl=3", NULL}, *flag[] = {"mingpt", "-samples", NULL},
         *far[] = {"mingpt", "gpt_config", NULL}, *none[] = {"mingpt", NULL};
    assert_int_equal(subcommand_check_unknown(2, ov, f), 0);
    assert_int_equal(subcommand_check_unknown(2, flag, f), 0);
    assert_int_equal(subcommand_check_unknown(2, far, f), 0);
    assert_int_equal(subcommand_check_unknown(1, none, f), 0);
    assert_int_equal(subcommand_check_unknown(2, samples, f), 2);
    fclose(f);
    assert_string_equal(text, "mingpt: error: unknown command 'samples' (did you mean 'sample'?)\n");
    free(text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forms_and_defaults),
        cmocka_unit_test(test_value_errors),
        cmocka_unit_test(test_unknown_and_missing),
        cmocka_unit_test(test_positional),
        cmocka_unit_test(test_help_and_usage),
        cmocka_unit_test(test_completion),
        cmocka_unit_test(test_unknown_command),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
