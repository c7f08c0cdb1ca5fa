/* free of a pointer 16 bytes before a 64-byte-aligned block's user pointer:
 * the block's header lies 48 bytes below it, live and intact, but the block's
 * user bytes start 64 bytes after its header, so this is an interior pointer
 * (free's look for a header just below the pointer must check the layout). */
#include "fault.h"

int main(void)
{
    char *p = allocate_victim_aligned(64, 192);
    announce(p - 16);
    free(p - 16);
    free(p); /* the block itself is still sound */
    return survived();
}
