// tests/test_data.c — CharDataset, train/test splits, MT19937/randperm and
// DistributedSampler, checked against PyTorch fixtures (tests/fixtures/sampler_torch.txt,
// from tests/gen_sampler_fixture.py) and against properties that must hold for any input.
// Run from the repository root (the Makefile does).
#include "tests/test_util.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <zlib.h>

#include "data/char_dataset.h"
#include "data/sampler.h"

#define FIXTURE "tests/fixtures/sampler_torch.txt"

// ---------------------------------------------------------------- helpers
typedef struct { char dir[64]; } Ctx;  // per-run temp dir for written test files

static int group_setup(void **state) {
    Ctx *c = calloc(1, sizeof *c);
    if (!c) return -1;
    if (test_tmpdir(c->dir, sizeof c->dir, "test_data") != 0) { free(c); return -1; }
    *state = c;
    return 0;
}

static int group_teardown(void **state) {
    Ctx *c = *state;
    test_rmtree(c->dir);
    free(c);
    return 0;
}

static const char *tpath(void **state, const char *name, char *buf, size_t len) {
    Ctx *c = *state;
    snprintf(buf, len, "%s/%s", c->dir, name);
    return buf;
}

static void write_bytes(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (len) assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static void write_gz(const char *path, const void *data, size_t len) {
    gzFile f = gzopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(gzwrite(f, data, (unsigned)len), (int)len);
    assert_int_equal(gzclose(f), Z_OK);
}

// Loads `text` written to a temp file; fails the test on error.
static void load_text(void **state, const char *name, const char *text, double truncate, int T,
                      CharDataset *ds) {
    char p[256], err[512] = "";
    tpath(state, name, p, sizeof p);
    write_bytes(p, text, strlen(text));
    int rc = chardataset_load(ds, p, truncate, T, err, sizeof err);
    if (rc != 0) fail_msg("chardataset_load(%s): %s", p, err);
}

// Parses "v0 v1 ..." into out (cap entries); returns the count.
static long parse_list(const char *s, long *out, long cap) {
    long n = 0;
    char *end;
    for (;;) {
        long v = strtol(s, &end, 10);
        if (end == s) break;
        if (n >= cap) fail_msg("fixture list longer than %ld", cap);
        out[n++] = v;
        s = end;
    }
    return n;
}

static FILE *open_fixture(void) {
    FILE *f = fopen(FIXTURE, "r");
    if (!f) fail_msg("cannot open %s (run from the repo root; regenerate with "
                     "/usr/bin/python3 tests/gen_sampler_fixture.py)", FIXTURE);
    return f;
}

static void assert_longs_equal(const long *got, const long *want, long n, const char *what) {
    for (long i = 0; i < n; i++)
        if (got[i] != want[i]) fail_msg("%s: entry %ld is %ld, torch gives %ld", what, i, got[i], want[i]);
}

static bool is_permutation(const long *p, long n) {
    char *seen = calloc((size_t)n + 1, 1);
    bool ok = true;
    for (long i = 0; i < n && ok; i++) {
        if (p[i] < 0 || p[i] >= n || seen[p[i]]) ok = false;
        else seen[p[i]] = 1;
    }
    free(seen);
    return ok;
}

// ---------------------------------------------------------------- MT19937 / randperm
static void test_mt19937_reference_values(void **state) {
    // Published values of the reference mt19937ar / C++ std::mt19937 with seed 5489.
    MT19937 g;
    mt19937_seed(&g, 5489u);
    assert_int_equal(mt19937_next(&g), 3499211612u);
    for (int i = 2; i < 10000; i++) mt19937_next(&g);
    assert_int_equal(mt19937_next(&g), 4123659995u);
}

static void test_randperm_matches_torch(void **state) {
    FILE *f = open_fixture();
    char *line = NULL;
    size_t cap = 0;
    int cases = 0;
    long *want = malloc(2000 * sizeof *want);
    while (getline(&line, &cap, f) > 0) {
        long n, head = -1;
        unsigned long long seed, checksum = 0;
        int used = 0;
        if (sscanf(line, "randperm n=%ld seed=%llu head=%ld checksum=%llu:%n", &n, &seed, &head, &checksum, &used) == 4 && used) {
        } else if (head = -1, used = 0, sscanf(line, "randperm n=%ld seed=%llu:%n", &n, &seed, &used) == 2 && used) {
        } else {
            continue;
        }
        long nw = parse_list(line + used, want, 2000);
        long *got = malloc((size_t)n * sizeof *got);
        assert_int_equal(torch_randperm(n, (uint64_t)seed, got), 0);
        char what[96];
        snprintf(what, sizeof what, "randperm n=%ld seed=%llu", n, seed);
        if (head < 0) {
            assert_int_equal(nw, n);
            assert_longs_equal(got, want, n, what);
        } else {
            assert_int_equal(nw, head);
            assert_longs_equal(got, want, head, what);
            const uint64_t M = 1ull << 61;  // sum_i i*perm[i] mod 2^61 over all n entries
            uint64_t cs = 0;
            for (long i = 0; i < n; i++) cs = (cs + ((uint64_t)i * (uint64_t)got[i]) % M) % M;
            if (cs != checksum) fail_msg("%s: checksum %llu, torch gives %llu", what, (unsigned long long)cs, checksum);
        }
        assert_true(is_permutation(got, n));
        free(got);
        cases++;
    }
    free(line);
    free(want);
    fclose(f);
    assert_int_equal(cases, 24);  // 6 sizes x 4 seeds
}

static void test_randperm_properties(void **state) {
    TestRng r = test_rng(7);
    long buf[600], buf2[600];
    for (int t = 0; t < 50; t++) {
        long n = (long)(test_next(&r) % 600);
        uint64_t seed = test_next(&r);
        assert_int_equal(torch_randperm(n, seed, buf), 0);
        assert_true(is_permutation(buf, n));
        // Only the low 32 bits of the seed reach the generator (at::mt19937's init).
        assert_int_equal(torch_randperm(n, seed & 0xffffffffu, buf2), 0);
        assert_memory_equal(buf, buf2, (size_t)n * sizeof *buf);
    }
    assert_int_equal(torch_randperm(0, 0, buf), 0);
    // Beyond torch's small-n branch (n >= UINT32_MAX/20) we refuse instead of differing.
    assert_int_equal(torch_randperm(214748364L, 0, buf), -1);
    assert_int_equal(torch_randperm(-1, 0, buf), -1);
    // Different seeds give different orders (for a large enough n).
    assert_int_equal(torch_randperm(500, 1, buf), 0);
    assert_int_equal(torch_randperm(500, 2, buf2), 0);
    assert_memory_not_equal(buf, buf2, 500 * sizeof *buf);
}

// ---------------------------------------------------------------- DistributedSampler
static void test_sampler_matches_torch(void **state) {
    FILE *f = open_fixture();
    char *line = NULL;
    size_t cap = 0;
    int cases = 0;
    long want[200], got[200], scratch[200];
    while (getline(&line, &cap, f) > 0) {
        long n, epoch;
        int world, rank, shuffle, drop_last, used = 0;
        unsigned long long seed;
        if (sscanf(line, "sampler n=%ld world=%d rank=%d epoch=%ld shuffle=%d drop_last=%d seed=%llu:%n",
                   &n, &world, &rank, &epoch, &shuffle, &drop_last, &seed, &used) != 7 || !used)
            continue;
        long nw = parse_list(line + used, want, 200);
        DistributedSampler s;
        dsampler_init(&s, n, world, rank, shuffle, (uint64_t)seed, drop_last);
        dsampler_set_epoch(&s, epoch);
        assert_in_range(s.total_size, 0, 200);
        long k = dsampler_indices(&s, got, scratch);
        char what[160];
        snprintf(what, sizeof what, "sampler n=%ld world=%d rank=%d epoch=%ld shuffle=%d drop_last=%d seed=%llu",
                 n, world, rank, epoch, shuffle, drop_last, seed);
        if (k != nw) fail_msg("%s: %ld indices, torch gives %ld", what, k, nw);
        assert_int_equal(s.num_samples, nw);
        assert_longs_equal(got, want, nw, what);
        cases++;
    }
    free(line);
    fclose(f);
    // (N, W) in (10,3) (100,3) (2,3) (1,3) (2,5); x 2 seeds x shuffle x drop_last x 2 epochs x W ranks
    assert_int_equal(cases, 4 * 16 * 3 + 16 * 5);
}

static void test_sampler_properties(void **state) {
    long out[64], scratch[64];
    for (long n = 0; n <= 40; n++)
        for (int W = 1; W <= 6; W++)
            for (int flags = 0; flags < 4; flags++) {
                bool shuffle = flags & 1, drop_last = flags & 2;
                for (long epoch = 0; epoch < 3; epoch++) {
                    // num_samples as torch computes it: math.ceil on floats.
                    long ns = (drop_last && n % W) ? (long)ceil((double)(n - W) / W) : (long)ceil((double)n / W);
                    int count[64] = {0};
                    long got_total = 0;
                    for (int rank = 0; rank < W; rank++) {
                        DistributedSampler s;
                        dsampler_init(&s, n, W, rank, shuffle, 42, drop_last);
                        dsampler_set_epoch(&s, epoch);
                        assert_int_equal(s.num_samples, ns);
                        assert_int_equal(s.total_size, ns * W);
                        long k = dsampler_indices(&s, out, scratch);
                        assert_int_equal(k, ns);  // every rank gets the same count
                        for (long j = 0; j < k; j++) {
                            assert_in_range(out[j], 0, n - 1);
                            count[out[j]]++;
                        }
                        got_total += k;
                    }
                    assert_int_equal(got_total, ns * W);
                    if (!drop_last) {
                        // Every index is seen; padding repeats exactly total_size - N of them.
                        long dups = 0;
                        for (long i = 0; i < n; i++) {
                            assert_true(count[i] >= 1);
                            dups += count[i] - 1;
                        }
                        assert_int_equal(dups, ns * W - n);
                        assert_true(ns * W - n < W || n == 0 || n < W);
                    } else {
                        // Nothing repeats; fewer than W indices are dropped.
                        long seen = 0;
                        for (long i = 0; i < n; i++) {
                            assert_true(count[i] <= 1);
                            seen += count[i];
                        }
                        assert_int_equal(seen, ns * W);
                        assert_true(n - seen < W);
                    }
                }
            }
    // Reference table (mingpt_reference.md section 3): N_train = 50,076, N_test = 5,565.
    const int worlds[] = {1, 2, 4, 8, 16};
    const long train_ns[] = {50076, 25038, 12519, 6260, 3130}, test_ns[] = {5565, 2783, 1392, 696, 348};
    for (int i = 0; i < 5; i++) {
        DistributedSampler s;
        dsampler_init(&s, 50076, worlds[i], 0, true, 0, false);
        assert_int_equal(s.num_samples, train_ns[i]);
        dsampler_init(&s, 5565, worlds[i], 0, true, 0, false);
        assert_int_equal(s.num_samples, test_ns[i]);
    }
    // The order changes with the epoch when shuffling and not otherwise.
    long a[50], b[50], sc[100];
    DistributedSampler s;
    dsampler_init(&s, 100, 2, 1, true, 0, false);
    dsampler_indices(&s, a, sc);
    dsampler_set_epoch(&s, 1);
    dsampler_indices(&s, b, sc);
    assert_memory_not_equal(a, b, sizeof a);
    dsampler_init(&s, 100, 2, 1, false, 0, false);
    dsampler_set_epoch(&s, 5);
    dsampler_indices(&s, a, sc);
    for (long j = 0; j < 50; j++) assert_int_equal(a[j], 1 + 2 * j);
    // Invalid rank is refused.
    dsampler_init(&s, 10, 2, 2, true, 0, false);
    assert_int_equal(dsampler_indices(&s, a, sc), -1);
}

// ---------------------------------------------------------------- random_split
static void test_random_split_matches_torch(void **state) {
    // 50 windows: n = 50 + T characters.
    const int T = 4;
    char text[64];
    for (int i = 0; i < 50 + T; i++) text[i] = (char)('a' + i % 26);
    text[50 + T] = '\0';
    CharDataset ds;
    load_text(state, "split50.txt", text, 1.0, T, &ds);
    assert_int_equal(chardataset_len(&ds), 50);
    DataSplit sp;
    char err[256];
    assert_int_equal(datasplit_make(&sp, &ds, "random", 0.9, 1337, err, sizeof err), 0);

    FILE *f = open_fixture();
    char *line = NULL;
    size_t cap = 0;
    int found = 0;
    long want[64];
    while (getline(&line, &cap, f) > 0) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "random_split n=50 train_len=45 seed=1337 train:", 47) == 0) {
            long nw = parse_list(colon + 1, want, 64);
            assert_int_equal(sp.n_train, nw);
            assert_longs_equal(sp.train, want, nw, "random_split train");
            found++;
        } else if (strncmp(line, "random_split n=50 train_len=45 seed=1337 test:", 46) == 0) {
            long nw = parse_list(colon + 1, want, 64);
            assert_int_equal(sp.n_test, nw);
            assert_longs_equal(sp.test, want, nw, "random_split test");
            found++;
        }
    }
    free(line);
    fclose(f);
    assert_int_equal(found, 2);
    datasplit_free(&sp);
    chardataset_free(&ds);
}

