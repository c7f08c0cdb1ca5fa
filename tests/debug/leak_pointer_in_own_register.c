/* quick_exit while the exiting thread itself holds the only pointers to two
 * blocks in callee-saved registers: the leak report, an at_quick_exit
 * handler, runs on this thread, and the C library's path to it saves none
 * of those registers (glibc 2.36's __run_exit_handlers saves x19-x27 on
 * aarch64, not x28 nor d8-d15). The report spills them onto its own stack
 * and scans from there up. Expected: two still reachable, one (300 bytes)
 * lost.
 *
 * Found when the aarch64 build first ran (under qemu-user): the report took
 * its stack's lowest live address from one of its locals, and GCC for
 * aarch64 lays the callee-saved spill area below the locals (x86-64 pushes
 * it above them), so the spilled registers were not scanned there: the
 * block held in d15 was listed lost (x28 had been saved on the way). On
 * x86-64 the pointers are held in r14 and r15. */
#include "fault.h"

__attribute__((noinline)) static void *allocate_reached_via_own_register(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

static uintptr_t held[2]; /* a moment only: moved to registers before quick_exit */

/* Load the two pointers into callee-saved registers, clear the copies in
 * memory, and call quick_exit(0) from the asm, so that no code of this
 * program runs between (it could spill them). */
__attribute__((noinline, noreturn)) static void quick_exit_holding(void)
{
#if defined(__x86_64__)
    __asm__ volatile("mov (%0), %%r15\n\t"
                     "movq $0, (%0)\n\t"
                     "mov 8(%0), %%r14\n\t"
                     "movq $0, 8(%0)\n\t"
                     "and $-16, %%rsp\n\t" /* the ABI's alignment at a call */
                     "xor %%edi, %%edi\n\t"
                     "call quick_exit@PLT"
                     :
                     : "r"(held)
                     : "rdi", "r14", "r15", "memory");
#elif defined(__aarch64__)
    __asm__ volatile("ldr x28, [%0]\n\t"
                     "str xzr, [%0]\n\t"
                     "ldr d15, [%0, #8]\n\t" /* the low 64 bits of v15: callee-saved */
                     "str xzr, [%0, #8]\n\t"
                     "mov x0, #0\n\t"
                     "bl quick_exit"
                     :
                     : "r"(held)
                     : "x0", "x28", "v15", "memory");
#endif
    __builtin_unreachable();
}

int main(void)
{
#if !defined(__x86_64__) && !defined(__aarch64__)
    printf("no register test on this architecture\n");
    return 2;
#endif
    char *lost = allocate_victim(300);
    announce(lost);
    lost = NULL;
    held[0] = (uintptr_t)allocate_reached_via_own_register(100);
    held[1] = (uintptr_t)allocate_reached_via_own_register(200);
    scrub_stack(); /* stale copies from inside malloc and printf */
    quick_exit_holding();
}
