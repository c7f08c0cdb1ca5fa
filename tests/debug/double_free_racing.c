/* Two threads free the same block at the same moment, 2000 times over (run
 * with EBB_DEBUG_ON_ERROR=continue). Exactly one of the two frees of each
 * block is reported as a double free, and the block goes into the quarantine
 * once: before frees claimed the block (src/debug.c, "Claiming a block"),
 * both could pass the pointer check and push it twice, and the allocator
 * later released it twice. The program then pushes 32 MiB of frees through
 * the quarantine, so that every one of those blocks leaves it, and checks
 * the heap. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "ebb.h"
#include "fault.h"

#define ROUNDS 2000

static char *_Atomic victim;
static atomic_int arrived, round_done;

static void wait_for(atomic_int *counter, int value)
{
    while (atomic_load(counter) < value)
        ;
}

/* Both threads: free the victim together, round after round. The main
 * thread (`renew`) gives the next round a new victim before it arrives. */
static void free_together(bool renew)
{
    for (int r = 1; r <= ROUNDS; r++) {
        atomic_fetch_add(&arrived, 1);
        wait_for(&arrived, 2 * r);
        free(atomic_load(&victim));
        atomic_fetch_add(&round_done, 1);
        wait_for(&round_done, 2 * r);
        if (renew)
            atomic_store(&victim, allocate_victim(64));
    }
}

static void *second_freer(void *unused)
{
    (void)unused;
    free_together(false);
    return NULL;
}

int main(void)
{
    pthread_t t;
    atomic_store(&victim, allocate_victim(64));
    if (pthread_create(&t, NULL, second_freer, NULL) != 0)
        return 2;
    free_together(true);
    pthread_join(t, NULL);
    for (int i = 0; i < 32 * 1024; i++) {
        char *p = malloc(1024);
        memset(p, i, 1024);
        free(p);
    }
    printf("rounds=%d\n", ROUNDS);
    printf("problems=%zu\n", ebb_debug_verify());
    free(atomic_load(&victim));
    return survived();
}
