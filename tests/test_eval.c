// tests/test_eval.c — the evaluation (data/eval_windows.h, trainer/evaluate.h) against direct
// computations on a small text:
//   * the windows: with the contiguous split and stride block_size every test target is
//     predicted exactly once (counted character by character), the tail window ignores (-1)
//     exactly the targets the strided windows already predict; other strides cover every target;
//     stride 1 is every window with no tail; with the random split stride k is every k-th test
//     window in position order; a stride outside [1, T] is refused;
//   * the loss: the strided evaluation equals the mean over the text's test characters of the
//     model's loss, each taken from the first window (in position order) that predicts it,
//     computed window by window with gpt_forward; eval_stride=1 equals the evaluation before
//     eval_stride (every window, batch_size rows at a time, the test sampler's order, with and
//     without eval_iters); the random split's stride against a direct loop too;
//   * the stop flag: polled before every batch, the evaluation stops within one batch.
#include "tests/test_util.h"

#include "data/char_dataset.h"
#include "data/eval_windows.h"
#include "data/sampler.h"
#include "model/gpt.h"
#include "trainer/evaluate.h"

enum { T = 8, B = 3 };

typedef struct {
    char *text;
    CharDataset ds;
    DataSplit contiguous, random;
} Data;

// ~2,000 characters of pseudo-words: train_split 0.9 leaves 190-odd test windows.
static Data make_data(void) {
    Data d;
    TestRng r = test_rng(5);
    const char *syll[] = {"to", "be", "or", "not", "that", "is", "the", "ques", "tion", "whe", "ther", "tis"};
    d.text = malloc(4096);
    size_t len = 0;
    while (len < 2020) {
        const char *w = syll[test_next(&r) % 12];
        memcpy(d.text + len, w, strlen(w));
        len += strlen(w);
        d.text[len++] = test_next(&r) % 5 == 0 ? '\n' : ' ';
    }
    char err[512];
    if (chardataset_from_text(&d.ds, d.text, len, "text", 1.0, T, err, sizeof err)) fail_msg("%s", err);
    if (datasplit_make(&d.contiguous, &d.ds, "contiguous", 0.9, 7, err, sizeof err)) fail_msg("%s", err);
    if (datasplit_make(&d.random, &d.ds, "random", 0.9, 7, err, sizeof err)) fail_msg("%s", err);
    return d;
}

static void free_data(Data *d) {
    datasplit_free(&d->contiguous);
    datasplit_free(&d->random);
    chardataset_free(&d->ds);
    free(d->text);
}

// ---------------------------------------------------------------- the windows
// count[c] = how many evaluation windows predict character c (target != -1).
static int *coverage(const EvalWindows *w, const CharDataset *ds) {
    int *count = calloc((size_t)ds->n, sizeof(int));
    int32_t x[T], y[T];
    for (long i = 0; i < w->n; i++) {
        evalwindows_get(w, ds, i, x, y);
        for (int t = 0; t < T; t++) {
            const long c = w->start[i] + 1 + t;
            if (y[t] != -1) {
                assert_int_equal(y[t], ds->ids[c]);   // the target is that character
                count[c]++;
            }
        }
    }
    return count;
}

