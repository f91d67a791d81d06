// process/signal_thread.c — see signal_thread.h.
#include "process/signal_thread.h"

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static bool g_running = false;

static void served_signals(sigset_t *set) {
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGUSR1);
}

// The receiving thread: the signals unblocked, nothing else to do (pause returns after each
// handler has run).
static void *receive(void *arg) {
    (void)arg;
    sigset_t set;
    served_signals(&set);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    for (;;) pause();
    return NULL;
}

static void start_once(void) {
    sigset_t set, old;
    served_signals(&set);
    pthread_sigmask(SIG_BLOCK, &set, &old);
    pthread_attr_t attr;
    pthread_t th;
    int rc = pthread_attr_init(&attr);
    if (!rc) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, 256 * 1024);   // handlers only set flags; room for AVX-512/AMX frames
        rc = pthread_create(&th, &attr, receive, NULL);
        pthread_attr_destroy(&attr);
    }
    if (rc) {
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        fprintf(stderr, "mingpt: warning: cannot start the signal thread (%s): SIGINT, SIGTERM and SIGUSR1 "
                "are handled on the computing threads\n", strerror(rc));
        return;
    }
    g_running = true;
}

void signal_thread_start(void) {
    pthread_once(&g_once, start_once);
    if (g_running) {
        sigset_t set;
        served_signals(&set);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
    }
}
