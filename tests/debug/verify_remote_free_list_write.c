/* A write into the free-list link of a block another thread released into
 * its page (freed there, then let go by that thread's quarantine), found by
 * ebb_debug_verify() on the page's remote-free list: the report names the
 * block holding the changed link, not only its page (review finding,
 * suspicion 3). */
#include "ebb.h"
#include "fault.h"

int main(void)
{
    enum { N = 16 };
    char *b[N];
    for (int i = 0; i < N; i++)
        b[i] = allocate_victim(2500);
    char *victim = b[N / 2];
    announce(victim);
    if (free_on_another_thread(victim) != 0)
        return 1;
    /* The block starts 48 bytes before the pointer (ebb's debug header): its
     * first word is now the remote-free list's link. */
    volatile uintptr_t *link = (volatile uintptr_t *)(victim - 48);
    uintptr_t was = *link;
    *link = 0x4141414141414141ull;
    size_t problems = ebb_debug_verify();
    printf("problems=%zu\n", problems);
    *link = was; /* repaired: what the program allocates later, and its exit, meet no
                    second report */
    for (int i = 0; i < N; i++)
        if (b[i] != victim)
            free(b[i]);
    return survived();
}
