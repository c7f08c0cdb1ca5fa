/* reuse_link_write.c, but the program then sleeps and never mallocs that
 * size again: the background thread's pass, which purges the reuse cache
 * one purge delay on, finds the changed links there; the next call of the
 * program reports it. */
#include <unistd.h>

#include "fault.h"

int main(void)
{
    enum { PUSHERS = 6 };
    char *p = allocate_victim(20000);
    char *push[PUSHERS];
    for (int i = 0; i < PUSHERS; i++)
        push[i] = malloc(40000);
    announce(p);
    free(p);
    for (int i = 0; i < PUSHERS; i++)
        free(push[i]);
    memset(p, 'A', 24);
    usleep(1000 * 1000); /* 20 purge delays */
    free(malloc(16));
    return survived();
}
