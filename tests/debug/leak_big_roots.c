/* Big mappings of the program's own are roots, read where their pages are
 * used: a shared anonymous mapping (PostgreSQL's shared buffers are one of
 * these) and a private one, untouched but for one page each, hold the only
 * pointers to two small blocks; a third small block is lost. Read whole, the
 * private one would take hours, and the kernel would fill the shared one's
 * holes with page cache. The shared page is dropped from this process's page
 * tables (MADV_DONTNEED; its data stays in memory): still a root. The private
 * mapping's used pages are found in the page tables by PAGEMAP_SCAN (Linux
 * 6.7): 64 TiB here, and 256 GiB shared (mincore reads a byte a page for
 * it). Without PAGEMAP_SCAN, the report reads
 * /proc/self/pagemap, a word for every page: 16 and 4 GiB then.
 * "leak_big_roots small": 1 MiB each (still above the report's 256 KiB
 * threshold), for a run where mincore is refused (tests/sandbox_refuse.c)
 * and the shared one is read whole; "small descriptors=1": one file
 * descriptor left at exit (use_up_descriptors), which /proc/self/maps takes:
 * /proc/self/pagemap cannot be opened, and the private one is read whole. */
#include "fault.h"

#include <fcntl.h>
#include <stdbool.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

__attribute__((noinline)) static void *allocate_reached_via_mapping(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

static char **map(size_t bytes, int kind)
{
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, kind | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return m == MAP_FAILED ? NULL : m;
}

/* Whether PAGEMAP_SCAN answers (struct pm_scan_arg of linux/fs.h: twelve
 * 64-bit fields, the first its size, then flags, start and end). */
static bool kernel_has_pagemap_scan(void)
{
    static char page[4096] __attribute__((aligned(4096)));
    uint64_t arg[12] = {sizeof arg, 0, (uint64_t)(uintptr_t)page, (uint64_t)(uintptr_t)page + sizeof page};
    int fd = open("/proc/self/pagemap", O_RDONLY);
    bool ok = fd >= 0 && ioctl(fd, _IOWR('f', 16, uint64_t[12]), arg) >= 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

int main(int argc, char **argv)
{
    bool fast = kernel_has_pagemap_scan();
    size_t shared_bytes = fast ? (size_t)256 << 30 : (size_t)4 << 30;
    size_t private_bytes = fast ? (size_t)64 << 40 : (size_t)16 << 30;
    if (argc > 1 && strcmp(argv[1], "small") == 0)
        shared_bytes = private_bytes = (size_t)1 << 20;
    printf("pagemap_scan=%d\n", fast);
    char **shared = map(shared_bytes, MAP_SHARED);
    char **private = map(private_bytes, MAP_PRIVATE);
    if (shared == NULL || private == NULL) {
        printf("no big mappings\n");
        return 2;
    }
    shared[(shared_bytes / 2) / sizeof(char *)] = allocate_reached_via_mapping(100);
    /* This process maps that page no more; the data stays (in the page
     * cache), and so does the pointer. */
    madvise((char *)shared + shared_bytes / 2, 4096, MADV_DONTNEED);
    if (shared[(shared_bytes / 2) / sizeof(char *)] == NULL) {
        printf("no big mappings (the shared page lost its data)\n");
        return 2;
    }
    madvise((char *)shared + shared_bytes / 2, 4096, MADV_DONTNEED);
    private[(private_bytes / 2) / sizeof(char *)] = allocate_reached_via_mapping(200);
    char *lost = allocate_victim(300);
    announce(lost);
    lost = NULL;
    scrub_stack();
    if (argc > 2 && strncmp(argv[2], "descriptors=", 12) == 0 &&
        use_up_descriptors(atoi(argv[2] + 12)) != 0)
        return 2;
    return survived();
}
