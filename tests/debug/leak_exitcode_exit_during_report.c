/* EBB_DEBUG_LEAK_EXITCODE when the process exits from a signal handler that
 * interrupted one of debug mode's reports in the same thread: the leak report
 * at exit is then not made (the report lock is this thread's), so it cannot
 * say that nothing was lost and must exit with the code, as a report skipped
 * for a lock held elsewhere in ebb does (review of 723bdb3: this one exited
 * with the handler's status, 0). Deterministic: stderr is a pipe this program
 * fills and never reads, so the double free's report blocks in its first
 * write, holding the report lock, until SIGALRM's handler calls exit(0). One
 * block of 100 bytes is lost from lose. */
#include "fault.h"

#include <errno.h>
#include <signal.h>

static void on_alarm(int sig)
{
    (void)sig;
    exit(0);
}

__attribute__((noinline)) static void lose(void)
{
    volatile uintptr_t hidden = (uintptr_t)malloc(100) ^ 0x5555555555555555ull;
    (void)hidden;
}

int main(void)
{
    int p[2];
    if (pipe(p) != 0 || dup2(p[1], 2) != 2)
        return 2;
    /* Full: the report's first write waits for a reader that never comes. */
    int flags = fcntl(2, F_GETFL);
    fcntl(2, F_SETFL, flags | O_NONBLOCK);
    char fill[4096];
    memset(fill, 'x', sizeof fill);
    while (write(2, fill, sizeof fill) > 0 || errno == EINTR)
        ;
    fcntl(2, F_SETFL, flags);
    lose();
    scrub_stack();
    printf("reporting\n");
    fflush(stdout);
    signal(SIGALRM, on_alarm);
    alarm(1);
    char *v = allocate_victim(24);
    free(v);
    free(v); /* the report blocks in its write */
    printf("survived\n");
    return 3;
}
