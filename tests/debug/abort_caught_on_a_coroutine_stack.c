/* A SIGABRT handler that siglongjmps out of a report, where the fault was
 * committed on a coroutine's stack, which the program then unmaps (review
 * finding: the aborted call's stack mark stayed set, every later capture on
 * the thread started from that dead frame, and the next malloc crashed with
 * SIGSEGV reading it; on one stack, traces named dead frames instead).
 * After the recovery a block allocated in allocate_after_recovery is freed
 * twice: its report must name that function. The handler itself allocates
 * in allocate_in_handler and keeps the block nowhere: the leak report must
 * trace it from the handler, not from the free the abort interrupted. */
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>

#include "coroutine.h"
#include "fault.h"

static sigjmp_buf back;
static char *volatile sink;
static char *volatile from_handler;

__attribute__((noinline)) static char *allocate_in_handler(size_t n)
{
    char *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

static void on_abort(int sig)
{
    (void)sig;
    if (from_handler == NULL)
        from_handler = allocate_in_handler(55);
    siglongjmp(back, 1);
}

static void coroutine_body(void)
{
    sink = malloc(24);
    free(sink);
    free(sink);
}

__attribute__((noinline)) static char *allocate_after_recovery(size_t n)
{
    char *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

int main(void)
{
    signal(SIGABRT, on_abort);
    size_t size = 256 << 10;
    char *stack = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (stack == MAP_FAILED)
        return 2;
    volatile int caught = 0;
    if (sigsetjmp(back, 1) == 0)
        coroutine_run(stack, size, coroutine_body);
    else
        caught++;
    munmap(stack, size);
    from_handler = NULL; /* lost: only the leak report knows it now */
    char *p = allocate_after_recovery(40);
    if (sigsetjmp(back, 1) == 0) {
        free(p);
        free(p);
    } else {
        caught++;
    }
    printf("caught=%d\n", (int)caught);
    scrub_stack();
    return survived();
}
