/* free of a pointer 5 MiB into a 20 MiB block: past the huge mapping's first
 * 4 MiB, which is all the segment map marks. It was reported as a pointer
 * ebb never returned (foreign), with no block and no allocation trace. */
#include "fault.h"

int main(void)
{
    char *p = allocate_victim((size_t)20 << 20);
    announce(p + ((size_t)5 << 20));
    free(p + ((size_t)5 << 20));
    free(p); /* the block itself is still sound */
    return survived();
}
