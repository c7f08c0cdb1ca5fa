/* A SIGABRT handler that goes on after ebb's report: ebb_debug_verify finds
 * an overflow and aborts, and the handler then frees the block ("free") or
 * calls exit ("exit"). verify held the block and a heap's lock when it
 * aborted: the handler's free waited for the block forever, and exit's leak
 * report for the lock. Now verify lets go of the block before it aborts,
 * nothing is reported at exit once a report aborts, and a second fault
 * found while aborting (the free sees the overflow too) ends the process. */
#include <signal.h>
#include <unistd.h>

#include "ebb.h"
#include "fault.h"

static char *volatile victim;
static int mode_free;

static void on_abort(int sig)
{
    (void)sig;
    static const char msg[] = "handler: going on\n";
    if (write(1, msg, sizeof msg - 1) < 0)
        _exit(5);
    if (mode_free)
        free(victim);
    exit(3);
}

int main(int argc, char **argv)
{
    mode_free = argc > 1 && strcmp(argv[1], "free") == 0;
    signal(SIGABRT, on_abort);
    victim = allocate_victim(24);
    announce(victim);
    victim[24] = 'X';
    ebb_debug_verify();
    return survived();
}
