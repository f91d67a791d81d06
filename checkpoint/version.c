// checkpoint/version.c — see version.h.
#include "checkpoint/version.h"

#ifndef MINGPT_GIT_COMMIT
#define MINGPT_GIT_COMMIT "unknown"
#endif

const char *version_commit(void) { return MINGPT_GIT_COMMIT; }
