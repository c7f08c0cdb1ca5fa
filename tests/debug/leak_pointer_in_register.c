/* exit() while another thread holds the only pointers to two blocks in its
 * registers: the leak report reads the registers of the threads still
 * running (a signal makes each save them), and used to read only their
 * stacks, so the two blocks were listed lost. A third block is lost.
 * Expected: two still reachable, one lost.
 *
 *   leak_pointer_in_register          the thread takes signals
 *   leak_pointer_in_register blocked  it blocks them all: its registers
 *                                     cannot be read, the report says so
 *                                     and counts the two blocks lost
 *   leak_pointer_in_register no-free-signal
 *                                     every real-time signal has an action
 *                                     of the program's: none to ask with
 *   leak_pointer_in_register descriptors=N
 *                                     the process has N file descriptors
 *                                     left at exit (use_up_descriptors)
 */
#include "fault.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

__attribute__((noinline)) static void *allocate_reached_via_register(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

static uintptr_t held[2]; /* a moment only: the thread moves them to registers */
static atomic_int holding;
static int block_signals;

/* Load the two pointers into callee-saved registers, clear the only copies
 * in memory, say so, and spin for ever, clearing the 8 KiB below the stack
 * pointer all the time: the kernel saves the registers there to run the
 * report's signal handler, and the report scans this stack whole (found
 * there, the blocks would pass this test with no register read at all:
 * review finding). tests/test_os.c checks the registers' copy itself. */
__attribute__((noinline, noreturn)) static void spin_holding(void)
{
#if defined(__x86_64__)
    __asm__ volatile("mov (%0), %%r12\n\t"
                     "movq $0, (%0)\n\t"
                     "mov 8(%0), %%r13\n\t"
                     "movq $0, 8(%0)\n\t"
                     "movl $1, (%1)\n"
                     "1:\n\t"
                     "lea -8192(%%rsp), %%rdi\n\t" /* scrub the dead stack: the */
                     "mov $1024, %%ecx\n\t"        /* signal's frame, which holds */
                     "xor %%eax, %%eax\n\t"        /* r12 and r13 too, must not */
                     "rep stosq\n\t"               /* stay there for the stack */
                     "pause\n\t"                   /* scan to find */
                     "jmp 1b"
                     :
                     : "r"(held), "r"(&holding)
                     : "rax", "rcx", "rdi", "r12", "r13", "memory");
#elif defined(__aarch64__)
    __asm__ volatile("ldr x19, [%0]\n\t"
                     "str xzr, [%0]\n\t"
                     "ldr x20, [%0, #8]\n\t"
                     "str xzr, [%0, #8]\n\t"
                     "mov w9, #1\n\t"
                     "str w9, [%1]\n"
                     "1:\n\t"
                     "sub x10, sp, #8192\n"
                     "2:\n\t"
                     "str xzr, [x10], #8\n\t"
                     "cmp x10, sp\n\t"
                     "b.lo 2b\n\t"
                     "yield\n\t"
                     "b 1b"
                     :
                     : "r"(held), "r"(&holding)
                     : "x9", "x10", "x19", "x20", "cc", "memory");
#endif
    __builtin_unreachable();
}

static void *holder(void *arg)
{
    (void)arg;
    if (block_signals) {
        sigset_t all;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, NULL);
    }
    held[0] = (uintptr_t)allocate_reached_via_register(100);
    held[1] = (uintptr_t)allocate_reached_via_register(200);
    scrub_stack(); /* stale copies from inside malloc */
    spin_holding();
}

int main(int argc, char **argv)
{
#if !defined(__x86_64__) && !defined(__aarch64__)
    printf("no register test on this architecture\n");
    return 2;
#endif
    const char *mode = argc > 1 ? argv[1] : "";
    block_signals = strcmp(mode, "blocked") == 0;
    char *lost = allocate_victim(300);
    announce(lost);
    lost = NULL;
    scrub_stack();
    pthread_t t;
    if (pthread_create(&t, NULL, holder, NULL) != 0) {
        printf("no register test (pthread_create)\n");
        return 2;
    }
    while (!atomic_load(&holding))
        ;
    if (strcmp(mode, "no-free-signal") == 0) {
        for (int sig = SIGRTMIN; sig <= SIGRTMAX; sig++)
            signal(sig, SIG_IGN);
    }
    if (strncmp(mode, "descriptors=", 12) == 0 && use_up_descriptors(atoi(mode + 12)) != 0)
        return 2;
    return 0; /* the report runs at exit, the holder still spinning */
}
