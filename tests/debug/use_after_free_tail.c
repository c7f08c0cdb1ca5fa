/* A write after free past the requested size, into the block's slack (the
 * canary's bytes while it was live): found when it leaves the quarantine, as a
 * write after free (the canary was intact at free). */
#include "fault.h"

int main(void)
{
    char *p = allocate_victim(10);
    announce(p);
    free(p);
    ((volatile char *)p)[12] = 1;
    for (int i = 0; i < 1000; i++) /* push it out of the quarantine */
        free(malloc(64));
    return survived();
}
