/* A one-byte write at every offset of a block's checked bytes, for sizes
 * around every width the fill checks compare at (byte, 8-byte word, 16-byte
 * vector, the 128-byte limit of the inline compare, memcmp beyond): past
 * the requested size into the canary (its first 16 bytes, which every block
 * has) while the block is live, and into the free fill (the user bytes and
 * those 16) while it waits in the quarantine. Each write is found twice: by
 * ebb_debug_verify(), which the program counts (then the byte is put back),
 * and by the path that checks it in a program's run, which the driver
 * counts in the reports: the canary's check at free, the fill's as the
 * block leaves the quarantine (malloc_trim). Run with
 * EBB_DEBUG_ON_ERROR=continue. Prints the writes verify missed, and
 * writes=N, the writes of each kind made. */
#include "ebb.h"
#include "fault.h"

static const size_t sizes[] = {1,  2,  7,  8,  9,  15, 16, 17,  24,  31,  32,  33,  47,
                               48, 49, 63, 64, 65, 80, 96, 112, 127, 128, 129, 130, 200};
#define CANARY_MIN 16

int main(void)
{
    size_t missed = 0, overflows = 0, after_free = 0;
    size_t count = sizeof sizes / sizeof sizes[0];
    for (size_t i = 0; i < count; i++) {
        size_t n = sizes[i];
        for (size_t off = n; off < n + CANARY_MIN; off++, overflows++) {
            volatile char *p = malloc(n);
            p[off] ^= 0x5a;
            if (ebb_debug_verify() != 1) {
                printf("size %zu: a write at offset %zu of a live block was missed\n", n, off);
                missed++;
            }
            free((void *)p); /* reported: the canary's check at free */
        }
        for (size_t off = 0; off < n + CANARY_MIN; off++, after_free++) {
            volatile char *p = malloc(n);
            free((void *)p);
            p[off] ^= 0x5a;
            if (ebb_debug_verify() != 1) {
                printf("size %zu: a write at offset %zu of a freed block was missed\n", n, off);
                missed++;
            }
            malloc_trim(0); /* reported: the fill's check as it leaves the quarantine */
        }
    }
    printf("missed=%zu\noverflows=%zu\nafter_free=%zu\n", missed, overflows, after_free);
    return missed ? 3 : survived();
}
