// tests/gpt_fixture.h — tests/fixtures/gpt_tiny.bin, the PyTorch golden forward/backward written
// by tests/gen_gpt_fixture.py (format in tests/fixtures/README.md): header {V,T,L,NH,C,B}, idx,
// targets, params, logits, loss, grads. Shared by the tests that start from its model.
#ifndef MINGPT_TEST_GPT_FIXTURE_H
#define MINGPT_TEST_GPT_FIXTURE_H

#include "tests/test_util.h"

#include "model/gpt.h"

typedef struct {
    int V, T, L, NH, C, B;
    int32_t *idx, *targets;
    float *params, *logits, loss, *grads;
    size_t P;
} Fixture;

static inline void fixture_read(FILE *f, void *p, size_t n, const char *path) {
    if (fread(p, 1, n, f) != n) fail_msg("%s is truncated", path);
}

static inline Fixture load_fixture(void) {
    Fixture fx;
    const char *path = "tests/fixtures/gpt_tiny.bin";
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s (run tests from the repo root)", path);
    int32_t h[6];
    fixture_read(f, h, sizeof h, path);
    fx.V = h[0]; fx.T = h[1]; fx.L = h[2]; fx.NH = h[3]; fx.C = h[4]; fx.B = h[5];
    GPTShape s = { fx.V, fx.T, fx.L, fx.NH, fx.C, 0, 0, 0 };
    int n = gpt_param_table(&s, NULL);
    ParamTensor *t = calloc(n, sizeof *t);
    gpt_param_table(&s, t);
    fx.P = t[n - 1].offset + t[n - 1].numel;
    free(t);
    size_t BT = (size_t)fx.B * fx.T;
    fx.idx = malloc(BT * 4); fx.targets = malloc(BT * 4);
    fx.params = malloc(fx.P * 4); fx.logits = malloc(BT * fx.V * 4); fx.grads = malloc(fx.P * 4);
    fixture_read(f, fx.idx, BT * 4, path);
    fixture_read(f, fx.targets, BT * 4, path);
    fixture_read(f, fx.params, fx.P * 4, path);
    fixture_read(f, fx.logits, BT * fx.V * 4, path);
    fixture_read(f, &fx.loss, 4, path);
    fixture_read(f, fx.grads, fx.P * 4, path);
    assert_int_equal(fgetc(f), EOF);   // nothing left: the layout agrees with the script's
    fclose(f);
    return fx;
}

static inline void free_fixture(Fixture *fx) {
    free(fx->idx); free(fx->targets); free(fx->params); free(fx->logits); free(fx->grads);
}

#endif
