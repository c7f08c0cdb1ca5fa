/* exit() from a signal handler that interrupted ebb's own purge pass in the
 * same thread: the reports at exit (EBB_STATS, debug mode's leak report)
 * wait for the pass to end, which it cannot while its thread runs the
 * handler: the process hung at exit. Run under
 * `strace -e inject=madvise:signal=USR1`, which raises SIGUSR1 at each
 * madvise: the handler exits when that madvise came from malloc_trim's pass
 * (trimming is set), and returns otherwise. Prints "trimming" before the
 * trim and "survived" if the handler never ran during it. */
#include "fault.h"

#include <malloc.h>
#include <signal.h>
#include <unistd.h>

static volatile sig_atomic_t trimming;

static void maybe_leave(int sig)
{
    (void)sig;
    if (trimming) {
        static const char msg[] = "exit from the handler\n";
        (void)!write(1, msg, sizeof msg - 1);
        exit(0);
    }
}

int main(void)
{
    struct sigaction sa = {.sa_handler = maybe_leave};
    if (sigaction(SIGUSR1, &sa, NULL) != 0)
        return 2;
    enum { N = 256 };
    static char *blocks[N];
    for (int i = 0; i < N; i++) {
        blocks[i] = malloc(64 << 10);
        memset(blocks[i], 1, 64 << 10);
    }
    for (int i = 0; i < N; i++)
        free(blocks[i]);
    printf("trimming\n");
    fflush(stdout);
    trimming = 1;
    malloc_trim(0); /* its pass purges the pages just freed: madvise */
    trimming = 0;
    return survived();
}
