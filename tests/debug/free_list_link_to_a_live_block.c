/* A freed block, out of the quarantine and on its page's free list, has its
 * free-list link (its first word, in the debug header's place) changed to
 * the start of a live neighbour. Review finding: the next malloc after the
 * block handed the live neighbour out a second time, and the report that
 * came one malloc later named the neighbour. Now the malloc that takes the
 * freed block reports it, its link cut; with EBB_DEBUG_ON_ERROR=continue no
 * later malloc returns the live block ("survived"). */
#include <malloc.h>

#include "fault.h"

int main(void)
{
    enum { N = 64 };
    char *b[N], *victim = NULL, *live = NULL;
    for (int i = 0; i < N; i++)
        b[i] = allocate_victim(100); /* 192-byte underlying blocks */
    if (!find_neighbours(b, N, 192, &victim, &live))
        return 1;
    memset(live, 'L', 100);
    announce(victim);
    free(victim);
    malloc_trim(0); /* out of the quarantine: on its page's free list */
    *(uintptr_t *)(victim - 48) = (uintptr_t)(live - 48);
    for (int i = 0; i < 200; i++) {
        char *x = malloc(100);
        if (x == live)
            return 3; /* the live block handed out twice */
    }
    return live[0] == 'L' && live[99] == 'L' ? survived() : 4;
}
