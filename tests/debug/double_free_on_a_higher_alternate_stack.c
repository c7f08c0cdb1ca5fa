/* A double free in a signal handler that runs on an alternate stack lying
 * above the interrupted stack (here an array in main's frame): every
 * interrupted frame's CFA is below the handler's, and the capture took each
 * of them for a frame inside ebb and started its trace over (review
 * finding: both traces held only the C library's start frames, or
 * nothing). Expected: this call's trace reaches main through raise, and the
 * allocation's starts in allocate_victim. */
#include "fault.h"

#include <signal.h>

static void handler(int sig)
{
    (void)sig;
    char *p = allocate_victim(24);
    announce(p);
    free(p);
    free(p);
}

__attribute__((noinline)) static void level2(void)
{
    raise(SIGUSR1);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void level1(void)
{
    level2();
    __asm__ volatile("" ::: "memory");
}

int main(void)
{
    char alt[65536]; /* above level1's and level2's frames */
    stack_t ss = {.ss_sp = alt, .ss_size = sizeof alt, .ss_flags = 0};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = SA_ONSTACK;
    if (sigaltstack(&ss, NULL) != 0 || sigaction(SIGUSR1, &sa, NULL) != 0)
        return 2;
    level1();
    __asm__ volatile("" : : "r"(alt) : "memory");
    return survived();
}
