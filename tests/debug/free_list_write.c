/* A write into the link of a block on ebb's free list (the word just before a
 * freed block's start, once the quarantine let it go): reported at the next
 * allocation from that page, not a crash. */
#include <malloc.h>

#include "fault.h"

int main(void)
{
    char *keep = allocate_victim(64); /* keeps the page in use through the trim */
    char *p = allocate_victim(64);
    char *q = allocate_victim(64);
    announce(q);
    free(p);
    free(q);
    malloc_trim(0); /* the quarantine releases both */
    /* q's block starts 48 bytes before q (ebb's debug header): its first word
     * is the free-list link. */
    *(volatile uintptr_t *)(q - 48) = 0x4141414141414141ull;
    for (int i = 0; i < 4; i++)
        (void)malloc(64);
    free(keep);
    return survived();
}
