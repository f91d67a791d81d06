// checkpoint/atomic_file.h — files that appear whole or not at all (snapshots, exported models).
//
// The bytes go to `<path>.tmp.<pid>` in the same directory; atomic_commit flushes and fsyncs it,
// renames it over path and fsyncs the directory, so a crash (kill -9, power loss) leaves either
// the previous file at path or the new one, never a torn one. Any failure (disk full, a file
// size limit (EFBIG; the binary ignores SIGXFSZ), a read-only directory) removes the temporary
// file and leaves path as it was. Temporary files of earlier writers of the same path that no
// longer run (killed mid-write) are removed when a new write starts.
//
// Only a regular file is replaced. A path that is a symbolic link is resolved first (the link
// stays and points to the new file); a character device or a FIFO (`--out /dev/stdout`, a pipe)
// is written directly, without a temporary file, rename or fsync; a directory, a block device or
// a socket is refused. A rename never replaces anything but a regular file.
#ifndef MINGPT_ATOMIC_FILE_H
#define MINGPT_ATOMIC_FILE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

// atomic_commit's result when the write was cancelled (see `cancel` below).
#define ATOMIC_CANCELLED 2

typedef struct {
    FILE *f;
    char path[4096], tmp[4120];
    int failed;                            // errno of the first failed write (0: none)
    int direct;                            // path is a character device or a FIFO: written in place
    uint32_t crc;                          // CRC32 (zlib) of every byte written so far
    // When set and *cancel becomes non-zero (a signal handler sets it), the write stops at the
    // next chunk of 1 MiB and atomic_commit returns ATOMIC_CANCELLED without renaming.
    const volatile sig_atomic_t *cancel;
} AtomicFile;

// Opens the temporary file for path (the device or FIFO itself, see above). Returns 0, or non-zero
// with "cannot write '<tmp>': <reason>" (or "cannot write '<path>': it is a directory, not a
// regular file, a character device or a FIFO") in err.
int atomic_open(AtomicFile *a, const char *path, const volatile sig_atomic_t *cancel, char *err, size_t errlen);

// Appends n bytes (in chunks of 1 MiB, checking the cancel flag between them). Errors are kept
// for atomic_commit.
void atomic_write(AtomicFile *a, const void *p, size_t n);

// Finishes the file: flush, fsync, close, rename over path, fsync of the directory. Returns 0;
// ATOMIC_CANCELLED; or 1 with the reason naming the file in err. Unless it returned 0 the
// temporary file is gone and path is untouched.
int atomic_commit(AtomicFile *a, char *err, size_t errlen);

// Removes `<path>.tmp.<pid>` files whose writer no longer runs (kill(pid, 0) fails with ESRCH);
// a live writer's file is left alone. Same-host writers only (mingpt's rank 0 writes).
void atomic_remove_stale(const char *path);

// 1 when paths a and b name the same existing file: the same device and inode after the paths
// are resolved (`./d/../s.bin`, a symbolic link and a hard link to one file all count); 0 when
// either does not exist or they are different files.
int same_file(const char *a, const char *b);

// The check every command that writes a file makes before writing: when output (out_what, e.g.
// "--out") is the same file as input (in_what, e.g. "--snapshot"), err gets "<out_what> '<output>'
// is the same file as <in_what> '<input>': writing it would destroy the input" and it returns 1;
// else 0. Either path may be NULL or empty (nothing to compare).
int output_is_input(const char *output, const char *out_what, const char *input, const char *in_what, char *err,
                    size_t errlen);

#endif
