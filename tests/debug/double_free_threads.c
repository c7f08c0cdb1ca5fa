/* Four threads each free 20 blocks twice (run with EBB_DEBUG_ON_ERROR=
 * continue). A report waits for the report lock while others are printed,
 * and meanwhile the block may leave the quarantine, be reused, or its
 * segment be unmapped: reports are made from a copy of the header taken at
 * once (src/debug.c, report_unheld). Reading it in place crashed. */
#include <pthread.h>

#include "fault.h"

#define THREADS 4
#define ROUNDS 20

static void *free_twice(void *unused)
{
    (void)unused;
    for (int i = 0; i < ROUNDS; i++) {
        char *p = allocate_victim(64 + (size_t)i);
        free(p);
        free(p);
    }
    return NULL;
}

int main(void)
{
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], NULL, free_twice, NULL) != 0)
            return 2;
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    printf("frees=%d\n", THREADS * ROUNDS);
    return survived();
}
