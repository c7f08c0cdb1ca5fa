/* A write into a freed block while it waits in the quarantine: found when it
 * leaves (the driver sets a small EBB_DEBUG_QUARANTINE). */
#include "fault.h"

int main(void)
{
    char *p = allocate_victim(64);
    announce(p);
    free(p);
    ((volatile char *)p)[5] = 1;
    for (int i = 0; i < 1000; i++) /* push it out of the quarantine */
        free(malloc(64));
    return survived();
}
