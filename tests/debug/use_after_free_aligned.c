/* A write after free at the start of a block aligned to 1 MiB. Its freed fill
 * was one run over the alignment padding (1 MiB less the header) and the user
 * bytes, over 1 MiB, so only the run's first and last 64 KiB were filled and
 * checked: the user bytes' start was neither (review finding). malloc_trim
 * empties the quarantine, checking every block. */
#include <malloc.h>

#include "fault.h"

int main(void)
{
    char *p = allocate_victim_aligned((size_t)1 << 20, 100 << 10);
    announce(p);
    free(p);
    ((volatile char *)p)[0] = 1;
    malloc_trim(0);
    return survived();
}
