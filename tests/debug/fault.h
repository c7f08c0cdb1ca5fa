/*
 * fault.h — shared by the small misuse programs in this directory. Each one
 * commits one fault class against ebb in debug mode; tests/test_debug.sh runs
 * it and checks the outcome. A program prints "victim=<pointer>" before the
 * fault, so the driver can find the pointer in the report, and "survived"
 * if it gets past the fault (EBB_DEBUG_ON_ERROR=continue).
 *
 * Built without the compiler's misuse warnings and without its malloc
 * builtins (tests/tests.mk), so the faults are committed as written.
 */
#ifndef EBB_TEST_FAULT_H
#define EBB_TEST_FAULT_H

#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* Overwrite 16 KiB of dead stack below the caller, where stale copies of
 * pointers a leak test means to lose may linger. The asm keeps the stores:
 * without it, gcc -O1 saw a memset of a local never read again and removed
 * it, and then the call (a leak test read a stale copy as reachable). */
__attribute__((noinline, unused)) static void scrub_stack(void)
{
    char junk[16384];
    memset(junk, 0, sizeof junk);
    __asm__ volatile("" : : "r"(junk) : "memory");
}

/* The function reports must name as the allocation site. */
__attribute__((noinline, unused)) static char *allocate_victim(size_t n)
{
    char *p = malloc(n);
    __asm__ volatile("" ::: "memory"); /* a real call, not a tail call */
    return p;
}

/* The same, for a block of `n` bytes aligned to `alignment`. */
__attribute__((noinline, unused)) static char *allocate_victim_aligned(size_t alignment, size_t n)
{
    char *p = aligned_alloc(alignment, n);
    __asm__ volatile("" ::: "memory");
    return p;
}

/* Two of the `n` blocks at b, the second `stride` bytes above the first
 * (neighbours in one page); false if no two are. */
__attribute__((unused)) static int find_neighbours(char **b, int n, size_t stride, char **low,
                                                   char **high)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (b[j] == b[i] + stride) {
                *low = b[i];
                *high = b[j];
                return 1;
            }
    printf("no two neighbouring blocks found\n");
    return 0;
}

__attribute__((unused)) static void announce(const void *p)
{
    printf("victim=%p\n", p);
    fflush(stdout);
}

/* With EBB_DEBUG_ON_ERROR=continue a bad free is ignored: the block stays
 * the program's. Fill it, let the quarantine empty (malloc_trim) and take
 * many blocks of its size: none may be it, and its bytes must be as written.
 * 0 if so; else says what happened. */
__attribute__((unused)) static int still_ours_after_bad_free(char *p, size_t n, size_t alignment)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != 'k') {
            printf("the block changed after the ignored free (byte %zu)\n", i);
            return 3;
        }
    malloc_trim(0);
    for (int i = 0; i < 200; i++) {
        char *q = alignment ? aligned_alloc(alignment, n) : malloc(n);
        if (q == p) {
            printf("the block of the ignored free was handed out again\n");
            return 3;
        }
        memset(q, 'x', n);
    }
    for (size_t i = 0; i < n; i++)
        if (p[i] != 'k') {
            printf("the block changed after the ignored free (byte %zu)\n", i);
            return 3;
        }
    return 0;
}

/* Free p on a thread of its own, which then frees 20 MB more so that p
 * leaves that thread's quarantine: p ends on its page's list of remote
 * frees, its first word (48 bytes before p, the debug header's) that list's
 * link. 0 on success. */
static void *free_elsewhere_thread(void *p)
{
    free(p);
    for (int i = 0; i < 200; i++)
        free(malloc(100000));
    return NULL;
}

__attribute__((unused)) static int free_on_another_thread(void *p)
{
    pthread_t t;
    return pthread_create(&t, NULL, free_elsewhere_thread, p) == 0 && pthread_join(t, NULL) == 0
               ? 0
               : -1;
}

/* Leave the process `leave_free` file descriptors and no more, as a program
 * that leaks them does: its descriptor limit lowered to 64, every free
 * number below it taken by /dev/null. 0 on success; else says why. */
__attribute__((unused)) static int use_up_descriptors(int leave_free)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        printf("no descriptor limit to lower\n");
        return -1;
    }
    rl.rlim_cur = 64;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
        printf("the descriptor limit cannot be lowered to 64\n");
        return -1;
    }
    int taken[64], n = 0;
    for (int fd; n < 64 && (fd = open("/dev/null", O_RDONLY)) >= 0;)
        taken[n++] = fd;
    if (n < leave_free || open("/dev/null", O_RDONLY) >= 0) {
        printf("the descriptors could not be used up (%d taken)\n", n);
        return -1;
    }
    while (leave_free-- > 0)
        close(taken[--n]);
    return 0;
}

__attribute__((unused)) static int survived(void)
{
    printf("survived\n");
    return 0;
}

#endif
