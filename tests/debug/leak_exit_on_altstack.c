/* exit() from a signal handler running on an alternate signal stack that
 * lies in the program's .bss, beside data: the leak report skips the dead
 * part of the stack it runs on, below its stack pointer, and used to skip
 * the whole mapping below it, the program's data there included. Here the
 * only pointers to two blocks lie just below the alternate stack (one
 * struct: `holder` comes before `stack`), and a third block is lost. Expected: two
 * still reachable, one lost. */
#include "fault.h"

#include <signal.h>
#include <unistd.h>

/* The padding puts `holder` past the page .bss shares with .data (mapped
 * from the file), in the anonymous mapping of the rest of .bss, where the
 * stack is. */
static struct {
    char padding[8192];
    char *holder[2];
    char stack[1 << 16];
} bss;

__attribute__((noinline)) static void *allocate_reached_via_mapping(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

static void leave(int sig)
{
    (void)sig;
    printf("survived\n"); /* exit is not async-signal-safe; nothing else runs here */
    exit(0);
}

/* Apart from main, so that no copy of the two pointers stays in its frame. */
__attribute__((noinline)) static void fill_holder(void)
{
    bss.holder[0] = allocate_reached_via_mapping(100);
    bss.holder[1] = allocate_reached_via_mapping(200);
    __asm__ volatile("" ::: "memory");
}

int main(void)
{
    fill_holder();
    char *lost = allocate_victim(300);
    announce(lost);
    lost = NULL;
    scrub_stack();
    stack_t ss = {.ss_sp = bss.stack, .ss_size = sizeof bss.stack};
    struct sigaction sa = {.sa_handler = leave, .sa_flags = SA_ONSTACK};
    if (sigaltstack(&ss, NULL) != 0 || sigaction(SIGUSR1, &sa, NULL) != 0) {
        printf("no alternate stack\n");
        return 2;
    }
    raise(SIGUSR1);
    return 3; /* not reached */
}