static void test_windows_contiguous(void **state) {
    Data d = make_data();
    const DataSplit *s = &d.contiguous;
    char err[256];
    // the test characters predicted by some test window: first window + 1 .. last window + T
    const long first = s->test[0] + 1, last = s->test[s->n_test - 1] + T;
    assert_true(s->n_test % T != 1);   // the text leaves a tail: the strided windows do not end at the end
    for (int k = 1; k <= T; k++) {
        EvalWindows w;
        assert_int_equal(evalwindows_make(&w, s, true, T, k, err, sizeof err), 0);
        int *count = coverage(&w, &d.ds);
        for (long c = 0; c < d.ds.n; c++) {
            if (c < first || c > last) { assert_int_equal(count[c], 0); continue; }
            if (k == T && count[c] != 1) fail_msg("stride T: character %ld predicted %d times", c, count[c]);
            if (count[c] < 1) fail_msg("stride %d: character %ld never predicted", k, c);
        }
        // the strided windows, then (when they stop short) the last test window
        for (long i = 0; i * k < s->n_test; i++) assert_int_equal(w.start[i], s->test[i * k]);
        const long strided = (s->n_test + k - 1) / k, reach = s->test[(strided - 1) * k] + T;
        if (k == 1) {
            assert_int_equal(w.n, s->n_test);
            assert_int_equal(w.tail_ignore, 0);
        } else if ((s->n_test - 1) % k != 0) {
            assert_int_equal(w.n, strided + 1);
            assert_int_equal(w.start[w.n - 1], s->test[s->n_test - 1]);
            // its ignored targets are exactly those up to the strided windows' reach
            int32_t x[T], y[T];
            evalwindows_get(&w, &d.ds, w.n - 1, x, y);
            for (int t = 0; t < T; t++) assert_int_equal(y[t] == -1, s->test[s->n_test - 1] + 1 + t <= reach);
            assert_true(w.tail_ignore >= 1 && w.tail_ignore < T);
        }
        free(count);
        evalwindows_free(&w);
    }
    EvalWindows w;
    assert_int_not_equal(evalwindows_make(&w, s, true, T, 0, err, sizeof err), 0);
    assert_int_not_equal(evalwindows_make(&w, s, true, T, T + 1, err, sizeof err), 0);
    assert_non_null(strstr(err, "must be in [1, block_size 8]"));
    free_data(&d);
}

