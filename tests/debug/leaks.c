/* Leaks for the leak report at exit: 3 blocks of 100 bytes lost from
 * allocate_lost, one of 200 bytes kept reachable from a global through
 * allocate_kept, and a reachable chain of 1000 blocks (found by marking, not
 * as roots) from allocate_chain. With a path argument, it also leaves a
 * line unflushed in a stream opened on that file (the exit code's _exit
 * must flush it as exit would). */
#include "fault.h"

void *volatile leaks_kept; /* volatile: the stores must stay */
void **volatile leaks_chain_head;

__attribute__((noinline)) static void allocate_lost(void)
{
    for (int i = 0; i < 3; i++) {
        volatile uintptr_t hidden = (uintptr_t)malloc(100) ^ 0x5555555555555555ull;
        (void)hidden;
    }
}

__attribute__((noinline)) static void allocate_kept(void)
{
    leaks_kept = malloc(200);
}

__attribute__((noinline)) static void allocate_chain(void)
{
    void **prev = NULL;
    for (int i = 0; i < 1000; i++) {
        void **node = malloc(64);
        node[0] = prev;
        prev = node;
    }
    leaks_chain_head = prev;
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        FILE *f = fopen(argv[1], "w");
        if (f == NULL) {
            perror(argv[1]);
            return 2;
        }
        fputs("buffered line\n", f); /* no flush, no close: exit's to do */
    }
    allocate_lost();
    allocate_kept();
    allocate_chain();
    scrub_stack();
    printf("done\n");
    return 0;
}
