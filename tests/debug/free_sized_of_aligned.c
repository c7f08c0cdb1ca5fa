/* free_sized of a block aligned_alloc made with more than malloc's alignment:
 * C23 frees such a block only with free_aligned_sized, so the call is a
 * misuse (it was accepted before: review finding). With continue the bad
 * free is ignored: the block stays the program's. */
#include "fault.h"

void free_sized(void *p, size_t size);

int main(void)
{
    char *p = allocate_victim_aligned(64, 128);
    memset(p, 'k', 128);
    announce(p);
    free_sized(p, 128);
    if (still_ours_after_bad_free(p, 128, 64))
        return 3;
    return survived();
}
