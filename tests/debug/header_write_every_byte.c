/* A write into each byte of a live block's header but its magic word (the
 * 40 bytes just below the magic's end), one block per byte, each found by
 * ebb_debug_verify() and by the block's free. Review finding: the checksum
 * left out `flags`, `free_trace` and the quarantine link, and writes into 13
 * of the 48 bytes went unreported. Run with EBB_DEBUG_ON_ERROR=continue: the
 * bad free is ignored, and the block, its byte put back, is freed for good.
 * Prints the offsets (below the user pointer) verify did not report. */
#include "ebb.h"
#include "fault.h"

#define HEADER 48
#define MAGIC 8

int main(void)
{
    size_t missed = 0;
    for (int off = 1; off <= HEADER - MAGIC; off++) {
        char *p = allocate_victim(100);
        ((volatile char *)p)[-off] ^= 0x5a;
        size_t found = ebb_debug_verify();
        if (found != 1) {
            printf("offset -%d: ebb_debug_verify found %zu problems, expected 1\n", off, found);
            missed++;
        }
        free(p); /* reported again; with continue, ignored */
        ((volatile char *)p)[-off] ^= 0x5a; /* put back: the block is sound again */
        free(p);
    }
    printf("missed=%zu\n", missed);
    return missed ? 3 : survived();
}
