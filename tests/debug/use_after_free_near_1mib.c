/* A write after free in the middle of a block of 1 MiB - 16 bytes. Its freed
 * fill was one run over the user bytes and the canary tail, over 1 MiB, so
 * only the run's first and last 64 KiB were filled and checked (review
 * finding). malloc_trim empties the quarantine, checking every block. */
#include <malloc.h>

#include "fault.h"

#define SIZE (((size_t)1 << 20) - 16)

int main(void)
{
    char *p = allocate_victim(SIZE);
    announce(p);
    free(p);
    ((volatile char *)p)[SIZE / 2] = 1;
    malloc_trim(0);
    return survived();
}
