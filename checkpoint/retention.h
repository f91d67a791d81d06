// checkpoint/retention.h — which snapshots a run keeps besides the stable one
// (trainer_config.keep_last, trainer_config.save_best).
//
// The stable file, trainer_config.snapshot_path, always holds the latest snapshot (resume reads
// it). With keep_last K > 1 every save is also kept as `<stem>.iter<N>.bin` (stem: the snapshot
// path without its last extension; N: the iteration), a hard link to the stable file's data (no
// extra space; a copy where the file system has no hard links), and only the K newest numbered
// files are kept: the oldest is deleted after the new one is durable (renamed and its directory
// fsync'ed). K = 1 keeps only the stable file. save_best keeps `<stem>.best.bin`, the snapshot
// with the lowest test loss so far.
#ifndef MINGPT_RETENTION_H
#define MINGPT_RETENTION_H

#include <stddef.h>

// `<stem><suffix>` for the snapshot path (e.g. ".best.bin", ".iter300.bin") into out. Returns 0,
// or -1 when it does not fit.
int retention_path(const char *snapshot_path, const char *suffix, char *out, size_t len);

// After the stable file at snapshot_path was written for iteration `iter`: keeps it as
// `<stem>.iter<iter>.bin` and deletes the oldest numbered files beyond keep_last (never the
// new one). Nothing to do for keep_last <= 1. Returns 0, or -1 with the reason in err (the
// stable file is untouched either way).
int retention_keep(const char *snapshot_path, long iter, int keep_last, char *err, size_t errlen);

#endif
