/* A write into the free-list link of a block another thread released into
 * its page (freed there, then let go by that thread's quarantine), found by
 * ebb_debug_verify() on the page's remote-free list: the report names the
 * block holding the changed link, not only its page (review finding,
 * suspicion 3). */
#include <pthread.h>

#include "ebb.h"
#include "fault.h"

static char *victim;

static void *free_elsewhere(void *arg)
{
    (void)arg;
    free(victim);
    for (int i = 0; i < 200; i++) /* 20 MB: pushes it out of the quarantine */
        free(malloc(100000));
    return NULL;
}

int main(void)
{
    enum { N = 16 };
    char *b[N];
    for (int i = 0; i < N; i++)
        b[i] = allocate_victim(2500);
    victim = b[N / 2];
    announce(victim);
    pthread_t t;
    if (pthread_create(&t, NULL, free_elsewhere, NULL) != 0 || pthread_join(t, NULL) != 0)
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
