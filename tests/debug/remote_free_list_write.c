/* A write into the free-list link of a block that another thread released
 * into its page (here: that thread freed it, and its quarantine let it go):
 * the link is on the page's list of remote frees, which the owner collects
 * at its next refill. Reported there as a corrupted free list, not followed
 * (review finding: the collection followed it and crashed). */
#include "fault.h"

int main(void)
{
    enum { N = 64 };
    char *b[N];
    for (int i = 0; i < N; i++)
        b[i] = allocate_victim(100);
    char *victim = b[N / 2];
    announce(victim);
    if (free_on_another_thread(victim) != 0)
        return 1;
    /* The block starts 48 bytes before the pointer (ebb's debug header): its
     * first word is now the remote-free list's link. */
    *(volatile uintptr_t *)(victim - 48) = 0x4141414141414141ull;
    for (int i = 0; i < 2000; i++)
        (void)malloc(100);
    return survived();
}
