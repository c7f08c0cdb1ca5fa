/* A SIGABRT handler that goes on after ebb's report: ebb_debug_verify finds
 * an overflow and aborts, and the handler then frees another block and
 * calls exit. verify held the faulty block and a heap's lock when it
 * aborted (the free could wait for the block forever, and exit's leak
 * report for the lock). Now verify reports only once it holds nothing. */
#include <signal.h>
#include <unistd.h>

#include "ebb.h"
#include "fault.h"

static char *volatile victim, *volatile other;

static void on_abort(int sig)
{
    (void)sig;
    static const char msg[] = "handler: going on\n";
    if (write(1, msg, sizeof msg - 1) < 0)
        _exit(5);
    free(other);
    exit(3);
}

int main(void)
{
    signal(SIGABRT, on_abort);
    other = malloc(100);
    victim = allocate_victim(24);
    announce(victim);
    victim[24] = 'X';
    ebb_debug_verify();
    return survived();
}
