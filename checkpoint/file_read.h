// checkpoint/file_read.h — reading a whole input file (a snapshot, a safetensors file) before a
// validated loader parses it, and the loaders' refusal message.
#ifndef MINGPT_FILE_READ_H
#define MINGPT_FILE_READ_H

#include <stddef.h>

// Reads the regular file at path into *buf (malloc'd, caller frees; *len bytes). A FIFO, a
// device or a directory is refused before anything is read (a FIFO would block, /dev/zero never
// end). Returns 0, or 1 with a message in err that starts with `what` ("snapshot"): "cannot open
// snapshot 'p': ...", "snapshot 'p' is not a regular file", out of memory, a short read.
int file_read_regular(const char *path, const char *what, unsigned char **buf, size_t *len, char *err, size_t errlen);

// The same, refusing a file larger than max_bytes before reading it ("<what> 'p' is N bytes,
// more than the limit of M"); errno_out (may be NULL) gets open()'s errno (ENOENT: no such file)
// or 0.
int file_read_capped(const char *path, const char *what, size_t max_bytes, unsigned char **buf, size_t *len,
                     int *errno_out, char *err, size_t errlen);

// Writes "<what> '<name>' is malformed: <fmt...>" into err (a validated loader's refusal) and
// returns 1.
int file_malformed(char *err, size_t errlen, const char *what, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#endif
