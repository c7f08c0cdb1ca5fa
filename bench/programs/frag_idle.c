/*
 * bench/programs/frag_idle.c — free blocks under live ones, at idle.
 *
 * Allocates COUNT blocks of SIZE bytes and writes them, frees all but every
 * 50th, then sleeps IDLE_MS and prints the anonymous RSS (KiB, from
 * /proc/self/smaps_rollup) at each step. No allocator gives such memory back
 * at idle but ebb (docs/memory-return.md, stop 36); this shows it for any
 * allocator preloaded:
 *
 *   gcc -O2 -fno-builtin-malloc -o /tmp/frag_idle bench/programs/frag_idle.c
 *   LD_PRELOAD=build/libebb.so /tmp/frag_idle 1000 1000
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COUNT 300000
#define KEEP_EVERY 50

static long anon_kib(void)
{
    char buf[8192];
    int fd = open("/proc/self/smaps_rollup", O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    const char *p = strstr(buf, "\nAnonymous:");
    return p ? atol(p + strlen("\nAnonymous:")) : -1;
}

int main(int argc, char **argv)
{
    size_t size = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000;
    long idle_ms = argc > 2 ? atol(argv[2]) : 1000;
    void **blocks = malloc(COUNT * sizeof *blocks);
    if (blocks == NULL || size == 0)
        return 1;
    long start = anon_kib();
    for (size_t i = 0; i < COUNT; i++) {
        blocks[i] = malloc(size);
        if (blocks[i] == NULL)
            return 1;
        memset(blocks[i], 1, size);
    }
    long full = anon_kib();
    for (size_t i = 0; i < COUNT; i++) {
        if (i % KEEP_EVERY != 0) {
            free(blocks[i]);
            blocks[i] = NULL;
        }
    }
    long freed = anon_kib();
    usleep((useconds_t)idle_ms * 1000);
    long idle = anon_kib();
    printf("%zu B: start %ld, written %ld, after the frees %ld, after %ld ms idle %ld KiB\n",
           size, start, full, freed, idle_ms, idle);
    return 0;
}
