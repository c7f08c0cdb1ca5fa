/* What lies past a huge block in its mapping is ebb's: a cached mapping is
 * handed out as it is for a block up to 1.5x smaller, and its tail keeps what
 * the mapping's last block left there (debug fills cover a huge block's first
 * and last 64 KiB only). The leak report skips it when its walk enters the
 * mapping at the first unit, but a line of /proc/self/maps can start further
 * in: here the program splits the mapping with madvise(MADV_DONTDUMP) on one
 * page of the block. The walk then read the tail as a root, and a stale
 * pointer there kept a lost block "reachable" (review finding). */
#include <sys/mman.h>

#include "fault.h"

#define MiB ((size_t)1 << 20)

void *keep_b; /* reachable */

int main(void)
{
    /* Start the scavenger first: until it runs, a free purges at once. */
    for (int i = 0; i < 2; i++) {
        void *w[8];
        for (int k = 0; k < 8; k++)
            w[k] = malloc(MiB);
        for (int k = 0; k < 8; k++)
            free(w[k]);
    }
    char *lost = allocate_victim(300);
    announce(lost);
    char *a = malloc(16 * MiB);
    if (a == NULL) {
        printf("no reuse: malloc(16 MiB) failed\n");
        return 2;
    }
    ((void *volatile *)a)[(15 * MiB) / sizeof(void *)] = lost; /* never filled: A's middle */
    /* Run with a 20 MiB quarantine: A waits there until 5 MiB more push it
     * out, into the huge cache, its pages as they are. */
    free(a);
    free(malloc(5 * MiB));
    char *b = malloc(11 * MiB); /* A's mapping, as it is */
    if (b != a) {
        printf("no reuse: the 11 MiB block did not get the 16 MiB block's mapping\n");
        return 2;
    }
    memset(b, 0, 11 * MiB);
    keep_b = b;
    uintptr_t page = ((uintptr_t)b + 8 * MiB) & ~(uintptr_t)4095;
    if (madvise((void *)page, 4096, MADV_DONTDUMP) != 0) {
        printf("no reuse: madvise failed\n");
        return 2;
    }
    lost = NULL;
    a = NULL;
    scrub_stack();
    return survived();
}