static int cmp_long(const void *a, const void *b) {
    const long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

static void test_windows_random(void **state) {
    Data d = make_data();
    const DataSplit *s = &d.random;
    char err[256];
    long *sorted = malloc(sizeof(long) * s->n_test);
    memcpy(sorted, s->test, sizeof(long) * s->n_test);
    qsort(sorted, s->n_test, sizeof(long), cmp_long);
    for (int k = 1; k <= T; k++) {
        EvalWindows w;
        assert_int_equal(evalwindows_make(&w, s, false, T, k, err, sizeof err), 0);
        assert_int_equal(w.tail_ignore, 0);
        assert_int_equal(w.n, (s->n_test + k - 1) / k);
        for (long i = 0; i < w.n; i++) assert_int_equal(w.start[i], k == 1 ? s->test[i] : sorted[i * k]);
        evalwindows_free(&w);
    }
    free(sorted);
    free_data(&d);
}

// ---------------------------------------------------------------- the loss
static void build_model(GPT *m, const CharDataset *ds) {
    char err[256];
    GPTShape sh = { .vocab_size = ds->vocab_size, .block_size = T, .n_layer = 2, .n_head = 2, .n_embd = 16,
                    .embd_pdrop = 0.1f, .resid_pdrop = 0.1f, .attn_pdrop = 0.1f };   // off in evaluation
    if (gpt_build(m, &sh, B, T, err, sizeof err)) fail_msg("%s", err);
    gpt_init_weights(m, 3);
    assert_true(m->B_infer > B);   // the evaluation batches are larger than training's
}

static double run_eval(const DataSplit *s, bool contiguous, int stride, int eval_iters, GPT *m, const CharDataset *ds) {
    char err[256];
    Evaluator ev;
    if (evaluator_init(&ev, s, contiguous, T, stride, eval_iters, B, 1, 7, err, sizeof err)) fail_msg("%s", err);
    Comm *comm = comm_single_create();
    int32_t *x = malloc(sizeof(int32_t) * m->B_infer * T), *y = malloc(sizeof(int32_t) * m->B_infer * T);
    volatile sig_atomic_t stop = 0;
    double loss;
    assert_int_equal(evaluator_run(&ev, m, ds, comm, &stop, x, y, &loss), EVAL_DONE);
    free(x); free(y);
    comm->destroy(comm);
    evaluator_free(&ev);
    return loss;
}

// The model's loss on each window at `starts` (one at a time, gpt_forward, dropout off); a
// character counts from the first window that predicts it. Returns the mean; *n the count.
static double direct_loss(GPT *m, const CharDataset *ds, const long *starts, long n_starts, bool first_only, long *n) {
    char *seen = calloc((size_t)ds->n, 1);
    double sum = 0;
    *n = 0;
    for (long i = 0; i < n_starts; i++) {
        int32_t x[T], y[T];
        chardataset_window(ds, starts[i], x, y);
        gpt_forward(m, x, y, 1, T, false, 0, 0, NULL);
        for (int t = 0; t < T; t++) {
            const long c = starts[i] + 1 + t;
            if (first_only && seen[c]) continue;
            seen[c] = 1;
            sum += m->host_losses[t];
            (*n)++;
        }
    }
    free(seen);
    return sum / *n;
}

// Stride block_size (the default, eval_stride 0) on the contiguous split: every test character
// once, its loss from the first window in position order predicting it.
static void test_loss_default_stride(void **state) {
    Data d = make_data();
    GPT m;
    build_model(&m, &d.ds);
    const DataSplit *s = &d.contiguous;
    long *starts = malloc(sizeof(long) * (s->n_test / T + 2)), n_starts = 0;
    for (long p = s->test[0]; p <= s->test[s->n_test - 1]; p += T) starts[n_starts++] = p;
    starts[n_starts++] = s->test[s->n_test - 1];   // the end of the split
    long n;
    const double ref = direct_loss(&m, &d.ds, starts, n_starts, true, &n);
    assert_int_equal(n, s->test[s->n_test - 1] + T - s->test[0]);   // every test character, once
    const double got = run_eval(s, true, 0, 0, &m, &d.ds), got_t = run_eval(s, true, T, 0, &m, &d.ds);
    print_message("stride T: %.7f, direct %.7f over %ld characters\n", got, ref, n);
    assert_true(fabs(got - ref) <= 1e-6 * ref);
    assert_true(got == got_t);
    free(starts);
    gpt_free(&m);
    free_data(&d);
}

// eval_stride 1 is the evaluation before eval_stride existed: the test sampler's epoch-0 order
// of every test window, batch_size rows per gpt_forward, mean loss x tokens summed per batch.
static double old_evaluate(GPT *m, const CharDataset *ds, const DataSplit *s, int eval_iters) {
    DistributedSampler ts;
    dsampler_init(&ts, s->n_test, 1, 0, true, 7, false);
    long *order = malloc(sizeof(long) * (ts.total_size + 1)), *scratch = malloc(sizeof(long) * (ts.total_size + 1));
    const long n_test = dsampler_indices(&ts, order, scratch);
    long n_eval = n_test;
    if (eval_iters > 0 && eval_iters < (n_test + B - 1) / B) n_eval = (long)eval_iters * B;
    int32_t x[B * T], y[B * T];
    double v[2] = { 0, 0 };
    for (long k = 0; k < n_eval;) {
        int n = 0;
        for (; n < B && k < n_eval; n++, k++) chardataset_window(ds, s->test[order[k]], x + n * T, y + n * T);
        const float loss = gpt_forward(m, x, y, n, T, false, 0, 0, NULL);
        v[0] += (double)loss * m->n_valid;
        v[1] += (double)m->n_valid;
    }
    free(order); free(scratch);
    return v[0] / v[1];
}

static void test_loss_stride_one_is_old(void **state) {
    Data d = make_data();
    GPT m;
    build_model(&m, &d.ds);
    for (int split = 0; split < 2; split++) {
        const DataSplit *s = split ? &d.random : &d.contiguous;
        for (int iters = 0; iters <= 5; iters += 5) {
            const double ref = old_evaluate(&m, &d.ds, s, iters), got = run_eval(s, !split, 1, iters, &m, &d.ds);
            if (!(fabs(got - ref) <= 1e-6 * ref))
                fail_msg("%s split, eval_iters %d: %.8f, before %.8f", split ? "random" : "contiguous", iters, got, ref);
        }
    }
    // and every window predicts T characters: the direct mean over every window
    long n;
    const double all = direct_loss(&m, &d.ds, d.contiguous.test, d.contiguous.n_test, false, &n);
    assert_int_equal(n, d.contiguous.n_test * T);
    assert_true(fabs(run_eval(&d.contiguous, true, 1, 0, &m, &d.ds) - all) <= 1e-6 * all);
    gpt_free(&m);
    free_data(&d);
}

// Random split, stride 3: every third test window in position order, all T targets each.
static void test_loss_random_stride(void **state) {
    Data d = make_data();
    GPT m;
    build_model(&m, &d.ds);
    const DataSplit *s = &d.random;
    long *sorted = malloc(sizeof(long) * s->n_test), n_kept = 0;
    memcpy(sorted, s->test, sizeof(long) * s->n_test);
    qsort(sorted, s->n_test, sizeof(long), cmp_long);
    for (long i = 0; i < s->n_test; i += 3) sorted[n_kept++] = sorted[i];
    long n;
    const double ref = direct_loss(&m, &d.ds, sorted, n_kept, false, &n);
    assert_int_equal(n, n_kept * T);
    const double got = run_eval(s, false, 3, 0, &m, &d.ds);
    assert_true(fabs(got - ref) <= 1e-6 * ref);
    free(sorted);
    gpt_free(&m);
    free_data(&d);
}

// ---------------------------------------------------------------- the stop flag
// A communicator whose host all-reduce (called once before every batch) raises the stop flag
// at its stop_at-th call: the evaluation returns EVAL_STOPPED right there.
static volatile sig_atomic_t g_stop;
static int g_calls, g_stop_at;
static int counting_allreduce(Comm *c, double *x, int n, CommOp op) {
    if (++g_calls == g_stop_at) { g_stop = 1; x[0] = 1.0; }   // as a signal on some rank before this batch
    return 0;
}

static void test_stop_between_batches(void **state) {
    Data d = make_data();
    GPT m;
    build_model(&m, &d.ds);
    char err[256];
    Evaluator ev;
    assert_int_equal(evaluator_init(&ev, &d.contiguous, true, T, 1, 0, B, 1, 7, err, sizeof err), 0);
    const long n_batches = (ev.n_eval + m.B_infer - 1) / m.B_infer;
    assert_true(n_batches >= 4);
    Comm *comm = comm_single_create();
    comm->allreduce_host = counting_allreduce;
    int32_t *x = malloc(sizeof(int32_t) * m.B_infer * T), *y = malloc(sizeof(int32_t) * m.B_infer * T);
    double loss = 0;
    g_stop = 0; g_calls = 0; g_stop_at = 3;
    assert_int_equal(evaluator_run(&ev, &m, &d.ds, comm, &g_stop, x, y, &loss), EVAL_STOPPED);
    assert_int_equal(g_calls, 3);   // two batches ran, the third was not started
    assert_true(isnan(loss));
    // a flag already set stops before the first batch; none runs every batch, then the sums
    g_calls = 0; g_stop_at = -1;
    assert_int_equal(evaluator_run(&ev, &m, &d.ds, comm, &g_stop, x, y, &loss), EVAL_STOPPED);
    assert_int_equal(g_calls, 1);
    g_stop = 0; g_calls = 0;
    assert_int_equal(evaluator_run(&ev, &m, &d.ds, comm, &g_stop, x, y, &loss), EVAL_DONE);
    assert_int_equal(g_calls, n_batches + 1);
    assert_true(isfinite(loss));
    free(x); free(y);
    comm->destroy(comm);
    evaluator_free(&ev);
    gpt_free(&m);
    free_data(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_windows_contiguous),
        cmocka_unit_test(test_windows_random),
        cmocka_unit_test(test_loss_default_stride),
        cmocka_unit_test(test_loss_stride_one_is_old),
        cmocka_unit_test(test_loss_random_stride),
        cmocka_unit_test(test_stop_between_batches),
    };
    return cmocka_run_group_tests_name("eval", tests, NULL, NULL);
}
