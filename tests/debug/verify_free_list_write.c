/* A write into the free-list link of a block the quarantine let go, found by
 * ebb_debug_verify(): the report names the block holding the changed link
 * (its user pointer, size and traces), as the allocation path's report does,
 * not only its page (review finding, suspicion 3: "corrupted free list of
 * <page start>" with the bad value, nothing on the block). */
#include "ebb.h"
#include "fault.h"

int main(void)
{
    char *keep = allocate_victim(2500); /* keeps the page in use through the trim */
    char *p = allocate_victim(2500);
    announce(p);
    free(p);
    malloc_trim(0); /* the quarantine releases it onto its page's free list */
    /* p's block starts 48 bytes before p (ebb's debug header): its first word
     * is the free-list link. */
    volatile uintptr_t *link = (volatile uintptr_t *)(p - 48);
    uintptr_t was = *link;
    *link = 0x4141414141414141ull;
    size_t problems = ebb_debug_verify();
    printf("problems=%zu\n", problems);
    *link = was; /* repaired: what the program allocates later, and its exit, meet no
                    second report */
    free(keep);
    return survived();
}
