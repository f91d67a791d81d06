// kernels/fatal.h — how library code stops on an error it cannot return (an allocation inside
// an op that has no error path). Never a bare exit(): in a data-parallel job that would leave
// the other ranks waiting in a collective, so the trainer installs a handler that takes the
// whole job down (dist/comm.h, Comm.abort); without one the process exits with status 1.
#ifndef MINGPT_FATAL_H
#define MINGPT_FATAL_H

// Called with the message; must not return.
typedef void (*FatalHandler)(const char *msg, void *ctx);

// Installs h (NULL: back to printing and exit(1)). Process-wide, as a signal handler is.
void fatal_set_handler(FatalHandler h, void *ctx);

// Formats "mingpt: error: <message>", then calls the handler; does not return.
void fatal_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
