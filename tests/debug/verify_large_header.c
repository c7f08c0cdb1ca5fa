/* A write into the header of a large block (300 KiB) of this thread's heap
 * that changes its magic word (as an overflow of the block below would),
 * found by ebb_debug_verify() before the block is freed. verify skipped such
 * blocks, whose magic no longer said "live" (review finding); the header is
 * 48 bytes before the block, the magic its first word. The byte is put back
 * after the call, so the block is sound again for the rest of the run. */
#include "ebb.h"
#include "fault.h"

static char *keep;

int main(void)
{
    keep = allocate_victim(300u << 10);
    announce(keep);
    volatile char *magic = keep - 48;
    char was = *magic;
    *magic = (char)(was ^ 0x5a);
    size_t problems = ebb_debug_verify();
    *magic = was;
    printf("problems=%zu\n", problems);
    return survived();
}
