/* Two double frees, of a calloc'd block and of an aligned one: each report
 * says how the block was asked for (run with EBB_DEBUG_ON_ERROR=continue;
 * tests/test_debug.sh, "details"). */
#include "ebb.h"
#include "fault.h"

__attribute__((noinline)) static char *allocate_zeroed(size_t n)
{
    char *p = calloc(1, n);
    __asm__ volatile("" ::: "memory");
    return p;
}

int main(void)
{
    char *z = allocate_zeroed(40);
    announce(z);
    free(z);
    free(z);
    char *a = allocate_victim_aligned(256, 512);
    announce(a);
    free(a);
    free(a);
    return survived();
}
