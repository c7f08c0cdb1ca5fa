/*
 * coroutine_stack_replaced.c with fixed-size frames only: every frame from
 * malloc's caller up has its CFA at a constant offset from its stack pointer,
 * so the capture cache replays it by reading each return address at a fixed
 * distance from the start (src/trace.c, a chain of rsp steps), not by
 * following rbp. (alloca_chain_changed.c and coroutine_stack_replaced.c use
 * alloca, which gives `padded` a frame pointer: they take the rbp path.)
 *
 * Run 1 allocates in `leaf`, called through `middle` from first_owner, whose
 * frame holds 64 KiB, on a coroutine stack whose top is T. Run 2 uses the
 * same mapping with its top 16 KiB made inaccessible, and calls `leaf`
 * through `middle` from second_owner, whose frame holds 48 KiB: `leaf` runs
 * at the same stack address and calls malloc from the same return address
 * (the same capture-cache key), but the slot where run 1 found
 * first_owner's caller lies in the part that is gone. The block of run 2 is
 * freed twice; its allocation trace must name second_owner (review finding,
 * stop 33: the all-rsp replay was exercised only by chains that differ from
 * their first frame).
 */
#include <sys/mman.h>
#include <unistd.h>

#include "ebb.h"
#include "coroutine.h"
#include "fault.h"

#define STACK_BYTES ((size_t)256 << 10)
#define CUT_BYTES   ((size_t)16 << 10)

static int probing;       /* leaf only records where it runs */
static uintptr_t leaf_at; /* leaf's frame address in the last run */
static char *block;

__attribute__((noinline)) static void leaf(void)
{
    volatile char here = 0;
    if (probing)
        leaf_at = (uintptr_t)&here;
    else
        block = malloc(48);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void middle(void)
{
    volatile char room[200];
    room[0] = 0;
    leaf();
    __asm__ volatile("" : : "r"(room) : "memory");
}

__attribute__((noinline)) static void first_owner(void)
{
    volatile char room[64 << 10];
    room[0] = 0;
    middle();
    __asm__ volatile("" : : "r"(room) : "memory");
}

__attribute__((noinline)) static void second_owner(void)
{
    volatile char room[(64 << 10) - CUT_BYTES];
    room[0] = 0;
    middle();
    __asm__ volatile("" : : "r"(room) : "memory");
}

int main(void)
{
    char *stack = mmap(NULL, STACK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
    if (stack == MAP_FAILED)
        return 2;
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
    probing = 1;
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
