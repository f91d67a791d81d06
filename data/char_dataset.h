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

// Builds the dataset from `len` bytes of UTF-8 text in memory (not copied; the caller keeps
// ownership): keeps the first floor(n_chars * truncate) characters, the vocabulary is their
// sorted distinct code points, ids[i] the id of character i. NUL (U+0000) is an ordinary
// character. `name` (a path, or any label) starts every message. Errors (non-zero return,
// ds zeroed, message in err): truncate outside (0,1]; block_size < 1; empty text; invalid
// UTF-8 (overlong form, surrogate, code point above U+10FFFF, invalid start byte, stray
// continuation byte, sequence cut short), with the byte offset of the offending sequence and
// its line; block_size >= the number of characters kept; a single distinct character.
int chardataset_from_text(CharDataset *ds, const void *text, size_t len, const char *name, double truncate,
                          int block_size, char *err, size_t errlen);

// Reads `path` and builds the dataset from its text as chardataset_from_text (a path ending
// in ".gz" is read through zlib; invalid UTF-8 offsets are then in the decompressed text).
// Further errors, each naming the path: missing or unreadable file; a path that is not a
// regular file (a directory, FIFO, device or socket is refused before it is opened, so a
// FIFO never blocks); a corrupt or truncated gzip stream; text larger than the corpus limit
// (refused before reading a plain file, and as soon as a gzip stream inflates past it). The
// limit in bytes of (decompressed) text is the environment variable MINGPT_MAX_CORPUS_BYTES
// (a positive integer, optionally with a K/M/G/T suffix, powers of 1024), by default a tenth
// of physical memory (sysconf; loading needs up to 5 bytes per byte of text: the text plus a
// 4-byte id per character); a malformed MINGPT_MAX_CORPUS_BYTES is an error too. Returns 0;
// CHARDATASET_UNREADABLE when the file itself cannot be read (missing: "cannot open 'PATH': the
// OS's reason"; not a regular file, too large, corrupt gzip), so that the caller can name the
// setting that gave the path; -1 for the other errors.
#define CHARDATASET_UNREADABLE (-2)
int chardataset_load(CharDataset *ds, const char *path, double truncate, int block_size,
                     char *err, size_t errlen);

// Builds a dataset from a vocabulary only (for sampling from a snapshot): ids = NULL, n = 0.
int chardataset_from_vocab(CharDataset *ds, const uint32_t *itos, int vocab_size, int block_size);

void chardataset_free(CharDataset *ds);

// Number of samples: n - T.
long chardataset_len(const CharDataset *ds);

// Id of code point cp, or -1 when cp is not in the vocabulary (binary search).
int chardataset_stoi(const CharDataset *ds, uint32_t cp);

// Encodes `len` bytes of UTF-8 text into ids (out has room for len ids; NUL is a character).
// Returns the number of ids, or -1 when the text is invalid UTF-8 (err gives the byte
// offset) or holds a character outside the vocabulary; then err names the character (as
// "'c' (U+XXXX)") and its position.
long chardataset_encode_n(const CharDataset *ds, const char *text, size_t len, int32_t *out,
                          char *err, size_t errlen);

// chardataset_encode_n of the NUL-terminated string text (out has room for strlen(text) ids).
long chardataset_encode(const CharDataset *ds, const char *text, int32_t *out,
                        char *err, size_t errlen);

// Appends the UTF-8 encoding of id's character to buf (needs 5 bytes); returns bytes written.
int chardataset_decode_one(const CharDataset *ds, int32_t id, char *buf);

// Writes x = ids[start : start+T] and y = ids[start+1 : start+T+1] (T int32 each).
void chardataset_window(const CharDataset *ds, long start, int32_t *x, int32_t *y);

// A batch of n rows picked by a sampler: row r (r < n) is the window at starts[order[first + r]]
// (chardataset_window), written to x + r*T and y + r*T; x, y (n, T) int32 host, T = block_size.
void chardataset_rows(const CharDataset *ds, const long *starts, const long *order, long first, int n, int32_t *x,
                      int32_t *y);

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
