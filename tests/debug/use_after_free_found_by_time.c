/* A write into a freed block, found when its time in the quarantine is over
 * (EBB_DEBUG_QUARANTINE_IDLE) by a purge pass. The driver sets
 * EBB_BACKGROUND=0, so the pass runs inline at the entry of a later malloc,
 * and the report's trace of "this call" must start at that malloc's caller,
 * not in ebb's own pass (review finding: it listed seven of ebb's frames). */
#include <time.h>

#include "fault.h"

int main(void)
{
    char *p = allocate_victim(100);
    announce(p);
    free(p);
    ((volatile char *)p)[10] = 'X';
    for (int i = 0; i < 60; i++) { /* about 3 s; the wait is 1 s */
        nanosleep(&(struct timespec){.tv_nsec = 50000000}, NULL);
        free(malloc(200000));
    }
    return survived();
}
