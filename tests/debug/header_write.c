/* A write just before the block's start (into ebb's header): reported at the
 * next operation on the block, not a crash. */
#include "fault.h"

int main(void)
{
    char *p = allocate_victim(32);
    announce(p);
    ((volatile char *)p)[-1] = 0;
    free(p);
    return survived();
}
