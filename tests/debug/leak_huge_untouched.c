/* A reachable block of up to 64 GiB, written on two pages only, holds the
 * only pointers to two small blocks; a third small block is lost. The leak
 * report scans a block this big page by page as /proc/self/pagemap shows
 * them used: reading all of it would take a second a GiB (8 GiB: 8 s).
 * Under Linux's default overcommit policy ebb refuses a block bigger than
 * RAM and swap, as the kernel and glibc do (since stop 49 also one aligned
 * above its 4 MiB segments, which this test used to rely on): the block is
 * 64 GiB or, where that does not fit, RAM and swap less 1 GiB. */
#include "fault.h"

#include <sys/sysinfo.h>

char **huge_block;

__attribute__((noinline)) static void *allocate_reached_via_huge(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

static size_t huge_bytes(void)
{
    struct sysinfo si;
    size_t most = (size_t)64 << 30;
    if (sysinfo(&si) != 0)
        return most;
    size_t fits = ((size_t)si.totalram + si.totalswap) * (si.mem_unit ? si.mem_unit : 1);
    fits = fits > ((size_t)2 << 30) ? (fits - ((size_t)1 << 30)) & ~(((size_t)1 << 30) - 1) : fits / 2;
    return fits < most ? fits : most;
}

int main(void)
{
    size_t bytes = huge_bytes();
    huge_block = aligned_alloc((size_t)8 << 20, bytes);
    if (huge_block == NULL) {
        printf("no huge block (%zu bytes)\n", bytes);
        return 2;
    }
    printf("block_bytes=%zu\n", bytes);
    huge_block[0] = allocate_reached_via_huge(100);
    huge_block[(bytes / 2) / sizeof(char *)] = allocate_reached_via_huge(200);
    char *lost = allocate_victim(300);
    announce(lost);
    lost = NULL;
    scrub_stack();
    return survived();
}
