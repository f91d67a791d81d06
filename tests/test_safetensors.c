// tests/test_safetensors.c — the safetensors reader and writer (checkpoint/safetensors.h) and
// minGPT's state_dict in it (checkpoint/state_dict.h):
//   * fp32 -> bf16 / fp16 rounding against independent references (the nearest representable
//     value found by search in double; the compiler's _Float16 conversion), and back;
//   * write -> parse round trip: names, shapes, offsets, metadata, data;
//   * every malformed header refused with a message naming the problem (length past the end,
//     not JSON, duplicate keys, dtypes, shapes, offsets, gaps, overlaps, metadata types);
//   * the tensor limit exact (2^20 tensors, __metadata__ not counted); a header whose parse runs
//     out of memory (RLIMIT_AS) is said to be out of memory, not invalid JSON;
//   * export -> import: float32 bitwise, bfloat16 / float16 as rounded; a snapshot as init_from;
//     every mismatch (missing tensor, shape, vocabulary, n_head, extra tensor, mask, NaN) named.
#include "tests/test_util.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checkpoint/safetensors.h"
#include "checkpoint/snapshot.h"
#include "checkpoint/state_dict.h"

static char dir[256];

static int setup(void **state) {
    return test_tmpdir(dir, sizeof dir, "st");
}

static int teardown(void **state) {
    return test_rmtree(dir);
}

// ---------------------------------------------------------------- 16-bit rounding
// The representable value nearest x among the finite values of a format with `man` mantissa
// bits, exponents down to emin (subnormals below) and largest finite `maxf`; ties to an even
// last mantissa bit; beyond maxf + half an ulp: inf. Computed in double, independently of
// the bit manipulations under test.
static double nearest(double x, int man, int emin, double maxf) {
    const double ax = fabs(x);
    int e;
    frexp(ax, &e);                                  // ax = f * 2^e, f in [0.5, 1)
    int ulp_exp = (e - 1 < emin ? emin : e - 1) - man;
    const double ulp = ldexp(1.0, ulp_exp), lo = floor(ax / ulp) * ulp, hi = lo + ulp;
    double r = ax - lo < hi - ax ? lo : hi - ax < ax - lo ? hi : fmod(lo / ulp, 2.0) == 0.0 ? lo : hi;
    const double top_ulp = ldexp(1.0, (int)floor(log2(maxf)) - man);
    if (r > maxf) r = ax >= maxf + top_ulp / 2 ? INFINITY : maxf;
    return x < 0 ? -r : r;
}

static void test_rounding(void **state) {
    TestRng r = test_rng(11);
    for (int i = 0; i < 200000; i++) {
        // magnitudes from 2^-30 (fp16 subnormals and below) to 2^20 (fp16 overflow)
        const float x = ldexpf(test_uniform(&r, -1.0f, 1.0f), (int)(test_next(&r) % 51) - 30);
        const double want_bf = nearest(x, 7, -126, 3.3895313892515355e38);
        const double want_h = nearest(x, 10, -14, 65504.0);
        const float bf = st_from_bf16(st_to_bf16(x)), h = st_from_f16(st_to_f16(x));
        if ((double)bf != want_bf) fail_msg("bf16(%a) = %a, want %a", (double)x, (double)bf, want_bf);
        if ((double)h != want_h) fail_msg("f16(%a) = %a, want %a", (double)x, (double)h, want_h);
#if !defined(__clang__) || __clang_major__ >= 15
        if (h != (float)(_Float16)x) fail_msg("f16(%a) = %a, _Float16 gives %a", (double)x, (double)h, (double)(_Float16)x);
#endif
    }
    // ties: to even in both directions; the extremes; inf and NaN pass through
    assert_true(st_from_f16(st_to_f16(1.0f + ldexpf(1, -11))) == 1.0f);
    assert_true(st_from_f16(st_to_f16(1.0f + 3 * ldexpf(1, -11))) == 1.0f + ldexpf(1, -9));
    assert_true(st_from_f16(st_to_f16(65504.0f)) == 65504.0f);
    assert_true(isinf(st_from_f16(st_to_f16(65520.0f))));
    assert_true(st_from_f16(st_to_f16(ldexpf(1, -25))) == 0.0f);
    assert_true(st_from_f16(st_to_f16(ldexpf(1.5f, -25))) == ldexpf(1, -24));
    assert_true(isinf(st_from_bf16(st_to_bf16(INFINITY))) && isnan(st_from_bf16(st_to_bf16(NAN))));
    assert_true(isnan(st_from_f16(st_to_f16(NAN))) && st_from_f16(st_to_f16(-INFINITY)) == -INFINITY);
    assert_int_equal(st_to_bf16(1.0f + ldexpf(1, -8)), 0x3f80);   // tie to even (down)
    assert_int_equal(st_to_bf16(1.0f + 3 * ldexpf(1, -8)), 0x3f82);   // tie to even (up)
}

