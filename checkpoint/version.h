// checkpoint/version.h — the version of mingpt, recorded in every snapshot it writes (record
// WRTR) and in exported models' metadata. Raised with each release of the snapshot or command
// set. `mingpt --version` prints it too (app/version.h).
#ifndef MINGPT_VERSION_H
#define MINGPT_VERSION_H

#define MINGPT_VERSION "mingpt 0.11.0"

// The git commit this mingpt was built from: `git describe --always --dirty` when it was built
// (the Makefile passes it to checkpoint/version.c only, so a new commit recompiles one file), or
// "unknown" when built outside git.
const char *version_commit(void);

#endif
