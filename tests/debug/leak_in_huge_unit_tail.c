/* A huge block's mapping starts a 4 MiB unit of the segment map; a 2.5 MiB
 * block's mapping ends short of the unit's end, and the kernel is free to
 * place the program's own mappings in the rest. The leak report skipped the
 * whole unit as ebb's, so the pointers in such a mapping were never read: the
 * two blocks kept only there were reported lost (review finding). The program
 * maps there with MAP_FIXED_NOREPLACE to make sure of it, trying a few huge
 * blocks if the rest of a unit is taken already. The two blocks must be
 * still reachable, and the third block lost. */
#include <sys/mman.h>

#include "fault.h"

#define UNIT ((uintptr_t)4 << 20)
#define BLOCK_BYTES ((size_t)5 << 19) /* 2.5 MiB: a huge block */
#define TAIL_BYTES ((size_t)64 << 10)
#define TRIES 8

__attribute__((noinline)) static void *allocate_reached_via_tail(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

void *huge_blocks[TRIES]; /* reachable: a global */

/* A mapping in the unit of `block`, past its end (and so past ebb's mapping,
 * which MAP_FIXED_NOREPLACE does not overwrite), or NULL. */
static void **map_in_unit_tail(const char *block)
{
    uintptr_t unit_end = ((uintptr_t)block & ~(UNIT - 1)) + UNIT;
    uintptr_t at = ((uintptr_t)block + BLOCK_BYTES + TAIL_BYTES - 1) & ~(uintptr_t)(TAIL_BYTES - 1);
    for (; at + TAIL_BYTES <= unit_end; at += TAIL_BYTES) {
        void *p = mmap((void *)at, TAIL_BYTES, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (p == (void *)at)
            return p;
        if (p != MAP_FAILED)
            munmap(p, TAIL_BYTES); /* a kernel that took the flag as a hint */
    }
    return NULL;
}

int main(void)
{
    void **tail = NULL;
    for (int i = 0; i < TRIES && tail == NULL; i++) {
        huge_blocks[i] = malloc(BLOCK_BYTES);
        if (huge_blocks[i] == NULL) {
            printf("no tail mapping: malloc(2.5 MiB) failed\n");
            return 2;
        }
        tail = map_in_unit_tail(huge_blocks[i]);
    }
    if (tail == NULL) {
        printf("no tail mapping: no room between a huge mapping and its unit's end in %d tries\n",
               TRIES);
        return 2;
    }
    printf("tail=%p\n", (void *)tail);
    tail[0] = allocate_reached_via_tail(100); /* the only pointers to these two */
    tail[TAIL_BYTES / sizeof(void *) - 1] = allocate_reached_via_tail(200);
    char *lost = allocate_victim(300);
    announce(lost);
    lost = NULL;
    scrub_stack();
    return survived();
}
