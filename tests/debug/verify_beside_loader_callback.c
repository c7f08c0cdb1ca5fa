/* ebb_debug_verify finds an overflow in a block while the main thread, inside
 * a dl_iterate_phdr callback (so holding the dynamic loader's lock), frees
 * that block. Run with EBB_DEBUG_ON_ERROR=continue. verify used to report
 * while it still held the block, and its report's stack capture waited for
 * the loader's lock, while the free waited for the block: both hung. The
 * callback waits until verify holds the block, reading the header's magic
 * word (white-box: src/debug.h, 48 bytes below the pointer). */
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "ebb.h"
#include "fault.h"

#define MAGIC_LIVE 0xEBBA110CA7EDB10Cull
#define ROUNDS 3

static atomic_int stop;
static char *volatile victim;

static void *verify_loop(void *unused)
{
    (void)unused;
    while (!atomic_load(&stop))
        ebb_debug_verify();
    return NULL;
}

static int free_in_callback(struct dl_phdr_info *info, size_t size, void *done)
{
    (void)info, (void)size;
    if (*(int *)done)
        return 0;
    *(int *)done = 1;
    char *p = victim;
    _Atomic uint64_t *magic = (_Atomic uint64_t *)(void *)(p - 48);
    uint64_t live = MAGIC_LIVE ^ (uintptr_t)(p - 48);
    for (int i = 0; i < 5000 && atomic_load(magic) == live; i++)
        usleep(100); /* until verify holds it (0.5 s at most) */
    free(p);
    return 0;
}

int main(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, verify_loop, NULL) != 0)
        return 2;
    for (int r = 0; r < ROUNDS; r++) {
        char *p = allocate_victim(24);
        p[24] = 'X'; /* past the requested size: verify finds it */
        victim = p;
        int done = 0;
        dl_iterate_phdr(free_in_callback, &done);
    }
    atomic_store(&stop, 1);
    pthread_join(t, NULL);
    return survived();
}
