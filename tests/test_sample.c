// tests/test_sample.c — `mingpt sample` (app/sample.c) draws from the distribution minGPT's
// generate() defines: softmax(logits / temperature) over the top_k most likely characters, the
// others never.
//
// The snapshot's model gives the same logits L at every position whatever the context: every
// weight is zero except ln_f.bias = e_0 and lm_head.weight's first column = L, so the residual
// stream is zero, ln_f returns its bias and the logits are exactly L. Thousands of characters are
// sampled; each character's frequency must lie within 5 standard deviations of its probability,
// computed here in double from L (independently of the sampler), and characters outside the
// top k must not appear at all. Also: the output is the prompt, then max_new_tokens characters;
// the same seed gives the same text, another seed another.
#include "tests/test_util.h"

#include <stdlib.h>
#include <unistd.h>

#include "model/gpt.h"
#include "app/sample.h"
#include "checkpoint/snapshot.h"

#define V 5
static const uint32_t VOCAB[V] = { 'a', 'b', 'c', 'd', 'e' };
static const double LOGITS[V] = { 2.0, 1.0, 0.5, 0.0, -1.0 };   // distinct: top-k has no ties
static const GPTShape SHAPE = { V, 8, 1, 1, 4, 0, 0, 0 };

static char g_dir[64], g_snap[128];

// The snapshot described above, at g_snap.
static int setup(void **state) {
    assert_int_equal(test_tmpdir(g_dir, sizeof g_dir, "sample"), 0);
    snprintf(g_snap, sizeof g_snap, "%s/s.bin", g_dir);
    size_t n;
    char err[512];
    assert_int_equal(gpt_shape_check(&SHAPE, &n, err, sizeof err), 0);
    const int nt = gpt_param_table(&SHAPE, NULL);
    ParamTensor *t = calloc((size_t)nt, sizeof *t);
    float *p = calloc(n, sizeof(float));
    assert_true(t && p);
    gpt_param_table(&SHAPE, t);
    int found = 0;
    for (int k = 0; k < nt; k++) {
        if (strcmp(t[k].name, "transformer.ln_f.bias") == 0) { p[t[k].offset] = 1.0f; found++; }
        if (strcmp(t[k].name, "lm_head.weight") == 0) {   // (V, C) row-major
            for (int v = 0; v < V; v++) p[t[k].offset + (size_t)v * SHAPE.n_embd] = (float)LOGITS[v];
            found++;
        }
    }
    assert_int_equal(found, 2);
    uint32_t vocab[V];
    memcpy(vocab, VOCAB, sizeof vocab);
    Snapshot s = { .config_yaml = "gpt_config:\n  n_layer: 1\n", .vocab = vocab, .vocab_size = V, .shape = SHAPE,
                   .num_params = n, .params = p, .loss_scale = 1.0f, .world_size = 1 };
    if (snapshot_save(g_snap, &s, err, sizeof err)) fail_msg("%s", err);
    free(t);
    free(p);
    return 0;
}

static int teardown(void **state) {
    return test_rmtree(g_dir);
}

// The text `mingpt sample` prints for these options (prompt "a"); the caller frees it.
static char *sample(long n, double temperature, int top_k, uint64_t seed) {
    SampleOptions o = { .snapshot = g_snap, .prompt = "a", .max_new_tokens = n, .temperature = temperature,
                        .top_k = top_k, .seed = seed, .device = "cpu" };
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(sample_run(&o, f), 0);
    fclose(f);
    // the prompt, n characters, a newline
    assert_int_equal(len, (size_t)n + 2);
    assert_true(buf[0] == 'a' && buf[len - 1] == '\n');
    return buf;
}

// Frequencies of n draws against softmax(L / temperature) over the top_k largest logits.
static void check_distribution(double temperature, int top_k) {
    const long n = 2000;
    char *text = sample(n, temperature, top_k, 1234);
    long count[V] = {0};
    for (long i = 1; i <= n; i++) {
        const int v = text[i] - 'a';
        if (v < 0 || v >= V) fail_msg("character %ld is '%c', not in the vocabulary", i, text[i]);
        count[v]++;
    }
    free(text);
    // the reference: the k-th largest logit is the cut (LOGITS is descending)
    const double cut = top_k > 0 && top_k < V ? LOGITS[top_k - 1] : -INFINITY;
    double prob[V], sum = 0.0;
    for (int v = 0; v < V; v++) sum += prob[v] = LOGITS[v] >= cut ? exp((LOGITS[v] - LOGITS[0]) / temperature) : 0.0;
    for (int v = 0; v < V; v++) {
        const double p = prob[v] / sum, f = (double)count[v] / (double)n;
        if (p == 0.0) {
            if (count[v]) fail_msg("temperature %g, top_k %d: '%c' (outside the top %d) drawn %ld times", temperature,
                                   top_k, 'a' + v, top_k, count[v]);
            continue;
        }
        const double tol = 5.0 * sqrt(p * (1.0 - p) / (double)n);
        if (fabs(f - p) > tol)
            fail_msg("temperature %g, top_k %d: '%c' drawn with frequency %.4f, probability %.4f (tolerance %.4f)",
                     temperature, top_k, 'a' + v, f, p, tol);
    }
}

static void test_temperature(void **state) {
    check_distribution(0.5, 0);
    check_distribution(2.0, 0);
}

static void test_top_k(void **state) {
    check_distribution(1.0, 2);
    check_distribution(2.0, 3);
    check_distribution(1.0, V);   // top_k >= V: every character
}

static void test_seed(void **state) {
    char *a = sample(200, 1.0, 0, 7), *b = sample(200, 1.0, 0, 7), *c = sample(200, 1.0, 0, 8);
    assert_string_equal(a, b);
    assert_string_not_equal(a, c);
    free(a); free(b); free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_temperature),
        cmocka_unit_test(test_top_k),
        cmocka_unit_test(test_seed),
    };
    return cmocka_run_group_tests_name("sample", tests, setup, teardown);
}
