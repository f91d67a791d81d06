// data/char_dataset.h — minGPT's CharDataset: a text as a sequence of character ids.
//
// The vocabulary is the sorted set of distinct Unicode code points of the (truncated)
// text, as in chargpt's `sorted(list(set(data)))`. Sample i is the window
// x = ids[i : i+T], y = ids[i+1 : i+T+1]; there are n - T samples.
#ifndef MINGPT_CHAR_DATASET_H
#define MINGPT_CHAR_DATASET_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int32_t *ids;        // (n,) token id of every character
    long n;              // number of characters after truncation
    int vocab_size;      // V
    uint32_t *itos;      // (V,) code point of each id, ascending
    int block_size;      // T
} CharDataset;

// Reads `path` (UTF-8; a path ending in ".gz" is read through zlib), keeps the first
// floor(n_chars * truncate) characters, builds the vocabulary. Errors (non-zero return,
// message naming the path in err): missing/unreadable file, empty text, invalid UTF-8
// (with the byte offset), truncate outside (0,1], block_size < 1 or >= n.
int chardataset_load(CharDataset *ds, const char *path, double truncate, int block_size,
                     char *err, size_t errlen);

// Builds a dataset from a vocabulary only (for sampling from a snapshot): ids = NULL, n = 0.
int chardataset_from_vocab(CharDataset *ds, const uint32_t *itos, int vocab_size, int block_size);

void chardataset_free(CharDataset *ds);

// Number of samples: n - T.
long chardataset_len(const CharDataset *ds);

// Id of code point cp, or -1 when cp is not in the vocabulary (binary search).
int chardataset_stoi(const CharDataset *ds, uint32_t cp);

// Encodes UTF-8 text into ids (out has room for strlen(text) ids). Returns the number
// of ids, or -1 when the text is invalid UTF-8 or holds a character outside the
// vocabulary; then err names the character (as "'c' (U+XXXX)") and its position.
long chardataset_encode(const CharDataset *ds, const char *text, int32_t *out,
                        char *err, size_t errlen);

// Appends the UTF-8 encoding of id's character to buf (needs 5 bytes); returns bytes written.
int chardataset_decode_one(const CharDataset *ds, int32_t id, char *buf);

// Writes x = ids[start : start+T] and y = ids[start+1 : start+T+1] (T int32 each).
void chardataset_window(const CharDataset *ds, long start, int32_t *x, int32_t *y);

// ---------------------------------------------------------------- train/test split
// A split is a list of window start positions into the dataset.
typedef struct {
    long *train; long n_train;
    long *test;  long n_test;
} DataSplit;

// "contiguous": the first floor(n * train_split) characters give the train windows
//   (every window lies wholly inside them) and the rest give the test windows, so no
//   window crosses the boundary (nanoGPT's split).
// "random": the tutorial's random_split of window indices, train_len =
//   floor(len * train_split), but drawn from torch's randperm with generator seed `seed`,
//   so every rank and every restart gets the same split.
// Error (non-zero, message in err) when either side would hold no window.
int datasplit_make(DataSplit *s, const CharDataset *ds, const char *mode, double train_split,
                   uint64_t seed, char *err, size_t errlen);
void datasplit_free(DataSplit *s);

#endif
