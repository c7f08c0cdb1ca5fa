/* A write into a freed block's free-list link that sends it back to a block
 * the list already passed, found by ebb_debug_verify() as a cycle: the report
 * names the block whose link closes the cycle, not only its page (review
 * finding, suspicion 3: "the page's free list has a cycle", nothing more).
 * The cycle (y -> z -> y) starts after a block x, so the block to name is
 * neither the list's first nor the first one met twice. */
#include "ebb.h"
#include "fault.h"

/* The free-list link in the first word of the block of user pointer u (ebb's
 * debug header is the 48 bytes below u). */
static volatile uintptr_t *link_of(char *u)
{
    return (volatile uintptr_t *)(u - 48);
}

int main(void)
{
    enum { N = 8 };
    char *keep = allocate_victim(2500); /* keeps the page in use through the trim */
    char *b[N], *between[N];
    for (int i = 0; i < N; i++) {
        b[i] = allocate_victim(2500);
        /* A live block after each: no OS page holds only freed blocks, so
         * the trim leaves them all on the list (it gives such pages back,
         * dropping their blocks from it: src/page.c, page_trim). */
        between[i] = allocate_victim(2500);
    }
    for (int i = 0; i < N; i++)
        free(b[i]);
    malloc_trim(0); /* the quarantine releases them onto their page's free list */
    /* Three of them linked in a row, x -> y -> z. */
    for (int x = 0; x < N; x++)
        for (int y = 0; y < N; y++)
            for (int z = 0; z < N; z++)
                if (*link_of(b[x]) == (uintptr_t)(b[y] - 48) &&
                    *link_of(b[y]) == (uintptr_t)(b[z] - 48)) {
                    announce(b[z]);
                    uintptr_t was = *link_of(b[z]);
                    *link_of(b[z]) = (uintptr_t)(b[y] - 48);
                    size_t problems = ebb_debug_verify();
                    printf("problems=%zu\n", problems);
                    *link_of(b[z]) = was; /* repaired: nothing later meets the cycle */
                    free(keep);
                    for (int i = 0; i < N; i++)
                        free(between[i]);
                    return survived();
                }
    printf("no three freed blocks linked in a row\n");
    return 3;
}