static void test_random_split_properties(void **state) {
    char text[400];
    TestRng r = test_rng(3);
    for (int i = 0; i < 399; i++) text[i] = (char)('a' + test_next(&r) % 20);
    text[399] = '\0';
    CharDataset ds;
    load_text(state, "split_rand.txt", text, 1.0, 16, &ds);
    long N = chardataset_len(&ds);
    assert_int_equal(N, 399 - 16);
    char err[256];
    const double splits[] = {0.9, 0.5, 0.1, 0.999};
    for (int k = 0; k < 4; k++) {
        DataSplit a, b, c;
        assert_int_equal(datasplit_make(&a, &ds, "random", splits[k], 1337, err, sizeof err), 0);
        assert_int_equal(datasplit_make(&b, &ds, "random", splits[k], 1337, err, sizeof err), 0);
        assert_int_equal(datasplit_make(&c, &ds, "random", splits[k], 1338, err, sizeof err), 0);
        assert_int_equal(a.n_train, (long)(N * splits[k]));
        assert_int_equal(a.n_train + a.n_test, N);
        // Deterministic in the seed; another seed gives another split.
        assert_memory_equal(a.train, b.train, (size_t)a.n_train * sizeof(long));
        assert_memory_equal(a.test, b.test, (size_t)a.n_test * sizeof(long));
        assert_memory_not_equal(a.train, c.train, (size_t)a.n_train * sizeof(long));
        // train ++ test is a permutation of the windows: disjoint and complete.
        long *all = malloc((size_t)N * sizeof *all);
        memcpy(all, a.train, (size_t)a.n_train * sizeof *all);
        memcpy(all + a.n_train, a.test, (size_t)a.n_test * sizeof *all);
        assert_true(is_permutation(all, N));
        free(all);
        datasplit_free(&a); datasplit_free(&b); datasplit_free(&c);
    }
    // Either side empty is an error: N = 383, 0.001 -> 0 train windows.
    DataSplit s;
    assert_int_not_equal(datasplit_make(&s, &ds, "random", 0.001, 0, err, sizeof err), 0);
    assert_non_null(strstr(err, "train_split"));
    assert_int_not_equal(datasplit_make(&s, &ds, "random", 1.0, 0, err, sizeof err), 0);
    assert_non_null(strstr(err, "train_split"));
    assert_int_not_equal(datasplit_make(&s, &ds, "bogus", 0.9, 0, err, sizeof err), 0);
    assert_non_null(strstr(err, "bogus"));
    chardataset_free(&ds);
}

