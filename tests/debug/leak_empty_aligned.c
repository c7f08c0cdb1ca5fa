/* A block of size 0 aligned to 4 MiB is a huge block whose user pointer
 * starts a unit the segment map does not mark (its header lies one unit
 * below). The leak report's walk over the roots stopped at it and went on
 * stepping to the same place forever (review finding). It must finish, with
 * the block reachable from a global. */
#include "fault.h"

void *empty_block;

int main(void)
{
    if (posix_memalign(&empty_block, (size_t)4 << 20, 0) != 0) {
        printf("posix_memalign failed\n");
        return 2;
    }
    printf("block=%p\n", empty_block);
    return 0;
}
