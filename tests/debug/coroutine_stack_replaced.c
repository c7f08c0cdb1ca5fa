/*
 * A coroutine's stack replaced by a smaller one at the same address: the
 * capture cache must not serve the first chain's trace, nor read the part of
 * the stack that is gone.
 *
 * Run 1 allocates in `leaf`, called from first_owner through `padded`, on a
 * coroutine stack whose top is T. Run 2 uses the same mapping with its top
 * 16 KiB made inaccessible, so the coroutine starts 16 KiB lower, and calls
 * `leaf` from second_owner with 16 KiB less alloca in `padded`: `leaf` runs
 * at the same stack address as in run 1 and calls malloc from the same
 * return address, so the allocation's capture-cache key is the same. The
 * frames above `leaf` are not: padded's caller's return address lay in the
 * top 16 KiB in run 1. The cache used to re-read that slot: SIGSEGV.
 * (alloca_chain_changed.c is the same on a stack left readable, where the
 * old slots served the first chain's trace.) The block of run 2 is then
 * freed twice; its allocation trace must name second_owner.
 */
#include <alloca.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ebb.h"
#include "coroutine.h"
#include "fault.h"

#define STACK_BYTES ((size_t)256 << 10)
#define CUT_BYTES   ((size_t)16 << 10)
#define PAD_BYTES   ((size_t)64 << 10)

static int probing;         /* leaf only records where it runs */
static uintptr_t leaf_at;   /* leaf's frame address in the last run */
static size_t pad;          /* padded's alloca */
static char *block;

__attribute__((noinline)) static void leaf(void)
{
    if (probing)
        leaf_at = (uintptr_t)__builtin_frame_address(0);
    else
        block = malloc(48);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void padded(size_t n)
{
    volatile char *room = alloca(n);
    room[0] = 0;
    leaf();
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void first_owner(void)
{
    padded(pad);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void second_owner(void)
{
    padded(pad);
    __asm__ volatile("" ::: "memory");
}

int main(void)
{
    char *stack = mmap(NULL, STACK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
    if (stack == MAP_FAILED)
        return 2;
    pad = PAD_BYTES;
    probing = 1;
    coroutine_run(stack, STACK_BYTES, first_owner);
    uintptr_t first_at = leaf_at;
    probing = 0;
    for (int i = 0; i < 3; i++) { /* the first is a miss that fills the cache */
        coroutine_run(stack, STACK_BYTES, first_owner);
        free(block);
    }

    if (mprotect(stack + STACK_BYTES - CUT_BYTES, CUT_BYTES, PROT_NONE) != 0)
        return 2;
    /* Find the pad that puts leaf where it ran before. */
    pad = PAD_BYTES - CUT_BYTES;
    probing = 1;
    coroutine_run(stack, STACK_BYTES - CUT_BYTES, second_owner);
    pad += first_at - leaf_at; /* leaf ran lower by that much */
    coroutine_run(stack, STACK_BYTES - CUT_BYTES, second_owner);
    if (leaf_at != first_at) {
        printf("leaf ran at %#lx, not %#lx as in run 1\n", (unsigned long)leaf_at,
               (unsigned long)first_at);
        return 3;
    }
    probing = 0;
    coroutine_run(stack, STACK_BYTES - CUT_BYTES, second_owner);
    announce(block);
    free(block);
    free(block);
    return survived();
}