static void test_contiguous_split(void **state) {
    char text[101];
    for (int i = 0; i < 100; i++) text[i] = (char)('a' + (i * 7) % 26);
    text[100] = '\0';
    CharDataset ds;
    load_text(state, "contig.txt", text, 1.0, 8, &ds);
    DataSplit s;
    char err[256];
    assert_int_equal(datasplit_make(&s, &ds, "contiguous", 0.9, 0, err, sizeof err), 0);
    const long n_tr = 90, T = 8;
    assert_int_equal(s.n_train, n_tr - T);        // 82
    assert_int_equal(s.n_test, 100 - T - n_tr);   // 2
    for (long i = 0; i < s.n_train; i++) {
        assert_int_equal(s.train[i], i);
        assert_true(s.train[i] + T < n_tr);       // last char read (y's end) is inside train text
    }
    for (long i = 0; i < s.n_test; i++) {
        assert_int_equal(s.test[i], n_tr + i);
        assert_true(s.test[i] >= n_tr);
        assert_true(s.test[i] + T <= ds.n - 1);
    }
    // The windows next to the boundary: the last train window ends at n_tr-1.
    assert_int_equal(s.train[s.n_train - 1] + T, n_tr - 1);
    datasplit_free(&s);
    // Too few test characters (10 <= T) and too few train characters: errors naming both knobs.
    chardataset_free(&ds);
    load_text(state, "contig2.txt", text, 1.0, 10, &ds);
    assert_int_not_equal(datasplit_make(&s, &ds, "contiguous", 0.9, 0, err, sizeof err), 0);
    assert_non_null(strstr(err, "train_split"));
    assert_non_null(strstr(err, "block_size"));
    assert_null(s.train);
    assert_int_not_equal(datasplit_make(&s, &ds, "contiguous", 0.05, 0, err, sizeof err), 0);
    assert_non_null(strstr(err, "train_split"));
    assert_non_null(strstr(err, "block_size"));
    assert_int_equal(datasplit_make(&s, &ds, "contiguous", 0.5, 0, err, sizeof err), 0);
    assert_int_equal(s.n_train, 40);
    assert_int_equal(s.n_test, 40);
    datasplit_free(&s);
    chardataset_free(&ds);
}

// ---------------------------------------------------------------- CharDataset
static void test_multibyte_vocab_roundtrip(void **state) {
    const char *text = "h\xC3\xA9llo w\xC3\xB6rld \xE2\x9C\x93 \xF0\x9F\x98\x80";  // "héllo wörld ✓ 😀"
    CharDataset ds;
    load_text(state, "utf8.txt", text, 1.0, 2, &ds);
    assert_int_equal(ds.n, 15);  // code points, not bytes (21)
    const uint32_t want[] = {' ', 'd', 'h', 'l', 'o', 'r', 'w', 0xE9, 0xF6, 0x2713, 0x1F600};
    assert_int_equal(ds.vocab_size, 11);
    for (int i = 0; i < 11; i++) assert_int_equal(ds.itos[i], want[i]);
    for (int i = 1; i < ds.vocab_size; i++) assert_true(ds.itos[i - 1] < ds.itos[i]);
    for (int i = 0; i < ds.vocab_size; i++) assert_int_equal(chardataset_stoi(&ds, ds.itos[i]), i);
    assert_int_equal(chardataset_stoi(&ds, 'z'), -1);
    assert_int_equal(chardataset_stoi(&ds, 0x10FFFF), -1);
    // The loaded ids decode back to the file's bytes.
    char buf[64];
    int len = 0;
    for (long i = 0; i < ds.n; i++) len += chardataset_decode_one(&ds, ds.ids[i], buf + len);
    buf[len] = '\0';
    assert_string_equal(buf, text);
    // encode == the loaded ids; decode(encode(x)) == x.
    int32_t ids[64];
    char err[256];
    assert_int_equal(chardataset_encode(&ds, text, ids, err, sizeof err), ds.n);
    assert_memory_equal(ids, ds.ids, (size_t)ds.n * sizeof *ids);
    const char *other = "\xF0\x9F\x98\x80w\xC3\xB6\xC3\xB6" "d \xE2\x9C\x93";
    long k = chardataset_encode(&ds, other, ids, err, sizeof err);
    assert_int_equal(k, 7);
    len = 0;
    for (long i = 0; i < k; i++) len += chardataset_decode_one(&ds, ids[i], buf + len);
    buf[len] = '\0';
    assert_string_equal(buf, other);
    assert_int_equal(chardataset_decode_one(&ds, ds.vocab_size, buf), 0);
    assert_int_equal(chardataset_decode_one(&ds, -1, buf), 0);
    assert_int_equal(chardataset_encode(&ds, "", ids, err, sizeof err), 0);
    chardataset_free(&ds);
}

