/* free of a pointer into the middle of a block. */
#include "fault.h"

int main(void)
{
    char *p = allocate_victim(100);
    announce(p + 8);
    free(p + 8);
    free(p); /* the block itself is still sound */
    return survived();
}
