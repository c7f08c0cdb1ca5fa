/* Two threads keep replacing the blocks of a global array while main
 * returns: every block is reachable (the array is in .bss) or being freed.
 * The leak report runs beside them; a block they free after the scan passed
 * it is not lost. At most the one block each thread holds in a register
 * alone at that moment can read as lost (registers of running threads are
 * not roots: docs/debug-mode.md). */
#include <pthread.h>
#include <unistd.h>

#include "fault.h"

#define SLOTS 4096
void *volatile slots[2][SLOTS];

static void *churn(void *arg)
{
    long t = (long)arg;
    for (unsigned long i = 0;; i++) {
        unsigned k = (unsigned)(i * 2654435761u) % SLOTS;
        void *old = slots[t][k];
        slots[t][k] = malloc(32 + i % 64);
        free(old);
    }
    return NULL;
}

int main(void)
{
    pthread_t th[2];
    for (long t = 0; t < 2; t++)
        pthread_create(&th[t], NULL, churn, (void *)t);
    usleep(300 * 1000);
    printf("exiting\n");
    return 0; /* exit while the two threads run */
}
