/* free_aligned_sized with the wrong alignment. With continue the bad free is
 * ignored: the block stays the program's (review finding: it was freed). */
#include "fault.h"

void free_aligned_sized(void *p, size_t alignment, size_t size);

int main(void)
{
    char *p = allocate_victim_aligned(64, 128);
    memset(p, 'k', 128);
    announce(p);
    free_aligned_sized(p, 32, 128);
    if (still_ours_after_bad_free(p, 128, 64))
        return 3;
    return survived();
}
