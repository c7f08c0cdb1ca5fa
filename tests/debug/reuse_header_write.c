/* A write past the end of a live block into the header of its neighbour,
 * a freed block that left the quarantine and waits in the reuse cache.
 * Reported at the next malloc of that size, not a crash. Run with
 * EBB_DEBUG_QUARANTINE=256K. */
#include "fault.h"

int main(void)
{
    enum { N = 8, PUSHERS = 6 };
    char *b[N], *w = NULL, *x = NULL;
    for (int i = 0; i < N; i++)
        b[i] = allocate_victim(20000); /* 20 KiB underlying blocks */
    if (!find_neighbours(b, N, 20480, &w, &x))
        return 1;
    char *push[PUSHERS];
    for (int i = 0; i < PUSHERS; i++)
        push[i] = malloc(40000);
    announce(x);
    free(x);
    for (int i = 0; i < PUSHERS; i++)
        free(push[i]); /* x leaves the quarantine for the reuse cache */
    /* w's block ends 20432 bytes past w; x's header starts there. */
    memset(w, 'A', 20432 + 16);
    char *again = malloc(20000);
    if (again == NULL)
        return 1;
    free(again);
    return survived();
}
