/* A double free of a huge block bigger than the whole quarantine, after a
 * block of the same size was allocated in between: the common "free, then
 * allocate the same buffer again" pattern. Review finding: the freed mapping
 * went to the huge cache, the new block got its address, and the second free
 * of the old pointer freed the new block, unreported. Now the old range
 * stays reserved while debug mode remembers the block: the new block lies
 * elsewhere, the second free is a double free with its traces, and the new
 * block is untouched ("survived" with EBB_DEBUG_ON_ERROR=continue). */
#include "fault.h"

int main(void)
{
    size_t n = (size_t)20 << 20;
    char *p = allocate_victim(n);
    announce(p);
    free(p);
    char *q = malloc(n);
    if (q == NULL || q == p)
        return 3; /* the old address handed out again */
    memset(q, 'Q', n);
    free(p);
    if (q[0] != 'Q' || q[n - 1] != 'Q')
        return 4;
    free(q);
    return survived();
}
