/* exit() from a thread whose stack the program carved from a mapping that
 * also holds other data below it: the leak report leaves out the dead part
 * of the stack it runs on, below its stack pointer, and used to leave out
 * the whole mapping below it. Here the only pointers to two blocks lie in
 * the mapping's first page, the thread's stack is its upper half, and a
 * third block is lost. Expected: two still reachable, one lost. */
#include "fault.h"

#include <pthread.h>
#include <sys/mman.h>

#define MAPPING_BYTES ((size_t)1 << 20)

static char **holder; /* the mapping's first page */

__attribute__((noinline)) static void *allocate_reached_via_mapping(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

/* Apart from main, so that no copy of the two pointers stays in its frame. */
__attribute__((noinline)) static void fill_holder(void)
{
    holder[0] = allocate_reached_via_mapping(100);
    holder[1] = allocate_reached_via_mapping(200);
    __asm__ volatile("" ::: "memory");
}

static void *leave(void *arg)
{
    (void)arg;
    printf("survived\n");
    fflush(stdout);
    exit(0);
}

int main(void)
{
    char *m = mmap(NULL, MAPPING_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        printf("no carved stack (mmap)\n");
        return 2;
    }
    holder = (char **)m;
    fill_holder();
    char *lost = allocate_victim(300);
    announce(lost);
    lost = NULL;
    scrub_stack();
    pthread_attr_t attr;
    pthread_t t;
    if (pthread_attr_init(&attr) != 0 ||
        pthread_attr_setstack(&attr, m + MAPPING_BYTES / 2, MAPPING_BYTES / 2) != 0 ||
        pthread_create(&t, &attr, leave, NULL) != 0) {
        printf("no carved stack (pthread)\n");
        return 2;
    }
    pthread_join(t, NULL);
    return 3; /* not reached: the thread exits the process */
}
