/* A process with so many mappings that /proc/self/maps is longer than the
 * leak report's buffer (1 MiB before, where the report stopped reading and
 * said nothing): 40,000 one-page mappings of alternating permissions, then a
 * page placed between them and the main stack, so that its line comes after
 * theirs, holding the only pointers to two small blocks. A third small block
 * is lost. The report must read the whole listing: two still reachable, one
 * lost. */
#include "fault.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGES 40000

__attribute__((noinline)) static void *allocate_reached_via_mapping(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

/* The length of /proc/self/maps now. */
static size_t maps_bytes(void)
{
    static char buf[1 << 16];
    size_t total = 0;
    int fd = open("/proc/self/maps", O_RDONLY);
    for (ssize_t r; fd >= 0 && (r = read(fd, buf, sizeof buf)) > 0;)
        total += (size_t)r;
    if (fd >= 0)
        close(fd);
    return total;
}

int main(void)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    char *many = mmap(NULL, PAGES * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (many == MAP_FAILED) {
        printf("no many mappings\n");
        return 2;
    }
    for (size_t i = 0; i < PAGES; i += 2)
        if (mprotect(many + i * page, page, PROT_READ) != 0) {
            printf("no many mappings (mprotect, vm.max_map_count?)\n");
            return 2;
        }
    /* 64 MiB below the main stack: above every mmap (which the kernel
     * places at least 128 MiB below the stack), so listed after them. */
    uintptr_t near_stack = ((uintptr_t)__builtin_frame_address(0) - ((uintptr_t)64 << 20)) &
                           ~(uintptr_t)(page - 1);
    char **root = mmap((void *)near_stack, page, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (root == MAP_FAILED || (uintptr_t)root != near_stack) {
        printf("no many mappings (no page below the stack)\n");
        return 2;
    }
    printf("maps_bytes=%zu\n", maps_bytes());
    root[0] = allocate_reached_via_mapping(100);
    root[1] = allocate_reached_via_mapping(200);
    char *lost = allocate_victim(300);
    announce(lost);
    lost = NULL;
    scrub_stack();
    return survived();
}
