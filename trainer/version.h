// trainer/version.h — the version of mingpt, recorded in every snapshot it writes (record WRTR)
// and in exported models' metadata. Raised with each release of the snapshot or command set.
#ifndef MINGPT_VERSION_H
#define MINGPT_VERSION_H

#define MINGPT_VERSION "mingpt 0.11.0"

#endif
