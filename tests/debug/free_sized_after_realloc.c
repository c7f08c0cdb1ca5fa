/* free_sized of a block realloc returned is right in C23 whatever the block
 * realloc was given: realloc of an aligned_alloc(64) block, moved or in
 * place, then free_sized with the new size was reported as a free with the
 * wrong alignment (review finding). No fault here: exit 0, nothing on
 * stderr. The last free_sized, of an aligned_alloc block never reallocated,
 * is still the misuse free_sized_of_aligned.c commits: only with
 * FAULT=1. */
#include "fault.h"

void free_sized(void *p, size_t size);

int main(void)
{
    char *a = aligned_alloc(64, 128);
    a = realloc(a, 4000); /* moves */
    memset(a, 1, 4000);
    free_sized(a, 4000);
    char *b = aligned_alloc(64, 128);
    b = realloc(b, 100); /* stays */
    memset(b, 2, 100);
    free_sized(b, 100);
    char *c = aligned_alloc(4096, 300000);
    c = realloc(c, 600000);
    memset(c, 3, 600000);
    free_sized(c, 600000);
    if (getenv("FAULT")) {
        char *d = allocate_victim_aligned(64, 128);
        announce(d);
        free_sized(d, 128);
    }
    return survived();
}
