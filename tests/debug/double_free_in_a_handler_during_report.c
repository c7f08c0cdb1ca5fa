/* A signal handler commits a fault while its thread writes the report of
 * another one. The report runs addr2line to name the frames, and the exit of
 * that child raises SIGCHLD in the middle of it; the program's SIGCHLD
 * handler frees a block freed before. That second report must not wait for
 * the report lock its own thread holds (review finding: the process hung
 * before even the first report was written). Expected: both reports, the
 * handler's a short one; then abort, or with EBB_DEBUG_ON_ERROR=continue
 * "survived". With "at-exit" the fault interrupts the leak report instead. */
#include <signal.h>

#include "fault.h"

static char *volatile stale;
static volatile sig_atomic_t handled;

static void on_child(int sig)
{
    (void)sig;
    if (handled++ == 0)
        free(stale); /* the second fault, inside the first one's report */
}

static void *volatile lost;

int main(int argc, char **argv)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_child;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGCHLD, &sa, NULL);
    stale = allocate_victim(40);
    free(stale);
    if (argc > 1 && strcmp(argv[1], "at-exit") == 0) {
        /* The fault comes during the leak report instead, which symbolizes
         * the lost block's trace with addr2line; it must abort. */
        lost = allocate_victim(123);
        lost = NULL;
        return 0;
    }
    char *p = allocate_victim(100);
    printf("victim=%p\n", (void *)p);
    fflush(stdout);
    free(p);
    free(p); /* the first fault: its report runs addr2line */
    printf("survived handled=%d\n", (int)handled);
    return 0;
}
