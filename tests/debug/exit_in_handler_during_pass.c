/* exit() from a signal handler that interrupted ebb's own purge pass in the
 * same thread: the reports at exit (EBB_STATS, debug mode's leak report)
 * wait for the pass to end, which it cannot while its thread runs the
 * handler: the process hung at exit. Run under
 * `strace -e inject=madvise:signal=USR1`, which raises SIGUSR1 at each
 * madvise: the handler exits when that madvise came from malloc_trim's pass
 * (trimming is set), and returns otherwise. Prints "trimming" before the
 * trim and "survived" if the handler never ran during it.
 * Which lock the interrupted trim holds at its first madvise: by default,
 * the pass's (stdout's buffer is made first, on memory nothing wrote before,
 * so the heap's own trim has nothing to give back); with the argument
 * "heap-lock", the heap's. Then one block of 5 KiB lives on a page that
 * took slices the big blocks wrote: the heap's trim gives back the blocks
 * that page has not carved yet (page.c, page_trim_tail), under the heap's
 * lock, before the pass. The leak report at exit allocated there (the C
 * library's pthread_getattr_np) before it checked for ebb's locks, and
 * waited for ever for that lock (stop 42). */
#include "fault.h"

#include <malloc.h>
#include <signal.h>
#include <stdbool.h>
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

int main(int argc, char **argv)
{
    struct sigaction sa = {.sa_handler = maybe_leave};
    if (sigaction(SIGUSR1, &sa, NULL) != 0)
        return 2;
    bool heap_lock = argc > 1 && strcmp(argv[1], "heap-lock") == 0;
    printf("start\n");
    fflush(stdout);
    enum { N = 256 };
    static char *blocks[N];
    for (int i = 0; i < N; i++) {
        blocks[i] = malloc(64 << 10);
        memset(blocks[i], 1, 64 << 10);
    }
    for (int i = 0; i < N; i++)
        free(blocks[i]);
    static char *keep; /* reachable: nothing to report */
    if (heap_lock) {
        keep = malloc(5 << 10); /* a class of its own: stdout's buffer is 4 KiB */
        memset(keep, 3, 5 << 10);
    }
    printf("trimming\n");
    fflush(stdout);
    trimming = 1;
    malloc_trim(0); /* its pass purges the pages just freed: madvise */
    trimming = 0;
    return survived();
}
