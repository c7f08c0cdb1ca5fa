/* A big shared mapping (a 128 MiB memfd, untouched but for two pages) holds
 * the only pointers to two small blocks; a third small block is lost. The
 * leak report finds the shared pages in memory by mincore; where mincore is
 * refused (tests/sandbox_refuse.c), it read the whole mapping, and the
 * kernel filled every hole it read with a page of memory: 128 MiB here, 256
 * GiB for a mapping that big (a sparse memory file, shared buffers). It
 * must stay bounded, and a report that could not look everywhere must say
 * so.
 *
 * The blocks are allocated, and the report made, in a forked child; the
 * parent waits for it, then prints the bytes the memory file holds
 * ("shared_file_bytes=N", from its st_blocks) and exits with the child's
 * status. The 100-byte block's pointer is in a page the child wrote (in its
 * page tables); the 200-byte block's, in a page the child dropped from its
 * page tables (MADV_DONTNEED; its data stays in the file): only mincore, or
 * a whole read, sees that one. */
#include "fault.h"

#include <stdbool.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define SHARED_BYTES ((size_t)128 << 20)

__attribute__((noinline)) static void *allocate_reached_via_mapping(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

int main(void)
{
    int fd = memfd_create("leak_big_shared_root", 0);
    if (fd < 0 || ftruncate(fd, (off_t)SHARED_BYTES) != 0) {
        printf("no memory file\n");
        return 2;
    }
    char **shared = mmap(NULL, SHARED_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (shared == MAP_FAILED) {
        printf("no shared mapping\n");
        return 2;
    }
    fflush(stdout);
    pid_t child = fork();
    if (child < 0) {
        printf("no fork\n");
        return 2;
    }
    if (child == 0) {
        size_t mapped = SHARED_BYTES / 4 / sizeof(char *), dropped = SHARED_BYTES / 2 / sizeof(char *);
        shared[mapped] = allocate_reached_via_mapping(100);
        shared[dropped] = allocate_reached_via_mapping(200);
        madvise((char *)&shared[dropped], 4096, MADV_DONTNEED);
        if (shared[dropped] == NULL) {
            printf("the dropped page lost its data\n");
            return 2;
        }
        madvise((char *)&shared[dropped], 4096, MADV_DONTNEED);
        char *lost = allocate_victim(300);
        announce(lost);
        lost = NULL;
        scrub_stack();
        return survived(); /* the report runs at exit */
    }
    int status;
    if (waitpid(child, &status, 0) != child) {
        printf("no child to wait for\n");
        _exit(2);
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        printf("no stat of the memory file\n");
        _exit(2);
    }
    printf("shared_file_bytes=%lld\n", (long long)st.st_blocks * 512);
    fflush(stdout);
    /* No report of the parent's: the child's is the one checked. */
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}
