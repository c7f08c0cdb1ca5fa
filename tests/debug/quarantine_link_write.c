/* A write past the end of a live block into the header of its neighbour, a
 * freed block waiting in the quarantine: the quarantine's own link (in that
 * header) is changed. Reported when the quarantine drains, not a crash
 * (review finding: the drain followed the link and crashed). */
#include <malloc.h>

#include "fault.h"

int main(void)
{
    enum { N = 64 };
    char *b[N], *w = NULL, *x = NULL;
    for (int i = 0; i < N; i++)
        b[i] = allocate_victim(100); /* 192-byte underlying blocks */
    if (!find_neighbours(b, N, 192, &w, &x))
        return 1;
    announce(x);
    free(x);           /* x waits in the quarantine */
    free(malloc(200)); /* and a block after it */
    /* 100 bytes of w, then 84 more: over w's canary and x's header. */
    memset(w, 'A', 100 + 84);
    malloc_trim(0); /* the quarantine drains */
    return survived();
}
