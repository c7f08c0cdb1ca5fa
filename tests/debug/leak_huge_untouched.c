/* A reachable 64 GiB block, written on two pages only, holds the only
 * pointers to two small blocks; a third small block is lost. The leak report
 * scans a block this big page by page as /proc/self/pagemap shows them used:
 * reading all of it would take about a minute (8 GiB: 8 s).
 * Aligned to 8 MiB: under Linux's default overcommit policy ebb refuses a
 * block bigger than RAM and swap, as the kernel and glibc do, but not one
 * aligned to more than its 4 MiB segments (src/os.c), so that this sparse
 * block is served on a machine with less memory. */
#include "fault.h"

#define HUGE_BYTES ((size_t)64 << 30)

char **huge_block;

__attribute__((noinline)) static void *allocate_reached_via_huge(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

int main(void)
{
    huge_block = aligned_alloc((size_t)8 << 20, HUGE_BYTES);
    if (huge_block == NULL) {
        printf("no 64 GiB block\n");
        return 2;
    }
    huge_block[0] = allocate_reached_via_huge(100);
    huge_block[(HUGE_BYTES / 2) / sizeof(char *)] = allocate_reached_via_huge(200);
    char *lost = allocate_victim(300);
    announce(lost);
    lost = NULL;
    scrub_stack();
    return survived();
}
