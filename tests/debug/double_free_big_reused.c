/* A double free of a block bigger than the whole quarantine after a block of
 * the same size was allocated: the huge cache gave the new block the freed
 * one's address, and the second free of the old pointer freed the new block,
 * unreported (review finding). Now the new block moves to an address of its
 * own, and the second free is reported as a double free of the old block,
 * with its traces. With continue, the new block is intact and the program's
 * own. 20 MiB: bigger than the default quarantine of 16 MiB. */
#include "fault.h"

void *allocate_other(size_t n);
__attribute__((noinline)) void *allocate_other(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

int main(void)
{
    size_t n = (size_t)20 << 20;
    char *p = allocate_victim(n);
    announce(p);
    memset(p, 1, 4096);
    free(p);
    char *q = allocate_other(n);
    if (q == NULL)
        return 4;
    memset(q, 'q', n);
    printf("moved=%d\n", q != p);
    fflush(stdout);
    free(p); /* the double free */
    for (size_t i = 0; i < n; i += 4096)
        if (q[i] != 'q')
            return 5; /* the new block was freed or changed */
    free(q);
    return survived();
}
