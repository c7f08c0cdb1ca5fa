/* free_aligned_sized with the wrong alignment. */
#include "fault.h"

void free_aligned_sized(void *p, size_t alignment, size_t size);

__attribute__((noinline)) static char *allocate_victim_aligned(void)
{
    char *p = aligned_alloc(64, 128);
    __asm__ volatile("" ::: "memory");
    return p;
}

int main(void)
{
    char *p = allocate_victim_aligned();
    announce(p);
    free_aligned_sized(p, 32, 128);
    return survived();
}
