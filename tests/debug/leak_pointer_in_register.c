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
 *   leak_pointer_in_register stopped  a tracer (a child process) holds the
 *                                     holder stopped, as a debugger that
 *                                     stopped one thread does: it cannot
 *                                     answer, the report must not wait for
 *                                     it for ever, and says so
 * Preloaded with tests/os_shim.c (OS_SHIM=task_cut), the listing of
 * /proc/self/task fails after the main thread's entry: the holder is not
 * asked, and the report must say so.
 */
#include "fault.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>

__attribute__((noinline)) static void *allocate_reached_via_register(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

static uintptr_t held[2]; /* a moment only: the thread moves them to registers */
static atomic_int holding, holder_tid;
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
                     "mov x11, sp\n\t" /* cmp takes no sp as its second operand */
                     "sub x10, x11, #8192\n"
                     "2:\n\t"
                     "str xzr, [x10], #8\n\t"
                     "cmp x10, x11\n\t"
                     "b.lo 2b\n\t"
                     "yield\n\t"
                     "b 1b"
                     :
                     : "r"(held), "r"(&holding)
                     : "x9", "x10", "x11", "x19", "x20", "cc", "memory");
#endif
    __builtin_unreachable();
}

static void *holder(void *arg)
{
    (void)arg;
    atomic_store(&holder_tid, (int)syscall(SYS_gettid));
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

/* Stop thread `tid` from a child process that traces it (PTRACE_SEIZE,
 * then PTRACE_INTERRUPT) and keeps it stopped until this process is gone
 * (the pipe's write end, this process's, is closed at its exit); when the
 * tracer exits, the thread is let go. 0 once it is stopped. */
static int stop_from_a_tracer(int tid)
{
    int ready[2], gone[2];
    if (pipe(ready) != 0 || pipe(gone) != 0)
        return -1;
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0); /* Yama's ptrace_scope 1; else fails */
    pid_t tracer = fork();
    if (tracer < 0)
        return -1;
    if (tracer == 0) {
        close(ready[0]);
        close(gone[1]);
        int status;
        char ok = ptrace(PTRACE_SEIZE, tid, 0, 0) == 0 && ptrace(PTRACE_INTERRUPT, tid, 0, 0) == 0 &&
                          waitpid(tid, &status, __WALL) == tid && WIFSTOPPED(status)
                      ? 'y'
                      : 'n';
        if (write(ready[1], &ok, 1) != 1)
            _exit(1);
        char byte;
        while (read(gone[0], &byte, 1) > 0)
            ;
        _exit(0);
    }
    close(ready[1]);
    close(gone[0]);
    char ok = 'n';
    if (read(ready[0], &ok, 1) != 1 || ok != 'y') {
        printf("no ptrace here: the holder could not be stopped\n");
        return -1;
    }
    return 0;
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
    if (strcmp(mode, "stopped") == 0 && stop_from_a_tracer(atomic_load(&holder_tid)) != 0)
        return 2;
    return 0; /* the report runs at exit, the holder still spinning */
}
