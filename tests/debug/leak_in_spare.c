/* A lost block whose only pointer lies in spare pages (src/large.c): a freed
 * 12 MiB block held it 6 MiB in, where debug mode's free fill does not reach
 * (it fills only the first and last 64 KiB of a block above 1 MiB), and a
 * 3 MiB block then cut the freed block's cached mapping, leaving the pointer
 * in the tail. Spare pages are not roots: the 100 bytes must be reported
 * lost, from allocate_lost_in_spare. Run with EBB_DEBUG_QUARANTINE=0, so that
 * the free reaches the huge cache at once. */
#include "fault.h"

void *volatile spare_cutter; /* the 3 MiB block, reachable */

__attribute__((noinline)) static void allocate_lost_in_spare(void)
{
    const size_t big = (size_t)12 << 20;
    unsigned char *b = malloc(big);
    memset(b, 1, big);
    *(void *volatile *)(b + (6u << 20)) = malloc(100); /* the only copy */
    free(b);
    spare_cutter = malloc((size_t)3 << 20);
}

int main(void)
{
    allocate_lost_in_spare();
    scrub_stack();
    printf("done\n");
    return 0;
}
