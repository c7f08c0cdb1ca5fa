/* A write one past the size a realloc gave, when the block grew where it
 * was (EBB_DEBUG_REALLOC=fit, the default): the canary moved with the new
 * end, and free reports the write, with the realloc as the allocation. */
#include "fault.h"

__attribute__((noinline)) static char *grow_victim(char *p, size_t n)
{
    char *q = realloc(p, n);
    __asm__ volatile("" ::: "memory");
    return q;
}

int main(void)
{
    char *p = malloc(100);
    char *q = grow_victim(p, 104); /* 100 + header + canary fit one size class */
    if (q != p)
        return 3; /* moved: not the case under test */
    announce(q);
    q[104] = 'x';
    free(q);
    return survived();
}
