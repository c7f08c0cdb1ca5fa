/* A block bigger than the quarantine is freed (ebb remembers its pointer, to
 * report a second free of it as a double free), and the next block at that
 * address is lost. It must be reported lost: ebb's own record is not a root.
 * Run with EBB_DEBUG_QUARANTINE=1048576. The block is a run of slices (1.5
 * MiB), which the next request of its size takes back at once. */
#include "fault.h"

static int same_address;

__attribute__((noinline)) static void allocate_lost_behind_big_freed(void)
{
    const size_t big = (size_t)3 << 19;
    char *b = malloc(big);
    free(b);
    char *again = malloc(big); /* the same address, most likely */
    same_address = again == b;
    again[0] = 1;
}

int main(void)
{
    allocate_lost_behind_big_freed();
    scrub_stack();
    printf("same address: %s\n", same_address ? "yes" : "no");
    return 0;
}
