/* Leaks for the leak report at exit: 3 blocks of 100 bytes lost from
 * allocate_lost, one of 200 bytes kept reachable from a global through
 * allocate_kept, and a reachable chain of 1000 blocks (found by marking, not
 * as roots) from allocate_chain. */
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

int main(void)
{
    allocate_lost();
    allocate_kept();
    allocate_chain();
    scrub_stack();
    printf("done\n");
    return 0;
}
