/* A worker lists the loaded modules again and again (dl_iterate_phdr), and
 * its callback allocates, holding the loader's lock; main returns. The
 * report's gate makes that allocation wait while the report runs, and the
 * report listed the RELRO regions by dl_iterate_phdr, waiting for the same
 * lock: exit hung for ever (review finding). Expected: the report, whole,
 * with the 300-byte victim lost, well within the time limit. */
#include "fault.h"

#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

static atomic_int rounds;

static int allocate_in_callback(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)info, (void)size, (void)arg;
    void *volatile p = malloc(32);
    free(p);
    return 0;
}

static void *walk_modules(void *arg)
{
    (void)arg;
    for (;;) {
        dl_iterate_phdr(allocate_in_callback, NULL);
        atomic_fetch_add(&rounds, 1);
    }
    return NULL;
}

int main(void)
{
    char *lost = allocate_victim(300);
    announce(lost);
    lost = NULL;
    scrub_stack();
    pthread_t t;
    if (pthread_create(&t, NULL, walk_modules, NULL) != 0)
        return 2;
    while (atomic_load(&rounds) < 100)
        usleep(1000);
    return 0;
}
