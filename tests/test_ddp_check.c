// tests/test_ddp_check.c — the parameter comparison of tests/ddp_check.c, which the data-parallel
// and snapshot tests trust (tests/ddp/test_ddp.sh, tests/test_snapshot_files.sh), run as they run
// it: `ddp_check snapshots A.bin B.bin [--tol T]` on crafted snapshots, and `ddp_check compare`
// on raw parameter files. Each tensor is judged on its own: a whole small tensor of garbage
// fails and is named, though it is a tiny fraction of all parameters; within a tensor, at most
// max(0.1%, 3 elements) may differ beyond tol x its largest magnitude; no element may be
// non-finite; the key third of c_attn.bias is not judged; --tol 0 is bitwise.
#include "tests/test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include "model/gpt.h"
#include "checkpoint/snapshot.h"

// ddp_check's own model (its compare mode assumes V 23, T 12, C 128, 4 heads), 2 layers
enum { V = 23, T = 12, L = 2, NH = 4, C = 128 };
static const GPTShape SHAPE = { V, T, L, NH, C, 0.1f, 0.1f, 0.1f };

static char dir[256], check[4096];
static float *ref;   // the reference parameters
static size_t np;
static ParamTensor pt[64];
static int nt;

static const ParamTensor *find(const ParamTensor *t, int n, const char *name) {
    for (int k = 0; k < n; k++)
        if (!strcmp(t[k].name, name)) return &t[k];
    fail_msg("no tensor %s", name);
    return NULL;
}
static const ParamTensor *tensor(const char *name) { return find(pt, nt, name); }

// Parameters that look trained: weights N(0, 0.02)-sized, LayerNorm weights near 1, biases a few
// steps of lr 1e-4 (all the scales the comparison sees, each relative to its own tensor).
static void make_params(void) {
    nt = gpt_param_table(&SHAPE, NULL);
    assert_true(nt <= 64);
    gpt_param_table(&SHAPE, pt);
    np = pt[nt - 1].offset + pt[nt - 1].numel;
    ref = falloc((long)np);
    TestRng r = test_rng(11);
    for (int k = 0; k < nt; k++) {
        float *x = ref + pt[k].offset;
        const float lo = pt[k].init_std > 0 ? -0.05f : pt[k].init_value == 1.0f ? 0.99f : -5e-4f;
        const float hi = pt[k].init_std > 0 ? 0.05f : pt[k].init_value == 1.0f ? 1.01f : 5e-4f;
        test_fill(&r, x, (long)pt[k].numel, lo, hi);
    }
}

static int setup(void **state) {
    if (test_tmpdir(dir, sizeof dir, "ddpcheck") != 0) return -1;
    const char *b = getenv("B");   // the build directory (make exports it: build/san under SAN=1)
    char rel[400];
    snprintf(rel, sizeof rel, "%s/tests/ddp_check", b && b[0] ? b : "build");
    if (!realpath(rel, check)) snprintf(check, sizeof check, "%s", rel);   // run() reports it missing
    make_params();
    return 0;
}

static int teardown(void **state) {
    free(ref);
    return test_rmtree(dir);
}

