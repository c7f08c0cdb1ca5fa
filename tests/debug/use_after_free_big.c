/* A write after free into the middle of a big block, whose inner pages the
 * quarantine gave back to the OS: found when it leaves the quarantine. */
#include "fault.h"

int main(void)
{
    char *p = allocate_victim(100000);
    announce(p);
    free(p);
    ((volatile char *)p)[50000] = 1;
    for (int i = 0; i < 1000; i++) /* push it out of the quarantine */
        free(malloc(64));
    return survived();
}