// ---------------------------------------------------------------- the container
static void fill_iota(const void *ctx, uint64_t first, size_t n, float *out) {
    for (size_t i = 0; i < n; i++) out[i] = (float)(first + i) * *(const float *)ctx;
}

static void test_round_trip(void **state) {
    float a[6] = { 1, -2, 3.5f, 1e-3f, 0, 7 }, step = 0.5f;
    StWrite w[3] = {
        { .name = "a.weight", .ndim = 2, .shape = { 2, 3 }, .data = a },
        { .name = "b", .ndim = 1, .shape = { 70000 }, .fill = fill_iota, .ctx = &step },   // > one write chunk
        { .name = "empty", .ndim = 2, .shape = { 0, 4 }, .data = a },
    };
    const char *mk[] = { "format", "note" }, *mv[] = { "pt", "caf\xc3\xa9 \"quoted\"" };
    char path[300], err[512];
    snprintf(path, sizeof path, "%s/rt.safetensors", dir);
    for (int d = 0; d < 3; d++) {
        const StDtype dt = d == 0 ? ST_F32 : d == 1 ? ST_BF16 : ST_F16;
        if (safetensors_write(path, w, 3, dt, mk, mv, 2, err, sizeof err)) fail_msg("%s", err);
        SafeTensors st;
        if (safetensors_load(path, &st, err, sizeof err)) fail_msg("%s", err);
        uint64_t hl;
        memcpy(&hl, st.owned, 8);
        assert_int_equal((8 + hl) % 8, 0);   // the data starts 8-byte aligned
        assert_int_equal(st.n_tensors, 3);
        assert_string_equal(st.tensors[0].name, "a.weight");
        assert_int_equal(st.tensors[0].dtype, dt);
        assert_int_equal(st.tensors[0].ndim, 2);
        assert_int_equal(st.tensors[0].shape[1], 3);
        assert_int_equal(st.tensors[1].numel, 70000);
        assert_int_equal(st.tensors[2].numel, 0);
        assert_string_equal(safetensors_meta(&st, "note"), mv[1]);
        assert_null(safetensors_meta(&st, "absent"));
        for (int i = 0; i < 6; i++) {
            const float want = dt == ST_F32 ? a[i] : dt == ST_BF16 ? st_from_bf16(st_to_bf16(a[i])) : st_from_f16(st_to_f16(a[i]));
            assert_true(st_get_float(&st.tensors[0], (uint64_t)i) == want);
        }
        const StTensor *b = safetensors_find(&st, "b");
        assert_non_null(b);
        assert_true(st_get_float(b, 69999) == (dt == ST_F32 ? 34999.5f : dt == ST_BF16 ? st_from_bf16(st_to_bf16(34999.5f))
                                                                               : st_from_f16(st_to_f16(34999.5f))));
        safetensors_free(&st);
    }
}

// A small valid file as bytes: header text h, then n data bytes.
static size_t make_file(unsigned char *buf, const char *h, size_t n) {
    const uint64_t hl = strlen(h);
    memcpy(buf, &hl, 8);
    memcpy(buf + 8, h, hl);
    memset(buf + 8 + hl, 0, n);
    return 8 + hl + n;
}

