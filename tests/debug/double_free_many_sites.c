/* 300 call sites, each freeing a block twice, under
 * EBB_DEBUG_ON_ERROR=continue: their frames are more than the 512 the
 * symbolizer keeps (src/trace.c, sym_resolve), so the cache wraps while the
 * reports go on. A frame found in the cache could be overwritten by a new
 * frame of the same trace before it was printed, and was printed without its
 * name (review finding). Every frame in this program must be named. */
#include "fault.h"

#define SITE(n)                                                                \
    __attribute__((noinline)) static void site##n(void)                        \
    {                                                                          \
        char *volatile p = malloc(16 + (n % 7) * 16);                          \
        free(p);                                                               \
        free(p);                                                               \
        __asm__ volatile("" ::: "memory");                                     \
    }
#define SITES10(d)                                                             \
    SITE(d##0) SITE(d##1) SITE(d##2) SITE(d##3) SITE(d##4)                     \
    SITE(d##5) SITE(d##6) SITE(d##7) SITE(d##8) SITE(d##9)
#define CALLS10(d)                                                             \
    site##d##0, site##d##1, site##d##2, site##d##3, site##d##4,               \
    site##d##5, site##d##6, site##d##7, site##d##8, site##d##9,
#define SITES100(h)                                                            \
    SITES10(h##0) SITES10(h##1) SITES10(h##2) SITES10(h##3) SITES10(h##4)      \
    SITES10(h##5) SITES10(h##6) SITES10(h##7) SITES10(h##8) SITES10(h##9)
#define CALLS100(h)                                                            \
    CALLS10(h##0) CALLS10(h##1) CALLS10(h##2) CALLS10(h##3) CALLS10(h##4)      \
    CALLS10(h##5) CALLS10(h##6) CALLS10(h##7) CALLS10(h##8) CALLS10(h##9)

SITES100(1)
SITES100(2)
SITES100(3)

static void (*const sites[])(void) = {CALLS100(1) CALLS100(2) CALLS100(3)};

int main(void)
{
    for (size_t i = 0; i < sizeof sites / sizeof sites[0]; i++)
        sites[i]();
    return survived();
}