static void save(const char *name, const float *params) {
    uint32_t vocab[V];
    for (int i = 0; i < V; i++) vocab[i] = 'a' + (uint32_t)i;
    Snapshot s = { .config_yaml = "gpt_config:\n  n_layer: 2\n", .vocab = vocab, .vocab_size = V, .shape = SHAPE,
                   .num_params = np, .params = (float *)params, .iter_num = 5, .loss_scale = 1.0f,
                   .world_size = 1 };
    char path[400], err[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (snapshot_save(path, &s, err, sizeof err)) fail_msg("%s", err);
}

// Runs ddp_check with args (file names relative to dir); its stdout and stderr into out.
// Returns its exit code.
static int run(char *out, size_t outlen, const char *args) {
    if (access(check, X_OK) != 0) fail_msg("%s is not built (make %s)", check, check);
    char cmd[sizeof dir + sizeof check + 512];
    snprintf(cmd, sizeof cmd, "cd %s && %s %s 2>&1", dir, check, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, outlen - 1, p);
    out[n] = 0;
    const int st = pclose(p);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

// The last line of out (the summary, whatever precedes it).
static const char *last_line(const char *out) {
    const char *e = out + strlen(out);
    while (e > out && e[-1] == '\n') e--;
    const char *s = e;
    while (s > out && s[-1] != '\n') s--;
    return s;
}

#define expect(args, want_rc, ...) do { \
    static char out_[1 << 16]; \
    const int rc_ = run(out_, sizeof out_, args); \
    const char *frag_[] = { __VA_ARGS__, NULL }; \
    if (rc_ != (want_rc)) fail_msg("ddp_check %s: exit %d, want %d:\n%s", args, rc_, want_rc, out_); \
    for (int i_ = 0; frag_[i_]; i_++) \
        if (!strstr(out_, frag_[i_])) fail_msg("ddp_check %s: output lacks '%s':\n%s", args, frag_[i_], out_); \
} while (0)

// b = a copy of the reference, edited by the caller, saved as b.bin
static float *copy(void) {
    float *b = falloc((long)np);
    memcpy(b, ref, np * sizeof(float));
    return b;
}

static void test_identical_pass(void **state) {
    save("a.bin", ref);
    save("b.bin", ref);
    char want[64];
    snprintf(want, sizeof want, "all %d tensors pass", nt);
    expect("snapshots a.bin b.bin", 0, want, "; bitwise identical");
    expect("snapshots a.bin b.bin --tol 0", 0, want, "compared bitwise", "; bitwise identical");
}

// The case that passed when 99.9% of all parameters were pooled: 256 garbage elements are 0.06%
// of this model (and 0.03% of test_ddp.sh's 4-layer one).
static void test_ln_f_garbage_fails(void **state) {
    save("a.bin", ref);
    float *b = copy();
    TestRng r = test_rng(5);
    const ParamTensor *w = tensor("transformer.ln_f.weight"), *bias = tensor("transformer.ln_f.bias");
    test_fill(&r, b + w->offset, (long)w->numel, -3.0f, 3.0f);
    test_fill(&r, b + bias->offset, (long)bias->numel, -3.0f, 3.0f);
    save("b.bin", b);
    char want[64];
    snprintf(want, sizeof want, "2 of %d tensors FAIL", nt);
    expect("snapshots a.bin b.bin", 1, "FAIL transformer.ln_f.weight:", "FAIL transformer.ln_f.bias:", want,
           "worst tensor transformer.ln_f.");
    // garbage on the bias's own scale (its values are a few steps of lr): still every element off
    memcpy(b, ref, np * sizeof(float));
    test_fill(&r, b + bias->offset, (long)bias->numel, -5e-4f, 5e-4f);
    save("b.bin", b);
    static char out[1 << 16];
    assert_int_equal(run(out, sizeof out, "snapshots a.bin b.bin"), 1);
    if (!strstr(last_line(out), "worst tensor transformer.ln_f.bias: ") || !strstr(out, "FAIL transformer.ln_f.bias:"))
        fail_msg("the bias is not named:\n%s", out);
    snprintf(want, sizeof want, "1 of %d tensors FAIL", nt);
    assert_non_null(strstr(out, want));
    free(b);
}

// One element far beyond tolerance (5x the tensor's largest magnitude) in a 65,536-element tensor
// passes, as designed: it is within the tensor's 65 allowed, and the summary names it as the worst
// element of the worst tensor. --tol 0 fails it (a non-finite one always fails: test_compare_raw_files;
// a snapshot cannot hold one).
static void test_single_element_in_big_tensor(void **state) {
    save("a.bin", ref);
    float *b = copy();
    const ParamTensor *fc = tensor("transformer.h.1.mlp.c_fc.weight");
    assert_int_equal(fc->numel, 65536);
    b[fc->offset + 4321] += 0.25f;
    save("b.bin", b);
    expect("snapshots a.bin b.bin", 0, "worst tensor transformer.h.1.mlp.c_fc.weight: 99.9985% of 65536 agree",
           "worst element [4321] ");
    expect("snapshots a.bin b.bin --tol 0", 1,
           "FAIL transformer.h.1.mlp.c_fc.weight: 1 of 65536 elements differ in their bits");
    free(b);
}

// Sets `count` elements of tensor `name` (every step-th from 0) off by `by` x tol x its largest
// magnitude, saves b.bin and expects ddp_check (default tol 1e-5) to exit want_rc.
static void off_by(const char *name, int count, int step, double by, int want_rc) {
    float *b = copy();
    const ParamTensor *t = tensor(name);
    double mx = 0;
    for (size_t i = 0; i < t->numel; i++) mx = fmax(mx, fabs(ref[t->offset + i]));
    for (int i = 0; i < count; i++) b[t->offset + (size_t)i * step] += (float)(by * 1e-5 * mx);
    save("b.bin", b);
    free(b);
    static char out[1 << 16];
    const int rc = run(out, sizeof out, "snapshots a.bin b.bin");
    if (rc != want_rc)
        fail_msg("%d elements of %s off by %g x tol: exit %d, want %d:\n%s", count, name, by, rc, want_rc, out);
}

// The allowance, per tensor: floor(n / 1000) elements of a big tensor, 3 of a small one; the
// tolerance is relative to each tensor's own largest magnitude.
static void test_allowance_per_tensor(void **state) {
    save("a.bin", ref);
    off_by("transformer.h.0.mlp.c_proj.weight", 65, 997, 3.0, 0);
    off_by("transformer.h.0.mlp.c_proj.weight", 66, 997, 3.0, 1);
    off_by("transformer.h.0.ln_1.bias", 3, 17, 3.0, 0);
    off_by("transformer.h.0.ln_1.bias", 4, 17, 3.0, 1);
    off_by("transformer.h.0.ln_1.bias", 128, 1, 0.5, 0);   // within tol x 5e-4 each
    off_by("transformer.h.0.ln_1.weight", 128, 1, 0.5, 0);  // within tol x 1.01 each
    off_by("transformer.h.0.ln_1.weight", 128, 1, 3.0, 1);
}

// The key third of c_attn.bias is reported, not judged (its softmax ignores it); its query and
// value thirds are judged; --tol 0 judges it too.
static void test_key_biases(void **state) {
    save("a.bin", ref);
    float *b = copy();
    const ParamTensor *t = tensor("transformer.h.0.attn.c_attn.bias");
    for (int i = C; i < 2 * C; i++) b[t->offset + i] = -b[t->offset + i];
    save("b.bin", b);
    expect("snapshots a.bin b.bin", 0, "key biases (256, not judged): worst ");
    expect("snapshots a.bin b.bin --tol 0", 1,
           "FAIL transformer.h.0.attn.c_attn.bias: 128 of 384 elements differ in their bits");
    memcpy(b, ref, np * sizeof(float));
    for (int i = 0; i < 4; i++) b[t->offset + 2 * C + 10 * i] += 1e-3f;   // 4 value biases
    save("b.bin", b);
    expect("snapshots a.bin b.bin", 1, "FAIL transformer.h.0.attn.c_attn.bias: 4 of 256 elements");
    free(b);
}

static void write_raw(const char *name, const float *x, size_t n) {
    char path[400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(x, sizeof(float), n, f), n);
    assert_int_equal(fclose(f), 0);
}

// `compare` (the raw parameter files of `ddp_check step`, its 4-layer model) judges alike, and
// fails any non-finite element: in a big tensor, or among the key biases that are not judged.
static void test_compare_raw_files(void **state) {
    GPTShape s4 = SHAPE;
    s4.n_layer = 4;
    ParamTensor t4[64];
    const int n4 = gpt_param_table(&s4, t4);
    const size_t n = t4[n4 - 1].offset + t4[n4 - 1].numel;
    float *a = falloc((long)n), *b = falloc((long)n);
    TestRng r = test_rng(9);
    test_fill(&r, a, (long)n, -0.05f, 0.05f);
    write_raw("a.params", a, n);
    expect("compare --layers 4 a.params a.params", 0, "parameters: all ", "; bitwise identical");
    const ParamTensor *lnb = find(t4, n4, "transformer.ln_f.bias"), *fc = find(t4, n4, "transformer.h.3.mlp.c_fc.weight"),
                      *qkv = find(t4, n4, "transformer.h.3.attn.c_attn.bias");
    memcpy(b, a, n * sizeof(float));
    for (size_t i = 0; i < lnb->numel; i++) b[lnb->offset + i] = 7.0f;
    write_raw("b.params", b, n);
    expect("compare --layers 4 a.params b.params", 1, "FAIL transformer.ln_f.bias:", "worst tensor transformer.ln_f.bias");
    const float bad[] = { NAN, INFINITY, -INFINITY };
    for (int i = 0; i < 3; i++) {
        memcpy(b, a, n * sizeof(float));
        b[fc->offset + 4321] = bad[i];
        write_raw("b.params", b, n);
        expect("compare --layers 4 a.params b.params", 1, "FAIL transformer.h.3.mlp.c_fc.weight: 1 of 65536",
               "some are not finite");
        memcpy(b, a, n * sizeof(float));
        b[qkv->offset + C + 5] = bad[i];   // a key bias
        write_raw("b.params", b, n);
        expect("compare --layers 4 a.params b.params", 1, "FAIL transformer.h.3.attn.c_attn.bias: 0 of 256",
               "some are not finite");
    }
    free(a);
    free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identical_pass),
        cmocka_unit_test(test_ln_f_garbage_fails),
        cmocka_unit_test(test_single_element_in_big_tensor),
        cmocka_unit_test(test_allowance_per_tensor),
        cmocka_unit_test(test_key_biases),
        cmocka_unit_test(test_compare_raw_files),
    };
    return cmocka_run_group_tests_name("ddp_check", tests, setup, teardown);
}
