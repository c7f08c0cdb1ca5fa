/* free_aligned_sized with the wrong alignment. */
#include "fault.h"

void free_aligned_sized(void *p, size_t alignment, size_t size);

int main(void)
{
    char *p = allocate_victim_aligned(64, 128);
    announce(p);
    free_aligned_sized(p, 32, 128);
    return survived();
}