static void test_truncate_counts_characters(void **state) {
    // 10 characters in 22 bytes: truncation by bytes would keep a different prefix.
    const char *text = "a\xC3\xA9\xE2\x9C\x93\xF0\x9F\x98\x80" "a\xC3\xA9\xE2\x9C\x93\xF0\x9F\x98\x80" "xy";
    CharDataset ds;
    load_text(state, "trunc.txt", text, 0.5, 1, &ds);
    assert_int_equal(ds.n, 5);                     // int(10 * 0.5)
    assert_int_equal(ds.vocab_size, 4);            // a é ✓ 😀: x, y were cut off
    assert_int_equal(ds.itos[3], 0x1F600);
    assert_int_equal(chardataset_stoi(&ds, 'x'), -1);
    assert_int_equal(ds.ids[4], chardataset_stoi(&ds, 'a'));
    chardataset_free(&ds);
    load_text(state, "trunc2.txt", text, 0.35, 1, &ds);
    assert_int_equal(ds.n, 3);                     // int(10 * 0.35) = int(3.5)
    chardataset_free(&ds);
    load_text(state, "trunc3.txt", text, 1.0, 1, &ds);
    assert_int_equal(ds.n, 10);
    assert_int_equal(ds.vocab_size, 6);
    chardataset_free(&ds);
}

static void test_windows_shift_by_one(void **state) {
    char text[300];
    TestRng r = test_rng(11);
    for (int i = 0; i < 299; i++) text[i] = (char)(' ' + test_next(&r) % 90);
    text[299] = '\0';
    const int T = 32;
    CharDataset ds;
    load_text(state, "win.txt", text, 1.0, T, &ds);
    assert_int_equal(ds.block_size, T);
    assert_int_equal(chardataset_len(&ds), ds.n - T);
    assert_int_equal(chardataset_len(&ds), 299 - T);
    int32_t x[32], y[32];
    long starts[] = {0, 1, 100, chardataset_len(&ds) - 1};
    for (int k = 0; k < 4; k++) {
        long i = starts[k];
        chardataset_window(&ds, i, x, y);
        for (int t = 0; t < T; t++) {
            assert_int_equal(x[t], ds.ids[i + t]);
            assert_int_equal(y[t], ds.ids[i + t + 1]);
            assert_int_equal(ds.itos[x[t]], (unsigned char)text[i + t]);
            if (t + 1 < T) assert_int_equal(y[t], x[t + 1]);
        }
    }
    // The last window's target ends on the last character.
    chardataset_window(&ds, chardataset_len(&ds) - 1, x, y);
    assert_int_equal(y[T - 1], ds.ids[ds.n - 1]);
    chardataset_free(&ds);
}

static void test_gz_matches_plain(void **state) {
    // ~300 KB of mixed 1..4-byte characters so gzread and fread both loop several times.
    size_t cap = 320000, len = 0;
    char *text = malloc(cap + 8);
    const char *pieces[] = {"a", "b", " ", "\n", "\xC3\xA9", "\xE2\x9C\x93", "\xF0\x9F\x98\x80", "Z"};
    TestRng r = test_rng(5);
    while (len < cap) {
        const char *p = pieces[test_next(&r) % 8];
        memcpy(text + len, p, strlen(p));
        len += strlen(p);
    }
    text[len] = '\0';
    char pp[256], pg[256], err[512];
    tpath(state, "big.txt", pp, sizeof pp);
    tpath(state, "big.txt.gz", pg, sizeof pg);
    write_bytes(pp, text, len);
    write_gz(pg, text, len);
    CharDataset a, b;
    assert_int_equal(chardataset_load(&a, pp, 0.9, 64, err, sizeof err), 0);
    if (chardataset_load(&b, pg, 0.9, 64, err, sizeof err) != 0) fail_msg("%s", err);
    assert_true(a.n > 100000);
    assert_int_equal(a.n, b.n);
    assert_int_equal(a.vocab_size, 8);
    assert_int_equal(a.vocab_size, b.vocab_size);
    assert_memory_equal(a.itos, b.itos, (size_t)a.vocab_size * sizeof *a.itos);
    assert_memory_equal(a.ids, b.ids, (size_t)a.n * sizeof *a.ids);
    chardataset_free(&a);
    chardataset_free(&b);

    // A gzip stream cut short is an error, not a silently shorter text.
    FILE *f = fopen(pg, "rb");
    assert_non_null(f);
    unsigned char *gz = malloc(1 << 20);
    size_t glen = fread(gz, 1, 1 << 20, f);
    fclose(f);
    char pt[256];
    tpath(state, "cut.txt.gz", pt, sizeof pt);
    write_bytes(pt, gz, glen / 2);
    err[0] = '\0';
    assert_int_not_equal(chardataset_load(&b, pt, 1.0, 8, err, sizeof err), 0);
    assert_non_null(strstr(err, pt));
    free(gz);
    free(text);
}

static void expect_load_error(const char *path, double truncate, int T, const char *needle) {
    CharDataset ds;
    char err[512] = "";
    int rc = chardataset_load(&ds, path, truncate, T, err, sizeof err);
    if (rc == 0) fail_msg("chardataset_load(%s) succeeded; expected an error with '%s'", path, needle);
    if (!strstr(err, path)) fail_msg("error does not name the path %s: %s", path, err);
    if (needle && !strstr(err, needle)) fail_msg("error lacks '%s': %s", needle, err);
    assert_null(ds.ids);
    assert_null(ds.itos);
    chardataset_free(&ds);  // safe on a failed load
}

