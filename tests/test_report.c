// tests/test_report.c — reading run directories back (report/run_read.h): metrics.jsonl lines
// (taken, skipped with a warning naming file and line, ignored), summary.json's fields and
// refusals, overrides.yaml, the size cap, the expansion of sweep directories in job order, the
// labels' shared overrides, the UTF-8 cleaning of names, the decimation of long metrics while
// they are read, a sweep's plan of jobs, odd files in place of metrics.jsonl, the escaping of
// control characters for the terminal and the normalised numbers of labels. Expected values are written out by
// hand from the inputs.
#include "tests/test_util.h"

#include <sys/stat.h>
#include <unistd.h>

#include "report/run_read.h"
#include "app/run_dir.h"

static void write_text(const char *dir, const char *name, const char *text) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

// What run_metrics_parse warned, captured from a memory stream.
typedef struct {
    char *text;
    size_t len;
    FILE *f;
} Capture;

static void parse(const char *text, RunMetrics *m, Capture *c) {
    char err[256];
    c->f = open_memstream(&c->text, &c->len);
    assert_non_null(c->f);
    assert_int_equal(run_metrics_parse(text, strlen(text), "m.jsonl", m, c->f, err, sizeof err), 0);
    fclose(c->f);
}

static void test_metrics_lines(void **state) {
    (void)state;
    const char *text =
        "{\"iter\": 1, \"epoch\": 1, \"loss\": 4.5, \"lr\": 0.001, \"tokens\": 128, \"time_s\": 0.5, \"tokens_per_s\": 256}\n"
        "\n"
        "{\"iter\": 10, \"epoch\": 1, \"test_loss\": 4.25, \"tokens\": 1280, \"time_s\": 2}\n"
        "{\"iter\": 20, \"loss\": 3.5, \"new_key\": [1, 2]}\r\n"   // unknown keys, CRLF: taken
        "{\"iter\": 21, \"kind\": \"checkpoint\"}\n"                // neither loss: ignored silently
        "{\"iter\": -3, \"loss\": 1}\n"                             // 6: bad iter
        "{\"iter\": 22, \"loss\": \"low\"}\n"                       // 7: loss not a number
        "[1, 2]\n"                                                  // 8: not an object
        "{\"iter\": 2.5, \"test_loss\": 1}\n"                       // 9: iter not an integer
        "{\"iter\": 30, \"loss\": 3.25, \"iter\": 31}\n"            // 10: duplicate key
        "{\"iter\": 40, \"epoch\": 1, \"lo";                        // 11: torn last line
    RunMetrics m;
    Capture c;
    parse(text, &m, &c);
    assert_int_equal(m.n_train, 2);
    assert_int_equal(m.n_test, 1);
    assert_int_equal(m.n_skipped, 6);
    assert_int_equal(m.train[0].iter, 1);
    assert_true(m.train[0].loss == 4.5 && m.train[0].tokens == 128 && m.train[0].time_s == 0.5);
    assert_true(m.train[0].tokens_per_s == 256);
    assert_int_equal(m.train[1].iter, 20);
    assert_true(m.train[1].loss == 3.5 && isnan(m.train[1].tokens) && isnan(m.train[1].time_s));
    assert_int_equal(m.test[0].iter, 10);
    assert_true(m.test[0].loss == 4.25 && m.test[0].tokens == 1280 && m.test[0].time_s == 2);
    for (int line = 6; line <= 11; line++) {   // one warning per skipped line, naming it
        char want[64];
        snprintf(want, sizeof want, "mingpt: warning: m.jsonl:%d: skipped a line", line);
        if (!strstr(c.text, want)) fail_msg("no warning for line %d in:\n%s", line, c.text);
    }
    assert_null(strstr(c.text, "m.jsonl:5:"));
    run_metrics_free(&m);
    free(c.text);

    // many lines: the arrays grow; an empty text has nothing
    char *big = malloc(100000);
    assert_non_null(big);
    size_t o = 0;
    for (int i = 1; i <= 1000; i++) o += (size_t)snprintf(big + o, 100000 - o, "{\"iter\": %d, \"loss\": %d}\n", i, i);
    parse(big, &m, &c);
    assert_int_equal(m.n_train, 1000);
    assert_int_equal(m.train[999].iter, 1000);
    assert_true(m.train[999].loss == 1000);
    run_metrics_free(&m);
    free(c.text);
    free(big);
    parse("", &m, &c);
    assert_int_equal(m.n_train + m.n_test + m.n_skipped, 0);
    free(c.text);
}