static void expect_refused(const unsigned char *b, size_t len, const char *what) {
    SafeTensors st;
    char err[512];
    if (safetensors_parse(b, len, "x.safetensors", &st, err, sizeof err) == 0) fail_msg("accepted: %s", what);
    if (!strstr(err, "x.safetensors") || !strstr(err, what)) fail_msg("message '%s' lacks '%s'", err, what);
    assert_null(st.tensors);
}

static void test_malformed(void **state) {
    static unsigned char b[4096];
    size_t n = make_file(b, "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
    SafeTensors st;
    char err[512];
    assert_int_equal(safetensors_parse(b, n, "x.safetensors", &st, err, sizeof err), 0);   // the base is valid
    safetensors_free(&st);
    expect_refused(b, 5, "fewer than its 8-byte header length");
    expect_refused(b, 30, "its header length 54 runs past the end of the file (30 bytes)");
    uint64_t huge = UINT64_MAX;
    unsigned char c[16];
    memcpy(c, &huge, 8);
    memcpy(c + 8, "{}      ", 8);
    expect_refused(c, 16, "runs past the end");
    struct { const char *header; size_t data; const char *what; } cases[] = {
        { "[1,2]", 0, "does not start with '{'" },
        { "{\"t\":", 0, "not valid JSON" },
        { "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"t\":{\"dtype\":\"F32\",\"shape\":[1],"
          "\"data_offsets\":[4,8]}}", 8, "duplicate" },
        { "{\"t\":{\"dtype\":\"F31\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "unknown dtype" },
        { "{\"t\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "but its shape and dtype F32 need 12" },
        { "{\"t\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "shape[0] is not an integer >= 0" },
        { "{\"t\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8, "shape[0] is not an integer" },
        { "{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8,
          "more elements than the data has bytes" },
        { "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,16]}}", 8, "is not inside the 8 bytes of data" },
        { "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "is not inside" },
        { "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,99999999999999999999]}}", 8, "not valid JSON" },
        { "{\"t\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "exactly the keys dtype, shape and data_offsets" },
        { "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", 8, "exactly the keys" },
        { "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 12, "has 12 bytes, but the tensors end at 8" },
        { "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "bytes 0 to 3 of the data belong to no tensor" },
        { "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"u\":{\"dtype\":\"F32\",\"shape\":[1],"
          "\"data_offsets\":[4,8]}}", 8, "tensor 'u' at data offset 4 overlaps 't', which ends at 8" },
        { "{\"__metadata__\":{\"k\":1},\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
          "__metadata__ value of 'k' is not a string" },
        { "{\"__metadata__\":[],\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "__metadata__ is not an object" },
        { "{\"\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "empty name" },
        { "{\"t\":7}", 0, "tensor 't' is not an object" },
        { "{\"t\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}}", 8, "at most 8 integers" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        n = make_file(b, cases[i].header, cases[i].data);
        expect_refused(b, n, cases[i].what);
    }
    // A NUL byte inside the header is not JSON; a header of spaces after the object is fine.
    n = make_file(b, "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}   ", 8);
    assert_int_equal(safetensors_parse(b, n, "x.safetensors", &st, err, sizeof err), 0);
    safetensors_free(&st);
    b[10] = 0;
    expect_refused(b, n, "not valid JSON");
}

// The count at the limit and one past it, with and without __metadata__ (a unit of the check:
// a header of 2^20 real tensors needs about 900 MB to parse, over ST_MAX_HEADER_MEMORY).
static void test_tensor_count(void **state) {
    assert_true(safetensors_tensor_count_ok(0, 0));
    assert_true(safetensors_tensor_count_ok(ST_MAX_TENSORS, 0));
    assert_false(safetensors_tensor_count_ok((size_t)ST_MAX_TENSORS + 1, 0));
    assert_true(safetensors_tensor_count_ok((size_t)ST_MAX_TENSORS + 1, 1));
    assert_false(safetensors_tensor_count_ok((size_t)ST_MAX_TENSORS + 2, 1));
    // and through the parser: 2^20 + 1 entries that are no tensors are refused by the count first
    const size_t n = (size_t)ST_MAX_TENSORS + 1, cap = 16 * n + 64;
    unsigned char *b = malloc(cap);
    size_t at = 8;
    b[at++] = '{';
    for (size_t i = 0; i < n; i++) at += (size_t)snprintf((char *)b + at, cap - at, "%s\"%zu\":0", i ? "," : "", i);
    b[at++] = '}';
    const uint64_t hl = at - 8;
    memcpy(b, &hl, 8);
    expect_refused(b, at, "1048577 tensors, more than the limit of 1048576");
    free(b);
}

// A header of 100000 tensors needs about 90 MB in the JSON parser: with 40 MB of address space
// left, jansson's malloc fails, which is said as such. Runs first (a heap that earlier tests grew
// and freed stays mapped, and would hold the parse).
static void test_header_out_of_memory(void **state) {
#ifdef __SANITIZE_ADDRESS__
    skip();   // AddressSanitizer reserves terabytes of address space: RLIMIT_AS cannot be set
#endif
    const size_t n = 100000, cap = 80 * n + 64;
    unsigned char *b = malloc(cap);
    size_t at = 8;
    b[at++] = '{';
    for (size_t i = 0; i < n; i++)
        at += (size_t)snprintf((char *)b + at, cap - at, "%s\"t%zu\":{\"dtype\":\"F32\",\"shape\":[0],"
                               "\"data_offsets\":[0,0]}", i ? "," : "", i);
    b[at++] = '}';
    const uint64_t hl = at - 8;
    memcpy(b, &hl, 8);
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    const pid_t pid = fork();
    if (pid == 0) {
        long pages = 0;
        FILE *f = fopen("/proc/self/statm", "r");
        if (!f || fscanf(f, "%ld", &pages) != 1) _exit(3);
        fclose(f);
        const rlim_t limit = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (40u << 20);
        const struct rlimit rl = {limit, limit};
        if (setrlimit(RLIMIT_AS, &rl)) _exit(4);
        SafeTensors st;
        char err[512] = "";
        const int rc = safetensors_parse(b, at, "x.safetensors", &st, err, sizeof err);
        if (write(fd[1], err, strlen(err)) < 0) _exit(5);
        _exit(rc ? 0 : 6);
    }
    close(fd[1]);
    char msg[512] = "";
    ssize_t k = read(fd[0], msg, sizeof msg - 1);
    msg[k > 0 ? k : 0] = 0;
    close(fd[0]);
    int status;
    waitpid(pid, &status, 0);
    free(b);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail_msg("child status %d: '%s'", status, msg);
    if (!strstr(msg, "x.safetensors': out of memory parsing its header of")) fail_msg("message '%s'", msg);
}

// ---------------------------------------------------------------- state_dict
static const uint32_t VOCAB[5] = { '\n', ' ', 'a', 'b', 'c' };
static const GPTShape SHAPE = { 5, 8, 2, 2, 8, 0, 0, 0 };

// A snapshot of SHAPE with random parameters, saved as dir/name.
static Snapshot make_snapshot(const char *name, float *params, size_t n) {
    TestRng r = test_rng(5);
    test_fill(&r, params, (long)n, -1.0f, 1.0f);
    static uint32_t vocab[5];
    memcpy(vocab, VOCAB, sizeof vocab);
    Snapshot s = { .config_yaml = "gpt_config:\n  n_layer: 2\n", .vocab = vocab, .vocab_size = 5, .shape = SHAPE,
                   .num_params = n, .params = params, .loss_scale = 1.0f, .world_size = 1, .iter_num = 7 };
    char path[300], err[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (snapshot_save(path, &s, err, sizeof err)) fail_msg("%s", err);
    return s;
}

static size_t num_params(void) {
    size_t n;
    char err[256];
    assert_int_equal(gpt_shape_check(&SHAPE, &n, err, sizeof err), 0);
    return n;
}

static void test_export_import(void **state) {
    const size_t n = num_params();
    float *p = malloc(n * 4), *got = malloc(n * 4);
    Snapshot s = make_snapshot("e.bin", p, n);
    char path[300], note[512], err[1024];
    for (int d = 0; d < 3; d++) {
        const StDtype dt = d == 0 ? ST_F32 : d == 1 ? ST_BF16 : ST_F16;
        snprintf(path, sizeof path, "%s/e%d.safetensors", dir, d);
        if (state_dict_export(&s, path, dt, err, sizeof err)) fail_msg("%s", err);
        if (state_dict_import(path, &SHAPE, VOCAB, got, note, sizeof note, err, sizeof err)) fail_msg("%s", err);
        assert_string_equal(note, "");
        for (size_t i = 0; i < n; i++) {
            const float want = dt == ST_F32 ? p[i] : dt == ST_BF16 ? st_from_bf16(st_to_bf16(p[i])) : st_from_f16(st_to_f16(p[i]));
            if (memcmp(&got[i], &want, 4) != 0) fail_msg("dtype %d: parameter %zu is %a, want %a", d, i, (double)got[i], (double)want);
        }
    }
    // the file: minGPT's names and shapes, the masks, the metadata
    snprintf(path, sizeof path, "%s/e0.safetensors", dir);
    SafeTensors st;
    if (safetensors_load(path, &st, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(st.n_tensors, 5 + 13 * 2);   // wte, wpe, ln_f (2), lm_head; 12 + the mask per layer
    const StTensor *t = safetensors_find(&st, "transformer.h.1.attn.c_attn.weight");
    assert_true(t && t->ndim == 2 && t->shape[0] == 24 && t->shape[1] == 8);
    t = safetensors_find(&st, "transformer.h.0.ln_1.bias");
    assert_true(t && t->ndim == 1 && t->shape[0] == 8);
    t = safetensors_find(&st, "transformer.h.1.attn.bias");
    assert_true(t && t->ndim == 4 && t->shape[2] == 8 && t->shape[3] == 8);
    assert_true(st_get_float(t, 0) == 1.0f && st_get_float(t, 1) == 0.0f && st_get_float(t, 63) == 1.0f);
    assert_string_equal(safetensors_meta(&st, "vocab"), "[\"\\n\",\" \",\"a\",\"b\",\"c\"]");
    assert_string_equal(safetensors_meta(&st, "n_head"), "2");
    assert_string_equal(safetensors_meta(&st, "iteration"), "7");
    assert_string_equal(safetensors_meta(&st, "config"), s.config_yaml);
    assert_string_equal(safetensors_meta(&st, "format"), "pt");
    safetensors_free(&st);
    // block_size over 4096: the masks (block_size^2 floats per layer) are left out; import is the same
    GPTShape wide = SHAPE;
    wide.block_size = 4097;
    size_t nw;
    assert_int_equal(gpt_shape_check(&wide, &nw, err, sizeof err), 0);
    float *pw = calloc(nw, 4), *gw = malloc(nw * 4);
    Snapshot sw = s;
    sw.shape = wide;
    sw.num_params = nw;
    sw.params = pw;
    pw[nw - 1] = 0.25f;
    snprintf(path, sizeof path, "%s/wide.safetensors", dir);
    if (state_dict_export(&sw, path, ST_F32, err, sizeof err)) fail_msg("%s", err);
    if (safetensors_load(path, &st, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(st.n_tensors, 5 + 12 * 2);
    assert_null(safetensors_find(&st, "transformer.h.0.attn.bias"));
    safetensors_free(&st);
    if (state_dict_import(path, &wide, VOCAB, gw, note, sizeof note, err, sizeof err)) fail_msg("%s", err);
    assert_memory_equal(gw, pw, nw * 4);
    free(pw);
    free(gw);
    // a mingpt snapshot as init_from: its parameters as they are
    snprintf(path, sizeof path, "%s/e.bin", dir);
    if (state_dict_import(path, &SHAPE, VOCAB, got, note, sizeof note, err, sizeof err)) fail_msg("%s", err);
    assert_memory_equal(got, p, n * 4);
    free(p);
    free(got);
}

// The exported file with tensor `drop` left out, `reshape` given another shape, `meta`'s value
// replaced, or `extra` added: rewritten through the writer from the parsed original.
typedef struct { const char *drop, *reshape, *meta_key, *meta_value, *extra; float poison; } Edit;

static void write_edited(const char *src, const char *dst, Edit e) {
    SafeTensors st;
    char err[512];
    if (safetensors_load(src, &st, err, sizeof err)) fail_msg("%s", err);
    StWrite *w = calloc((size_t)st.n_tensors + 1, sizeof *w);
    float **bufs = calloc((size_t)st.n_tensors + 1, sizeof *bufs);
    int k = 0;
    for (int i = 0; i < st.n_tensors; i++) {
        const StTensor *t = &st.tensors[i];
        if (e.drop && !strcmp(t->name, e.drop)) continue;
        bufs[k] = malloc(t->numel * 4 + 4);
        for (uint64_t j = 0; j < t->numel; j++) bufs[k][j] = st_get_float(t, j);
        if (e.poison != 0 && !strcmp(t->name, "lm_head.weight")) bufs[k][1] = e.poison;
        w[k] = (StWrite){ .name = t->name, .ndim = t->ndim, .data = bufs[k] };
        memcpy(w[k].shape, t->shape, sizeof t->shape);
        if (e.reshape && !strcmp(t->name, e.reshape)) { w[k].ndim = 2; w[k].shape[0] = 1; w[k].shape[1] = (int64_t)t->numel; }
        k++;
    }
    float zero = 0;
    if (e.extra) w[k++] = (StWrite){ .name = e.extra, .ndim = 1, .shape = { 1 }, .data = &zero };
    const char *mk[16], *mv[16];
    for (int i = 0; i < st.n_meta; i++) {
        mk[i] = st.meta_keys[i];
        mv[i] = e.meta_key && !strcmp(mk[i], e.meta_key) ? e.meta_value : st.meta_values[i];
    }
    int n_meta = st.n_meta;
    if (e.meta_key && e.meta_value == NULL)   // drop the key
        for (int i = 0; i < n_meta; i++)
            if (!strcmp(mk[i], e.meta_key)) { mk[i] = mk[n_meta - 1]; mv[i] = mv[--n_meta]; }
    if (safetensors_write(dst, w, k, ST_F32, mk, mv, n_meta, err, sizeof err)) fail_msg("%s", err);
    for (int i = 0; i < k; i++) if (bufs[i]) free(bufs[i]);
    free(bufs);
    free(w);
    safetensors_free(&st);
}

static void expect_import(const char *file, int code, const char *what) {
    const size_t n = num_params();
    float *got = malloc(n * 4);
    char note[512], err[1024];
    const int rc = state_dict_import(file, &SHAPE, VOCAB, got, note, sizeof note, err, sizeof err);
    free(got);
    if (rc != code) fail_msg("%s: exit %d, want %d (%s)", what, rc, code, err);
    if (!strstr(rc ? err : note, what)) fail_msg("message '%s' lacks '%s'", rc ? err : note, what);
}

static void test_import_mismatches(void **state) {
    const size_t n = num_params();
    float *p = malloc(n * 4);
    Snapshot s = make_snapshot("m.bin", p, n);
    char src[300], dst[300], err[512];
    snprintf(src, sizeof src, "%s/m.safetensors", dir);
    snprintf(dst, sizeof dst, "%s/edited.safetensors", dir);
    if (state_dict_export(&s, src, ST_F32, err, sizeof err)) fail_msg("%s", err);
    struct { Edit e; int code; const char *what; } cases[] = {
        { { .drop = "transformer.h.1.mlp.c_fc.bias" }, 2, "has no tensor 'transformer.h.1.mlp.c_fc.bias' (32,)" },
        { { .reshape = "transformer.wpe.weight" }, 2, "tensor 'transformer.wpe.weight' of" },
        { { .reshape = "transformer.wpe.weight" }, 2, "has the shape (1, 64); this model needs (8, 8)" },
        { { .meta_key = "vocab", .meta_value = "[\"\\n\",\" \",\"a\",\"b\",\"d\"]" }, 2,
          "differs from the data's at token 4: U+0064 in the file, U+0063 in the data" },
        { { .meta_key = "vocab", .meta_value = "[\"\\n\",\" \",\"a\",\"b\"]" }, 2, "has 4 characters, the data's 5" },
        { { .meta_key = "vocab", .meta_value = "[\"ab\"]" }, 2, "vocab entry 0 is not one character" },
        { { .meta_key = "n_head", .meta_value = "4" }, 2, "edited.safetensors' has n_head 4 but the config has n_head 2" },
        { { .meta_key = "n_head", .meta_value = "four" }, 2, "was trained with n_head four (its metadata), but gpt_config.n_head is 2" },
        // without the metadata, the sizes its tensors show: a third block
        { { .meta_key = "n_layer", .meta_value = NULL, .extra = "transformer.h.2.ln_1.weight" }, 2,
          "has n_layer 3 but the config has n_layer 2" },
        // a shape that differs is named before the vocabulary (which then differs too)
        { { .meta_key = "vocab_size", .meta_value = "7" }, 2, "has vocab_size 7 but the config has vocab_size 5" },
        { { .extra = "transformer.h.2.ln_1.weight" }, 2, "holds a tensor 'transformer.h.2.ln_1.weight' that this model does not have" },
        { { .drop = "transformer.h.0.attn.bias", .extra = "transformer.h.0.attn.bias" }, 2,
          "has the shape (1,); this model's causal mask is (1, 1, 8, 8)" },
        { { .poison = NAN }, 1, "tensor 'lm_head.weight' of" },
        { { .meta_key = "vocab", .meta_value = NULL }, 0, "gives no vocabulary" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_edited(src, dst, cases[i].e);
        expect_import(dst, cases[i].code, cases[i].what);
    }
    // A mask that is not causal (all ones: the tutorial's non-causal attention) is refused.
    SafeTensors st;
    if (safetensors_load(src, &st, err, sizeof err)) fail_msg("%s", err);
    const StTensor *m = safetensors_find(&st, "transformer.h.0.attn.bias");
    const size_t at = (size_t)(m->data - st.owned) + 4;   // element [0, 1]
    const float one = 1.0f;
    memcpy(st.owned + at, &one, 4);
    FILE *f = fopen(dst, "wb");
    struct stat sb;
    stat(src, &sb);
    fwrite(st.owned, 1, (size_t)sb.st_size, f);
    fclose(f);
    safetensors_free(&st);
    expect_import(dst, 2, "is not minGPT's causal mask (element [0, 1])");
    // Not there; truncated; a snapshot of another shape.
    snprintf(dst, sizeof dst, "%s/absent.safetensors", dir);
    expect_import(dst, 2, "cannot open");
    assert_int_equal(truncate(src, 100), 0);
    expect_import(src, 1, "runs past the end of the file (100 bytes)");
    GPTShape other = SHAPE;
    other.n_embd = 4;
    other.n_head = 1;
    s.shape = other;
    gpt_shape_check(&other, &s.num_params, err, sizeof err);
    snprintf(dst, sizeof dst, "%s/other.bin", dir);
    if (snapshot_save(dst, &s, err, sizeof err)) fail_msg("%s", err);
    expect_import(dst, 2, "other.bin' has n_head 1, n_embd 4 but the config has n_head 2, n_embd 8");
    free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        // first: the child's address space then holds no free heap that earlier tests left
        cmocka_unit_test(test_header_out_of_memory),
        cmocka_unit_test(test_rounding),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_tensor_count),
        cmocka_unit_test(test_export_import),
        cmocka_unit_test(test_import_mismatches),
    };
    return cmocka_run_group_tests_name("safetensors", tests, setup, teardown);
}
