// kernels/fatal.c — see fatal.h.
#include "kernels/fatal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static FatalHandler g_handler;
static void *g_ctx;

void fatal_set_handler(FatalHandler h, void *ctx) {
    g_handler = h;
    g_ctx = ctx;
}

void fatal_error(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    int k = snprintf(msg, sizeof msg, "mingpt: error: ");
    vsnprintf(msg + k, sizeof msg - (size_t)k, fmt, ap);
    va_end(ap);
    if (g_handler) g_handler(msg, g_ctx);
    fflush(stdout);
    fprintf(stderr, "%s\n", msg);
    exit(1);
}