static void test_summary_and_overrides(void **state) {
    (void)state;
    char dir[64], err[1024], ov[256];
    assert_int_equal(test_tmpdir(dir, sizeof dir, "report"), 0);   // removed at the end
    SummaryInfo s;
    assert_int_equal(summary_load(dir, &s, err, sizeof err), RUN_READ_ABSENT);
    assert_int_equal(overrides_load(dir, ov, sizeof ov, err, sizeof err), RUN_READ_ABSENT);
    write_text(dir, "summary.json", "{\"exit_status\": 1, \"final_train_loss\": 4.0, \"test_loss\": null, \"iters\": 7,"
                                    " \"tokens_per_s\": 100.5, \"wall_s\": 3, \"output_dir\": \"x\"}");
    assert_int_equal(summary_load(dir, &s, err, sizeof err), 0);
    assert_int_equal(s.exit_status, 1);
    assert_true(s.final_train_loss == 4.0 && isnan(s.test_loss) && s.tokens_per_s == 100.5 && s.wall_s == 3);
    assert_int_equal(s.iters, 7);
    write_text(dir, "summary.json", "{\"exit_status\": null}");
    assert_int_equal(summary_load(dir, &s, err, sizeof err), 0);
    assert_int_equal(s.exit_status, RUN_SUMMARY_RUNNING);
    assert_int_equal(s.iters, -1);
    struct { const char *text, *want; } bad[] = {
        {"{\"exit_status\": 0", "summary.json' is malformed: line 1:"},
        {"[0]", "not a JSON object"},
        {"{\"exit_status\": 300}", "\"exit_status\" is not null or an exit status"},
        {"{\"exit_status\": 0, \"iters\": -1}", "\"iters\" is not a non-negative integer"},
        {"{\"exit_status\": 0, \"test_loss\": \"1.5\"}", "a loss, tokens_per_s or wall_s is not a number or null"},
        {"{\"exit_status\": 0, \"exit_status\": 1}", "duplicate object key"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_text(dir, "summary.json", bad[i].text);
        assert_int_equal(summary_load(dir, &s, err, sizeof err), 1);
        if (!strstr(err, bad[i].want)) fail_msg("'%s': got '%s', want '%s'", bad[i].text, err, bad[i].want);
    }

    char hydra[128];
    snprintf(hydra, sizeof hydra, "%s/.hydra", dir);
    assert_int_equal(mkdir(hydra, 0777), 0);
    write_text(dir, ".hydra/overrides.yaml", "- gpt_config.n_layer=2\n- optimizer_config.learning_rate=1e-3\n- '~x'\n");
    assert_int_equal(overrides_load(dir, ov, sizeof ov, err, sizeof err), 0);
    assert_string_equal(ov, "gpt_config.n_layer=2 optimizer_config.learning_rate=1e-3 ~x");
    write_text(dir, ".hydra/overrides.yaml", "[]\n");
    assert_int_equal(overrides_load(dir, ov, sizeof ov, err, sizeof err), 0);
    assert_string_equal(ov, "");
    write_text(dir, ".hydra/overrides.yaml", "- [a, b]\n");
    assert_int_equal(overrides_load(dir, ov, sizeof ov, err, sizeof err), 1);
    assert_non_null(strstr(err, "item 1 is not a string"));
    write_text(dir, ".hydra/overrides.yaml", "- a\n  - b: [\n");
    assert_int_equal(overrides_load(dir, ov, sizeof ov, err, sizeof err), 1);
    assert_non_null(strstr(err, "overrides.yaml:"));   // libyaml's error, located
    assert_int_equal(test_rmtree(dir), 0);
}

// A file over the cap is refused before it is read; a directory in its place is not a file.
static void test_caps(void **state) {
    (void)state;
    char dir[64], err[1024], path[128];
    assert_int_equal(test_tmpdir(dir, sizeof dir, "report"), 0);   // removed at the end
    snprintf(path, sizeof path, "%s/summary.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(ftruncate(fileno(f), RUN_READ_MAX_SMALL + 1), 0);   // sparse: no disk used
    fclose(f);
    SummaryInfo s;
    assert_int_equal(summary_load(dir, &s, err, sizeof err), 1);
    assert_non_null(strstr(err, "more than the limit of 1048576"));
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    assert_int_equal(mkdir(path, 0777), 0);
    RunMetrics m;
    assert_int_equal(run_metrics_load(dir, &m, NULL, err, sizeof err), 1);
    assert_non_null(strstr(err, "is not a regular file"));
    assert_int_equal(test_rmtree(dir), 0);
}

static void test_expand(void **state) {
    (void)state;
    char dir[64], err[1024], sub[256];
    assert_int_equal(test_tmpdir(dir, sizeof dir, "report"), 0);   // removed at the end
    const char *jobs[] = {"10", "2", "0", "b_lr=1", "a_lr=2", "1"};
    for (size_t i = 0; i < 6; i++) {
        snprintf(sub, sizeof sub, "%s/%s", dir, jobs[i]);
        assert_int_equal(mkdir(sub, 0777), 0);
        write_text(sub, i % 2 ? "summary.json" : "metrics.jsonl", "{}");
    }
    snprintf(sub, sizeof sub, "%s/notes", dir);   // no run files: not a job
    assert_int_equal(mkdir(sub, 0777), 0);
    char **dirs;
    int n;
    char *args[] = {dir};
    assert_int_equal(run_dirs_expand(args, 1, &dirs, &n, err, sizeof err), 2);   // no multirun.yaml yet
    assert_non_null(strstr(err, "nor a sweep directory"));
    write_text(dir, "multirun.yaml", "a: 1\n");
    assert_int_equal(run_dirs_expand(args, 1, &dirs, &n, err, sizeof err), 0);
    const char *want[] = {"0", "1", "2", "10", "a_lr=2", "b_lr=1"};
    assert_int_equal(n, 6);
    for (int i = 0; i < n; i++) {
        snprintf(sub, sizeof sub, "%s/%s", dir, want[i]);
        assert_string_equal(dirs[i], sub);
    }
    run_dirs_free(dirs, n);
    snprintf(sub, sizeof sub, "%s/2/", dir);   // a job named directly (a trailing slash is the same)
    char *one[] = {sub, dir};
    assert_int_equal(run_dirs_expand(one, 2, &dirs, &n, err, sizeof err), 0);
    assert_int_equal(n, 7);
    snprintf(sub, sizeof sub, "%s/2", dir);
    assert_string_equal(dirs[0], sub);
    run_dirs_free(dirs, n);
    char missing[128];
    snprintf(missing, sizeof missing, "%s/none", dir);
    char *gone[] = {missing};
    assert_int_equal(run_dirs_expand(gone, 1, &dirs, &n, err, sizeof err), 2);
    assert_non_null(strstr(err, "is not a directory"));
    assert_int_equal(test_rmtree(dir), 0);
}

static void test_labels(void **state) {
    (void)state;
    char a[128] = "x=1 lr=1 seed=5", b[128] = "x=1 lr=2 seed=5", c[128] = "seed=5 x=1 lr=3", common[128];
    char *texts[] = {a, b, c};
    overrides_drop_common(texts, 3, common, sizeof common);
    assert_string_equal(a, "lr=1");
    assert_string_equal(b, "lr=2");
    assert_string_equal(c, "lr=3");
    assert_string_equal(common, "x=1 seed=5");
    char d[32] = "same", e[32] = "same";
    char *two[] = {d, e};
    overrides_drop_common(two, 2, common, sizeof common);
    assert_string_equal(d, "");
    assert_string_equal(common, "same");
    char f[32] = "alone";
    char *one[] = {f};
    overrides_drop_common(one, 1, common, sizeof common);
    assert_string_equal(f, "alone");
    assert_string_equal(common, "");

    char out[16];
    text_utf8("ok \xc3\xa9 \xff \xed\xa0\x80 \xc0\xaf", out, sizeof out);   // é kept; 0xFF, a surrogate, an overlong: '?'
    assert_string_equal(out, "ok \xc3\xa9 ? ??? ??");
    text_utf8("abc\xe2\x82\xac", out, 5);   // a character that does not fit whole is left out
    assert_string_equal(out, "abc");
}

// A series longer than 2 * RUN_READ_MAX_BUCKETS is decimated while read: bounded, in line order,
// its first and last line, its lowest and highest loss and a spike kept; a shorter one whole.
static void test_decimation(void **state) {
    (void)state;
    char dir[64], err[1024], path[128];
    assert_int_equal(test_tmpdir(dir, sizeof dir, "report"), 0);   // removed at the end
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    const long lines = 100000;
    for (long i = 0; i < lines; i++) {
        double loss = 5.0 - 4.0 * (double)i / lines;   // falling from 5 to 1
        if (i == 54321) loss = 50;                     // one spike
        if (i == 77777) loss = 0.25;                   // one dip
        fprintf(f, "{\"iter\": %ld, \"loss\": %.6f}\n", i, loss);
        if (i % 10 == 0) fprintf(f, "{\"iter\": %ld, \"test_loss\": %.6f}\n", i, loss);
    }
    fprintf(f, "{\"iter\": %ld, \"loss\": 0.5}", lines);   // a last line without '\n'
    assert_int_equal(fclose(f), 0);
    RunMetrics m;
    assert_int_equal(run_metrics_load(dir, &m, NULL, err, sizeof err), 0);
    assert_int_equal(m.n_train_lines, lines + 1);
    assert_int_equal(m.n_test_lines, lines / 10);
    assert_true(m.n_train <= 2 * RUN_READ_MAX_BUCKETS + 2 && m.n_train >= RUN_READ_MAX_BUCKETS);
    assert_true(m.n_test <= 2 * RUN_READ_MAX_BUCKETS + 2 && m.n_test >= RUN_READ_MAX_BUCKETS);
    assert_int_equal(m.train[0].iter, 0);
    assert_int_equal(m.train[m.n_train - 1].iter, lines);
    assert_true(m.train[m.n_train - 1].loss == 0.5);
    bool spike = false, dip = false;
    for (size_t i = 0; i < m.n_train; i++) {
        if (i) assert_true(m.train[i].iter > m.train[i - 1].iter && m.train[i].line > m.train[i - 1].line);
        spike |= m.train[i].iter == 54321 && m.train[i].loss == 50;
        dip |= m.train[i].iter == 77777 && m.train[i].loss == 0.25;
    }
    assert_true(spike && dip);
    run_metrics_free(&m);

    // 2 * RUN_READ_MAX_BUCKETS lines are kept whole, one more line is not
    f = fopen(path, "w");
    assert_non_null(f);
    for (long i = 0; i < 2 * RUN_READ_MAX_BUCKETS; i++) fprintf(f, "{\"iter\": %ld, \"loss\": %ld}\n", i, i % 7 + 1);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(run_metrics_load(dir, &m, NULL, err, sizeof err), 0);
    assert_int_equal(m.n_train, 2 * RUN_READ_MAX_BUCKETS);
    for (size_t i = 0; i < m.n_train; i++) assert_int_equal(m.train[i].iter, (long)i);
    run_metrics_free(&m);

    // a line longer than RUN_READ_MAX_LINE is skipped with a warning; the next one is read
    f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "{\"iter\": 1, \"loss\": 2, \"pad\": \"");
    for (int i = 0; i < RUN_READ_MAX_LINE; i++) fputc('x', f);
    fprintf(f, "\"}\n{\"iter\": 2, \"loss\": 3}\n");
    assert_int_equal(fclose(f), 0);
    Capture c;
    c.f = open_memstream(&c.text, &c.len);
    assert_int_equal(run_metrics_load(dir, &m, c.f, err, sizeof err), 0);
    fclose(c.f);
    assert_int_equal(m.n_train, 1);
    assert_int_equal(m.train[0].iter, 2);
    assert_int_equal(m.n_skipped, 1);
    assert_non_null(strstr(c.text, "metrics.jsonl:1: skipped a line that does not parse (longer than 65536 bytes)"));
    free(c.text);
    run_metrics_free(&m);
    assert_int_equal(test_rmtree(dir), 0);
}

// A sweep's plan: its jobs read back; a sweep with a plan and no job directory yet expands to
// none; odd files in place of metrics.jsonl are named.
static void test_plan_and_odd_files(void **state) {
    (void)state;
    char dir[64], err[1024], sub[256];
    assert_int_equal(test_tmpdir(dir, sizeof dir, "report"), 0);   // removed at the end
    write_text(dir, "multirun.yaml", "a: 1\n");
    char **dirs;
    int n;
    char *args[] = {dir};
    assert_int_equal(run_dirs_expand(args, 1, &dirs, &n, err, sizeof err), 2);   // no job, no plan
    snprintf(sub, sizeof sub, "%s/.hydra", dir);
    assert_int_equal(mkdir(sub, 0777), 0);
    write_text(dir, SWEEP_PLAN_FILE,
               "- num: 0\n  subdir: '0'\n  overrides:\n  - lr=1e-3\n  - seed=1\n"
               "- num: 1\n  subdir: lr=2\n  overrides: []\n");
    assert_int_equal(run_dirs_expand(args, 1, &dirs, &n, err, sizeof err), 0);
    assert_int_equal(n, 0);
    run_dirs_free(dirs, n);
    SweepJob *jobs;
    size_t nj;
    char slash[80];
    snprintf(slash, sizeof slash, "%s/", dir);   // "sw/" names sw
    assert_int_equal(sweep_plan_load(slash, &jobs, &nj, err, sizeof err), 0);
    assert_int_equal(nj, 2);
    snprintf(sub, sizeof sub, "%s/0", dir);
    assert_string_equal(jobs[0].dir, sub);
    assert_string_equal(jobs[0].overrides, "lr=1e-3 seed=1");
    snprintf(sub, sizeof sub, "%s/lr=2", dir);
    assert_string_equal(jobs[1].dir, sub);
    assert_string_equal(jobs[1].overrides, "");
    sweep_plan_free(jobs, nj);
    write_text(dir, SWEEP_PLAN_FILE, "- num: 0\n");
    assert_int_equal(sweep_plan_load(dir, &jobs, &nj, err, sizeof err), 1);
    assert_non_null(strstr(err, "job 1 has no \"subdir\""));

    snprintf(sub, sizeof sub, "%s/fifo", dir);
    assert_int_equal(mkdir(sub, 0777), 0);
    snprintf(sub, sizeof sub, "%s/fifo/metrics.jsonl", dir);
    assert_int_equal(mkfifo(sub, 0666), 0);
    snprintf(sub, sizeof sub, "%s/fifo", dir);
    char *fifo[] = {sub};
    assert_int_equal(run_dirs_expand(fifo, 1, &dirs, &n, err, sizeof err), 2);
    assert_non_null(strstr(err, "/fifo/metrics.jsonl' is a FIFO, not a file"));
    RunMetrics m;
    assert_int_equal(run_metrics_load(sub, &m, NULL, err, sizeof err), 1);   // does not block
    assert_non_null(strstr(err, "is not a regular file"));
    assert_int_equal(test_rmtree(dir), 0);
}

static void test_printable_and_numbers(void **state) {
    (void)state;
    char out[64];
    text_printable("a\x1b[31mb\x07 \xc2\x85 \xc3\xa9 \xff", out, sizeof out);
    assert_string_equal(out, "a\\033[31mb\\007 \\u0085 \xc3\xa9 ?");
    text_printable("\x1b\x1b\x1b", out, 9);   // an escape is not cut in half
    assert_string_equal(out, "\\033\\033");
    char t[128] = "lr=1e-3 seed=12345678 b=1.0 name=x1 big=1e9 h=0x10 w=inf keep";
    overrides_normalize_numbers(t, sizeof t);
    assert_string_equal(t, "lr=0.001 seed=12345678 b=1 name=x1 big=1e+09 h=0x10 w=inf keep");
    char u[128] = "lr=0.001";
    overrides_normalize_numbers(u, sizeof u);
    assert_string_equal(u, "lr=0.001");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metrics_lines),
        cmocka_unit_test(test_summary_and_overrides),
        cmocka_unit_test(test_caps),
        cmocka_unit_test(test_expand),
        cmocka_unit_test(test_labels),
        cmocka_unit_test(test_decimation),
        cmocka_unit_test(test_plan_and_odd_files),
        cmocka_unit_test(test_printable_and_numbers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
