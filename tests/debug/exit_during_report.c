/* A thread makes one double free report after another (run with
 * EBB_DEBUG_ON_ERROR=continue) and is interrupted by SIGTERM, whose handler
 * calls exit: the leak report at exit must not wait for the report lock its
 * own thread holds. A second thread is cancelled between its reports: a
 * report is no cancellation point, so the lock is never left held. */
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "fault.h"

static void on_term(int sig)
{
    (void)sig;
    exit(0);
}

static void *report_until_cancelled(void *unused)
{
    (void)unused;
    for (;;) {
        char *p = allocate_victim(24);
        free(p);
        free(p);
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL); /* a cancellation point */
    }
    return NULL;
}

static void *terminate_soon(void *unused)
{
    (void)unused;
    nanosleep(&(struct timespec){.tv_nsec = 300000000}, NULL);
    kill(getpid(), SIGTERM);
    return NULL;
}

int main(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, report_until_cancelled, NULL) != 0)
        return 2;
    nanosleep(&(struct timespec){.tv_nsec = 300000000}, NULL);
    pthread_cancel(t);
    pthread_join(t, NULL);
    printf("cancelled\n");
    fflush(stdout);
    /* SIGTERM only for this thread, which reports from now on. */
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &term, NULL);
    if (pthread_create(&t, NULL, terminate_soon, NULL) != 0)
        return 3;
    pthread_sigmask(SIG_UNBLOCK, &term, NULL);
    signal(SIGTERM, on_term);
    for (;;) {
        char *p = allocate_victim(24);
        free(p);
        free(p);
    }
}
