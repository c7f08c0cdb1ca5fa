/* free_sized with a size other than the one allocated (ALIGNED=1:
 * free_aligned_sized, whose report must name it). With continue the bad free
 * is ignored: the block stays the program's (review finding: it was freed,
 * and handed out again). */
#include "fault.h"

void free_sized(void *p, size_t size);
void free_aligned_sized(void *p, size_t alignment, size_t size);

int main(void)
{
    char *p = allocate_victim(100);
    memset(p, 'k', 100);
    announce(p);
    if (getenv("ALIGNED"))
        free_aligned_sized(p, 16, 99);
    else
        free_sized(p, 99);
    if (still_ours_after_bad_free(p, 100, 0))
        return 3;
    return survived();
}
