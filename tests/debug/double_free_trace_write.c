/* A write into a freed block's header, over the id of its free's stack
 * trace, then a second free: the double free is reported, and the trace id,
 * which now points into the middle of a stored trace, is not decoded into
 * frames that were never a trace (review finding: it was, from wherever it
 * pointed, and an id near the end of the registry's memory read past it). */
#include <stdint.h>

#include "fault.h"

int main(void)
{
    char *p = allocate_victim(24);
    announce(p);
    free(p);
    /* ebb's debug header, 48 bytes below p: the allocation trace's id at
     * byte 20, the free's at byte 24. */
    uint32_t alloc_id;
    memcpy(&alloc_id, p - 48 + 20, sizeof alloc_id);
    uint32_t bad = alloc_id + 4;
    memcpy(p - 48 + 24, &bad, sizeof bad);
    free(p);
    return survived();
}
