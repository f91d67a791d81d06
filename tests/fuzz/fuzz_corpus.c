// tests/fuzz/fuzz_corpus.c — libFuzzer target for the UTF-8 corpus reader and vocabulary
// builder (data/char_dataset.c): chardataset_from_text, chardataset_encode_n,
// chardataset_decode_one and datasplit_make.
//
// Input: byte 0 picks truncate, byte 1 block_size and train_split, the rest is the corpus.
// Every result is checked against an independent reference: a table-driven UTF-8 validator
// (Unicode 15, Table 3-7 "Well-Formed UTF-8 Byte Sequences") and a sort-based vocabulary.
// A violated invariant aborts, which the fuzzer reports as a crash.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/char_dataset.h"

#define MAX_TEXT (1 << 16)  // bytes of corpus per input: keeps each run well under a millisecond

#define CHECK(cond) do { \
    if (!(cond)) { fprintf(stderr, "fuzz_corpus: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); abort(); } \
} while (0)

// Decodes s[0..len) into cps following Table 3-7; *n gets the number of code points before
// the first ill-formed sequence. Returns that sequence's byte offset, or len when all is valid.
static size_t ref_decode(const uint8_t *s, size_t len, uint32_t *cps, long *n) {
    size_t i = 0;
    *n = 0;
    while (i < len) {
        uint8_t b = s[i];
        int need;
        uint8_t lo = 0x80, hi = 0xBF;  // range of the second byte; later ones are 80..BF
        uint32_t c;
        if (b <= 0x7F) { cps[(*n)++] = b; i++; continue; }
        else if (b >= 0xC2 && b <= 0xDF) { need = 1; c = b & 0x1F; }
        else if (b == 0xE0) { need = 2; c = 0; lo = 0xA0; }
        else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) { need = 2; c = b & 0x0F; }
        else if (b == 0xED) { need = 2; c = 0xD; hi = 0x9F; }
        else if (b == 0xF0) { need = 3; c = 0; lo = 0x90; }
        else if (b >= 0xF1 && b <= 0xF3) { need = 3; c = b & 0x07; }
        else if (b == 0xF4) { need = 3; c = 4; hi = 0x8F; }
        else return i;
        if (len - i <= (size_t)need) return i;
        if (s[i + 1] < lo || s[i + 1] > hi) return i;
        for (int k = 1; k <= need; k++) {
            if (k > 1 && (s[i + k] < 0x80 || s[i + k] > 0xBF)) return i;
            c = (c << 6) | (s[i + k] & 0x3F);
        }
        cps[(*n)++] = c;
        i += (size_t)need + 1;
    }
    return len;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static void check_splits(const CharDataset *ds, double train_split) {
    const long n = ds->n, T = ds->block_size;
    char err[512];
    DataSplit s;

    // contiguous: train windows lie inside [0, n_tr), test windows inside [n_tr, n).
    long n_tr = (long)((double)n * train_split);
    long want_train = n_tr - T, want_test = n - T - n_tr;
    int rc = datasplit_make(&s, ds, "contiguous", train_split, 0, err, sizeof err);
    if (want_train <= 0 || want_test <= 0) {
        CHECK(rc != 0 && strstr(err, "contiguous split") && !s.train && !s.test);
    } else {
        CHECK(rc == 0 && s.n_train == want_train && s.n_test == want_test);
        for (long i = 0; i < s.n_train; i++) CHECK(s.train[i] == i && s.train[i] + T < n_tr);
        for (long i = 0; i < s.n_test; i++) CHECK(s.test[i] == n_tr + i && s.test[i] + T < n);
    }
    datasplit_free(&s);

    // random: train and test together are a permutation of the n - T windows.
    const long N = chardataset_len(ds);
    CHECK(N == n - T);
    want_train = (long)((double)N * train_split);
    want_test = N - want_train;
    rc = datasplit_make(&s, ds, "random", train_split, (uint64_t)n * 7919u, err, sizeof err);
    if (want_train <= 0 || want_test <= 0) {
        CHECK(rc != 0 && strstr(err, "random split") && !s.train && !s.test);
    } else {
        CHECK(rc == 0 && s.n_train == want_train && s.n_test == want_test);
        unsigned char *seen = calloc((size_t)N, 1);
        CHECK(seen);
        for (long i = 0; i < s.n_train + s.n_test; i++) {
            long w = i < s.n_train ? s.train[i] : s.test[i - s.n_train];
            CHECK(w >= 0 && w < N && !seen[w]);
            seen[w] = 1;
        }
        free(seen);
    }
    datasplit_free(&s);

    CHECK(datasplit_make(&s, ds, "diagonal", train_split, 0, err, sizeof err) != 0 && strstr(err, "diagonal"));
    datasplit_free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2 || size - 2 > MAX_TEXT) return 0;
    static const double splits[8] = {0.9, 0.5, 0.1, 0.25, 0.75, 0.99, 0.01, 1.0 / 3};
    const double truncate = data[0] < 128 ? 1.0 : (data[0] - 127) / 128.0;  // (0, 1]
    const int T = 1 + (data[1] & 31);
    const double train_split = splits[data[1] >> 5];
    const uint8_t *text = data + 2;
    const size_t len = size - 2;

    uint32_t *cps = malloc((len + 1) * sizeof *cps);
    CHECK(cps);
    long nch;
    const size_t bad = ref_decode(text, len, cps, &nch);

    CharDataset ds;
    char err[512] = "", want[128];
    const int rc = chardataset_from_text(&ds, text, len, "fuzz.txt", truncate, T, err, sizeof err);
    if (rc != 0) CHECK(strncmp(err, "fuzz.txt: ", 10) == 0 || strstr(err, " in fuzz.txt"));
    if (rc != 0) CHECK(!ds.ids && !ds.itos && ds.n == 0 && ds.vocab_size == 0);

    if (len == 0) {
        CHECK(rc != 0 && strstr(err, "empty"));
    } else if (bad < len) {
        // The error names the first ill-formed sequence's offset and its line.
        long line = 1;
        for (size_t i = 0; i < bad; i++) line += text[i] == '\n';
        snprintf(want, sizeof want, "invalid UTF-8 at byte offset %zu (line %ld): ", bad, line);
        CHECK(rc != 0 && strstr(err, want));
    } else {
        const long n = (long)((double)nch * truncate);
        // The reference vocabulary: sorted distinct code points of the first n characters.
        uint32_t *vocab = malloc(((size_t)n + 1) * sizeof *vocab);
        CHECK(vocab);
        if (n > 0) memcpy(vocab, cps, (size_t)n * sizeof *vocab);
        qsort(vocab, (size_t)(n > 0 ? n : 0), sizeof *vocab, cmp_u32);
        long V = 0;
        for (long i = 0; i < n; i++)
            if (i == 0 || vocab[i] != vocab[i - 1]) vocab[V++] = vocab[i];

        if (n <= 0) {
            CHECK(rc != 0 && strstr(err, "no characters left"));
        } else if (T >= n) {
            snprintf(want, sizeof want, "block_size (%d) must be smaller than the number of characters (%ld", T, n);
            CHECK(rc != 0 && strstr(err, want));
        } else if (V < 2) {
            CHECK(rc != 0 && strstr(err, "only one distinct character"));
        } else {
            CHECK(rc == 0 && ds.n == n && ds.block_size == T && ds.vocab_size == V);
            CHECK(memcmp(ds.itos, vocab, (size_t)V * sizeof *vocab) == 0);
            for (int i = 0; i < V; i++) CHECK(chardataset_stoi(&ds, ds.itos[i]) == i);
            // Every id decodes to the code point it came from; the decoded ids are the bytes
            // of the first n characters, and encoding them gives the ids back.
            char *dec = malloc(4 * (size_t)n + 8);
            int32_t *ids = malloc((size_t)nch * sizeof *ids);  // room for the whole text
            CHECK(dec && ids);
            size_t dlen = 0;
            for (long i = 0; i < n; i++) {
                CHECK(ds.ids[i] >= 0 && ds.ids[i] < V && ds.itos[ds.ids[i]] == cps[i]);
                int k = chardataset_decode_one(&ds, ds.ids[i], dec + dlen);
                CHECK(k >= 1 && k <= 4);
                dlen += (size_t)k;
            }
            CHECK(dlen <= len && memcmp(dec, text, dlen) == 0);
            CHECK(n == nch ? dlen == len : dlen < len);
            CHECK(chardataset_encode_n(&ds, dec, dlen, ids, err, sizeof err) == n);
            CHECK(memcmp(ids, ds.ids, (size_t)n * sizeof *ids) == 0);
            // A vocabulary-only copy (as `sample` builds from a snapshot) encodes the same.
            CharDataset vo;
            CHECK(chardataset_from_vocab(&vo, ds.itos, ds.vocab_size, T) == 0);
            CHECK(chardataset_encode_n(&vo, dec, dlen, ids, err, sizeof err) == n);
            CHECK(memcmp(ids, ds.ids, (size_t)n * sizeof *ids) == 0);
            chardataset_free(&vo);
            // Characters past the truncation point that are not in the vocabulary are refused.
            if (n < nch) {
                long r = chardataset_encode_n(&ds, (const char *)text, len, ids, err, sizeof err);
                int outside = 0;
                for (long i = n; i < nch && !outside; i++) outside = chardataset_stoi(&ds, cps[i]) < 0;
                CHECK(outside ? r == -1 && strstr(err, "is not in the vocabulary") : r == nch);
            }
            free(dec);
            free(ids);
            // Windows: x = ids[i : i+T], y shifted by one.
            int32_t x[32], y[32];
            const long N = chardataset_len(&ds);
            const long starts[3] = {0, N / 2, N - 1};
            for (int k = 0; k < 3; k++) {
                chardataset_window(&ds, starts[k], x, y);
                CHECK(memcmp(x, ds.ids + starts[k], (size_t)T * sizeof *x) == 0);
                CHECK(memcmp(y, ds.ids + starts[k] + 1, (size_t)T * sizeof *y) == 0);
            }
            check_splits(&ds, train_split);
        }
        free(vocab);
    }
    chardataset_free(&ds);
    free(cps);
    return 0;
}