static void test_load_errors(void **state) {
    char p[256], q[256], msg[512];
    tpath(state, "does_not_exist.txt", p, sizeof p);
    expect_load_error(p, 1.0, 4, "No such file or directory");
    snprintf(msg, sizeof msg, "cannot open '%s': No such file or directory", p);
    expect_load_error(p, 1.0, 4, msg);
    {   // a file that cannot be read is told apart from bad text, so that the caller names its key
        CharDataset ds;
        char err[512];
        assert_int_equal(chardataset_load(&ds, p, 1.0, 4, err, sizeof err), CHARDATASET_UNREADABLE);
    }
    tpath(state, "does_not_exist.txt.gz", p, sizeof p);
    expect_load_error(p, 1.0, 4, "No such file or directory");

    tpath(state, "empty.txt", p, sizeof p);
    write_bytes(p, "", 0);
    expect_load_error(p, 1.0, 1, "empty");
    tpath(state, "empty.txt.gz", p, sizeof p);
    write_gz(p, "", 0);
    expect_load_error(p, 1.0, 1, "empty");

    // Every class of ill-formed UTF-8 (Unicode Table 3-7), with the offset of the sequence it
    // starts at and its line; the same through a .gz file and through the in-memory path.
    static const struct { const char *bytes; size_t len; long off, line; const char *why; } bad[] = {
#define B(s) s, sizeof s - 1
        {B("ab\xC0\x80"), 2, 1, "overlong"},                   // 2-byte overlong NUL
        {B("ab\xC1\xBF"), 2, 1, "overlong"},                   // C1: overlong U+007F
        {B("abc\xE0\x80\x80"), 3, 1, "overlong"},              // 3-byte overlong
        {B("abc\xE0\x9F\xBF"), 3, 1, "overlong"},              // largest 3-byte overlong (U+07FF)
        {B("\xF0\x80\x80\x80"), 0, 1, "overlong"},             // 4-byte overlong
        {B("\n\xF0\x8F\xBF\xBF"), 1, 2, "overlong"},          // largest 4-byte overlong (U+FFFF)
        {B("x\xED\xA0\x80y"), 1, 1, "surrogate"},              // U+D800
        {B("x\n\n\xED\xBF\xBF"), 3, 3, "surrogate"},          // U+DFFF
        {B("x\xF4\x90\x80\x80"), 1, 1, "U+10FFFF"},            // U+110000
        {B("x\xF7\xBF\xBF\xBF"), 1, 1, "invalid start"},       // would be U+1FFFFF
        {B("xy\xF5\x80\x80\x80"), 2, 1, "invalid start"},      // F5..FF never start a sequence
        {B("ab\xF8\x88\x80\x80\x80"), 2, 1, "invalid start"}, // old 5-byte form
        {B("\xFE"), 0, 1, "invalid start"},
        {B("\xFF"), 0, 1, "invalid start"},
        {B("hello \xE2\x9C"), 6, 1, "truncated"},               // sequence cut by end of file
        {B("a\n\xF0\x9F\x98"), 2, 2, "truncated"},             // 4-byte sequence cut by end of file
        {B("\xC3"), 0, 1, "truncated"},
        {B("a\xE2\x41" "b"), 1, 1, "truncated"},                // continuation byte missing mid-text
        {B("a\xF0\x9F\x98" "b"), 1, 1, "truncated"},
        {B("a\x80"), 1, 1, "continuation"},                     // lone continuation byte
        {B("\xC3\xA9\xA9"), 2, 1, "continuation"},             // one continuation too many
        {B("\xBF\x80"), 0, 1, "continuation"},
        {B("ok\0\0\n\x80"), 5, 2, "continuation"},             // NUL is a character, 0x80 is not
#undef B
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "bad%zu.txt", i);
        tpath(state, name, p, sizeof p);
        write_bytes(p, bad[i].bytes, bad[i].len);
        snprintf(msg, sizeof msg, "%s: invalid UTF-8 at byte offset %ld (line %ld): ", p, bad[i].off, bad[i].line);
        expect_load_error(p, 1.0, 1, msg);
        expect_load_error(p, 1.0, 1, bad[i].why);
        // The same bytes gzipped give the same error, at the offset in the decompressed text.
        snprintf(name, sizeof name, "bad%zu.txt.gz", i);
        tpath(state, name, q, sizeof q);
        write_gz(q, bad[i].bytes, bad[i].len);
        snprintf(msg, sizeof msg, "invalid UTF-8 at byte offset %ld of the decompressed text (line %ld)",
                 bad[i].off, bad[i].line);
        expect_load_error(q, 1.0, 1, msg);
        // And the in-memory entry point.
        CharDataset ds;
        char err[512] = "";
        assert_int_not_equal(chardataset_from_text(&ds, bad[i].bytes, bad[i].len, "mem", 1.0, 1, err, sizeof err), 0);
        snprintf(msg, sizeof msg, "mem: invalid UTF-8 at byte offset %ld (line %ld): ", bad[i].off, bad[i].line);
        if (!strstr(err, msg) || !strstr(err, bad[i].why)) fail_msg("bad[%zu]: %s", i, err);
        assert_null(ds.ids);
    }

    tpath(state, "five.txt", p, sizeof p);
    write_bytes(p, "abcde", 5);
    snprintf(msg, sizeof msg, "block_size (5) must be smaller than the number of characters (5) in %s", p);
    expect_load_error(p, 1.0, 5, msg);
    snprintf(msg, sizeof msg, "block_size (2) must be smaller than the number of characters (2 of 5 after "
             "truncate=0.5) in %s", p);
    expect_load_error(p, 0.5, 2, msg);     // counted after truncation: int(5 * 0.5) = 2
    expect_load_error(p, 1.0, 0, "block_size");
    expect_load_error(p, 0.0, 1, "truncate");
    expect_load_error(p, 1.5, 1, "truncate");
    expect_load_error(p, NAN, 1, "truncate");
    expect_load_error(p, 0.1, 1, "truncate");  // int(0.5) = 0 characters left
    CharDataset ds;
    char err[256];
    assert_int_equal(chardataset_load(&ds, p, 1.0, 4, err, sizeof err), 0);
    chardataset_free(&ds);
}

// The in-memory entry point gives what loading the same bytes from a file gives, and leaves
// the caller's buffer alone.
static void test_from_text_matches_load(void **state) {
    const char text[] = "To be, or not to be: \xE2\x9C\x93 \xF0\x9F\x98\x80\nthat is the question.\n";
    char copy[sizeof text];
    memcpy(copy, text, sizeof text);
    CharDataset a, b;
    char err[512] = "";
    load_text(state, "mem.txt", text, 0.8, 4, &a);
    if (chardataset_from_text(&b, copy, sizeof text - 1, "label", 0.8, 4, err, sizeof err)) fail_msg("%s", err);
    assert_memory_equal(copy, text, sizeof text);
    assert_int_equal(a.n, b.n);
    assert_int_equal(a.vocab_size, b.vocab_size);
    assert_int_equal(b.block_size, 4);
    assert_memory_equal(a.itos, b.itos, (size_t)a.vocab_size * sizeof *a.itos);
    assert_memory_equal(a.ids, b.ids, (size_t)a.n * sizeof *a.ids);
    chardataset_free(&a);
    chardataset_free(&b);
    // Messages start with the caller's label; parameters are checked before the text.
    assert_int_not_equal(chardataset_from_text(&b, "", 0, "label", 1.0, 1, err, sizeof err), 0);
    assert_non_null(strstr(err, "label: empty"));
    assert_int_not_equal(chardataset_from_text(&b, "abc", 3, "label", 1.0, 3, err, sizeof err), 0);
    assert_non_null(strstr(err, "block_size (3) must be smaller than the number of characters (3) in label"));
    assert_int_not_equal(chardataset_from_text(&b, "\xFF", 1, "label", 2.0, 1, err, sizeof err), 0);
    assert_non_null(strstr(err, "label: truncate (2) must be in (0, 1]"));
    assert_null(b.ids);
}

