/* A write after free into a block of 16 KiB or more that already left the
 * quarantine: such a block waits, checked, in the reuse cache for the next
 * malloc of its size, linked through its first 24 bytes, and the write
 * changes those links. Reported at that malloc, with the block's traces,
 * not a crash (review finding: the malloc followed the link and crashed).
 * Run with EBB_DEBUG_QUARANTINE=256K (the reuse cache holds a quarter). */
#include "fault.h"

int main(void)
{
    enum { PUSHERS = 6 };
    char *p = allocate_victim(20000); /* a 20 KiB block */
    char *push[PUSHERS];
    for (int i = 0; i < PUSHERS; i++)
        push[i] = malloc(40000); /* 40 KiB blocks */
    announce(p);
    free(p);
    /* 20 + 6 x 40 KiB is over the 256 KiB quarantine: p, the oldest,
     * leaves it for the reuse cache. */
    for (int i = 0; i < PUSHERS; i++)
        free(push[i]);
    memset(p, 'A', 24);
    char *again = malloc(20000); /* the next malloc of p's size */
    if (again == NULL)
        return 1;
    memset(again, 0, 20000);
    free(again);
    return survived();
}
