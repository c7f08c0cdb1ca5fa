/* A write before the block that changes the header's size field and keeps
 * its magic word. Reported at the free, which is ignored with
 * EBB_DEBUG_ON_ERROR=continue; then the process must still exit: the leak
 * report at exit used to trust the changed size (about 4.7e18 bytes) and
 * scan the block page by page, for ever. The pointer stays in a global, so
 * the report sees the block. */
#include "fault.h"

char *kept_victim;

int main(void)
{
    kept_victim = allocate_victim(32);
    announce(kept_victim);
    memset(kept_victim - 40, 0x41, 8); /* the header's `size`: 40 bytes before the block */
    free(kept_victim);
    return survived();
}