// NUL is a valid code point: it loads as a character like any other and round-trips
// through encode_n / decode_one.
static void test_nul_is_a_character(void **state) {
    const char text[] = "a\0b\0\0a\n";
    const size_t len = sizeof text - 1;
    char p[256], err[512] = "";
    tpath(state, "nul.txt", p, sizeof p);
    write_bytes(p, text, len);
    CharDataset ds;
    if (chardataset_load(&ds, p, 1.0, 2, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(ds.n, 7);
    assert_int_equal(ds.vocab_size, 4);
    const uint32_t want[] = {0, '\n', 'a', 'b'};
    assert_memory_equal(ds.itos, want, sizeof want);
    const int32_t ids_want[] = {2, 0, 3, 0, 0, 2, 1};
    assert_memory_equal(ds.ids, ids_want, sizeof ids_want);
    int32_t ids[8];
    assert_int_equal(chardataset_encode_n(&ds, text, len, ids, err, sizeof err), 7);
    assert_memory_equal(ids, ds.ids, sizeof ids_want);
    assert_int_equal(chardataset_encode(&ds, text, ids, err, sizeof err), 1);  // stops at the first NUL
    char buf[8];
    assert_int_equal(chardataset_decode_one(&ds, 0, buf), 1);
    assert_int_equal(buf[0], '\0');
    chardataset_free(&ds);
    // A file of NUL bytes only (e.g. a sparse or zeroed file) has one distinct character.
    tpath(state, "zeros.txt", p, sizeof p);
    write_bytes(p, "\0\0\0\0\0\0\0\0", 8);
    expect_load_error(p, 1.0, 2, "holds only one distinct character, '\\x00' (U+0000)");
}

// Too little text: an empty corpus, fewer characters than block_size+1 (before or after
// truncate), one distinct character. Each message names the path and the numbers.
static void test_too_little_text(void **state) {
    char p[256], msg[512];
    tpath(state, "one.txt", p, sizeof p);
    write_bytes(p, "a", 1);
    snprintf(msg, sizeof msg, "block_size (1) must be smaller than the number of characters (1) in %s", p);
    expect_load_error(p, 1.0, 1, msg);
    tpath(state, "same.txt", p, sizeof p);
    write_bytes(p, "aaaaaaaaaaaaaaaaaaaa", 20);
    snprintf(msg, sizeof msg, "%s: the corpus (20 characters) holds only one distinct character, 'a' (U+0061); "
             "a character model needs at least 2", p);
    expect_load_error(p, 1.0, 4, msg);
    // Two distinct characters, but truncate keeps only the first.
    tpath(state, "same_then_b.txt", p, sizeof p);
    write_bytes(p, "\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9" "b", 13);
    snprintf(msg, sizeof msg, "%s: the corpus (3 characters) holds only one distinct character, '\xC3\xA9' (U+00E9)", p);
    expect_load_error(p, 0.5, 1, msg);
    snprintf(msg, sizeof msg, "block_size (6) must be smaller than the number of characters (3 of 7 after "
             "truncate=0.5) in %s", p);
    expect_load_error(p, 0.5, 6, msg);
    CharDataset ds;
    char err[256];
    if (chardataset_load(&ds, p, 1.0, 6, err, sizeof err)) fail_msg("%s", err);  // all 7: two characters
    assert_int_equal(ds.vocab_size, 2);
    chardataset_free(&ds);
}

// Wall-clock guard: a load that blocks (a FIFO without a writer) fails the test instead of
// hanging it.
static void on_alarm(int sig) { (void)sig; _exit(3); }

// Only a regular file is read: a directory, FIFO, device or socket is refused by name before
// it is opened, and a symlink is judged by what it points to.
static void test_not_a_regular_file(void **state) {
    Ctx *c = *state;
    char p[256], q[256], msg[512];
    signal(SIGALRM, on_alarm);
    alarm(20);
    snprintf(msg, sizeof msg, "%s: is a directory, not a regular file", c->dir);
    expect_load_error(c->dir, 1.0, 1, msg);
    tpath(state, "dir.gz", p, sizeof p);
    assert_int_equal(mkdir(p, 0700), 0);
    expect_load_error(p, 1.0, 1, "is a directory, not a regular file");
    assert_int_equal(rmdir(p), 0);

    tpath(state, "fifo", p, sizeof p);
    assert_int_equal(mkfifo(p, 0600), 0);
    expect_load_error(p, 1.0, 1, "is a FIFO (named pipe), not a regular file");
    tpath(state, "fifo.gz", q, sizeof q);
    assert_int_equal(mkfifo(q, 0600), 0);
    expect_load_error(q, 1.0, 1, "is a FIFO (named pipe), not a regular file");

    expect_load_error("/dev/zero", 1.0, 1, "/dev/zero: is a character device, not a regular file");
    expect_load_error("/dev/null", 1.0, 1, "/dev/null: is a character device, not a regular file");

    tpath(state, "sock", p, sizeof p);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    assert_true(strlen(p) < sizeof sa.sun_path);
    strcpy(sa.sun_path, p);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    expect_load_error(p, 1.0, 1, "is a socket, not a regular file");
    close(fd);

    tpath(state, "link_to_dir", p, sizeof p);
    assert_int_equal(symlink(c->dir, p), 0);
    expect_load_error(p, 1.0, 1, "is a directory, not a regular file");
    tpath(state, "target.txt", q, sizeof q);
    write_bytes(q, "abcabc", 6);
    tpath(state, "link_to_file", p, sizeof p);
    assert_int_equal(symlink(q, p), 0);
    CharDataset ds;
    char err[256];
    if (chardataset_load(&ds, p, 1.0, 2, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(ds.n, 6);
    chardataset_free(&ds);
    alarm(0);
    signal(SIGALRM, SIG_DFL);
}

static void set_limit(const char *v) {
    if (v) assert_int_equal(setenv("MINGPT_MAX_CORPUS_BYTES", v, 1), 0);
    else assert_int_equal(unsetenv("MINGPT_MAX_CORPUS_BYTES"), 0);
}

// Teardown: a failed check must not leave a small limit to the tests after it.
static int unset_limit(void **state) {
    (void)state;
    return unsetenv("MINGPT_MAX_CORPUS_BYTES");
}

static long max_rss_kb(void) {
    struct rusage ru;
    assert_int_equal(getrusage(RUSAGE_SELF, &ru), 0);
    return ru.ru_maxrss;
}

// The corpus budget: MINGPT_MAX_CORPUS_BYTES bytes of (decompressed) text; a plain file
// over it is refused before it is read, a gzip stream as soon as it inflates past it.
static void test_corpus_limit(void **state) {
    char p[256], msg[512], err[512];
    CharDataset ds;
    char text[301];
    for (int i = 0; i < 300; i++) text[i] = "abc\n"[i % 4];
    text[300] = '\0';

    set_limit("300");
    tpath(state, "at_limit.txt", p, sizeof p);
    write_bytes(p, text, 300);
    if (chardataset_load(&ds, p, 1.0, 8, err, sizeof err)) fail_msg("%s", err);
    chardataset_free(&ds);
    tpath(state, "at_limit.txt.gz", p, sizeof p);
    write_gz(p, text, 300);
    if (chardataset_load(&ds, p, 1.0, 8, err, sizeof err)) fail_msg("%s", err);
    chardataset_free(&ds);

    set_limit("299");
    tpath(state, "at_limit.txt", p, sizeof p);
    snprintf(msg, sizeof msg, "%s: 300 bytes is larger than the corpus limit of 299 bytes (set by "
             "MINGPT_MAX_CORPUS_BYTES; raise it to load more)", p);
    expect_load_error(p, 1.0, 8, msg);
    tpath(state, "at_limit.txt.gz", p, sizeof p);
    snprintf(msg, sizeof msg, "%s: decompresses to more than the corpus limit of 299 bytes", p);
    expect_load_error(p, 1.0, 8, msg);
    // truncate does not change what has to be read.
    expect_load_error(p, 0.1, 8, "the corpus limit of 299 bytes");

    // Suffixes are powers of 1024.
    set_limit("1k");
    tpath(state, "at_limit.txt", p, sizeof p);
    if (chardataset_load(&ds, p, 1.0, 8, err, sizeof err)) fail_msg("%s", err);
    chardataset_free(&ds);

    // A gzip bomb: 1 GiB of zeros in about 1 MB (1024 concatenated members of 1 MiB each).
    // With a 4 MiB limit it stops at the limit: the error comes, and the process's peak
    // memory grows by far less than the 1 GiB (or the 5 GiB of ids) the stream would need.
    const size_t mib = 1 << 20;
    unsigned char *zeros = calloc(mib, 1);
    uLongf zlen = compressBound(mib) + 32;
    unsigned char *member = malloc(zlen);
    assert_non_null(zeros);
    assert_non_null(member);
    z_stream zs = {0};
    assert_int_equal(deflateInit2(&zs, 9, Z_DEFLATED, 16 + 15, 9, Z_DEFAULT_STRATEGY), Z_OK);  // gzip wrapper
    zs.next_in = zeros; zs.avail_in = (uInt)mib;
    zs.next_out = member; zs.avail_out = (uInt)zlen;
    assert_int_equal(deflate(&zs, Z_FINISH), Z_STREAM_END);
    const size_t mlen = zs.total_out;
    deflateEnd(&zs);
    tpath(state, "bomb.txt.gz", p, sizeof p);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    for (int i = 0; i < 1024; i++) assert_int_equal(fwrite(member, 1, mlen, f), mlen);
    assert_int_equal(fclose(f), 0);
    free(zeros);
    free(member);
    set_limit("4M");
    const long rss0 = max_rss_kb();
    snprintf(msg, sizeof msg, "%s: decompresses to more than the corpus limit of 4194304 bytes", p);
    expect_load_error(p, 1.0, 8, msg);
    const long grew_kb = max_rss_kb() - rss0;
    if (grew_kb > 64 * 1024) fail_msg("the gzip bomb raised peak memory by %ld KiB", grew_kb);

    // A malformed limit is an error that names the variable.
    const char *bad[] = {"lots", "0", "-5", "12X", "1.5G", "99999999999999999999", "8000000000T", "12KB"};
    tpath(state, "at_limit.txt", p, sizeof p);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        set_limit(bad[i]);
        assert_int_not_equal(chardataset_load(&ds, p, 1.0, 8, err, sizeof err), 0);
        snprintf(msg, sizeof msg, "MINGPT_MAX_CORPUS_BYTES='%s' is not a size in bytes", bad[i]);
        if (!strstr(err, msg)) fail_msg("limit '%s': %s", bad[i], err);
    }

    // The default: a tenth of physical memory. A sparse file the size of physical memory is
    // refused from its size alone (reading it would take seconds and the whole memory).
    set_limit(NULL);
    const unsigned long long phys = (unsigned long long)sysconf(_SC_PHYS_PAGES) * (unsigned long long)sysconf(_SC_PAGESIZE);
    tpath(state, "sparse.txt", p, sizeof p);
    f = fopen(p, "wb");
    assert_non_null(f);
    fclose(f);
    if (truncate(p, (off_t)phys) != 0) {
        print_message("note: cannot make a sparse file of %llu bytes (%s); skipping the default-limit check\n",
                      phys, strerror(errno));
    } else {
        snprintf(msg, sizeof msg, "%s: %llu bytes is larger than the corpus limit of %llu bytes (a tenth of the "
                 "%.1f GiB of physical memory", p, phys, phys / 10, (double)phys / (1 << 30));
        expect_load_error(p, 1.0, 8, msg);
        expect_load_error(p, 1.0, 8, "set MINGPT_MAX_CORPUS_BYTES=BYTES (e.g. 20G) to raise it");
    }
    unlink(p);
    set_limit("1T");  // a raised limit loads what the default would refuse; here: an ordinary file
    tpath(state, "target.txt", p, sizeof p);
    write_bytes(p, text, 300);
    if (chardataset_load(&ds, p, 1.0, 8, err, sizeof err)) fail_msg("%s", err);
    chardataset_free(&ds);
    set_limit(NULL);
}

static void test_encode_errors(void **state) {
    CharDataset ds;
    load_text(state, "hello.txt", "hello h\xC3\xA9", 1.0, 1, &ds);
    int32_t ids[32];
    char err[256];
    assert_int_equal(chardataset_encode(&ds, "hex", ids, err, sizeof err), -1);
    assert_non_null(strstr(err, "'x' (U+0078)"));
    assert_non_null(strstr(err, "2"));  // position
    assert_int_equal(chardataset_encode(&ds, "h\xE2\x9C\x93", ids, err, sizeof err), -1);
    assert_non_null(strstr(err, "'\xE2\x9C\x93' (U+2713)"));
    assert_int_equal(chardataset_encode(&ds, "he\n", ids, err, sizeof err), -1);
    assert_non_null(strstr(err, "(U+000A)"));
    assert_int_equal(chardataset_encode(&ds, "h\xC0\x80", ids, err, sizeof err), -1);
    assert_non_null(strstr(err, "byte offset 1"));
    assert_int_equal(chardataset_encode(&ds, "h\xC3\xA9llo", ids, err, sizeof err), 5);
    chardataset_free(&ds);
}

static void test_from_vocab(void **state) {
    const uint32_t itos[] = {'\n', ' ', 'a', 0xE9, 0x1F600};
    CharDataset ds;
    assert_int_equal(chardataset_from_vocab(&ds, itos, 5, 16), 0);
    assert_null(ds.ids);
    assert_int_equal(ds.n, 0);
    assert_int_equal(ds.vocab_size, 5);
    assert_int_equal(ds.block_size, 16);
    assert_int_equal(chardataset_len(&ds), 0);
    for (int i = 0; i < 5; i++) assert_int_equal(chardataset_stoi(&ds, itos[i]), i);
    assert_int_equal(chardataset_stoi(&ds, 'b'), -1);
    char buf[8];
    assert_int_equal(chardataset_decode_one(&ds, 4, buf), 4);
    assert_memory_equal(buf, "\xF0\x9F\x98\x80", 4);
    assert_int_equal(chardataset_decode_one(&ds, 3, buf), 2);
    assert_memory_equal(buf, "\xC3\xA9", 2);
    int32_t ids[8];
    char err[128];
    assert_int_equal(chardataset_encode(&ds, "a \xC3\xA9\n", ids, err, sizeof err), 4);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[2], 3);
    chardataset_free(&ds);
    const uint32_t unsorted[] = {'b', 'a'};
    assert_int_not_equal(chardataset_from_vocab(&ds, unsorted, 2, 4), 0);
    const uint32_t surrogate[] = {'a', 0xD800};
    assert_int_not_equal(chardataset_from_vocab(&ds, surrogate, 2, 4), 0);
    assert_int_not_equal(chardataset_from_vocab(&ds, itos, 0, 4), 0);
}

// ---------------------------------------------------------------- tiny shakespeare
static void test_tinyshakespeare_facts(void **state) {
    const char *cands[] = {"data/input.txt", "../shared/data/tinyshakespeare.txt"};
    const char *path = NULL;
    for (int i = 0; i < 2 && !path; i++)
        if (access(cands[i], R_OK) == 0) path = cands[i];
    if (!path) {
        print_message("note: tiny-shakespeare not found (data/input.txt, ../shared/data/tinyshakespeare.txt); "
                      "skipping its checks (make data)\n");
        skip();
    }
    CharDataset ds;
    char err[512];
    if (chardataset_load(&ds, path, 1.0, 128, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(ds.n, 1115394);
    assert_int_equal(ds.vocab_size, 65);
    char vocab[80];
    int k = 0;
    for (int i = 0; i < ds.vocab_size; i++) k += chardataset_decode_one(&ds, i, vocab + k);
    vocab[k] = '\0';
    assert_string_equal(vocab, "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz");
    // nanoGPT's prepare.py: the first 90% (1,003,854 chars) train, the rest (111,540) val.
    DataSplit s;
    assert_int_equal(datasplit_make(&s, &ds, "contiguous", 0.9, 0, err, sizeof err), 0);
    assert_int_equal(s.n_train, 1003854 - 128);
    assert_int_equal(s.n_test, 111540 - 128);
    datasplit_free(&s);
    chardataset_free(&ds);

    // The tutorial's defaults: truncate 0.05, block_size 128, train_split 0.9.
    if (chardataset_load(&ds, path, 0.05, 128, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(ds.n, 55769);
    assert_int_equal(ds.vocab_size, 59);
    const char *absent = "$&3QXZ";
    for (const char *c = absent; *c; c++) assert_int_equal(chardataset_stoi(&ds, (uint32_t)*c), -1);
    const char *first = "\n !',-.:;?";
    for (int i = 0; first[i]; i++) assert_int_equal(chardataset_stoi(&ds, (uint32_t)first[i]), i);
    assert_int_equal(chardataset_stoi(&ds, 'A'), 10);
    assert_int_equal(chardataset_stoi(&ds, 'a'), 33);  // 10 + 23 capitals (no Q, X, Z)
    assert_int_equal(chardataset_stoi(&ds, 'z'), 58);
    assert_int_equal(chardataset_len(&ds), 55641);
    assert_int_equal(datasplit_make(&s, &ds, "random", 0.9, 1337, err, sizeof err), 0);
    assert_int_equal(s.n_train, 50076);
    assert_int_equal(s.n_test, 5565);
    // random_split's order is randperm(55641, seed): compare with the torch fixture's head.
    long *perm = malloc(55641 * sizeof *perm);
    assert_int_equal(torch_randperm(55641, 1337, perm), 0);
    assert_memory_equal(s.train, perm, 50076 * sizeof *perm);
    assert_memory_equal(s.test, perm + 50076, 5565 * sizeof *perm);
    free(perm);
    datasplit_free(&s);
    chardataset_free(&ds);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mt19937_reference_values),
        cmocka_unit_test(test_randperm_matches_torch),
        cmocka_unit_test(test_randperm_properties),
        cmocka_unit_test(test_sampler_matches_torch),
        cmocka_unit_test(test_sampler_properties),
        cmocka_unit_test(test_random_split_matches_torch),
        cmocka_unit_test(test_random_split_properties),
        cmocka_unit_test(test_contiguous_split),
        cmocka_unit_test(test_multibyte_vocab_roundtrip),
        cmocka_unit_test(test_truncate_counts_characters),
        cmocka_unit_test(test_windows_shift_by_one),
        cmocka_unit_test(test_gz_matches_plain),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_from_text_matches_load),
        cmocka_unit_test(test_nul_is_a_character),
        cmocka_unit_test(test_too_little_text),
        cmocka_unit_test(test_not_a_regular_file),
        cmocka_unit_test_teardown(test_corpus_limit, unset_limit),
        cmocka_unit_test(test_encode_errors),
        cmocka_unit_test(test_from_vocab),
        cmocka_unit_test(test_tinyshakespeare_facts),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
