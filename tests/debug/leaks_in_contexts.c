/* One call site loses blocks in three phases: 3 of 40 bytes with no context,
 * 2 under ebb_debug_set_context("loading"), 4 under "serving". The leak
 * report groups them by trace and context, and names the context: three
 * groups, each with its own count. */
#include "ebb.h"
#include "fault.h"

__attribute__((noinline)) static void lose(void)
{
    volatile uintptr_t hidden = (uintptr_t)malloc(40) ^ 0x5555555555555555ull;
    (void)hidden;
    __asm__ volatile("" ::: "memory");
}

/* One call site for every block: lose_some's loop, called from one place. */
__attribute__((noinline)) static void lose_some(int n)
{
    for (volatile int i = 0; i < n; i++)
        lose();
}

int main(void)
{
    static const char *const phases[] = {NULL, "loading", "serving"};
    static const int counts[] = {3, 2, 4};
    for (volatile int k = 0; k < 3; k++) { /* volatile: not unrolled into three sites */
        ebb_debug_set_context(phases[k]);
        lose_some(counts[k]);
    }
    ebb_debug_set_context(NULL);
    scrub_stack();
    return 0;
}
