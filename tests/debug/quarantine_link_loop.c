/* A freed block's quarantine link (in its header, where a stray write past
 * the block below can reach it) turned back: to the block itself
 * (LOOP=self) or to a block freed before it (LOOP=back); or turned to a block
 * of another thread's quarantine FIFO (LOOP=other: the drain took the other
 * thread's blocks, and verify wrote into that FIFO without its lock and
 * wrapped the quarantine's byte count; review of the first fix); or the
 * block's magic zeroed (LOOP=magic: verify named the block before it). Found by
 * ebb_debug_verify (HOW=verify) or by a drain of the whole quarantine
 * (HOW=trim, malloc_trim); both must report the block whose link changed.
 * Review finding: the drain took the same blocks again and again, spinning
 * for good under the quarantine's lock (abort mode) or reporting one block
 * millions of times and releasing it each time (continue). With
 * EBB_DEBUG_ON_ERROR=continue the program then checks that no block is
 * handed out twice: "survived" if all is sound. */
#include <malloc.h>
#include <pthread.h>

#include "ebb.h"
#include "fault.h"

static char *theirs[2]; /* freed by another thread: its own FIFO */

static void *free_theirs(void *arg)
{
    (void)arg;
    free(theirs[0]);
    free(theirs[1]);
    return NULL;
}

int main(void)
{
    const char *loop = getenv("LOOP"), *how = getenv("HOW");
    if (!loop || !how)
        return 2;
    char *a = allocate_victim(100), *b = allocate_victim(100), *c = allocate_victim(100);
    announce(a);
    free(b);
    free(a);
    free(c); /* the FIFO: b, a, c */
    theirs[0] = malloc(200);
    theirs[1] = malloc(200);
    pthread_t t;
    if (pthread_create(&t, NULL, free_theirs, NULL) != 0)
        return 2;
    pthread_join(t, NULL);
    /* a's header (48 bytes in the default layout) ends with its link. */
    char **link_of_a = (char **)(a - 16);
    if (strcmp(loop, "magic") == 0)
        *(uint64_t *)(a - 48) = 0;
    else
        *link_of_a = strcmp(loop, "self") == 0   ? a - 48
                     : strcmp(loop, "back") == 0 ? b - 48
                                                 : theirs[0] - 48;
    if (strcmp(how, "verify") == 0)
        printf("verify found %zu\n", ebb_debug_verify());
    else
        malloc_trim(0);
    /* Blocks tagged by their index: one handed out twice shows as a tag
     * changed under its owner. */
    enum { N = 2000 };
    static char *live[N];
    int clobbered = 0;
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < N; i++) {
            live[i] = malloc(100);
            memset(live[i], i & 0xff, 100);
        }
        for (int i = 0; i < N; i++) {
            for (int k = 0; k < 100; k++)
                if ((unsigned char)live[i][k] != (i & 0xff)) {
                    clobbered++;
                    break;
                }
            free(live[i]);
        }
    }
    malloc_trim(0);
    size_t problems = ebb_debug_verify();
    struct ebb_stats st = {.version = EBB_STATS_VERSION};
    ebb_stats_get(&st);
    printf("clobbered=%d verify=%zu quarantine=%llu\n", clobbered, problems,
           (unsigned long long)st.debug_quarantine_bytes);
    /* After a trim the quarantine holds nothing (a wrapped count read 2^64 - 192). */
    return clobbered == 0 && problems == 0 && st.debug_quarantine_bytes == 0 ? survived() : 1;
}
