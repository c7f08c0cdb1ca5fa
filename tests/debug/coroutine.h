/*
 * coroutine.h — run a function on a stack of the test's own (ucontext), for
 * the capture-cache programs that replace a coroutine's stack at the same
 * address (coroutine_stack_replaced*.c).
 */
#ifndef EBB_TEST_COROUTINE_H
#define EBB_TEST_COROUTINE_H
#include <stddef.h>
#include <ucontext.h>

static ucontext_t coroutine_main_ctx, coroutine_ctx;

/* Run fn on [stack, stack + size) until it returns. */
static void coroutine_run(char *stack, size_t size, void (*fn)(void))
{
    getcontext(&coroutine_ctx);
    coroutine_ctx.uc_stack.ss_sp = stack;
    coroutine_ctx.uc_stack.ss_size = size;
    coroutine_ctx.uc_link = &coroutine_main_ctx;
    makecontext(&coroutine_ctx, fn, 0);
    swapcontext(&coroutine_main_ctx, &coroutine_ctx);
}
#endif
