/* A huge block's mapping starts a 4 MiB unit of the segment map; a 2.5 MiB
 * block's mapping ends short of the unit's end, and the kernel is free to
 * place the program's own mappings in the rest. The leak report skipped the
 * whole unit as ebb's, so the pointers in such a mapping were never read: the
 * two blocks kept only there were reported lost (review finding; the program
 * maps there with MAP_FIXED_NOREPLACE to make sure of it). They must be still
 * reachable, and the third block lost. */
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fault.h"

#define UNIT ((uintptr_t)4 << 20)
#define TAIL_BYTES ((size_t)64 << 10)

static char maps[1 << 16];

/* The end of the /proc/self/maps line holding `a`, or 0. */
static uintptr_t mapping_end(uintptr_t a)
{
    int fd = open("/proc/self/maps", O_RDONLY);
    if (fd < 0)
        return 0;
    size_t n = 0;
    ssize_t got;
    while (n < sizeof maps - 1 && (got = read(fd, maps + n, sizeof maps - 1 - n)) > 0)
        n += (size_t)got;
    close(fd);
    maps[n] = '\0';
    for (char *line = maps; *line;) {
        char *s;
        uintptr_t start = strtoul(line, &s, 16);
        uintptr_t end = strtoul(s + 1, &s, 16);
        if (a >= start && a < end)
            return end;
        line = strchr(line, '\n');
        if (line == NULL)
            break;
        line++;
    }
    return 0;
}

__attribute__((noinline)) static void *allocate_reached_via_tail(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

void *huge_block; /* reachable: a global */

int main(void)
{
    huge_block = malloc((size_t)5 << 19); /* 2.5 MiB: a huge block */
    if (huge_block == NULL) {
        printf("no tail mapping: malloc(2.5 MiB) failed\n");
        return 2;
    }
    uintptr_t unit_end = ((uintptr_t)huge_block & ~(UNIT - 1)) + UNIT;
    uintptr_t at = mapping_end((uintptr_t)huge_block);
    void **tail = MAP_FAILED;
    for (; at != 0 && at + TAIL_BYTES <= unit_end && tail == MAP_FAILED; at += TAIL_BYTES)
        tail = mmap((void *)at, TAIL_BYTES, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (tail == MAP_FAILED || (uintptr_t)tail >= unit_end) {
        printf("no tail mapping: no room between the huge mapping and its unit's end\n");
        return 2;
    }
    printf("huge=%p tail=%p unit_end=%#lx\n", huge_block, (void *)tail, (unsigned long)unit_end);
    tail[0] = allocate_reached_via_tail(100); /* the only pointers to these two */
    tail[TAIL_BYTES / sizeof(void *) - 1] = allocate_reached_via_tail(200);
    char *lost = allocate_victim(300);
    announce(lost);
    lost = NULL;
    scrub_stack();
    return survived();
}
