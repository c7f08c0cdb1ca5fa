/*
 * Two call chains that meet the allocator at the same stack address with
 * the same return address into the allocating function, but differ above
 * it: the capture cache must not serve the first chain's trace to the
 * second.
 *
 * Chain 1: main -> outer(small alloca) -> first_owner -> padded(big alloca)
 * -> leaf -> malloc. Chain 2: main -> outer(4 KiB more alloca) ->
 * second_owner -> padded(alloca that puts leaf where it ran in chain 1) ->
 * leaf. outer calls the owner through one call site and main calls outer
 * through one, so every return address is the same in both chains except
 * the one into the owner. In chain 2 the slots where chain 1's return
 * addresses into first_owner and outer lay are inside outer's larger alloca,
 * never written, so they still hold chain 1's values: a cache that re-read
 * chain 1's slots found them all unchanged and answered first_owner. (The
 * frees happen in leaf, below those slots, so nothing overwrites them.)
 * The block of chain 2 is then freed twice; its allocation trace must name
 * second_owner.
 */
#include <alloca.h>

#include "ebb.h"
#include "fault.h"

#define OUTER_BYTES ((size_t)1 << 10)
#define SHIFT_BYTES ((size_t)4 << 10)
#define PAD_BYTES   ((size_t)16 << 10)

static int probing;        /* leaf only records where it runs */
static uintptr_t leaf_at;  /* leaf's frame address in the last run */
static char *block;

__attribute__((noinline)) static void leaf(void)
{
    if (probing) {
        leaf_at = (uintptr_t)__builtin_frame_address(0);
    } else {
        char *previous = block;
        block = malloc(48);
        free(previous);
    }
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void padded(size_t n)
{
    volatile char *room = alloca(n);
    room[0] = 0;
    leaf();
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void first_owner(size_t pad)
{
    padded(pad);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void second_owner(size_t pad)
{
    padded(pad);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void outer(size_t room_bytes, void (*owner)(size_t), size_t pad)
{
    volatile char *room = alloca(room_bytes);
    room[0] = 0;
    owner(pad);
    __asm__ volatile("" ::: "memory");
}

int main(void)
{
    typedef struct {
        size_t room;
        void (*owner)(size_t);
        size_t pad;
    } run_t;
    const run_t chain1 = {OUTER_BYTES, first_owner, PAD_BYTES};
    run_t chain2 = {OUTER_BYTES + SHIFT_BYTES, second_owner, PAD_BYTES - SHIFT_BYTES};

    /* Where leaf runs in chain 1, and the pad that puts it there in chain 2,
     * found before any allocation. */
    probing = 1;
    outer(chain1.room, chain1.owner, chain1.pad);
    uintptr_t first_at = leaf_at;
    outer(chain2.room, chain2.owner, chain2.pad);
    chain2.pad -= first_at - leaf_at; /* leaf ran lower by that much */
    outer(chain2.room, chain2.owner, chain2.pad);
    if (leaf_at != first_at) {
        printf("leaf ran at %#lx, not %#lx as in chain 1\n", (unsigned long)leaf_at,
               (unsigned long)first_at);
        return 3;
    }
    probing = 0;
    /* Chain 1 four times (the first fills the cache, the others hit it),
     * then chain 2, from one call site, so outer's return address is the
     * same. */
    const run_t *volatile order[5] = {&chain1, &chain1, &chain1, &chain1, &chain2};
    for (int i = 0; i < 5; i++) { /* volatile: the compiler cannot split the call */
        const run_t *r = order[i];
        outer(r->room, r->owner, r->pad);
    }
    announce(block);
    free(block);
    free(block);
    return survived();
}
