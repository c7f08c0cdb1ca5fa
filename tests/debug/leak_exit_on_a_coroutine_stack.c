/* Two coroutines (makecontext) whose stacks a coroutine library carved from
 * one mapping: A holds two blocks in its suspended frame and yields for
 * good; B, whose stack lies above A's, calls exit(). The report runs on a
 * stack the C library does not know, and left out the whole mapping below
 * its stack pointer, A's stack with it: the two blocks read as lost.
 * Expected: those two still reachable, the 300-byte victim lost. */
#include "fault.h"

#include <sys/mman.h>
#include <ucontext.h>

#define STACK_BYTES ((size_t)64 << 10)

static ucontext_t main_ctx, a_ctx, b_ctx;

__attribute__((noinline)) static void *allocate_reached_via_mapping(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

static void coroutine_a(void)
{
    char *volatile first = allocate_reached_via_mapping(100);
    char *volatile second = allocate_reached_via_mapping(200);
    swapcontext(&a_ctx, &main_ctx); /* suspended for good */
    printf("%p %p\n", (void *)first, (void *)second);
}

static void coroutine_b(void)
{
    printf("survived\n");
    fflush(stdout);
    exit(0);
}

int main(void)
{
    char *pool = mmap(NULL, 2 * STACK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pool == MAP_FAILED) {
        printf("no coroutine stacks (mmap)\n");
        return 2;
    }
    char *lost = allocate_victim(300);
    announce(lost);
    lost = NULL;
    scrub_stack();
    getcontext(&a_ctx);
    a_ctx.uc_stack.ss_sp = pool;
    a_ctx.uc_stack.ss_size = STACK_BYTES;
    a_ctx.uc_link = &main_ctx;
    makecontext(&a_ctx, coroutine_a, 0);
    getcontext(&b_ctx);
    b_ctx.uc_stack.ss_sp = pool + STACK_BYTES;
    b_ctx.uc_stack.ss_size = STACK_BYTES;
    b_ctx.uc_link = &main_ctx;
    makecontext(&b_ctx, coroutine_b, 0);
    swapcontext(&main_ctx, &a_ctx);
    swapcontext(&main_ctx, &b_ctx);
    return 3; /* not reached: B exits the process */
}
