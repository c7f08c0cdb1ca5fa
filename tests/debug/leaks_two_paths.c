/* Two call paths into the same allocating function, at the same stack depth
 * (so every return address but one sits at the same stack address in both):
 * the leak report must tell them apart, 10 lost blocks of 50 bytes each,
 * alternating, so debug mode's capture cache is exercised on both paths. */
#include "fault.h"

__attribute__((noinline)) static void leaf(int i)
{
    volatile uintptr_t hidden = (uintptr_t)malloc(50) ^ 0x5555555555555555ull;
    (void)hidden;
    __asm__ volatile("" ::"r"(i) : "memory");
}

__attribute__((noinline)) static void path_a(int i)
{
    leaf(i);
    __asm__ volatile("" ::: "memory"); /* not a tail call */
}

__attribute__((noinline)) static void path_b(int i)
{
    leaf(i);
    __asm__ volatile("" ::: "memory");
}

int main(void)
{
    for (int i = 0; i < 10; i++) {
        path_a(i);
        path_b(i);
    }
    scrub_stack();
    return 0;
}
