/* A double free in a thread whose stack is the smallest POSIX allows
 * (PTHREAD_STACK_MIN, 16 KiB here), run with EBB_DEBUG_ON_ERROR=continue.
 * The report, with its symbolized traces, must fit: it needed more than
 * 32 KiB of stack (its symbolizer's buffers) and the thread crashed. */
#include <limits.h>
#include <pthread.h>

#include "fault.h"

static void *free_twice(void *unused)
{
    (void)unused;
    char *p = allocate_victim(32);
    announce(p);
    free(p);
    free(p);
    return NULL;
}

int main(void)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (pthread_attr_setstacksize(&attr, PTHREAD_STACK_MIN) != 0)
        return 2;
    pthread_t t;
    if (pthread_create(&t, &attr, free_twice, NULL) != 0)
        return 3;
    pthread_join(t, NULL);
    return survived();
}
